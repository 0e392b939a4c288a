/* SPDX-License-Identifier: MIT */
/* Unit tests of egress_route.c: a plain-HTTP request's route in a profile, by name, method and
 * path prefix (whole segments, on the normalized path), the refusal each mismatch gives, and
 * a GET-only "/prometheus/" route that no spelling of a dot segment gets out of. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "egress/egress_route.h"
#include "lib/util.h"
#include "wire/egress_parse.h"

static struct egress_route_config routes[] = {
    {.name = "api", .methods = EGRESS_METHOD_GET | EGRESS_METHOD_POST, .path_prefix = "/v1/"},
    {.name = "api", .methods = EGRESS_METHOD_DELETE, .path_prefix = "/v1/items"},
    {.name = "docs", .methods = EGRESS_METHODS_ALL, .path_prefix = "/"},
    {.name = "prom", .methods = EGRESS_METHOD_GET, .path_prefix = "/prometheus/"},
    {.name = "bare", .methods = EGRESS_METHOD_GET, .path_prefix = "/prometheus"},
    {.name = "enc", .methods = EGRESS_METHOD_GET, .path_prefix = "/%61pi/"},
};
static const struct egress_profile_config profile = {
    .name = "p", .routes = routes, .n_routes = ARRAY_SIZE(routes)};

/* The route of (host, method, path); *norm gets the normalized path on success. */
static int route_norm(const char *host, uint32_t method, const char *path, size_t *idx, char *norm,
                      const char **why)
{
    size_t n = strlen(path);
    size_t nlen = 0;
    char buf[512];
    assert_true(n < sizeof(buf));
    *why = NULL;
    int r = egress_route_find(&profile, host, method, path, n, buf, idx, &nlen, why);
    if (r < 0) {
        assert_non_null(*why);
    } else {
        assert_true(nlen <= n);
        memcpy(norm, buf, nlen);
        norm[nlen] = '\0';
    }
    return r;
}

static int route(const char *host, uint32_t method, const char *path, size_t *idx)
{
    char norm[512];
    const char *why = NULL;
    return route_norm(host, method, path, idx, norm, &why);
}

static void egress_route_find__name_method_prefix(void **state)
{
    (void)state;
    size_t idx = 99;
    assert_int_equal(route("api", EGRESS_METHOD_GET, "/v1/x", &idx), 0);
    assert_int_equal(idx, 0);
    assert_int_equal(route("api", EGRESS_METHOD_DELETE, "/v1/items/7", &idx), 0);
    assert_int_equal(idx, 1);
    assert_int_equal(route("api", EGRESS_METHOD_DELETE, "/v1/itemsX", &idx), -EPERM);
    assert_int_equal(route("api", EGRESS_METHOD_PUT, "/v1/x", &idx), -EPERM);
    assert_int_equal(route("api", EGRESS_METHOD_GET, "/v2/x", &idx), -EACCES);
    assert_int_equal(route("api", EGRESS_METHOD_GET, "/v1", &idx), -EACCES);
    assert_int_equal(route("other", EGRESS_METHOD_GET, "/v1/x", &idx), -ENOENT);
    assert_int_equal(route("docs", EGRESS_METHOD_PATCH, "/", &idx), 0);
    assert_int_equal(idx, 2);
}

/* Every spelling that Tomcat, Jetty, Spring, a double decoder, a server taking '\' for '/'
 * or folding Unicode could resolve outside "/prometheus/" (or into another segment). */
