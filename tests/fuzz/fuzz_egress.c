/* SPDX-License-Identifier: MIT */
/* Fuzz target: what a sandboxed task (or an upstream server) sends the egress proxy.
 * The first input byte chooses the parser: request heads, response heads, chunked and
 * length-delimited bodies fed in pieces, authorities, hosts and allowlist entries, TLS
 * ClientHellos, the credential scrubber over a stream, and the rewrite of a task's
 * environment (a client's argv and env) with the proxy's variables. Each gets its input
 * in a heap block of its exact length (ASan sees any read past it).
 *
 * Checked besides memory safety: what a parser returns points inside its input; a refusal
 * says why; a body never yields more than it was fed; a scrubbed stream keeps its length
 * and stars exactly the union of the secret's occurrences, split anywhere or whole; a
 * rewritten environment holds the client's strings and each proxy variable exactly once; a
 * request path's normal form is no longer, is its own normal form and matches prefixes alike.
 * And a head the proxy accepts is read again by http_parser (the parser much server code
 * descends from): unless that refuses it (a server that refuses a request cannot have a
 * second one smuggled in; http_parser refuses some the RFC allows, such as a tab after a
 * Content-Length or repeated equal ones), both must see the same method, target, status,
 * header count and body framing, and a chunked body must end at the same byte with the
 * same content, or the proxy and the server would disagree about where a message ends
 * (request smuggling). */
#include <ctype.h>
#include <errno.h>
#include <http_parser.h>
#include <limits.h>

#include "wire/ctl.h"
#include "wire/egress_inspect.h"
#include "lib/err.h"
#include "wire/egress_parse.h"
#include "wire/egress_path.h"
#include "sandbox/task_spec.h"
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
    FUZZ_CHECK(egress_parse_host_normalize(in, in_n, again, &ip2) == 0);
    FUZZ_CHECK(strcmp(again, h) == 0 && ip2 == is_ip);
}

/* What http_parser saw of a head. */
struct hp_view {
    size_t url_len;
    char url[EGRESS_HEAD_MAX];
    size_t n_fields;
    bool in_field;
    bool headers_done;
    bool head_request; /* responses: to a HEAD request, no body */
};

static int hp_url(http_parser *p, const char *at, size_t n)
{
    struct hp_view *v = p->data;
    FUZZ_CHECK(v->url_len + n <= sizeof(v->url));
    memcpy(v->url + v->url_len, at, n);
    v->url_len += n;
    return 0;
}

static int hp_field(http_parser *p, const char *at, size_t n)
{
    struct hp_view *v = p->data;
    (void)at;
    (void)n;
    if (!v->in_field) {
        v->n_fields++;
        v->in_field = true;
    }
    return 0;
}

static int hp_value(http_parser *p, const char *at, size_t n)
{
    struct hp_view *v = p->data;
    (void)at;
    (void)n;
    v->in_field = false;
    return 0;
}

static int hp_headers_complete(http_parser *p)
{
    struct hp_view *v = p->data;
    v->headers_done = true;
    return v->head_request ? 1 : 0;
}

/* Runs http_parser over the head; returns its errno. */
static enum http_errno hp_run(enum http_parser_type type, const char *buf, size_t end,
                              bool head_request, http_parser *p, struct hp_view *v)
{
    http_parser_settings st;
    memset(&st, 0, sizeof(st));
    st.on_url = hp_url;
    st.on_header_field = hp_field;
    st.on_header_value = hp_value;
    st.on_headers_complete = hp_headers_complete;
    memset(v, 0, sizeof(*v));
    v->head_request = head_request;
    http_parser_init(p, type);
    p->data = v;
    (void)http_parser_execute(p, &st, buf, end);
    return HTTP_PARSER_ERRNO(p);
}

/* The framing http_parser read, in the proxy's terms. */
static enum egress_framing hp_framing(const http_parser *p, bool response)
{
    if (p->flags & F_CHUNKED) {
        return EGRESS_BODY_CHUNKED;
    }
    if (p->content_length != ULLONG_MAX) {
        /* Content-Length: 0 is no body, as the proxy has it. */
        return p->content_length > 0 ? EGRESS_BODY_LENGTH : EGRESS_BODY_NONE;
    }
    return response ? EGRESS_BODY_CLOSE : EGRESS_BODY_NONE;
}

