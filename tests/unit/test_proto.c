/* SPDX-License-Identifier: MIT */
/* msgpack-rpc framing and codecs: round trips, accessors, hostile input (reserved bytes, deep
 * nesting, huge declared sizes, the exact cap), byte-at-a-time feeding and a property loop
 * that feeds random valid messages in random splits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/proto.h"
#include "rnd.h"

#define SLACK 16 /* proto.c's allowance for a partial header past the cap */

/* Appends len bytes to the reader in pieces of at most chunk bytes (chunk 0: all at once),
 * without taking messages out. Returns 0 or the error of proto_reader_buffer. */
static int feed(struct proto_reader *r, const void *data, size_t len, size_t chunk)
{
    const char *p = data;

    while (len > 0) {
        size_t want = chunk ? chunk : len;
        size_t n;
        char *buf;
        size_t buf_len;
        int rc = proto_reader_buffer(r, want, &buf, &buf_len);

        if (rc < 0) {
            return rc;
        }
        assert_true(buf_len >= want);
        n = want < len ? want : len;
        memcpy(buf, p, n);
        proto_reader_consumed(r, n);
        p += n;
        len -= n;
    }
    return 0;
}

static struct proto_reader *reader(size_t max_msg)
{
    struct proto_reader *r = NULL;

    assert_int_equal(proto_reader_new(max_msg, &r), 0);
    assert_non_null(r);
    return r;
}

/* Expects exactly one complete message from the bytes of sb. */
static void read_one(struct proto_reader *r, const msgpack_sbuffer *sb, struct proto_msg *m)
{
    struct err e = ERR_INIT;

    assert_int_equal(feed(r, sb->data, sb->size, 0), 0);
    assert_int_equal(proto_reader_next(r, m, &e), 1);
    assert_int_equal(proto_reader_pending(r), 0);
}

/* Feeds raw bytes and returns what proto_reader_next says about them. */
static int next_of(struct proto_reader *r, const void *data, size_t len, struct proto_msg *m,
                   struct err *e)
{
    int rc = feed(r, data, len, 0);

    if (rc < 0) {
        return rc;
    }
    return proto_reader_next(r, m, e);
}

static void pack_nested_arrays(msgpack_packer *pk, int levels)
{
    for (int i = 0; i < levels; i++) {
        msgpack_pack_array(pk, 1);
    }
    msgpack_pack_nil(pk);
}

