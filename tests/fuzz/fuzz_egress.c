/* SPDX-License-Identifier: MIT */
/* Fuzz target: what a sandboxed task (or an upstream server) sends the egress proxy.
 * The first input byte chooses the parser: request heads, response heads, chunked and
 * length-delimited bodies fed in pieces, authorities, hosts and allowlist entries, TLS
 * ClientHellos, the credential scrubber over a stream, and the rewrite of a task's
 * environment (a client's argv and env) with the proxy's variables. Each gets its input in a heap
 * block of its exact length (ASan sees any read past it). Checked besides memory safety:
 * what a parser returns points inside its input, a refusal says why, a body never yields
 * more than it was fed, and a scrubbed stream keeps its length and never shows the
 * secret, and a rewritten environment holds the client's strings and each proxy variable
 * exactly once. */
#include <ctype.h>
#include <errno.h>

#include "ctl.h"
#include "egress_inspect.h"
#include "err.h"
#include "egress_parse.h"
#include "fuzz.h"

static void within(const char *base, size_t n, const char *p, size_t len)
{
    FUZZ_CHECK(p >= base && len <= n && (size_t)(p - base) <= n - len);
}

static void check_host(const char *h, bool is_ip)
{
    size_t n = strnlen(h, EGRESS_HOST_SIZE);
    FUZZ_CHECK(n > 0 && n < EGRESS_HOST_SIZE);
    FUZZ_CHECK(h[n - 1] != '.' || is_ip);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(!isupper((unsigned char)h[i]) && (unsigned char)h[i] > ' ' &&
                   (unsigned char)h[i] < 0x7f);
    }
    /* Normal form is a fixed point (an IPv6 address goes back in its brackets). */
    char again[EGRESS_HOST_SIZE];
    char in[EGRESS_HOST_SIZE + 2];
    size_t in_n = n;
    if (is_ip && memchr(h, ':', n)) {
        in[0] = '[';
        memcpy(in + 1, h, n);
        in[n + 1] = ']';
        in_n = n + 2;
    } else {
        memcpy(in, h, n);
    }
    bool ip2 = false;
    FUZZ_CHECK(egress_host_normalize(in, in_n, again, &ip2) == 0);
    FUZZ_CHECK(strcmp(again, h) == 0 && ip2 == is_ip);
}

