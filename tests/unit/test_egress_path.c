/* SPDX-License-Identifier: MIT */
/* Unit tests of egress_path.c: the normal form of a request path (escapes of unreserved
 * characters decoded, others in capitals), in place too; every refusal with its reason;
 * prefixes by whole segments, read in the normal form; and 20000 randomly edited paths whose
 * normal form is no longer, stable and never a refused one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "rnd.h"
#include "wire/egress_path.h"

static bool hex_digit(char c)
{
    return c != '\0' && strchr("0123456789abcdefABCDEF", c) != NULL;
}

static int norm(const char *path, char *out, const char **why)
{
    size_t n = 0;
    *why = NULL;
    int r = egress_path_normalize(path, strlen(path), out, &n, why);
    if (r == 0) {
        out[n] = '\0';
        assert_null(*why);
    } else {
        assert_int_equal(r, -EINVAL);
        assert_non_null(*why);
    }
    return r;
}

static void egress_path_normalize__decodes_unreserved_only(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"/", "/"},
        {"/v1/items", "/v1/items"},
        {"/v1/items/", "/v1/items/"},
        {"/a-b_c.d~e/f%41g", "/a-b_c.d~e/fAg"},
        {"/%41%5a%61%7a%30%39%2d%2e%5f%7e", "/AZaz09-._~"},
        {"/x:y@z;p=1,2", "/x:y@z;p=1,2"},
        {"/a.b/..c/c../.d", "/a.b/..c/c../.d"},
        {"/%20", "/%20"},
        {"/x%3b%3f%23%5b%5d%40%21%24%26%27%28%29%2a%2b%2c%3d%3a",
         "/x%3B%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3D%3A"},
        {"/%22%3c%3e%5e%60%7b%7c%7d", "/%22%3C%3E%5E%60%7B%7C%7D"},
        {"/100%25", "/100%25"},
        {"/%25zz", "/%25zz"},
        {"/caf%c3%a9/%E2%82%AC/%f0%9f%98%80", "/caf%C3%A9/%E2%82%AC/%F0%9F%98%80"},
        {"/x;", "/x;"},
        {"/x;;y", "/x;;y"},
        {"/x;v=..", "/x;v=.."},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char out[256];
        const char *why = NULL;
        if (norm(cases[i][0], out, &why) != 0 || strcmp(out, cases[i][1]) != 0) {
            fail_msg("'%s': %s, '%s'", cases[i][0], why ? why : "ok", why ? "-" : out);
        }
        /* The normal form is its own normal form. */
        char again[256];
        assert_int_equal(norm(out, again, &why), 0);
        assert_string_equal(again, out);
        assert_true(egress_path_safe(cases[i][0], strlen(cases[i][0])));
    }
}

static void egress_path_normalize__in_place(void **state)
{
    (void)state;
    char buf[] = "/%70rometheus/%61%70%69/caf%c3%a9?";
    size_t n = 0;
    const char *why = NULL;
    assert_int_equal(egress_path_normalize(buf, strlen(buf) - 1, buf, &n, &why), 0);
    assert_int_equal(n, strlen("/prometheus/api/caf%C3%A9"));
    assert_memory_equal(buf, "/prometheus/api/caf%C3%A9", n);
    /* NULL: checked, nothing written. */
    assert_int_equal(egress_path_normalize("/%2e%2e", 7, NULL, NULL, &why), -EINVAL);
}

