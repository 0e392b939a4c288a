/* SPDX-License-Identifier: MIT */
/* Secret scrubbing for the audit trail and the log: one left-to-right pass over the text
 * that tries each matcher at each position and replaces what matches by SCRUB_MARK. Here:
 * the registry of secrets other modules register (wiped when forgotten) and the secrets
 * known by their shape (token prefixes, JWTs, AWS key ids, PEM keys, random base64);
 * scrub_context.c has those known by their context. It never stores or logs what it
 * scrubs, and never takes hex for a secret by its length. */
#include "lib/scrub.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/scrub_impl.h"
#include "lib/util.h"

#define SCRUB_SECRET_MAX 4096
#define SCRUB_PREFIX_MAX 32

struct secret {
    struct secret *next;
    uint64_t key; /* first SCRUB_MIN_SECRET bytes */
    size_t len;
    char *p;
};

struct prefix {
    char p[SCRUB_PREFIX_MAX + 1];
    size_t len;
    size_t min_rest; /* token characters required after the prefix */
};

struct scrub {
    struct secret **buckets;
    size_t n_buckets; /* power of two */
    size_t n_secrets;
    struct prefix *prefixes;
    size_t n_prefixes;
    uint8_t prefix_first[32]; /* bitmap of the registered prefixes' first bytes */
};

/* Well-known token formats: prefix and how many token characters must follow. */
static const struct prefix builtin_prefixes[] = {
    {"sk-", 3, 16},      {"sk_live_", 8, 16}, {"sk_test_", 8, 16}, {"rk_live_", 8, 16},
    {"rk_test_", 8, 16}, {"whsec_", 6, 16},   {"ghp_", 4, 30},     {"gho_", 4, 30},
    {"ghu_", 4, 30},     {"ghs_", 4, 30},     {"ghr_", 4, 30},     {"github_pat_", 11, 30},
    {"glpat-", 6, 20},   {"xoxb-", 5, 10},    {"xoxp-", 5, 10},    {"xoxa-", 5, 10},
    {"xoxr-", 5, 10},    {"xoxs-", 5, 10},    {"xapp-", 5, 20},    {"AIza", 4, 30},
    {"ya29.", 5, 20},    {"npm_", 4, 30},     {"pypi-", 5, 30},    {"hf_", 3, 30},
    {"dop_v1_", 7, 40},
};

static const char *const aws_key_prefixes[] = {"AKIA", "ASIA", "AIDA", "AROA", "AGPA",
                                               "ANPA", "ANVA", "AIPA", "ABIA", "ACCA"};

/* Uncapped: the caller bounds text, and each match (at least one byte) becomes one
 * SCRUB_MARK. */
static void out_put(struct buf *o, const char *s, size_t n)
{
    (void)buf_append(o, s, n);
}

static uint64_t secret_key(const char *p)
{
    uint64_t k;
    memcpy(&k, p, sizeof(k));
    return k;
}

static size_t bucket_of(const struct scrub *s, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (s->n_buckets - 1);
}

struct scrub *scrub_new(void)
{
    struct scrub *s = xcalloc(1, sizeof(*s));
    s->n_buckets = 64;
    s->buckets = xcalloc(s->n_buckets, sizeof(*s->buckets));
    return s;
}

static void secret_wipe_free(struct secret *x)
{
    explicit_bzero(x->p, x->len);
    free(x->p);
    free(x);
}

struct scrub *scrub_free(struct scrub *s)
{
    if (!s) {
        return NULL;
    }
    for (size_t i = 0; i < s->n_buckets; i++) {
        struct secret *x = s->buckets[i];
        while (x) {
            struct secret *next = x->next;
            secret_wipe_free(x);
            x = next;
        }
    }
    free(s->buckets);
    free(s->prefixes);
    free(s);
    return NULL;
}

static struct secret *secret_find(const struct scrub *s, const char *p, size_t len)
{
    if (len < SCRUB_MIN_SECRET) {
        return NULL;
    }
    for (struct secret *x = s->buckets[bucket_of(s, secret_key(p))]; x; x = x->next) {
        if (x->len == len && memcmp(x->p, p, len) == 0) {
            return x;
        }
    }
    return NULL;
}

