/* SPDX-License-Identifier: MIT */
#pragma once
/* Which refused requests the audit trail records one by one: at most
 * audit.refusals_per_connection per connection and audit.refusals_per_peer per peer (the
 * socket and the peer's uid, over all its connections: a client that reconnects, or forks
 * to get a new pid, is still the same uid) in each budget window. The rest are counted per
 * peer and written as one rpc.refused.summary event per summary interval and when sbxd
 * stops (audit_limit.h): not per connection, which a reconnecting client would turn into a
 * row per connection again. Loop thread only. */
#include <stdbool.h>
#include <stdint.h>

struct audit;
struct config;
struct rpc_refusals;
struct rpc_refusal_conn;

/* The peer table, over a (borrowed; may be NULL or disabled) and cfg's budgets. */
struct rpc_refusals *rpc_refusals_new(struct audit *a, const struct config *cfg);
/* Writes each peer's pending summary (when the audit is still open) and frees. Accepts
 * NULL; returns NULL. Every connection must be freed first. */
struct rpc_refusals *rpc_refusals_free(struct rpc_refusals *r);
/* A connection's budget, tied to its peer (admin socket or agents', uid). */
struct rpc_refusal_conn *rpc_refusals_conn_new(struct rpc_refusals *r, bool admin, uint32_t uid);
/* Accepts NULL; returns NULL. What it counted stays with its peer's summary. */
struct rpc_refusal_conn *rpc_refusals_conn_free(struct rpc_refusal_conn *rc);
/* One refusal with code on connection rc (peer pid, connection id for the summary): true
 * when it is recorded one by one (a budget unit of the connection and of the peer taken),
 * false when it is only counted in the peer's summary. */
bool rpc_refusals_take(struct rpc_refusal_conn *rc, int32_t pid, uint64_t conn_id,
                       const char *code);
