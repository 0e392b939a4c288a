/* SPDX-License-Identifier: MIT */
/* msgpack-rpc framing and codecs. Owns the per-connection read buffer and a resumable scanner
 * that bounds every message (size, depth, declared counts) before msgpack-c sees a byte of it.
 * It never does I/O, never logs above debug and holds no daemon state. */
#include "wire/proto.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"

/* Bytes a pending partial message may exceed max_msg by: a header that is not complete yet
 * (at most 6 bytes) is buffered but not scanned. */
#define PROTO_SLACK 16
#define PROTO_BUF_MIN 4096
/* An empty buffer larger than this is released, so an idle connection that once received a
 * large message does not keep max_msg bytes. */
#define PROTO_BUF_KEEP (256 * 1024)

struct proto_reader {
    char *buf;
    size_t cap;
    size_t start; /* first byte of the current message */
    size_t len;   /* end of the buffered bytes: [start, len) is pending */
    size_t scan;  /* next byte the scanner looks at, start <= scan <= len */
    size_t max_msg;
    /* Scanner state for the current message. Every element an open container still owes
     * takes at least one byte, so (scan - start) + skip + need is a lower bound of the
     * message's size, known as soon as a header is read. */
    uint64_t skip; /* payload bytes of the current str/bin/ext not yet passed */
    uint64_t need; /* sum of stack[] */
    unsigned depth;
    uint64_t stack[PROTO_MAX_DEPTH]; /* elements each open container still owes */
    /* A framing error is sticky: the stream cannot be resynchronised. */
    int fatal;
    struct err fatal_err;
};

int proto_reader_new(size_t max_msg, struct proto_reader **ret)
{
    struct proto_reader *r;

    assert(max_msg > 0 && max_msg <= SIZE_MAX / 4);
    r = calloc(1, sizeof(*r));
    if (!r) {
        return -ENOMEM;
    }
    r->max_msg = max_msg;
    *ret = r;
    return 0;
}

struct proto_reader *proto_reader_free(struct proto_reader *r)
{
    if (r) {
        free(r->buf);
        free(r);
    }
    return NULL;
}

/* Makes the error already written to r->fatal_err sticky and returns it. */
static int reader_fail(struct proto_reader *r, int code)
{
    r->fatal = code;
    r->fatal_err.code = code;
    return code;
}

static int reader_fatal(const struct proto_reader *r, struct err *e)
{
    if (e) {
        *e = r->fatal_err;
    }
    return r->fatal;
}

int proto_reader_buffer(struct proto_reader *r, size_t want, char **ret_buf, size_t *ret_len)
{
    size_t pending = r->len - r->start;

    if (r->fatal) {
        return r->fatal;
    }
    if (want == 0) {
        want = 1;
    }
    /* SECURITY: a caller that drains proto_reader_next() after every read never holds more
     * than one partial message here; refusing anything more keeps memory bounded even when
     * the scanner has not looked at the bytes yet. */
    if (pending > r->max_msg + PROTO_SLACK) {
        (void)err_setx(&r->fatal_err, -EMSGSIZE, "message larger than %zu bytes", r->max_msg);
        return reader_fail(r, -EMSGSIZE);
    }
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, pending);
        r->scan -= r->start;
        r->len = pending;
        r->start = 0;
    }
    if (pending == 0 && r->cap > PROTO_BUF_KEEP) {
        free(r->buf);
        r->buf = NULL;
        r->cap = 0;
    }
    if (r->cap - r->len < want) {
        /* Geometric growth keeps a slow drip linear; the ceiling is one message plus the
         * slack plus one read. */
        size_t limit = r->max_msg + PROTO_SLACK + want;
        size_t cap = r->cap ? r->cap * 2 : PROTO_BUF_MIN;

        if (limit < want) {
            limit = SIZE_MAX;
        }
        if (cap > limit) {
            cap = limit;
        }
        if (cap < r->len + want) {
            cap = r->len + want;
        }
        r->buf = xrealloc(r->buf, cap);
        r->cap = cap;
    }
    *ret_buf = r->buf + r->len;
    *ret_len = r->cap - r->len;
    return 0;
}