static void proto_pack_request__round_trip_nested_params(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    const msgpack_object *a, *argv, *env, *nested;
    const char *s;
    uint32_t len;
    double d;
    bool b;
    uint64_t u;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_request(&pk, 4000000000u, "exec");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 6);
    proto_pack_cstr(&pk, "argv");
    msgpack_pack_array(&pk, 2);
    proto_pack_cstr(&pk, "echo");
    proto_pack_cstr(&pk, "hi");
    proto_pack_cstr(&pk, "env");
    msgpack_pack_map(&pk, 1);
    proto_pack_kv_str(&pk, "A", "1");
    proto_pack_kv_f64(&pk, "timeout", 1.5);
    proto_pack_kv_bool(&pk, "stdin", true);
    proto_pack_kv_u64(&pk, "n", 1ULL << 40);
    proto_pack_cstr(&pk, "nested");
    msgpack_pack_array(&pk, 2);
    pack_nested_arrays(&pk, 5);
    msgpack_pack_map(&pk, 0);

    read_one(r, &sb, &m);
    assert_int_equal(m.type, PROTO_REQUEST);
    assert_int_equal(m.msgid, 4000000000u);
    assert_true(proto_str_eq(m.method, m.method_len, "exec"));
    assert_non_null(m.params);
    assert_int_equal(m.params->type, MSGPACK_OBJECT_ARRAY);
    a = proto_params_arg0(m.params);
    assert_int_equal(a->type, MSGPACK_OBJECT_MAP);
    argv = proto_map_get(a, "argv");
    assert_non_null(argv);
    assert_int_equal(argv->via.array.size, 2);
    assert_true(proto_str_eq(argv->via.array.ptr[1].via.str.ptr,
                             argv->via.array.ptr[1].via.str.size, "hi"));
    env = proto_map_get(a, "env");
    assert_int_equal(proto_get_str(env, "A", &s, &len, NULL), 0);
    assert_true(proto_str_eq(s, len, "1"));
    assert_int_equal(proto_get_f64(a, "timeout", &d, NULL), 0);
    assert_true(d == 1.5);
    assert_int_equal(proto_get_bool(a, "stdin", &b, NULL), 0);
    assert_true(b);
    assert_int_equal(proto_get_u64(a, "n", &u, NULL), 0);
    assert_true(u == 1ULL << 40);
    nested = proto_map_get(a, "nested");
    assert_non_null(nested);
    assert_int_equal(nested->via.array.ptr[0].via.array.ptr[0].type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(nested->via.array.ptr[1].type, MSGPACK_OBJECT_MAP);
    assert_null(m.error);
    assert_null(m.result);

    proto_msg_done(&m);
    proto_msg_done(&m); /* zeroed by the first call */
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_pack_response_ok__round_trip(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    const msgpack_object *v;
    const char *s;
    uint32_t len;
    uint64_t u;
    double d;
    bool b;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response_ok(&pk, 9);
    msgpack_pack_map(&pk, 6);
    proto_pack_kv_str(&pk, "status", "exited");
    proto_pack_kv_i64(&pk, "exit_code", -3);
    proto_pack_kv_u64(&pk, "wall_ms", 1234);
    proto_pack_kv_f64(&pk, "ratio", 0.25);
    proto_pack_kv_bool(&pk, "truncated", false);
    proto_pack_kv_nil(&pk, "signal");

    read_one(r, &sb, &m);
    assert_int_equal(m.type, PROTO_RESPONSE);
    assert_int_equal(m.msgid, 9);
    assert_null(m.method);
    assert_int_equal(m.error->type, MSGPACK_OBJECT_NIL);
    assert_int_equal(proto_get_str(m.result, "status", &s, &len, NULL), 0);
    assert_true(proto_str_eq(s, len, "exited"));
    v = proto_map_get(m.result, "exit_code");
    assert_int_equal(v->type, MSGPACK_OBJECT_NEGATIVE_INTEGER);
    assert_int_equal(v->via.i64, -3);
    assert_int_equal(proto_get_u64(m.result, "wall_ms", &u, NULL), 0);
    assert_int_equal(u, 1234);
    assert_int_equal(proto_get_f64(m.result, "ratio", &d, NULL), 0);
    assert_true(d == 0.25);
    assert_int_equal(proto_get_bool(m.result, "truncated", &b, NULL), 0);
    assert_false(b);
    assert_int_equal(proto_map_get(m.result, "signal")->type, MSGPACK_OBJECT_NIL);

    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_pack_response_err__round_trip(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    const char *s;
    uint32_t len;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_response_err(&pk, 77, "unknown_pool", "no pool named 'x'");

    read_one(r, &sb, &m);
    assert_int_equal(m.type, PROTO_RESPONSE);
    assert_int_equal(m.msgid, 77);
    assert_int_equal(m.error->type, MSGPACK_OBJECT_MAP);
    assert_int_equal(m.error->via.map.size, 2);
    assert_int_equal(proto_get_str(m.error, "code", &s, &len, NULL), 0);
    assert_true(proto_str_eq(s, len, "unknown_pool"));
    assert_int_equal(proto_get_str(m.error, "message", &s, &len, NULL), 0);
    assert_true(proto_str_eq(s, len, "no pool named 'x'"));
    assert_int_equal(m.result->type, MSGPACK_OBJECT_NIL);

    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_pack_notify__round_trip(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    const msgpack_object *p;
    static const char out[] = "hello\0world";

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "exec.stdout");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, 5);
    msgpack_pack_bin_with_body(&pk, out, sizeof(out));

    read_one(r, &sb, &m);
    assert_int_equal(m.type, PROTO_NOTIFY);
    assert_true(proto_str_eq(m.method, m.method_len, "exec.stdout"));
    p = m.params;
    assert_int_equal(p->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(p->via.array.ptr[0].via.u64, 5);
    assert_int_equal(p->via.array.ptr[1].type, MSGPACK_OBJECT_BIN);
    assert_int_equal(p->via.array.ptr[1].via.bin.size, sizeof(out));
    assert_memory_equal(p->via.array.ptr[1].via.bin.ptr, out, sizeof(out));

    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

/* Builds {"s": "str", "b": bin "raw", "i": -1, "u": 5, "f": 2.5, "t": true, "z": nil,
 * "nan": NaN, "inf": inf, "big": 2^64-1} and decodes it into m. */
static const msgpack_object *accessor_map(struct proto_reader *r, struct proto_msg *m)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "x");
    msgpack_pack_map(&pk, 10);
    proto_pack_kv_str(&pk, "s", "str");
    proto_pack_cstr(&pk, "b");
    msgpack_pack_bin_with_body(&pk, "raw", 3);
    proto_pack_kv_i64(&pk, "i", -1);
    proto_pack_kv_u64(&pk, "u", 5);
    proto_pack_kv_f64(&pk, "f", 2.5);
    proto_pack_kv_bool(&pk, "t", true);
    proto_pack_kv_nil(&pk, "z");
    proto_pack_kv_f64(&pk, "nan", NAN);
    proto_pack_cstr(&pk, "inf");
    msgpack_pack_float(&pk, INFINITY);
    proto_pack_kv_u64(&pk, "big", UINT64_MAX);
    read_one(r, &sb, m);
    msgpack_sbuffer_destroy(&sb);
    return proto_params_arg0(m->params); /* a bare map: itself */
}

static void proto_get_str__right_wrong_and_missing(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    const msgpack_object *map = accessor_map(r, &m);
    const char *s = NULL;
    uint32_t len = 0;

    assert_int_equal(proto_get_str(map, "s", &s, &len, &e), 0);
    assert_true(proto_str_eq(s, len, "str"));
    assert_int_equal(proto_get_str(map, "u", &s, &len, &e), -EINVAL);
    assert_string_equal(e.msg, "'u' must be a string");
    assert_int_equal(proto_get_str(map, "b", &s, &len, &e), -EINVAL);
    assert_int_equal(proto_get_str(map, "nope", &s, &len, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "'nope'"));
    /* nil is the same as absent, so clients may send it for "use the default". */
    assert_int_equal(proto_get_str(map, "z", &s, &len, &e), -ENOENT);
    assert_int_equal(proto_get_str(&m.params->via.map.ptr[0].val, "s", &s, &len, NULL), -ENOENT);
    assert_int_equal(proto_get_str(NULL, "s", &s, &len, NULL), -ENOENT);

    proto_msg_done(&m);
    proto_reader_free(r);
}

static void proto_get_u64__right_wrong_and_missing(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    const msgpack_object *map = accessor_map(r, &m);
    uint64_t u = 0;

    assert_int_equal(proto_get_u64(map, "u", &u, &e), 0);
    assert_int_equal(u, 5);
    assert_int_equal(proto_get_u64(map, "big", &u, &e), 0);
    assert_true(u == UINT64_MAX);
    u = 42;
    assert_int_equal(proto_get_u64(map, "i", &u, &e), -EINVAL);
    assert_string_equal(e.msg, "'i' must be a non-negative integer");
    assert_int_equal(u, 42); /* untouched on failure */
    assert_int_equal(proto_get_u64(map, "f", &u, &e), -EINVAL);
    assert_int_equal(proto_get_u64(map, "s", &u, &e), -EINVAL);
    assert_int_equal(proto_get_u64(map, "missing", &u, &e), -ENOENT);

    proto_msg_done(&m);
    proto_reader_free(r);
}

static void proto_get_f64__ints_floats_and_nan_rejection(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    const msgpack_object *map = accessor_map(r, &m);
    double d = 0;

    assert_int_equal(proto_get_f64(map, "f", &d, &e), 0);
    assert_true(d == 2.5);
    assert_int_equal(proto_get_f64(map, "u", &d, &e), 0);
    assert_true(d == 5.0);
    assert_int_equal(proto_get_f64(map, "i", &d, &e), 0);
    assert_true(d == -1.0);
    d = 7;
    assert_int_equal(proto_get_f64(map, "nan", &d, &e), -EINVAL);
    assert_string_equal(e.msg, "'nan' must be a finite number");
    assert_true(d == 7);
    assert_int_equal(proto_get_f64(map, "inf", &d, &e), -EINVAL);
    assert_int_equal(proto_get_f64(map, "t", &d, &e), -EINVAL);
    assert_int_equal(proto_get_f64(map, "s", &d, &e), -EINVAL);
    assert_int_equal(proto_get_f64(map, "gone", &d, &e), -ENOENT);

    proto_msg_done(&m);
    proto_reader_free(r);
}

static void proto_get_bool__right_wrong_and_missing(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    const msgpack_object *map = accessor_map(r, &m);
    bool b = false;

    assert_int_equal(proto_get_bool(map, "t", &b, &e), 0);
    assert_true(b);
    assert_int_equal(proto_get_bool(map, "u", &b, &e), -EINVAL);
    assert_string_equal(e.msg, "'u' must be a boolean");
    assert_int_equal(proto_get_bool(map, "z", &b, &e), -ENOENT);
    assert_int_equal(proto_get_bool(map, "x", &b, NULL), -ENOENT);

    proto_msg_done(&m);
    proto_reader_free(r);
}

static void proto_map_get__non_map_and_missing(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    const msgpack_object *map = accessor_map(r, &m);

    assert_non_null(proto_map_get(map, "s"));
    assert_null(proto_map_get(map, "S"));
    assert_null(proto_map_get(map, "ss"));
    assert_null(proto_map_get(map, ""));
    assert_null(proto_map_get(NULL, "s"));
    assert_null(proto_map_get(proto_map_get(map, "s"), "s"));

    proto_msg_done(&m);
    proto_reader_free(r);
}

#define STR_OBJ(lit)                                                                               \
    {                                                                                              \
        .type = MSGPACK_OBJECT_STR, .via.str = { sizeof(lit) - 1, (lit) }                          \
    }

static void proto_keys_check__known_unknown_and_not_a_map(void **state)
{
    (void)state;
    static const char *const keys[] = {"argv", "pool"};
    char name[8];
    msgpack_object_kv kv[2] = {{.key = STR_OBJ("pool"), .val = {.type = MSGPACK_OBJECT_NIL}},
                               {.key = STR_OBJ("argv"), .val = {.type = MSGPACK_OBJECT_NIL}}};
    msgpack_object map = {.type = MSGPACK_OBJECT_MAP, .via.map = {2, kv}};
    msgpack_object arr = {.type = MSGPACK_OBJECT_ARRAY, .via.array = {0, NULL}};

    assert_int_equal(proto_keys_check(&map, keys, 2, name, sizeof(name)), 0);
    assert_int_equal(proto_keys_check(&map, NULL, 0, name, sizeof(name)), -ENOENT);
    assert_string_equal(name, "pool"); /* the first stranger */
    assert_int_equal(proto_keys_check(&arr, keys, 2, name, sizeof(name)), -EINVAL);
    assert_int_equal(proto_keys_check(NULL, keys, 2, name, sizeof(name)), -EINVAL);

    /* A name that does not fit, and a key that is no string, are "?". */
    kv[1].key = (msgpack_object)STR_OBJ("timeout_s");
    assert_int_equal(proto_keys_check(&map, keys, 2, name, sizeof(name)), -ENOENT);
    assert_string_equal(name, "?");
    kv[1].key = (msgpack_object){.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1};
    assert_int_equal(proto_keys_check(&map, keys, 2, name, sizeof(name)), -ENOENT);
    assert_string_equal(name, "?");
    /* A bin key is never known, but it is named. */
    kv[1].key = (msgpack_object){.type = MSGPACK_OBJECT_BIN, .via.bin = {4, "argv"}};
    assert_int_equal(proto_keys_check(&map, keys, 2, name, sizeof(name)), -ENOENT);
    assert_string_equal(name, "argv");
}

static void proto_params_arg0__array_map_and_empty(void **state)
{
    (void)state;
    msgpack_object items[2] = {{.type = MSGPACK_OBJECT_MAP}, {.type = MSGPACK_OBJECT_NIL}};
    msgpack_object arr = {.type = MSGPACK_OBJECT_ARRAY, .via.array = {2, items}};
    msgpack_object empty = {.type = MSGPACK_OBJECT_ARRAY, .via.array = {0, NULL}};
    msgpack_object map = {.type = MSGPACK_OBJECT_MAP, .via.map = {0, NULL}};

    assert_ptr_equal(proto_params_arg0(&arr), &items[0]);
    assert_ptr_equal(proto_params_arg0(&empty), &empty);
    assert_ptr_equal(proto_params_arg0(&map), &map);
    assert_null(proto_params_arg0(NULL));
}

static void proto_str_eq__lengths_and_empty(void **state)
{
    (void)state;
    assert_true(proto_str_eq("exec", 4, "exec"));
    assert_false(proto_str_eq("exec", 3, "exec"));
    assert_false(proto_str_eq("exec.stdin", 10, "exec"));
    assert_true(proto_str_eq(NULL, 0, ""));
    assert_false(proto_str_eq("a", 1, ""));
}

static void proto_obj_cstr__fits_too_long_nul_and_type(void **state)
{
    (void)state;
    char buf[6];
    msgpack_object str = {.type = MSGPACK_OBJECT_STR, .via.str = {5, "hello"}};
    msgpack_object bin = {.type = MSGPACK_OBJECT_BIN, .via.bin = {3, "abc"}};
    msgpack_object nul = {.type = MSGPACK_OBJECT_STR, .via.str = {3, "a\0b"}};
    msgpack_object num = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 1};

    assert_int_equal(proto_obj_cstr(&str, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "hello");
    assert_int_equal(proto_obj_cstr(&bin, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "abc");
    assert_int_equal(proto_obj_cstr(&str, buf, 5), -ENAMETOOLONG);
    assert_int_equal(proto_obj_cstr(&str, buf, 0), -ENAMETOOLONG);
    assert_int_equal(proto_obj_cstr(&nul, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(proto_obj_cstr(&num, buf, sizeof(buf)), -EINVAL);
}

static void proto_reader_next__reserved_c1_is_ebadmsg(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    static const unsigned char bytes[] = {0x94, 0x00, 0x01, 0xc1};

    assert_int_equal(next_of(r, bytes, sizeof(bytes), &m, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "0xc1"));
    proto_reader_free(r);
}

static void proto_reader_next__nesting_33_is_ebadmsg_32_accepted(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;

    /* The request array is level 1: params nested 31 deep reach exactly 32. */
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_request(&pk, 1, "deep");
    pack_nested_arrays(&pk, PROTO_MAX_DEPTH - 1);
    assert_int_equal(next_of(r, sb.data, sb.size, &m, &e), 1);
    proto_msg_done(&m);

    msgpack_sbuffer_clear(&sb);
    proto_pack_request(&pk, 2, "deeper");
    pack_nested_arrays(&pk, PROTO_MAX_DEPTH);
    assert_int_equal(next_of(r, sb.data, sb.size, &m, &e), -EBADMSG);
    assert_non_null(strstr(e.msg, "nesting"));
    proto_reader_free(r);

    /* An empty container at level 33 is refused too, and so is a bare 33-deep value. */
    r = reader(4096);
    msgpack_sbuffer_clear(&sb);
    for (int i = 0; i < PROTO_MAX_DEPTH; i++) {
        msgpack_pack_array(&pk, 1);
    }
    msgpack_pack_map(&pk, 0);
    assert_int_equal(next_of(r, sb.data, sb.size, &m, &e), -EBADMSG);
    proto_reader_free(r);
    msgpack_sbuffer_destroy(&sb);
}

static void proto_reader_next__array32_max_count_is_emsgsize(void **state)
{
    (void)state;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    struct err e = ERR_INIT;
    static const unsigned char bytes[] = {0xdd, 0xff, 0xff, 0xff, 0xff};

    /* Rejected from the 5-byte header alone, before any element arrives. */
    assert_int_equal(next_of(r, bytes, sizeof(bytes), &m, &e), -EMSGSIZE);
    assert_non_null(strstr(e.msg, "larger than"));
    proto_reader_free(r);
}

static void proto_reader_next__map32_inside_request_is_emsgsize(void **state)
{
    (void)state;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    /* [0, 1, "m", {2^31 entries...}: 2^32 elements. */
    static const unsigned char bytes[] = {0x94, 0x00, 0x01, 0xa1, 'm', 0xdf, 0x80, 0, 0, 0};

    assert_int_equal(next_of(r, bytes, sizeof(bytes), &m, NULL), -EMSGSIZE);
    proto_reader_free(r);
}

static void proto_reader_next__str32_one_gib_is_emsgsize(void **state)
{
    (void)state;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    static const unsigned char bytes[] = {0x93, 0x02, 0xdb, 0x40, 0x00, 0x00, 0x00};

    assert_int_equal(next_of(r, bytes, sizeof(bytes), &m, NULL), -EMSGSIZE);
    proto_reader_free(r);
}

/* A request [0, 1, "m", [bin]] with the bin sized so the message is exactly total bytes. */
static void pack_request_of_size(msgpack_sbuffer *sb, size_t total)
{
    msgpack_packer pk;
    static char zeros[8192];
    size_t overhead;

    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_sbuffer_clear(sb);
    proto_pack_request(&pk, 1, "m");
    msgpack_pack_array(&pk, 1);
    overhead = sb->size + 3; /* bin 16 header */
    assert_true(total > overhead + 255 && total - overhead < sizeof(zeros));
    msgpack_pack_bin_with_body(&pk, zeros, total - overhead);
    assert_int_equal(sb->size, total);
}

static void proto_reader_next__exactly_cap_accepted_one_over_rejected(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    struct proto_reader *r = reader(1000);
    struct proto_msg m;
    struct err e = ERR_INIT;

    msgpack_sbuffer_init(&sb);
    pack_request_of_size(&sb, 1000);
    assert_int_equal(next_of(r, sb.data, sb.size, &m, &e), 1);
    proto_msg_done(&m);
    pack_request_of_size(&sb, 1001);
    /* Known from the bin header, long before the body is buffered. */
    assert_int_equal(next_of(r, sb.data, 12, &m, &e), -EMSGSIZE);
    proto_reader_free(r);

    /* The same bound through element counts: a request with 992 nils is 1000 bytes... */
    r = reader(1000);
    msgpack_sbuffer_clear(&sb);
    {
        msgpack_packer pk;

        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        proto_pack_request(&pk, 1, "m");
        msgpack_pack_array(&pk, 1000 - sb.size - 3);
        for (size_t i = 0, n = 1000 - sb.size; i < n; i++) {
            msgpack_pack_nil(&pk);
        }
        assert_int_equal(sb.size, 1000);
    }
    assert_int_equal(next_of(r, sb.data, sb.size, &m, &e), 1);
    proto_msg_done(&m);
    /* ...and one more declared element is refused at its array header. */
    sb.data[7]++;
    assert_int_equal(next_of(r, sb.data, 8, &m, &e), -EMSGSIZE);
    proto_reader_free(r);
    msgpack_sbuffer_destroy(&sb);
}

static void proto_reader_next__fatal_error_is_sticky(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    static const unsigned char bad[] = {0xc1};
    static const unsigned char ok[] = {0x93, 0x02, 0xa1, 'x', 0x90};
    char *buf;
    size_t len;

    assert_int_equal(next_of(r, bad, sizeof(bad), &m, &e), -EBADMSG);
    e = (struct err)ERR_INIT;
    assert_int_equal(proto_reader_next(r, &m, &e), -EBADMSG);
    assert_int_equal(e.code, -EBADMSG);
    assert_int_equal(proto_reader_buffer(r, 64, &buf, &len), -EBADMSG);
    assert_int_equal(next_of(r, ok, sizeof(ok), &m, NULL), -EBADMSG);
    proto_reader_free(r);
}

static void proto_reader_next__not_rpc_is_eproto_and_stream_continues(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    /* 5; {}; [3, 1]; [1, "x", nil, nil]; [2, 5, []]; [2, "a"]; then a valid notification. */
    static const unsigned char bytes[] = {0x05, 0x80, 0x92, 0x03, 0x01, 0x94, 0x01, 0xa1,
                                          'x',  0xc0, 0xc0, 0x93, 0x02, 0x05, 0x90, 0x92,
                                          0x02, 0xa1, 'a',  0x93, 0x02, 0xa1, 'y',  0x90};

    assert_int_equal(feed(r, bytes, sizeof(bytes), 0), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(proto_reader_next(r, &m, &e), -EPROTO);
        assert_int_equal(m.type, PROTO_NOTIFY); /* nothing to answer */
        assert_null(m.method);
        assert_null(m.params);
        proto_msg_done(&m);
    }
    assert_int_equal(proto_reader_next(r, &m, &e), -EPROTO);
    assert_null(m.method);
    proto_msg_done(&m); /* -EPROTO keeps the value until then */
    assert_int_equal(proto_reader_next(r, &m, &e), 1);
    assert_int_equal(m.type, PROTO_NOTIFY);
    assert_true(proto_str_eq(m.method, m.method_len, "y"));
    proto_msg_done(&m);
    assert_int_equal(proto_reader_next(r, &m, &e), 0);
    proto_reader_free(r);
}

/* msgpack-c leaves an empty str or bin with a NULL pointer; the reader points every one, at
 * any depth, at an empty string, since callers hand them to memcpy and memcmp. */
static void proto_reader_next__empty_str_and_bin_are_not_null(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    /* [0, 1, "", [{"": ""}, bin8 of 0, ["", [bin8 of 0]]]] */
    static const unsigned char bytes[] = {0x94, 0x00, 0x01, 0xa0, 0x93, 0x81, 0xa0, 0xa0,
                                          0xc4, 0x00, 0x92, 0xa0, 0x91, 0xc4, 0x00};
    assert_int_equal(feed(r, bytes, sizeof(bytes), 0), 0);
    assert_int_equal(proto_reader_next(r, &m, &e), 1);
    assert_int_equal(m.type, PROTO_REQUEST);
    assert_int_equal(m.method_len, 0);
    assert_non_null(m.method);
    assert_true(proto_str_eq(m.method, m.method_len, ""));
    const msgpack_object *p = m.params;
    assert_int_equal(p->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(p->via.array.size, 3);
    const msgpack_object_kv *kv = &p->via.array.ptr[0].via.map.ptr[0];
    assert_non_null(kv->key.via.str.ptr);
    assert_non_null(kv->val.via.str.ptr);
    assert_int_equal(p->via.array.ptr[1].type, MSGPACK_OBJECT_BIN);
    assert_non_null(p->via.array.ptr[1].via.bin.ptr);
    const msgpack_object *inner = &p->via.array.ptr[2];
    assert_non_null(inner->via.array.ptr[0].via.str.ptr);
    assert_non_null(inner->via.array.ptr[1].via.array.ptr[0].via.bin.ptr);
    proto_msg_done(&m);
    proto_reader_free(r);
}

/* Packs in through proto_pack_textn; checks the str that comes out is want. */
static void text_is(const char *in, size_t n, const char *want)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_textn(&pk, in, n);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    assert_int_equal(off, sb.size);
    assert_int_equal(u.data.type, MSGPACK_OBJECT_STR);
    assert_int_equal(u.data.via.str.size, strlen(want));
    assert_memory_equal(u.data.via.str.size ? u.data.via.str.ptr : "", want, strlen(want));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
}

#define TEXT_IS(in, want) text_is(in, sizeof(in) - 1, want)

/* Text from what sbxd does not control reaches clients as valid UTF-8: valid sequences as
 * they are, each other byte as '?', so that strict decoders (Python's msgpack) never fail. */
static void proto_pack_textn__valid_utf8_out(void **state)
{
    (void)state;
    TEXT_IS("", "");
    TEXT_IS("plain ascii", "plain ascii");
    TEXT_IS("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    TEXT_IS("a\xffz", "a?z");
    TEXT_IS("\xc0\x80", "??");           /* overlong NUL */
    TEXT_IS("\xe0\x80\xaf", "???");      /* overlong '/' */
    TEXT_IS("\xed\xa0\x80", "???");      /* a surrogate */
    TEXT_IS("\xf4\x90\x80\x80", "????"); /* above U+10FFFF */
    TEXT_IS("ok\xc3", "ok?");            /* cut short at the end */
    TEXT_IS("\xe2\x82x\xe2\x82\xac", "??x\xe2\x82\xac");
    assert_int_equal(proto_utf8_seq("\xf0\x9f\x98\x80", 4), 4);
    assert_int_equal(proto_utf8_seq("\xf0\x9f\x98", 3), 0);
    assert_int_equal(proto_utf8_seq("\x80", 1), 0);
    /* NULL packs nil. */
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_text(&pk, NULL);
    assert_int_equal(sb.size, 1);
    assert_int_equal((unsigned char)sb.data[0], 0xc0);
    msgpack_sbuffer_destroy(&sb);
}

static void proto_reader_next__bad_request_keeps_msgid(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    struct err e = ERR_INIT;
    /* [0, 42, 5, []]; [0, 43]; [0, 44, "m"]; [0, 45, "m", [], 1] */
    static const unsigned char bytes[] = {0x94, 0x00, 0x2a, 0x05, 0x90, 0x92, 0x00,
                                          0x2b, 0x93, 0x00, 0x2c, 0xa1, 'm',  0x95,
                                          0x00, 0x2d, 0xa1, 'm',  0x90, 0x01};

    assert_int_equal(feed(r, bytes, sizeof(bytes), 0), 0);
    for (uint32_t id = 42; id <= 45; id++) {
        assert_int_equal(proto_reader_next(r, &m, &e), -EPROTO);
        assert_int_equal(m.type, PROTO_REQUEST);
        assert_int_equal(m.msgid, id);
        assert_null(m.method);
        assert_null(m.params);
        proto_msg_done(&m);
    }
    assert_int_equal(proto_reader_next(r, &m, &e), 0);
    proto_reader_free(r);
}

/* The error notification proto_pack_error_notify packs, decoded: its one map. */
static const msgpack_object *error_notify_map(struct proto_reader *r, msgpack_sbuffer *sb,
                                              struct proto_msg *m)
{
    read_one(r, sb, m);
    assert_int_equal(m->type, PROTO_NOTIFY);
    assert_true(proto_str_eq(m->method, m->method_len, "error"));
    assert_int_equal(m->params->type, MSGPACK_OBJECT_ARRAY);
    assert_int_equal(m->params->via.array.size, 1);
    assert_int_equal(m->params->via.array.ptr[0].type, MSGPACK_OBJECT_MAP);
    return &m->params->via.array.ptr[0];
}

static void proto_reader_next__msgid_outside_u32_names_the_request(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_reader *out = reader(4096);
    struct proto_msg m, n;
    const char *s;
    uint32_t len;
    /* [0, 2^32, "m", []]; [0, -1, "m", []]; [0, 1.0, "m", []]; [0]; [0, "x"] */
    /* clang-format off */
    static const unsigned char bytes[] = {
        0x94, 0x00, 0xcf, 0, 0, 0, 1, 0, 0, 0, 0, 0xa1, 'm', 0x90,
        0x94, 0x00, 0xff, 0xa1, 'm', 0x90,
        0x94, 0x00, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xa1, 'm', 0x90,
        0x91, 0x00,
        0x92, 0x00, 0xa1, 'x'};
    /* clang-format on */
    static const msgpack_object_type types[] = {
        MSGPACK_OBJECT_POSITIVE_INTEGER, MSGPACK_OBJECT_NEGATIVE_INTEGER, MSGPACK_OBJECT_FLOAT64};

    assert_int_equal(feed(r, bytes, sizeof(bytes), 0), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(proto_reader_next(r, &m, NULL), -EPROTO);
        assert_int_equal(m.type, PROTO_REQUEST);
        assert_true(m.no_msgid);
        assert_null(m.params);
        if (i < 3) {
            assert_non_null(m.raw_msgid);
            assert_int_equal(m.raw_msgid->type, types[i]);
            assert_true(proto_str_eq(m.method, m.method_len, "m"));
        } else {
            assert_null(m.method);
        }
        if (i == 3) {
            assert_null(m.raw_msgid);
        }
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        proto_pack_error_notify(&pk, "bad_request", "no msgid", m.method, m.method_len,
                                m.raw_msgid);
        const msgpack_object *em = error_notify_map(out, &sb, &n);
        assert_int_equal(proto_get_str(em, "code", &s, &len, NULL), 0);
        assert_true(proto_str_eq(s, len, "bad_request"));
        assert_int_equal(proto_get_str(em, "message", &s, &len, NULL), 0);
        assert_true(proto_str_eq(s, len, "no msgid"));
        assert_int_equal(proto_map_get(em, "method") != NULL, i < 3);
        assert_int_equal(proto_map_get(em, "msgid") != NULL, i != 3);
        const msgpack_object *id = proto_map_get(em, "msgid");
        if (i == 0) {
            assert_int_equal(id->via.u64, (uint64_t)1 << 32);
        } else if (i == 1) {
            assert_int_equal(id->via.i64, -1);
        } else if (i == 2) {
            assert_true(id->via.f64 == 1.0);
        } else if (i == 4) {
            assert_int_equal(proto_get_str(em, "msgid", &s, &len, NULL), 0);
            assert_true(proto_str_eq(s, len, "x"));
        }
        proto_msg_done(&n);
        msgpack_sbuffer_destroy(&sb);
        proto_msg_done(&m);
    }
    assert_int_equal(proto_reader_next(r, &m, NULL), 0);
    proto_reader_free(out);
    proto_reader_free(r);
}

static void proto_pack_error_notify__echoes_are_bounded(void **state)
{
    (void)state;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    char big[200];
    const char *s;
    uint32_t len;

    memset(big, 'a', sizeof(big));
    big[3] = (char)0xff; /* not UTF-8: sent as '?' */
    /* A long bin msgid is cut to 64 bytes, a long method too; an array msgid is left out. */
    msgpack_object bin = {.type = MSGPACK_OBJECT_BIN};
    bin.via.bin.ptr = big;
    bin.via.bin.size = sizeof(big);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_notify(&pk, "bad_request", "m", big, sizeof(big), &bin);
    const msgpack_object *em = error_notify_map(r, &sb, &m);
    assert_int_equal(em->via.map.size, 4);
    assert_int_equal(proto_get_str(em, "method", &s, &len, NULL), 0);
    assert_int_equal(len, 64);
    assert_memory_equal(s, "aaa?aaaa", 8);
    const msgpack_object *id = proto_map_get(em, "msgid");
    assert_int_equal(id->type, MSGPACK_OBJECT_BIN);
    assert_int_equal(id->via.bin.size, 64);
    assert_memory_equal(id->via.bin.ptr, big, 64);
    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);

    msgpack_object arr = {.type = MSGPACK_OBJECT_ARRAY};
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_error_notify(&pk, NULL, NULL, NULL, 0, &arr);
    em = error_notify_map(r, &sb, &m);
    assert_int_equal(em->via.map.size, 2);
    assert_int_equal(proto_get_str(em, "code", &s, &len, NULL), 0);
    assert_true(proto_str_eq(s, len, "internal"));
    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_reader_next__random_garbage_never_crashes(void **state)
{
    (void)state;
    unsigned char bytes[256];
    int counts[5] = {0};

    for (int iter = 0; iter < 20000; iter++) {
        struct proto_reader *r = reader(1 + rnd_below(4096));
        size_t len = 1 + rnd_below(sizeof(bytes));
        size_t chunk = 1 + rnd_below(len);
        struct proto_msg m;
        int rc;

        for (size_t i = 0; i < len; i++) {
            bytes[i] = (unsigned char)rnd();
        }
        rc = feed(r, bytes, len, chunk);
        assert_true(rc == 0 || rc == -EMSGSIZE);
        for (int guard = 0; rc == 0 && guard <= 256; guard++) {
            rc = proto_reader_next(r, &m, NULL);
            proto_msg_done(&m);
            if (rc == 1) {
                counts[0]++;
                rc = 0;
                continue;
            }
            if (rc == -EPROTO) {
                counts[1]++;
                rc = 0;
                continue;
            }
            break;
        }
        assert_true(rc == 0 || rc == -EBADMSG || rc == -EMSGSIZE);
        counts[rc == 0 ? 2 : rc == -EBADMSG ? 3 : 4]++;
        proto_reader_free(r);
    }
    /* The generator must actually reach the interesting outcomes. */
    assert_true(counts[1] > 0);
    assert_true(counts[3] > 0);
    assert_true(counts[4] > 0);
}

/* A 1 MiB request: a big bin plus many small nested values, so the scanner's stack and skip
 * state both cross read boundaries. */
static void pack_large_request(msgpack_sbuffer *sb, size_t blob)
{
    msgpack_packer pk;
    char *data = malloc(blob);

    assert_non_null(data);
    for (size_t i = 0; i < blob; i++) {
        data[i] = (char)(i * 31);
    }
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    proto_pack_request(&pk, 123, "big");
    msgpack_pack_array(&pk, 1);
    msgpack_pack_map(&pk, 2);
    proto_pack_cstr(&pk, "blob");
    msgpack_pack_bin_with_body(&pk, data, blob);
    proto_pack_cstr(&pk, "items");
    msgpack_pack_array(&pk, 5000);
    for (int i = 0; i < 5000; i++) {
        msgpack_pack_map(&pk, 2);
        proto_pack_kv_u64(&pk, "i", (uint64_t)i * 977);
        proto_pack_cstr(&pk, "l");
        msgpack_pack_array(&pk, 2);
        msgpack_pack_int64(&pk, -i);
        proto_pack_cstr(&pk, "abcdefgh");
    }
    free(data);
}

static void proto_reader_next__byte_at_a_time_large_message(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    const msgpack_object *items;
    int rc = 0;

    msgpack_sbuffer_init(&sb);
    pack_large_request(&sb, 900 * 1024);
    assert_true(sb.size <= 1 << 20);
    for (size_t i = 0; i < sb.size; i++) {
        char *buf;
        size_t len;

        assert_int_equal(proto_reader_buffer(r, 1, &buf, &len), 0);
        /* The buffer never grows past one message plus the slack plus this read. */
        assert_true(proto_reader_pending(r) + len <= (1 << 20) + SLACK + 1);
        buf[0] = sb.data[i];
        proto_reader_consumed(r, 1);
        rc = proto_reader_next(r, &m, NULL);
        if (i + 1 < sb.size) {
            assert_int_equal(rc, 0);
        }
    }
    assert_int_equal(rc, 1);
    assert_int_equal(m.msgid, 123);
    items = proto_map_get(proto_params_arg0(m.params), "items");
    assert_non_null(items);
    assert_int_equal(items->via.array.size, 5000);
    assert_int_equal(proto_map_get(proto_params_arg0(m.params), "blob")->via.bin.size, 900 * 1024);
    assert_int_equal(proto_reader_pending(r), 0);
    proto_msg_done(&m);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_reader_next__several_messages_in_one_buffer(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_request(&pk, 1, "ping");
    msgpack_pack_array(&pk, 0);
    proto_pack_notify(&pk, "exec.stdin");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, 1);
    msgpack_pack_bin_with_body(&pk, "abc", 3);
    proto_pack_response_err(&pk, 3, "busy", "queue full");
    /* And the first byte of a fourth one. */
    proto_pack_request(&pk, 4, "pools");

    assert_int_equal(feed(r, sb.data, sb.size - 8, 0), 0);
    assert_int_equal(proto_reader_next(r, &m, NULL), 1);
    assert_int_equal(m.type, PROTO_REQUEST);
    assert_true(proto_str_eq(m.method, m.method_len, "ping"));
    proto_msg_done(&m);
    assert_int_equal(proto_reader_next(r, &m, NULL), 1);
    assert_int_equal(m.type, PROTO_NOTIFY);
    assert_true(proto_str_eq(m.method, m.method_len, "exec.stdin"));
    proto_msg_done(&m);
    assert_int_equal(proto_reader_next(r, &m, NULL), 1);
    assert_int_equal(m.type, PROTO_RESPONSE);
    assert_int_equal(m.msgid, 3);
    proto_msg_done(&m);
    assert_int_equal(proto_reader_next(r, &m, NULL), 0);
    assert_int_equal(proto_reader_pending(r), 1);
    /* The rest arrives: the partial message survives compaction. */
    assert_int_equal(feed(r, sb.data + sb.size - 8, 8, 0), 0);
    assert_int_equal(feed(r, "\x90", 1, 0), 0);
    assert_int_equal(proto_reader_next(r, &m, NULL), 1);
    assert_int_equal(m.msgid, 4);
    assert_true(proto_str_eq(m.method, m.method_len, "pools"));
    proto_msg_done(&m);
    assert_int_equal(proto_reader_pending(r), 0);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_reader_next__message_outlives_compaction(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(4096);
    struct proto_msg m1, m2;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_notify(&pk, "first");
    proto_pack_cstr(&pk, "payload-one");
    proto_pack_notify(&pk, "second");
    assert_int_equal(feed(r, sb.data, sb.size, 0), 0);
    assert_int_equal(proto_reader_next(r, &m1, NULL), 1);
    /* The reader moves its pending bytes to the front and overwrites the rest. */
    msgpack_sbuffer_clear(&sb);
    proto_pack_cstr(&pk, "payload-two-that-is-longer");
    assert_int_equal(feed(r, sb.data, sb.size, 0), 0);
    assert_int_equal(proto_reader_next(r, &m2, NULL), 1);
    assert_true(proto_str_eq(m1.method, m1.method_len, "first"));
    assert_true(proto_str_eq(m1.params->via.str.ptr, m1.params->via.str.size, "payload-one"));
    assert_true(proto_str_eq(m2.method, m2.method_len, "second"));
    proto_msg_done(&m1);
    proto_msg_done(&m2);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

static void proto_reader_buffer__pending_over_cap_is_emsgsize(void **state)
{
    (void)state;
    struct proto_reader *r = reader(100);
    char junk[100 + SLACK + 1];
    char *buf;
    size_t len;

    /* Many tiny messages left unread: a caller that does not drain cannot grow the buffer. */
    memset(junk, 0xc0, sizeof(junk));
    assert_int_equal(feed(r, junk, sizeof(junk), 0), 0);
    assert_int_equal(proto_reader_buffer(r, 1, &buf, &len), -EMSGSIZE);
    proto_reader_free(r);
}

static void proto_reader_buffer__stays_bounded_and_shrinks(void **state)
{
    (void)state;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    struct proto_reader *r = reader(1 << 20);
    struct proto_msg m;
    char *buf;
    size_t len;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (int i = 0; i < 10000; i++) {
        msgpack_sbuffer_clear(&sb);
        proto_pack_request(&pk, (uint32_t)i, "ping");
        msgpack_pack_array(&pk, 0);
        assert_int_equal(feed(r, sb.data, sb.size, 3), 0);
        assert_int_equal(proto_reader_next(r, &m, NULL), 1);
        assert_int_equal(m.msgid, (uint32_t)i);
        proto_msg_done(&m);
        assert_int_equal(proto_reader_buffer(r, 3, &buf, &len), 0);
        assert_true(len <= 4096); /* compaction keeps a small stream in the first buffer */
    }
    msgpack_sbuffer_clear(&sb);
    pack_large_request(&sb, 900 * 1024);
    assert_int_equal(feed(r, sb.data, sb.size, 65536), 0);
    assert_int_equal(proto_reader_next(r, &m, NULL), 1);
    proto_msg_done(&m);
    assert_int_equal(proto_reader_buffer(r, 65536, &buf, &len), 0);
    assert_true(len >= 65536 && len < 256 * 1024);
    msgpack_sbuffer_destroy(&sb);
    proto_reader_free(r);
}

/* Packs a random value with the canonical (smallest) encodings msgpack-c also uses when it
 * packs a decoded object back, so equality of bytes is equality of values. */
static void pack_random(msgpack_packer *pk, int depth)
{
    static char raw[70000];
    unsigned kind = (unsigned)rnd_below(depth > 0 ? 12 : 10);
    size_t len;

    if (raw[1] == 0) {
        for (size_t i = 0; i < sizeof(raw); i++) {
            raw[i] = (char)('a' + i % 26);
        }
    }
    switch (kind) {
    case 0:
        msgpack_pack_nil(pk);
        break;
    case 1:
        if (rnd() & 1) {
            msgpack_pack_true(pk);
        } else {
            msgpack_pack_false(pk);
        }
        break;
    case 2:
        msgpack_pack_uint64(pk, rnd() >> rnd_below(64));
        break;
    case 3:
        msgpack_pack_int64(pk, -(int64_t)(rnd() >> (1 + rnd_below(63))) - 1);
        break;
    case 4:
        msgpack_pack_double(pk, (double)(int64_t)rnd() / 1024.0);
        break;
    case 5:
        msgpack_pack_float(pk, (float)rnd_below(100000) / 8.0f);
        break;
    case 6:
    case 7:
        len = rnd_below(100) < 1 ? rnd_below(sizeof(raw)) : rnd_below(300);
        if (kind == 6) {
            msgpack_pack_str_with_body(pk, raw, len);
        } else {
            msgpack_pack_bin_with_body(pk, raw, len);
        }
        break;
    case 8:
        len = (size_t)1 << rnd_below(5); /* fixext 1..16 */
        if (rnd() & 1) {
            len = 1 + rnd_below(40); /* or ext 8 with odd sizes */
        }
        msgpack_pack_ext_with_body(pk, raw, len, (int8_t)rnd_below(100));
        break;
    case 9:
        msgpack_pack_array(pk, 0);
        break;
    case 10:
        len = rnd_below(100) < 2 ? 20 + rnd_below(200) : rnd_below(5);
        msgpack_pack_array(pk, len);
        for (size_t i = 0; i < len; i++) {
            pack_random(pk, depth - 1);
        }
        break;
    default:
        len = rnd_below(5);
        msgpack_pack_map(pk, len);
        for (size_t i = 0; i < len; i++) {
            char key[16];
            int n = snprintf(key, sizeof(key), "k%zu", i);

            msgpack_pack_str_with_body(pk, key, (size_t)n);
            pack_random(pk, depth - 1);
        }
        break;
    }
}

static void pack_random_message(msgpack_packer *pk, enum proto_type type)
{
    switch (type) {
    case PROTO_REQUEST:
        proto_pack_request(pk, (uint32_t)rnd(), "method");
        msgpack_pack_array(pk, 1);
        /* request + params arrays, then at most PROTO_MAX_DEPTH - 3 more levels */
        pack_random(pk, 1 + (int)rnd_below(PROTO_MAX_DEPTH - 3));
        break;
    case PROTO_RESPONSE:
        if (rnd() & 1) {
            proto_pack_response_err(pk, (uint32_t)rnd(), "internal", "boom");
        } else {
            proto_pack_response_ok(pk, (uint32_t)rnd());
            pack_random(pk, 1 + (int)rnd_below(6));
        }
        break;
    case PROTO_NOTIFY:
        proto_pack_notify(pk, "exec.stdout");
        pack_random(pk, 1 + (int)rnd_below(6));
        break;
    }
}

static void proto_reader_next__random_messages_random_splits(void **state)
{
    (void)state;
    enum { COUNT = 1000, MAX = 1 << 20 };
    msgpack_sbuffer all, again;
    msgpack_packer pk, pk2;
    struct proto_reader *r = reader(MAX);
    size_t offs[COUNT + 1];
    enum proto_type types[COUNT];
    size_t fed = 0;
    int got = 0;

    msgpack_sbuffer_init(&all);
    msgpack_sbuffer_init(&again);
    msgpack_packer_init(&pk, &all, msgpack_sbuffer_write);
    msgpack_packer_init(&pk2, &again, msgpack_sbuffer_write);
    for (int i = 0; i < COUNT; i++) {
        offs[i] = all.size;
        do {
            /* A rare random tree can exceed the cap: draw again. */
            all.size = offs[i];
            types[i] = (enum proto_type)rnd_below(3);
            pack_random_message(&pk, types[i]);
        } while (all.size - offs[i] > MAX);
    }
    offs[COUNT] = all.size;

    while (fed < all.size || got < COUNT) {
        size_t n = 1 + rnd_below(rnd_below(4) == 0 ? 70000 : 300);
        struct proto_msg m;
        char *buf;
        size_t len;
        int rc;

        if (n > all.size - fed) {
            n = all.size - fed;
        }
        /* One read, as the server does it: ask for a buffer, fill part of it, drain. */
        assert_int_equal(proto_reader_buffer(r, n, &buf, &len), 0);
        assert_true(len >= n);
        memcpy(buf, all.data + fed, n);
        proto_reader_consumed(r, n);
        fed += n;
        while ((rc = proto_reader_next(r, &m, NULL)) == 1) {
            assert_true(got < COUNT);
            assert_int_equal(m.type, types[got]);
            msgpack_sbuffer_clear(&again);
            msgpack_pack_object(&pk2, m.unpacked.data);
            assert_int_equal(again.size, offs[got + 1] - offs[got]);
            assert_memory_equal(again.data, all.data + offs[got], again.size);
            proto_msg_done(&m);
            got++;
        }
        assert_int_equal(rc, 0);
    }
    assert_int_equal(got, COUNT);
    assert_int_equal(proto_reader_pending(r), 0);
    msgpack_sbuffer_destroy(&all);
    msgpack_sbuffer_destroy(&again);
    proto_reader_free(r);
}

static void proto_reader_free__accepts_null(void **state)
{
    (void)state;
    struct proto_msg m;

    assert_null(proto_reader_free(NULL));
    memset(&m, 0, sizeof(m));
    proto_msg_done(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(proto_pack_request__round_trip_nested_params),
        cmocka_unit_test(proto_pack_response_ok__round_trip),
        cmocka_unit_test(proto_pack_response_err__round_trip),
        cmocka_unit_test(proto_pack_notify__round_trip),
        cmocka_unit_test(proto_get_str__right_wrong_and_missing),
        cmocka_unit_test(proto_get_u64__right_wrong_and_missing),
        cmocka_unit_test(proto_get_f64__ints_floats_and_nan_rejection),
        cmocka_unit_test(proto_get_bool__right_wrong_and_missing),
        cmocka_unit_test(proto_map_get__non_map_and_missing),
        cmocka_unit_test(proto_keys_check__known_unknown_and_not_a_map),
        cmocka_unit_test(proto_params_arg0__array_map_and_empty),
        cmocka_unit_test(proto_str_eq__lengths_and_empty),
        cmocka_unit_test(proto_obj_cstr__fits_too_long_nul_and_type),
        cmocka_unit_test(proto_reader_next__reserved_c1_is_ebadmsg),
        cmocka_unit_test(proto_reader_next__nesting_33_is_ebadmsg_32_accepted),
        cmocka_unit_test(proto_reader_next__array32_max_count_is_emsgsize),
        cmocka_unit_test(proto_reader_next__map32_inside_request_is_emsgsize),
        cmocka_unit_test(proto_reader_next__str32_one_gib_is_emsgsize),
        cmocka_unit_test(proto_reader_next__exactly_cap_accepted_one_over_rejected),
        cmocka_unit_test(proto_reader_next__fatal_error_is_sticky),
        cmocka_unit_test(proto_reader_next__not_rpc_is_eproto_and_stream_continues),
        cmocka_unit_test(proto_reader_next__empty_str_and_bin_are_not_null),
        cmocka_unit_test(proto_pack_textn__valid_utf8_out),
        cmocka_unit_test(proto_reader_next__bad_request_keeps_msgid),
        cmocka_unit_test(proto_reader_next__msgid_outside_u32_names_the_request),
        cmocka_unit_test(proto_pack_error_notify__echoes_are_bounded),
        cmocka_unit_test(proto_reader_next__random_garbage_never_crashes),
        cmocka_unit_test(proto_reader_next__byte_at_a_time_large_message),
        cmocka_unit_test(proto_reader_next__several_messages_in_one_buffer),
        cmocka_unit_test(proto_reader_next__message_outlives_compaction),
        cmocka_unit_test(proto_reader_buffer__pending_over_cap_is_emsgsize),
        cmocka_unit_test(proto_reader_buffer__stays_bounded_and_shrinks),
        cmocka_unit_test(proto_reader_next__random_messages_random_splits),
        cmocka_unit_test(proto_reader_free__accepts_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
