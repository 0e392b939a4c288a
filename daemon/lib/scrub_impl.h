/* SPDX-License-Identifier: MIT */
#pragma once
/* What scrub.c (the registry, the pass over a text, secrets by shape) and scrub_context.c
 * (secrets by context: names, keys, options, schemes, URLs) share: the character classes
 * and the text being scrubbed. Pure functions; no state. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SCRUB_NAME_MAX 256
#define SCRUB_KEY_MAX 64 /* longest NAME of a NAME=value pair, or of an option */
#define SCRUB_USERINFO_MAX 256

/* Character classes, one bit each, in a table the compiler builds. */
enum {
    C_ALNUM = 1 << 0,  /* [A-Za-z0-9] */
    C_TOKEN = 1 << 1,  /* alnum _ - . : a token after a prefix, NAME in NAME=value */
    C_B64URL = 1 << 2, /* alnum _ - : JWT segments */
    C_RUN = 1 << 3,    /* base64 (standard and url) without padding: an entropy run */
    C_SEG = 1 << 4,    /* C_RUN but '/': a run's segment between slashes */
    C_CRED = 1 << 5,   /* a credential after Bearer / Basic */
    C_PATH = 1 << 6,   /* a file path */
    C_PFX = 1 << 7,    /* a first character of scrub.c's builtin_prefixes: s r w g x A y n p h d
                        * (test_scrub's scrub_dup__every_builtin_prefix fails on one missing) */
};

#define CL_ALNUM(c)                                                                                \
    (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || ((c) >= '0' && (c) <= '9'))
#define CL_ANY(c, a, b, d) ((c) == (a) || (c) == (b) || (c) == (d))
#define CL(c)                                                                                      \
    ((CL_ALNUM(c) ? C_ALNUM | C_TOKEN | C_B64URL | C_RUN | C_SEG | C_CRED | C_PATH : 0) |          \
     (CL_ANY(c, '_', '-', '-') ? C_TOKEN | C_B64URL | C_RUN | C_SEG | C_CRED | C_PATH : 0) |       \
     (CL_ANY(c, '.', '.', '.') ? C_TOKEN | C_CRED | C_PATH : 0) |                                  \
     (CL_ANY(c, '+', '+', '+') ? C_RUN | C_SEG | C_CRED | C_PATH : 0) |                            \
     (CL_ANY(c, '/', '/', '/') ? C_RUN | C_CRED | C_PATH : 0) |                                    \
     (CL_ANY(c, '~', '~', '~') ? C_CRED | C_PATH : 0) | (CL_ANY(c, '=', ':', '%') ? C_CRED : 0) |  \
     (CL_ANY(c, 's', 'r', 'w') || CL_ANY(c, 'g', 'x', 'A') || CL_ANY(c, 'y', 'n', 'p') ||          \
              CL_ANY(c, 'h', 'd', 'd')                                                             \
          ? C_PFX                                                                                  \
          : 0))
#define CL4(c) CL(c), CL((c) + 1), CL((c) + 2), CL((c) + 3)
#define CL16(c) CL4(c), CL4((c) + 4), CL4((c) + 8), CL4((c) + 12)
#define CL64(c) CL16(c), CL16((c) + 16), CL16((c) + 32), CL16((c) + 48)
static const uint8_t char_class[256] = {CL64(0), CL64(64), CL64(128), CL64(192)};

static inline bool in_class(unsigned char c, uint8_t cls)
{
    return (char_class[c] & cls) != 0;
}

static inline bool is_alnum(unsigned char c)
{
    return in_class(c, C_ALNUM);
}

static inline bool is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}

static inline bool is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}

static inline bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static inline bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline unsigned char to_upper(unsigned char c)
{
    return is_lower(c) ? (unsigned char)(c - 'a' + 'A') : c;
}

static inline bool is_space(unsigned char c)
{
    return c == ' ' || c == '\t';
}

struct scrub_text {
    const unsigned char *p;
    size_t len;
};

static inline bool boundary(const struct scrub_text *t, size_t i, uint8_t cls)
{
    return i == 0 || !in_class(t->p[i - 1], cls);
}

static inline size_t span(const struct scrub_text *t, size_t i, uint8_t cls)
{
    size_t j = i;
    while (j < t->len && in_class(t->p[j], cls)) {
        j++;
    }
    return j;
}

static inline bool starts_with(const struct scrub_text *t, size_t i, const char *s, size_t n)
{
    return t->len - i >= n && memcmp(t->p + i, s, n) == 0;
}

static inline bool eq_nocase(const unsigned char *p, size_t n, const char *up)
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

static inline bool starts_with_nocase(const struct scrub_text *t, size_t i, const char *up)
{
    size_t n = strlen(up);
    return t->len - i >= n && eq_nocase(t->p + i, n, up);
}

/* Secrets found by their context (scrub_context.c). Each looks at position i of t and, on a
 * match, sets [*rs, *re) to the span to redact. */
/* scheme://user:PASSWORD@host, tried at every position (i at "://"). */
bool scrub_context_userinfo(const struct scrub_text *t, size_t i, size_t *rs, size_t *re);
/* The rest, tried where a word starts: --option VALUE, Bearer/Basic CREDENTIAL, NAME=value,
 * NAME: value, "NAME": "value". */
bool scrub_context_match(const struct scrub_text *t, size_t i, size_t *rs, size_t *re);