void proto_reader_consumed(struct proto_reader *r, size_t n)
{
    assert(n <= r->cap - r->len);
    r->len += n;
}

size_t proto_reader_pending(const struct proto_reader *r)
{
    return r->len - r->start;
}

static uint64_t be_read(const unsigned char *p, unsigned n)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < n; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* Decodes the msgpack header at p (avail bytes). Returns its length, 0 when more bytes are
 * needed, or -EBADMSG. *ret_payload: bytes that follow the header; *ret_count: elements of a
 * container (map entries count twice) and *ret_container set for arrays and maps. */
static int header_decode(const unsigned char *p, size_t avail, uint64_t *ret_payload,
                         uint64_t *ret_count, bool *ret_container)
{
    unsigned char b = p[0];
    unsigned hl = 1;    /* header length */
    unsigned lenb = 0;  /* bytes of the big-endian length field after the type byte */
    uint64_t fixed = 0; /* payload of fixed-size types */
    int kind = 0;       /* 0 scalar, 1 raw (length field is a byte count), 2 array, 3 map */
    uint64_t n;

    *ret_payload = 0;
    *ret_count = 0;
    *ret_container = false;
    if (b <= 0x7f || b >= 0xe0) {
        return 1;
    }
    if (b <= 0x8f) {
        *ret_count = (uint64_t)(b & 0x0f) * 2;
        *ret_container = true;
        return 1;
    }
    if (b <= 0x9f) {
        *ret_count = b & 0x0f;
        *ret_container = true;
        return 1;
    }
    if (b <= 0xbf) {
        *ret_payload = b & 0x1f;
        return 1;
    }
    switch (b) {
    case 0xc0: /* nil */
    case 0xc2: /* false */
    case 0xc3: /* true */
        return 1;
    case 0xc1:
        return -EBADMSG;
    case 0xc4: /* bin 8/16/32 */
    case 0xd9: /* str 8 */
        lenb = 1;
        kind = 1;
        break;
    case 0xc5:
    case 0xda:
        lenb = 2;
        kind = 1;
        break;
    case 0xc6:
    case 0xdb:
        lenb = 4;
        kind = 1;
        break;
    case 0xc7: /* ext 8/16/32: length, then a type byte that is part of the header */
        lenb = 1;
        kind = 1;
        hl = 2;
        break;
    case 0xc8:
        lenb = 2;
        kind = 1;
        hl = 2;
        break;
    case 0xc9:
        lenb = 4;
        kind = 1;
        hl = 2;
        break;
    case 0xca: /* float 32 */
    case 0xce: /* uint 32 */
    case 0xd2: /* int 32 */
        fixed = 4;
        break;
    case 0xcb:
    case 0xcf:
    case 0xd3:
        fixed = 8;
        break;
    case 0xcc:
    case 0xd0:
        fixed = 1;
        break;
    case 0xcd:
    case 0xd1:
        fixed = 2;
        break;
    case 0xd4: /* fixext 1/2/4/8/16: a type byte, then the data */
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        fixed = 1 + (1u << (b - 0xd4));
        break;
    case 0xdc:
        lenb = 2;
        kind = 2;
        break;
    case 0xdd:
        lenb = 4;
        kind = 2;
        break;
    case 0xde:
        lenb = 2;
        kind = 3;
        break;
    case 0xdf:
        lenb = 4;
        kind = 3;
        break;
    default:
        return -EBADMSG; /* unreachable: every byte value is covered above */
    }
    hl += lenb;
    if (avail < hl) {
        return 0;
    }
    n = be_read(p + 1, lenb);
    if (kind == 0) {
        *ret_payload = fixed;
    } else if (kind == 1) {
        *ret_payload = n;
    } else {
        *ret_count = kind == 3 ? n * 2 : n;
        *ret_container = true;
    }
    return (int)hl;
}

