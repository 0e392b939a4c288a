/* SPDX-License-Identifier: MIT */
#pragma once
/* The egress proxy's parsing and matching, without I/O: host names and authorities, the
 * CONNECT allowlist, methods, HTTP/1.x request and response heads (strict: CRLF only, no
 * folding, one framing), message bodies (Content-Length and chunked), and the proxy
 * variables of a task's environment; request paths are wire/egress_path.h's. Bounded by
 * their input; nothing allocates; any thread. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct err;

/* Buffer size for a host name or address (253 bytes of name, NUL). */
#define EGRESS_HOST_SIZE 256
/* The largest request or response head (request line or status line, headers, CRLF). */
#define EGRESS_HEAD_MAX (16 * 1024)
#define EGRESS_HEADERS_MAX 64

/* A destination: a lowercased DNS name without trailing dot, or an address literal in its
 * canonical text form (IPv6 without brackets; IPv4-mapped IPv6 as IPv4). */
struct egress_hostport {
    char host[EGRESS_HOST_SIZE];
    uint16_t port;
    bool is_ip;
};

/* Normalizes a host (n bytes, not NUL-terminated; "[v6]" brackets allowed) into out
 * (EGRESS_HOST_SIZE bytes): see struct egress_hostport. Names follow DNS label rules and
 * their last label is not numeric ("127.1", "0x7f.1" and "2130706433" are refused, never
 * read as addresses). Returns 0 or -EINVAL. */
int egress_parse_host_normalize(const char *h, size_t n, char *out, bool *ret_is_ip);
/* Parses "host:port", "[v6]:port", or with default_port != 0 also "host" alone.
 * Returns 0 or -EINVAL. */
int egress_parse_authority(const char *s, size_t n, uint16_t default_port,
                           struct egress_hostport *ret);

/* One CONNECT allowlist entry: "host:port" or "*.suffix:port" (any name below suffix, not
 * suffix itself). */
struct egress_allow {
    char host[EGRESS_HOST_SIZE]; /* the suffix for a wildcard */
    uint16_t port;
    bool wildcard;
};

/* Parses an allowlist entry. Returns 0 or -EINVAL. */
int egress_parse_allow(const char *s, struct egress_allow *ret);
/* Whether hp (normalized) matches the entry. */
bool egress_parse_allow_match(const struct egress_allow *a, const struct egress_hostport *hp);

/* The methods a plain-HTTP route may allow, as bits (config.h's routes and profiles use them). */
#define EGRESS_METHOD_GET 0x01u
#define EGRESS_METHOD_HEAD 0x02u
#define EGRESS_METHOD_POST 0x04u
#define EGRESS_METHOD_PUT 0x08u
#define EGRESS_METHOD_PATCH 0x10u
#define EGRESS_METHOD_DELETE 0x20u
#define EGRESS_METHOD_OPTIONS 0x40u
#define EGRESS_METHODS_ALL 0x7fu
/* What a read_only profile allows. */
#define EGRESS_METHODS_READ_ONLY (EGRESS_METHOD_GET | EGRESS_METHOD_HEAD | EGRESS_METHOD_OPTIONS)

/* The EGRESS_METHOD_* bit of a method name (exact, capitals), or 0. */
uint32_t egress_parse_method_bit(const char *m, size_t n);

struct egress_header {
    const char *name;
    size_t name_len;
    const char *value; /* optional whitespace trimmed */
    size_t value_len;
};

enum egress_framing {
    EGRESS_BODY_NONE = 0, /* no body */
    EGRESS_BODY_LENGTH,   /* Content-Length bytes */
    EGRESS_BODY_CHUNKED,  /* chunked transfer coding */
    EGRESS_BODY_CLOSE,    /* until the connection closes (responses only) */
};

