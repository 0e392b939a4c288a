/* SPDX-License-Identifier: MIT */
/* Secret scrubbing for the audit trail and the log: one left-to-right pass over the text
 * that tries each matcher at each position and replaces what matches by SCRUB_MARK. It
 * owns the registry of secrets other modules register (wiped when forgotten); it never
 * stores or logs what it scrubs. */
#include "lib/scrub.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/buf.h"
#include "lib/util.h"

#define SCRUB_SECRET_MAX 4096
#define SCRUB_PREFIX_MAX 32
#define SCRUB_NAME_MAX 256
#define SCRUB_KEY_MAX 64 /* longest NAME of a NAME=value pair */
#define SCRUB_USERINFO_MAX 256

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
};

/* Well-known token formats: prefix and how many token characters must follow. */
static const struct prefix builtin_prefixes[] = {
    {"sk-", 3, 16},      {"sk_live_", 8, 16}, {"sk_test_", 8, 16}, {"rk_live_", 8, 16},
    {"rk_test_", 8, 16}, {"whsec_", 6, 16},   {"ghp_", 4, 30},     {"gho_", 4, 30},
    {"ghu_", 4, 30},     {"ghs_", 4, 30},     {"ghr_", 4, 30},     {"github_pat_", 11, 30},
    {"glpat-", 6, 20},   {"xoxb-", 5, 10},    {"xoxp-", 5, 10},    {"xoxa-", 5, 10},
    {"xoxr-", 5, 10},    {"xoxs-", 5, 10},    {"AIza", 4, 30},     {"ya29.", 5, 20},
    {"npm_", 4, 30},     {"pypi-", 5, 30},    {"hf_", 3, 30},      {"dop_v1_", 7, 40},
};

static const char *const aws_key_prefixes[] = {"AKIA", "ASIA", "AIDA", "AROA", "AGPA",
                                               "ANPA", "ANVA", "AIPA", "ABIA", "ACCA"};

/* Uncapped: the caller bounds text, and each match (at least one byte) becomes one
 * SCRUB_MARK. */
static void out_put(struct buf *o, const char *s, size_t n)
{
    (void)buf_append(o, s, n);
}

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static bool is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static unsigned char to_upper(unsigned char c)
{
    return is_lower(c) ? (unsigned char)(c - 'a' + 'A') : c;
}

/* Characters of tokens after a known prefix, of JWT segments and of NAME in NAME=value. */
static bool is_token(unsigned char c)
{
    return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static bool is_b64url(unsigned char c)
{
    return is_alnum(c) || c == '_' || c == '-';
}

/* Characters of an entropy run, with and without '/' (paths split at '/'). */
static bool is_run(unsigned char c)
{
    return is_alnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-';
}

static bool is_seg(unsigned char c)
{
    return is_run(c) && c != '/';
}

static bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t';
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
    return 0;
}

/* Case-insensitive search of needle (upper case) in the upper-cased name. */
static bool contains(const char *up, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++) {
        if (memcmp(up + i, needle, m) == 0) {
            return true;
        }
    }
    return false;
}

static bool word_is_secret(const char *w, size_t n, bool whole)
{
    if (n == 3 && memcmp(w, "KEY", 3) == 0) {
        return true;
    }
    if (n > 3 && memcmp(w + n - 3, "KEY", 3) == 0) {
        return true; /* APIKEY, PRIVKEY, SIGNINGKEY */
    }
    if ((n == 4 && memcmp(w, "PASS", 4) == 0) || (n == 2 && memcmp(w, "PW", 2) == 0)) {
        return true;
    }
    /* PWD alone is the working directory, not a password. */
    return n == 3 && memcmp(w, "PWD", 3) == 0 && !whole;
}

bool scrub_name_is_secret(const char *name, size_t len)
{
    static const char *const needles[] = {
        "TOKEN",  "SECRET",  "PASSWORD", "PASSWD",    "PASSPHRASE", "CREDENTIAL", "AUTH",
        "COOKIE", "SESSION", "PRIVATE",  "SIGNATURE", "APIKEY",     "ACCESSKEY",
    };
    char up[SCRUB_NAME_MAX];
    size_t n = len < sizeof(up) ? len : sizeof(up);
    for (size_t i = 0; i < n; i++) {
        up[i] = (char)to_upper((unsigned char)name[i]);
    }
    for (size_t i = 0; i < ARRAY_SIZE(needles); i++) {
        if (contains(up, n, needles[i])) {
            return true;
        }
    }
    /* Words: runs of letters and digits. */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || !is_alnum((unsigned char)up[i])) {
            if (i > start && word_is_secret(up + start, i - start, start == 0 && i == n)) {
                return true;
            }
            start = i + 1;
        }
    }
    return false;
}