/* Advances the scanner over the buffered bytes of the current message. Returns 1 when the
 * message ends at r->scan, 0 when more bytes are needed, or a fatal error. Each byte is
 * looked at once however the message is split across reads. */
static int reader_scan(struct proto_reader *r)
{
    for (;;) {
        const unsigned char *p;
        uint64_t payload, count;
        bool container;
        int hl;

        if (r->skip > 0) {
            size_t avail = r->len - r->scan;
            size_t n = r->skip < avail ? (size_t)r->skip : avail;

            r->scan += n;
            r->skip -= n;
            if (r->skip > 0) {
                return 0;
            }
        }
        if (r->scan > r->start && r->depth == 0) {
            return 1;
        }
        if (r->scan == r->len) {
            return 0;
        }
        p = (const unsigned char *)r->buf + r->scan;
        hl = header_decode(p, r->len - r->scan, &payload, &count, &container);
        if (hl == -EBADMSG) {
            (void)err_setx(&r->fatal_err, -EBADMSG, "reserved type byte 0xc1 at offset %zu",
                           r->scan - r->start);
            return reader_fail(r, -EBADMSG);
        }
        if (hl == 0) {
            return 0;
        }
        if (r->depth > 0) {
            r->stack[r->depth - 1]--;
            r->need--;
        }
        if (container) {
            if (r->depth == PROTO_MAX_DEPTH) {
                (void)err_setx(&r->fatal_err, -EBADMSG, "nesting deeper than %d levels",
                               PROTO_MAX_DEPTH);
                return reader_fail(r, -EBADMSG);
            }
            if (count > 0) {
                r->stack[r->depth++] = count;
                r->need += count;
            }
        }
        r->scan += (size_t)hl;
        r->skip = payload;
        /* SECURITY: this fires on the header that declares the size or the count, before
         * any of the body is buffered, and bounds what msgpack-c will later allocate. */
        if ((uint64_t)(r->scan - r->start) + r->skip + r->need > r->max_msg) {
            (void)err_setx(&r->fatal_err, -EMSGSIZE, "message larger than %zu bytes", r->max_msg);
            return reader_fail(r, -EMSGSIZE);
        }
        while (r->depth > 0 && r->stack[r->depth - 1] == 0) {
            r->depth--;
        }
    }
}

static bool obj_is_msgid(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= UINT32_MAX;
}

static bool obj_is_uint(const msgpack_object *o, uint64_t v)
{
    return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 == v;
}

/* Checks the rpc shape of a decoded value and fills m. Returns 1 or -EPROTO. */
static int msg_classify(struct proto_msg *m, struct err *e)
{
    const msgpack_object *o = &m->unpacked.data;
    const msgpack_object *a;
    uint32_t n;

    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size == 0) {
        return err_setx(e, -EPROTO, "message must be a non-empty array");
    }
    a = o->via.array.ptr;
    n = o->via.array.size;
    if (obj_is_uint(&a[0], PROTO_REQUEST)) {
        m->type = PROTO_REQUEST;
        if (n < 2 || !obj_is_msgid(&a[1])) {
            /* No response can name it, so its client would wait for ever: the caller
             * answers with an error notification that names what was sent. */
            m->no_msgid = true;
            m->raw_msgid = n >= 2 ? &a[1] : NULL;
            if (n >= 3 && a[2].type == MSGPACK_OBJECT_STR) {
                m->method = a[2].via.str.ptr;
                m->method_len = a[2].via.str.size;
            }
            return err_setx(e, -EPROTO, "request msgid must be an unsigned 32-bit integer");
        }
        /* Even a malformed request can be answered once its msgid is known. */
        m->msgid = (uint32_t)a[1].via.u64;
        if (n != 4) {
            return err_setx(e, -EPROTO, "request must be [0, msgid, method, params]");
        }
        if (a[2].type != MSGPACK_OBJECT_STR) {
            return err_setx(e, -EPROTO, "request method must be a string");
        }
        m->method = a[2].via.str.ptr;
        m->method_len = a[2].via.str.size;
        m->params = &a[3];
        return 1;
    }
    if (obj_is_uint(&a[0], PROTO_RESPONSE)) {
        if (n != 4 || !obj_is_msgid(&a[1])) {
            return err_setx(e, -EPROTO, "response must be [1, msgid, error, result]");
        }
        m->type = PROTO_RESPONSE;
        m->msgid = (uint32_t)a[1].via.u64;
        m->error = &a[2];
        m->result = &a[3];
        return 1;
    }
    if (obj_is_uint(&a[0], PROTO_NOTIFY)) {
        if (n != 3 || a[1].type != MSGPACK_OBJECT_STR) {
            return err_setx(e, -EPROTO, "notification must be [2, method, params]");
        }
        m->type = PROTO_NOTIFY;
        m->method = a[1].via.str.ptr;
        m->method_len = a[1].via.str.size;
        m->params = &a[2];
        return 1;
    }
    return err_setx(e, -EPROTO, "message type must be 0, 1 or 2");
}