static void request_head(const char *buf, size_t n)
{
    size_t end = egress_head_end(buf, n);
    FUZZ_CHECK(end <= n);
    if (end == 0) {
        return;
    }
    FUZZ_CHECK(end >= 4 && memcmp(buf + end - 4, "\r\n\r\n", 4) == 0);
    struct egress_request rq;
    const char *why = NULL;
    if (egress_request_parse(buf, end, &rq, &why) < 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(rq.head_len == end && rq.n_headers <= EGRESS_HEADERS_MAX);
    FUZZ_CHECK(memchr(rq.method, '\0', sizeof(rq.method)) != NULL);
    within(buf, end, rq.target, rq.target_len);
    for (size_t i = 0; i < rq.n_headers; i++) {
        within(buf, end, rq.headers[i].name, rq.headers[i].name_len);
        within(buf, end, rq.headers[i].value, rq.headers[i].value_len);
        (void)egress_header_hop_by_hop(&rq.headers[i], rq.headers, rq.n_headers);
    }
    check_host(rq.dest.host, rq.dest.is_ip);
    if (!rq.is_connect && rq.path) {
        FUZZ_CHECK(rq.path_len > 0);
        /* Into the head, or a static "/" for a target without a path. */
        if (rq.path >= buf && rq.path < buf + end) {
            within(buf, end, rq.path, rq.path_len);
        } else {
            FUZZ_CHECK(rq.path_len == 1 && rq.path[0] == '/');
        }
        (void)egress_path_safe(rq.path, rq.path_len);
        (void)egress_path_under(rq.path, rq.path_len, "/v1");
        (void)egress_path_under(rq.path, rq.path_len, "/v1/");
    }
    if (rq.query) {
        within(buf, end, rq.query, rq.query_len);
    }
    FUZZ_CHECK(rq.framing == EGRESS_BODY_NONE || rq.framing == EGRESS_BODY_LENGTH ||
               rq.framing == EGRESS_BODY_CHUNKED);
}

static void response_head(const char *buf, size_t n, bool head_request)
{
    size_t end = egress_head_end(buf, n);
    if (end == 0) {
        return;
    }
    struct egress_response rs;
    const char *why = NULL;
    if (egress_response_parse(buf, end, head_request, &rs, &why) < 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(rs.head_len == end && rs.n_headers <= EGRESS_HEADERS_MAX);
    FUZZ_CHECK(rs.status >= 100 && rs.status <= 999);
    within(buf, end, rs.status_line, rs.status_line_len);
    for (size_t i = 0; i < rs.n_headers; i++) {
        within(buf, end, rs.headers[i].name, rs.headers[i].name_len);
        within(buf, end, rs.headers[i].value, rs.headers[i].value_len);
    }
    if (head_request || rs.status < 200 || rs.status == 204 || rs.status == 304) {
        FUZZ_CHECK(rs.framing == EGRESS_BODY_NONE);
    }
}

struct sink {
    size_t bytes;
};

static void sink_cb(void *ud, const char *data, size_t len)
{
    struct sink *s = ud;
    volatile char c = len ? data[len - 1] : 0; /* inside what was fed (ASan) */
    (void)c;
    s->bytes += len;
}

/* ctl: framing and piece size; the first 8 bytes of a length body are its length. */
static void body(uint8_t ctl, const char *buf, size_t n)
{
    struct egress_body b;
    uint64_t length = 0;
    bool chunked = ctl & 1;
    if (!chunked) {
        for (size_t i = 0; i < 3 && i < n; i++) {
            length = length << 8 | (unsigned char)buf[i];
        }
    }
    egress_body_init(&b, chunked ? EGRESS_BODY_CHUNKED : EGRESS_BODY_LENGTH, length);
    size_t piece = (size_t)(ctl >> 1) + 1;
    struct sink s = {0};
    size_t fed = 0;
    size_t off = 0;
    while (off < n) {
        size_t k = n - off < piece ? n - off : piece;
        /* Each piece in a block of its own size, as a read delivers it. */
        char *p = fuzz_dup((const uint8_t *)buf + off, k);
        size_t used = 0;
        bool was_done = b.done;
        int r = egress_body_feed(&b, p, k, &used, sink_cb, &s);
        free(p);
        if (r < 0) {
            FUZZ_CHECK(r == -EINVAL);
            break;
        }
        FUZZ_CHECK(used <= k);
        FUZZ_CHECK(used == k || b.done);
        FUZZ_CHECK(!was_done || used == 0);
        fed += used;
        FUZZ_CHECK(s.bytes <= fed);
        if (!chunked) {
            FUZZ_CHECK(s.bytes <= length);
        }
        if (b.done && used < k) {
            break;
        }
        off += k;
    }
}

static void names(const char *buf, size_t n)
{
    struct egress_hostport hp;
    uint16_t dflt = n ? (uint16_t)((unsigned char)buf[0] % 2 ? 443 : 0) : 0;
    if (egress_authority_parse(buf, n, dflt, &hp) == 0) {
        check_host(hp.host, hp.is_ip);
        FUZZ_CHECK(hp.port != 0);
    }
    char out[EGRESS_HOST_SIZE];
    bool ip = false;
    if (egress_host_normalize(buf, n, out, &ip) == 0) {
        check_host(out, ip);
    }
    /* The allowlist takes a C string: up to the first NUL. */
    char *s = malloc(n + 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, buf, n);
    s[n] = '\0';
    struct egress_allow a;
    if (egress_allow_parse(s, &a) == 0) {
        FUZZ_CHECK(memchr(a.host, '\0', sizeof(a.host)) != NULL && a.port != 0);
        /* A name one label below the entry's: matched by a wildcard, not by a host. */
        size_t len = strlen(a.host);
        if (len + 3 <= sizeof(((struct egress_hostport *)0)->host)) {
            struct egress_hostport probe;
            memset(&probe, 0, sizeof(probe));
            memcpy(probe.host, "x.", 2);
            memcpy(probe.host + 2, a.host, len + 1);
            probe.port = a.port;
            FUZZ_CHECK(egress_allow_match(&a, &probe) == a.wildcard);
        }
    }
    free(s);
    (void)egress_method_bit(buf, n);
}

static void hello(const char *buf, size_t n)
{
    char host[EGRESS_SNI_SIZE];
    int r = egress_sni_parse((const uint8_t *)buf, n, host);
    if (r == 0) {
        size_t len = strnlen(host, sizeof(host));
        FUZZ_CHECK(len > 0 && len < sizeof(host) && host[len - 1] != '.');
        for (size_t i = 0; i < len; i++) {
            FUZZ_CHECK(!isupper((unsigned char)host[i]));
        }
    } else {
        FUZZ_CHECK(r == -EAGAIN || r == -EPROTO || r == -ENOENT || r == -EOPNOTSUPP || r == -E2BIG);
    }
}

/* ctl: the secret's length (1-16 bytes from the input) and the piece size. */
static void scrub(uint8_t ctl, const char *buf, size_t n)
{
    size_t slen = (size_t)(ctl & 0x0f) + 1;
    if (n < slen) {
        return;
    }
    const char *secret = buf;
    if (memchr(secret, '*', slen)) {
        return; /* a secret of stars would show in its own replacement */
    }
    const char *in = buf + slen;
    size_t in_n = n - slen;
    size_t piece = (size_t)(ctl >> 4) * 7 + 1;
    struct egress_scrub s;
    egress_scrub_init(&s, secret, slen);
    char *out = malloc(in_n + EGRESS_SECRET_MAX + 1);
    char *step = malloc(piece + EGRESS_SECRET_MAX);
    FUZZ_CHECK(out && step);
    size_t got = 0;
    size_t off = 0;
    do {
        size_t k = in_n - off < piece ? in_n - off : piece;
        bool final = off + k == in_n;
        size_t w = egress_scrub_feed(&s, in + off, k, final, step);
        FUZZ_CHECK(got + w <= in_n);
        memcpy(out + got, step, w);
        got += w;
        off += k;
    } while (off < in_n);
    FUZZ_CHECK(got == in_n); /* same length: every byte out once the stream ended */
    if (got >= slen) {
        for (size_t i = 0; i + slen <= got; i++) {
            FUZZ_CHECK(memcmp(out + i, secret, slen) != 0);
        }
    }
    /* The whole-buffer form agrees with the stream. */
    char *whole = fuzz_dup((const uint8_t *)in, in_n);
    egress_scrub_buf(&s, whole, in_n);
    FUZZ_CHECK(in_n == 0 || memcmp(whole, out, in_n) == 0);
    free(whole);
    free(step);
    free(out);
}

/* ctl: argc (1-4) and envc (0-63) claimed for the strings that follow. */
static void env_rewrite(uint8_t ctl, const char *buf, size_t n)
{
    static const char *const names[] = {
        "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy="};
    struct ctl_task hdr;
    memset(&hdr, 0, sizeof(hdr));
    hdr.argc = (ctl & 3u) + 1;
    hdr.envc = ctl >> 2;
    hdr.data_len = (uint32_t)n;
    char *d = fuzz_dup((const uint8_t *)buf, n);
    char *orig = d;
    struct err e = ERR_INIT;
    int r = egress_env_rewrite(&hdr, &d, 3128, &e);
    if (r < 0) {
        FUZZ_CHECK(r == -EPROTO || r == -E2BIG);
        FUZZ_CHECK(d == orig && err_msg(&e)[0] != '\0');
        free(d);
        return;
    }
    FUZZ_CHECK(hdr.data_len <= CTL_TASK_DATA_MAX);
    /* argc, then envc strings, each NUL-terminated, exactly filling data_len; argv as it
     * was; every proxy variable once, with the proxy's address. */
    unsigned seen[4] = {0, 0, 0, 0};
    size_t off = 0;
    for (uint32_t i = 0; i < hdr.argc + hdr.envc; i++) {
        const char *nul = off < hdr.data_len ? memchr(d + off, '\0', hdr.data_len - off) : NULL;
        FUZZ_CHECK(nul != NULL);
        size_t len = (size_t)(nul - (d + off));
        if (i < hdr.argc) {
            FUZZ_CHECK(off + len < n && memcmp(d + off, buf + off, len + 1) == 0);
        } else {
            for (size_t k = 0; k < 4; k++) {
                size_t kl = strlen(names[k]);
                if (len >= kl && memcmp(d + off, names[k], kl) == 0) {
                    seen[k]++;
                    FUZZ_CHECK(strcmp(d + off + kl, "http://127.0.0.1:3128") == 0);
                }
            }
        }
        off += len + 1;
    }
    FUZZ_CHECK(off == hdr.data_len);
    FUZZ_CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1 && seen[3] == 1);
    free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    uint8_t mode = data[0] % 7;
    uint8_t ctl = data[1];
    char *buf = fuzz_dup(data + 2, size - 2);
    size_t n = size - 2;
    switch (mode) {
    case 0:
        request_head(buf, n);
        break;
    case 1:
        response_head(buf, n, ctl & 1);
        break;
    case 2:
        body(ctl, buf, n);
        break;
    case 3:
        names(buf, n);
        break;
    case 4:
        hello(buf, n);
        break;
    case 5:
        scrub(ctl, buf, n);
        break;
    default:
        env_rewrite(ctl, buf, n);
        break;
    }
    free(buf);
    return 0;
}
