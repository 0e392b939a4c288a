/* SPDX-License-Identifier: MIT */
/* JSON and terminal text output of the sbx CLI. Task output is arbitrary bytes, so the
 * writers here must turn anything into valid JSON or harmless terminal text; they never
 * allocate and never trust a length or depth beyond what they are given. */
#include "cli/sbx_json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "wire/proto.h"

#define SBX_JSON_MAX_DEPTH 64

size_t sbx_json_utf8_next(const unsigned char *s, size_t len, uint32_t *ret_cp)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    uint32_t cp;
    size_t need;

    if (c < 0x80) {
        *ret_cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
        cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        cp = c & 0x0Fu;
        if (c == 0xE0) {
            lo = 0xA0; /* overlong below U+0800 */
        } else if (c == 0xED) {
            hi = 0x9F; /* surrogates U+D800..U+DFFF */
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        cp = c & 0x07u;
        if (c == 0xF0) {
            lo = 0x90; /* overlong below U+10000 */
        } else if (c == 0xF4) {
            hi = 0x8F; /* above U+10FFFF */
        }
    } else {
        /* Continuation byte without a lead, C0/C1 (always overlong) or F5..FF. */
        *ret_cp = SBX_JSON_UTF8_BAD;
        return 1;
    }
    for (size_t i = 1; i <= need; i++) {
        if (i >= len || s[i] < lo || s[i] > hi) {
            /* The maximal subpart ends before the first byte that cannot continue it. */
            *ret_cp = SBX_JSON_UTF8_BAD;
            return i;
        }
        cp = (cp << 6) | (s[i] & 0x3Fu);
        lo = 0x80;
        hi = 0xBF;
    }
    *ret_cp = cp;
    return need + 1;
}

static bool sbx_json_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

void sbx_json_write_str(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending pass-through bytes */
    size_t i = 0;

    (void)fputc('"', f);
    while (i < len) {
        uint32_t cp;
        size_t n = sbx_json_utf8_next(p + i, len - i, &cp);
        const char *esc = NULL;
        char hex[8];

        if (cp == SBX_JSON_UTF8_BAD) {
            esc = "\\ufffd";
        } else if (cp == '"') {
            esc = "\\\"";
        } else if (cp == '\\') {
            esc = "\\\\";
        } else if (cp == '\n') {
            esc = "\\n";
        } else if (cp == '\t') {
            esc = "\\t";
        } else if (cp == '\r') {
            esc = "\\r";
        } else if (cp == '\b') {
            esc = "\\b";
        } else if (cp == '\f') {
            esc = "\\f";
        } else if (sbx_json_is_control(cp)) {
            (void)snprintf(hex, sizeof(hex), "\\u%04" PRIx32, cp);
            esc = hex;
        }
        if (esc) {
            if (i > run) {
                (void)fwrite(p + run, 1, i - run, f);
            }
            (void)fputs(esc, f);
            run = i + n;
        }
        i += n;
    }
    if (i > run) {
        (void)fwrite(p + run, 1, i - run, f);
    }
    (void)fputc('"', f);
}

static void sbx_json_write_key(FILE *f, const msgpack_object *k)
{
    char num[32];

    switch (k->type) {
    case MSGPACK_OBJECT_STR:
        sbx_json_write_str(f, k->via.str.ptr, k->via.str.size);
        return;
    case MSGPACK_OBJECT_BIN:
        sbx_json_write_str(f, k->via.bin.ptr, k->via.bin.size);
        return;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        (void)snprintf(num, sizeof(num), "%" PRIu64, k->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        (void)snprintf(num, sizeof(num), "%" PRId64, k->via.i64);
        break;
    default:
        (void)snprintf(num, sizeof(num), "?");
        break;
    }
    sbx_json_write_str(f, num, strlen(num));
}

static void sbx_json_write_depth(FILE *f, const msgpack_object *o, int depth)
{
    if (!o || depth >= SBX_JSON_MAX_DEPTH) {
        (void)fputs("null", f);
        return;
    }
    switch (o->type) {
    case MSGPACK_OBJECT_BOOLEAN:
        (void)fputs(o->via.boolean ? "true" : "false", f);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        (void)fprintf(f, "%" PRIu64, o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        (void)fprintf(f, "%" PRId64, o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (isfinite(o->via.f64)) {
            (void)fprintf(f, "%.17g", o->via.f64);
        } else {
            (void)fputs("null", f);
        }
        break;
    case MSGPACK_OBJECT_STR:
        sbx_json_write_str(f, o->via.str.ptr, o->via.str.size);
        break;
    case MSGPACK_OBJECT_BIN:
        sbx_json_write_str(f, o->via.bin.ptr, o->via.bin.size);
        break;
    case MSGPACK_OBJECT_ARRAY:
        (void)fputc('[', f);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i > 0) {
                (void)fputc(',', f);
            }
            sbx_json_write_depth(f, &o->via.array.ptr[i], depth + 1);
        }
        (void)fputc(']', f);
        break;
    case MSGPACK_OBJECT_MAP:
        (void)fputc('{', f);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            if (i > 0) {
                (void)fputc(',', f);
            }
            sbx_json_write_key(f, &o->via.map.ptr[i].key);
            (void)fputc(':', f);
            sbx_json_write_depth(f, &o->via.map.ptr[i].val, depth + 1);
        }
        (void)fputc('}', f);
        break;
    default: /* nil, ext */
        (void)fputs("null", f);
        break;
    }
}

void sbx_json_write_obj(FILE *f, const msgpack_object *o)
{
    sbx_json_write_depth(f, o, 0);
}

bool sbx_json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += sbx_json_utf8_next(p + i, len - i, &cp);
        if (cp == SBX_JSON_UTF8_BAD) {
            return false;
        }
    }
    return true;
}

