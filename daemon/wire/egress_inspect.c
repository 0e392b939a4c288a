/* SPDX-License-Identifier: MIT */
/* Stream inspection for the egress proxy: the server name of a TLS ClientHello (strictly
 * parsed, across records, refusing what hides the real name) and the scrubber that replaces
 * a credential echoed by an upstream, even split across reads. Nothing here trusts a length
 * it has not checked against the bytes it has. */
#include "wire/egress_inspect.h"

#include <errno.h>
#include <string.h>

#include "lib/util.h"

/* Copies a DNS host name (n bytes) into out (EGRESS_SNI_SIZE), lowercased, without a
 * trailing dot. RFC 6066: a HostName is never an address literal, so the last label must
 * not be numeric. Returns 0 or -EPROTO. */
static int sni_name(const uint8_t *p, size_t n, char *out)
{
    if (n > 0 && p[n - 1] == '.') {
        n--;
    }
    if (n == 0 || n > 253) {
        return -EPROTO;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') {
            char c = (char)p[i];
            if (c >= 'A' && c <= 'Z') {
                c = (char)(c | 0x20);
            } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                         c == '_')) {
                return -EPROTO;
            }
            out[i] = c;
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || p[start] == '-' || p[i - 1] == '-') {
            return -EPROTO;
        }
        if (i == n) {
            bool numeric = true;
            for (size_t j = start; j < i; j++) {
                numeric = numeric && p[j] >= '0' && p[j] <= '9';
            }
            if (numeric) {
                return -EPROTO;
            }
        } else {
            out[i] = '.';
        }
        start = i + 1;
    }
    out[n] = '\0';
    return 0;
}

/* ---- TLS ClientHello ---- */

#define TLS_HANDSHAKE 22
#define TLS_CLIENT_HELLO 1
#define TLS_RECORD_MAX 16384
#define TLS_EXT_SERVER_NAME 0x0000
#define TLS_EXT_ECH 0xfe0d
#define TLS_EXT_ESNI_DRAFT 0xffce

static uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

/* Parses the server_name extension body. Returns 0, -EPROTO or -ENOENT. */
static int sni_ext(const uint8_t *p, size_t n, char *host)
{
    if (n < 2 || be16(p) != n - 2) {
        return -EPROTO;
    }
    bool found = false;
    for (size_t off = 2; off < n;) {
        if (n - off < 3) {
            return -EPROTO;
        }
        uint8_t type = p[off];
        size_t len = be16(p + off + 1);
        off += 3;
        if (len > n - off) {
            return -EPROTO;
        }
        if (type == 0) {
            if (found || sni_name(p + off, len, host) < 0) {
                return -EPROTO; /* one host name, a DNS name (RFC 6066: never an address) */
            }
            found = true;
        }
        off += len;
    }
    return found ? 0 : -ENOENT;
}

int egress_inspect_sni_parse(const uint8_t *buf, size_t len, char *host)
{
    uint8_t msg[EGRESS_HELLO_MAX];
    size_t have = 0;
    size_t need = 0;
    size_t off = 0;
    for (;;) {
        if (len - off >= 1 && buf[off] != TLS_HANDSHAKE) {
            return -EPROTO;
        }
        if (len - off >= 2 && buf[off + 1] != 3) {
            return -EPROTO;
        }
        if (len - off < 5) {
            return -EAGAIN;
        }
        size_t rlen = be16(buf + off + 3);
        if (rlen == 0 || rlen > TLS_RECORD_MAX) {
            return -EPROTO;
        }
        if (off + 5 + rlen > EGRESS_HELLO_BUF) {
            return -E2BIG;
        }
        if (len - off - 5 < rlen) {
            return -EAGAIN;
        }
        size_t take = rlen;
        if (have + take > sizeof(msg)) {
            if (need == 0 || need > sizeof(msg)) {
                return -E2BIG;
            }
            take = sizeof(msg) - have;
        }
        memcpy(msg + have, buf + off + 5, take);
        have += take;
        off += 5 + rlen;
        if (need == 0 && have >= 4) {
            if (msg[0] != TLS_CLIENT_HELLO) {
                return -EPROTO;
            }
            need = 4 + ((size_t)msg[1] << 16 | (size_t)msg[2] << 8 | msg[3]);
            if (need > sizeof(msg)) {
                return -E2BIG;
            }
        }
        if (need > 0 && have >= need) {
            break;
        }
    }
    const uint8_t *p = msg;
    size_t end = need;
    size_t i = 4 + 2 + 32; /* version, random */
    if (end < i + 1) {
        return -EPROTO;
    }
    size_t sid = p[i];
    if (sid > 32) {
        return -EPROTO;
    }
    i += 1 + sid;
    if (end < i + 2) {
        return -EPROTO;
    }
    size_t cs = be16(p + i);
    if (cs < 2 || cs % 2 != 0) {
        return -EPROTO;
    }
    i += 2 + cs;
    if (end < i + 1) {
        return -EPROTO;
    }
    size_t comp = p[i];
    if (comp < 1) {
        return -EPROTO;
    }
    i += 1 + comp;
    if (i > end) {
        return -EPROTO;
    }
    if (i == end) {
        return -ENOENT; /* no extensions at all */
    }
    if (end - i < 2 || be16(p + i) != end - i - 2) {
        return -EPROTO;
    }
    i += 2;
    uint32_t seen[64];
    size_t n_seen = 0;
    int result = -ENOENT;
    while (i < end) {
        if (end - i < 4) {
            return -EPROTO;
        }
        uint32_t type = be16(p + i);
        size_t elen = be16(p + i + 2);
        i += 4;
        if (elen > end - i) {
            return -EPROTO;
        }
        for (size_t k = 0; k < n_seen; k++) {
            if (seen[k] == type) {
                return -EPROTO; /* RFC 8446: one extension of each type */
            }
        }
        if (n_seen >= ARRAY_SIZE(seen)) {
            return -EPROTO;
        }
        seen[n_seen++] = type;
        if (type == TLS_EXT_ECH || type == TLS_EXT_ESNI_DRAFT) {
            return -EOPNOTSUPP;
        }
        if (type == TLS_EXT_SERVER_NAME) {
            result = sni_ext(p + i, elen, host);
            if (result == -EPROTO) {
                return result;
            }
        }
        i += elen;
    }
    return result;
}

