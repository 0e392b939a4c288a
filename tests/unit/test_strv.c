/* SPDX-License-Identifier: MIT */
/* Unit tests of lib/strv.c: copies and owned strings, the NULL terminator, find, sort,
 * join, and the hand-overs (steal, free, the scoped cleanup). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "lib/strv.h"

static void strv_push__copies_and_terminates(void **state)
{
    (void)state;
    scoped_strv struct strv sv = STRV_INIT;
    assert_int_equal(strv_len(&sv), 0);
    assert_null(sv.v);
    char name[8] = "alpha";
    strv_push(&sv, name);
    name[0] = 'X'; /* the vector holds its own copy */
    assert_string_equal(sv.v[0], "alpha");
    assert_null(sv.v[1]);
    strv_pushn(&sv, "betagamma", 4);
    assert_string_equal(sv.v[1], "beta");
    /* Growth past the first allocation keeps every string and the terminator. */
    for (int i = 0; i < 40; i++) {
        strv_push_owned(&sv, xasprintf("s%d", i));
    }
    assert_int_equal(strv_len(&sv), 42);
    assert_string_equal(sv.v[41], "s39");
    assert_null(sv.v[42]);
}

static void strv_find__index_or_minus_one(void **state)
{
    (void)state;
    scoped_strv struct strv sv = STRV_INIT;
    assert_int_equal(strv_find(&sv, "a"), -1);
    strv_push(&sv, "a");
    strv_push(&sv, "b");
    strv_push(&sv, "a");
    assert_int_equal(strv_find(&sv, "a"), 0);
    assert_int_equal(strv_find(&sv, "b"), 1);
    assert_int_equal(strv_find(&sv, "c"), -1);
    assert_true(strv_contains(&sv, "b"));
    assert_false(strv_contains(&sv, "ab"));
}

static void strv_sort__orders_by_strcmp(void **state)
{
    (void)state;
    scoped_strv struct strv sv = STRV_INIT;
    strv_sort(&sv); /* empty: nothing to do */
    strv_push(&sv, "b.yaml");
    strv_push(&sv, "a.yaml");
    strv_push(&sv, "B.yaml");
    strv_sort(&sv);
    assert_string_equal(sv.v[0], "B.yaml");
    assert_string_equal(sv.v[1], "a.yaml");
    assert_string_equal(sv.v[2], "b.yaml");
    assert_null(sv.v[3]);
}

static void strv_steal__hands_over_the_array(void **state)
{
    (void)state;
    struct strv sv = STRV_INIT;
    size_t n = 9;
    assert_null(strv_steal(&sv, &n));
    assert_int_equal(n, 0);
    strv_push(&sv, "one");
    strv_push(&sv, "two");
    char **v = strv_steal(&sv, &n);
    assert_int_equal(n, 2);
    assert_null(sv.v);
    assert_int_equal(strv_len(&sv), 0);
    assert_string_equal(v[1], "two");
    assert_null(v[2]);
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
    /* Free empties it and may run again. */
    strv_push(&sv, "three");
    strv_free(&sv);
    assert_null(sv.v);
    assert_int_equal(sv.n, 0);
    strv_free(&sv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(strv_push__copies_and_terminates),
        cmocka_unit_test(strv_find__index_or_minus_one),
        cmocka_unit_test(strv_sort__orders_by_strcmp),
        cmocka_unit_test(strv_steal__hands_over_the_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