void sbx_json_write_b64(FILE *f, const char *s, size_t len)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)s;
    char quad[4];

    (void)fputc('"', f);
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len) {
            v |= (uint32_t)p[i + 1] << 8;
        }
        if (i + 2 < len) {
            v |= p[i + 2];
        }
        quad[0] = digits[(v >> 18) & 63];
        quad[1] = digits[(v >> 12) & 63];
        quad[2] = i + 1 < len ? digits[(v >> 6) & 63] : '=';
        quad[3] = i + 2 < len ? digits[v & 63] : '=';
        (void)fwrite(quad, 1, sizeof(quad), f);
    }
    (void)fputc('"', f);
}

/* "stdout" or "stderr": the text, and beside it the bytes in base64 when the text could
 * not carry them (they are not valid UTF-8). */
static void sbx_json_write_output(FILE *f, const char *name, const char *p, size_t len)
{
    (void)fprintf(f, "\"%s\":", name);
    sbx_json_write_str(f, p, len);
    if (!sbx_json_utf8_valid(p, len)) {
        (void)fprintf(f, ",\"%s_b64\":", name);
        sbx_json_write_b64(f, p, len);
    }
}

/* "files": the collected files, each one's data as text and, when not UTF-8, base64. */
static void sbx_json_write_files(FILE *f, const msgpack_object *files)
{
    static const char *const fields[] = {"path", "mode", "size", "truncated"};
    static const msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};

    (void)fputs(",\"files\":[", f);
    for (uint32_t i = 0; files->type == MSGPACK_OBJECT_ARRAY && i < files->via.array.size; i++) {
        const msgpack_object *file = &files->via.array.ptr[i];
        const char *data = "";
        uint32_t len = 0;
        (void)fputs(i ? ",{" : "{", f);
        for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
            const msgpack_object *v = proto_map_get(file, fields[k]);
            (void)fprintf(f, "%s\"%s\":", k ? "," : "", fields[k]);
            sbx_json_write_obj(f, v ? v : &nil);
        }
        (void)proto_obj_bytes(proto_map_get(file, "data"), &data, &len);
        (void)fputc(',', f);
        sbx_json_write_output(f, "data", data, len);
        (void)fputc('}', f);
    }
    (void)fputc(']', f);
}

void sbx_json_write_result(FILE *f, const msgpack_object *res, const struct sbx_json_output *o)
{
    static const char *const fields[] = {
        "status",       "exit_code", "signal", "stdout",         "stderr",
        "truncated",    "wall_ms",   "cpu_ms", "mem_peak_bytes", "stdout_bytes",
        "stderr_bytes", "sandbox",   "task",   "pool",           "seccomp_denials",
        "cold",         "egress",    "error",  "error_stage",    "error_errno",
    };
    /* Present only in some results: left out, not null, when missing. */
    static const char *const optional[] = {
        "session", "files_in_bytes", "files_out_bytes", "skipped", "collect_truncated",
    };
    static const msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
    const msgpack_object *files = proto_map_get(res, "files");
    bool truncated = false;

    (void)proto_get_bool(res, "truncated", &truncated, NULL);
    (void)fputc('{', f);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const msgpack_object *v = proto_map_get(res, fields[i]);
        if (!v && strncmp(fields[i], "error", 5) == 0) { /* error, error_stage, error_errno */
            continue;
        }
        if (i > 0) {
            (void)fputc(',', f);
        }
        if (strcmp(fields[i], "stdout") == 0) {
            sbx_json_write_output(f, "stdout", o->out, o->out_len);
            continue;
        }
        if (strcmp(fields[i], "stderr") == 0) {
            sbx_json_write_output(f, "stderr", o->err, o->err_len);
            continue;
        }
        (void)fprintf(f, "\"%s\":", fields[i]);
        if (strcmp(fields[i], "truncated") == 0) {
            (void)fputs(truncated || o->dropped ? "true" : "false", f);
        } else {
            sbx_json_write_obj(f, v ? v : &nil);
        }
    }
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
        const msgpack_object *v = proto_map_get(res, optional[i]);
        if (v) {
            (void)fprintf(f, ",\"%s\":", optional[i]);
            sbx_json_write_obj(f, v);
        }
    }
    if (files) {
        sbx_json_write_files(f, files);
    }
    if (o->n_file_errors > 0) {
        (void)fputs(",\"collect_errors\":[", f);
        for (size_t i = 0; i < o->n_file_errors; i++) {
            const struct sbx_json_file_error *fe = &o->file_errors[i];
            (void)fputs(i ? ",{\"path\":" : "{\"path\":", f);
            sbx_json_write_obj(f, fe->path ? fe->path : &nil);
            (void)fputs(",\"message\":", f);
            sbx_json_write_str(f, fe->message, strlen(fe->message));
            (void)fputc('}', f);
        }
        (void)fputc(']', f);
    }
    (void)fputs("}\n", f);
}

size_t sbx_json_sanitize(const char *s, size_t len, char *buf, size_t size)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0, width = 0;

    while (i < len) {
        uint32_t cp;
        size_t n = sbx_json_utf8_next(p + i, len - i, &cp);
        const char *out = (const char *)p + i;
        size_t out_len = n;

        if (cp == SBX_JSON_UTF8_BAD) {
            out = replacement;
            out_len = sizeof(replacement) - 1;
        } else if (sbx_json_is_control(cp)) {
            out = "?";
            out_len = 1;
        }
        if (o + out_len >= size) {
            break;
        }
        memcpy(buf + o, out, out_len);
        o += out_len;
        width++;
        i += n;
    }
    buf[o] = '\0';
    return width;
}