static void grow_buckets(struct scrub *s)
{
    size_t old_n = s->n_buckets;
    struct secret **old = s->buckets;
    s->n_buckets *= 2;
    s->buckets = xcalloc(s->n_buckets, sizeof(*s->buckets));
    for (size_t i = 0; i < old_n; i++) {
        struct secret *x = old[i];
        while (x) {
            struct secret *next = x->next;
            size_t b = bucket_of(s, x->key);
            x->next = s->buckets[b];
            s->buckets[b] = x;
            x = next;
        }
    }
    free(old);
}

int scrub_register(struct scrub *s, const char *secret, size_t len)
{
    if (len < SCRUB_MIN_SECRET || len > SCRUB_SECRET_MAX) {
        return -EINVAL;
    }
    if (secret_find(s, secret, len)) {
        return -EEXIST;
    }
    if (s->n_secrets + 1 > s->n_buckets) {
        grow_buckets(s);
    }
    struct secret *x = xcalloc(1, sizeof(*x));
    x->p = xmalloc(len);
    memcpy(x->p, secret, len);
    x->len = len;
    x->key = secret_key(secret);
    size_t b = bucket_of(s, x->key);
    x->next = s->buckets[b];
    s->buckets[b] = x;
    s->n_secrets++;
    return 0;
}

int scrub_unregister(struct scrub *s, const char *secret, size_t len)
{
    if (len < SCRUB_MIN_SECRET) {
        return -ENOENT;
    }
    struct secret **pp = &s->buckets[bucket_of(s, secret_key(secret))];
    for (; *pp; pp = &(*pp)->next) {
        struct secret *x = *pp;
        if (x->len == len && memcmp(x->p, secret, len) == 0) {
            *pp = x->next;
            secret_wipe_free(x);
            s->n_secrets--;
            return 0;
        }
    }
    return -ENOENT;
}

int scrub_register_prefix(struct scrub *s, const char *prefix)
{
    size_t len = strlen(prefix);
    if (len < 2 || len > SCRUB_PREFIX_MAX) {
        return -EINVAL;
    }
    for (size_t i = 0; i < s->n_prefixes; i++) {
        if (strcmp(s->prefixes[i].p, prefix) == 0) {
            return -EEXIST;
        }
    }
    s->prefixes = xrealloc(s->prefixes, (s->n_prefixes + 1) * sizeof(*s->prefixes));
    struct prefix *p = &s->prefixes[s->n_prefixes++];
    memset(p, 0, sizeof(*p));
    memcpy(p->p, prefix, len);
    p->len = len;
    p->min_rest = 8;
    unsigned char c = (unsigned char)prefix[0];
    s->prefix_first[c >> 3] |= (uint8_t)(1u << (c & 7));
    return 0;
}

/* ---- matchers: each looks at position i and, on a match, sets [*rs, *re) to redact ---- */

static bool match_registered(const struct scrub *s, const struct scrub_text *t, size_t i,
                             size_t *re)
{
    if (!s || s->n_secrets == 0 || t->len - i < SCRUB_MIN_SECRET) {
        return false;
    }
    uint64_t key = secret_key((const char *)t->p + i);
    for (struct secret *x = s->buckets[bucket_of(s, key)]; x; x = x->next) {
        if (x->key == key && x->len <= t->len - i && memcmp(x->p, t->p + i, x->len) == 0) {
            *re = i + x->len;
            return true;
        }
    }
    return false;
}

/* Whether a token's rest is random-looking: a digit or an upper-case letter in it. A
 * random base64url rest of 8 or more characters has one almost always (43 characters, as
 * sbx's tokens have: but for 1 in 10^15); names such as the metric sbx_tasks_total do not. */
static bool rest_is_random(const unsigned char *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (is_digit(p[k]) || is_upper(p[k])) {
            return true;
        }
    }
    return false;
}

static bool match_prefix_list(const struct prefix *v, size_t n, bool random,
                              const struct scrub_text *t, size_t i, size_t *re)
{
    for (size_t k = 0; k < n; k++) {
        if (v[k].p[0] == (char)t->p[i] && starts_with(t, i, v[k].p, v[k].len)) {
            size_t r = i + v[k].len, j = span(t, r, C_TOKEN);
            if (j - r >= v[k].min_rest && (!random || rest_is_random(t->p + r, j - r))) {
                *re = j;
                return true;
            }
        }
    }
    return false;
}

