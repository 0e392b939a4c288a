/* SPDX-License-Identifier: MIT */
/* Budgets of refused requests per connection and per peer uid, and the peers' counted
 * summaries (audit_limit.h): so that no client, however fast it knocks or reconnects, can
 * write the audit trail faster than the operator's budgets allow. It decides only what is
 * recorded; the refusal itself and its answer are rpc.c's. */
#include "api/rpc_refusals.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "audit/audit_limit.h"
#include "config/config.h"
#include "lib/alloc.h"

#define PEER_BUCKETS 256
/* Peers kept apart at most; beyond, new uids share one entry (uid recorded as null). */
#define PEERS_MAX 4096

struct peer {
    struct peer *next; /* in its bucket */
    bool admin;
    bool shared; /* the entry of uids beyond PEERS_MAX */
    uint32_t uid;
    struct audit_limit *budget; /* this peer's window budget and counted summary */
    /* for the summary: the last counted connection and pid, and how many connections
     * were counted since the last summary (a connection counts once per summary) */
    uint64_t epoch;
    uint64_t conns;
    uint64_t last_conn;
    int32_t last_pid;
};

struct rpc_refusals {
    struct audit *a;
    uint32_t per_conn;
    uint32_t per_peer;
    struct peer *buckets[PEER_BUCKETS];
    size_t n_peers;
    struct peer *shared[2]; /* agents', admin */
};

struct rpc_refusal_conn {
    struct peer *peer;
    struct audit_limit *budget; /* never counts: only its window budget is used */
    uint32_t per_conn;
    uint32_t per_peer;
    uint64_t epoch; /* peer->epoch + 1 once counted in the peer's current summary */
};

static void peer_fill(void *arg, struct audit_ev *ev)
{
    struct peer *p = arg;
    audit_mark_refusal(ev);
    audit_id(ev, "socket", p->admin ? "admin" : "agents");
    if (p->shared) {
        audit_null(ev, "peer_uid");
    } else {
        audit_u64(ev, "peer_uid", p->uid);
    }
    audit_i64(ev, "last_pid", p->last_pid);
    audit_u64(ev, "last_conn", p->last_conn);
    audit_u64(ev, "connections", p->conns);
    p->conns = 0;
    p->epoch++;
}

struct rpc_refusals *rpc_refusals_new(struct audit *a, const struct config *cfg)
{
    struct rpc_refusals *r = xcalloc(1, sizeof(*r));
    r->a = a;
    r->per_conn = cfg->audit_refusals_per_conn;
    r->per_peer = cfg->audit_refusals_per_peer;
    return r;
}

static struct peer *peer_new(struct rpc_refusals *r, bool admin, uint32_t uid, bool shared)
{
    struct peer *p = xcalloc(1, sizeof(*p));
    p->admin = admin;
    p->uid = uid;
    p->shared = shared;
    char label[64];
    if (shared) {
        (void)snprintf(label, sizeof(label), "socket=%s uid=others", admin ? "admin" : "agents");
    } else {
        (void)snprintf(label, sizeof(label), "socket=%s uid=%u", admin ? "admin" : "agents", uid);
    }
    p->budget = audit_limit_new(r->a, "rpc.refused.summary", NULL, label, peer_fill, p);
    return p;
}

static struct peer *peer_get(struct rpc_refusals *r, bool admin, uint32_t uid)
{
    size_t b = (uid * 2654435761u + (admin ? 1u : 0u)) % PEER_BUCKETS;
    for (struct peer *p = r->buckets[b]; p; p = p->next) {
        if (p->uid == uid && p->admin == admin) {
            return p;
        }
    }
    if (r->n_peers >= PEERS_MAX) {
        struct peer **s = &r->shared[admin ? 1 : 0];
        if (!*s) {
            *s = peer_new(r, admin, 0, true);
        }
        return *s;
    }
    struct peer *p = peer_new(r, admin, uid, false);
    p->next = r->buckets[b];
    r->buckets[b] = p;
    r->n_peers++;
    return p;
}

static void peer_free(struct peer *p)
{
    p->budget = audit_limit_free(p->budget);
    free(p);
}

struct rpc_refusals *rpc_refusals_free(struct rpc_refusals *r)
{
    if (!r) {
        return NULL;
    }
    for (size_t b = 0; b < PEER_BUCKETS; b++) {
        while (r->buckets[b]) {
            struct peer *p = r->buckets[b];
            r->buckets[b] = p->next;
            peer_free(p);
        }
    }
    for (size_t i = 0; i < 2; i++) {
        if (r->shared[i]) {
            peer_free(r->shared[i]);
        }
    }
    free(r);
    return NULL;
}

struct rpc_refusal_conn *rpc_refusals_conn_new(struct rpc_refusals *r, bool admin, uint32_t uid)
{
    struct rpc_refusal_conn *rc = xcalloc(1, sizeof(*rc));
    rc->peer = peer_get(r, admin, uid);
    rc->budget = audit_limit_new(r->a, "rpc.refused.summary", NULL, NULL, NULL, NULL);
    rc->per_conn = r->per_conn;
    rc->per_peer = r->per_peer;
    return rc;
}

struct rpc_refusal_conn *rpc_refusals_conn_free(struct rpc_refusal_conn *rc)
{
    if (rc) {
        audit_limit_free(rc->budget);
        free(rc);
    }
    return NULL;
}

bool rpc_refusals_take(struct rpc_refusal_conn *rc, int32_t pid, uint64_t conn_id, const char *code)
{
    struct peer *p = rc->peer;
    /* The connection's budget first: a runaway connection must not use up its peer's, so
     * that the peer's other connections are still recorded one by one. */
    if (audit_limit_take(rc->budget, rc->per_conn) && audit_limit_take(p->budget, rc->per_peer)) {
        return true;
    }
    if (rc->epoch != p->epoch + 1) {
        rc->epoch = p->epoch + 1;
        p->conns++;
    }
    p->last_conn = conn_id;
    p->last_pid = pid;
    audit_limit_count(p->budget, code);
    return false;
}
