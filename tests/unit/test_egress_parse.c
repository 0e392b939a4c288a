/* SPDX-License-Identifier: MIT */
/* Unit tests of egress_parse.c: host normalization, authorities, the CONNECT allowlist and
 * its wildcards, methods, strict request and response heads (framing ambiguities refused),
 * chunked and length-delimited bodies fed in every split, hop-by-hop headers, the task's
 * proxy environment, and 20000 randomly edited heads, bodies and authorities that must be
 * answered without a read outside their input. (Paths: test_egress_path.c.) */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "wire/egress_parse.h"
#include "lib/err.h"
#include "lib/util.h"
#include "rnd.h"

/* ---- hosts and the allowlist ---- */

static void norm_ok(const char *in, const char *want, bool ip)
{
    char out[EGRESS_HOST_SIZE];
    bool is_ip = !ip;
    assert_int_equal(egress_parse_host_normalize(in, strlen(in), out, &is_ip), 0);
    assert_string_equal(out, want);
    assert_true(is_ip == ip);
}

static void egress_parse_host_normalize__forms(void **state)
{
    (void)state;
    norm_ok("API.Example.COM.", "api.example.com", false);
    norm_ok("a-b_c.d", "a-b_c.d", false);
    norm_ok("127.0.0.1", "127.0.0.1", true);
    norm_ok("[::1]", "::1", true);
    norm_ok("[0:0::1]", "::1", true);
    norm_ok("[::ffff:10.0.0.1]", "10.0.0.1", true);
    const char *bad[] = {"",           ".",        "a..b",        "-a.com", "a-.com",
                         "a b",        "a/b",      "a@b",         "127.1",  "0x7f.1",
                         "2130706433", "1.2.3.04", "example.123", "[::1",   "::1",
                         "[1.2.3.4]",  "a%2eb",    "a.com\r"};
    char out[EGRESS_HOST_SIZE];
    bool ip;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        if (egress_parse_host_normalize(bad[i], strlen(bad[i]), out, &ip) != -EINVAL) {
            fail_msg("'%s' was accepted as '%s'", bad[i], out);
        }
    }
    char label[80];
    memset(label, 'a', 64);
    label[64] = '\0';
    assert_int_equal(egress_parse_host_normalize(label, 64, out, &ip), -EINVAL);
    assert_int_equal(egress_parse_host_normalize(label, 63, out, &ip), 0);
}

static void egress_parse_authority__ports(void **state)
{
    (void)state;
    struct egress_hostport hp;
    assert_int_equal(egress_parse_authority("a.com:443", 9, 0, &hp), 0);
    assert_string_equal(hp.host, "a.com");
    assert_int_equal(hp.port, 443);
    assert_int_equal(egress_parse_authority("a.com", 5, 80, &hp), 0);
    assert_int_equal(hp.port, 80);
    assert_int_equal(egress_parse_authority("[::1]:8443", 10, 0, &hp), 0);
    assert_string_equal(hp.host, "::1");
    assert_true(hp.is_ip);
    const char *bad[] = {"a.com",    "a.com:",   "a.com:0",        "a.com:65536",
                         "a.com:+1", "a.com:1x", "::1:443",        "[::1]443",
                         "a:b:1",    ":443",     "user@a.com:443", "a.com:443 "};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        if (egress_parse_authority(bad[i], strlen(bad[i]), 0, &hp) != -EINVAL) {
            fail_msg("'%s' was accepted", bad[i]);
        }
    }
}

static bool allowed(const char *entry, const char *authority)
{
    struct egress_allow a;
    struct egress_hostport hp;
    assert_int_equal(egress_parse_allow(entry, &a), 0);
    assert_int_equal(egress_parse_authority(authority, strlen(authority), 0, &hp), 0);
    return egress_parse_allow_match(&a, &hp);
}