/* Whether a header's name starts with "transfer-encoding" and goes on ("Transfer-
 * Encodingx: 1"): http_parser 2.9 takes it for a Transfer-Encoding. Another header to RFC
 * 9110; the proxy refuses such a request (an upstream may err as http_parser does) and
 * passes such a response on framed as the RFC says. */
static bool te_prefixed(const struct egress_header *hs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (hs[i].name_len > 17 && strncasecmp(hs[i].name, "transfer-encoding", 17) == 0) {
            return true;
        }
    }
    return false;
}

static void request_differ(const char *buf, size_t end, const struct egress_request *rq)
{
    http_parser p;
    struct hp_view *v = malloc(sizeof(*v));
    FUZZ_CHECK(v != NULL);
    if (hp_run(HTTP_REQUEST, buf, end, false, &p, v) != HPE_OK) {
        free(v);
        return; /* refused upstream: nothing can be smuggled into it */
    }
    FUZZ_CHECK(v->headers_done);
    FUZZ_CHECK(strcmp(http_method_str((enum http_method)p.method), rq->method) == 0);
    FUZZ_CHECK(v->url_len == rq->target_len && memcmp(v->url, rq->target, v->url_len) == 0);
    FUZZ_CHECK(v->n_fields == rq->n_headers);
    FUZZ_CHECK(p.http_major == 1 && p.http_minor == rq->version_minor);
    if (!rq->is_connect) {
        enum egress_framing f = hp_framing(&p, false);
        FUZZ_CHECK(f == rq->framing);
        FUZZ_CHECK(f != EGRESS_BODY_LENGTH || p.content_length == rq->content_length);
    }
    free(v);
}

/* Where RFC 9112 lets a recipient read a response in more than one way and http_parser
 * 2.9 picks the other: it knows chunked only as a field's whole value (a list like "gzip,
 * chunked" or ", chunked", or "chunked" and a tab, is read until the close), besides
 * te_prefixed's defect. The proxy's reading of those is fixed by the unit tests; here
 * they are compared no further than both can go. */
static void response_differ(const char *buf, size_t end, bool head_request,
                            const struct egress_response *rs)
{
    size_t n_te = 0, n_te_plain = 0;
    for (size_t i = 0; i < rs->n_headers; i++) {
        const struct egress_header *h = &rs->headers[i];
        if (egress_parse_header_is(h, "transfer-encoding")) {
            n_te++;
            /* "chunked" alone, with at most a space before and nothing after (http_parser
             * does not trim a tab). */
            n_te_plain += h->value_len == 7 && strncasecmp(h->value, "chunked", 7) == 0 &&
                          h->value[7] == '\r' &&
                          (h->value[-1] == ':' || (h->value[-1] == ' ' && h->value[-2] == ':'));
        }
    }
    http_parser p;
    struct hp_view *v = malloc(sizeof(*v));
    FUZZ_CHECK(v != NULL);
    if (hp_run(HTTP_RESPONSE, buf, end, head_request, &p, v) != HPE_OK) {
        free(v);
        return;
    }
    bool defect = te_prefixed(rs->headers, rs->n_headers);
    FUZZ_CHECK(v->headers_done);
    FUZZ_CHECK(p.status_code == rs->status);
    FUZZ_CHECK(v->n_fields == rs->n_headers);
    FUZZ_CHECK(p.http_major == 1 && p.http_minor == rs->version_minor);
    bool no_body = head_request || rs->status < 200 || rs->status == 204 || rs->status == 304;
    if (!no_body && n_te == n_te_plain && n_te <= 1 && !defect) {
        enum egress_framing f = hp_framing(&p, true);
        FUZZ_CHECK(f == rs->framing);
        FUZZ_CHECK(f != EGRESS_BODY_LENGTH || p.content_length == rs->content_length);
    }
    free(v);
}