static const char *const escapes[] = {
    "/prometheus/..;/..;/admin",
    "/prometheus/..;/admin",
    "/prometheus/..;x=1/admin",
    "/prometheus/..;x=1;y=2/admin",
    "/prometheus/.;/admin",
    "/prometheus/.;x/admin",
    "/prometheus/../admin",
    "/prometheus/..",
    "/prometheus/./admin",
    "/prometheus/.",
    "/prometheus/%2e%2e/admin",
    "/prometheus/%2E%2E/admin",
    "/prometheus/.%2e/admin",
    "/prometheus/%2e./admin",
    "/prometheus/.%2E/admin",
    "/prometheus/%2e/admin",
    "/prometheus/%2e%2e;/admin",
    "/prometheus/.%2E;x=1/admin",
    "/prometheus/..%3b/admin",
    "/prometheus/..%3Bx=1/admin",
    "/prometheus/x;..",
    "/prometheus/x;a;../admin",
    "/prometheus/%252e%252e/admin",
    "/prometheus/%252E%252E/admin",
    "/prometheus/.%252e/admin",
    "/prometheus/%25%32%65%25%32%65/admin",
    "/prometheus/%2525%32%65/admin",
    "/prometheus/%252fadmin",
    "/prometheus/%255c",
    "/prometheus/..%5c..%5cadmin",
    "/prometheus/..%5Cadmin",
    "/prometheus/..\\..\\admin",
    "/prometheus/a\\b",
    "/prometheus/..%2fadmin",
    "/prometheus/%2e%2e%2fadmin",
    "/prometheus/a%2F..%2F..%2Fadmin",
    "/prometheus/..%00/admin",
    "/prometheus/%00",
    "/prometheus/.%00./admin",
    "/prometheus/%0a",
    "/prometheus/%7f",
    "/prometheus/x;/../admin",
    "/prometheus/;/../admin",
    "/prometheus/;x=1/admin",
    "/prometheus/;/admin",
    "/prometheus/%3bx/admin",
    "/prometheus;x=1/../admin",
    "/prometheus/..%20/admin",
    "/prometheus/%20../admin",
    "/prometheus/.../admin",
    "/prometheus//admin",
    "//prometheus/admin",
    "/prometheus/%c0%ae%c0%ae/admin",
    "/prometheus/%c0%af",
    "/prometheus/%e0%80%ae%e0%80%ae/admin",
    "/prometheus/%f0%80%80%ae",
    "/prometheus/%ed%a0%80",
    "/prometheus/%f4%90%80%80",
    "/prometheus/%ff",
    "/prometheus/%80",
    "/prometheus/%c3",
    "/prometheus/%c3x",
    "/prometheus/%ef%bc%8e%ef%bc%8e/admin",
    "/prometheus/%e2%80%a5/admin",
    "/prometheus/..%ef%bc%8fadmin",
    "/prometheus/..%ef%bc%bcadmin",
    "/prometheus/%e2%84%80",
    "/prometheus/%2e%2",
    "/prometheus/%",
    "/prometheus/%u002e%u002e/admin",
    "/prometheus/a b",
    "/prometheus/a\"b",
    "/prometheus/a<b",
    "/prometheus/a{b",
    "/prometheus/a|b",
    "/prometheus/a^b",
    "/prometheus/a`b",
    "/prometheus/a[b]",
    "/prometheus/a\x80",
    "/..;/admin",
    "prometheus/x",
};

static void egress_route_find__dot_segments_in_every_spelling_are_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(escapes); i++) {
        size_t idx = 99;
        char norm[512];
        const char *why = NULL;
        int r = route_norm("prom", EGRESS_METHOD_GET, escapes[i], &idx, norm, &why);
        if (r != -EACCES || strncmp(why, "the path ", 9) != 0 ||
            strstr(why, "outside the route's prefix")) {
            fail_msg("'%s': %d (%s), routed as '%s'", escapes[i], r, why ? why : "-",
                     r == 0 ? norm : "-");
        }
    }
}

