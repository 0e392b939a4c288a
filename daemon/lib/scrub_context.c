/* SPDX-License-Identifier: MIT */
/* Secrets found by their context: the value of a key with a secret's name (NAME=value,
 * NAME: value, "NAME": "value"), the word after such an option (--password X), the
 * credential after an authorization scheme, a URL's password. It decides which names are
 * secret and which values only refer to a secret; it never matches a bare substring. */
#include "lib/scrub.h"

#include <string.h>

#include "lib/scrub_impl.h"
#include "lib/util.h"

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

/* Words that name a secret. Whole words only: AUTHOR, TOKENIZERS and KEYBOARD are not;
 * PRIVATE alone is a flag (gh repo create --private NAME); a private key has KEY. */
static const char *const secret_words[] = {
    "TOKEN",         "TOKENS",     "SECRET",     "SECRETS",     "PASSWORD",  "PASSWORDS",
    "PASSWD",        "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS",     "AUTH",
    "AUTHORIZATION", "COOKIE",     "COOKIES",    "SESSION",     "SESSIONID", "SIGNATURE",
    "KEY",           "PASS",       "PW",         "JWT",
};
/* Compounds written as one word: APITOKEN, CLIENTSECRET, DBPASSWORD, SIGNINGKEY, OAUTH. */
static const char *const secret_suffixes[] = {"TOKEN",      "SECRET", "PASSWORD", "PASSWD",
                                              "PASSPHRASE", "KEY",    "AUTH"};
/* A last word that makes the name one of something about a secret, whose value is not the
 * secret: --secret-id, token_ttl, TOKEN_TYPE, --password-stdin, --token-file,
 * credential.helper, auth.enabled, --key-name, --cookie-jar. Not HEADER: AUTH_HEADER holds
 * the credential. */
static const char *const meta_words[] = {
    "ID",    "IDS",      "NAME",    "NAMES",  "FILE",    "STDIN",      "ENV",      "LENGTH",
    "LEN",   "TTL",      "TIMEOUT", "EXPIRY", "EXPIRES", "EXPIRATION", "AGE",      "TYPE",
    "KIND",  "FORMAT",   "SIZE",    "BITS",   "COUNT",   "HELPER",     "MODE",     "URL",
    "URI",   "ENDPOINT", "HOST",    "PORT",   "METHOD",  "PROVIDER",   "JAR",      "ALGORITHM",
    "ALG",   "REGION",   "VERSION", "LIMIT",  "POLICY",  "ENABLED",    "DISABLED", "REQUIRED",
    "FIELD", "PREFIX",   "SCOPE",   "SCOPES", "ISSUER",  "AUDIENCE",   "ROTATION", "BACKEND",
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
    /* An option is a name: "-----BEGIN RSA PRIVATE KEY-----..." is not one. */
    if (len <= skip || !is_alnum((unsigned char)arg[skip]) || len - skip > SCRUB_KEY_MAX) {
        return false;
    }
    for (size_t i = skip; i < len; i++) {
        if (!in_class((unsigned char)arg[i], C_TOKEN)) {
            return false;
        }
    }
    return scrub_name_is_secret(arg + skip, len - skip);
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
static bool match_scheme(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
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
        size_t e = span(t, j, C_CRED);
        if (e - j >= 8 && !is_plain_word(t->p + j, e - j)) {
            *rs = j;
            *re = e;
            return true;
        }
    }
    return false;
}

static bool ends_value(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '&' || c == ';' || c == ',' ||
           c == '"' || c == '\'' || c == ')' || c == '}' || c == ']' || c == '>' || c == '<';
}

/* A file path given where a secret could be (--token-file, PRIVATE_KEY_PATH, a backend's
 * key): absolute or explicitly relative with at least two slashes, or ending in a file
 * extension (one of exts alone, any with a slash before it). A base64 secret has slashes
 * but no extension. */
