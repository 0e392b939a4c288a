/* SPDX-License-Identifier: MIT */
/* Daemon text on sbx's terminal: strings sanitized into bounded buffers, and the cells of
 * the aligned tables (pools, token list). */
#include "cli/cli_impl.h"

#include <inttypes.h>
#include <stdio.h>

#include "cli/sbx_json.h"

const char *sbx_text(const msgpack_object *o, char *buf, size_t size)
{
    buf[0] = '\0';
    if (o && o->type == MSGPACK_OBJECT_STR) {
        (void)sbx_json_sanitize(o->via.str.ptr, o->via.str.size, buf, size);
    } else if (o && o->type == MSGPACK_OBJECT_BIN) {
        (void)sbx_json_sanitize(o->via.bin.ptr, o->via.bin.size, buf, size);
    }
    return buf;
}

size_t sbx_text_cell(const msgpack_object *o, char *buf, size_t size)
{
    if (!o || o->type == MSGPACK_OBJECT_NIL) {
        return (size_t)snprintf(buf, size, "-");
    }
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        return sbx_json_sanitize(o->via.str.ptr, o->via.str.size, buf, size);
    case MSGPACK_OBJECT_BIN:
        return sbx_json_sanitize(o->via.bin.ptr, o->via.bin.size, buf, size);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return (size_t)snprintf(buf, size, "%" PRIu64, o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return (size_t)snprintf(buf, size, "%" PRId64, o->via.i64);
    case MSGPACK_OBJECT_BOOLEAN:
        return (size_t)snprintf(buf, size, "%s", o->via.boolean ? "yes" : "no");
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return (size_t)snprintf(buf, size, "%g", o->via.f64);
    default:
        return (size_t)snprintf(buf, size, "?");
    }
}

void sbx_text_print_cell(const char *text, size_t width, size_t col_width, bool right, bool last)
{
    size_t pad = col_width > width ? col_width - width : 0;
    if (right) {
        (void)printf("%*s%s", (int)pad, "", text);
    } else {
        (void)fputs(text, stdout);
        if (!last) {
            (void)printf("%*s", (int)pad, "");
        }
    }
    (void)fputs(last ? "\n" : "  ", stdout);
}