static void egress_route_find__prefix_on_the_normalized_path_by_segments(void **state)
{
    (void)state;
    static const struct {
        const char *host, *path, *norm;
    } ok[] = {
        {"prom", "/prometheus/api/v1/query", "/prometheus/api/v1/query"},
        {"prom", "/%70rometheus/api", "/prometheus/api"},
        {"prom", "/prometheus/%61%70%69/v1/%71uery", "/prometheus/api/v1/query"},
        {"prom", "/prometheus/a%2db%5F%7ec%2E1", "/prometheus/a-b_~c.1"},
        {"prom", "/prometheus/caf%c3%a9", "/prometheus/caf%C3%A9"},
        {"prom", "/prometheus/%f0%9f%98%80", "/prometheus/%F0%9F%98%80"},
        {"prom", "/prometheus/x%3bjsessionid=1", "/prometheus/x%3Bjsessionid=1"},
        {"prom", "/prometheus/x;v=1;w", "/prometheus/x;v=1;w"},
        {"prom", "/prometheus/x;", "/prometheus/x;"},
        {"prom", "/prometheus/100%25", "/prometheus/100%25"},
        {"prom", "/prometheus/100%25x", "/prometheus/100%25x"},
        {"prom", "/prometheus/a..b/..c/c../.x/x.", "/prometheus/a..b/..c/c../.x/x."},
        {"prom", "/prometheus/%20/a%20b", "/prometheus/%20/a%20b"},
        {"prom", "/prometheus/%3f%23%5b", "/prometheus/%3F%23%5B"},
        {"prom", "/prometheus/api/", "/prometheus/api/"},
        {"prom", "/prometheus/", "/prometheus/"},
        {"prom", "/prometheus/x:y@z!$&'()*+,=", "/prometheus/x:y@z!$&'()*+,="},
        {"bare", "/prometheus", "/prometheus"},
        {"bare", "/prometheus/x", "/prometheus/x"},
        {"bare", "/promet%68eus", "/prometheus"},
        {"enc", "/api/x", "/api/x"},
        {"enc", "/%61pi/x", "/api/x"},
        {"docs", "/", "/"},
        {"docs", "/%7Euser", "/~user"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        size_t idx = 99;
        char norm[512];
        const char *why = NULL;
        int r = route_norm(ok[i].host, EGRESS_METHOD_GET, ok[i].path, &idx, norm, &why);
        if (r != 0 || strcmp(norm, ok[i].norm) != 0) {
            fail_msg("'%s': %d (%s), normalized '%s'", ok[i].path, r, why ? why : "-",
                     r == 0 ? norm : "-");
        }
        assert_string_equal(routes[idx].name, ok[i].host);
    }
    static const struct {
        const char *host, *path;
    } outside[] = {
        {"prom", "/prometheusX/api"},
        {"prom", "/prometheus"},
        {"prom", "/prometheus;x/api"},
        {"prom", "/Prometheus/api"},
        {"prom", "/admin"},
        {"prom", "/prometheus%2Dx/"},
        {"bare", "/prometheusX"},
        {"bare", "/prometheus;x=1"},
        {"bare", "/prometheus%3B"},
        {"enc", "/apix/"},
        {"enc", "/%2561pi/"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(outside); i++) {
        size_t idx = 99;
        char norm[512];
        const char *why = NULL;
        int r = route_norm(outside[i].host, EGRESS_METHOD_GET, outside[i].path, &idx, norm, &why);
        if (r != -EACCES) {
            fail_msg("'%s' %s: %d (%s)", outside[i].host, outside[i].path, r, why ? why : "-");
        }
    }
    size_t idx = 99;
    char norm[512];
    const char *why = NULL;
    assert_int_equal(route_norm("prom", EGRESS_METHOD_POST, "/prometheus/api", &idx, norm, &why),
                     -EPERM);
    assert_string_equal(why, "the method is not allowed on the route");
    assert_int_equal(route_norm("prom", EGRESS_METHOD_GET, "/prometheusX", &idx, norm, &why),
                     -EACCES);
    assert_string_equal(why, "the path is outside the route's prefix");
    /* No route by the name: that, whatever the path. */
    assert_int_equal(route_norm("none", EGRESS_METHOD_GET, "/..;/", &idx, norm, &why), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(egress_route_find__name_method_prefix),
        cmocka_unit_test(egress_route_find__dot_segments_in_every_spelling_are_refused),
        cmocka_unit_test(egress_route_find__prefix_on_the_normalized_path_by_segments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