static void egress_parse_allow_match__exact_and_wildcard(void **state)
{
    (void)state;
    assert_true(allowed("api.github.com:443", "API.GitHub.com.:443"));
    assert_false(allowed("api.github.com:443", "api.github.com:444"));
    assert_false(allowed("api.github.com:443", "evil-api.github.com:443"));
    assert_false(allowed("api.github.com:443", "api.github.com.evil.com:443"));
    assert_true(allowed("*.example.com:443", "a.example.com:443"));
    assert_true(allowed("*.example.com:443", "a.b.example.com:443"));
    assert_false(allowed("*.example.com:443", "example.com:443"));
    assert_false(allowed("*.example.com:443", "badexample.com:443"));
    assert_true(allowed("[::1]:8443", "[0::1]:8443"));
    assert_true(allowed("10.0.0.5:443", "10.0.0.5:443"));
    struct egress_allow a;
    assert_int_equal(egress_parse_allow("*.10.0.0.1:443", &a), -EINVAL);
    assert_int_equal(egress_parse_allow("example.com", &a), -EINVAL);
    assert_int_equal(egress_parse_allow("*:443", &a), -EINVAL);
}

/* ---- methods ---- */

static void egress_parse_method_bit__exact(void **state)
{
    (void)state;
    assert_int_equal(egress_parse_method_bit("GET", 3), EGRESS_METHOD_GET);
    assert_int_equal(egress_parse_method_bit("OPTIONS", 7), EGRESS_METHOD_OPTIONS);
    assert_int_equal(egress_parse_method_bit("get", 3), 0);
    assert_int_equal(egress_parse_method_bit("TRACE", 5), 0);
    assert_int_equal(egress_parse_method_bit("GETX", 3), EGRESS_METHOD_GET);
}

/* ---- request heads ---- */

static int req(const char *text, struct egress_request *r, const char **why)
{
    size_t n = strlen(text);
    size_t hl = egress_parse_head_end(text, n);
    assert_int_equal(hl, n);
    return egress_parse_request(text, hl, r, why);
}

static void egress_parse_request__absolute_form(void **state)
{
    (void)state;
    static struct egress_request r;
    const char *why = NULL;
    assert_int_equal(req("GET http://API/v1/items?x=1&y=2 HTTP/1.1\r\nHost: api\r\n"
                         "Accept:  */* \r\n\r\n",
                         &r, &why),
                     0);
    assert_string_equal(r.method, "GET");
    assert_int_equal(r.method_bit, EGRESS_METHOD_GET);
    assert_false(r.is_connect);
    assert_string_equal(r.dest.host, "api");
    assert_int_equal(r.dest.port, 80);
    assert_int_equal(r.path_len, 9);
    assert_memory_equal(r.path, "/v1/items", 9);
    assert_int_equal(r.query_len, 7);
    assert_memory_equal(r.query, "x=1&y=2", 7);
    assert_int_equal(r.n_headers, 2);
    assert_int_equal(r.headers[1].value_len, 3); /* optional whitespace trimmed */
    assert_memory_equal(r.headers[1].value, "*/*", 3);
    assert_int_equal(r.framing, EGRESS_BODY_NONE);
    /* No path: "/"; the query still counts. */
    assert_int_equal(req("GET http://api?q HTTP/1.0\r\n\r\n", &r, &why), 0);
    assert_int_equal(r.path_len, 1);
    assert_memory_equal(r.query, "q", 1);
    assert_int_equal(r.version_minor, 0);
}