static void egress_path_normalize__refusals_and_their_reasons(void **state)
{
    (void)state;
    static const struct {
        const char *path, *why;
    } cases[] = {
        {"", "must start with '/'"},
        {"v1", "must start with '/'"},
        {"/..", "'..' segment"},
        {"/.", "'..' segment"},
        {"/v1/../x", "'..' segment"},
        {"/v1/./x", "'..' segment"},
        {"/..;/x", "'..' segment"},
        {"/..;x=1/x", "'..' segment"},
        {"/.;/x", "'..' segment"},
        {"/x;../y", "'..' segment"},
        {"/x;a;..", "'..' segment"},
        {"/%2e%2e/x", "'..' segment"},
        {"/%2E./x", "'..' segment"},
        {"/.%2e", "'..' segment"},
        {"/..%3b/x", "'..' segment"},
        {"/..%3Bx", "'..' segment"},
        {"/..%20", "'..' segment"},
        {"/%20.", "'..' segment"},
        {"/...", "'..' segment"},
        {"/v1//x", "empty segment"},
        {"//x", "empty segment"},
        {"/;x/y", "empty segment"},
        {"/;", "empty segment"},
        {"/%3bx", "empty segment"},
        {"/a%2fb", "encoded '/'"},
        {"/a%2Fb", "encoded '/'"},
        {"/a%5cb", "encoded '/' or '\\'"},
        {"/a\\b", "'\\'"},
        {"/a%00", "control character or NUL"},
        {"/a%0a", "control character or NUL"},
        {"/a%1F", "control character or NUL"},
        {"/a%7f", "control character or NUL"},
        {"/%252e", "encoded twice"},
        {"/%252E%252E", "encoded twice"},
        {"/%2525", "encoded twice"},
        {"/%25%32%65", "encoded twice"},
        {"/%252%65", "encoded twice"},
        {"/%255c", "encoded twice"},
        {"/%c0%ae", "not UTF-8"},
        {"/%c1%bf", "not UTF-8"},
        {"/%e0%80%ae", "not UTF-8"},
        {"/%f0%80%80%ae", "not UTF-8"},
        {"/%ed%a0%80", "not UTF-8"},
        {"/%f4%90%80%80", "not UTF-8"},
        {"/%f5%80%80%80", "not UTF-8"},
        {"/%80", "not UTF-8"},
        {"/%ff", "not UTF-8"},
        {"/%c3", "not UTF-8"},
        {"/%c3a", "not UTF-8"},
        {"/%c3%c3", "not UTF-8"},
        {"/%e2%82", "not UTF-8"},
        {"/%ef%bc%8e", "folds to"},
        {"/%EF%BC%8F", "folds to"},
        {"/%ef%bc%bc", "folds to"},
        {"/%e2%80%a4", "folds to"},
        {"/%e2%80%a5", "folds to"},
        {"/%e2%80%a6", "folds to"},
        {"/%e2%84%80", "folds to"},
        {"/%ef%b9%92", "folds to"},
        {"/%ef%b9%a8", "folds to"},
        {"/%ef%b8%99", "folds to"},
        {"/%ef%b8%b0", "folds to"},
        {"/a%4", "malformed percent-encoding"},
        {"/a%", "malformed percent-encoding"},
        {"/a%zz", "malformed percent-encoding"},
        {"/%u002e", "malformed percent-encoding"},
        {"/a b", "not allowed in a URL path"},
        {"/a\"b", "not allowed in a URL path"},
        {"/a<b", "not allowed in a URL path"},
        {"/a{b", "not allowed in a URL path"},
        {"/a#b", "not allowed in a URL path"},
        {"/a?b", "not allowed in a URL path"},
        {"/a\x80", "not allowed in a URL path"},
        {"/a\x01", "not allowed in a URL path"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char out[256];
        const char *why = NULL;
        if (norm(cases[i].path, out, &why) == 0) {
            fail_msg("'%s' accepted as '%s'", cases[i].path, out);
        }
        if (strncmp(why, "the path ", 9) != 0 || !strstr(why, cases[i].why)) {
            fail_msg("'%s': '%s', not '%s'", cases[i].path, why, cases[i].why);
        }
        assert_false(egress_path_safe(cases[i].path, strlen(cases[i].path)));
    }
    /* A NUL is a byte like any other here: refused, never the end of the path. */
    const char nul[] = "/a\0/../b";
    const char *why = NULL;
    assert_int_equal(egress_path_normalize(nul, sizeof(nul) - 1, NULL, NULL, &why), -EINVAL);
}

static void egress_path_under__whole_segments_in_normal_form(void **state)
{
    (void)state;
    assert_true(egress_path_under("/v1", 3, "/v1"));
    assert_true(egress_path_under("/v1/x", 5, "/v1"));
    assert_false(egress_path_under("/v1x", 4, "/v1"));
    assert_false(egress_path_under("/v1;x", 5, "/v1"));
    assert_false(egress_path_under("/v1%3B", 6, "/v1"));
    assert_true(egress_path_under("/v1/x", 5, "/v1/"));
    assert_false(egress_path_under("/v1", 3, "/v1/"));
    assert_false(egress_path_under("/v", 2, "/v1"));
    assert_true(egress_path_under("/anything", 9, "/"));
    assert_true(egress_path_under("/anything", 9, ""));
    assert_false(egress_path_under("", 0, "/"));
    assert_true(egress_path_under("/api/x", 6, "/%61pi/"));
    assert_true(egress_path_under("/api/x", 6, "/%61%70%69"));
    assert_false(egress_path_under("/apix", 5, "/%61pi"));
    assert_true(egress_path_under("/a%3Bb/x", 8, "/a%3bb"));
    assert_false(egress_path_under("/a;b/x", 6, "/a%3bb"));
    assert_true(egress_path_under("/caf%C3%A9/", 11, "/caf%c3%a9/"));
}

static void egress_path_normalize__random_paths_normalize_stably(void **state)
{
    (void)state;
    static const char *const seeds[] = {
        "/prometheus/api/v1/query",
        "/a/%2e%2e/b",
        "/x;..;/y",
        "/%25%32%65",
        "/caf%c3%a9",
        "/v1/items/",
        "/%ef%bc%8e/x",
        "/a%3bb/c",
    };
    static const char alphabet[] = "/.;%%25eE2fF3bB5cC0a1zZ~-_ \\\x80\xc3\xa9";
    for (int round = 0; round < 20000; round++) {
        const char *seed = seeds[rnd_below(ARRAY_SIZE(seeds))];
        size_t n = strlen(seed);
        char *p = xmalloc(n + 16);
        memcpy(p, seed, n);
        for (uint64_t k = rnd_below(6); k > 0; k--) {
            size_t at = rnd_below(n + 1);
            char c = alphabet[rnd_below(sizeof(alphabet) - 1)];
            if (rnd_below(2) && n < strlen(seed) + 15) {
                memmove(p + at + 1, p + at, n - at);
                p[at] = c;
                n++;
            } else if (at < n) {
                p[at] = c;
            }
        }
        char *out = xmalloc(n + 1);
        size_t ol = 0;
        const char *why = NULL;
        if (egress_path_normalize(p, n, out, &ol, &why) == 0) {
            assert_true(ol > 0 && ol <= n);
            char *again = xmalloc(ol + 1);
            size_t al = 0;
            assert_int_equal(egress_path_normalize(out, ol, again, &al, &why), 0);
            assert_int_equal(al, ol);
            assert_memory_equal(again, out, ol);
            /* Nothing in the normal form a decoder could make a dot segment of. */
            out[ol] = '\0';
            assert_null(strstr(out, "/./"));
            assert_null(strstr(out, "/../"));
            assert_null(strstr(out, "%2"
                                    "E"));
            for (const char *e = strstr(out, "%25"); e; e = strstr(e + 1, "%25")) {
                assert_false(hex_digit(e[3]) && hex_digit(e[4]));
            }
            free(again);
        } else {
            assert_non_null(why);
        }
        free(out);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(egress_path_normalize__decodes_unreserved_only),
        cmocka_unit_test(egress_path_normalize__in_place),
        cmocka_unit_test(egress_path_normalize__refusals_and_their_reasons),
        cmocka_unit_test(egress_path_under__whole_segments_in_normal_form),
        cmocka_unit_test(egress_path_normalize__random_paths_normalize_stably),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
