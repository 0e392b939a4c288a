/* SPDX-License-Identifier: MIT */
/* Fuzz target: the agents' socket. Bytes from a client go through proto_reader in pieces,
 * as a connection's reads deliver them, and every message that comes out is taken apart as
 * rpc.c does: the first parameter, typed lookups, strings copied out, the method packed
 * back as text. Checked: no read outside what the reader owns (ASan), no undefined
 * behaviour (UBSan), the reader's contract (an error says why; after a fatal error it is
 * never asked again), that it splits the stream into messages where msgpack-c does, and
 * that text packed for a client is valid UTF-8 whatever it quotes.
 * The first input byte chooses the size of the reads and of the message cap. */
#include <errno.h>
#include <msgpack.h>

#include "lib/err.h"
#include "fuzz.h"
#include "wire/proto.h"

static void touch(const char *p, size_t n)
{
    /* Reads every byte (ASan checks each) into something the optimizer must keep. */
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum = (unsigned char)(sum + (unsigned char)p[i]);
    }
    (void)sum;
}

static void walk(const msgpack_object *o, int depth)
{
    char buf[64];
    switch (o->type) {
    case MSGPACK_OBJECT_STR:
        FUZZ_CHECK(o->via.str.size == 0 || o->via.str.ptr != NULL);
        FUZZ_CHECK(o->via.str.ptr != NULL); /* empty too: never NULL (proto.c) */
        touch(o->via.str.ptr, o->via.str.size);
        (void)proto_obj_cstr(o, buf, sizeof(buf));
        break;
    case MSGPACK_OBJECT_BIN:
        FUZZ_CHECK(o->via.bin.ptr != NULL);
        touch(o->via.bin.ptr, o->via.bin.size);
        (void)proto_obj_cstr(o, buf, sizeof(buf));
        break;
    case MSGPACK_OBJECT_ARRAY:
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            walk(&o->via.array.ptr[i], depth + 1);
        }
        break;
    case MSGPACK_OBJECT_MAP:
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            walk(&o->via.map.ptr[i].key, depth + 1);
            walk(&o->via.map.ptr[i].val, depth + 1);
        }
        break;
    default:
        break;
    }
}

/* Packs the bytes as reply text and checks what a client would decode. */
static void text_roundtrip(const char *s, size_t n)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_textn(&pk, s, n);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    FUZZ_CHECK(msgpack_unpack_next(&u, sb.data, sb.size, &off) == MSGPACK_UNPACK_SUCCESS);
    FUZZ_CHECK(off == sb.size);
    FUZZ_CHECK(u.data.type == MSGPACK_OBJECT_STR);
    FUZZ_CHECK(u.data.via.str.size == n); /* one '?' per byte replaced */
    FUZZ_CHECK(fuzz_utf8_valid((const unsigned char *)u.data.via.str.ptr, u.data.via.str.size));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

/* A request refused for its msgid (-EPROTO, no_msgid): the error notification naming it
 * is one complete message that reads back as a notification, whatever was sent. */
static void refusal_roundtrip(const struct proto_msg *m)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_notify(&pk, "bad_request", "no msgid", m->method, m->method_len, m->raw_msgid);
    struct proto_reader *rd = NULL;
    FUZZ_CHECK(proto_reader_new(sb.size + 64, &rd) == 0);
    char *buf = NULL;
    size_t len = 0;
    FUZZ_CHECK(proto_reader_buffer(rd, sb.size, &buf, &len) == 0 && len >= sb.size);
    memcpy(buf, sb.data, sb.size);
    proto_reader_consumed(rd, sb.size);
    struct proto_msg n;
    FUZZ_CHECK(proto_reader_next(rd, &n, NULL) == 1);
    FUZZ_CHECK(n.type == PROTO_NOTIFY && proto_reader_pending(rd) == 0);
    proto_msg_done(&n);
    proto_reader_free(rd);
    msgpack_sbuffer_destroy(&sb);
}

static void use(const struct proto_msg *m)
{
    struct err e = ERR_INIT;
    if (m->method) {
        touch(m->method, m->method_len);
        text_roundtrip(m->method, m->method_len);
    }
    const msgpack_object *whole[] = {m->params, m->error, m->result};
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
        if (whole[i]) {
            walk(whole[i], 0);
        }
    }
    if (!m->params) {
        return;
    }
    const msgpack_object *a = proto_params_arg0(m->params);
    FUZZ_CHECK(a != NULL);
    static const char *const str_keys[] = {"pool", "cwd", "token", "since", "stream", "id"};
    for (size_t i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
        const char *s = NULL;
        uint32_t n = 0;
        int r = proto_get_str(a, str_keys[i], &s, &n, &e);
        if (r == 0) {
            FUZZ_CHECK(s != NULL);
            touch(s, n);
            text_roundtrip(s, n);
        } else {
            FUZZ_CHECK(r == -ENOENT || r == -EINVAL);
            FUZZ_CHECK(err_msg(&e)[0] != '\0');
        }
    }
    uint64_t u = 0;
    double f = 0;
    bool b = false;
    int r = proto_get_u64(a, "timeout", &u, &e);
    FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
    r = proto_get_f64(a, "timeout", &f, &e);
    FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
    FUZZ_CHECK(r != 0 || (f == f && f - f == 0)); /* finite when accepted */
    r = proto_get_bool(a, "json", &b, &e);
    FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EINVAL);
    const msgpack_object *argv = proto_map_get(a, "argv");
    if (argv) {
        walk(argv, 0);
    }
    const msgpack_object *env = proto_map_get(a, "env");
    if (env) {
        walk(env, 0);
    }
}

