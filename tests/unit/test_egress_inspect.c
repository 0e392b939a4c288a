/* SPDX-License-Identifier: MIT */
/* Unit tests of egress_inspect.c: the server name of TLS ClientHellos (a real one from
 * Python's ssl module, and hand-built ones: split across records, truncated, without a
 * name, with two, with an address, with Encrypted Client Hello, not TLS at all), and the
 * streaming scrubber (secrets split across feeds, the token part alone, pass-through); and
 * randomly edited ClientHellos and random streams of secrets and near misses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/egress_inspect.h"
#include "lib/util.h"
#include "rnd.h"

/* A ClientHello as Python 3.11's ssl module sends it for server_hostname="API.Example.com". */
static const uint8_t python_hello[] = {
    0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0xf0, 0xf3, 0xbe, 0xbc, 0xfb,
    0xf0, 0x1f, 0x20, 0xa6, 0x4e, 0xa0, 0x1d, 0x03, 0x47, 0x0d, 0xdb, 0xf3, 0xa7, 0x82, 0x7c, 0x9f,
    0x0a, 0x06, 0x21, 0xed, 0xe5, 0x84, 0x90, 0x28, 0xb1, 0x24, 0xdc, 0x20, 0xaa, 0xae, 0xe6, 0x8d,
    0xd3, 0xd0, 0x20, 0xa3, 0xad, 0xa9, 0x4a, 0x59, 0x18, 0x19, 0x8d, 0x33, 0xcb, 0x40, 0x4b, 0xca,
    0x2c, 0x6d, 0xce, 0xcc, 0x20, 0x3c, 0x78, 0xdb, 0x5b, 0x3e, 0x3b, 0x86, 0x00, 0x3e, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0x00, 0x9f, 0xcc, 0xa9, 0xcc, 0xa8, 0xcc, 0xaa,
    0xc0, 0x2b, 0xc0, 0x2f, 0x00, 0x9e, 0xc0, 0x24, 0xc0, 0x28, 0x00, 0x6b, 0xc0, 0x23, 0xc0, 0x27,
    0x00, 0x67, 0xc0, 0x0a, 0xc0, 0x14, 0x00, 0x39, 0xc0, 0x09, 0xc0, 0x13, 0x00, 0x33, 0x00, 0x9d,
    0x00, 0x9c, 0x00, 0x3d, 0x00, 0x3c, 0x00, 0x35, 0x00, 0x2f, 0x00, 0xff, 0x01, 0x00, 0x01, 0x75,
    0x00, 0x00, 0x00, 0x14, 0x00, 0x12, 0x00, 0x00, 0x0f, 0x41, 0x50, 0x49, 0x2e, 0x45, 0x78, 0x61,
    0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02,
    0x00, 0x0a, 0x00, 0x16, 0x00, 0x14, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18,
    0x01, 0x00, 0x01, 0x01, 0x01, 0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16,
    0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03,
    0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05,
    0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02,
    0x05, 0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x09, 0x08, 0x03, 0x04, 0x03, 0x03, 0x03, 0x02, 0x03,
    0x01, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00,
    0x20, 0xc9, 0x79, 0xae, 0x29, 0xfb, 0xfc, 0x61, 0x16, 0xed, 0xcf, 0xfc, 0x11, 0xe4, 0xcd, 0x0d,
    0x27, 0xdb, 0xa9, 0x30, 0x63, 0x45, 0x70, 0x1f, 0x26, 0xf9, 0xe9, 0x9a, 0x4f, 0xff, 0x9e, 0xd3,
    0x22, 0x00, 0x15, 0x00, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00,
};

/* ---- building ClientHellos ---- */

struct hello {
    uint8_t b[EGRESS_HELLO_BUF + 64];
    size_t len;
};

static void put8(uint8_t *b, size_t *off, unsigned v)
{
    b[(*off)++] = (uint8_t)v;
}

static void put16(uint8_t *b, size_t *off, unsigned v)
{
    put8(b, off, v >> 8);
    put8(b, off, v & 0xff);
}

