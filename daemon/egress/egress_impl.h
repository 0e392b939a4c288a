/* SPDX-License-Identifier: MIT */
#pragma once
/* Inside the egress proxy: the runtime profiles, a task's session and one client
 * connection, shared by egress.c (profiles, credentials, sessions), egress_conn.c (a
 * connection's life, I/O, resolving, dialing, CONNECT) and egress_http.c (plain-HTTP
 * routes). Nothing else includes this header. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config/config.h"
#include "egress/egress.h"
#include "wire/egress_inspect.h"
#include "wire/egress_parse.h"
#include "wire/egress_path.h"
#include "wire/netaddr.h"

/* Bytes read at once from either side. */
#define EGRESS_READ_CHUNK (16 * 1024)
/* Write-queue watermarks per destination: above HIGH the other side stops being read, below
 * LOW it is read again. */
#define EGRESS_WQ_HIGH (64 * 1024)
#define EGRESS_WQ_LOW (16 * 1024)
/* Reading a head, resolving and connecting, waiting for a ClientHello: each at most this. */
#define EGRESS_PHASE_MS 10000
/* After the last byte was queued to a client: how long it has to read it. */
#define EGRESS_LINGER_MS 2000
/* Addresses of one name tried at most. */
#define EGRESS_MAX_ADDRS 8
/* A client's input buffer: a head (or a ClientHello) and one more read. */
#define EGRESS_BUF_CAP                                                                             \
    ((EGRESS_HEAD_MAX > EGRESS_HELLO_BUF ? EGRESS_HEAD_MAX : EGRESS_HELLO_BUF) + EGRESS_READ_CHUNK)

struct audit_limit;

struct eroute {
    const struct egress_route_config *rc;
    struct egress_hostport up; /* the upstream's host and port */
    char *base;                /* base path without a trailing '/': "" or "/v2" */
    char *cred;                /* the header value, or NULL */
    size_t cred_len;
};

struct eprofile {
    const struct egress_profile_config *pc;
    struct egress_allow *allow; /* parallel to pc->allow */
    struct netaddr_cidr *cidrs; /* parallel to pc->allow_addresses */
    struct eroute *routes;      /* parallel to pc->routes */
};

struct egress {
    struct egress_handles h;
    uint16_t port;
    uint32_t denials_per_task; /* audit.denials_per_task: recorded one by one per window */
    struct eprofile *profiles;
    size_t n;
};

struct econn;

/* One task's proxy: freed when its listener and every connection are closed. */
struct egress_session {
    struct egress *g;
    const struct eprofile *p;
    uv_tcp_t listener;
    bool stopping;
    int refs; /* the listener handle, and every connection not yet freed */
    struct econn *conns;
    uint32_t active; /* connections counted against max_connections */
    uint32_t total;  /* every connection, lingering ones too */
    struct egress_stats st;
    struct audit_limit *denied; /* the budget of denials recorded one by one, and the rest */
    char task_id[24];
};

enum econn_phase {
    PH_HEAD = 0, /* reading the request head */
    PH_RESOLVE,  /* name resolution on the threadpool */
    PH_CONNECT,  /* dialing a checked address */
    PH_HELLO,    /* CONNECT answered; waiting for the ClientHello */
    PH_TUNNEL,   /* CONNECT relaying */
    PH_HTTP,     /* plain HTTP: request body up, response down */
    PH_FINISH,   /* flushing to the client, then closing */
    PH_CLOSED,   /* handles closing */
};

/* One read buffer, reused as the write request that carries it on. */
struct ebuf {
    uv_write_t req;
    struct econn *c;
    size_t len;
    char data[];
};