static bool match_prefix(const struct scrub *s, const struct scrub_text *t, size_t i, size_t *re)
{
    unsigned char c = t->p[i];
    if (s && (s->prefix_first[c >> 3] & (1u << (c & 7))) &&
        match_prefix_list(s->prefixes, s->n_prefixes, true, t, i, re)) {
        return true;
    }
    return in_class(c, C_PFX) &&
           match_prefix_list(builtin_prefixes, ARRAY_SIZE(builtin_prefixes), false, t, i, re);
}

/* JWT (and JWE): base64url segments joined by dots, the first an encoded JSON object. A
 * single long "eyJ" segment is encoded JSON too (docker auths, service account keys). */
static bool match_jwt(const struct scrub_text *t, size_t i, size_t *re)
{
    if (!starts_with(t, i, "eyJ", 3) || !boundary(t, i, C_B64URL)) {
        return false;
    }
    size_t j = span(t, i, C_B64URL);
    if (j - i < 10) {
        return false;
    }
    size_t segs = 1;
    while (j < t->len && t->p[j] == '.') {
        size_t k = span(t, j + 1, C_B64URL);
        if (k == j + 1 && segs >= 2) {
            j = k; /* empty signature (alg "none") */
            segs++;
            break;
        }
        if (k == j + 1) {
            break;
        }
        j = k;
        segs++;
    }
    if (segs < 2 && j - i < 20) {
        return false;
    }
    *re = j;
    return true;
}

static bool match_aws_key_id(const struct scrub_text *t, size_t i, size_t *re)
{
    if (t->p[i] != 'A' || t->len - i < 20) {
        return false;
    }
    bool pre = false;
    for (size_t k = 0; k < ARRAY_SIZE(aws_key_prefixes) && !pre; k++) {
        pre = memcmp(t->p + i, aws_key_prefixes[k], 4) == 0;
    }
    if (!pre) {
        return false;
    }
    for (size_t k = 4; k < 20; k++) {
        unsigned char c = t->p[i + k];
        if (!is_upper(c) && !is_digit(c)) {
            return false;
        }
    }
    if (i + 20 < t->len && is_alnum(t->p[i + 20])) {
        return false;
    }
    *re = i + 20;
    return true;
}

enum scan { SCAN_NONE, SCAN_SECRET, SCAN_CLEAN };

/* PEM blocks: a private key's body (RSA, EC, OPENSSH, ENCRYPTED, PGP ... BLOCK) goes,
 * from its BEGIN line to the next "-----" (its END line) or to the end of a text cut
 * short; a certificate's or a public key's is not secret and is skipped whole. */
