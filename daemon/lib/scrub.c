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
    {"xoxr-", 5, 10},    {"xoxs-", 5, 10},    {"xapp-", 5, 20},    {"AIza", 4, 30},     {"ya29.", 5, 20},
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

/* The words of a name: runs of letters and digits, also split where a lower-case letter
 * meets an upper-case one (accessToken), upper-cased. A name of more than WORDS_MAX words
 * keeps its first ones and its last, which decides (meta_words). */
#define WORDS_MAX 16

struct words {
    char up[SCRUB_NAME_MAX];
    size_t start[WORDS_MAX];
    size_t len[WORDS_MAX];
    size_t n;
};

static void words_split(const char *name, size_t len, struct words *w)
{
    size_t n = len < sizeof(w->up) ? len : sizeof(w->up);
    w->n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = i < n ? (unsigned char)name[i] : 0;
        bool in = i < n && is_alnum(c);
        bool camel = in && i > start && is_upper(c) && is_lower((unsigned char)name[i - 1]);
        if ((!in || camel) && i > start) {
            size_t k = w->n < WORDS_MAX ? w->n++ : WORDS_MAX - 1;
            w->start[k] = start;
            w->len[k] = i - start;
        }
        if (!in) {
            start = i + 1;
        } else if (camel) {
            start = i;
        }
        if (i < n) {
            w->up[i] = (char)to_upper(c);
        }
    }
}

static bool word_is(const struct words *w, size_t k, const char *up)
{
    size_t m = strlen(up);
    return w->len[k] == m && memcmp(w->up + w->start[k], up, m) == 0;
}

static bool word_in(const struct words *w, size_t k, const char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (word_is(w, k, set[i])) {
            return true;
        }
    }
    return false;
}

/* Words that name a secret. Whole words only: AUTHOR, TOKENIZERS and KEYBOARD are not. */
static const char *const secret_words[] = {
    "TOKEN",    "TOKENS",        "SECRET",  "SECRETS", "PASSWORD", "PASSWORDS",
    "PASSWD",   "PASSPHRASE",    "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH",
    "AUTHORIZATION", "COOKIE",   "COOKIES", "SESSION", "SESSIONID", "PRIVATE",
    "SIGNATURE", "KEY",          "PASS",    "PW",      "JWT",
};
/* Compounds written as one word: APITOKEN, CLIENTSECRET, DBPASSWORD, SIGNINGKEY, OAUTH. */
static const char *const secret_suffixes[] = {"TOKEN",      "SECRET", "PASSWORD", "PASSWD",
                                              "PASSPHRASE", "KEY",    "AUTH"};
/* A last word that makes the name one of something about a secret, whose value is not the
 * secret: --secret-id, token_ttl, TOKEN_TYPE, --password-stdin, --token-file,
 * credential.helper, auth.enabled, --key-name. */
static const char *const meta_words[] = {
    "ID",      "IDS",      "NAME",     "NAMES",    "FILE",       "STDIN",     "ENV",
    "LENGTH",  "LEN",      "TTL",      "TIMEOUT",  "EXPIRY",     "EXPIRES",   "EXPIRATION",
    "AGE",     "TYPE",     "KIND",     "FORMAT",   "SIZE",       "BITS",      "COUNT",
    "HELPER",  "MODE",     "URL",      "URI",      "ENDPOINT",   "HOST",      "PORT",
    "METHOD",  "PROVIDER", "HEADER",   "ALGORITHM", "ALG",       "REGION",    "VERSION",
    "LIMIT",   "POLICY",   "ENABLED",  "DISABLED", "REQUIRED",   "PROXY",     "FIELD",
    "PREFIX",  "SCOPE",    "SCOPES",   "ISSUER",   "AUDIENCE",   "ROTATION",  "BACKEND",
};

static bool word_is_secret(const struct words *w, size_t k)
{
    if (word_in(w, k, secret_words, ARRAY_SIZE(secret_words))) {
        return true;
    }
    size_t n = w->len[k];
    const char *p = w->up + w->start[k];
    for (size_t i = 0; i < ARRAY_SIZE(secret_suffixes); i++) {
        size_t m = strlen(secret_suffixes[i]);
        if (n > m && memcmp(p + n - m, secret_suffixes[i], m) == 0) {
            return true;
        }
    }
    /* PWD alone is the working directory, not a password; SIG is a signature only as the
     * last word (sig=, --sig, but not --sig-proxy). */
    if (word_is(w, k, "PWD")) {
        return w->n > 1;
    }
    return word_is(w, k, "SIG") && k == w->n - 1;
}