bool scrub_arg_takes_secret(const char *arg, size_t len)
{
    if (len < 2 || arg[0] != '-' || memchr(arg, '=', len)) {
        return false;
    }
    size_t skip = arg[1] == '-' ? 2 : 1;
    return len > skip && scrub_name_is_secret(arg + skip, len - skip);
}

/* ---- matchers: each looks at position i and, on a match, sets [*rs, *re) to redact ---- */

struct text {
    const unsigned char *p;
    size_t len;
};

static bool boundary(const struct text *t, size_t i, bool (*in_class)(unsigned char))
{
    return i == 0 || !in_class(t->p[i - 1]);
}

static size_t span(const struct text *t, size_t i, bool (*in_class)(unsigned char))
{
    size_t j = i;
    while (j < t->len && in_class(t->p[j])) {
        j++;
    }
    return j;
}

static bool starts_with(const struct text *t, size_t i, const char *s, size_t n)
{
    return t->len - i >= n && memcmp(t->p + i, s, n) == 0;
}

static bool starts_with_nocase(const struct text *t, size_t i, const char *up)
{
    size_t n = strlen(up);
    if (t->len - i < n) {
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        if (to_upper(t->p[i + k]) != (unsigned char)up[k]) {
            return false;
        }
    }
    return true;
}

static bool match_registered(const struct scrub *s, const struct text *t, size_t i, size_t *re)
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

static bool match_prefix_list(const struct prefix *v, size_t n, const struct text *t, size_t i,
                              size_t *re)
{
    for (size_t k = 0; k < n; k++) {
        if (starts_with(t, i, v[k].p, v[k].len)) {
            size_t j = span(t, i + v[k].len, is_token);
            if (j - (i + v[k].len) >= v[k].min_rest) {
                *re = j;
                return true;
            }
        }
    }
    return false;
}

static bool match_prefix(const struct scrub *s, const struct text *t, size_t i, size_t *re)
{
    if (!boundary(t, i, is_alnum)) {
        return false;
    }
    if (s && match_prefix_list(s->prefixes, s->n_prefixes, t, i, re)) {
        return true;
    }
    return match_prefix_list(builtin_prefixes, ARRAY_SIZE(builtin_prefixes), t, i, re);
}

/* JWT (and JWE): base64url segments joined by dots, the first an encoded JSON object. A
 * single long "eyJ" segment is encoded JSON too (docker auths, service account keys). */