/* msgpack-c gives an empty str or bin a NULL pointer. Every consumer passes these pointers to
 * memcpy, memchr or memcmp with their sizes, which C forbids for NULL even at size 0: point
 * them at an empty string instead. The reader's scan bounds the depth (PROTO_MAX_DEPTH). */
static void empty_raw_not_null(msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        if (o->via.str.size == 0) {
            o->via.str.ptr = "";
        }
        break;
    case MSGPACK_OBJECT_BIN:
        if (o->via.bin.size == 0) {
            o->via.bin.ptr = "";
        }
        break;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            empty_raw_not_null(&o->via.array.ptr[i]);
        }
        break;
    case MSGPACK_OBJECT_MAP:
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            empty_raw_not_null(&o->via.map.ptr[i].key);
            empty_raw_not_null(&o->via.map.ptr[i].val);
        }
        break;
    default:
        break;
    }
}

int proto_reader_next(struct proto_reader *r, struct proto_msg *ret, struct err *e)
{
    size_t size, off = 0;
    const char *start;
    char *copy;
    msgpack_unpack_return ur;
    int rc;

    memset(ret, 0, sizeof(*ret));
    msgpack_unpacked_init(&ret->unpacked);
    if (r->fatal) {
        return reader_fatal(r, e);
    }
    rc = reader_scan(r);
    if (rc < 0) {
        return reader_fatal(r, e);
    }
    if (rc == 0) {
        return 0;
    }
    start = r->buf + r->start;
    size = r->scan - r->start;
    r->start = r->scan;

    /* msgpack-c points strings into its input, and the reader buffer moves on compaction:
     * the message owns a copy of its bytes, released with its zone. */
    copy = xmalloc(size);
    memcpy(copy, start, size);
    ur = msgpack_unpack_next(&ret->unpacked, copy, size, &off);
    if (ur != MSGPACK_UNPACK_SUCCESS || off != size) {
        free(copy);
        msgpack_unpacked_destroy(&ret->unpacked);
        msgpack_unpacked_init(&ret->unpacked);
        (void)err_setx(&r->fatal_err, -EBADMSG, "undecodable message of %zu bytes", size);
        (void)reader_fail(r, -EBADMSG);
        return reader_fatal(r, e);
    }
    if (!ret->unpacked.zone) {
        ret->unpacked.zone = msgpack_zone_new(256);
    }
    if (!ret->unpacked.zone || !msgpack_zone_push_finalizer(ret->unpacked.zone, free, copy)) {
        abort(); /* Out of memory: the same policy as xmalloc. */
    }
    empty_raw_not_null(&ret->unpacked.data);
    /* On -EPROTO a value that did not look like a request stays typed as a notification
     * without a method, so a caller that answers PROTO_REQUEST never answers it. The value
     * stays with the message (no_msgid points into it) until proto_msg_done. */
    ret->type = PROTO_NOTIFY;
    return msg_classify(ret, e);
}