static bool value_is_path(const unsigned char *p, size_t n)
{
    static const char *const exts[] = {"pem", "key",  "crt",     "cer",    "der",        "p12",
                                       "pfx", "jks",  "json",    "yaml",   "yml",        "toml",
                                       "ini", "conf", "cfg",     "env",    "txt",        "gpg",
                                       "asc", "pub",  "tfstate", "tfvars", "properties", "kdbx"};
    size_t slashes = 0, dot = 0;
    for (size_t k = 0; k < n; k++) {
        if (!in_class(p[k], C_PATH)) {
            return false;
        }
        slashes += p[k] == '/';
        dot = p[k] == '.' ? k + 1 : p[k] == '/' ? 0 : dot;
    }
    if ((p[0] == '/' || p[0] == '.' || p[0] == '~') && slashes >= 2) {
        return true;
    }
    if (dot < 2 || n == dot || n - dot > 8 || !is_lower(p[dot])) {
        return false;
    }
    for (size_t k = dot; k < n; k++) {
        if (!is_lower(p[k]) && !is_digit(p[k])) {
            return false;
        }
    }
    if (slashes > 0) {
        return true;
    }
    for (size_t k = 0; k < ARRAY_SIZE(exts); k++) {
        if (n - dot == strlen(exts[k]) && memcmp(p + dot, exts[k], n - dot) == 0) {
            return true;
        }
    }
    return false;
}

/* A file name (auth.py, test_token.ts), which a message may follow with a colon: its last
 * dot-separated part is a source or data file's extension. */
