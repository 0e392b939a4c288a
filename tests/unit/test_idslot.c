/* SPDX-License-Identifier: MIT */
/* Host id blocks for sandboxes: each held by one sandbox, handed out in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "idslot.h"

static void idslots__blocks_are_disjoint_and_in_turn(void **state)
{
    (void)state;
    struct idslots s;
    idslots_init(&s, 0x70000000u, 65536, 3);
    uint32_t a, b, c, d;
    assert_true(idslots_take(&s, &a));
    assert_true(idslots_take(&s, &b));
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(idslots_base(&s, a), 0x70000000u);
    assert_int_equal(idslots_base(&s, b), 0x70010000u);
    /* A block given back is taken again only after the others. */
    idslots_put(&s, a);
    assert_true(idslots_take(&s, &c));
    assert_int_equal(c, 2);
    assert_true(idslots_take(&s, &d));
    assert_int_equal(d, 0);
    assert_false(idslots_take(&s, &d));
    assert_int_equal(s.used, 3);
    idslots_free(&s);
}

static void idslots__all_of_a_partial_word_then_none(void **state)
{
    (void)state;
    struct idslots s;
    idslots_init(&s, 1000, 10, 70);
    uint8_t seen[70] = {0};
    for (int i = 0; i < 70; i++) {
        uint32_t k;
        assert_true(idslots_take(&s, &k));
        assert_true(k < 70);
        assert_int_equal(seen[k], 0);
        seen[k] = 1;
    }
    uint32_t k;
    assert_false(idslots_take(&s, &k));
    /* Freed anywhere, found from anywhere: the cursor wrapped to 0. */
    idslots_put(&s, 66);
    idslots_put(&s, 3);
    assert_true(idslots_take(&s, &k));
    assert_int_equal(k, 3);
    assert_true(idslots_take(&s, &k));
    assert_int_equal(k, 66);
    assert_false(idslots_take(&s, &k));
    assert_int_equal(idslots_base(&s, 69), 1000 + 690);
    idslots_free(&s);
}

static void idslots__the_last_block_reaches_the_top(void **state)
{
    (void)state;
    struct idslots s;
    /* base + count * slots == UINT32_MAX: the last id is (uid_t)-2. */
    idslots_init(&s, UINT32_MAX - 2u * 65536u, 65536, 2);
    uint32_t k;
    assert_true(idslots_take(&s, &k));
    assert_true(idslots_take(&s, &k));
    assert_int_equal(idslots_base(&s, k), UINT32_MAX - 65536u);
    idslots_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idslots__blocks_are_disjoint_and_in_turn),
        cmocka_unit_test(idslots__all_of_a_partial_word_then_none),
        cmocka_unit_test(idslots__the_last_block_reaches_the_top),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