void proto_msg_done(struct proto_msg *m)
{
    msgpack_unpacked_destroy(&m->unpacked);
    memset(m, 0, sizeof(*m));
}

static void pack_str(msgpack_packer *pk, const char *s, size_t len)
{
    (void)msgpack_pack_str_with_body(pk, s, len);
}

void proto_pack_cstr(msgpack_packer *pk, const char *s)
{
    if (!s) {
        (void)msgpack_pack_nil(pk);
        return;
    }
    pack_str(pk, s, strlen(s));
}

size_t proto_utf8_seq(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    /* The lead byte gives the length, its payload bits and the least code point that needs
     * that length. */
    static const struct {
        uint8_t mask, lead, bits;
        size_t len;
        uint32_t min;
    } forms[] = {
        {0xe0, 0xc0, 0x1f, 2, 0x80},
        {0xf0, 0xe0, 0x0f, 3, 0x800},
        {0xf8, 0xf0, 0x07, 4, 0x10000},
    };
    if (u[0] < 0x80) {
        return 1;
    }
    size_t f = 0;
    while (f < ARRAY_SIZE(forms) && (u[0] & forms[f].mask) != forms[f].lead) {
        f++;
    }
    if (f == ARRAY_SIZE(forms)) {
        return 0;
    }
    size_t len = forms[f].len;
    uint32_t cp = u[0] & forms[f].bits;
    uint32_t min = forms[f].min;
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (u[i] & 0x3fu);
    }
    /* No overlong forms, no surrogates, nothing above U+10FFFF. */
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return len;
}

void proto_pack_textn(msgpack_packer *pk, const char *s, size_t n)
{
    if (!s) {
        (void)msgpack_pack_nil(pk);
        return;
    }
    (void)msgpack_pack_str(pk, n);
    size_t run = 0; /* valid bytes not yet written, ending at i */
    size_t i = 0;
    while (i < n) {
        size_t k = proto_utf8_seq(s + i, n - i);
        if (k > 0) {
            run += k;
            i += k;
            continue;
        }
        (void)msgpack_pack_str_body(pk, s + i - run, run);
        (void)msgpack_pack_str_body(pk, "?", 1); /* one for one: the header's n holds */
        run = 0;
        i++;
    }
    (void)msgpack_pack_str_body(pk, s + n - run, run);
}

void proto_pack_text(msgpack_packer *pk, const char *s)
{
    proto_pack_textn(pk, s, s ? strlen(s) : 0);
}

void proto_pack_kv_text(msgpack_packer *pk, const char *key, const char *val)
{
    proto_pack_cstr(pk, key);
    proto_pack_text(pk, val);
}

void proto_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method)
{
    (void)msgpack_pack_array(pk, 4);
    (void)msgpack_pack_uint8(pk, PROTO_REQUEST);
    (void)msgpack_pack_uint32(pk, msgid);
    proto_pack_cstr(pk, method);
}

void proto_pack_response_ok(msgpack_packer *pk, uint32_t msgid)
{
    (void)msgpack_pack_array(pk, 4);
    (void)msgpack_pack_uint8(pk, PROTO_RESPONSE);
    (void)msgpack_pack_uint32(pk, msgid);
    (void)msgpack_pack_nil(pk);
}

void proto_pack_response_err(msgpack_packer *pk, uint32_t msgid, const char *code,
                             const char *message)
{
    (void)msgpack_pack_array(pk, 4);
    (void)msgpack_pack_uint8(pk, PROTO_RESPONSE);
    (void)msgpack_pack_uint32(pk, msgid);
    (void)msgpack_pack_map(pk, 2);
    proto_pack_kv_str(pk, "code", code ? code : "internal");
    proto_pack_kv_text(pk, "message", message ? message : "");
    (void)msgpack_pack_nil(pk);
}