/* Where msgpack-c itself finds each message's end in the whole stream, up to the first it
 * cannot decode or complete: fills ends[] (at most max) and returns how many. */
static size_t reference_ends(const uint8_t *data, size_t size, size_t *ends, size_t max)
{
    size_t n = 0, off = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    while (n < max && off < size) {
        msgpack_unpack_return r = msgpack_unpack_next(&u, (const char *)data, size, &off);
        if (r == MSGPACK_UNPACK_SUCCESS || r == MSGPACK_UNPACK_EXTRA_BYTES) {
            ends[n++] = off;
            continue;
        }
        break;
    }
    msgpack_unpacked_destroy(&u);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    uint8_t ctl = data[0];
    data++;
    size--;
    /* A small cap (64 bytes) or the daemon's order of magnitude; reads of 1-64 bytes. */
    size_t max_msg = (ctl & 0x80) ? 64 : 1u << 20;
    size_t piece = (size_t)(ctl & 0x3f) + 1;
    struct proto_reader *rd = NULL;
    FUZZ_CHECK(proto_reader_new(max_msg, &rd) == 0);
    size_t off = 0;
    bool dead = false;
    bool too_big = false; /* stopped by the cap */
    /* Where each message the reader gave out ended, in the stream. */
    enum { ENDS_MAX = 4096 };
    size_t *ends = malloc(ENDS_MAX * sizeof(*ends));
    FUZZ_CHECK(ends != NULL);
    size_t n_ends = 0;
    while (off < size && !dead) {
        char *buf = NULL;
        size_t len = 0;
        if (proto_reader_buffer(rd, piece, &buf, &len) < 0) {
            too_big = true;
            break; /* the pending message is over the cap: the connection closes */
        }
        FUZZ_CHECK(buf != NULL && len >= piece);
        size_t k = size - off < piece ? size - off : piece;
        memcpy(buf, data + off, k);
        proto_reader_consumed(rd, k);
        off += k;
        for (;;) {
            struct proto_msg m;
            memset(&m, 0, sizeof(m));
            struct err e = ERR_INIT;
            int r = proto_reader_next(rd, &m, &e);
            if ((r == 1 || r == -EPROTO) && n_ends < ENDS_MAX) {
                ends[n_ends++] = off - proto_reader_pending(rd);
            }
            if (r == 1) {
                FUZZ_CHECK(m.type == PROTO_REQUEST || m.type == PROTO_RESPONSE ||
                           m.type == PROTO_NOTIFY);
                FUZZ_CHECK(m.type == PROTO_RESPONSE || m.method != NULL);
                use(&m);
                proto_msg_done(&m);
                continue;
            }
            if (r == 0) {
                break;
            }
            FUZZ_CHECK(err_msg(&e)[0] != '\0');
            if (r == -EPROTO) {
                if (m.type == PROTO_REQUEST && m.no_msgid) {
                    refusal_roundtrip(&m);
                }
                proto_msg_done(&m);
                continue;
            }
            FUZZ_CHECK(r == -EMSGSIZE || r == -EBADMSG);
            too_big = r == -EMSGSIZE;
            dead = true;
            break;
        }
    }
    /* The reader splits the stream where msgpack-c does: every message it gave out ends
     * where msgpack-c's does, and short of a fatal error (the depth bound, bytes that are
     * not msgpack) it gave out every message msgpack-c finds. (Where msgpack-c gives up on
     * a message the reader may still wait for its next byte: an ext32 header claiming
     * 0xffffffff bytes overflows msgpack-c's count, the reader refuses it for the cap a
     * byte later.) Not past the cap: there msgpack-c would allocate what a header claims
     * (the reader refuses before). */
    size_t *want = malloc(ENDS_MAX * sizeof(*want));
    FUZZ_CHECK(want != NULL);
    size_t n_want = too_big ? 0 : reference_ends(data, size, want, ENDS_MAX);
    if (!too_big && n_ends < ENDS_MAX && n_want < ENDS_MAX) {
        FUZZ_CHECK(n_ends <= n_want);
        FUZZ_CHECK(n_ends == 0 || memcmp(ends, want, n_ends * sizeof(*ends)) == 0);
        bool stopped = dead || off < size;
        FUZZ_CHECK(stopped || n_ends == n_want);
    }
    free(want);
    free(ends);
    proto_reader_free(rd);
    return 0;
}
