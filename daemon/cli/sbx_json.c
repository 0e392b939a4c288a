/* SPDX-License-Identifier: MIT */
/* JSON and terminal text output of the sbx CLI. Task output is arbitrary bytes, so what is
 * here must turn anything into valid JSON or harmless terminal text, and never trust a
 * length or depth beyond what it is given. jansson encodes; the UTF-8 repair is ours because
 * jansson refuses ill-formed strings rather than mending them. */
#include "cli/sbx_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"
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

static json_t *sbx_json_must(json_t *j)
{
    if (!j) {
        /* Only reached when a value given to jansson breaks its rules (sbx_json_str makes
         * every string valid UTF-8; allocation failure aborts in xmalloc). */
        abort();
    }
    return j;
}

void sbx_json_init(void)
{
    json_set_alloc_funcs(xmalloc, free);
}

json_t *sbx_json_str(const char *s, size_t len)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;

    if (sbx_json_utf8_valid(s, len)) {
        return sbx_json_must(json_stringn(s, len));
    }
    /* Each ill-formed subsequence is at least one byte and becomes three. */
    scoped_free char *buf = xmalloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = sbx_json_utf8_next(p + i, len - i, &cp);
        if (cp == SBX_JSON_UTF8_BAD) {
            memcpy(buf + o, replacement, sizeof(replacement) - 1);
            o += sizeof(replacement) - 1;
        } else {
            memcpy(buf + o, p + i, n);
            o += n;
        }
        i += n;
    }
    return sbx_json_must(json_stringn(buf, o));
}

json_t *sbx_json_b64(const char *s, size_t len)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = (const unsigned char *)s;
    scoped_free char *buf = xmalloc((len + 2) / 3 * 4 + 1);
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < len) {
            v |= (uint32_t)p[i + 1] << 8;
        }
        if (i + 2 < len) {
            v |= p[i + 2];
        }
        buf[o++] = digits[(v >> 18) & 63];
        buf[o++] = digits[(v >> 12) & 63];
        buf[o++] = i + 1 < len ? digits[(v >> 6) & 63] : '=';
        buf[o++] = i + 2 < len ? digits[v & 63] : '=';
    }
    return sbx_json_must(json_stringn(buf, o));
}

void sbx_json_set(json_t *obj, const char *key, json_t *v)
{
    if (json_object_set_new(obj, key, v) < 0) {
        abort(); /* obj is an object and key a C string: only a broken caller gets here */
    }
}

void sbx_json_append(json_t *a, json_t *v)
{
    if (json_array_append_new(a, v) < 0) {
        abort(); /* a is an array: only a broken caller gets here */
    }
}

/* Sets m's key k (a map key, of any type) to v, taking v's reference: a string key as text
 * (NUL bytes kept, see sbx_json_str), an integer as its decimal, anything else as "?". */
static void sbx_json_set_key(json_t *m, const msgpack_object *k, json_t *v)
{
    json_auto_t *key = NULL;
    char num[32];

    switch (k->type) {
    case MSGPACK_OBJECT_STR:
        key = sbx_json_str(k->via.str.ptr, k->via.str.size);
        break;
    case MSGPACK_OBJECT_BIN:
        key = sbx_json_str(k->via.bin.ptr, k->via.bin.size);
        break;
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
    if (!key) {
        key = sbx_json_str(num, strlen(num));
    }
    if (json_object_setn_new(m, json_string_value(key), json_string_length(key), v) < 0) {
        abort(); /* m is an object and the key valid UTF-8 */
    }
}

static json_t *sbx_json_obj_depth(const msgpack_object *o, int depth)
{
    if (!o || depth >= SBX_JSON_MAX_DEPTH) {
        return json_null();
    }
    switch (o->type) {
    case MSGPACK_OBJECT_BOOLEAN:
        return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        if (o->via.u64 > INT64_MAX) {
            return sbx_json_must(json_real((double)o->via.u64));
        }
        return sbx_json_must(json_integer((json_int_t)o->via.u64));
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return sbx_json_must(json_integer((json_int_t)o->via.i64));
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        /* json_real refuses non-finite values: they have no JSON form. */
        return isfinite(o->via.f64) ? sbx_json_must(json_real(o->via.f64)) : json_null();
    case MSGPACK_OBJECT_STR:
        return sbx_json_str(o->via.str.ptr, o->via.str.size);
    case MSGPACK_OBJECT_BIN:
        return sbx_json_str(o->via.bin.ptr, o->via.bin.size);
    case MSGPACK_OBJECT_ARRAY: {
        json_t *a = sbx_json_must(json_array());
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            sbx_json_append(a, sbx_json_obj_depth(&o->via.array.ptr[i], depth + 1));
        }
        return a;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *m = sbx_json_must(json_object());
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            sbx_json_set_key(m, &o->via.map.ptr[i].key,
                             sbx_json_obj_depth(&o->via.map.ptr[i].val, depth + 1));
        }
        return m;
    }
    default: /* nil, ext */
        return json_null();
    }
}

