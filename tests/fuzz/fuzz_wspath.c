/* SPDX-License-Identifier: MIT */
/* Fuzz target: the paths and collect patterns a client names under /work (wire/wspath.c).
 * The first input byte k splits the rest: its first k bytes are a pattern, the others a
 * path (the second byte also picks files_path_max, small or the default).
 *
 * Checked besides memory safety: a refusal says why, with the right subject and code; a
 * normal form is no longer than its spelling, has no empty, "." or ".." component, no
 * component over 255 bytes, no leading '/', and is its own normal form; and a pattern's
 * match agrees with a plain backtracking matcher, every directory above a matched path is
 * one the walk enters (wspath_match_dir), and "**" finds every path; a directory to list
 * normalizes as a path does, or to "" for /work itself. */
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>

#include "wire/wspath.h"
#include "fuzz.h"

static void check_normal(const char *in, size_t n, const char *out, bool pattern, size_t max)
{
    size_t ol = strlen(out);
    FUZZ_CHECK(ol > 0 && ol <= n);
    FUZZ_CHECK(out[0] != '/' && out[ol - 1] != '/');
    const char *c = out;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t cl = slash ? (size_t)(slash - c) : strlen(c);
        FUZZ_CHECK(cl > 0 && cl <= WSPATH_COMPONENT_MAX);
        FUZZ_CHECK(!(cl == 1 && c[0] == '.'));
        FUZZ_CHECK(!(cl == 2 && c[0] == '.' && c[1] == '.'));
        if (pattern && memmem(c, cl, "**", 2)) {
            FUZZ_CHECK(cl == 2);
            /* Adjacent "**" were collapsed. */
            FUZZ_CHECK(!(slash && strncmp(slash + 1, "**", 2) == 0 &&
                         (slash[3] == '/' || slash[3] == '\0')));
        }
        if (!slash) {
            break;
        }
        c = slash + 1;
    }
    char *again = malloc(ol + 1);
    FUZZ_CHECK(again != NULL);
    const char *why = NULL;
    int r = pattern ? wspath_pattern_normalize(out, ol, max, again, ol + 1, &why)
                    : wspath_normalize(out, ol, max, again, ol + 1, &why);
    FUZZ_CHECK(r == 0 && why == NULL);
    FUZZ_CHECK(strcmp(again, out) == 0);
    free(again);
    (void)in;
}

static char *normalize(const char *in, size_t n, size_t max, bool pattern)
{
    char *out = malloc(n + 1);
    FUZZ_CHECK(out != NULL);
    const char *why = NULL;
    int r = pattern ? wspath_pattern_normalize(in, n, max, out, n + 1, &why)
                    : wspath_normalize(in, n, max, out, n + 1, &why);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL || r == -ENAMETOOLONG);
        FUZZ_CHECK(why != NULL);
        FUZZ_CHECK(strncmp(why, pattern ? "the pattern" : "the path", pattern ? 11 : 8) == 0);
        FUZZ_CHECK(n <= max || r == -ENAMETOOLONG || memchr(in, 0, n));
        free(out);
        return NULL;
    }
    FUZZ_CHECK(why == NULL && n <= max);
    check_normal(in, n, out, pattern, max);
    return out;
}

/* The components of a normalized string, in place ('/' become NUL). */
static size_t split(char *s, char **v, size_t max)
{
    size_t m = 0;
    for (char *c = s; m < max;) {
        v[m++] = c;
        char *slash = strchr(c, '/');
        if (!slash) {
            break;
        }
        *slash = '\0';
        c = slash + 1;
    }
    return m;
}

static bool ref_match(char **p, size_t m, char **s, size_t n)
{
    if (m == 0) {
        return n == 0;
    }
    if (strcmp(p[0], "**") == 0) {
        return ref_match(p + 1, m - 1, s, n) || (n > 0 && ref_match(p, m, s + 1, n - 1));
    }
    return n > 0 && fnmatch(p[0], s[0], 0) == 0 && ref_match(p + 1, m - 1, s + 1, n - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    size_t k = data[0];
    size_t max = (data[1] & 1) ? 1024 : 16;
    data += 2;
    size -= 2;
    if (k > size) {
        k = size;
    }
    char *pin = fuzz_dup(data, k);
    char *sin = fuzz_dup(data + k, size - k);
    char *pat = normalize(pin, k, max, true);
    char *path = normalize(sin, size - k, max, false);
    /* A path refused as a path is refused as a pattern too (a pattern only adds globs). */
    char *as_pat = normalize(sin, size - k, max, true);
    FUZZ_CHECK(path == NULL || as_pat != NULL || memmem(sin, size - k, "**", 2));
    free(as_pat);
    /* A directory to list: the same as a path, but /work itself is "". */
    char *dir = malloc(size - k + 1);
    FUZZ_CHECK(dir != NULL);
    const char *dwhy = NULL;
    int dr = wspath_normalize_dir(sin, size - k, max, dir, size - k + 1, &dwhy);
    if (path) {
        FUZZ_CHECK(dr == 0 && strcmp(dir, path) == 0);
    } else if (dr == 0) {
        FUZZ_CHECK(dir[0] == '\0' && dwhy == NULL);
    } else {
        FUZZ_CHECK(dwhy != NULL);
    }
    free(dir);
    if (pat && path) {
        bool m = wspath_match(pat, path);
        FUZZ_CHECK(wspath_match("**", path));
        /* Each directory above a match is entered by the walk. */
        if (m) {
            FUZZ_CHECK(wspath_match_dir(pat, ""));
            char *up = strdup(path);
            FUZZ_CHECK(up != NULL);
            for (char *slash = strrchr(up, '/'); slash; slash = strrchr(up, '/')) {
                *slash = '\0';
                FUZZ_CHECK(wspath_match_dir(pat, up));
            }
            free(up);
        }
        char *pc = strdup(pat);
        char *sc = strdup(path);
        FUZZ_CHECK(pc != NULL && sc != NULL);
        char *pv[64];
        char *sv[64];
        size_t pm = split(pc, pv, 64);
        size_t sn = split(sc, sv, 64);
        size_t stars = 0;
        for (size_t i = 0; i < pm; i++) {
            stars += strcmp(pv[i], "**") == 0;
        }
        /* The reference backtracks: only where that stays small. */
        if (pm < 64 && sn < 64 && stars <= 4) {
            FUZZ_CHECK(ref_match(pv, pm, sv, sn) == m);
        }
        free(pc);
        free(sc);
    }
    free(pat);
    free(path);
    free(pin);
    free(sin);
    return 0;
}
