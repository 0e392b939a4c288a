/* SPDX-License-Identifier: MIT */
/* Unit tests of egress_route.c: a plain-HTTP request's route in a profile, by name, method and
 * path prefix (whole segments), and the refusal each mismatch gives. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config/config.h"
#include "egress/egress_route.h"
#include "wire/egress_parse.h"

static struct egress_route_config routes[] = {
    {.name = "api", .methods = EGRESS_METHOD_GET | EGRESS_METHOD_POST, .path_prefix = "/v1/"},
    {.name = "api", .methods = EGRESS_METHOD_DELETE, .path_prefix = "/v1/items"},
    {.name = "docs", .methods = EGRESS_METHODS_ALL, .path_prefix = "/"},
};
static const struct egress_profile_config profile = {.name = "p", .routes = routes, .n_routes = 3};

static int route(const char *host, uint32_t method, const char *path, size_t *idx)
{
    const char *why = NULL;
    int r = egress_route_find(&profile, host, method, path, strlen(path), idx, &why);
    if (r < 0) {
        assert_non_null(why);
    }
    return r;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(egress_route_find__name_method_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
