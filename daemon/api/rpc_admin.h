/* SPDX-License-Identifier: MIT */
#pragma once
/* The capability token methods of the admin socket (docs/TOKENS.md, docs/PROTOCOL.md), as
 * rpc.c's method table calls them. Loop thread only. */
#include <msgpack.h>
#include <stdint.h>

struct rpc_conn;

/* {mounts?, net?, pools?, ttl?, uses?} -> {"token", "info"}: the one place the token
 * string leaves sbxd. */
void rpc_admin_token_issue(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
/* {token | id} -> {"id", "revoked", "killed"}: its running tasks are killed. */
void rpc_admin_token_revoke(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
/* {} -> [info...], in issue order. */
void rpc_admin_token_list(struct rpc_conn *rc, uint32_t msgid, const msgpack_object *args);
