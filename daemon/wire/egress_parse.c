/* SPDX-License-Identifier: MIT */
/* Parsing and matching for the egress proxy, with no I/O and no allocation: everything a
 * sandbox sends is checked here before egress.c acts on it. The parsers are strict on
 * purpose (one framing per message, CRLF only, no folded headers, bounded lines): what a
 * proxy and its upstream could read differently is refused, not guessed. */
#include "wire/egress_parse.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/err.h"
#include "lib/util.h"

/* ---- Hosts and authorities ---- */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_token_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (char)(c | 0x20);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Formats a 16-byte IPv6 address canonically; IPv4-mapped addresses as IPv4. */
static void format_v6(const unsigned char *a, char *out)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char buf[INET6_ADDRSTRLEN];
    if (memcmp(a, mapped, 12) == 0) {
        (void)inet_ntop(AF_INET, a + 12, buf, sizeof(buf));
    } else {
        (void)inet_ntop(AF_INET6, a, buf, sizeof(buf));
    }
    str_copy(out, buf, EGRESS_HOST_SIZE);
}

int egress_parse_host_normalize(const char *h, size_t n, char *out, bool *ret_is_ip)
{
    char buf[EGRESS_HOST_SIZE];
    unsigned char addr[16];
    if (n == 0 || n >= sizeof(buf)) {
        return -EINVAL;
    }
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']') {
            return -EINVAL;
        }
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = '\0';
        if (inet_pton(AF_INET6, buf, addr) != 1) {
            return -EINVAL;
        }
        format_v6(addr, out);
        *ret_is_ip = true;
        return 0;
    }
    memcpy(buf, h, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1) {
        (void)inet_ntop(AF_INET, addr, out, EGRESS_HOST_SIZE);
        *ret_is_ip = true;
        return 0;
    }
    if (buf[n - 1] == '.') {
        buf[--n] = '\0';
    }
    if (n == 0 || n > 253) {
        return -EINVAL;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && buf[i] != '.') {
            char c = buf[i];
            if (c >= 'A' && c <= 'Z') {
                buf[i] = (char)(c | 0x20);
            } else if (!((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_')) {
                return -EINVAL;
            }
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || buf[start] == '-' || buf[i - 1] == '-') {
            return -EINVAL;
        }
        if (i == n) {
            /* SECURITY: a numeric last label would make the resolver read an address. */
            bool numeric = true;
            for (size_t j = start; j < i; j++) {
                numeric = numeric && is_digit(buf[j]);
            }
            if (numeric || (len > 1 && buf[start] == '0' && buf[start + 1] == 'x')) {
                return -EINVAL;
            }
        }
        start = i + 1;
    }
    memcpy(out, buf, n + 1);
    *ret_is_ip = false;
    return 0;
}

static int port_parse(const char *s, size_t n, uint16_t *ret)
{
    uint32_t v = 0;
    if (n == 0 || n > 5) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i])) {
            return -EINVAL;
        }
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    if (v == 0 || v > 65535) {
        return -EINVAL;
    }
    *ret = (uint16_t)v;
    return 0;
}

int egress_parse_authority(const char *s, size_t n, uint16_t default_port,
                           struct egress_hostport *ret)
{
    size_t hlen = n;
    const char *port = NULL;
    size_t plen = 0;
    if (n > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb) {
            return -EINVAL;
        }
        hlen = (size_t)(rb - s) + 1;
        if (hlen < n) {
            if (s[hlen] != ':') {
                return -EINVAL;
            }
            port = s + hlen + 1;
            plen = n - hlen - 1;
        }
    } else {
        const char *colon = memrchr(s, ':', n);
        if (colon) {
            if (memchr(s, ':', (size_t)(colon - s))) {
                return -EINVAL; /* a bare IPv6 address: brackets are required */
            }
            hlen = (size_t)(colon - s);
            port = colon + 1;
            plen = n - hlen - 1;
        }
    }
    struct egress_hostport hp;
    memset(&hp, 0, sizeof(hp));
    if (port) {
        if (port_parse(port, plen, &hp.port) < 0) {
            return -EINVAL;
        }
    } else if (default_port) {
        hp.port = default_port;
    } else {
        return -EINVAL;
    }
    if (egress_parse_host_normalize(s, hlen, hp.host, &hp.is_ip) < 0) {
        return -EINVAL;
    }
    *ret = hp;
    return 0;
}