/* A ClientHello handshake message with the given extensions block (already encoded). */
static size_t hello_msg(uint8_t *m, const uint8_t *ext, size_t ext_len, bool with_ext)
{
    size_t o = 4; /* type and 24-bit length filled at the end */
    put16(m, &o, 0x0303);
    memset(m + o, 0x42, 32);
    o += 32;
    put8(m, &o, 0); /* session id */
    put16(m, &o, 2);
    put16(m, &o, 0x1301);
    put8(m, &o, 1);
    put8(m, &o, 0);
    if (with_ext) {
        put16(m, &o, (unsigned)ext_len);
        memcpy(m + o, ext, ext_len);
        o += ext_len;
    }
    size_t body = o - 4;
    m[0] = 1;
    m[1] = (uint8_t)(body >> 16);
    m[2] = (uint8_t)(body >> 8);
    m[3] = (uint8_t)body;
    return o;
}

/* Wraps msg in records of at most chunk bytes each. */
static void records(struct hello *h, const uint8_t *msg, size_t n, size_t chunk)
{
    h->len = 0;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        put8(h->b, &h->len, 22);
        put16(h->b, &h->len, 0x0301);
        put16(h->b, &h->len, (unsigned)k);
        memcpy(h->b + h->len, msg + off, k);
        h->len += k;
    }
}

/* An extension block with one server_name extension listing names (type 0 each). */
static size_t sni_ext(uint8_t *e, const char *const *names, size_t n)
{
    size_t o = 0;
    size_t list = 0;
    for (size_t i = 0; i < n; i++) {
        list += 3 + strlen(names[i]);
    }
    put16(e, &o, 0x0000);
    put16(e, &o, (unsigned)(list + 2));
    put16(e, &o, (unsigned)list);
    for (size_t i = 0; i < n; i++) {
        put8(e, &o, 0);
        put16(e, &o, (unsigned)strlen(names[i]));
        memcpy(e + o, names[i], strlen(names[i]));
        o += strlen(names[i]);
    }
    return o;
}

static void build(struct hello *h, const char *const *names, size_t n, size_t chunk)
{
    uint8_t ext[1024], msg[2048];
    size_t el = sni_ext(ext, names, n);
    /* Another extension after it: supported_versions. */
    size_t o = el;
    put16(ext, &o, 0x002b);
    put16(ext, &o, 3);
    put8(ext, &o, 2);
    put16(ext, &o, 0x0304);
    records(h, msg, hello_msg(msg, ext, o, true), chunk);
}

/* ---- SNI ---- */

static void egress_inspect_sni_parse__real_python_hello(void **state)
{
    (void)state;
    char host[EGRESS_SNI_SIZE];
    assert_int_equal(egress_inspect_sni_parse(python_hello, sizeof(python_hello), host), 0);
    assert_string_equal(host, "api.example.com");
}

static void egress_inspect_sni_parse__every_prefix_asks_for_more(void **state)
{
    (void)state;
    char host[EGRESS_SNI_SIZE];
    for (size_t n = 0; n < sizeof(python_hello); n++) {
        assert_int_equal(egress_inspect_sni_parse(python_hello, n, host), -EAGAIN);
    }
}

static void egress_inspect_sni_parse__split_across_records(void **state)
{
    (void)state;
    static struct hello h;
    const char *names[] = {"Split.Example.ORG."};
    char host[EGRESS_SNI_SIZE];
    for (size_t chunk = 1; chunk <= 64; chunk++) {
        build(&h, names, 1, chunk);
        assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), 0);
        assert_string_equal(host, "split.example.org");
        assert_int_equal(egress_inspect_sni_parse(h.b, h.len - 1, host), -EAGAIN);
    }
}