static bool name_is_file(const unsigned char *p, size_t n)
{
    static const char *const exts[] = {"c",    "h",   "cc",  "cpp",  "go",  "rs",   "py",
                                       "rb",   "js",  "ts",  "tsx",  "jsx", "java", "kt",
                                       "sh",   "md",  "txt", "json", "yml", "yaml", "toml",
                                       "lock", "log", "cfg", "ini",  "conf"};
    const unsigned char *dot = memrchr(p, '.', n);
    if (!dot || dot == p) {
        return false;
    }
    size_t m = n - (size_t)(dot + 1 - p);
    for (size_t k = 0; k < ARRAY_SIZE(exts); k++) {
        if (m == strlen(exts[k]) && memcmp(dot + 1, exts[k], m) == 0) {
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
    static const char *const literals[] = {"TRUE", "FALSE", "YES",  "NO", "ON",
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
        while (k < n && (in_class(p[k], C_TOKEN) || p[k] == '[' || p[k] == ']')) {
            k++;
        }
        if (k == n) {
            return true;
        }
    }
    return value_is_path(p, n);
}

/* The length of NAME when p starts with NAME= (a letter, then token characters), else 0. */
static size_t pair_name(const unsigned char *p, size_t n)
{
    size_t k = span(&(struct scrub_text){p, n}, 0, C_TOKEN);
    return k > 0 && k < n && p[k] == '=' && (is_lower(p[0]) || is_upper(p[0])) ? k : 0;
}

/* An option's value that is a spec of two or more NAME=value pairs joined by commas
 * (docker build --secret id=npmrc,src=$HOME/.npmrc, --mount type=secret,id=x): not the
 * secret itself; each pair is judged by its own NAME where it stands. */
static bool value_is_spec(const unsigned char *p, size_t n)
{
    if (!pair_name(p, n)) {
        return false;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        if (p[k] == ',' && pair_name(p + k + 1, n - k - 1)) {
            return true;
        }
    }
    return false;
}

bool scrub_arg_value_is_secret(const char *val, size_t len)
{
    const unsigned char *p = (const unsigned char *)val;
    return !value_is_reference(p, len) && !value_is_spec(p, len);
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
static bool is_prose(const struct scrub_text *t, size_t j, size_t e)
{
    if (!is_plain_word(t->p + j, e - j) || e >= t->len || t->p[e] != ' ') {
        return false;
    }
    return e + 1 < t->len && (is_lower(t->p[e + 1]) || is_upper(t->p[e + 1]));
}

/* The end of a quoted value starting at j (after its quote q), escapes skipped. */
static size_t quoted_end(const struct scrub_text *t, size_t j, unsigned char q)
{
    size_t e = j;
    while (e < t->len && t->p[e] != q) {
        e += (t->p[e] == '\\' && e + 1 < t->len) ? 2 : 1;
    }
    return e > t->len ? t->len : e;
}

/* NAME=value, NAME: value, "NAME": "value" where NAME looks secret (scrub_name_is_secret).
 * Not keys: a path's last segment or a regex's word (/etc/passwd: ..., s/^token: .*), a
 * file name (test_auth.py: 3 passed), comparisons (a == b), and NAME:value with nothing between
 * (npm run auth:login, session:42, tests/test_auth.py::test_login), except for headers and
 * openssl's pass:. */
static bool match_key_value(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
{
    const unsigned char *p = t->p;
    if (!in_class(p[i], C_TOKEN) || !boundary(t, i, C_TOKEN)) {
        return false;
    }
    if (i > 0 && (p[i - 1] == '/' || p[i - 1] == '^' || p[i - 1] == '\\')) {
        return false;
    }
    size_t k = span(t, i, C_TOKEN);
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
    if (j < t->len &&
        ((sep == '=' && p[j] == '=') || (sep == ':' && (p[j] == '/' || p[j] == ':')))) {
        return false; /* a == b; scheme:// (the userinfo matcher's); a::b */
    }
    bool header = sep == ':' && !quoted_name && is_header_name(p + i, k - i);
    if (sep == ':' && j < t->len && !is_space(p[j]) && p[j] != '"' && p[j] != '\'' && !header &&
        !(k - i == 4 && memcmp(p + i, "pass", 4) == 0)) {
        return false;
    }
    if (name_is_file(p + i, k - i) || !scrub_name_is_secret((const char *)p + i, k - i)) {
        return false;
    }
    while (j < t->len && is_space(p[j])) {
        j++;
    }
    /* 'Authorization: Bearer x' inside quotes ends at the quote that opened it. */
    unsigned char kq = 0;
    if (i > 0 && (p[i - 1] == '"' || p[i - 1] == '\'') && (k >= t->len || p[k] != p[i - 1])) {
        kq = p[i - 1];
    }
    unsigned char q = 0;
    if (j < t->len && (p[j] == '"' || p[j] == '\'')) {
        q = p[j++];
    }
    if (q && q == kq) {
        return false; /* the quote closes what opened before NAME: grep 'password:' file */
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
static bool match_option(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
{
    const unsigned char *p = t->p;
    if (p[i] != '-' || (i > 0 && !is_space(p[i - 1]) && p[i - 1] != '"' && p[i - 1] != '\'')) {
        return false;
    }
    size_t k = i;
    while (k < t->len && !is_space(p[k]) && !ends_value(p[k]) && p[k] != '=') {
        k++;
    }
    if (k >= t->len || !is_space(p[k]) || !scrub_arg_takes_secret((const char *)p + i, k - i)) {
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
    if (e == j || !scrub_arg_value_is_secret((const char *)p + j, e - j)) {
        return false;
    }
    *rs = j;
    *re = e;
    return true;
}

/* scheme://user:PASSWORD@host */
static bool match_userinfo(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
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

bool scrub_context_userinfo(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
{
    return match_userinfo(t, i, rs, re);
}

bool scrub_context_match(const struct scrub_text *t, size_t i, size_t *rs, size_t *re)
{
    *rs = i;
    if (match_option(t, i, rs, re)) {
        return true;
    }
    *rs = i;
    return (boundary(t, i, C_ALNUM) && match_scheme(t, i, rs, re)) || match_key_value(t, i, rs, re);
}