int egress_parse_allow(const char *s, struct egress_allow *ret)
{
    struct egress_allow a;
    struct egress_hostport hp;
    memset(&a, 0, sizeof(a));
    if (strncmp(s, "*.", 2) == 0) {
        a.wildcard = true;
        s += 2;
    }
    if (egress_parse_authority(s, strlen(s), 0, &hp) < 0 || (a.wildcard && hp.is_ip)) {
        return -EINVAL;
    }
    str_copy(a.host, hp.host, sizeof(a.host));
    a.port = hp.port;
    *ret = a;
    return 0;
}

bool egress_parse_allow_match(const struct egress_allow *a, const struct egress_hostport *hp)
{
    if (a->port != hp->port) {
        return false;
    }
    if (!a->wildcard) {
        return strcmp(a->host, hp->host) == 0;
    }
    size_t hl = strlen(hp->host);
    size_t sl = strlen(a->host);
    return !hp->is_ip && hl > sl + 1 && hp->host[hl - sl - 1] == '.' &&
           strcmp(hp->host + hl - sl, a->host) == 0;
}

/* ---- Methods ---- */

uint32_t egress_parse_method_bit(const char *m, size_t n)
{
    static const struct {
        const char *name;
        uint32_t bit;
    } methods[] = {
        {"GET", EGRESS_METHOD_GET},         {"HEAD", EGRESS_METHOD_HEAD},
        {"POST", EGRESS_METHOD_POST},       {"PUT", EGRESS_METHOD_PUT},
        {"PATCH", EGRESS_METHOD_PATCH},     {"DELETE", EGRESS_METHOD_DELETE},
        {"OPTIONS", EGRESS_METHOD_OPTIONS},
    };
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, m, n) == 0) {
            return methods[i].bit;
        }
    }
    return 0;
}

/* ---- Heads ---- */

size_t egress_parse_head_end(const char *buf, size_t len)
{
    const char *e = memmem(buf, len, "\r\n\r\n", 4);
    return e ? (size_t)(e - buf) + 4 : 0;
}

bool egress_parse_header_is(const struct egress_header *h, const char *name)
{
    return strlen(name) == h->name_len && strncasecmp(h->name, name, h->name_len) == 0;
}

static bool value_byte_ok(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Parses the header lines of [p, end) (end just past the final empty line's CRLF) into
 * hs. Returns 0 or -EINVAL (*why). */
static int headers_parse(const char *p, const char *end, struct egress_header *hs, size_t *ret_n,
                         const char **why)
{
    size_t n = 0;
    for (;;) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) {
            *why = "header lines must end with CRLF";
            return -EINVAL;
        }
        if (eol == p) {
            break;
        }
        if (*p == ' ' || *p == '\t') {
            *why = "folded header lines are not accepted";
            return -EINVAL;
        }
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon || colon == p) {
            *why = "malformed header line";
            return -EINVAL;
        }
        for (const char *c = p; c < colon; c++) {
            if (!is_token_char(*c)) {
                *why = "invalid character in a header name";
                return -EINVAL;
            }
        }
        const char *v = colon + 1;
        const char *ve = eol;
        for (const char *c = v; c < ve; c++) {
            if (!value_byte_ok((unsigned char)*c)) {
                *why = "invalid character in a header value";
                return -EINVAL;
            }
        }
        while (v < ve && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
            ve--;
        }
        if (n >= EGRESS_HEADERS_MAX) {
            *why = "too many headers";
            return -EINVAL;
        }
        hs[n].name = p;
        hs[n].name_len = (size_t)(colon - p);
        hs[n].value = v;
        hs[n].value_len = (size_t)(ve - v);
        n++;
        p = eol + 2;
    }
    if (p + 2 != end) {
        *why = "bytes after the end of the head";
        return -EINVAL;
    }
    *ret_n = n;
    return 0;
}

