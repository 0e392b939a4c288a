/* SPDX-License-Identifier: MIT */
/* One client connection of the egress proxy: reading its head, resolving its destination
 * off the loop, dialing only addresses the profile permits, the CONNECT tunnel with its
 * ClientHello check, and every byte's way through bounded buffers with backpressure. A
 * connection is freed only when its handles are closed and its resolution has returned. */
#define LOG_MOD "egress"
#include "egress/egress_impl.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "metrics/metrics.h"
#include "lib/list.h"
#include "lib/util.h"

static void client_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void up_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void connect_next(struct econn *c);
static void connected(struct econn *c);

/* How many of n more bytes this request may relay; counts them. */
size_t egress_conn_account(struct econn *c, size_t n)
{
    const struct egress_profile_config *pc = c->s->p->pc;
    uint64_t room_req = pc->max_request_bytes > c->bytes ? pc->max_request_bytes - c->bytes : 0;
    uint64_t room_task =
        pc->max_task_bytes > c->s->st.bytes ? pc->max_task_bytes - c->s->st.bytes : 0;
    uint64_t room = room_req < room_task ? room_req : room_task;
    size_t k = (uint64_t)n < room ? n : (size_t)room;
    c->bytes += k;
    c->s->st.bytes += k;
    return k;
}

const char *egress_conn_limit_reason(const struct econn *c)
{
    const struct egress_profile_config *pc = c->s->p->pc;
    return c->s->st.bytes >= pc->max_task_bytes
               ? "the task's byte limit (max_task_bytes) was reached"
               : "the request's byte limit (max_request_bytes) was reached";
}

static void econn_free_if_done(struct econn *c)
{
    if (c->handles > 0 || c->gai_pending) {
        return;
    }
    struct egress_session *s = c->s;
    if (c->outcome) {
        metrics_proxy_request(s->g->h.metrics, s->p->pc->name, c->outcome);
    }
    DLIST_REMOVE(s->conns, c);
    if (c->counted) {
        s->active--;
    }
    s->total--;
    free(c->buf);
    free(c->rhead);
    free(c->out);
    free(c);
    egress_session_unref(s);
}

static void handle_closed(uv_handle_t *h)
{
    struct econn *c = h->data;
    c->handles--;
    if (c->retrying && h == (uv_handle_t *)&c->upstream) {
        c->retrying = false;
        if (c->phase == PH_CONNECT) {
            connect_next(c);
            return;
        }
    }
    econn_free_if_done(c);
}

static void close_handle(struct econn *c, uv_handle_t *h)
{
    if (!uv_is_closing(h)) {
        h->data = c;
        uv_close(h, handle_closed);
    }
}

void egress_conn_close_upstream(struct econn *c)
{
    if (c->up_open) {
        c->up_open = false;
        c->up_reading = false;
        close_handle(c, (uv_handle_t *)&c->upstream);
    }
}

void egress_conn_close(struct econn *c)
{
    if (c->phase == PH_CLOSED) {
        return;
    }
    c->phase = PH_CLOSED;
    c->retrying = false;
    if (c->gai_pending) {
        (void)uv_cancel((uv_req_t *)&c->gai);
    }
    close_handle(c, (uv_handle_t *)&c->client);
    close_handle(c, (uv_handle_t *)&c->timer);
    egress_conn_close_upstream(c);
}

static void timer_cb(uv_timer_t *h)
{
    struct econn *c = h->data;
    if (c->phase == PH_RESOLVE || c->phase == PH_CONNECT) {
        /* Too slow to reach: the client still gets a one-line answer. */
        char reason[EGRESS_HOST_SIZE + 64];
        (void)snprintf(reason, sizeof(reason), "timed out reaching %s", c->dest_desc);
        egress_conn_refuse(c, 504, "error", reason);
        return;
    }
    egress_conn_close(c); /* a head or ClientHello too slow, or a client that does not read */
}

static void timer_set(struct econn *c, uint64_t ms)
{
    uv_timer_start(&c->timer, timer_cb, ms, 0);
}

struct ebuf *egress_conn_buf_new(struct econn *c, size_t cap)
{
    struct ebuf *b = xmalloc(sizeof(*b) + cap);
    b->c = c;
    b->len = 0;
    return b;
}

static void write_cb(uv_write_t *req, int status)
{
    struct ebuf *b = container_of(req, struct ebuf, req);
    struct econn *c = b->c;
    free(b);
    if (status < 0) {
        egress_conn_close(c);
        return;
    }
    egress_conn_update_reading(c);
}