static void egress_inspect_sni_parse__no_name(void **state)
{
    (void)state;
    static struct hello h;
    uint8_t msg[256], ext[16];
    size_t o = 0;
    char host[EGRESS_SNI_SIZE];
    put16(ext, &o, 0x002b);
    put16(ext, &o, 3);
    put8(ext, &o, 2);
    put16(ext, &o, 0x0304);
    records(&h, msg, hello_msg(msg, ext, o, true), 1000);
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -ENOENT);
    /* No extensions block at all. */
    records(&h, msg, hello_msg(msg, NULL, 0, false), 1000);
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -ENOENT);
}

static void egress_inspect_sni_parse__refuses_ambiguous_names(void **state)
{
    (void)state;
    static struct hello h;
    char host[EGRESS_SNI_SIZE];
    const char *two[] = {"a.example.com", "b.example.com"};
    build(&h, two, 2, 1000);
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -EPROTO);
    const char *bad[][1] = {{"127.0.0.1"}, {"exa mple.com"}, {"-a.com"}, {"a..com"},
                            {""},          {"a.123"}};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        build(&h, bad[i], 1, 1000);
        assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -EPROTO);
    }
    /* A NUL inside the name: a C string would stop at "evil.com". */
    const char *nul[] = {"evil.comXgood.com"};
    build(&h, nul, 1, 1000);
    uint8_t *x = memchr(h.b, 'X', h.len);
    assert_non_null(x);
    *x = '\0';
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -EPROTO);
}

static void egress_inspect_sni_parse__encrypted_client_hello(void **state)
{
    (void)state;
    static struct hello h;
    uint8_t ext[256], msg[512];
    const char *names[] = {"public.example.com"};
    char host[EGRESS_SNI_SIZE];
    size_t o = sni_ext(ext, names, 1);
    put16(ext, &o, 0xfe0d);
    put16(ext, &o, 4);
    put16(ext, &o, 0);
    put16(ext, &o, 0);
    records(&h, msg, hello_msg(msg, ext, o, true), 1000);
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -EOPNOTSUPP);
}

static void egress_inspect_sni_parse__duplicate_extension(void **state)
{
    (void)state;
    static struct hello h;
    uint8_t ext[256], msg[512];
    const char *a[] = {"a.example.com"};
    const char *b[] = {"b.example.com"};
    char host[EGRESS_SNI_SIZE];
    size_t o = sni_ext(ext, a, 1);
    o += sni_ext(ext + o, b, 1);
    records(&h, msg, hello_msg(msg, ext, o, true), 1000);
    assert_int_equal(egress_inspect_sni_parse(h.b, h.len, host), -EPROTO);
}

static void egress_inspect_sni_parse__not_tls(void **state)
{
    (void)state;
    char host[EGRESS_SNI_SIZE];
    const char *get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(egress_inspect_sni_parse((const uint8_t *)get, strlen(get), host), -EPROTO);
    assert_int_equal(egress_inspect_sni_parse((const uint8_t *)get, 1, host), -EPROTO);
    /* A handshake record that is a ServerHello, not a ClientHello. */
    uint8_t sh[] = {22, 3, 3, 0, 4, 2, 0, 0, 0};
    assert_int_equal(egress_inspect_sni_parse(sh, sizeof(sh), host), -EPROTO);
    /* An alert record. */
    uint8_t alert[] = {21, 3, 3, 0, 2, 2, 40};
    assert_int_equal(egress_inspect_sni_parse(alert, sizeof(alert), host), -EPROTO);
    /* SSLv2-style or bad version. */
    uint8_t v2[] = {22, 2, 0, 0, 4};
    assert_int_equal(egress_inspect_sni_parse(v2, sizeof(v2), host), -EPROTO);
    /* A record of length 0, and one above 2^14. */
    uint8_t zero[] = {22, 3, 1, 0, 0};
    assert_int_equal(egress_inspect_sni_parse(zero, sizeof(zero), host), -EPROTO);
    uint8_t huge[] = {22, 3, 1, 0x40, 0x01};
    assert_int_equal(egress_inspect_sni_parse(huge, sizeof(huge), host), -EPROTO);
}