static int content_length_parse(const char *v, size_t n, uint64_t *ret)
{
    uint64_t x = 0;
    if (n == 0 || n > 15) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(v[i])) {
            return -EINVAL;
        }
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *ret = x;
    return 0;
}

/* Whether h is not a framing header but could pass for one with an upstream that matches
 * names by prefix or reads '_' as '-' ("Transfer-Encodingx", "content_length"): such a
 * server would frame the body otherwise than the proxy, and what the proxy passes on as
 * body bytes could reach it as a second request. No client needs such a name. */
static bool framing_lookalike(const struct egress_header *h)
{
    static const char *const names[] = {"transfer-encoding", "content-length"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        size_t n = strlen(names[i]);
        if (h->name_len < n) {
            continue;
        }
        bool same = true;
        for (size_t k = 0; k < n && same; k++) {
            char c = (char)tolower((unsigned char)h->name[k]);
            same = c == names[i][k] || (names[i][k] == '-' && c == '_');
        }
        if (same) {
            return true; /* the framing headers themselves were matched before */
        }
    }
    return false;
}

/* The transfer codings of a response, from its Transfer-Encoding fields in order. */
struct te_list {
    unsigned n;         /* codings */
    unsigned n_chunked; /* of them "chunked" */
    bool last_chunked;  /* the final coding is "chunked" */
};

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* Adds one Transfer-Encoding field value to t: a list (RFC 9110 5.6.1), empty elements
 * ignored, each element a coding's name (a token) and maybe parameters after ';' (which
 * chunked has none of). Returns 0, or -EINVAL for an element that is not a coding: such a
 * value would be read differently by the proxy and by the task's HTTP client. */
static int te_list_add(struct te_list *t, const char *v, size_t n)
{
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && v[j] != ',') {
            j++;
        }
        size_t a = i, b = j;
        while (a < b && is_ows(v[a])) {
            a++;
        }
        while (b > a && is_ows(v[b - 1])) {
            b--;
        }
        if (a < b) {
            size_t k = a;
            while (k < b && is_token_char(v[k])) {
                k++;
            }
            size_t m = k;
            while (m < b && is_ows(v[m])) {
                m++;
            }
            bool chunked = k - a == 7 && strncasecmp(v + a, "chunked", 7) == 0;
            if (k == a || (m < b && (v[m] != ';' || chunked))) {
                return -EINVAL;
            }
            t->n++;
            t->n_chunked += chunked;
            t->last_chunked = chunked;
        }
        i = j + 1;
    }
    return 0;
}

/* Bytes of an absolute URL's authority: up to the first '/' or '?' within n. */
static size_t authority_len(const char *a, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] != '/' && a[i] != '?') {
        i++;
    }
    return i;
}

