/* SPDX-License-Identifier: MIT */
/* Plain-HTTP routes of the egress proxy: the route and its checks, the request as the
 * upstream gets it (the credential header is added here and nowhere else), its body passed
 * on to its framed end and no further, and the response passed back with chunked bodies
 * decoded and any echo of the credential scrubbed out of headers and body. */
#define LOG_MOD "egress"
#include "egress/egress_impl.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "egress/egress_route.h"
#include "lib/alloc.h"
#include "lib/util.h"

/* Interim (1xx) responses passed on before the final one, at most. */
#define EGRESS_INTERIM_MAX 4

static void append(struct ebuf *b, size_t cap, const char *s, size_t n)
{
    if (b->len + n <= cap) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
    }
}

static void append_str(struct ebuf *b, size_t cap, const char *s)
{
    append(b, cap, s, strlen(s));
}

/* The request as the upstream gets it: origin-form below the route's base path (the path
 * normalized, as its route was matched), Host of the upstream, the client's end-to-end
 * headers minus the credential header, then Connection: close and the credential. */
static struct ebuf *upstream_head(struct econn *c)
{
    const struct egress_request *q = &c->req;
    const struct eroute *rt = c->route;
    const char *hname = rt->rc->header;
    /* The client's head bounds its path and headers; the rest is ours. */
    size_t cap =
        q->head_len + strlen(rt->base) + rt->cred_len + strlen(hname) + EGRESS_HOST_SIZE + 512;
    struct ebuf *b = egress_conn_buf_new(c, cap);
    append_str(b, cap, c->method);
    append_str(b, cap, " ");
    append_str(b, cap, rt->base);
    /* egress_http_decide normalized this path once already, so this cannot fail; the head
     * bounds it, so it fits. */
    size_t plen = 0;
    const char *why = NULL;
    assert(b->len + q->path_len <= cap);
    int r = egress_path_normalize(q->path, q->path_len, b->data + b->len, &plen, &why);
    assert(r == 0);
    b->len += plen;
    if (q->query) {
        append_str(b, cap, "?");
        append(b, cap, q->query, q->query_len);
    }
    append_str(b, cap, " HTTP/1.1\r\nHost: ");
    bool v6 = strchr(rt->up.host, ':') != NULL;
    append_str(b, cap, v6 ? "[" : "");
    append_str(b, cap, rt->up.host);
    append_str(b, cap, v6 ? "]" : "");
    if (rt->up.port != 80) {
        char port[8];
        (void)snprintf(port, sizeof(port), ":%u", (unsigned)rt->up.port);
        append_str(b, cap, port);
    }
    append_str(b, cap, "\r\n");
    for (size_t i = 0; i < q->n_headers; i++) {
        const struct egress_header *h = &q->headers[i];
        if (egress_parse_header_is(h, "host") ||
            egress_parse_header_hop_by_hop(h, q->headers, q->n_headers) ||
            (rt->cred && egress_parse_header_is(h, hname))) {
            continue;
        }
        append(b, cap, h->name, h->name_len);
        append_str(b, cap, ": ");
        append(b, cap, h->value, h->value_len);
        append_str(b, cap, "\r\n");
    }
    append_str(b, cap, "Connection: close\r\n");
    if (rt->cred) {
        append_str(b, cap, hname);
        append_str(b, cap, ": ");
        append(b, cap, rt->cred, rt->cred_len);
        append_str(b, cap, "\r\n");
    }
    append_str(b, cap, "\r\n");
    return b;
}