static void request_head(const char *buf, size_t n)
{
    size_t end = egress_parse_head_end(buf, n);
    FUZZ_CHECK(end <= n);
    if (end == 0) {
        return;
    }
    FUZZ_CHECK(end >= 4 && memcmp(buf + end - 4, "\r\n\r\n", 4) == 0);
    struct egress_request rq;
    const char *why = NULL;
    if (egress_parse_request(buf, end, &rq, &why) < 0) {
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return;
    }
    FUZZ_CHECK(rq.head_len == end && rq.n_headers <= EGRESS_HEADERS_MAX);
    FUZZ_CHECK(memchr(rq.method, '\0', sizeof(rq.method)) != NULL);
    within(buf, end, rq.target, rq.target_len);
    for (size_t i = 0; i < rq.n_headers; i++) {
        within(buf, end, rq.headers[i].name, rq.headers[i].name_len);
        within(buf, end, rq.headers[i].value, rq.headers[i].value_len);
        (void)egress_parse_header_hop_by_hop(&rq.headers[i], rq.headers, rq.n_headers);
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
        /* A normalized path is no longer, normalizes to itself, and is matched alike. */
        static char norm[EGRESS_HEAD_MAX], again[EGRESS_HEAD_MAX];
        size_t nl = 0, al = 0;
        why = NULL;
        if (egress_path_normalize(rq.path, rq.path_len, norm, &nl, &why) == 0) {
            FUZZ_CHECK(nl > 0 && nl <= rq.path_len && egress_path_safe(rq.path, rq.path_len));
            FUZZ_CHECK(egress_path_normalize(norm, nl, again, &al, &why) == 0);
            FUZZ_CHECK(al == nl && memcmp(norm, again, nl) == 0);
            FUZZ_CHECK(!egress_path_under(norm, nl, "/v1/") || egress_path_under(norm, nl, "/v1"));
            FUZZ_CHECK(egress_path_under(norm, nl, "/v1") == egress_path_under(norm, nl, "/%761"));
        } else {
            FUZZ_CHECK(why != NULL && strncmp(why, "the path", 8) == 0);
            FUZZ_CHECK(!egress_path_safe(rq.path, rq.path_len));
        }
    }
    if (rq.query) {
        within(buf, end, rq.query, rq.query_len);
    }
    FUZZ_CHECK(rq.framing == EGRESS_BODY_NONE || rq.framing == EGRESS_BODY_LENGTH ||
               rq.framing == EGRESS_BODY_CHUNKED);
    request_differ(buf, end, &rq);
}