void proto_pack_notify(msgpack_packer *pk, const char *method)
{
    (void)msgpack_pack_array(pk, 3);
    (void)msgpack_pack_uint8(pk, PROTO_NOTIFY);
    proto_pack_cstr(pk, method);
}

/* Whether the msgid o can be echoed as proto_pack_error_notify says. */
static bool msgid_echoable(const msgpack_object *o)
{
    return o && o->type != MSGPACK_OBJECT_ARRAY && o->type != MSGPACK_OBJECT_MAP &&
           o->type != MSGPACK_OBJECT_EXT;
}

void proto_pack_error_notify(msgpack_packer *pk, const char *code, const char *message,
                             const char *method, size_t method_len, const msgpack_object *msgid)
{
    /* Bounded echoes: the refused message may be up to the message size cap. */
    enum { ECHO_MAX = 64 };
    bool echo_id = msgid_echoable(msgid);
    proto_pack_notify(pk, "error");
    (void)msgpack_pack_array(pk, 1);
    (void)msgpack_pack_map(pk, 2 + (method != NULL) + echo_id);
    proto_pack_kv_str(pk, "code", code ? code : "internal");
    proto_pack_kv_text(pk, "message", message ? message : "");
    if (method) {
        proto_pack_cstr(pk, "method");
        proto_pack_textn(pk, method, method_len < ECHO_MAX ? method_len : ECHO_MAX);
    }
    if (!echo_id) {
        return;
    }
    proto_pack_cstr(pk, "msgid");
    if (msgid->type == MSGPACK_OBJECT_STR) {
        uint32_t n = msgid->via.str.size;
        proto_pack_textn(pk, msgid->via.str.ptr, n < ECHO_MAX ? n : ECHO_MAX);
    } else if (msgid->type == MSGPACK_OBJECT_BIN) {
        uint32_t n = msgid->via.bin.size;
        (void)msgpack_pack_bin_with_body(pk, msgid->via.bin.ptr, n < ECHO_MAX ? n : ECHO_MAX);
    } else {
        (void)msgpack_pack_object(pk, *msgid);
    }
}

void proto_pack_kv_str(msgpack_packer *pk, const char *key, const char *val)
{
    proto_pack_cstr(pk, key);
    proto_pack_cstr(pk, val);
}

void proto_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t val)
{
    proto_pack_cstr(pk, key);
    (void)msgpack_pack_uint64(pk, val);
}

void proto_pack_kv_i64(msgpack_packer *pk, const char *key, int64_t val)
{
    proto_pack_cstr(pk, key);
    (void)msgpack_pack_int64(pk, val);
}

void proto_pack_kv_f64(msgpack_packer *pk, const char *key, double val)
{
    proto_pack_cstr(pk, key);
    (void)msgpack_pack_double(pk, val);
}

void proto_pack_kv_bool(msgpack_packer *pk, const char *key, bool val)
{
    proto_pack_cstr(pk, key);
    if (val) {
        (void)msgpack_pack_true(pk);
    } else {
        (void)msgpack_pack_false(pk);
    }
}

void proto_pack_kv_nil(msgpack_packer *pk, const char *key)
{
    proto_pack_cstr(pk, key);
    (void)msgpack_pack_nil(pk);
}

bool proto_str_eq(const char *s, uint32_t len, const char *cstr)
{
    size_t n = strlen(cstr);

    return n == len && (n == 0 || memcmp(s, cstr, n) == 0);
}

bool proto_obj_bytes(const msgpack_object *o, const char **ret, uint32_t *ret_len)
{
    if (o->type == MSGPACK_OBJECT_STR) {
        *ret = o->via.str.ptr;
        *ret_len = o->via.str.size;
        return true;
    }
    if (o->type == MSGPACK_OBJECT_BIN) {
        *ret = o->via.bin.ptr;
        *ret_len = o->via.bin.size;
        return true;
    }
    return false;
}