int egress_parse_request(const char *buf, size_t head_len, struct egress_request *ret,
                         const char **why)
{
    struct egress_request r;
    memset(&r, 0, sizeof(r));
    const char *end = buf + head_len;
    const char *eol = memmem(buf, head_len, "\r\n", 2);
    if (!eol || head_len > EGRESS_HEAD_MAX) {
        *why = "malformed request line";
        return -EINVAL;
    }
    const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (!sp1 || !sp2 || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(r.method) || sp2 == sp1 + 1) {
        *why = "malformed request line";
        return -EINVAL;
    }
    for (const char *c = buf; c < sp1; c++) {
        if (!is_token_char(*c)) {
            *why = "malformed request method";
            return -EINVAL;
        }
    }
    memcpy(r.method, buf, (size_t)(sp1 - buf));
    r.method[sp1 - buf] = '\0';
    r.target = sp1 + 1;
    r.target_len = (size_t)(sp2 - sp1 - 1);
    for (size_t i = 0; i < r.target_len; i++) {
        unsigned char c = (unsigned char)r.target[i];
        if (c <= 0x20 || c >= 0x7f || c == '#') {
            *why = "invalid character in the request target";
            return -EINVAL;
        }
    }
    size_t vlen = (size_t)(eol - sp2 - 1);
    if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || (sp2[8] != '0' && sp2[8] != '1')) {
        *why = "only HTTP/1.0 and HTTP/1.1 are spoken";
        return -EINVAL;
    }
    r.version_minor = (unsigned)(sp2[8] - '0');
    r.head_len = head_len;
    int rc = headers_parse(eol + 2, end, r.headers, &r.n_headers, why);
    if (rc < 0) {
        return rc;
    }
    /* Framing: exactly one way to find the end of the body, or the request is refused. */
    const struct egress_header *host = NULL;
    size_t n_te = 0, n_cl = 0, n_host = 0;
    for (size_t i = 0; i < r.n_headers; i++) {
        const struct egress_header *h = &r.headers[i];
        if (egress_parse_header_is(h, "transfer-encoding")) {
            n_te++;
            if (h->value_len != 7 || strncasecmp(h->value, "chunked", 7) != 0) {
                *why = "only 'Transfer-Encoding: chunked' is accepted";
                return -EINVAL;
            }
        } else if (egress_parse_header_is(h, "content-length")) {
            n_cl++;
            if (content_length_parse(h->value, h->value_len, &r.content_length) < 0) {
                *why = "malformed Content-Length";
                return -EINVAL;
            }
        } else if (egress_parse_header_is(h, "host")) {
            n_host++;
            host = h;
        } else if (framing_lookalike(h)) {
            *why = "a header named like Transfer-Encoding or Content-Length";
            return -EINVAL;
        }
    }
    if (n_te > 1 || n_cl > 1 || n_host > 1) {
        *why = "repeated Transfer-Encoding, Content-Length or Host header";
        return -EINVAL;
    }
    if (n_te && n_cl) {
        *why = "both Content-Length and Transfer-Encoding";
        return -EINVAL;
    }
    if (n_te && r.version_minor == 0) {
        *why = "Transfer-Encoding in an HTTP/1.0 request";
        return -EINVAL;
    }
    r.framing = n_te ? EGRESS_BODY_CHUNKED
                     : (n_cl && r.content_length > 0 ? EGRESS_BODY_LENGTH : EGRESS_BODY_NONE);

    if (strcmp(r.method, "CONNECT") == 0) {
        r.is_connect = true;
        if (r.framing != EGRESS_BODY_NONE) {
            *why = "CONNECT with a body";
            return -EINVAL;
        }
        if (egress_parse_authority(r.target, r.target_len, 0, &r.dest) < 0) {
            *why = "CONNECT needs host:port";
            return -EINVAL;
        }
        *ret = r;
        return 0;
    }
    r.method_bit = egress_parse_method_bit(r.method, strlen(r.method));
    const char *t = r.target;
    size_t tl = r.target_len;
    const char *rest;
    if (t[0] == '/') {
        if (!host) {
            *why = "a Host header is required";
            return -EINVAL;
        }
        if (egress_parse_authority(host->value, host->value_len, 80, &r.dest) < 0) {
            *why = "malformed Host header";
            return -EINVAL;
        }
        rest = t;
    } else if (tl > 7 && strncasecmp(t, "http://", 7) == 0) {
        const char *a = t + 7;
        size_t alen = authority_len(a, tl - 7);
        if (memchr(a, '@', alen) || egress_parse_authority(a, alen, 80, &r.dest) < 0) {
            *why = "malformed host in the request URL";
            return -EINVAL;
        }
        rest = a + alen;
    } else if (tl > 8 && strncasecmp(t, "https://", 8) == 0) {
        const char *a = t + 8;
        size_t alen = authority_len(a, tl - 8);
        r.absolute_https = true;
        if (memchr(a, '@', alen) || egress_parse_authority(a, alen, 443, &r.dest) < 0) {
            *why = "malformed host in the request URL";
            return -EINVAL;
        }
        rest = a + alen;
    } else {
        *why = "unsupported request target";
        return -EINVAL;
    }
    size_t rlen = (size_t)(t + tl - rest);
    const char *q = memchr(rest, '?', rlen);
    if (q) {
        r.query = q + 1;
        r.query_len = (size_t)(t + tl - q - 1);
        rlen = (size_t)(q - rest);
    }
    if (rlen == 0) {
        r.path = "/";
        r.path_len = 1;
    } else {
        r.path = rest;
        r.path_len = rlen;
    }
    *ret = r;
    return 0;
}

