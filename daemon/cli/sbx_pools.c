/* SPDX-License-Identifier: MIT */
/* sbx pools: one aligned table row per pool, or with --json the daemon's answer as JSON. */
#include "cli/cli_impl.h"

#include <stdio.h>
#include <string.h>

#include "cli/sbx_json.h"
#include "lib/util.h"

static const struct {
    const char *key;
    const char *title;
    bool number;
} sbx_pool_cols[] = {
    {"name", "NAME", false},          {"warm", "WARM", true},        {"target", "TARGET", true},
    {"running", "RUNNING", true},     {"max", "MAX", true},          {"queued", "QUEUED", true},
    {"queue_max", "QUEUE_MAX", true}, {"created", "CREATED", true},  {"failed", "FAILED", true},
    {"image", "IMAGE", false},        {"seccomp", "SECCOMP", false},
};

/* The IMAGE cell says which root the pool really uses: "parsing", "parsing (verifying)",
 * "parsing (refused)", or "host (parsing not built)" when the host image stands in. */
static size_t sbx_image_cell(const msgpack_object *row, char *buf, size_t size)
{
    const msgpack_object *img = proto_map_get(row, "image");
    const msgpack_object *st = proto_map_get(row, "image_state");
    size_t w = sbx_text_cell(img, buf, size);
    if (!st || st->type != MSGPACK_OBJECT_STR || w + 1 >= size) {
        return w;
    }
    static const struct {
        const char *state;
        const char *before;
        const char *after;
    } forms[] = {
        {"not_built", "host (", " not built)"},
        {"verifying", "", " (verifying)"},
        {"refused", "", " (refused)"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(forms); i++) {
        if (proto_str_eq(st->via.str.ptr, st->via.str.size, forms[i].state)) {
            char name[64];
            (void)str_copy(name, buf, sizeof(name));
            int n = snprintf(buf, size, "%s%s%s", forms[i].before, name, forms[i].after);
            return n < 0 ? 0 : (size_t)n < size ? (size_t)n : size - 1;
        }
    }
    return w;
}

/* One cell of the pools table. */
static size_t sbx_pool_cell(const msgpack_object *row, const char *key, char *buf, size_t size)
{
    if (strcmp(key, "image") == 0) {
        return sbx_image_cell(row, buf, size);
    }
    return sbx_text_cell(proto_map_get(row, key), buf, size);
}

int sbx_pools_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    enum { NCOLS = ARRAY_SIZE(sbx_pool_cols) };
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    size_t widths[NCOLS];
    char cell[SBX_TEXT_MAX / 4];
    bool json = false;
    int status = sbx_no_args(argc, argv, &json);

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_rpc_request(ctx, &c, "pools", NULL, NULL, json, &m);
    sbx_conn_close(&c);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_ARRAY) {
        return sbx_fail(json, SBX_ERR_PROTOCOL, "unexpected answer to pools: not an array");
    }
    if (json) {
        /* Every key sbxd sends (docs/PROTOCOL.md, "pools"), not only the table's. */
        sbx_json_print_obj(stdout, m.result);
        return 0;
    }
    const msgpack_object_array *rows = &m.result->via.array;
    /* Two passes: widths first, then the table, so nothing is kept per cell. */
    for (size_t j = 0; j < NCOLS; j++) {
        widths[j] = strlen(sbx_pool_cols[j].title);
        for (uint32_t i = 0; i < rows->size; i++) {
            size_t w = sbx_pool_cell(&rows->ptr[i], sbx_pool_cols[j].key, cell, sizeof(cell));
            widths[j] = w > widths[j] ? w : widths[j];
        }
    }
    for (size_t j = 0; j < NCOLS; j++) {
        sbx_text_print_cell(sbx_pool_cols[j].title, strlen(sbx_pool_cols[j].title), widths[j],
                            sbx_pool_cols[j].number, j + 1 == NCOLS);
    }
    for (uint32_t i = 0; i < rows->size; i++) {
        for (size_t j = 0; j < NCOLS; j++) {
            size_t w = sbx_pool_cell(&rows->ptr[i], sbx_pool_cols[j].key, cell, sizeof(cell));
            sbx_text_print_cell(cell, w, widths[j], sbx_pool_cols[j].number, j + 1 == NCOLS);
        }
    }
    return 0;
}