/* Queues b (its len bytes) to dst; b is freed when written. Returns 0 or -errno (the
 * connection is then closing). */
int egress_conn_send(struct econn *c, uv_tcp_t *dst, struct ebuf *b)
{
    if (b->len == 0) {
        free(b);
        return 0;
    }
    if (c->phase == PH_CLOSED || (dst == &c->upstream && !c->up_open)) {
        free(b);
        return -EPIPE;
    }
    uv_buf_t ub = uv_buf_init(b->data, (unsigned)b->len);
    int r = uv_write(&b->req, (uv_stream_t *)dst, &ub, 1, write_cb);
    if (r < 0) {
        free(b);
        egress_conn_close(c);
        return r;
    }
    if (dst == &c->client) {
        c->responded = true;
    }
    egress_conn_update_reading(c);
    return 0;
}

static int send_bytes(struct econn *c, uv_tcp_t *dst, const char *data, size_t n)
{
    struct ebuf *b = egress_conn_buf_new(c, n);
    memcpy(b->data, data, n);
    b->len = n;
    return egress_conn_send(c, dst, b);
}

static void shutdown_client_cb(uv_shutdown_t *req, int status)
{
    struct econn *c = container_of(req, struct econn, shut_client);
    if (c->phase == PH_FINISH && (!c->drain || status < 0)) {
        egress_conn_close(c);
    }
}

static void shutdown_up_cb(uv_shutdown_t *req, int status)
{
    struct econn *c = container_of(req, struct econn, shut_up);
    if (status < 0 && status != UV_ECANCELED) {
        egress_conn_close(c);
    }
}

/* Ends the connection gracefully: whatever is queued to the client is written, its write
 * side is shut, and (drain) its input is read and dropped until EOF, so that closing never
 * resets a response the client has not read yet. At most EGRESS_LINGER_MS. */
void egress_conn_finish(struct econn *c, bool drain)
{
    if (c->phase == PH_CLOSED || c->phase == PH_FINISH) {
        return;
    }
    c->phase = PH_FINISH;
    c->drain = drain;
    egress_conn_close_upstream(c);
    c->client_want = drain && !c->client_eof;
    egress_conn_update_reading(c);
    timer_set(c, EGRESS_LINGER_MS);
    if (uv_shutdown(&c->shut_client, (uv_stream_t *)&c->client, shutdown_client_cb) < 0) {
        egress_conn_close(c);
    }
}

/* Answers the client with a one-line refusal and ends the connection. status 403: the
 * profile or a limit; 400: malformed; 502/504: the destination failed. */
void egress_conn_refuse(struct econn *c, int status, const char *outcome, const char *reason)
{
    static const struct {
        int status;
        const char *text;
    } texts[] = {{400, "Bad Request"},
                 {403, "Forbidden"},
                 {431, "Request Header Fields Too Large"},
                 {502, "Bad Gateway"},
                 {504, "Gateway Timeout"}};
    const char *text = "Error";
    if (c->phase == PH_FINISH || c->phase == PH_CLOSED) {
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
        if (texts[i].status == status) {
            text = texts[i].text;
        }
    }
    if (status == 403 || status == 400 || status == 431) {
        egress_note_denial(c, outcome, reason);
    } else {
        c->outcome = outcome;
        char q[160];
        log_info("task=%s profile=%s msg=\"egress upstream failure\" reason=%s", c->s->task_id,
                 econn_profile(c), log_quote(reason, q, sizeof(q)));
    }
    char body[320];
    int bl = snprintf(body, sizeof(body), "sbx egress: %s\n", reason);
    if (bl < 0 || (size_t)bl >= sizeof(body)) {
        bl = (int)sizeof(body) - 1;
        body[bl - 1] = '\n';
    }
    struct ebuf *b = egress_conn_buf_new(c, 512);
    int hl = snprintf(b->data, 512,
                      "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                      "Content-Length: %d\r\nConnection: close\r\nX-Sbx-Egress: %s\r\n\r\n",
                      status, text, bl, outcome);
    b->len = (size_t)hl;
    (void)egress_conn_send(c, &c->client, b);
    if (c->phase != PH_CLOSED) {
        (void)send_bytes(c, &c->client, body, (size_t)bl);
        egress_conn_finish(c, true);
    }
}

/* Cuts a CONNECT tunnel or a request that went outside the profile after it started:
 * nothing can be answered any more. */