struct econn {
    struct egress_session *s;
    struct econn *prev;
    struct econn *next;
    uv_tcp_t client;
    uv_tcp_t upstream;
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    uv_connect_t creq;
    uv_shutdown_t shut_client; /* egress_conn_finish */
    uv_shutdown_t shut_up;     /* a tunnel's client half-closed */
    int handles;               /* open handles */
    bool counted;              /* in s->active */
    bool gai_pending;
    bool up_open; /* upstream handle initialized and not closing */
    enum econn_phase phase;
    /* client input: the head, then (CONNECT) the ClientHello */
    char *buf;
    size_t len;
    size_t head_len;
    struct egress_request req; /* points into buf until the head went upstream */
    char method[16];
    char dest_desc[EGRESS_HOST_SIZE + 16]; /* "host:port" as the task asked */
    bool is_connect;
    struct egress_hostport dest; /* what is dialed */
    const struct eroute *route;
    struct netaddr addrs[EGRESS_MAX_ADDRS];
    size_t n_addrs;
    size_t next_addr;
    int last_err;
    bool retrying;  /* the upstream handle is closing for the next address */
    uint64_t bytes; /* this request, both directions */
    /* plain HTTP */
    struct egress_body req_body;
    bool req_done;
    char *rhead;
    size_t rlen;
    bool resp_head_done;
    unsigned interim; /* 1xx responses seen */
    bool head_request;
    struct egress_body resp_body;
    struct egress_scrub scrub;
    struct ebuf *out; /* the response bytes being assembled (emit callback) */
    /* flow */
    bool client_want;
    bool up_want;
    bool client_reading;
    bool up_reading;
    bool client_eof;
    bool up_eof;
    bool up_shut;
    bool responded;      /* bytes were queued to the client */
    bool drain;          /* PH_FINISH: keep reading (and dropping) the client until EOF */
    const char *outcome; /* metric outcome once a request was seen */
};

static inline const char *econn_profile(const struct econn *c)
{
    return c->s->p->pc->name;
}

/* egress.c */

/* A request the profile refused, or a limit cut: counted in the session (flagging the task
 * at EGRESS_FLAG_DENIALS), logged and audited (proxy.denied) within the task's budget
 * (audit.denials_per_task per window), else counted in its proxy.denied.summary. reason is
 * one line built from validated names only. */
void egress_note_denial(struct econn *c, const char *outcome, const char *reason);
/* Drops a reference of the session; frees it at zero. */
void egress_session_unref(struct egress_session *s);

/* egress_conn.c */

/* Accepts one connection from the session's listener (counted against max_connections, or
 * answered 403 beyond it). */
void egress_conn_accept(struct egress_session *s, uv_stream_t *server);
/* Closes every handle; the connection is freed (and its metric counted) once they are
 * closed and no resolution is pending. Safe in any phase, more than once. */
void egress_conn_close(struct econn *c);
/* Closes the upstream side only. */
void egress_conn_close_upstream(struct econn *c);
/* Ends gracefully: queued bytes reach the client, its write side is shut, and (drain) its
 * input is read and dropped until EOF, so closing never resets an unread response. At most
 * EGRESS_LINGER_MS. */
void egress_conn_finish(struct econn *c, bool drain);
/* Answers the client with a one-line reason and finishes. status 403 (the profile or a
 * limit), 400 and 431 (malformed) count as denials; 502 and 504 (the destination failed)
 * do not. Does nothing once the connection is finishing. */
void egress_conn_refuse(struct econn *c, int status, const char *outcome, const char *reason);
/* Cuts a connection that went outside its profile after it was answered: a denial, then
 * close (nothing can be answered any more). */
void egress_conn_cut(struct econn *c, const char *outcome, const char *reason);
/* A buffer of cap bytes for egress_conn_send (len 0). */
struct ebuf *egress_conn_buf_new(struct econn *c, size_t cap);
/* Queues b (its len bytes) to dst (&c->client or &c->upstream) and takes it. Returns 0 or
 * -errno, in which case the connection is closing. */
int egress_conn_send(struct econn *c, uv_tcp_t *dst, struct ebuf *b);
/* Reads each side only while it is wanted, not at EOF, and the other side's write queue is
 * below its watermark. */
void egress_conn_update_reading(struct econn *c);
/* How many of n more bytes this request may relay under max_request_bytes and
 * max_task_bytes; counts them. */
size_t egress_conn_account(struct econn *c, size_t n);
/* Which byte limit was reached, as a reason. */
const char *egress_conn_limit_reason(const struct econn *c);
/* Resolves c->dest off the loop, keeps the addresses the profile permits, and dials them in
 * order; answers 403 when none is permitted. */
void egress_conn_resolve(struct econn *c);

/* egress_http.c */

/* A parsed plain-HTTP request head: finds its route and checks it, then resolves the
 * route's upstream, or refuses. */
void egress_http_decide(struct econn *c);
/* The upstream is connected: sends the rewritten head and the body bytes received so far. */
void egress_http_start(struct econn *c);
/* Request body bytes from the client, in b (sent on, or freed). */
void egress_http_client_data(struct econn *c, struct ebuf *b);
/* Response bytes from the upstream (already counted against the limits). */
void egress_http_upstream_data(struct econn *c, const char *data, size_t n);
/* The upstream closed: a close-delimited body ends, a short one ends as it is. */
void egress_http_upstream_eof(struct econn *c);