static enum scan match_pem(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
{
    if (!starts_with(t, i, "-----BEGIN ", 11)) {
        return SCAN_NONE;
    }
    size_t j = i + 11, k = j;
    while (k < t->len && k - j < 48 && (is_upper(t->p[k]) || is_digit(t->p[k]) || t->p[k] == ' ')) {
        k++;
    }
    if (!starts_with(t, k, "-----", 5)) {
        return SCAN_NONE;
    }
    struct scrub_text label = {t->p + j, k - j};
    bool key = false;
    for (size_t n = 11; n <= 17 && !key; n += 6) { /* "PRIVATE KEY", "PRIVATE KEY BLOCK" */
        key = label.len >= n && memcmp(label.p + label.len - n, "PRIVATE KEY BLOCK", n) == 0;
    }
    size_t b = k + 5;
    const unsigned char *end = memmem(t->p + b, t->len - b, "-----", 5);
    size_t e = end ? (size_t)(end - t->p) : t->len;
    if (e == b) {
        return SCAN_NONE;
    }
    *rs = b;
    *re = e;
    return key ? SCAN_SECRET : SCAN_CLEAN;
}

/* Public keys say so in their first bytes: an SSH public key's base64 starts with its
 * encoded type ("\0\0\0\x0bssh-ed25519" is AAAAC3NzaC1lZDI1NTE5), an X.509 public key's
 * with its algorithm (EC P-256, Ed25519, or RSA's "rsaEncryption" then a BIT STRING, where
 * a PKCS#8 private key has an OCTET STRING: ...AASC). Such a run is public, skipped whole. */
static bool is_public_key(const struct scrub_text *t, size_t i)
{
    static const char *const starts[] = {
        "AAAAB3NzaC1yc2E",
        "AAAAC3NzaC1lZDI1NTE5",
        "AAAAE2VjZHNhLXNoYTItbmlzdHA",
        "AAAAB3NzaC1kc3M",
        "AAAAGnNrLXNzaC1lZDI1NTE5",
        "AAAAInNrLWVjZHNhLXNoYTItbmlzdHA",
        "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE",
        "MCowBQYDK2VwAyEA",
    };
    for (size_t k = 0; k < ARRAY_SIZE(starts); k++) {
        if (starts_with(t, i, starts[k], strlen(starts[k]))) {
            return true;
        }
    }
    return starts_with(t, i, "MII", 3) && t->len - i > 6 &&
           starts_with(t, i + 6, "ANBgkqhkiG9w0BAQEFAAOC", 22);
}

static double entropy(const unsigned char *p, size_t n)
{
    uint32_t counts[256] = {0};
    for (size_t i = 0; i < n; i++) {
        counts[p[i]]++;
    }
    double h = 0;
    for (size_t c = 0; c < 256; c++) {
        if (counts[c]) {
            double f = (double)counts[c] / (double)n;
            h -= f * log2(f);
        }
    }
    return h;
}

/* A long random-looking run of base64: upper case, lower case and digits, character
 * entropy close to that of random text, and not made of words. Hex alone never is: a
 * 40-hex commit id or a sha256 digest looks exactly like a hex key, so hex secrets are
 * recognised only by their context (a secret-named key or option, a scheme, a header). */
static bool high_entropy(const unsigned char *p, size_t n)
{
    if (n < SCRUB_ENTROPY_MIN_LEN) {
        return false;
    }
    bool hex = true, up = false, low = false, dig = false;
    for (size_t i = 0; i < n; i++) {
        hex = hex && is_hex(p[i]);
        up = up || is_upper(p[i]);
        low = low || is_lower(p[i]);
        dig = dig || is_digit(p[i]);
    }
    if (hex || !up || !low || !dig || entropy(p, n) < 4.0) {
        return false;
    }
    /* Identifiers (getUserAccountById2024) are as varied as random text but made of
     * words: in random base64, runs of three or more lower-case letters cover less than
     * half of the characters (99.9% of the time at 32 characters). */
    size_t in_words = 0, run = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && is_lower(p[i])) {
            run++;
            continue;
        }
        if (run >= 3) {
            in_words += run;
        }
        run = 0;
    }
    return in_words * 2 < n;
}

/* Base64 with its padding ('=' only at the end, so NAME=value splits). */
static size_t span_run(const struct scrub_text *t, size_t i, uint8_t cls)
{
    size_t j = span(t, i, cls);
    for (int pad = 0; pad < 3 && j < t->len && t->p[j] == '='; pad++) {
        j++;
    }
    return j;
}

/* A digest named by its algorithm is a checksum, not a secret: sha256:<hex> (docker, pip
 * --hash), sha512-<base64> (npm integrity), h1:<base64> (go.sum). */
static bool digest_label(const struct scrub_text *t, size_t i)
{
    static const char *const algs[] = {"sha1", "sha224", "sha256", "sha384", "sha512", "md5", "h1"};
    if (i < 3 || !(t->p[i - 1] == ':' || t->p[i - 1] == '-' || t->p[i - 1] == '=')) {
        return false;
    }
    for (size_t k = 0; k < ARRAY_SIZE(algs); k++) {
        size_t n = strlen(algs[k]);
        if (i - 1 >= n && memcmp(t->p + i - 1 - n, algs[k], n) == 0 &&
            (i - 1 == n || !is_alnum(t->p[i - 2 - n]))) {
            return true;
        }
    }
    return false;
}

/* A run of base64 characters (with '/' and without, since paths split at '/'). A run after
 * a digest label, one that carries its label (sha512-...) and a public key are skipped
 * whole. */