static void egress_inspect_sni_parse__lengths_are_checked(void **state)
{
    (void)state;
    static struct hello h;
    const char *names[] = {"a.example.com"};
    char host[EGRESS_SNI_SIZE];
    build(&h, names, 1, 4096);
    /* The extensions block claims one byte more than there is. */
    static struct hello bad;
    bad = h;
    size_t ext_len_off = 5 + 4 + 2 + 32 + 1 + 2 + 2 + 1 + 1;
    bad.b[ext_len_off + 1]++;
    assert_int_equal(egress_inspect_sni_parse(bad.b, bad.len, host), -EPROTO);
    /* A session id longer than 32. */
    bad = h;
    bad.b[5 + 4 + 2 + 32] = 33;
    assert_int_equal(egress_inspect_sni_parse(bad.b, bad.len, host), -EPROTO);
    /* A handshake message declared larger than EGRESS_HELLO_MAX. */
    uint8_t big[] = {22, 3, 1, 0, 4, 1, 0x01, 0x00, 0x00};
    assert_int_equal(egress_inspect_sni_parse(big, sizeof(big), host), -E2BIG);
}

/* ---- scrubbing ---- */

static const char secret[] = "Bearer tok-1234567890abcdef";

static void scrub_all(struct egress_scrub *s, const char *in, size_t chunk, char *out, size_t *n)
{
    static char buf[1 << 16];
    size_t len = strlen(in);
    *n = 0;
    for (size_t off = 0; off < len; off += chunk) {
        size_t k = len - off < chunk ? len - off : chunk;
        size_t w = egress_inspect_scrub_feed(s, in + off, k, false, buf);
        memcpy(out + *n, buf, w);
        *n += w;
    }
    size_t w = egress_inspect_scrub_feed(s, NULL, 0, true, buf);
    memcpy(out + *n, buf, w);
    *n += w;
    out[*n] = '\0';
}

static void egress_inspect_scrub_feed__split_anywhere(void **state)
{
    (void)state;
    const char *in = "{\"auth\": \"Bearer tok-1234567890abcdef\", \"again\": "
                     "\"tok-1234567890abcdef\", \"near\": \"tok-1234567890abcdeX\"}";
    const char *want = "{\"auth\": \"***************************\", \"again\": "
                       "\"********************\", \"near\": \"tok-1234567890abcdeX\"}";
    char out[512];
    size_t n;
    for (size_t chunk = 1; chunk <= strlen(in); chunk++) {
        struct egress_scrub s;
        egress_inspect_scrub_init(&s, secret, strlen(secret));
        scrub_all(&s, in, chunk, out, &n);
        assert_int_equal(n, strlen(in));
        assert_string_equal(out, want);
    }
}

/* Occurrences that overlap: a token part ending where the whole secret begins ("...B" then
 * "Bearer ...B"), and a secret that overlaps itself. Every byte of each is starred, in any
 * split; before, the whole secret was starred first and the token part before it, no longer
 * matching, stayed readable but for its last byte. */