static void response_head(const char *buf, size_t n, bool head_request)
{
    size_t end = egress_parse_head_end(buf, n);
    if (end == 0) {
        return;
    }
    struct egress_response rs;
    const char *why = NULL;
    if (egress_parse_response(buf, end, head_request, &rs, &why) < 0) {
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
    response_differ(buf, end, head_request, &rs);
}

struct sink {
    size_t bytes;
    char *data; /* the decoded body, when kept (cap bytes at most) */
    size_t cap;
};

static void sink_cb(void *ud, const char *data, size_t len)
{
    struct sink *s = ud;
    volatile char c = len ? data[len - 1] : 0; /* inside what was fed (ASan) */
    (void)c;
    if (s->data) {
        FUZZ_CHECK(s->bytes + len <= s->cap);
        memcpy(s->data + s->bytes, data, len);
    }
    s->bytes += len;
}

/* What http_parser made of a chunked request body. */
struct hp_body {
    char *data;
    size_t len;
    size_t cap;
    bool complete;
};

static int hpb_body(http_parser *p, const char *at, size_t n)
{
    struct hp_body *v = p->data;
    FUZZ_CHECK(v->len + n <= v->cap);
    memcpy(v->data + v->len, at, n);
    v->len += n;
    return 0;
}

static int hpb_complete(http_parser *p)
{
    struct hp_body *v = p->data;
    v->complete = true;
    http_parser_pause(p, 1); /* execute returns the message's end */
    return 0;
}

/* The proxy passes a chunked request body on as it frames it (fed: the bytes it passed; done:
 * it found the end there). An upstream must not find the end earlier, or the rest would
 * reach it as a second request; where both find it, at the same byte, with the same body. */
static void chunked_differ(const char *buf, size_t n, bool done, size_t fed, const struct sink *s)
{
    static const char head[] = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t hl = sizeof(head) - 1;
    char *msg = malloc(hl + n + 1);
    struct hp_body v = {malloc(n + 1), 0, n + 1, false};
    FUZZ_CHECK(msg && v.data);
    memcpy(msg, head, hl);
    memcpy(msg + hl, buf, n);
    http_parser_settings st;
    memset(&st, 0, sizeof(st));
    st.on_body = hpb_body;
    st.on_message_complete = hpb_complete;
    http_parser p;
    http_parser_init(&p, HTTP_REQUEST);
    p.data = &v;
    size_t used = http_parser_execute(&p, &st, msg, hl + n);
    if (v.complete) {
        FUZZ_CHECK(used >= hl);
        size_t end = used - hl; /* where the upstream finds the body's end */
        FUZZ_CHECK(done ? end >= fed : end > fed);
        if (done) {
            FUZZ_CHECK(end == fed);
            FUZZ_CHECK(v.len == s->bytes && memcmp(v.data, s->data, v.len) == 0);
        }
    }
    free(v.data);
    free(msg);
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
    egress_parse_body_init(&b, chunked ? EGRESS_BODY_CHUNKED : EGRESS_BODY_LENGTH, length);
    size_t piece = (size_t)(ctl >> 1) + 1;
    struct sink s = {0, chunked ? malloc(n + 1) : NULL, n + 1};
    FUZZ_CHECK(!chunked || s.data);
    size_t fed = 0;
    size_t off = 0;
    while (off < n) {
        size_t k = n - off < piece ? n - off : piece;
        /* Each piece in a block of its own size, as a read delivers it. */
        char *p = fuzz_dup((const uint8_t *)buf + off, k);
        size_t used = 0;
        bool was_done = b.done;
        int r = egress_parse_body_feed(&b, p, k, &used, sink_cb, &s);
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
    if (chunked) {
        chunked_differ(buf, n, b.done, fed, &s);
        free(s.data);
    }
}

static void names(const char *buf, size_t n)
{
    struct egress_hostport hp;
    uint16_t dflt = n ? (uint16_t)((unsigned char)buf[0] % 2 ? 443 : 0) : 0;
    if (egress_parse_authority(buf, n, dflt, &hp) == 0) {
        check_host(hp.host, hp.is_ip);
        FUZZ_CHECK(hp.port != 0);
    }
    char out[EGRESS_HOST_SIZE];
    bool ip = false;
    if (egress_parse_host_normalize(buf, n, out, &ip) == 0) {
        check_host(out, ip);
    }
    /* The allowlist takes a C string: up to the first NUL. */
    char *s = malloc(n + 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, buf, n);
    s[n] = '\0';
    struct egress_allow a;
    if (egress_parse_allow(s, &a) == 0) {
        FUZZ_CHECK(memchr(a.host, '\0', sizeof(a.host)) != NULL && a.port != 0);
        /* A name one label below the entry's: matched by a wildcard, not by a host. */
        size_t len = strlen(a.host);
        if (len + 3 <= sizeof(((struct egress_hostport *)0)->host)) {
            struct egress_hostport probe;
            memset(&probe, 0, sizeof(probe));
            memcpy(probe.host, "x.", 2);
            memcpy(probe.host + 2, a.host, len + 1);
            probe.port = a.port;
            FUZZ_CHECK(egress_parse_allow_match(&a, &probe) == a.wildcard);
        }
    }
    free(s);
    (void)egress_parse_method_bit(buf, n);
}

static void hello(const char *buf, size_t n)
{
    char host[EGRESS_SNI_SIZE];
    int r = egress_inspect_sni_parse((const uint8_t *)buf, n, host);
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
    egress_inspect_scrub_init(&s, secret, slen);
    char *out = malloc(in_n + EGRESS_SECRET_MAX + 1);
    char *step = malloc(piece + EGRESS_SECRET_MAX);
    FUZZ_CHECK(out && step);
    size_t got = 0;
    size_t off = 0;
    do {
        size_t k = in_n - off < piece ? in_n - off : piece;
        bool final = off + k == in_n;
        size_t w = egress_inspect_scrub_feed(&s, in + off, k, final, step);
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
    /* Exactly the union of the occurrences of the scrubber's patterns, by brute force, in
     * the stream and in the whole-buffer form. */
    char *want = fuzz_dup((const uint8_t *)in, in_n);
    for (size_t k = 0; k < s.n; k++) {
        for (size_t i = 0; i + s.len[k] <= in_n; i++) {
            if (memcmp(in + i, s.pat[k], s.len[k]) == 0) {
                memset(want + i, '*', s.len[k]);
            }
        }
    }
    char *whole = fuzz_dup((const uint8_t *)in, in_n);
    egress_inspect_scrub_buf(&s, whole, in_n);
    FUZZ_CHECK(in_n == 0 || memcmp(out, want, in_n) == 0);
    FUZZ_CHECK(in_n == 0 || memcmp(whole, want, in_n) == 0);
    free(whole);
    free(want);
    free(step);
    free(out);
}

/* A task's argv and env (the input's NUL-separated strings: the first (ctl & 3) + 1 are argv,
 * the rest "NAME=value", of which the first ctl >> 2 are the base env) given the proxy's
 * variables as core/task.c does. */
static void env_rewrite(uint8_t ctl, const char *buf, size_t n)
{
    static const char *const names[] = {
        "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy="};
    struct task_spec s = TASK_SPEC_INIT;
    task_spec_begin(&s, TASK_SPEC_STRINGS_MAX);
    uint32_t want_argc = (ctl & 3u) + 1, want_base = ctl >> 2;
    /* What must survive: argv, and the env strings that are not proxy variables. */
    size_t keep = 0;
    uint32_t keep_env = 0, keep_base = 0;
    char *kept = fuzz_dup((const uint8_t *)buf, n);
    for (size_t off = 0; off < n;) {
        const char *str = buf + off;
        const char *nul = memchr(str, '\0', n - off);
        size_t len = nul ? (size_t)(nul - str) : n - off;
        off += len + 1;
        if (s.argc < want_argc) {
            if (task_spec_add_arg(&s, str, len) < 0) {
                break;
            }
            memcpy(kept + keep, str, len);
            keep += len;
            kept[keep++] = '\0';
            continue;
        }
        const char *eq = memchr(str, '=', len);
        if (!eq || eq == str) {
            continue; /* api/ refuses it */
        }
        bool base = s.envc == s.env_base && s.envc < want_base;
        size_t nl = (size_t)(eq - str);
        if (task_spec_add_env(&s, str, nl, eq + 1, len - nl - 1, base) < 0) {
            break;
        }
        bool proxy = false;
        for (size_t k = 0; k < 4; k++) {
            proxy = proxy || (nl + 1 == strlen(names[k]) && memcmp(str, names[k], nl + 1) == 0);
        }
        if (!proxy) {
            memcpy(kept + keep, str, len);
            keep += len;
            kept[keep++] = '\0';
            keep_env++;
            keep_base += base ? 1 : 0;
        }
    }
    FUZZ_CHECK(s.len <= n + 1);
    uint32_t argc = s.argc;
    struct err e = ERR_INIT;
    int r = task_spec_set_proxy(&s, 3128, &e);
    if (r < 0) {
        FUZZ_CHECK(r == -E2BIG && err_msg(&e)[0] != '\0');
        task_spec_clear(&s);
        free(kept);
        return;
    }
    FUZZ_CHECK(s.len <= TASK_SPEC_STRINGS_MAX);
    /* argv as it was, the other env strings in their order, then each proxy variable once
     * with the proxy's address; the strings exactly fill len. */
    FUZZ_CHECK(s.argc == argc && s.envc == keep_env + 4 && s.env_base == keep_base);
    FUZZ_CHECK(s.len >= keep && memcmp(s.strings, kept, keep) == 0);
    size_t off = keep;
    for (size_t k = 0; k < 4; k++) {
        const char *str = s.strings + off;
        size_t kl = strlen(names[k]);
        FUZZ_CHECK(off < s.len && memcmp(str, names[k], kl) == 0);
        FUZZ_CHECK(strcmp(str + kl, "http://127.0.0.1:3128") == 0);
        off += strlen(str) + 1;
    }
    FUZZ_CHECK(off == s.len);
    struct ctl_task hdr;
    r = task_spec_pack(&s, 64, &hdr, &e);
    FUZZ_CHECK(r == (s.argc > 0 ? 0 : -EINVAL));
    FUZZ_CHECK(r < 0 || (hdr.argc == s.argc && hdr.envc == s.envc && hdr.data_len == s.len));
    task_spec_clear(&s);
    free(kept);
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