static enum scan match_entropy(const struct scrub_text *t, size_t i, size_t *re)
{
    if (t->p[i] != '/' && in_class(t->p[i], C_RUN) && boundary(t, i, C_RUN)) {
        size_t j = span_run(t, i, C_RUN);
        if (j - i < SCRUB_ENTROPY_MIN_LEN) {
            return SCAN_NONE; /* nor is a segment of it long enough */
        }
        size_t sri = starts_with(t, i, "sha", 3) ? span(t, i, C_ALNUM) : i;
        if (digest_label(t, i) || (sri < j && t->p[sri] == '-' && digest_label(t, sri + 1)) ||
            is_public_key(t, i)) {
            *re = j;
            return SCAN_CLEAN;
        }
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return SCAN_SECRET;
        }
    }
    if (in_class(t->p[i], C_SEG) && boundary(t, i, C_SEG)) {
        size_t j = span_run(t, i, C_SEG);
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return SCAN_SECRET;
        }
    }
    return SCAN_NONE;
}

static enum scan match_at(const struct scrub *s, const struct scrub_text *t, size_t i, size_t *rs,
                          size_t *re)
{
    *rs = i;
    if (match_registered(s, t, i, re)) {
        return SCAN_SECRET;
    }
    if (scrub_context_userinfo(t, i, rs, re)) {
        return SCAN_SECRET;
    }
    /* Every other matcher starts at a word's first character: inside a word of letters
     * and digits only registered secrets and "://" can begin. */
    if (i > 0 && is_alnum(t->p[i]) && is_alnum(t->p[i - 1])) {
        return SCAN_NONE;
    }
    *rs = i;
    enum scan pem = match_pem(t, i, rs, re);
    if (pem != SCAN_NONE) {
        return pem;
    }
    *rs = i;
    if ((boundary(t, i, C_ALNUM) && (match_prefix(s, t, i, re) || match_aws_key_id(t, i, re))) ||
        match_jwt(t, i, re)) {
        return SCAN_SECRET;
    }
    if (scrub_context_match(t, i, rs, re)) {
        return SCAN_SECRET;
    }
    *rs = i;
    return match_entropy(t, i, re);
}

/* A registered secret that begins in (i, end): in what a match passes over without
 * redacting it (a key's name before its value, a digest skipped whole). Registered secrets
 * win over every pattern. */
static bool registered_within(const struct scrub *s, const struct scrub_text *t, size_t i,
                              size_t end, size_t *rs, size_t *re)
{
    if (!s || s->n_secrets == 0) {
        return false;
    }
    for (size_t k = i + 1; k < end; k++) {
        if (match_registered(s, t, k, re)) {
            *rs = k;
            return true;
        }
    }
    return false;
}

static void scrub_into(const struct scrub *s, const char *text, size_t len, struct buf *o,
                       size_t *ret_count)
{
    struct scrub_text t = {(const unsigned char *)text, len};
    size_t copied = 0, count = 0, i = 0;
    while (i < len) {
        size_t rs, re;
        enum scan m = match_at(s, &t, i, &rs, &re);
        size_t passed = m == SCAN_SECRET ? rs : m == SCAN_CLEAN ? re : i;
        if (passed > i + 1 && registered_within(s, &t, i, passed, &rs, &re)) {
            m = SCAN_SECRET;
        }
        if (m == SCAN_SECRET && re > rs) {
            out_put(o, text + copied, rs - copied);
            out_put(o, SCRUB_MARK, sizeof(SCRUB_MARK) - 1);
            copied = re;
            i = re;
            count++;
            continue;
        }
        i = m == SCAN_CLEAN && re > i ? re : i + 1;
    }
    out_put(o, text + copied, len - copied);
    if (ret_count) {
        *ret_count = count;
    }
}

char *scrub_dup(const struct scrub *s, const char *text, size_t len, size_t *ret_len,
                size_t *ret_count)
{
    struct buf o = BUF_INIT;
    scrub_into(s, text, len, &o, ret_count);
    return buf_steal(&o, ret_len);
}

const char *scrub_copy(const struct scrub *s, const char *text, size_t len, char *buf, size_t size)
{
    size_t n = 0;
    scoped_free char *c = scrub_dup(s, text, len, &n, NULL);
    if (n >= size) {
        n = size - 1;
    }
    memcpy(buf, c, n);
    buf[n] = '\0';
    return buf;
}