static void egress_inspect_scrub_feed__overlapping_occurrences(void **state)
{
    (void)state;
    static const struct {
        const char *secret;
        const char *in;
        const char *want;
    } cases[] = {
        {"Bearer abcdefgB", "<abcdefgBearer abcdefgB>", "<**********************>"},
        {"token aaaaaaaa", "[aaaaaaaaaa]", "[**********]"},
        {"xyxyxyxy", "-xyxyxyxyxy-xyxyxyx-", "-**********-xyxyxyx-"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char out[128];
        char whole[128];
        size_t n = strlen(cases[i].in);
        for (size_t chunk = 1; chunk <= n; chunk++) {
            struct egress_scrub s;
            size_t got;
            egress_inspect_scrub_init(&s, cases[i].secret, strlen(cases[i].secret));
            scrub_all(&s, cases[i].in, chunk, out, &got);
            assert_int_equal(got, n);
            assert_string_equal(out, cases[i].want);
        }
        struct egress_scrub s;
        egress_inspect_scrub_init(&s, cases[i].secret, strlen(cases[i].secret));
        memcpy(whole, cases[i].in, n + 1);
        egress_inspect_scrub_buf(&s, whole, n);
        assert_string_equal(whole, cases[i].want);
    }
}

static void egress_inspect_scrub_feed__holds_back_only_a_possible_start(void **state)
{
    (void)state;
    struct egress_scrub s;
    char out[256];
    egress_inspect_scrub_init(&s, secret, strlen(secret));
    size_t w =
        egress_inspect_scrub_feed(&s, "0123456789012345678901234567890123456789", 40, false, out);
    /* At most the longest pattern minus one byte stays behind. */
    assert_int_equal(w, 40 - (strlen(secret) - 1));
    assert_int_equal(s.held, strlen(secret) - 1);
}

static void egress_inspect_scrub_buf__short_token_part_is_not_a_pattern(void **state)
{
    (void)state;
    struct egress_scrub s;
    char buf[] = "Basic abc and Basic abc";
    egress_inspect_scrub_init(&s, "Basic abc", 9);
    egress_inspect_scrub_buf(&s, buf, strlen(buf));
    assert_string_equal(buf, "********* and *********");
    /* "abc" alone (shorter than 8 bytes) is not scrubbed: it would mangle ordinary text. */
    assert_int_equal(s.n, 1);
}

static void egress_scrub__without_secret_passes_through(void **state)
{
    (void)state;
    struct egress_scrub s;
    char out[64];
    egress_inspect_scrub_init(&s, NULL, 0);
    assert_int_equal(egress_inspect_scrub_feed(&s, "hello", 5, false, out), 5);
    assert_memory_equal(out, "hello", 5);
}

/* ---- random input ---- */

/* ClientHellos from a hostile task: the real one and built ones with a few bytes changed,
 * cut short or split differently, in heap blocks of their exact length (ASan sees any read
 * past the end under SAN=1). Every answer is one of the documented ones; a name is a
 * NUL-terminated lowercase string that fits. */
static void egress_inspect_sni_parse__random_mutations(void **state)
{
    (void)state;
    static const char *const names[] = {"api.example.com", "a.b", "x"};
    size_t seen[6] = {0};
    for (int iter = 0; iter < 20000; iter++) {
        struct hello h;
        if (iter % 2) {
            memcpy(h.b, python_hello, sizeof(python_hello));
            h.len = sizeof(python_hello);
        } else {
            build(&h, names, 1 + rnd_below(2), 16 + rnd_below(600));
        }
        for (uint32_t k = 1 + rnd_below(4); k > 0 && h.len > 0; k--) {
            size_t at = rnd_below((uint32_t)h.len);
            if (rnd_below(8) == 0) {
                h.len = at; /* cut short */
            } else {
                h.b[at] = rnd_below(2) ? (uint8_t)rnd_below(256)
                                       : (uint8_t)(h.b[at] ^ (1u << rnd_below(8)));
            }
        }
        uint8_t *exact = malloc(h.len ? h.len : 1);
        assert_non_null(exact);
        memcpy(exact, h.b, h.len);
        char host[EGRESS_SNI_SIZE];
        memset(host, 'Z', sizeof(host));
        int r = egress_inspect_sni_parse(exact, h.len, host);
        free(exact);
        switch (r) {
        case 0: {
            const char *nul = memchr(host, '\0', sizeof(host));
            assert_non_null(nul);
            assert_true(nul > host);
            for (const char *c = host; c < nul; c++) {
                assert_false(*c >= 'A' && *c <= 'Z');
            }
            seen[0]++;
            break;
        }
        case -EAGAIN:
            seen[1]++;
            break;
        case -EPROTO:
            seen[2]++;
            break;
        case -ENOENT:
            seen[3]++;
            break;
        case -EOPNOTSUPP:
            seen[4]++;
            break;
        case -E2BIG:
            seen[5]++;
            break;
        default:
            fail_msg("egress_inspect_sni_parse returned %d", r);
        }
    }
    print_message("[  INFO    ] named %zu, more %zu, not tls %zu, no name %zu, ech %zu, big %zu\n",
                  seen[0], seen[1], seen[2], seen[3], seen[4], seen[5]);
    assert_true(seen[0] > 500 && seen[1] > 100 && seen[2] > 500);
}

/* A response stream with the secret, its token part and near misses at random places, fed
 * in random pieces: the output has the input's length and never the secret or its token
 * part; bytes outside the occurrences pass unchanged. */
static void egress_inspect_scrub_feed__random_streams_never_leak(void **state)
{
    (void)state;
    const char *token = secret + strlen("Bearer ");
    static char in[4096], want[4096], out[4096 + EGRESS_SECRET_MAX], buf[4096 + EGRESS_SECRET_MAX];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0;
        while (n < 3000) {
            const char *piece;
            size_t len;
            bool hidden = false;
            switch (rnd_below(6)) {
            case 0:
                piece = secret;
                len = strlen(secret);
                hidden = true;
                break;
            case 1:
                piece = token;
                len = strlen(token);
                hidden = true;
                break;
            case 2: /* a near miss: the token but its last byte */
                piece = token;
                len = strlen(token) - 1;
                break;
            default: {
                static char filler[32];
                len = 1 + rnd_below(sizeof(filler));
                for (size_t i = 0; i < len; i++) {
                    filler[i] = "Bearer tok-0123456789abcdef \n\""[rnd_below(30)];
                }
                piece = filler;
                break;
            }
            }
            memcpy(in + n, piece, len);
            memset(want + n, '*', len);
            if (!hidden) {
                memcpy(want + n, piece, len);
            }
            n += len;
        }
        struct egress_scrub s;
        egress_inspect_scrub_init(&s, secret, strlen(secret));
        size_t got = 0;
        for (size_t off = 0; off < n;) {
            size_t k = 1 + rnd_below(64);
            k = k > n - off ? n - off : k;
            size_t w = egress_inspect_scrub_feed(&s, in + off, k, false, buf);
            memcpy(out + got, buf, w);
            got += w;
            off += k;
        }
        got += egress_inspect_scrub_feed(&s, NULL, 0, true, out + got);
        assert_int_equal(got, n);
        assert_null(memmem(out, got, token, strlen(token)));
        /* Filler can spell the token by chance: then it is hidden too, which is right. */
        for (size_t i = 0; i < n; i++) {
            if (out[i] != want[i]) {
                assert_true(out[i] == '*');
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(egress_inspect_sni_parse__real_python_hello),
        cmocka_unit_test(egress_inspect_sni_parse__every_prefix_asks_for_more),
        cmocka_unit_test(egress_inspect_sni_parse__split_across_records),
        cmocka_unit_test(egress_inspect_sni_parse__no_name),
        cmocka_unit_test(egress_inspect_sni_parse__refuses_ambiguous_names),
        cmocka_unit_test(egress_inspect_sni_parse__encrypted_client_hello),
        cmocka_unit_test(egress_inspect_sni_parse__duplicate_extension),
        cmocka_unit_test(egress_inspect_sni_parse__not_tls),
        cmocka_unit_test(egress_inspect_sni_parse__lengths_are_checked),
        cmocka_unit_test(egress_inspect_scrub_feed__split_anywhere),
        cmocka_unit_test(egress_inspect_scrub_feed__overlapping_occurrences),
        cmocka_unit_test(egress_inspect_scrub_feed__holds_back_only_a_possible_start),
        cmocka_unit_test(egress_inspect_scrub_buf__short_token_part_is_not_a_pattern),
        cmocka_unit_test(egress_scrub__without_secret_passes_through),
        cmocka_unit_test(egress_inspect_sni_parse__random_mutations),
        cmocka_unit_test(egress_inspect_scrub_feed__random_streams_never_leak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