bool scrub_name_is_secret(const char *name, size_t len)
{
    struct words w;
    words_split(name, len, &w);
    if (w.n == 0) {
        return false;
    }
    bool secret = false, session = false;
    for (size_t k = 0; k < w.n; k++) {
        secret = secret || word_is_secret(&w, k);
        session = session || word_is(&w, k, "SESSION") || word_is(&w, k, "COOKIE");
    }
    if (!secret) {
        return false;
    }
    /* A session's or a cookie's id is the credential itself. */
    size_t last = w.n - 1;
    if (word_is(&w, last, "ID") && session) {
        return true;
    }
    return !word_in(&w, last, meta_words, ARRAY_SIZE(meta_words));
}

bool scrub_arg_takes_secret(const char *arg, size_t len)
{
    if (len < 2 || arg[0] != '-' || memchr(arg, '=', len)) {
        return false;
    }
    size_t skip = arg[1] == '-' ? 2 : 1;
    /* --no-auth, --no-password: flags that turn something off take no value. */
    if (skip == 2 && len > 5 && memcmp(arg, "--no-", 5) == 0) {
        return false;
    }
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

static bool eq_nocase(const unsigned char *p, size_t n, const char *up)
{
    size_t m = strlen(up);
    if (n != m) {
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        if (to_upper(p[k]) != (unsigned char)up[k]) {
            return false;
        }
    }
    return true;
}

static bool starts_with_nocase(const struct text *t, size_t i, const char *up)
{
    size_t n = strlen(up);
    return t->len - i >= n && eq_nocase(t->p + i, n, up);
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
        if (v[k].p[0] == (char)t->p[i] && starts_with(t, i, v[k].p, v[k].len)) {
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

/* PEM private keys (RSA, EC, OPENSSH, ENCRYPTED, PGP ... BLOCK): the body between the
 * BEGIN and END lines, or to the end of a text cut short. Certificates and public keys
 * are not secret and stay. */
static bool match_pem(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    if (!starts_with(t, i, "-----BEGIN ", 11)) {
        return false;
    }
    size_t j = i + 11, k = j;
    while (k < t->len && k - j < 48 && (is_upper(t->p[k]) || is_digit(t->p[k]) || t->p[k] == ' ')) {
        k++;
    }
    if (!starts_with(t, k, "-----", 5)) {
        return false;
    }
    struct text label = {t->p + j, k - j};
    bool key = false;
    for (size_t n = 11; n <= 17 && !key; n += 6) { /* "PRIVATE KEY", "PRIVATE KEY BLOCK" */
        key = label.len >= n && memcmp(label.p + label.len - n, "PRIVATE KEY BLOCK", n) == 0;
    }
    if (!key) {
        return false;
    }
    size_t b = k + 5;
    const unsigned char *end = memmem(t->p + b, t->len - b, "-----END ", 9);
    size_t e = end ? (size_t)(end - t->p) : t->len;
    if (e == b) {
        return false;
    }
    *rs = b;
    *re = e;
    return true;
}

static bool is_cred_char(unsigned char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' ||
           c == '-' || c == ':' || c == '%';
}

/* Whether a word reads as a word of prose (letters, at most a capital first), not as a
 * credential: "bearer of", "Basic Authentication". */
static bool is_plain_word(const unsigned char *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (!is_lower(p[k]) && !(k == 0 && is_upper(p[k]))) {
            return false;
        }
    }
    return n > 0;
}

/* "Bearer TOKEN", "Basic BASE64" in free text: a credential of at least 8 characters after
 * the scheme word. A header names its scheme too (match_key_value keeps the word). */
static bool match_scheme(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    static const char *const schemes[] = {"BEARER", "BASIC"};
    unsigned char c = to_upper(t->p[i]);
    if (c != 'B') {
        return false;
    }
    for (size_t k = 0; k < ARRAY_SIZE(schemes); k++) {
        if (!starts_with_nocase(t, i, schemes[k])) {
            continue;
        }
        size_t j = i + strlen(schemes[k]);
        if (j >= t->len || !is_space(t->p[j])) {
            continue;
        }
        while (j < t->len && is_space(t->p[j])) {
            j++;
        }
        size_t e = span(t, j, is_cred_char);
        if (e - j >= 8 && !is_plain_word(t->p + j, e - j)) {
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

static bool is_path_char(unsigned char c)
{
    return is_alnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == '~' || c == '+';
}

/* A file path given where a secret could be (--token-file, PRIVATE_KEY_PATH, a backend's
 * key): absolute or relative with at least two slashes, or ending in a file extension. */
static bool value_is_path(const unsigned char *p, size_t n)
{
    static const char *const exts[] = {"pem",  "key",  "crt",     "cer",    "der",        "p12",
                                       "pfx",  "jks",  "json",    "yaml",   "yml",        "toml",
                                       "ini",  "conf", "cfg",     "env",    "txt",        "gpg",
                                       "asc",  "pub",  "tfstate", "tfvars", "properties", "kdbx"};
    size_t slashes = 0, dot = 0;
    for (size_t k = 0; k < n; k++) {
        if (!is_path_char(p[k])) {
            return false;
        }
        slashes += p[k] == '/';
        dot = p[k] == '.' ? k + 1 : dot;
    }
    if ((p[0] == '/' || p[0] == '.' || p[0] == '~') && slashes >= 2) {
        return true;
    }
    if (dot < 2) {
        return false;
    }
    for (size_t k = 0; k < ARRAY_SIZE(exts); k++) {
        if (n - dot == strlen(exts[k]) && memcmp(p + dot, exts[k], n - dot) == 0) {
            return true;
        }
    }
    return false;
}

/* A value that refers to a secret or describes one without being it: a shell reference
 * ($TOKEN, ${TOKEN}, $(gh auth token)), a template ({{ .Values.password }}), a boolean or
 * null, a jq field path (.status.token), a file path. */
static bool value_is_reference(const unsigned char *p, size_t n)
{
    static const char *const literals[] = {"TRUE", "FALSE", "YES", "NO",   "ON",
                                           "OFF",  "NULL",  "NONE", "NIL"};
    if (n == 0 || p[0] == '$' || (n >= 2 && p[0] == '{' && p[1] == '{')) {
        return true;
    }
    for (size_t k = 0; k < ARRAY_SIZE(literals); k++) {
        if (eq_nocase(p, n, literals[k])) {
            return true;
        }
    }
    if (p[0] == '.' && n >= 2 && (is_lower(p[1]) || is_upper(p[1]))) {
        size_t k = 1;
        while (k < n && (is_key_char(p[k]) || p[k] == '[' || p[k] == ']')) {
            k++;
        }
        if (k == n) {
            return true;
        }
    }
    return value_is_path(p, n);
}

/* HTTP header names, whose value runs to the end of the line and may follow the colon with
 * no space: Authorization, Cookie and hyphenated ones (X-Api-Key, PRIVATE-TOKEN). */
static bool is_header_name(const unsigned char *p, size_t n)
{
    if (eq_nocase(p, n, "AUTHORIZATION") || eq_nocase(p, n, "COOKIE")) {
        return true;
    }
    return n > 2 && p[0] != '-' && memchr(p, '-', n) && !memchr(p, '.', n) && !memchr(p, '_', n);
}

/* After "NAME: ", a word of letters followed by more words is a message ("passwd:
 * Authentication token manipulation error", "auth: rotate session keys"), not a value. */
static bool is_prose(const struct text *t, size_t j, size_t e)
{
    if (!is_plain_word(t->p + j, e - j) || e >= t->len || t->p[e] != ' ') {
        return false;
    }
    return e + 1 < t->len && (is_lower(t->p[e + 1]) || is_upper(t->p[e + 1]));
}

/* The end of a quoted value starting at j (after its quote q), escapes skipped. */
static size_t quoted_end(const struct text *t, size_t j, unsigned char q)
{
    size_t e = j;
    while (e < t->len && t->p[e] != q) {
        e += (t->p[e] == '\\' && e + 1 < t->len) ? 2 : 1;
    }
    return e > t->len ? t->len : e;
}

/* NAME=value, NAME: value, "NAME": "value" where NAME looks secret (scrub_name_is_secret).
 * Not keys: a path's last segment or a regex's word (/etc/passwd: ..., s/^token: .*),
 * comparisons (a == b), and NAME:value with nothing between (npm run auth:login,
 * session:42, tests/test_auth.py::test_login), except for headers and openssl's pass:. */
static bool match_key_value(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    const unsigned char *p = t->p;
    if (!is_key_char(p[i]) || !boundary(t, i, is_key_char)) {
        return false;
    }
    if (i > 0 && (p[i - 1] == '/' || p[i - 1] == '^' || p[i - 1] == '\\')) {
        return false;
    }
    size_t k = span(t, i, is_key_char);
    if (k - i > SCRUB_KEY_MAX) {
        return false;
    }
    size_t j = k;
    bool quoted_name = j < t->len && (p[j] == '"' || p[j] == '\'');
    j += quoted_name;
    while (j < t->len && is_space(p[j])) {
        j++;
    }
    if (j >= t->len || (p[j] != '=' && p[j] != ':')) {
        return false;
    }
    unsigned char sep = p[j++];
    if (j < t->len && ((sep == '=' && p[j] == '=') || (sep == ':' && (p[j] == '/' || p[j] == ':')))) {
        return false; /* a == b; scheme:// (the userinfo matcher's); a::b */
    }
    bool header = sep == ':' && !quoted_name && is_header_name(p + i, k - i);
    if (sep == ':' && j < t->len && !is_space(p[j]) && p[j] != '"' && p[j] != '\'' && !header &&
        !(k - i == 4 && memcmp(p + i, "pass", 4) == 0)) {
        return false;
    }
    if (!scrub_name_is_secret((const char *)p + i, k - i)) {
        return false;
    }
    while (j < t->len && is_space(p[j])) {
        j++;
    }
    unsigned char q = 0;
    if (j < t->len && (p[j] == '"' || p[j] == '\'')) {
        q = p[j++];
    }
    /* Keep an authorization scheme word visible, redact its credential. */
    static const char *const schemes[] = {"BEARER ",    "BASIC ", "DIGEST ",          "TOKEN ",
                                          "NEGOTIATE ", "NTLM ",  "AWS4-HMAC-SHA256 "};
    for (size_t s = 0; s < ARRAY_SIZE(schemes); s++) {
        if (starts_with_nocase(t, j, schemes[s])) {
            j += strlen(schemes[s]);
            while (j < t->len && is_space(p[j])) {
                j++;
            }
            break;
        }
    }
    /* 'Authorization: Bearer x' inside quotes ends at the quote that opened it. */
    unsigned char kq = 0;
    if (i > 0 && (p[i - 1] == '"' || p[i - 1] == '\'') && (k >= t->len || p[k] != p[i - 1])) {
        kq = p[i - 1];
    }
    size_t e = j;
    if (q) {
        e = quoted_end(t, j, q);
    } else if (header) {
        /* A header's value runs to the end of its line. */
        while (e < t->len && p[e] != '\n' && p[e] != '\r' && p[e] != kq) {
            e++;
        }
    } else {
        while (e < t->len && !ends_value(p[e])) {
            e++;
        }
        if (sep == ':' && is_prose(t, j, e)) {
            return false;
        }
    }
    if (e == j || value_is_reference(p + j, e - j)) {
        return false;
    }
    *rs = j;
    *re = e;
    return true;
}

/* "--password VALUE" in text: the word after an option that takes a secret, the rule
 * task_audit applies to separate arguments (scrub_arg_takes_secret). */
static bool match_option(const struct text *t, size_t i, size_t *rs, size_t *re)
{
    const unsigned char *p = t->p;
    if (p[i] != '-' || (i > 0 && !is_space(p[i - 1]) && p[i - 1] != '"' && p[i - 1] != '\'')) {
        return false;
    }
    size_t k = i;
    while (k < t->len && !is_space(p[k]) && !ends_value(p[k]) && p[k] != '=') {
        k++;
    }
    if (k >= t->len || !is_space(p[k]) ||
        !scrub_arg_takes_secret((const char *)p + i, k - i)) {
        return false;
    }
    size_t j = k;
    while (j < t->len && is_space(p[j])) {
        j++;
    }
    if (j >= t->len) {
        return false;
    }
    size_t e;
    if (p[j] == '"' || p[j] == '\'') {
        unsigned char q = p[j++];
        e = quoted_end(t, j, q);
    } else {
        /* Another option or a shell operator is not the value. */
        if (p[j] == '-' || p[j] == '|' || p[j] == '(' || ends_value(p[j])) {
            return false;
        }
        e = j;
        while (e < t->len && !is_space(p[e]) && p[e] != '"' && p[e] != '\'' && p[e] != ';' &&
               p[e] != '|' && p[e] != '&' && p[e] != ')') {
            e++;
        }
    }
    if (e == j || value_is_reference(p + j, e - j)) {
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
            if (!colon || k == colon + 1 || t->p[colon + 1] == '$') {
                return false; /* no password, or a reference to one: ${PGPASSWORD} */
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
static size_t span_run(const struct text *t, size_t i, bool (*in_class)(unsigned char))
{
    size_t j = span(t, i, in_class);
    for (int pad = 0; pad < 3 && j < t->len && t->p[j] == '='; pad++) {
        j++;
    }
    return j;
}

/* A digest named by its algorithm is a checksum, not a secret: sha256:<hex> (docker, pip
 * --hash), sha512-<base64> (npm integrity), h1:<base64> (go.sum). */
static bool digest_label(const struct text *t, size_t i)
{
    static const char *const labels[] = {"sha1:",   "sha224:", "sha256:", "sha384:", "sha512:",
                                         "md5:",    "h1:",     "sha1-",   "sha256-", "sha384-",
                                         "sha512-", "sha256=", "sha512="};
    for (size_t k = 0; k < ARRAY_SIZE(labels); k++) {
        size_t n = strlen(labels[k]);
        if (i >= n && memcmp(t->p + i - n, labels[k], n) == 0 &&
            (i == n || !is_alnum(t->p[i - n - 1]))) {
            return true;
        }
    }
    return false;
}

static bool is_run(unsigned char c)
{
    return is_b64url(c) || c == '+' || c == '/';
}

static bool is_seg(unsigned char c)
{
    return is_b64url(c) || c == '+';
}

enum scan { SCAN_NONE, SCAN_SECRET, SCAN_CLEAN };

/* A run of base64 characters (with '/' and without, since paths split at '/'). A run after
 * a digest label, or one that carries its label (sha512-...), is skipped whole. */
static enum scan match_entropy(const struct text *t, size_t i, size_t *re)
{
    if (t->p[i] != '/' && is_run(t->p[i]) && boundary(t, i, is_run)) {
        size_t j = span_run(t, i, is_run);
        size_t sri = starts_with(t, i, "sha", 3) ? span(t, i, is_alnum) : i;
        if (digest_label(t, i) || (sri < j && t->p[sri] == '-' && digest_label(t, sri + 1))) {
            *re = j;
            return SCAN_CLEAN;
        }
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return SCAN_SECRET;
        }
    }
    if (is_seg(t->p[i]) && boundary(t, i, is_seg)) {
        size_t j = span_run(t, i, is_seg);
        if (high_entropy(t->p + i, j - i)) {
            *re = j;
            return SCAN_SECRET;
        }
    }
    return SCAN_NONE;
}

static enum scan match_at(const struct scrub *s, const struct text *t, size_t i, size_t *rs,
                          size_t *re)
{
    *rs = i;
    if (match_registered(s, t, i, re)) {
        return SCAN_SECRET;
    }
    if (match_userinfo(t, i, rs, re)) {
        return SCAN_SECRET;
    }
    /* Every other matcher starts at a word's first character: inside a word of letters
     * and digits only registered secrets and "://" can begin. */
    if (i > 0 && is_alnum(t->p[i]) && is_alnum(t->p[i - 1])) {
        return SCAN_NONE;
    }
    *rs = i;
    if (match_pem(t, i, rs, re) || match_option(t, i, rs, re)) {
        return SCAN_SECRET;
    }
    *rs = i;
    if ((boundary(t, i, is_alnum) && (match_prefix(s, t, i, re) || match_aws_key_id(t, i, re))) ||
        match_jwt(t, i, re)) {
        return SCAN_SECRET;
    }
    if ((boundary(t, i, is_alnum) && match_scheme(t, i, rs, re)) ||
        match_key_value(t, i, rs, re)) {
        return SCAN_SECRET;
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
        enum scan m = match_at(s, &t, i, &rs, &re);
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