static bool match_jwt(const struct text *t, size_t i, size_t *re)
{
    if (!starts_with(t, i, "eyJ", 3) || !boundary(t, i, is_b64url)) {
        return false;
    }
    size_t j = span(t, i, is_b64url);
    if (j - i < 10) {
        return false;
    }
    size_t segs = 1;
    while (j < t->len && t->p[j] == '.') {
        size_t k = span(t, j + 1, is_b64url);
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

static bool match_aws_key_id(const struct text *t, size_t i, size_t *re)
{
    if (t->len - i < 20 || !boundary(t, i, is_alnum)) {
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

static bool is_cred_char(unsigned char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' ||
           c == '-' || c == ':' || c == '%';
}

/* "Bearer TOKEN", "Basic BASE64": the credential after the scheme. */
static bool match_scheme(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    static const struct {
        const char *up;
        size_t min;
    } schemes[] = {{"BEARER", 1}, {"BASIC", 8}};
    if (!boundary(t, i, is_alnum)) {
        return false;
    }
    for (size_t k = 0; k < ARRAY_SIZE(schemes); k++) {
        if (!starts_with_nocase(t, i, schemes[k].up)) {
            continue;
        }
        size_t j = i + strlen(schemes[k].up);
        if (j >= t->len || !is_space(t->p[j])) {
            continue;
        }
        while (j < t->len && is_space(t->p[j])) {
            j++;
        }
        size_t e = span(t, j, is_cred_char);
        if (e - j >= schemes[k].min) {
            *rs = j;
            *re = e;
            return true;
        }
    }
    return false;
}

static bool is_key_char(unsigned char c)
{
    return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static bool ends_value(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '&' || c == ';' || c == ',' ||
           c == '"' || c == '\'' || c == ')' || c == '}' || c == ']' || c == '>' || c == '<';
}

/* NAME=value, NAME: value, "NAME": "value" where NAME looks secret. */
static bool match_key_value(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    if (!is_key_char(t->p[i]) || !boundary(t, i, is_key_char)) {
        return false;
    }
    size_t k = span(t, i, is_key_char);
    if (k - i > SCRUB_KEY_MAX) {
        return false;
    }
    size_t j = k;
    if (j < t->len && (t->p[j] == '"' || t->p[j] == '\'')) {
        j++;
    }
    while (j < t->len && is_space(t->p[j])) {
        j++;
    }
    if (j >= t->len || (t->p[j] != '=' && t->p[j] != ':')) {
        return false;
    }
    unsigned char sep = t->p[j++];
    if (sep == ':' && j < t->len && t->p[j] == '/') {
        return false; /* scheme://: the userinfo matcher's business */
    }
    if (!scrub_name_is_secret((const char *)t->p + i, k - i)) {
        return false;
    }
    while (j < t->len && is_space(t->p[j])) {
        j++;
    }
    unsigned char q = 0;
    if (j < t->len && (t->p[j] == '"' || t->p[j] == '\'')) {
        q = t->p[j++];
    }
    /* Keep an authorization scheme word visible, redact its credential. */
    static const char *const schemes[] = {"BEARER ",    "BASIC ", "DIGEST ",          "TOKEN ",
                                          "NEGOTIATE ", "NTLM ",  "AWS4-HMAC-SHA256 "};
    for (size_t s = 0; s < ARRAY_SIZE(schemes); s++) {
        if (starts_with_nocase(t, j, schemes[s])) {
            j += strlen(schemes[s]);
            while (j < t->len && is_space(t->p[j])) {
                j++;
            }
            break;
        }
    }
    /* 'Authorization: Bearer x' inside quotes ends at the quote that opened it. */
    unsigned char kq = 0;
    if (i > 0 && (t->p[i - 1] == '"' || t->p[i - 1] == '\'') &&
        (k >= t->len || t->p[k] != t->p[i - 1])) {
        kq = t->p[i - 1];
    }
    size_t e = j;
    if (q) {
        while (e < t->len && t->p[e] != q) {
            e += (t->p[e] == '\\' && e + 1 < t->len) ? 2 : 1;
        }
        if (e > t->len) {
            e = t->len;
        }
    } else if (sep == ':') {
        /* A header or YAML value runs to the end of its line. */
        while (e < t->len && t->p[e] != '\n' && t->p[e] != '\r' && t->p[e] != kq) {
            e++;
        }
    } else {
        while (e < t->len && !ends_value(t->p[e])) {
            e++;
        }
    }
    if (e == j) {
        return false;
    }
    *rs = j;
    *re = e;
    return true;
}

/* scheme://user:PASSWORD@host */
static bool match_userinfo(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    if (!starts_with(t, i, "://", 3)) {
        return false;
    }
    size_t j = i + 3;
    size_t limit = t->len - j > SCRUB_USERINFO_MAX ? j + SCRUB_USERINFO_MAX : t->len;
    size_t colon = 0;
    for (size_t k = j; k < limit; k++) {
        unsigned char c = t->p[k];
        if (c == '/' || c == ' ' || c == '\t' || c == '\n' || c == '?' || c == '#') {
            return false;
        }
        if (c == ':' && !colon) {
            colon = k;
        } else if (c == '@') {
            if (!colon || k == colon + 1) {
                return false;
            }
            *rs = colon + 1;
            *re = k;
            return true;
        }
    }
    return false;
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

/* A long random-looking run: hex with letters and digits, or base64 with upper case, lower
 * case and digits whose character entropy is close to that of random text. */
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
    double h = entropy(p, n);
    if (hex) {
        return dig && (up || low) && h >= 3.0;
    }
    if (!up || !low || !dig || h < 4.0) {
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

static bool match_entropy(const struct text *t, size_t i, size_t *re)
{
    if (t->p[i] != '/' && is_run(t->p[i]) && boundary(t, i, is_run)) {
        size_t j = span(t, i, is_run);
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return true;
        }
    }
    if (is_seg(t->p[i]) && boundary(t, i, is_seg)) {
        size_t j = span(t, i, is_seg);
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return true;
        }
    }
    return false;
}

static bool match_at(const struct scrub *s, const struct text *t, size_t i, size_t *rs, size_t *re)
{
    *rs = i;
    if (match_registered(s, t, i, re) || match_prefix(s, t, i, re) || match_jwt(t, i, re) ||
        match_aws_key_id(t, i, re)) {
        return true;
    }
    if (match_scheme(t, i, rs, re) || match_key_value(t, i, rs, re) ||
        match_userinfo(t, i, rs, re)) {
        return true;
    }
    *rs = i;
    return match_entropy(t, i, re);
}

static void scrub_into(const struct scrub *s, const char *text, size_t len, struct buf *o,
                       size_t *ret_count)
{
    struct text t = {(const unsigned char *)text, len};
    size_t copied = 0, count = 0, i = 0;
    while (i < len) {
        size_t rs, re;
        if (match_at(s, &t, i, &rs, &re) && re > rs) {
            out_put(o, text + copied, rs - copied);
            out_put(o, SCRUB_MARK, sizeof(SCRUB_MARK) - 1);
            copied = re;
            i = re;
            count++;
            continue;
        }
        i++;
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
