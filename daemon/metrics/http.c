/* SPDX-License-Identifier: MIT */
/* A tiny HTTP/1.1 server on the loop: accept under a connection bound, parse one request
 * with libhttp-parser, let the handler answer, write, and close. Every client is bounded in
 * bytes and time; nothing here blocks, and no client can hold more than one connection slot
 * for longer than the request and write deadlines. */
#define LOG_MOD "http"
#include "metrics/http.h"

#include <http_parser.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/list.h"
#include "lib/listener.h"
#include "lib/util.h"

struct http_conn;

struct http_server {
    struct listener l; /* its tcp listens; l.n_conns counts the connections */
    uv_loop_t *loop;
    http_handler_cb fn;
    void *ud;
    char *addr;
    struct http_conn *conns;
    uint64_t rejected;
};

struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    struct http_server *srv;
    http_parser parser;
    int open_handles;
    size_t nread; /* request bytes so far */
    char url[HTTP_MAX_URL + 1];
    size_t url_len;
    bool url_too_long;
    bool complete;   /* the request has been read whole */
    bool responding; /* a response is queued: later bytes are discarded */
    bool written;    /* the response has been written whole */
    bool peer_eof;   /* the client closed its end while the response was queued */
    bool closing;
    uv_write_t wreq;
    uv_shutdown_t sreq;
    char head[512];
    char *body;
    struct http_conn *prev;
    struct http_conn *next;
};

/* One read buffer for every connection: the loop is single-threaded and each chunk is
 * parsed before the next read. */
static char read_buf[16 * 1024];

static void server_free(struct listener *l)
{
    struct http_server *s = container_of(l, struct http_server, l);
    free(s->addr);
    free(s);
}

static void conn_handle_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->open_handles > 0) {
        return;
    }
    struct http_server *s = c->srv;
    DLIST_REMOVE(s->conns, c);
    free(c->body);
    free(c);
    listener_conn_closed(&s->l); /* may free s */
}

static void conn_close(struct http_conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, conn_handle_closed);
    uv_close((uv_handle_t *)&c->tcp, conn_handle_closed);
}

static void timeout_cb(uv_timer_t *h)
{
    struct http_conn *c = h->data;
    log_debug("msg=\"http client too slow, dropping it\" responding=%d", (int)c->responding);
    conn_close(c);
}

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    if (status < 0) {
        conn_close(c);
    }
    /* Otherwise keep reading (and discarding) until the client closes its end, so that
     * unread request bytes never turn our close into a reset that loses the response; the
     * write deadline bounds the wait. */
}

static void write_cb(uv_write_t *req, int status)
{
    struct http_conn *c = req->data;
    free(c->body);
    c->body = NULL;
    c->written = true;
    if (c->closing) {
        return;
    }
    c->sreq.data = c;
    if (status < 0 || c->peer_eof ||
        uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, shutdown_cb) < 0) {
        conn_close(c);
    }
}

/* Queues the response (status line, headers, body unless HEAD) and arms the write
 * deadline. Takes body. */
static void respond(struct http_conn *c, int status, const char *content_type, const char *allow,
                    char *body, size_t body_len, bool head_only)
{
    c->responding = true;
    c->body = body;
    int n = snprintf(c->head, sizeof(c->head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%s%s%sCache-Control: no-store\r\nConnection: close\r\n\r\n",
                     status, status_text(status),
                     content_type ? content_type : "text/plain; charset=utf-8", body_len,
                     allow ? "Allow: " : "", allow ? allow : "", allow ? "\r\n" : "");
    uv_buf_t bufs[2];
    unsigned nbufs = 1;
    bufs[0] = uv_buf_init(c->head, (unsigned)n);
    if (body && body_len > 0 && !head_only) {
        bufs[1] = uv_buf_init(body, (unsigned)body_len);
        nbufs = 2;
    }
    uv_timer_start(&c->timer, timeout_cb, HTTP_WRITE_TIMEOUT_MS, 0);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, bufs, nbufs, write_cb) < 0) {
        conn_close(c);
    }
}

static void respond_error(struct http_conn *c, int status, const char *text)
{
    respond(c, status, NULL, NULL, xstrdup(text), strlen(text), false);
}

