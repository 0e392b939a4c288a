/* SPDX-License-Identifier: MIT */
#pragma once
/* The session methods of the agents' socket (docs/PROTOCOL.md, "Sessions"): session.open,
 * session.close, session.write, session.read, session.list, and exec {session}. Every
 * request is validated and its owner checked on the loop; file I/O runs on sbxd's workers.
 * Loop thread only. */
#include <msgpack.h>
#include <stdint.h>

struct rpc_conn;

void rpc_session_open(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
void rpc_session_close(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
void rpc_session_write(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
void rpc_session_read(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
void rpc_session_list(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
/* exec with "session", after rpc.c's checks common to every exec (msgid, drain, trail,
 * requests in flight): the session found and its owner checked, then a task on its
 * sandbox. Refusals are audited as a refused exec's chain. */
void rpc_session_exec(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
