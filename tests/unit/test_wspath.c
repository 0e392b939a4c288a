/* SPDX-License-Identifier: MIT */
/* Unit tests of wspath.c: client paths and collect patterns to their normal form relative to
 * /work, every refusal with its code and reason (the ways out of /work first), matches of
 * "*", "?", "[...]" and "**", the directories a walk must enter, and random paths whose
 * normal form is stable, no longer and free of what could leave /work. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "rnd.h"
#include "wire/wspath.h"

#define MAX_LEN 1024

static int norm(const char *path, char *out, size_t out_size, const char **why)
{
    *why = "unset";
    int r = wspath_normalize(path, strlen(path), MAX_LEN, out, out_size, why);
    if (r == 0) {
        assert_null(*why);
    } else {
        assert_true(r == -EINVAL || r == -ENAMETOOLONG);
        assert_non_null(*why);
        assert_true(strncmp(*why, "the path", 8) == 0);
    }
    return r;
}

static int pnorm(const char *pat, char *out, const char **why)
{
    *why = "unset";
    int r = wspath_pattern_normalize(pat, strlen(pat), MAX_LEN, out, MAX_LEN + 1, why);
    if (r == 0) {
        assert_null(*why);
    } else {
        assert_non_null(*why);
        assert_true(strncmp(*why, "the pattern", 11) == 0);
    }
    return r;
}

static void wspath_normalize__accepted_spellings(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"a", "a"},
        {"a/b", "a/b"},
        {"./a/b", "a/b"},
        {"a//b/", "a/b"},
        {"a/./b/.", "a/b"},
        {"/work/a/b", "a/b"},
        {"/work//a", "a"},
        {"//work/./a", "a"},
        {"/./work/a", "a"},
        {"work/a", "work/a"},
        {"/work/work", "work"},
        {"...", "..."},
        {"..a/b..", "..a/b.."},
        {".hidden", ".hidden"},
        {"r\xc3\xa9sum\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt",
         "r\xc3\xa9sum\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt"},
        {"a b/c\td", "a b/c\td"},
        {"*", "*"},
    };
    char out[MAX_LEN + 1];
    const char *why = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(norm(cases[i][0], out, sizeof(out), &why), 0);
        assert_string_equal(out, cases[i][1]);
    }
}

static void wspath_normalize__ways_out_refused(void **state)
{
    (void)state;
    static const struct {
        const char *path;
        int r;
        const char *why;
    } cases[] = {
        {"..", -EINVAL, "'..'"},
        {"../etc/passwd", -EINVAL, "'..'"},
        {"a/../../etc", -EINVAL, "'..'"},
        {"a/..", -EINVAL, "'..'"},
        {"/work/../etc/passwd", -EINVAL, "'..'"},
        {"/work/a/../b", -EINVAL, "'..'"},
        {"./..", -EINVAL, "'..'"},
        {"/etc/passwd", -EINVAL, "not under /work/"},
        {"/", -EINVAL, "not under /work/"},
        {"/workx/a", -EINVAL, "not under /work/"},
        {"/wor/a", -EINVAL, "not under /work/"},
        {"/tmp/work/a", -EINVAL, "not under /work/"},
        {"/../work/a", -EINVAL, "not under /work/"},
        {"/work", -EINVAL, "/work itself"},
        {"/work/", -EINVAL, "/work itself"},
        {"/work/.", -EINVAL, "/work itself"},
        {".", -EINVAL, "/work itself"},
        {"./", -EINVAL, "/work itself"},
        {"//", -EINVAL, "not under /work/"},
        {"", -EINVAL, "empty"},
    };
    char out[MAX_LEN + 1];
    const char *why = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        assert_int_equal(norm(cases[i].path, out, sizeof(out), &why), cases[i].r);
        if (!strstr(why, cases[i].why)) {
            fail_msg("%s: %s", cases[i].path, why);
        }
    }
    /* A NUL inside the client's bytes, and the bounds. */
    assert_int_equal(wspath_normalize("a\0/../b", 7, MAX_LEN, out, sizeof(out), &why), -EINVAL);
    assert_non_null(strstr(why, "NUL"));
    char comp[300];
    memset(comp, 'x', sizeof(comp));
    comp[256] = '\0';
    assert_int_equal(norm(comp, out, sizeof(out), &why), -ENAMETOOLONG);
    assert_non_null(strstr(why, "255"));
    comp[255] = '\0';
    assert_int_equal(norm(comp, out, sizeof(out), &why), 0);
    char longp[MAX_LEN + 2];
    memset(longp, 'a', sizeof(longp));
    for (size_t i = 100; i < sizeof(longp); i += 100) {
        longp[i] = '/';
    }
    longp[MAX_LEN] = '\0';
    assert_int_equal(norm(longp, out, sizeof(out), &why), 0);
    longp[MAX_LEN] = 'a';
    longp[MAX_LEN + 1] = '\0';
    assert_int_equal(norm(longp, out, sizeof(out), &why), -ENAMETOOLONG);
    assert_non_null(strstr(why, "files_path_max"));
    /* An out too small for the client's length, even when the result would fit. */
    assert_int_equal(norm("a//b", out, 4, &why), -ENAMETOOLONG);
    assert_int_equal(norm("a//b", out, 5, &why), 0);
    assert_string_equal(out, "a/b");
    /* A NULL why is allowed. */
    assert_int_equal(wspath_normalize("..", 2, MAX_LEN, out, sizeof(out), NULL), -EINVAL);
}

