/* SPDX-License-Identifier: MIT */
#pragma once
/* Admin methods over the audit trail, `audit.query` and `audit.verify` (docs/PROTOCOL.md):
 * arguments are validated on the loop, the reading runs on a libuv worker thread with its
 * own read-only connection (one at a time: a second concurrent request gets `busy`), and
 * the answer goes to the connection if it is still open. Loop thread only. */
#include <msgpack.h>
#include <stdint.h>

struct rpc_conn;

/* {task?: str, pool?: str, status?: str, since?: seconds (number, > 0), limit?: 1..1000
 * (default 50)} -> {"chains": [...], "more": bool} (see audit_query_pack). */
void rpc_audit_query(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
/* {} -> {"ok", "rows", "start_seq", "head_seq", "head_hash"[, "bad_seq", "bad_id",
 * "problem", "message"]} (see audit_query_verify). */
void rpc_audit_verify(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