/* ---- Scrubbing ---- */

void egress_inspect_scrub_init(struct egress_scrub *s, const char *secret, size_t len)
{
    memset(s, 0, sizeof(*s));
    if (!secret || len == 0 || len > EGRESS_SECRET_MAX) {
        return;
    }
    s->pat[0] = secret;
    s->len[0] = len;
    s->n = 1;
    /* "Bearer abc...", "Basic ...", "token ...": the part after the scheme is the secret
     * an upstream is most likely to echo alone. */
    const char *sp = memchr(secret, ' ', len);
    if (sp) {
        const char *tok = sp;
        while (tok < secret + len && *tok == ' ') {
            tok++;
        }
        size_t tl = (size_t)(secret + len - tok);
        if (tl >= 8) {
            s->pat[1] = tok;
            s->len[1] = tl;
            s->n = 2;
        }
    }
    s->keep = len - 1;
}

/* Stars in buf[0..len) the union of the occurrences of s's patterns that start before
 * `starts`, found in the bytes as they are: an interval is starred only once the next
 * occurrence begins past its end, so every match is made on bytes not yet starred. Returns
 * where the last starred interval ends (0: none). */
static size_t scrub_union(const struct egress_scrub *s, char *buf, size_t len, size_t starts)
{
    /* Each pattern's next occurrence at or after pos; NULL: no more. */
    const char *next[2] = {NULL, NULL};
    for (size_t k = 0; k < s->n; k++) {
        next[k] = memmem(buf, len, s->pat[k], s->len[k]);
    }
    size_t pos = 0, lo = 0, hi = 0;
    for (;;) {
        size_t at = SIZE_MAX, end = 0;
        for (size_t k = 0; k < s->n; k++) {
            if (next[k] && next[k] < buf + pos) {
                next[k] = pos < len ? memmem(buf + pos, len - pos, s->pat[k], s->len[k]) : NULL;
            }
            if (!next[k]) {
                continue;
            }
            size_t a = (size_t)(next[k] - buf);
            if (a < at || (a == at && a + s->len[k] > end)) {
                at = a;
                end = a + s->len[k];
            }
        }
        if (at == SIZE_MAX || at >= starts) {
            break;
        }
        if (at < hi) {
            hi = end > hi ? end : hi;
        } else {
            memset(buf + lo, '*', hi - lo);
            lo = at;
            hi = end;
        }
        pos = at + 1;
    }
    memset(buf + lo, '*', hi - lo);
    return hi;
}

void egress_inspect_scrub_buf(const struct egress_scrub *s, char *buf, size_t len)
{
    if (s->n > 0) {
        (void)scrub_union(s, buf, len, len);
    }
}

size_t egress_inspect_scrub_feed(struct egress_scrub *s, const char *in, size_t n, bool final,
                                 char *out)
{
    size_t total = s->held + n;
    memcpy(out, s->hold, s->held);
    if (n > 0) {
        memcpy(out + s->held, in, n);
    }
    size_t cover = s->cover;
    s->held = 0;
    s->cover = 0;
    if (s->n == 0) {
        return total;
    }
    /* Occurrences that start in what goes out now end within total (keep is the longest
     * pattern minus one); the rest start in the tail, which waits as it came. */
    size_t keep = final ? 0 : (total < s->keep ? total : s->keep);
    size_t emit = total - keep;
    memcpy(s->hold, out + emit, keep);
    s->held = keep;
    size_t hi = scrub_union(s, out, total, emit);
    /* What an earlier occurrence covered of the held bytes; what is covered of the new
     * tail, by it or by one found now. */
    memset(out, '*', cover < total ? cover : total);
    hi = cover > hi ? cover : hi;
    s->cover = hi > emit ? hi - emit : 0;
    return emit;
}