json_t *sbx_json_obj(const msgpack_object *o)
{
    return sbx_json_obj_depth(o, 0);
}

void sbx_json_print(FILE *f, json_t *j)
{
    /* 17 digits: a double read back is the same double. JSON_ENCODE_ANY: without it jansson
     * writes nothing for a scalar (today's callers pass maps and arrays). */
    (void)json_dumpf(j, f, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    (void)fputc('\n', f);
    json_decref(j);
}

void sbx_json_print_obj(FILE *f, const msgpack_object *o)
{
    sbx_json_print(f, sbx_json_obj(o));
}

/* "stdout" or "stderr": the text, and beside it the bytes in base64 when the text could
 * not carry them (they are not valid UTF-8). */
static void sbx_json_set_output(json_t *obj, const char *name, const char *p, size_t len)
{
    char b64[16];

    sbx_json_set(obj, name, sbx_json_str(p, len));
    if (!sbx_json_utf8_valid(p, len)) {
        (void)snprintf(b64, sizeof(b64), "%s_b64", name);
        sbx_json_set(obj, b64, sbx_json_b64(p, len));
    }
}

/* "files": the collected files, each one's data as text and, when not UTF-8, base64. */
static json_t *sbx_json_files(const msgpack_object *files)
{
    static const char *const fields[] = {"path", "mode", "size", "truncated"};
    json_t *a = sbx_json_must(json_array());

    for (uint32_t i = 0; files->type == MSGPACK_OBJECT_ARRAY && i < files->via.array.size; i++) {
        const msgpack_object *file = &files->via.array.ptr[i];
        json_t *one = sbx_json_must(json_object());
        const char *data = "";
        uint32_t len = 0;
        for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++) {
            sbx_json_set(one, fields[k], sbx_json_obj(proto_map_get(file, fields[k])));
        }
        (void)proto_obj_bytes(proto_map_get(file, "data"), &data, &len);
        sbx_json_set_output(one, "data", data, len);
        sbx_json_append(a, one);
    }
    return a;
}

json_t *sbx_json_result(const msgpack_object *res, const struct sbx_json_output *o)
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
    const msgpack_object *files = proto_map_get(res, "files");
    json_t *obj = sbx_json_must(json_object());
    bool truncated = false;

    (void)proto_get_bool(res, "truncated", &truncated, NULL);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const msgpack_object *v = proto_map_get(res, fields[i]);
        if (!v && strncmp(fields[i], "error", 5) == 0) { /* error, error_stage, error_errno */
            continue;
        }
        if (strcmp(fields[i], "stdout") == 0) {
            sbx_json_set_output(obj, "stdout", o->out, o->out_len);
        } else if (strcmp(fields[i], "stderr") == 0) {
            sbx_json_set_output(obj, "stderr", o->err, o->err_len);
        } else if (strcmp(fields[i], "truncated") == 0) {
            sbx_json_set(obj, "truncated", json_boolean(truncated || o->dropped));
        } else {
            sbx_json_set(obj, fields[i], sbx_json_obj(v));
        }
    }
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
        const msgpack_object *v = proto_map_get(res, optional[i]);
        if (v) {
            sbx_json_set(obj, optional[i], sbx_json_obj(v));
        }
    }
    if (files) {
        sbx_json_set(obj, "files", sbx_json_files(files));
    }
    if (o->n_file_errors > 0) {
        json_t *errors = sbx_json_must(json_array());
        for (size_t i = 0; i < o->n_file_errors; i++) {
            const struct sbx_json_file_error *fe = &o->file_errors[i];
            json_t *one = sbx_json_must(json_object());
            sbx_json_set(one, "path", sbx_json_obj(fe->path));
            sbx_json_set(one, "message", sbx_json_str(fe->message, strlen(fe->message)));
            sbx_json_append(errors, one);
        }
        sbx_json_set(obj, "collect_errors", errors);
    }
    return obj;
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