static void wspath_normalize_dir__work_itself_is_the_root(void **state)
{
    (void)state;
    char out[MAX_LEN + 1];
    const char *why = NULL;
    static const char *const roots[] = {"/work", "/work/", "/work/.", ".", "./", "//work//"};
    for (size_t i = 0; i < ARRAY_SIZE(roots); i++) {
        strcpy(out, "x");
        assert_int_equal(
            wspath_normalize_dir(roots[i], strlen(roots[i]), MAX_LEN, out, sizeof(out), &why), 0);
        assert_string_equal(out, "");
        assert_null(why);
    }
    assert_int_equal(wspath_normalize_dir("/work/a/", 8, MAX_LEN, out, sizeof(out), &why), 0);
    assert_string_equal(out, "a");
    static const char *const bad[] = {"", "/", "/etc", "..", "/work/..", "a/../.."};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(
            wspath_normalize_dir(bad[i], strlen(bad[i]), MAX_LEN, out, sizeof(out), &why), -EINVAL);
        assert_true(strncmp(why, "the path", 8) == 0);
    }
}

static void wspath_pattern_normalize__globs_and_refusals(void **state)
{
    (void)state;
    char out[MAX_LEN + 1];
    const char *why = NULL;
    static const char *const ok[][2] = {
        {"*.txt", "*.txt"},  {"/work/out/**", "out/**"},
        {"**/**/x", "**/x"}, {"a/**/./**/b", "a/**/b"},
        {"**", "**"},        {"[a-c]?/*", "[a-c]?/*"},
        {"\\*", "\\*"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        assert_int_equal(pnorm(ok[i][0], out, &why), 0);
        assert_string_equal(out, ok[i][1]);
    }
    static const char *const bad[][2] = {
        {"../*", "'..'"},
        {"**/../x", "'..'"},
        {"/etc/*", "not under /work/"},
        {"/*", "not under /work/"},
        {"/work", "/work itself"},
        {"a**", "inside a component"},
        {"***", "inside a component"},
        {"x/**b/y", "inside a component"},
        {"", "empty"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(pnorm(bad[i][0], out, &why), -EINVAL);
        if (!strstr(why, bad[i][1])) {
            fail_msg("%s: %s", bad[i][0], why);
        }
    }
    /* More components than WSPATH_PATTERN_COMPONENTS_MAX (with a larger files_path_max). */
    size_t n = 2 * (WSPATH_PATTERN_COMPONENTS_MAX + 1);
    char *many = xmalloc(n + 1);
    char *big = xmalloc(n + 1);
    for (size_t i = 0; i < n; i += 2) {
        many[i] = 'a';
        many[i + 1] = '/';
    }
    many[n] = '\0';
    assert_int_equal(wspath_pattern_normalize(many, n, n, big, n + 1, &why), -EINVAL);
    assert_non_null(strstr(why, "too many"));
    assert_int_equal(wspath_normalize(many, n, n, big, n + 1, &why), 0);
    free(big);
    free(many);
}

static void wspath_match__components(void **state)
{
    (void)state;
    static const struct {
        const char *pat;
        const char *rel;
        bool match;
    } cases[] = {
        {"a.txt", "a.txt", true},
        {"a.txt", "b/a.txt", false},
        {"*.txt", "a.txt", true},
        {"*.txt", ".hidden.txt", true},
        {"*.txt", "d/a.txt", false},
        {"*", "a", true},
        {"*", "a/b", false},
        {"*/*", "a/b", true},
        {"?", "ab", false},
        {"[ab]", "b", true},
        {"[!ab]", "b", false},
        {"\\*", "*", true},
        {"\\*", "x", false},
        {"**", "a", true},
        {"**", "a/b/c", true},
        {"**/*.py", "x.py", true},
        {"**/*.py", "a/b/x.py", true},
        {"**/*.py", "a/b/x.pyc", false},
        {"a/**/z", "a/z", true},
        {"a/**/z", "a/b/c/z", true},
        {"a/**/z", "b/z", false},
        {"a/**/z", "a/z/y", false},
        {"a/**", "a/b", true},
        {"a/**", "b/a", false},
        {"a/*/z", "a/b/z", true},
        {"a/*/z", "a/b/c/z", false},
        {"**/b/**/d", "a/b/c/d", true},
        {"**/b/**/d", "b/d", true},
        {"**/b/**/d", "a/c/d", false},
        {"out/result.json", "out/result.json", true},
        {"out/result.json", "out/result.jsonx", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        if (wspath_match(cases[i].pat, cases[i].rel) != cases[i].match) {
            fail_msg("%s ~ %s: expected %d", cases[i].pat, cases[i].rel, cases[i].match);
        }
    }
    assert_false(wspath_match("*", ""));
}

static void wspath_match_dir__what_a_walk_enters(void **state)
{
    (void)state;
    static const struct {
        const char *pat;
        const char *dir;
        bool enter;
    } cases[] = {
        {"*.txt", "", true},     {"*.txt", "d", false},     {"a/b/c", "", true},
        {"a/b/c", "a", true},    {"a/b/c", "a/b", true},    {"a/b/c", "a/b/c", false},
        {"a/b/c", "x", false},   {"a/*/c", "a/q", true},    {"a/*/c", "a/q/c", false},
        {"**", "a/b/c/d", true}, {"**/x", "deep/er", true}, {"a/**", "a", true},
        {"a/**", "b", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        if (wspath_match_dir(cases[i].pat, cases[i].dir) != cases[i].enter) {
            fail_msg("%s under %s: expected %d", cases[i].pat, cases[i].dir, cases[i].enter);
        }
    }
}

/* Patterns with many "**" against a deep path: the automaton's states make this a few
 * thousand component matches; a backtracking matcher would take longer than anyone waits. */
static void wspath_match__many_starstars_stay_linear(void **state)
{
    (void)state;
    char pat[MAX_LEN + 1] = "";
    char rel[MAX_LEN + 1] = "";
    for (int i = 0; i < 100; i++) {
        strcat(pat, "**/a/");
    }
    strcat(pat, "b");
    for (int i = 0; i < 200; i++) {
        strcat(rel, "a/");
    }
    strcat(rel, "c");
    char out[MAX_LEN + 1];
    const char *why = NULL;
    assert_int_equal(pnorm(pat, out, &why), 0);
    for (int i = 0; i < 20; i++) {
        assert_false(wspath_match(out, rel));
        assert_true(wspath_match_dir(out, rel));
    }
    rel[strlen(rel) - 1] = 'b';
    assert_true(wspath_match(out, rel));
}

static void wspath_normalize__random_paths_stay_inside(void **state)
{
    (void)state;
    static const char *const parts[] = {"/", "//", ".",        "..",  "a",  "work", "/work",
                                        "*", "**", "\xc3\xa9", "...", ".x", "b/"};
    char in[256];
    char out[257];
    char again[257];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        int k = (int)rnd_below(8) + 1;
        for (int j = 0; j < k; j++) {
            const char *p = parts[rnd_below(ARRAY_SIZE(parts))];
            size_t l = strlen(p);
            if (n + l >= sizeof(in)) {
                break;
            }
            memcpy(in + n, p, l);
            n += l;
        }
        in[n] = '\0';
        for (int pattern = 0; pattern < 2; pattern++) {
            const char *why = NULL;
            int r = pattern ? wspath_pattern_normalize(in, n, 255, out, sizeof(out), &why)
                            : wspath_normalize(in, n, 255, out, sizeof(out), &why);
            if (r < 0) {
                assert_non_null(why);
                continue;
            }
            size_t ol = strlen(out);
            assert_true(ol > 0 && ol <= n);
            assert_true(out[0] != '/' && out[ol - 1] != '/');
            assert_null(strstr(out, "//"));
            char wrapped[300];
            snprintf(wrapped, sizeof(wrapped), "/%s/", out);
            assert_null(strstr(wrapped, "/../"));
            assert_null(strstr(wrapped, "/./"));
            r = pattern ? wspath_pattern_normalize(out, ol, 255, again, sizeof(again), &why)
                        : wspath_normalize(out, ol, 255, again, sizeof(again), &why);
            assert_int_equal(r, 0);
            assert_string_equal(again, out);
            if (!pattern) {
                /* A literal path (no glob characters) matches itself as a pattern. */
                if (!strpbrk(out, "*?[\\")) {
                    assert_true(wspath_match(out, out));
                }
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wspath_normalize__accepted_spellings),
        cmocka_unit_test(wspath_normalize__ways_out_refused),
        cmocka_unit_test(wspath_normalize_dir__work_itself_is_the_root),
        cmocka_unit_test(wspath_pattern_normalize__globs_and_refusals),
        cmocka_unit_test(wspath_match__components),
        cmocka_unit_test(wspath_match_dir__what_a_walk_enters),
        cmocka_unit_test(wspath_match__many_starstars_stay_linear),
        cmocka_unit_test(wspath_normalize__random_paths_stay_inside),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