static void egress_parse_request__origin_form_and_connect(void **state)
{
    (void)state;
    static struct egress_request r;
    const char *why = NULL;
    assert_int_equal(
        req("POST /v1/x HTTP/1.1\r\nHost: api:8080\r\nContent-Length: 5\r\n\r\n", &r, &why), 0);
    assert_string_equal(r.dest.host, "api");
    assert_int_equal(r.dest.port, 8080);
    assert_int_equal(r.framing, EGRESS_BODY_LENGTH);
    assert_true(r.content_length == 5);
    assert_int_equal(req("CONNECT api.github.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", &r, &why), 0);
    assert_true(r.is_connect);
    assert_string_equal(r.dest.host, "api.github.com");
    assert_int_equal(r.dest.port, 443);
    assert_int_equal(req("GET https://a.com/x HTTP/1.1\r\n\r\n", &r, &why), 0);
    assert_true(r.absolute_https);
    assert_int_equal(r.dest.port, 443);
    assert_int_equal(req("PUT http://a/x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &r, &why),
                     0);
    assert_int_equal(r.framing, EGRESS_BODY_CHUNKED);
    assert_int_equal(req("BREW http://a/x HTTP/1.1\r\n\r\n", &r, &why), 0);
    assert_int_equal(r.method_bit, 0);
}

static void egress_parse_request__refuses_ambiguity(void **state)
{
    (void)state;
    static struct egress_request r;
    const char *bad[] = {
        "GET http://a/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
        "GET http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        "GET /x HTTP/1.1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nX : 1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\n: 1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\nX: a\nb\r\n\r\n",
        "GET http://a/ HTTP/2.0\r\n\r\n",
        "GET http://a/ HTTP/1.1 \r\n\r\n",
        "GET  http://a/ HTTP/1.1\r\n\r\n",
        "GET http://a/#frag HTTP/1.1\r\n\r\n",
        "GET http://u:p@a/ HTTP/1.1\r\n\r\n",
        "GET * HTTP/1.1\r\n\r\n",
        "GET ftp://a/ HTTP/1.1\r\n\r\n",
        "CONNECT a.com HTTP/1.1\r\n\r\n",
        "CONNECT a.com:443 HTTP/1.1\r\nContent-Length: 3\r\n\r\n",
        "G\x01T http://a/ HTTP/1.1\r\n\r\n",
        "GET http://a/\x7f HTTP/1.1\r\n\r\n",
        /* Names an upstream could take for framing (by prefix, or '_' read as '-'). */
        "POST http://a/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encodingx: chunked\r\n\r\n",
        "POST http://a/ HTTP/1.1\r\nTransfer_Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "POST http://a/ HTTP/1.1\r\nContent-Length-Extra: 5\r\n\r\n",
        "POST http://a/ HTTP/1.1\r\ncontent_length: 5\r\n\r\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        const char *why = NULL;
        size_t n = strlen(bad[i]);
        size_t hl = egress_parse_head_end(bad[i], n);
        if (hl == 0 || egress_parse_request(bad[i], hl, &r, &why) != -EINVAL) {
            fail_msg("accepted: %s", bad[i]);
        }
        assert_non_null(why);
    }
    /* A name that merely contains one is another header. */
    const char *why = NULL;
    assert_int_equal(req("POST http://a/ HTTP/1.1\r\nX-Content-Length: 5\r\nContent-Length: "
                         "2\r\n\r\n",
                         &r, &why),
                     0);
    assert_int_equal(r.framing, EGRESS_BODY_LENGTH);
}

static void egress_parse_request__header_bound(void **state)
{
    (void)state;
    static struct egress_request r;
    static char text[EGRESS_HEAD_MAX];
    size_t o = (size_t)snprintf(text, sizeof(text), "GET http://a/ HTTP/1.1\r\n");
    for (int i = 0; i < EGRESS_HEADERS_MAX + 1; i++) {
        o += (size_t)snprintf(text + o, sizeof(text) - o, "X-%d: v\r\n", i);
    }
    o += (size_t)snprintf(text + o, sizeof(text) - o, "\r\n");
    const char *why = NULL;
    assert_int_equal(egress_parse_request(text, o, &r, &why), -EINVAL);
    assert_string_equal(why, "too many headers");
}

static void egress_parse_head_end__finds_crlfcrlf(void **state)
{
    (void)state;
    assert_int_equal(egress_parse_head_end("GET / HTTP/1.1\r\n\r\nbody", 22), 18);
    assert_int_equal(egress_parse_head_end("GET / HTTP/1.1\r\n\r", 17), 0);
    assert_int_equal(egress_parse_head_end("GET / HTTP/1.1\n\n", 16), 0);
}

static void egress_parse_header_hop_by_hop__connection_tokens(void **state)
{
    (void)state;
    static struct egress_request r;
    const char *why = NULL;
    assert_int_equal(
        req("GET http://a/ HTTP/1.1\r\nConnection: close, X-Secret ,Content-Length\r\n"
            "X-Secret: 1\r\nKeep-Alive: 5\r\nProxy-Authorization: x\r\nUpgrade: h2c\r\n"
            "X-Kept: 2\r\nContent-Length: 0\r\n\r\n",
            &r, &why),
        0);
    bool hop[8];
    for (size_t i = 0; i < r.n_headers; i++) {
        hop[i] = egress_parse_header_hop_by_hop(&r.headers[i], r.headers, r.n_headers);
    }
    assert_true(hop[0]);  /* Connection */
    assert_true(hop[1]);  /* X-Secret, named by Connection */
    assert_true(hop[2]);  /* Keep-Alive */
    assert_true(hop[3]);  /* Proxy-Authorization */
    assert_true(hop[4]);  /* Upgrade */
    assert_false(hop[5]); /* X-Kept */
    assert_false(hop[6]); /* Content-Length: never dropped, even when Connection names it */
}

/* ---- response heads ---- */

static int resp(const char *text, bool head, struct egress_response *r)
{
    const char *why = NULL;
    return egress_parse_response(text, strlen(text), head, r, &why);
}

static void egress_parse_response__framing(void **state)
{
    (void)state;
    static struct egress_response r;
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", false, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.framing, EGRESS_BODY_LENGTH);
    assert_int_equal(r.status_line_len, 15);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true, &r), 0);
    assert_int_equal(r.framing, EGRESS_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false, &r),
                     0);
    assert_int_equal(r.framing, EGRESS_BODY_CHUNKED);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", false, &r), 0);
    assert_int_equal(r.framing, EGRESS_BODY_CLOSE);
    assert_int_equal(resp("HTTP/1.0 200 OK\r\n\r\n", false, &r), 0);
    assert_int_equal(r.framing, EGRESS_BODY_CLOSE);
    assert_int_equal(resp("HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", false, &r), 0);
    assert_int_equal(r.framing, EGRESS_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 100 Continue\r\n\r\n", false, &r), 0);
    assert_int_equal(r.status, 100);
    assert_int_equal(r.framing, EGRESS_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 200\r\n\r\n", false, &r), 0);
    assert_int_equal(
        resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false, &r),
        -EINVAL);
    assert_int_equal(resp("HTTP/1.1 2000 OK\r\n\r\n", false, &r), -EINVAL);
}

