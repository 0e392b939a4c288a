/* SPDX-License-Identifier: MIT */
/* sbx-load's latency histogram: bucket boundaries, the 1/64 relative error bound, exact
 * ranks for percentiles, clamping at the top of the range, merging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../loadtest/hist.h"

static int hist_setup(void **state)
{
    struct hist *h = malloc(sizeof(*h));
    if (!h) {
        return -1;
    }
    hist_init(h);
    *state = h;
    return 0;
}

static int hist_teardown(void **state)
{
    free(*state);
    return 0;
}

static void hist_bucket__small_values_are_exact(void **state)
{
    (void)state;
    for (uint64_t v = 0; v < HIST_SUB; v++) {
        assert_int_equal(hist_bucket(v), v);
        assert_int_equal(hist_bucket_low(v), v);
        assert_int_equal(hist_bucket_high(v), v);
    }
    /* 64..127 are still exact: the first power of two has unit-wide buckets. */
    assert_int_equal(hist_bucket(64), 64);
    assert_int_equal(hist_bucket(127), 127);
    assert_int_equal(hist_bucket_high(hist_bucket(127)), 127);
    assert_int_equal(hist_bucket(128), 128);
    assert_int_equal(hist_bucket(129), 128);
    assert_int_equal(hist_bucket_low(128), 128);
    assert_int_equal(hist_bucket_high(128), 129);
}

static void hist_bucket__buckets_tile_the_range_without_gaps(void **state)
{
    (void)state;
    assert_int_equal(hist_bucket_low(0), 0);
    for (size_t i = 1; i < HIST_BUCKETS; i++) {
        assert_int_equal(hist_bucket_low(i), hist_bucket_high(i - 1) + 1);
        assert_int_equal(hist_bucket(hist_bucket_low(i)), i);
        assert_int_equal(hist_bucket(hist_bucket_high(i)), i);
    }
    assert_int_equal(hist_bucket_high(HIST_BUCKETS - 1), HIST_MAX_US);
}

static void hist_bucket__relative_error_below_one_64th(void **state)
{
    (void)state;
    for (uint64_t v = 1; v <= HIST_MAX_US; v = v * 17 / 16 + 1) {
        size_t b = hist_bucket(v);
        uint64_t lo = hist_bucket_low(b);
        uint64_t hi = hist_bucket_high(b);
        assert_true(lo <= v && v <= hi);
        assert_true((hi - lo) * 64 <= lo);
    }
}

static void hist_bucket__sixty_seconds_is_in_range(void **state)
{
    (void)state;
    uint64_t sixty_s = UINT64_C(60000000);
    assert_true(sixty_s <= HIST_MAX_US);
    assert_true(hist_bucket(sixty_s) < HIST_BUCKETS - 1);
    assert_int_equal(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
}

static void hist_percentile__empty_is_zero(void **state)
{
    struct hist *h = *state;
    assert_int_equal(hist_percentile(h, 50), 0);
    assert_int_equal(hist_percentile(h, 100), 0);
    assert_true(hist_mean(h) == 0.0);
}

static void hist_percentile__uniform_1_to_1000_ranks(void **state)
{
    struct hist *h = *state;
    for (uint64_t v = 1; v <= 1000; v++) {
        hist_record(h, v);
    }
    assert_int_equal(h->count, 1000);
    assert_int_equal(h->min_us, 1);
    assert_int_equal(h->max_us, 1000);
    /* Rank 500 is 500, in the bucket [496, 503]: reported as its top. */
    assert_int_equal(hist_percentile(h, 50), hist_bucket_high(hist_bucket(500)));
    assert_true(hist_percentile(h, 50) >= 500 && hist_percentile(h, 50) <= 500 + 500 / 64);
    /* 99.9 % of 1000 is rank 999, not 1000. */
    assert_int_equal(hist_percentile(h, 99.9), hist_bucket_high(hist_bucket(999)));
    assert_int_equal(hist_percentile(h, 100), 1000);
    /* The top bucket is clamped to the exact max. */
    assert_int_equal(hist_percentile(h, 99.99), 1000);
    assert_int_equal(hist_percentile(h, 0.1), 1);
    assert_true(hist_mean(h) > 500.49 && hist_mean(h) < 500.51);
}

static void hist_percentile__single_value_everywhere(void **state)
{
    struct hist *h = *state;
    hist_record(h, 12345);
    assert_int_equal(hist_percentile(h, 1), 12345);
    assert_int_equal(hist_percentile(h, 50), 12345);
    assert_int_equal(hist_percentile(h, 99.9), 12345);
}

static void hist_percentile__tail_is_found(void **state)
{
    struct hist *h = *state;
    for (int i = 0; i < 990; i++) {
        hist_record(h, 2000);
    }
    for (int i = 0; i < 10; i++) {
        hist_record(h, 50000);
    }
    /* 2000 lies in [1984, 2015]: reported as the bucket's top, within 1/64. */
    assert_int_equal(hist_percentile(h, 50), 2015);
    assert_int_equal(hist_percentile(h, 99), 2015);
    uint64_t p999 = hist_percentile(h, 99.9);
    assert_true(p999 >= 50000 && p999 <= 50000 + 50000 / 64);
}

static void hist_record__above_range_clamps_bucket_keeps_max(void **state)
{
    struct hist *h = *state;
    hist_record(h, UINT64_C(100000000)); /* 100 s */
    assert_int_equal(h->buckets[HIST_BUCKETS - 1], 1);
    assert_int_equal(h->max_us, UINT64_C(100000000));
    assert_int_equal(hist_percentile(h, 50), UINT64_C(100000000));
}

static void hist_merge__sums_counts_and_extremes(void **state)
{
    struct hist *h = *state;
    struct hist *o = malloc(sizeof(*o));
    assert_non_null(o);
    hist_init(o);
    hist_record(h, 10);
    hist_record(h, 20);
    hist_record(o, 5);
    hist_record(o, 7000);
    hist_merge(h, o);
    assert_int_equal(h->count, 4);
    assert_int_equal(h->min_us, 5);
    assert_int_equal(h->max_us, 7000);
    assert_int_equal(h->sum_us, 7035);
    assert_int_equal(hist_percentile(h, 25), 5);
    assert_int_equal(hist_percentile(h, 50), 10);
    hist_init(o);
    hist_merge(h, o); /* merging an empty histogram changes nothing */
    assert_int_equal(h->min_us, 5);
    assert_int_equal(h->count, 4);
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hist_bucket__small_values_are_exact),
        cmocka_unit_test(hist_bucket__buckets_tile_the_range_without_gaps),
        cmocka_unit_test(hist_bucket__relative_error_below_one_64th),
        cmocka_unit_test(hist_bucket__sixty_seconds_is_in_range),
        cmocka_unit_test_setup_teardown(hist_percentile__empty_is_zero, hist_setup, hist_teardown),
        cmocka_unit_test_setup_teardown(hist_percentile__uniform_1_to_1000_ranks, hist_setup,
                                        hist_teardown),
        cmocka_unit_test_setup_teardown(hist_percentile__single_value_everywhere, hist_setup,
                                        hist_teardown),
        cmocka_unit_test_setup_teardown(hist_percentile__tail_is_found, hist_setup, hist_teardown),
        cmocka_unit_test_setup_teardown(hist_record__above_range_clamps_bucket_keeps_max,
                                        hist_setup, hist_teardown),
        cmocka_unit_test_setup_teardown(hist_merge__sums_counts_and_extremes, hist_setup,
                                        hist_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
