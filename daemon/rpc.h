/* SPDX-License-Identifier: MIT */
#pragma once
/* Method tables of both sockets: validate, authorize, dispatch. The only place where
 * errors meet the wire. Loop thread only. */
struct conn;
struct daemon;
struct proto_msg;

/* Handles one decoded message from a connection (the caller frees it after). */
void rpc_handle(struct conn *c, const struct proto_msg *m);
/* Counts a protocol-level error by kind (malformed, too_large, limit, ...). */
void rpc_note_error(struct daemon *d, const char *kind);