const msgpack_object *proto_map_get(const msgpack_object *map, const char *key)
{
    if (!map || map->type != MSGPACK_OBJECT_MAP) {
        return NULL;
    }
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        const char *s;
        uint32_t len;

        if (proto_obj_bytes(&kv->key, &s, &len) && proto_str_eq(s, len, key)) {
            return &kv->val;
        }
    }
    return NULL;
}

const msgpack_object *proto_params_arg0(const msgpack_object *params)
{
    if (params && params->type == MSGPACK_OBJECT_ARRAY && params->via.array.size >= 1) {
        return &params->via.array.ptr[0];
    }
    return params;
}

/* The value under key; nil counts as missing, so a client may spell "use the default" either
 * way. */
static const msgpack_object *map_lookup(const msgpack_object *map, const char *key, struct err *e)
{
    const msgpack_object *v = proto_map_get(map, key);

    if (!v || v->type == MSGPACK_OBJECT_NIL) {
        (void)err_setx(e, -ENOENT, "'%s' is missing", key);
        return NULL;
    }
    return v;
}

int proto_get_str(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len,
                  struct err *e)
{
    const msgpack_object *v = map_lookup(map, key, e);

    if (!v) {
        return -ENOENT;
    }
    if (v->type != MSGPACK_OBJECT_STR) {
        return err_setx(e, -EINVAL, "'%s' must be a string", key);
    }
    *ret = v->via.str.ptr;
    *ret_len = v->via.str.size;
    return 0;
}

int proto_get_u64(const msgpack_object *map, const char *key, uint64_t *ret, struct err *e)
{
    const msgpack_object *v = map_lookup(map, key, e);

    if (!v) {
        return -ENOENT;
    }
    if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return err_setx(e, -EINVAL, "'%s' must be a non-negative integer", key);
    }
    *ret = v->via.u64;
    return 0;
}

int proto_get_f64(const msgpack_object *map, const char *key, double *ret, struct err *e)
{
    const msgpack_object *v = map_lookup(map, key, e);
    double d;

    if (!v) {
        return -ENOENT;
    }
    switch (v->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        d = (double)v->via.u64;
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        d = (double)v->via.i64;
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        d = v->via.f64;
        break;
    default:
        return err_setx(e, -EINVAL, "'%s' must be a number", key);
    }
    if (!isfinite(d)) {
        return err_setx(e, -EINVAL, "'%s' must be a finite number", key);
    }
    *ret = d;
    return 0;
}

int proto_get_bool(const msgpack_object *map, const char *key, bool *ret, struct err *e)
{
    const msgpack_object *v = map_lookup(map, key, e);

    if (!v) {
        return -ENOENT;
    }
    if (v->type != MSGPACK_OBJECT_BOOLEAN) {
        return err_setx(e, -EINVAL, "'%s' must be a boolean", key);
    }
    *ret = v->via.boolean;
    return 0;
}

int proto_obj_cstr(const msgpack_object *o, char *buf, size_t size)
{
    const char *s;
    uint32_t len;

    if (!o || !proto_obj_bytes(o, &s, &len)) {
        return -EINVAL;
    }
    if ((size_t)len >= size) {
        return -ENAMETOOLONG;
    }
    if (len > 0 && memchr(s, '\0', len)) {
        return -EINVAL;
    }
    if (len > 0) {
        memcpy(buf, s, len);
    }
    buf[len] = '\0';
    return 0;
}

int proto_keys_check(const msgpack_object *m, const char *const *keys, size_t n, char *name,
                     size_t size)
{
    if (!m || m->type != MSGPACK_OBJECT_MAP) {
        return -EINVAL;
    }
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object *k = &m->via.map.ptr[i].key;
        bool known = false;
        for (size_t j = 0; j < n && k->type == MSGPACK_OBJECT_STR && !known; j++) {
            known = proto_str_eq(k->via.str.ptr, k->via.str.size, keys[j]);
        }
        if (!known) {
            if (proto_obj_cstr(k, name, size) < 0) {
                str_copy(name, "?", size);
            }
            return -ENOENT;
        }
    }
    return 0;
}