bool egress_parse_header_hop_by_hop(const struct egress_header *h, const struct egress_header *all,
                                    size_t n)
{
    static const char *const hop[] = {
        "connection",         "keep-alive", "proxy-connection", "proxy-authorization",
        "proxy-authenticate", "te",         "trailer",          "upgrade",
    };
    /* SECURITY: framing headers are never dropped because Connection names them: the body
     * would be read differently upstream. */
    if (egress_parse_header_is(h, "content-length") ||
        egress_parse_header_is(h, "transfer-encoding") || egress_parse_header_is(h, "host")) {
        return false;
    }
    for (size_t i = 0; i < ARRAY_SIZE(hop); i++) {
        if (egress_parse_header_is(h, hop[i])) {
            return true;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!egress_parse_header_is(&all[i], "connection")) {
            continue;
        }
        const char *v = all[i].value;
        const char *ve = v + all[i].value_len;
        while (v < ve) {
            const char *comma = memchr(v, ',', (size_t)(ve - v));
            const char *te = comma ? comma : ve;
            const char *ts = v;
            while (ts < te && (*ts == ' ' || *ts == '\t')) {
                ts++;
            }
            const char *tend = te;
            while (tend > ts && (tend[-1] == ' ' || tend[-1] == '\t')) {
                tend--;
            }
            if ((size_t)(tend - ts) == h->name_len && strncasecmp(ts, h->name, h->name_len) == 0) {
                return true;
            }
            v = comma ? comma + 1 : ve;
        }
    }
    return false;
}

