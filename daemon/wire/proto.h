/* SPDX-License-Identifier: MIT */
#pragma once
/* msgpack-rpc framing and codecs with hard size caps. No I/O, no daemon state: the caller
 * reads bytes into the reader's buffer and writes what the packers produce.
 *   request [0, msgid, method, params]   response [1, msgid, error, result]
 *   notification [2, method, params]
 * The reader never hands msgpack-c a message before it has checked, with its own resumable
 * scanner, that the whole message is buffered, below the cap, no deeper than PROTO_MAX_DEPTH,
 * and that no array or map declares more elements than bytes remain (so a 5-byte header can
 * never make the unpacker allocate gigabytes). */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

#define PROTO_MAX_DEPTH 32

enum proto_type {
    PROTO_REQUEST = 0,
    PROTO_RESPONSE = 1,
    PROTO_NOTIFY = 2,
};

/* One decoded message. Pointers point into `unpacked`, which the message owns until
 * proto_msg_done(). */
struct proto_msg {
    enum proto_type type;
    uint32_t msgid; /* request, response */
    /* -EPROTO, type PROTO_REQUEST: the msgid was missing or not an unsigned 32-bit integer,
     * so no response can name the request (msgid is 0 and means nothing). raw_msgid is what
     * was sent in its place (NULL when nothing was), and method the method when it was a
     * str: proto_pack_error_notify names the request with them. */
    bool no_msgid;
    const msgpack_object *raw_msgid;
    const char *method; /* request, notification; not NUL-terminated */
    uint32_t method_len;
    const msgpack_object *params; /* request, notification: any type (usually an array) */
    const msgpack_object *error;  /* response: nil on success */
    const msgpack_object *result; /* response */
    msgpack_unpacked unpacked;
};

struct proto_reader;

/* max_msg: the largest message accepted, in bytes. Returns 0 or -ENOMEM. Loop context. */
int proto_reader_new(size_t max_msg, struct proto_reader **ret);
/* Accepts NULL; returns NULL. */
struct proto_reader *proto_reader_free(struct proto_reader *r);
/* A buffer of at least `want` free bytes to read into (for uv_alloc_cb). The reader keeps
 * ownership. Returns 0, or -EMSGSIZE when the pending message already exceeds the cap. */
int proto_reader_buffer(struct proto_reader *r, size_t want, char **ret_buf, size_t *ret_len);
/* Marks n bytes of the buffer returned by proto_reader_buffer as filled. */
void proto_reader_consumed(struct proto_reader *r, size_t n);
/* Takes the next complete message.
 * Returns 1 with *ret filled (call proto_msg_done after), 0 when more bytes are needed,
 * -EMSGSIZE (message above the cap) or -EBADMSG (not msgpack, too deep, impossible counts):
 *   the stream cannot be resynchronised, close the connection;
 * -EPROTO: a well-formed msgpack value that is not a msgpack-rpc message. The value was
 *   consumed (call proto_msg_done after). If it looked like a request (an array whose
 *   first element is 0), *ret has type PROTO_REQUEST and either its msgid, with method and
 *   params NULL, so the caller can send an error response, or no_msgid set (struct
 *   proto_msg), so it can send an error notification naming the request. Not fatal.
 * e (may be NULL) says what was wrong. */
int proto_reader_next(struct proto_reader *r, struct proto_msg *ret, struct err *e);
/* Frees the message's memory. Accepts a zeroed message. */
void proto_msg_done(struct proto_msg *m);
/* Bytes buffered and not yet returned as messages. */
size_t proto_reader_pending(const struct proto_reader *r);

/* Packing helpers: each writes a message head; the caller packs the rest. */
/* [0, msgid, method, <params follow>] */
void proto_pack_request(msgpack_packer *pk, uint32_t msgid, const char *method);
/* [1, msgid, nil, <result follows>] */
void proto_pack_response_ok(msgpack_packer *pk, uint32_t msgid);
/* [1, msgid, {"code": code, "message": message}, nil] (complete message). */
void proto_pack_response_err(msgpack_packer *pk, uint32_t msgid, const char *code,
                             const char *message);