/* The request is complete: hand it to the handler. */
static void dispatch(struct http_conn *c)
{
    struct http_server *s = c->srv;
    struct http_parser_url u;
    char path[HTTP_MAX_URL + 1];
    char query[HTTP_MAX_URL + 1];
    http_parser_url_init(&u);
    if (http_parser_parse_url(c->url, c->url_len, c->parser.method == HTTP_CONNECT, &u) != 0 ||
        !(u.field_set & (1 << UF_PATH))) {
        respond_error(c, 400, "bad request target\n");
        return;
    }
    size_t plen = u.field_data[UF_PATH].len;
    memcpy(path, c->url + u.field_data[UF_PATH].off, plen);
    path[plen] = '\0';
    query[0] = '\0';
    if (u.field_set & (1 << UF_QUERY)) {
        size_t qlen = u.field_data[UF_QUERY].len;
        memcpy(query, c->url + u.field_data[UF_QUERY].off, qlen);
        query[qlen] = '\0';
    }
    const char *method = http_method_str((enum http_method)c->parser.method);
    struct http_request req = {method, path, query};
    struct http_response res;
    memset(&res, 0, sizeof(res));
    s->fn(s->ud, &req, &res);
    if (res.status < 100 || res.status > 599) {
        free(res.body);
        respond_error(c, 500, "internal error\n");
        return;
    }
    respond(c, res.status, res.content_type, res.allow, res.body, res.body_len,
            c->parser.method == HTTP_HEAD);
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->url_len + len > HTTP_MAX_URL) {
        c->url_too_long = true;
        return 1; /* stops the parser: answered with 414 */
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->complete = true;
    http_parser_pause(p, 1); /* one request per connection: ignore anything after it */
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_url = on_url,
    .on_message_complete = on_message_complete,
};

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = read_buf;
    buf->len = sizeof(read_buf);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = st->data;
    if (c->closing) {
        return;
    }
    if (nread < 0) {
        /* EOF or error. Before a response the client gave up; after it, the client has read
         * it. A client may also close its sending end right after its request: then the
         * queued response is still written first. */
        if (nread == UV_EOF && c->responding && !c->written) {
            c->peer_eof = true;
            uv_read_stop(st);
            return;
        }
        conn_close(c);
        return;
    }
    if (nread == 0 || c->responding) {
        return;
    }
    size_t n = (size_t)nread;
    size_t room = HTTP_MAX_REQUEST_BYTES - c->nread;
    bool too_big = n > room;
    size_t feed = too_big ? room : n;
    c->nread += feed;
    (void)http_parser_execute(&c->parser, &parser_settings, buf->base, feed);
    enum http_errno err = HTTP_PARSER_ERRNO(&c->parser);
    if (c->complete) {
        dispatch(c);
    } else if (c->url_too_long) {
        respond_error(c, 414, "request target too long\n");
    } else if (err != HPE_OK) {
        log_debug("msg=\"malformed http request\" detail=\"%s\"", http_errno_name(err));
        respond_error(c, 400, "bad request\n");
    } else if (too_big || c->nread >= HTTP_MAX_REQUEST_BYTES) {
        respond_error(c, 431, "request too large\n");
    }
}

static void reject_closed(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *ls, int status)
{
    struct http_server *s = ls->data;
    if (status < 0) {
        log_warn_errno(status, "msg=\"http accept failed\"");
        return;
    }
    if (s->l.n_conns >= HTTP_MAX_CONNECTIONS) {
        /* Over the bound: accept and close at once, so the backlog never fills with
         * clients that wait for ever and the listener keeps being served. */
        uv_tcp_t *t = xmalloc(sizeof(*t));
        uv_tcp_init(s->loop, t);
        if (uv_accept(ls, (uv_stream_t *)t) == 0) {
            s->rejected++;
        }
        uv_close((uv_handle_t *)t, reject_closed);
        return;
    }
    struct http_conn *c = xcalloc(1, sizeof(*c));
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    DLIST_PUSH(s->conns, c);
    listener_conn_opened(&s->l);
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    (void)uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_start(&c->timer, timeout_cb, HTTP_REQUEST_TIMEOUT_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0) {
        conn_close(c);
    }
}

/* "IP:PORT" or "[IPv6]:PORT" into a socket address. */
static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
    const char *colon = strrchr(addr, ':');
    uint64_t port = 0;
    if (!colon || parse_u64(colon + 1, &port) < 0 || port < 1 || port > 65535) {
        return -EINVAL;
    }
    char host[64];
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (addr[0] == '[') {
        if (hlen < 3 || colon[-1] != ']') {
            return -EINVAL;
        }
        h = addr + 1;
        hlen -= 2;
    }
    if (hlen == 0 || hlen >= sizeof(host)) {
        return -EINVAL;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memset(ss, 0, sizeof(*ss));
    if (addr[0] == '[') {
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0 ? 0 : -EINVAL;
    }
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ? 0 : -EINVAL;
}

int http_server_new(uv_loop_t *loop, const char *addr, http_handler_cb fn, void *ud,
                    struct http_server **ret, struct err *e)
{
    struct sockaddr_storage ss;
    if (parse_addr(addr, &ss) < 0) {
        return err_setx(e, -EINVAL, "'%s' is not a numeric IP:PORT (or [IPv6]:PORT) to listen on",
                        addr);
    }
    struct http_server *s = xcalloc(1, sizeof(*s));
    s->loop = loop;
    s->fn = fn;
    s->ud = ud;
    s->addr = xstrdup(addr);
    listener_init(&s->l, server_free);
    uv_tcp_init(loop, &s->l.tcp);
    s->l.tcp.data = s;
    /* libuv may report a bind error only at listen: both are checked. */
    int r = uv_tcp_bind(&s->l.tcp, (const struct sockaddr *)&ss, 0);
    if (r == 0) {
        r = uv_listen(&s->l.stream, 128, on_connection);
    }
    if (r < 0) {
        err_set(e, r, "listen on %s", addr);
        listener_close(&s->l);
        return r;
    }
    *ret = s;
    return 0;
}

void http_server_close(struct http_server *s)
{
    if (!s || s->l.closing) {
        return;
    }
    struct http_conn *c = s->conns;
    while (c) {
        struct http_conn *next = c->next;
        conn_close(c);
        c = next;
    }
    listener_close(&s->l);
}

uint32_t http_server_connections(const struct http_server *s)
{
    return s->l.n_conns;
}

uint64_t http_server_rejected(const struct http_server *s)
{
    return s->rejected;
}