void egress_conn_cut(struct econn *c, const char *outcome, const char *reason)
{
    egress_note_denial(c, outcome, reason);
    egress_conn_close(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct econn *c = h->data;
    (void)suggested;
    struct ebuf *b = egress_conn_buf_new(c, EGRESS_READ_CHUNK);
    buf->base = b->data;
    buf->len = EGRESS_READ_CHUNK;
}

static void set_reading(struct econn *c, uv_tcp_t *h, bool *state, bool want, uv_read_cb cb)
{
    if (want == *state) {
        return;
    }
    if (want) {
        h->data = c;
        if (uv_read_start((uv_stream_t *)h, alloc_cb, cb) < 0) {
            egress_conn_close(c);
            return;
        }
    } else {
        (void)uv_read_stop((uv_stream_t *)h);
    }
    *state = want;
}

/* Reads a side only while it is wanted, not at EOF, and the other side's write queue is
 * below its watermark (backpressure). */
void egress_conn_update_reading(struct econn *c)
{
    if (c->phase == PH_CLOSED) {
        return;
    }
    size_t up_q = c->up_open ? c->upstream.write_queue_size : 0;
    size_t cl_q = c->client.write_queue_size;
    bool cw = c->client_want && !c->client_eof;
    if (cw && c->client_reading && up_q > EGRESS_WQ_HIGH) {
        cw = false;
    } else if (cw && !c->client_reading && up_q > EGRESS_WQ_LOW) {
        cw = false;
    }
    set_reading(c, &c->client, &c->client_reading, cw, client_read_cb);
    if (c->phase == PH_CLOSED) {
        return;
    }
    bool uw = c->up_open && c->up_want && !c->up_eof;
    if (uw && c->up_reading && cl_q > EGRESS_WQ_HIGH) {
        uw = false;
    } else if (uw && !c->up_reading && cl_q > EGRESS_WQ_LOW) {
        uw = false;
    }
    if (c->up_open) {
        set_reading(c, &c->upstream, &c->up_reading, uw, up_read_cb);
    }
}

static void connect_cb(uv_connect_t *req, int status)
{
    struct econn *c = container_of(req, struct econn, creq);
    if (status == UV_ECANCELED || c->phase != PH_CONNECT) {
        return;
    }
    if (status < 0) {
        c->last_err = status;
        c->retrying = true;
        c->up_open = false;
        close_handle(c, (uv_handle_t *)&c->upstream);
        return;
    }
    connected(c);
}

/* Dials the next checked address, or answers 502 when none is left. */
static void connect_next(struct econn *c)
{
    if (c->phase != PH_CONNECT) {
        econn_free_if_done(c);
        return;
    }
    if (c->next_addr < c->n_addrs) {
        const struct netaddr *a = &c->addrs[c->next_addr++];
        struct sockaddr_storage ss;
        (void)netaddr_to_sockaddr(a, c->dest.port, &ss);
        uv_tcp_init(c->s->g->h.loop, &c->upstream);
        c->upstream.data = c;
        c->handles++;
        c->up_open = true;
        /* SECURITY: the very address that was checked is dialed; nothing resolves again. */
        int r = uv_tcp_connect(&c->creq, &c->upstream, (const struct sockaddr *)&ss, connect_cb);
        if (r == 0) {
            return;
        }
        c->last_err = r;
        c->retrying = true;
        c->up_open = false;
        close_handle(c, (uv_handle_t *)&c->upstream);
        return;
    }
    char reason[EGRESS_HOST_SIZE + 96];
    (void)snprintf(reason, sizeof(reason), "cannot connect to %s: %s", c->dest_desc,
                   c->last_err ? uv_strerror(c->last_err) : "no address");
    egress_conn_refuse(c, 502, "error", reason);
}

/* Keeps the addresses the profile permits, in resolver order; describes the first refused
 * one. Returns how many were kept. */
static size_t addrs_filter(struct econn *c, const struct netaddr *in, size_t n, char *why,
                           size_t why_size)
{
    const struct eprofile *p = c->s->p;
    size_t kept = 0;
    why[0] = '\0';
    for (size_t i = 0; i < n && kept < EGRESS_MAX_ADDRS; i++) {
        unsigned cls = 0;
        bool dup = false;
        for (size_t j = 0; j < kept; j++) {
            dup = dup ||
                  (c->addrs[j].family == in[i].family && memcmp(c->addrs[j].a, in[i].a, 16) == 0);
        }
        if (dup) {
            continue;
        }
        if (netaddr_permitted(&in[i], p->cidrs, p->pc->n_allow_addresses, &cls)) {
            c->addrs[kept++] = in[i];
        } else if (!why[0]) {
            char a[NETADDR_STRLEN];
            (void)snprintf(why, why_size, "%s is %s", netaddr_format(&in[i], a, sizeof(a)),
                           netaddr_class_name(cls));
        }
    }
    c->n_addrs = kept;
    c->next_addr = 0;
    return kept;
}

static void addrs_ready(struct econn *c, const struct netaddr *in, size_t n)
{
    char why[96];
    if (addrs_filter(c, in, n, why, sizeof(why)) == 0) {
        char reason[EGRESS_HOST_SIZE + 200];
        (void)snprintf(reason, sizeof(reason),
                       "%s resolves only to refused addresses (%s), and profile '%s' does not "
                       "list them in allow_addresses",
                       c->dest.host, why[0] ? why : "none", econn_profile(c));
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    c->phase = PH_CONNECT;
    connect_next(c);
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct econn *c = container_of(req, struct econn, gai);
    c->gai_pending = false;
    if (c->phase != PH_RESOLVE) {
        uv_freeaddrinfo(res);
        econn_free_if_done(c);
        return;
    }
    if (status < 0) {
        uv_freeaddrinfo(res);
        char reason[EGRESS_HOST_SIZE + 64];
        (void)snprintf(reason, sizeof(reason), "cannot resolve %s: %s", c->dest.host,
                       uv_strerror(status));
        egress_conn_refuse(c, 502, "error", reason);
        return;
    }
    struct netaddr found[EGRESS_MAX_ADDRS * 2];
    size_t n = 0;
    for (struct addrinfo *ai = res; ai && n < ARRAY_SIZE(found); ai = ai->ai_next) {
        if (ai->ai_addr && netaddr_from_sockaddr(ai->ai_addr, &found[n]) == 0) {
            n++;
        }
    }
    uv_freeaddrinfo(res);
    addrs_ready(c, found, n);
}

/* Resolves c->dest off the loop (an address literal needs no resolver). */
void egress_conn_resolve(struct econn *c)
{
    c->phase = PH_RESOLVE;
    c->client_want = false;
    egress_conn_update_reading(c);
    timer_set(c, EGRESS_PHASE_MS);
    if (c->dest.is_ip) {
        struct netaddr a;
        if (netaddr_parse(c->dest.host, &a) < 0) {
            egress_conn_refuse(c, 400, "denied", "malformed address");
            return;
        }
        addrs_ready(c, &a, 1);
        return;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char port[8];
    (void)snprintf(port, sizeof(port), "%u", (unsigned)c->dest.port);
    int r = uv_getaddrinfo(c->s->g->h.loop, &c->gai, gai_cb, c->dest.host, port, &hints);
    if (r < 0) {
        char reason[EGRESS_HOST_SIZE + 64];
        (void)snprintf(reason, sizeof(reason), "cannot resolve %s: %s", c->dest.host,
                       uv_strerror(r));
        egress_conn_refuse(c, 502, "error", reason);
        return;
    }
    c->gai_pending = true;
}

static void hello_check(struct econn *c)
{
    char sni[EGRESS_HOST_SIZE];
    int r = egress_inspect_sni_parse((const uint8_t *)c->buf, c->len, sni);
    if (r == -EAGAIN) {
        if (c->client_eof) {
            egress_conn_close(c);
        }
        return;
    }
    char reason[2 * EGRESS_HOST_SIZE + 96];
    switch (r) {
    case 0:
        break;
    case -ENOENT:
        egress_conn_cut(c, "denied", "the TLS ClientHello carries no server name (SNI)");
        return;
    case -EOPNOTSUPP:
        egress_conn_cut(c, "denied", "Encrypted Client Hello hides the server name");
        return;
    case -E2BIG:
        egress_conn_cut(c, "denied", "the TLS ClientHello is too large");
        return;
    default:
        egress_conn_cut(c, "denied", "the tunnel did not start with a TLS ClientHello");
        return;
    }
    if (strcmp(sni, c->dest.host) != 0) {
        (void)snprintf(reason, sizeof(reason),
                       "TLS server name '%s' does not match the CONNECT host '%s'", sni,
                       c->dest.host);
        egress_conn_cut(c, "denied", reason);
        return;
    }
    /* The ClientHello was counted as it arrived; relay it and everything after. */
    c->phase = PH_TUNNEL;
    c->outcome = "allowed";
    uv_timer_stop(&c->timer);
    if (send_bytes(c, &c->upstream, c->buf, c->len) < 0) {
        return;
    }
    free(c->buf);
    c->buf = NULL;
    c->len = 0;
    c->client_want = true;
    c->up_want = true;
    egress_conn_update_reading(c);
}

static void connect_decide(struct econn *c)
{
    const struct eprofile *p = c->s->p;
    char reason[EGRESS_HOST_SIZE + 128];
    if (p->pc->read_only) {
        (void)snprintf(reason, sizeof(reason),
                       "profile '%s' is read-only: CONNECT tunnels are "
                       "refused (the method inside TLS cannot be checked)",
                       p->pc->name);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    bool ok = false;
    for (size_t i = 0; i < p->pc->n_allow && !ok; i++) {
        ok = egress_parse_allow_match(&p->allow[i], &c->req.dest);
    }
    if (!ok) {
        (void)snprintf(reason, sizeof(reason), "CONNECT to %s is not allowed by profile '%s'",
                       c->dest_desc, p->pc->name);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    if (c->s->st.bytes >= p->pc->max_task_bytes) {
        egress_conn_refuse(c, 403, "limit", "the task's byte limit (max_task_bytes) was reached");
        return;
    }
    c->dest = c->req.dest;
    /* Whatever followed the head is the start of the ClientHello. */
    memmove(c->buf, c->buf + c->head_len, c->len - c->head_len);
    c->len -= c->head_len;
    c->head_len = 0;
    memset(&c->req, 0, sizeof(c->req));
    size_t k = egress_conn_account(c, c->len);
    if (k < c->len) {
        egress_conn_refuse(c, 403, "limit", egress_conn_limit_reason(c));
        return;
    }
    egress_conn_resolve(c);
}

static void tunnel_data(struct econn *c, struct ebuf *b, size_t n, bool from_client)
{
    size_t k = egress_conn_account(c, n);
    b->len = k;
    if (egress_conn_send(c, from_client ? &c->upstream : &c->client, b) < 0) {
        return;
    }
    if (k < n) {
        egress_note_denial(c, "limit", egress_conn_limit_reason(c));
        egress_conn_finish(c, false);
    }
}

static void head_data(struct econn *c, const char *data, size_t n)
{
    if (!c->buf) {
        c->buf = xmalloc(EGRESS_BUF_CAP);
    }
    memcpy(c->buf + c->len, data, n);
    c->len += n;
    size_t hl = egress_parse_head_end(c->buf, c->len < EGRESS_HEAD_MAX ? c->len : EGRESS_HEAD_MAX);
    if (hl == 0) {
        if (c->len >= EGRESS_HEAD_MAX) {
            egress_conn_refuse(c, 431, "denied", "the request head is larger than 16 KiB");
        }
        return;
    }
    c->head_len = hl;
    uv_timer_stop(&c->timer);
    const char *why = NULL;
    if (c->s->st.requests < UINT32_MAX) {
        c->s->st.requests++;
    }
    if (egress_parse_request(c->buf, hl, &c->req, &why) < 0) {
        egress_conn_refuse(c, 400, "denied", why);
        return;
    }
    str_copy(c->method, c->req.method, sizeof(c->method));
    bool v6 = strchr(c->req.dest.host, ':') != NULL;
    (void)snprintf(c->dest_desc, sizeof(c->dest_desc), "%s%s%s:%u", v6 ? "[" : "", c->req.dest.host,
                   v6 ? "]" : "", (unsigned)c->req.dest.port);
    c->is_connect = c->req.is_connect;
    if (c->is_connect) {
        connect_decide(c);
    } else {
        egress_http_decide(c);
    }
}

static void client_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct econn *c = st->data;
    struct ebuf *b = buf->base ? container_of(buf->base, struct ebuf, data) : NULL;
    if (nread == 0) {
        free(b);
        return;
    }
    if (nread < 0) {
        free(b);
        c->client_eof = true;
        c->client_reading = false;
        switch (c->phase) {
        case PH_FINISH:
            if (c->drain) {
                c->drain = false;
                egress_conn_close(c);
            }
            return;
        case PH_TUNNEL:
            /* Half-close: the upstream learns the client is done and may still answer. */
            if (nread == UV_EOF && c->up_open && !c->up_shut && !c->up_eof) {
                c->up_shut = true;
                if (uv_shutdown(&c->shut_up, (uv_stream_t *)&c->upstream, shutdown_up_cb) < 0) {
                    egress_conn_close(c);
                }
                return;
            }
            egress_conn_close(c);
            return;
        case PH_HTTP:
            if (nread == UV_EOF && c->req_done) {
                return; /* half-closed after the request: the response still goes back */
            }
            egress_conn_close(c);
            return;
        default:
            egress_conn_close(c);
            return;
        }
    }
    size_t n = (size_t)nread;
    switch (c->phase) {
    case PH_HEAD:
        head_data(c, b->data, n);
        free(b);
        return;
    case PH_HELLO: {
        if (c->len + n > EGRESS_BUF_CAP) {
            free(b);
            egress_conn_cut(c, "denied", "the TLS ClientHello is too large");
            return;
        }
        size_t k = egress_conn_account(c, n);
        memcpy(c->buf + c->len, b->data, k);
        c->len += k;
        free(b);
        if (k < n) {
            egress_conn_cut(c, "limit", egress_conn_limit_reason(c));
            return;
        }
        hello_check(c);
        return;
    }
    case PH_TUNNEL:
        tunnel_data(c, b, n, true);
        return;
    case PH_HTTP:
        b->len = n;
        egress_http_client_data(c, b);
        return;
    default:
        free(b); /* PH_FINISH drain, or bytes the phase does not read */
        return;
    }
}

static void up_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct econn *c = st->data;
    struct ebuf *b = buf->base ? container_of(buf->base, struct ebuf, data) : NULL;
    if (nread == 0) {
        free(b);
        return;
    }
    if (nread < 0) {
        free(b);
        c->up_eof = true;
        c->up_reading = false;
        if (c->phase == PH_TUNNEL && nread == UV_EOF) {
            if (c->client_eof) {
                egress_conn_close(c);
                return;
            }
            egress_conn_finish(c, false);
            return;
        }
        if (c->phase == PH_HTTP && nread == UV_EOF) {
            egress_http_upstream_eof(c);
            return;
        }
        egress_conn_close(c);
        return;
    }
    size_t n = (size_t)nread;
    if (c->phase == PH_TUNNEL) {
        tunnel_data(c, b, n, false);
        return;
    }
    if (c->phase != PH_HTTP) {
        free(b);
        return;
    }
    size_t k = egress_conn_account(c, n);
    egress_http_upstream_data(c, b->data, k);
    free(b);
    if (k < n && c->phase != PH_CLOSED) {
        egress_note_denial(c, "limit", egress_conn_limit_reason(c));
        if (c->phase == PH_HTTP) {
            egress_conn_finish(c, false);
        }
    }
}

static void connected(struct econn *c)
{
    if (!c->is_connect) {
        egress_http_start(c);
        return;
    }
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    c->phase = PH_HELLO;
    timer_set(c, EGRESS_PHASE_MS);
    if (send_bytes(c, &c->client, ok, sizeof(ok) - 1) < 0) {
        return;
    }
    c->client_want = true;
    egress_conn_update_reading(c);
    if (c->len > 0) {
        hello_check(c);
    }
}

void egress_conn_accept(struct egress_session *s, uv_stream_t *server)
{
    struct econn *c = xcalloc(1, sizeof(*c));
    c->s = s;
    uv_tcp_init(s->g->h.loop, &c->client);
    uv_timer_init(s->g->h.loop, &c->timer);
    c->client.data = c;
    c->timer.data = c;
    c->handles = 2;
    s->refs++;
    s->total++;
    DLIST_PUSH(s->conns, c);
    if (uv_accept(server, (uv_stream_t *)&c->client) < 0) {
        egress_conn_close(c);
        return;
    }
    uint32_t max = s->p->pc->max_connections;
    if (s->total > 2 * max + 8) {
        egress_conn_close(c); /* a flood of refused connections: no answer for these */
        return;
    }
    if (s->active >= max) {
        char reason[96];
        (void)snprintf(reason, sizeof(reason),
                       "the profile's connection limit (%u open) was "
                       "reached",
                       max);
        if (s->st.requests < UINT32_MAX) {
            s->st.requests++;
        }
        egress_conn_refuse(c, 403, "limit", reason);
        return;
    }
    c->counted = true;
    s->active++;
    c->phase = PH_HEAD;
    c->client_want = true;
    timer_set(c, EGRESS_PHASE_MS);
    egress_conn_update_reading(c);
}
