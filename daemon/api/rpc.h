/* SPDX-License-Identifier: MIT */
#pragma once
/* Method tables of both sockets: validate, authorize, dispatch. The only place where
 * errors meet the wire. Loop thread only. */
#include <stddef.h>

struct conn;
struct daemon;
struct proto_msg;

/* Handles one decoded message from a connection (the caller frees it after). */
void rpc_handle(struct conn *c, const struct proto_msg *m);
/* Counts a protocol-level error by kind (malformed, too_large, limit, ...). */
void rpc_note_error(struct daemon *d, const char *kind);
/* Bad input refused outside an exec (whose refusals have a chain of their own): counted by
 * kind, and recorded in the trail as rpc.refused (socket, conn, peer, code, the method when
 * there was one, reason), or only counted in audit.suppressed while the trail is behind.
 * method may be NULL; method_len bytes of it are recorded. */
void rpc_refused(struct conn *c, const char *kind, const char *code, const char *method,
                 size_t method_len, const char *reason);
/* A method name literal as rpc_refused's method and method_len. */
#define RPC_METHOD(lit) (lit), sizeof(lit) - 1