/* [2, method, <params follow>] */
void proto_pack_notify(msgpack_packer *pk, const char *method);
/* [2, "error", [{"code": code, "message": message, "method": ..., "msgid": ...}]] (complete
 * message): a refusal no response can carry. "method" (text, at most 64 bytes) names the
 * refused message when method is not NULL, and "msgid" the msgid it named when msgid is
 * not NULL: as sent when nil, a boolean or a number, as text or bin cut to 64 bytes when a
 * str or bin, and left out when an array, map or ext. */
void proto_pack_error_notify(msgpack_packer *pk, const char *code, const char *message,
                             const char *method, size_t method_len, const msgpack_object *msgid);

void proto_pack_cstr(msgpack_packer *pk, const char *s);
void proto_pack_kv_str(msgpack_packer *pk, const char *key, const char *val);
/* Text sbxd composes for clients from bytes it does not control (a sandbox's messages, a
 * client's method name, paths, the trail): packed as a str that is valid UTF-8 (RFC 3629),
 * each byte outside a valid sequence replaced by '?'. s NULL packs nil; strn takes n bytes.
 * proto_pack_cstr packs bytes as they are: a client's argv may hold any byte but NUL. */
void proto_pack_text(msgpack_packer *pk, const char *s);
void proto_pack_textn(msgpack_packer *pk, const char *s, size_t n);
void proto_pack_kv_text(msgpack_packer *pk, const char *key, const char *val);
/* The length of the valid UTF-8 sequence s[0..n) starts with, or 0 (n > 0). */
size_t proto_utf8_seq(const char *s, size_t n);
void proto_pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t val);
void proto_pack_kv_i64(msgpack_packer *pk, const char *key, int64_t val);
void proto_pack_kv_f64(msgpack_packer *pk, const char *key, double val);
void proto_pack_kv_bool(msgpack_packer *pk, const char *key, bool val);
void proto_pack_kv_nil(msgpack_packer *pk, const char *key);

/* Accessors over decoded objects. They never allocate; strings are not NUL-terminated. */
/* The value under key in a map, or NULL (also when obj is not a map). */
const msgpack_object *proto_map_get(const msgpack_object *map, const char *key);
/* The first parameter when params is an array of length >= 1, else params itself. */
const msgpack_object *proto_params_arg0(const msgpack_object *params);
/* Typed lookups in a map. Missing key: -ENOENT (e names the key). Wrong type or out of
 * range: -EINVAL (e says "'key' must be ..."). */
int proto_get_str(const msgpack_object *map, const char *key, const char **ret, uint32_t *ret_len,
                  struct err *e);
int proto_get_u64(const msgpack_object *map, const char *key, uint64_t *ret, struct err *e);
/* Accepts integers and floats; rejects NaN and infinities. */
int proto_get_f64(const msgpack_object *map, const char *key, double *ret, struct err *e);
int proto_get_bool(const msgpack_object *map, const char *key, bool *ret, struct err *e);
/* The bytes of a str or bin o (not NUL-terminated): true, or false when o is neither
 * (*ret, *ret_len untouched). */
bool proto_obj_bytes(const msgpack_object *o, const char **ret, uint32_t *ret_len);
/* Compares a msgpack str or bin with a C string. */
bool proto_str_eq(const char *s, uint32_t len, const char *cstr);
/* Copies a str/bin object into buf with a NUL; -EINVAL if not str/bin, -ENAMETOOLONG if
 * it does not fit, -EINVAL if it contains a NUL byte. */
int proto_obj_cstr(const msgpack_object *o, char *buf, size_t size);
/* Whether every key of map m is one of keys[0..n) (str keys only). 0 when they all are;
 * -EINVAL when m is not a map; -ENOENT when one is not, with the first such key in name
 * (as proto_obj_cstr copies it, or "?" when it does not fit in size bytes or is no string).
 * The caller words the message: it knows the method. */
int proto_keys_check(const msgpack_object *m, const char *const *keys, size_t n, char *name,
                     size_t size);