void egress_http_decide(struct econn *c)
{
    const struct eprofile *p = c->s->p;
    const struct egress_request *q = &c->req;
    char reason[EGRESS_HOST_SIZE + 160];
    const char *why = NULL;
    size_t idx = 0;
    size_t nlen = 0;
    if (q->absolute_https) {
        egress_conn_refuse(c, 403, "denied", "https:// URLs go through CONNECT (set HTTPS_PROXY)");
        return;
    }
    if (q->method_bit == 0) {
        (void)snprintf(reason, sizeof(reason), "method %s is not allowed", c->method);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    if (p->pc->read_only && !(q->method_bit & EGRESS_METHODS_READ_ONLY)) {
        (void)snprintf(reason, sizeof(reason),
                       "profile '%s' is read-only: only GET, HEAD and "
                       "OPTIONS are allowed, not %s",
                       p->pc->name, c->method);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    scoped_free char *norm = xmalloc(q->path_len);
    int r = q->dest.port == 80 ? egress_route_find(p->pc, q->dest.host, q->method_bit, q->path,
                                                   q->path_len, norm, &idx, &nlen, &why)
                               : -ENOENT;
    if (r == -ENOENT) {
        (void)snprintf(reason, sizeof(reason), "no route for %s in profile '%s'", c->dest_desc,
                       p->pc->name);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    if (r < 0) {
        (void)snprintf(reason, sizeof(reason), "%s %s: %s", c->method, c->dest_desc, why);
        egress_conn_refuse(c, 403, "denied", reason);
        return;
    }
    const struct eroute *rt = &p->routes[idx];
    for (size_t i = 0; i < q->n_headers; i++) {
        if (egress_parse_header_is(&q->headers[i], "upgrade")) {
            egress_conn_refuse(c, 403, "denied", "protocol upgrades are not allowed");
            return;
        }
    }
    if (q->framing == EGRESS_BODY_LENGTH &&
        q->head_len + q->content_length > p->pc->max_request_bytes) {
        egress_conn_refuse(c, 403, "limit",
                           "the request body exceeds the profile's max_request_bytes");
        return;
    }
    if (c->s->st.bytes >= p->pc->max_task_bytes) {
        egress_conn_refuse(c, 403, "limit", "the task's byte limit (max_task_bytes) was reached");
        return;
    }
    c->route = rt;
    c->dest = rt->up;
    c->head_request = q->method_bit == EGRESS_METHOD_HEAD;
    egress_parse_body_init(&c->req_body, q->framing, q->content_length);
    egress_inspect_scrub_init(&c->scrub, rt->cred, rt->cred_len);
    egress_conn_resolve(c);
}

/* Upstream connected with the head parsed and kept in buf: the head goes up, then any
 * body bytes that came with it. */
void egress_http_start(struct econn *c)
{
    c->phase = PH_HTTP;
    c->outcome = "allowed";
    uv_timer_stop(&c->timer);
    if (egress_conn_account(c, c->head_len) < c->head_len) {
        egress_conn_refuse(c, 403, "limit", egress_conn_limit_reason(c));
        return;
    }
    struct ebuf *h = upstream_head(c);
    if (egress_conn_send(c, &c->upstream, h) < 0) {
        return;
    }
    c->up_want = true;
    c->client_want = !c->req_body.done;
    c->req_done = c->req_body.done;
    size_t extra = c->len - c->head_len;
    if (extra > 0 && !c->req_done) {
        struct ebuf *b = egress_conn_buf_new(c, extra);
        memcpy(b->data, c->buf + c->head_len, extra);
        b->len = extra;
        free(c->buf);
        c->buf = NULL;
        egress_http_client_data(c, b);
        return;
    }
    free(c->buf);
    c->buf = NULL;
    egress_conn_update_reading(c);
}

/* Request body bytes from the client (b holds them; it is sent on or freed). */
void egress_http_client_data(struct econn *c, struct ebuf *b)
{
    const char *data = b->data;
    size_t n = b->len;
    size_t used = 0;
    if (c->req_done) {
        free(b); /* after the request: pipelining is not spoken, the bytes are dropped */
        return;
    }
    if (egress_parse_body_feed(&c->req_body, data, n, &used, NULL, NULL) < 0) {
        free(b);
        if (!c->responded) {
            egress_conn_refuse(c, 400, "denied", "malformed chunked request body");
        } else {
            egress_conn_cut(c, "denied", "malformed chunked request body");
        }
        return;
    }
    size_t k = egress_conn_account(c, used);
    b->len = k;
    if (k < used) {
        free(b);
        egress_conn_close_upstream(c);
        if (!c->responded) {
            egress_conn_refuse(c, 403, "limit", egress_conn_limit_reason(c));
        } else {
            egress_conn_cut(c, "limit", egress_conn_limit_reason(c));
        }
        return;
    }
    if (egress_conn_send(c, &c->upstream, b) < 0) {
        return;
    }
    if (c->req_body.done) {
        c->req_done = true;
        c->client_want = false;
        egress_conn_update_reading(c);
    }
}

static void emit_body(void *ud, const char *data, size_t n)
{
    struct econn *c = ud;
    c->out->len += egress_inspect_scrub_feed(&c->scrub, data, n, false, c->out->data + c->out->len);
}

/* Sends the response head: status line, the upstream's end-to-end headers (scrubbed), and
 * Connection: close; a chunked body is passed on decoded and delimited by the close. */
static void send_response_head(struct econn *c, const struct egress_response *rs)
{
    size_t cap = rs->head_len + 64;
    struct ebuf *b = egress_conn_buf_new(c, cap);
    append(b, cap, rs->status_line, rs->status_line_len);
    append_str(b, cap, "\r\n");
    if (rs->status >= 200) {
        for (size_t i = 0; i < rs->n_headers; i++) {
            const struct egress_header *h = &rs->headers[i];
            if (egress_parse_header_hop_by_hop(h, rs->headers, rs->n_headers) ||
                (rs->framing == EGRESS_BODY_CHUNKED &&
                 (egress_parse_header_is(h, "transfer-encoding") ||
                  egress_parse_header_is(h, "content-length")))) {
                continue;
            }
            append(b, cap, h->name, h->name_len);
            append_str(b, cap, ": ");
            append(b, cap, h->value, h->value_len);
            append_str(b, cap, "\r\n");
        }
        append_str(b, cap, "Connection: close\r\n");
    }
    append_str(b, cap, "\r\n");
    /* SECURITY: an upstream that echoes the credential in a header does not hand it over. */
    egress_inspect_scrub_buf(&c->scrub, b->data, b->len);
    (void)egress_conn_send(c, &c->client, b);
}

static void http_response_done(struct econn *c)
{
    struct ebuf *b = egress_conn_buf_new(c, EGRESS_SECRET_MAX);
    b->len = egress_inspect_scrub_feed(&c->scrub, NULL, 0, true, b->data);
    if (egress_conn_send(c, &c->client, b) < 0) {
        return;
    }
    egress_conn_finish(c, false);
}

/* Response bytes from the upstream. */
void egress_http_upstream_data(struct econn *c, const char *data, size_t n)
{
    while (n > 0 && !c->resp_head_done && c->phase == PH_HTTP) {
        size_t room = EGRESS_HEAD_MAX + EGRESS_READ_CHUNK - c->rlen;
        if (!c->rhead) {
            c->rhead = xmalloc(EGRESS_HEAD_MAX + EGRESS_READ_CHUNK);
        }
        size_t take = n < room ? n : room;
        memcpy(c->rhead + c->rlen, data, take);
        c->rlen += take;
        data += take;
        n -= take;
        size_t hl = egress_parse_head_end(c->rhead, c->rlen);
        if (hl == 0) {
            if (c->rlen >= EGRESS_HEAD_MAX) {
                egress_conn_refuse(c, 502, "error", "the upstream's response head is too large");
            }
            return;
        }
        struct egress_response rs;
        const char *why = NULL;
        if (egress_parse_response(c->rhead, hl, c->head_request, &rs, &why) < 0 ||
            rs.status == 101 || (rs.status < 200 && ++c->interim > EGRESS_INTERIM_MAX)) {
            if (c->responded) {
                egress_conn_close(c);
            } else {
                egress_conn_refuse(c, 502, "error", why ? why : "the upstream switched protocols");
            }
            return;
        }
        send_response_head(c, &rs);
        if (c->phase != PH_HTTP) {
            return;
        }
        /* Bytes after this head: the body, or (after a 1xx) the next head. */
        size_t rest = c->rlen - hl;
        char *tail = xmalloc(rest + n + 1);
        memcpy(tail, c->rhead + hl, rest);
        memcpy(tail + rest, data, n);
        if (rs.status >= 200) {
            c->resp_head_done = true;
            egress_parse_body_init(&c->resp_body, rs.framing, rs.content_length);
            free(c->rhead);
            c->rhead = NULL;
            c->rlen = 0;
            egress_http_upstream_data(c, tail, rest + n);
            free(tail);
            return;
        }
        c->rlen = 0;
        free(c->rhead);
        c->rhead = NULL;
        egress_http_upstream_data(c, tail, rest + n);
        free(tail);
        return;
    }
    if (!c->resp_head_done || c->phase != PH_HTTP) {
        return;
    }
    if (c->resp_body.done) {
        http_response_done(c);
        return;
    }
    if (n == 0) {
        return;
    }
    size_t used = 0;
    c->out = egress_conn_buf_new(c, n + EGRESS_SECRET_MAX);
    int r = egress_parse_body_feed(&c->resp_body, data, n, &used, emit_body, c);
    struct ebuf *out = take_ptr(&c->out);
    if (r < 0) {
        free(out);
        egress_conn_close(c);
        return;
    }
    if (egress_conn_send(c, &c->client, out) < 0) {
        return;
    }
    if (c->resp_body.done) {
        http_response_done(c);
    }
}

void egress_http_upstream_eof(struct econn *c)
{
    if (c->resp_head_done) {
        http_response_done(c);
    } else if (c->responded) {
        egress_conn_finish(c, false);
    } else {
        egress_conn_refuse(c, 502, "error", "the upstream closed without a response");
    }
}