/* Transfer-Encoding in a response is a list (empty elements ignored, fields joined in
 * order); chunked last frames the body, any other last coding leaves it to the close. What
 * is not a list of codings, or chunks twice, is refused: the task's HTTP client would read
 * it differently from the proxy. */
static void egress_parse_response__transfer_codings(void **state)
{
    (void)state;
    static struct egress_response r;
    static const struct {
        const char *te;
        int rc;
        enum egress_framing framing;
    } cases[] = {
        {"Transfer-Encoding: chunked", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: CHUNKED", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: , chunked", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: gzip;q=1 , chunked ,", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: chunked, gzip", 0, EGRESS_BODY_CLOSE},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip", 0, EGRESS_BODY_CLOSE},
        {"Transfer-Encoding: chunked\r\nContent-Length: 5", 0, EGRESS_BODY_CHUNKED},
        {"Transfer-Encoding: chunked, chunked", -EINVAL, 0},
        {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", -EINVAL, 0},
        {"Transfer-Encoding: chunked;x=1", -EINVAL, 0},
        {"Transfer-Encoding: : ng: chunked", -EINVAL, 0},
        {"Transfer-Encoding: x chunked", -EINVAL, 0},
        {"Transfer-Encoding: \"chunked\"", -EINVAL, 0},
        {"Transfer-Encoding: ,", -EINVAL, 0},
        {"Transfer-Encoding:", -EINVAL, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char text[256];
        (void)snprintf(text, sizeof(text), "HTTP/1.1 200 OK\r\n%s\r\n\r\n", cases[i].te);
        int rc = resp(text, false, &r);
        if (rc != cases[i].rc || (rc == 0 && r.framing != cases[i].framing)) {
            fail_msg("%s: rc %d framing %d", cases[i].te, rc, r.framing);
        }
    }
    assert_int_equal(resp("HTTP/1.1 099 Low\r\n\r\n", false, &r), -EINVAL);
    assert_int_equal(resp("ICY 200 OK\r\n\r\n", false, &r), -EINVAL);
}

/* ---- bodies ---- */

struct sink {
    char buf[512];
    size_t n;
};

static void sink_cb(void *ud, const char *data, size_t n)
{
    struct sink *s = ud;
    assert_true(s->n + n <= sizeof(s->buf));
    memcpy(s->buf + s->n, data, n);
    s->n += n;
}

/* Feeds text in pieces of `chunk` bytes; returns the bytes used, the decoded body in s. */
static int feed(struct egress_body *b, const char *text, size_t chunk, struct sink *s, size_t *used)
{
    size_t len = strlen(text);
    *used = 0;
    for (size_t off = 0; off < len && !b->done; off += chunk) {
        size_t k = len - off < chunk ? len - off : chunk;
        size_t u = 0;
        int r = egress_parse_body_feed(b, text + off, k, &u, sink_cb, s);
        if (r < 0) {
            return r;
        }
        *used += u;
        if (u < k) {
            break;
        }
    }
    return 0;
}

static void egress_parse_body_feed__chunked_any_split(void **state)
{
    (void)state;
    const char *wire = "5;ext=1\r\nhello\r\n1A\r\n, the chunked body goes on\r\n0\r\n"
                       "Trailer: x\r\n\r\nGET /next HTTP/1.1\r\n";
    size_t body_end = strlen(wire) - strlen("GET /next HTTP/1.1\r\n");
    for (size_t chunk = 1; chunk <= strlen(wire); chunk++) {
        struct egress_body b;
        struct sink s = {.n = 0};
        size_t used = 0;
        egress_parse_body_init(&b, EGRESS_BODY_CHUNKED, 0);
        assert_int_equal(feed(&b, wire, chunk, &s, &used), 0);
        assert_true(b.done);
        assert_int_equal(used, body_end); /* nothing of the next message */
        assert_int_equal(s.n, 31);
        assert_memory_equal(s.buf, "hello, the chunked body goes on", 31);
    }
}

static void egress_parse_body_feed__chunked_malformed(void **state)
{
    (void)state;
    const char *bad[] = {
        "x\r\n",
        "5\r\nhelloX\r\n",
        "5\nhello\r\n",
        "\r\n",
        "11111111111111111\r\n",
        "5\r\nhello\r\n0\r\nbad\n\r\n",
        "-1\r\n",
        /* The last chunk ends with a bare LF for a lenient upstream, which then reads what
         * follows as a second request: never taken for a trailer. */
        "0\r\n\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n",
        "0\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n",
        "0\r\n: x\r\n\r\n",
        "0\r\nX-T: a\x01b\r\n\r\n",
        "5;x=\x01\r\nhello\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct egress_body b;
        struct sink s = {.n = 0};
        size_t used = 0;
        egress_parse_body_init(&b, EGRESS_BODY_CHUNKED, 0);
        if (feed(&b, bad[i], 1, &s, &used) != -EINVAL) {
            fail_msg("accepted chunked body: %s", bad[i]);
        }
    }
    /* An endless chunk extension is cut at its bound. */
    static char longext[4096];
    memset(longext, 'a', sizeof(longext) - 1);
    longext[0] = '1';
    longext[1] = ';';
    struct egress_body b;
    struct sink s = {.n = 0};
    size_t used = 0;
    egress_parse_body_init(&b, EGRESS_BODY_CHUNKED, 0);
    assert_int_equal(feed(&b, longext, 4096, &s, &used), -EINVAL);
}

static void egress_parse_body_feed__length_and_none(void **state)
{
    (void)state;
    struct egress_body b;
    struct sink s = {.n = 0};
    size_t used = 0;
    egress_parse_body_init(&b, EGRESS_BODY_LENGTH, 5);
    assert_int_equal(feed(&b, "helloEXTRA", 3, &s, &used), 0);
    assert_true(b.done);
    assert_int_equal(used, 5);
    assert_memory_equal(s.buf, "hello", 5);
    egress_parse_body_init(&b, EGRESS_BODY_NONE, 0);
    assert_true(b.done);
    egress_parse_body_init(&b, EGRESS_BODY_LENGTH, 0);
    assert_true(b.done);
    egress_parse_body_init(&b, EGRESS_BODY_CLOSE, 0);
    s.n = 0;
    assert_int_equal(feed(&b, "until the end", 4, &s, &used), 0);
    assert_false(b.done);
    assert_int_equal(s.n, 13);
}

/* ---- the task's environment ---- */

static void egress_parse_proxy_var__the_four_names(void **state)
{
    (void)state;
    static const char *const want[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"};
    assert_int_equal(EGRESS_PROXY_VARS, ARRAY_SIZE(want));
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        assert_string_equal(egress_parse_proxy_var(i), want[i]);
    }
    char url[EGRESS_PROXY_URL_MAX];
    egress_parse_proxy_url(3128, url, sizeof(url));
    assert_string_equal(url, "http://127.0.0.1:3128");
    egress_parse_proxy_url(65535, url, sizeof(url));
    assert_string_equal(url, "http://127.0.0.1:65535");
}

/* ---- random input ---- */

/* A copy of seed with a few random edits (flip, insert, delete, duplicate a run, truncate), in
 * a heap block of exactly its length, so that a read past the end is ASan's to see. */
static char *mutate(const char *seed, size_t *ret_len)
{
    size_t cap = strlen(seed) * 2 + 64;
    char *b = xmalloc(cap);
    size_t n = strlen(seed);
    memcpy(b, seed, n);
    static const char bytes[] = "\r\n :\t0a;-,\"\\\0\xff";
    for (uint32_t k = rnd_below(6); k > 0; k--) {
        size_t at = n ? rnd_below((uint32_t)n) : 0;
        switch (rnd_below(5)) {
        case 0:
            if (n) {
                b[at] = rnd_below(3) ? bytes[rnd_below(sizeof(bytes) - 1)] : (char)rnd_below(256);
            }
            break;
        case 1:
            if (n + 1 < cap) {
                memmove(b + at + 1, b + at, n - at);
                b[at] = bytes[rnd_below(sizeof(bytes) - 1)];
                n++;
            }
            break;
        case 2:
            if (n) {
                memmove(b + at, b + at + 1, n - at - 1);
                n--;
            }
            break;
        case 3: {
            size_t run = n - at < 16 ? n - at : 16;
            if (n + run < cap) {
                memmove(b + at + run, b + at, n - at);
                n += run;
            }
            break;
        }
        default:
            n = at;
            break;
        }
    }
    char *exact = xmalloc(n ? n : 1);
    memcpy(exact, b, n);
    free(b);
    *ret_len = n;
    return exact;
}

static bool inside(const char *p, size_t len, const char *buf, size_t n)
{
    return len == 0 || (p >= buf && p + len <= buf + n);
}

static void count_cb(void *ud, const char *data, size_t n)
{
    (void)data;
    *(size_t *)ud += n;
}

/* Heads and bodies from a hostile task or upstream: every parser answers, stays inside its
 * input, and what it returns is consistent. Run under SAN=1, ASan watches the reads. */
static void egress_parsers__random_mutations_stay_in_bounds(void **state)
{
    (void)state;
    static const char *const requests[] = {
        "GET http://api.example.com/v1/x?q=1 HTTP/1.1\r\nHost: api.example.com\r\n"
        "Content-Length: 3\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\n\r\n",
        "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
        "POST /v1/upload HTTP/1.1\r\nHost: [::1]:8080\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HEAD / HTTP/1.0\r\n\r\n",
    };
    static const char *const responses[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-B:  v \r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "HTTP/1.0 304 Not Modified\r\n\r\n",
    };
    static const char *const bodies[] = {
        "5\r\nhello\r\n0\r\n\r\n",
        "1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nT: x\r\n\r\n",
        "0\r\n\r\nextra",
    };
    static const char *const hosts[] = {"Api.Example.COM.", "[::1]:443", "10.0.0.1:80", "a:b:c",
                                        "xn--bcher-kva.example:65535"};
    size_t parsed[2] = {0, 0}; /* requests and responses accepted */
    size_t refused[2] = {0, 0};
    for (int iter = 0; iter < 20000; iter++) {
        size_t n;
        char *b;
        switch (iter % 4) {
        case 0: {
            b = mutate(requests[rnd_below(ARRAY_SIZE(requests))], &n);
            size_t hl = egress_parse_head_end(b, n);
            assert_true(hl <= n);
            struct egress_request r;
            const char *why = NULL;
            if (hl > 0 && egress_parse_request(b, hl, &r, &why) == 0) {
                assert_true(r.n_headers <= EGRESS_HEADERS_MAX);
                assert_true(inside(r.target, r.target_len, b, hl));
                assert_true(inside(r.path, r.path_len, b, hl) || r.path_len == 1);
                assert_true(r.query == NULL || inside(r.query, r.query_len, b, hl));
                for (size_t i = 0; i < r.n_headers; i++) {
                    assert_true(inside(r.headers[i].name, r.headers[i].name_len, b, hl));
                    assert_true(inside(r.headers[i].value, r.headers[i].value_len, b, hl));
                    (void)egress_parse_header_hop_by_hop(&r.headers[i], r.headers, r.n_headers);
                }
                assert_true(memchr(r.method, '\0', sizeof(r.method)) != NULL);
                parsed[0]++;
            } else if (hl > 0) {
                assert_non_null(why);
                refused[0]++;
            }
            break;
        }
        case 1: {
            b = mutate(responses[rnd_below(ARRAY_SIZE(responses))], &n);
            size_t hl = egress_parse_head_end(b, n);
            struct egress_response r;
            const char *why = NULL;
            if (hl > 0 && egress_parse_response(b, hl, rnd_below(2), &r, &why) == 0) {
                assert_true(r.status >= 100 && r.status <= 999);
                assert_true(inside(r.status_line, r.status_line_len, b, hl));
                assert_true(r.n_headers <= EGRESS_HEADERS_MAX);
                parsed[1]++;
            } else if (hl > 0) {
                refused[1]++;
            }
            break;
        }
        case 2: {
            b = mutate(bodies[rnd_below(ARRAY_SIZE(bodies))], &n);
            struct egress_body body;
            egress_parse_body_init(&body, rnd_below(2) ? EGRESS_BODY_CHUNKED : EGRESS_BODY_LENGTH,
                                   rnd_below(40));
            size_t emitted = 0, offered = 0;
            for (size_t off = 0; off < n && !body.done;) {
                size_t k = 1 + rnd_below(8);
                k = k > n - off ? n - off : k;
                size_t used = 0;
                offered += k;
                if (egress_parse_body_feed(&body, b + off, k, &used, count_cb, &emitted) < 0) {
                    break;
                }
                assert_true(used <= k);
                assert_true(used == k || body.done);
                off += k;
            }
            /* Decoding only removes framing: never more body than bytes in. */
            assert_true(emitted <= offered);
            break;
        }
        default: {
            b = mutate(hosts[rnd_below(ARRAY_SIZE(hosts))], &n);
            struct egress_hostport hp;
            (void)egress_parse_authority(b, n, 443, &hp);
            char out[EGRESS_HOST_SIZE];
            bool ip;
            (void)egress_parse_host_normalize(b, n, out, &ip);
            (void)egress_parse_method_bit(b, n);
            break;
        }
        }
        free(b);
    }
    /* The edits leave enough heads whole, and break enough, to reach both sides. */
    print_message("[  INFO    ] requests %zu parsed, %zu refused; responses %zu, %zu\n", parsed[0],
                  refused[0], parsed[1], refused[1]);
    for (int i = 0; i < 2; i++) {
        assert_true(parsed[i] > 200);
        assert_true(refused[i] > 200);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(egress_parse_host_normalize__forms),
        cmocka_unit_test(egress_parse_authority__ports),
        cmocka_unit_test(egress_parse_allow_match__exact_and_wildcard),
        cmocka_unit_test(egress_parse_method_bit__exact),
        cmocka_unit_test(egress_parse_request__absolute_form),
        cmocka_unit_test(egress_parse_request__origin_form_and_connect),
        cmocka_unit_test(egress_parse_request__refuses_ambiguity),
        cmocka_unit_test(egress_parse_request__header_bound),
        cmocka_unit_test(egress_parse_head_end__finds_crlfcrlf),
        cmocka_unit_test(egress_parse_header_hop_by_hop__connection_tokens),
        cmocka_unit_test(egress_parse_response__framing),
        cmocka_unit_test(egress_parse_response__transfer_codings),
        cmocka_unit_test(egress_parse_body_feed__chunked_any_split),
        cmocka_unit_test(egress_parse_body_feed__chunked_malformed),
        cmocka_unit_test(egress_parse_body_feed__length_and_none),
        cmocka_unit_test(egress_parse_proxy_var__the_four_names),
        cmocka_unit_test(egress_parsers__random_mutations_stay_in_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