struct egress_request {
    char method[16];
    uint32_t method_bit; /* EGRESS_METHOD_*, 0 for CONNECT and unknown methods */
    bool is_connect;
    unsigned version_minor; /* HTTP/1.x */
    const char *target;
    size_t target_len;
    struct egress_header headers[EGRESS_HEADERS_MAX];
    size_t n_headers;
    size_t head_len; /* bytes up to and including the empty line */
    /* From the target (absolute-form or CONNECT's authority-form) or, for origin-form, the
     * Host header. Plain HTTP defaults to port 80. */
    struct egress_hostport dest;
    bool absolute_https; /* an https:// absolute-form target (refused: use CONNECT) */
    const char *path;    /* plain HTTP: the path, "/" when the target had none */
    size_t path_len;
    const char *query; /* after '?', or NULL */
    size_t query_len;
    enum egress_framing framing;
    uint64_t content_length;
};

/* Finds the end of a head in buf: the length including "\r\n\r\n", or 0 when it is not
 * there yet. */
size_t egress_parse_head_end(const char *buf, size_t len);
/* Parses a request head (buf[0..head_len), ending with the empty line). Pointers in ret
 * point into buf. Returns 0, or -EINVAL with *why a static phrase for a 400. */
int egress_parse_request(const char *buf, size_t head_len, struct egress_request *ret,
                         const char **why);
/* Whether h's name is `name` (case-insensitive). */
bool egress_parse_header_is(const struct egress_header *h, const char *name);
/* Whether the header is hop-by-hop (Connection, Keep-Alive, Proxy-*, TE, Trailer, Upgrade,
 * Transfer-Encoding) or named in one of the message's Connection headers. */
bool egress_parse_header_hop_by_hop(const struct egress_header *h, const struct egress_header *all,
                                    size_t n);

struct egress_response {
    unsigned status;
    unsigned version_minor;
    const char *status_line; /* "HTTP/1.1 200 OK", without CRLF */
    size_t status_line_len;
    struct egress_header headers[EGRESS_HEADERS_MAX];
    size_t n_headers;
    size_t head_len;
    enum egress_framing framing;
    uint64_t content_length;
};

/* Parses a response head; head_request: the request was HEAD (no body follows). 1xx, 204
 * and 304 have no body. Returns 0 or -EINVAL (*why). */
int egress_parse_response(const char *buf, size_t head_len, bool head_request,
                          struct egress_response *ret, const char **why);

/* Body framing, incrementally. */
struct egress_body {
    enum egress_framing framing;
    uint64_t remaining; /* LENGTH: bytes left; CHUNKED: of the current chunk */
    int state;          /* CHUNKED: parser state */
    size_t line;        /* CHUNKED: bytes of the current size or trailer line */
    bool done;          /* the message is complete */
};

typedef void (*egress_data_cb)(void *ud, const char *data, size_t len);

void egress_parse_body_init(struct egress_body *b, enum egress_framing framing, uint64_t length);
/* Feeds n bytes; emit (may be NULL) gets the decoded body bytes. *ret_used is how many of
 * in belong to this message (less than n only once b->done). Returns 0 or -EINVAL
 * (malformed chunked coding, or a size or trailer line over its bound). */
int egress_parse_body_feed(struct egress_body *b, const char *in, size_t n, size_t *ret_used,
                           egress_data_cb emit, void *ud);

/* The variables that point a task's HTTP clients at its proxy: EGRESS_PROXY_VARS names
 * (HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy), each set to egress_parse_proxy_url and to no
 * other value (the request's own are replaced; core/task.c puts them in the task's env). */
#define EGRESS_PROXY_VARS 4
#define EGRESS_PROXY_URL_MAX 32
/* The i-th name (i < EGRESS_PROXY_VARS). */
const char *egress_parse_proxy_var(size_t i);
/* "http://127.0.0.1:port" into buf (EGRESS_PROXY_URL_MAX bytes are enough). */
void egress_parse_proxy_url(uint16_t port, char *buf, size_t size);