int egress_parse_response(const char *buf, size_t head_len, bool head_request,
                          struct egress_response *ret, const char **why)
{
    struct egress_response r;
    memset(&r, 0, sizeof(r));
    const char *eol = memmem(buf, head_len, "\r\n", 2);
    if (!eol || head_len > EGRESS_HEAD_MAX) {
        *why = "malformed status line";
        return -EINVAL;
    }
    size_t l = (size_t)(eol - buf);
    if (l < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ' || !is_digit(buf[9]) || !is_digit(buf[10]) || !is_digit(buf[11]) ||
        (l > 12 && buf[12] != ' ')) {
        *why = "malformed status line";
        return -EINVAL;
    }
    for (size_t i = 12; i < l; i++) {
        if (!value_byte_ok((unsigned char)buf[i])) {
            *why = "malformed status line";
            return -EINVAL;
        }
    }
    r.version_minor = (unsigned)(buf[7] - '0');
    r.status = (unsigned)((buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0'));
    if (r.status < 100 || r.status > 599) {
        *why = "status out of range";
        return -EINVAL;
    }
    r.status_line = buf;
    r.status_line_len = l;
    r.head_len = head_len;
    int rc = headers_parse(eol + 2, buf + head_len, r.headers, &r.n_headers, why);
    if (rc < 0) {
        return rc;
    }
    struct te_list te = {0, 0, false};
    bool has_te = false, cl = false;
    for (size_t i = 0; i < r.n_headers; i++) {
        const struct egress_header *h = &r.headers[i];
        if (egress_parse_header_is(h, "transfer-encoding")) {
            has_te = true;
            if (te_list_add(&te, h->value, h->value_len) < 0) {
                *why = "malformed Transfer-Encoding";
                return -EINVAL;
            }
        } else if (egress_parse_header_is(h, "content-length")) {
            uint64_t v = 0;
            if (content_length_parse(h->value, h->value_len, &v) < 0 ||
                (cl && v != r.content_length)) {
                *why = "malformed or conflicting Content-Length";
                return -EINVAL;
            }
            cl = true;
            r.content_length = v;
        }
    }
    /* Chunked at most once (RFC 9112 6.1); a field with no coding at all is malformed too.
     * Chunked last: the chunks end the body; any other final coding: the connection's close
     * does, whatever Content-Length says (6.3). */
    if (has_te && (te.n == 0 || te.n_chunked > 1)) {
        *why = "malformed Transfer-Encoding";
        return -EINVAL;
    }
    if (head_request || r.status < 200 || r.status == 204 || r.status == 304) {
        r.framing = EGRESS_BODY_NONE;
    } else if (has_te) {
        r.framing = te.last_chunked ? EGRESS_BODY_CHUNKED : EGRESS_BODY_CLOSE;
    } else if (cl) {
        r.framing = r.content_length ? EGRESS_BODY_LENGTH : EGRESS_BODY_NONE;
    } else {
        r.framing = EGRESS_BODY_CLOSE;
    }
    *ret = r;
    return 0;
}

/* ---- Bodies ---- */

enum chunk_state {
    CS_SIZE = 0,
    CS_EXT,
    CS_SIZE_LF,
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    CS_TRAILER,       /* the start of a trailer line, or of the final CRLF */
    CS_TRAILER_NAME,  /* a trailer field's name, up to its ':' */
    CS_TRAILER_VALUE, /* its value, up to CR */
    CS_TRAILER_LF,
    CS_END_LF,
};

/* Bounds on the lines of a chunked body. */
#define CHUNK_LINE_MAX 1024
#define CHUNK_TRAILER_MAX 8192

void egress_parse_body_init(struct egress_body *b, enum egress_framing framing, uint64_t length)
{
    memset(b, 0, sizeof(*b));
    b->framing = framing;
    b->remaining = length;
    b->state = CS_SIZE;
    b->done = framing == EGRESS_BODY_NONE || (framing == EGRESS_BODY_LENGTH && length == 0);
}

/* The state after byte c in a trailer line (CS_TRAILER: at its start), or -1 when c has no
 * place there: a field name of token characters, ':', a value of field bytes, CR; or, at
 * the start, the CR of the final empty line. */
static int trailer_next(int state, char c)
{
    switch (state) {
    case CS_TRAILER:
        return c == '\r' ? CS_END_LF : is_token_char(c) ? CS_TRAILER_NAME : -1;
    case CS_TRAILER_NAME:
        return c == ':' ? CS_TRAILER_VALUE : is_token_char(c) ? CS_TRAILER_NAME : -1;
    default: /* CS_TRAILER_VALUE */
        return c == '\r' ? CS_TRAILER_LF : value_byte_ok((unsigned char)c) ? CS_TRAILER_VALUE : -1;
    }
}

static int chunked_feed(struct egress_body *b, const char *in, size_t n, size_t *ret_used,
                        egress_data_cb emit, void *ud)
{
    size_t i = 0;
    while (i < n && !b->done) {
        char c = in[i];
        switch (b->state) {
        case CS_SIZE: {
            int v = hex_value(c);
            if (v >= 0) {
                if (b->line >= 16) {
                    return -EINVAL;
                }
                b->remaining = b->remaining * 16 + (uint64_t)v;
                b->line++;
                i++;
                break;
            }
            if (b->line == 0) {
                return -EINVAL;
            }
            if (c == '\r') {
                b->state = CS_SIZE_LF;
            } else if (c == ';' || c == ' ' || c == '\t') {
                b->state = CS_EXT;
            } else {
                return -EINVAL;
            }
            i++;
            break;
        }
        case CS_EXT:
            if (c == '\r') {
                b->state = CS_SIZE_LF;
            } else if (!value_byte_ok((unsigned char)c) || ++b->line > CHUNK_LINE_MAX) {
                return -EINVAL;
            }
            i++;
            break;
        case CS_SIZE_LF:
            if (c != '\n') {
                return -EINVAL;
            }
            i++;
            b->line = 0;
            b->state = b->remaining > 0 ? CS_DATA : CS_TRAILER;
            break;
        case CS_DATA: {
            size_t k = n - i;
            if (k > b->remaining) {
                k = (size_t)b->remaining;
            }
            if (emit && k > 0) {
                emit(ud, in + i, k);
            }
            b->remaining -= k;
            i += k;
            if (b->remaining == 0) {
                b->state = CS_DATA_CR;
            }
            break;
        }
        case CS_DATA_CR:
            if (c != '\r') {
                return -EINVAL;
            }
            b->state = CS_DATA_LF;
            i++;
            break;
        case CS_DATA_LF:
            if (c != '\n') {
                return -EINVAL;
            }
            b->state = CS_SIZE;
            b->line = 0;
            b->remaining = 0;
            i++;
            break;
        /* SECURITY: trailer lines are header fields ending in CRLF, nothing else. A bare LF
         * ends the body for lenient upstreams (http_parser among them) while a laxer proxy
         * would read on: what follows would reach the upstream as a second request. */
        case CS_TRAILER:
        case CS_TRAILER_NAME:
        case CS_TRAILER_VALUE: {
            int next = trailer_next(b->state, c);
            if (next < 0 || ++b->line > CHUNK_TRAILER_MAX) {
                return -EINVAL;
            }
            b->state = next;
            i++;
            break;
        }
        case CS_TRAILER_LF:
            if (c != '\n') {
                return -EINVAL;
            }
            b->state = CS_TRAILER;
            i++;
            break;
        case CS_END_LF:
            if (c != '\n') {
                return -EINVAL;
            }
            b->done = true;
            i++;
            break;
        default:
            return -EINVAL;
        }
    }
    *ret_used = i;
    return 0;
}

int egress_parse_body_feed(struct egress_body *b, const char *in, size_t n, size_t *ret_used,
                           egress_data_cb emit, void *ud)
{
    if (b->done) {
        *ret_used = 0;
        return 0;
    }
    switch (b->framing) {
    case EGRESS_BODY_NONE:
        *ret_used = 0;
        b->done = true;
        return 0;
    case EGRESS_BODY_LENGTH: {
        size_t k = n;
        if (k > b->remaining) {
            k = (size_t)b->remaining;
        }
        if (emit && k > 0) {
            emit(ud, in, k);
        }
        b->remaining -= k;
        b->done = b->remaining == 0;
        *ret_used = k;
        return 0;
    }
    case EGRESS_BODY_CHUNKED:
        return chunked_feed(b, in, n, ret_used, emit, ud);
    case EGRESS_BODY_CLOSE:
        if (emit && n > 0) {
            emit(ud, in, n);
        }
        *ret_used = n;
        return 0;
    }
    return -EINVAL;
}

/* ---- The task's environment ---- */

const char *egress_parse_proxy_var(size_t i)
{
    static const char *const names[EGRESS_PROXY_VARS] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                                         "https_proxy"};
    assert(i < EGRESS_PROXY_VARS);
    return names[i];
}

void egress_parse_proxy_url(uint16_t port, char *buf, size_t size)
{
    (void)snprintf(buf, size, "http://127.0.0.1:%u", (unsigned)port);
}
