/* SPDX-License-Identifier: MIT */
#pragma once
/* A tiny HTTP/1.1 server on the loop for /metrics and /healthz: requests parsed by
 * libhttp-parser, one request per connection (Connection: close), every resource bounded
 * (connections, request bytes, time). The handler decides the response; this file only
 * moves bytes, answers what cannot reach a handler (400, 408-style drop, 414, 431) and
 * enforces the bounds. Loop thread only. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"

/* Connections served at once; beyond it a new connection is accepted and closed at once. */
#define HTTP_MAX_CONNECTIONS 64
/* From accept to a complete request: a client that sends nothing, or too slowly, is dropped
 * without an answer after this. */
#define HTTP_REQUEST_TIMEOUT_MS 5000
/* From the response being queued to the client closing its end: a client that does not read
 * is dropped after this. */
#define HTTP_WRITE_TIMEOUT_MS 10000
/* Bytes of one request (request line, headers and any body); beyond it: 431. */
#define HTTP_MAX_REQUEST_BYTES 8192
/* Bytes of the request target; beyond it: 414. */
#define HTTP_MAX_URL 1024

struct http_server;

struct http_request {
    const char *method; /* "GET", "HEAD", "POST", ... */
    const char *path;   /* the target's path, without query or fragment ("/metrics") */
    const char *query;  /* the query string without '?', or "" */
};

struct http_response {
    int status;               /* 200, 404, ... (set by the handler) */
    const char *content_type; /* a static string; NULL: "text/plain; charset=utf-8" */
    const char *allow;        /* a static string for 405's Allow header, or NULL */
    char *body;               /* malloc'd; http.c takes and frees it; NULL: empty */
    size_t body_len;
};

/* Answers one request. res arrives zeroed; the handler sets status and, usually, body.
 * For HEAD http.c sends the headers only (Content-Length still that of the body). */
typedef void (*http_handler_cb)(void *ud, const struct http_request *req,
                                struct http_response *res);

/* Listens on addr ("IP:PORT" or "[IPv6]:PORT"; numeric only: no DNS on the loop) and serves
 * requests with fn(ud, ...). Returns 0, -EINVAL (not a numeric address) or the bind/listen
 * error (-EADDRINUSE, -EACCES, ...), with e naming the address. */
int http_server_new(uv_loop_t *loop, const char *addr, http_handler_cb fn, void *ud,
                    struct http_server **ret, struct err *e);
/* Stops listening, closes every connection and frees the server once its handles are
 * closed. */
void http_server_close(struct http_server *s);
/* Connections open now. */
uint32_t http_server_connections(const struct http_server *s);
/* Connections closed at once because HTTP_MAX_CONNECTIONS were open. */
uint64_t http_server_rejected(const struct http_server *s);
