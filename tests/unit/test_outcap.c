/* SPDX-License-Identifier: MIT */
/* Output cap accounting: exact prefix, both streams combined, trip on the first extra byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/outcap.h"

static void outcap_take__below_cap_passes_everything(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 100);
    assert_int_equal(outcap_take(&oc, 60), 60);
    assert_int_equal(outcap_take(&oc, 40), 40);
    assert_false(oc.tripped);
    assert_int_equal(oc.passed, 100);
}

static void outcap_take__exactly_cap_does_not_trip(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 32768);
    assert_int_equal(outcap_take(&oc, 32768), 32768);
    assert_false(oc.tripped);
    assert_int_equal(outcap_take(&oc, 0), 0);
    assert_false(oc.tripped);
}

static void outcap_take__one_byte_over_trips(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 10);
    assert_int_equal(outcap_take(&oc, 10), 10);
    assert_int_equal(outcap_take(&oc, 1), 0);
    assert_true(oc.tripped);
    assert_int_equal(oc.dropped, 1);
}

static void outcap_take__chunk_straddling_cap_is_cut_to_prefix(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 100);
    assert_int_equal(outcap_take(&oc, 70), 70); /* stdout */
    assert_int_equal(outcap_take(&oc, 50), 30); /* stderr: only 30 fit */
    assert_true(oc.tripped);
    assert_int_equal(oc.passed, 100);
    assert_int_equal(oc.dropped, 20);
    assert_int_equal(outcap_take(&oc, 5), 0);
    assert_int_equal(oc.dropped, 25);
}

static void outcap_take__zero_cap_passes_nothing(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 0);
    assert_int_equal(outcap_take(&oc, 0), 0);
    assert_false(oc.tripped);
    assert_int_equal(outcap_take(&oc, 1), 0);
    assert_true(oc.tripped);
}

static void outcap_take__many_small_chunks_sum_exactly(void **state)
{
    (void)state;
    struct outcap oc;
    outcap_init(&oc, 32768);
    uint64_t total = 0;
    for (int i = 0; i < 10000; i++) {
        total += outcap_take(&oc, (size_t)(i % 7) + 1);
    }
    assert_int_equal(total, 32768);
    assert_true(oc.tripped);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outcap_take__below_cap_passes_everything),
        cmocka_unit_test(outcap_take__exactly_cap_does_not_trip),
        cmocka_unit_test(outcap_take__one_byte_over_trips),
        cmocka_unit_test(outcap_take__chunk_straddling_cap_is_cut_to_prefix),
        cmocka_unit_test(outcap_take__zero_cap_passes_nothing),
        cmocka_unit_test(outcap_take__many_small_chunks_sum_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
