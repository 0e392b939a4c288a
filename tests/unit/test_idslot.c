/* SPDX-License-Identifier: MIT */
/* Host id blocks for sandboxes: each held by one sandbox, chosen at random among the free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/idslot.h"

static void idslot__blocks_are_disjoint_and_all_are_handed_out(void **state)
{
    (void)state;
    struct idslots s;
    idslot_init(&s, 0x70000000u, 65536, 3);
    uint32_t a, b, c, d;
    assert_true(idslot_take(&s, &a));
    assert_true(idslot_take(&s, &b));
    assert_true(idslot_take(&s, &c));
    assert_true(a < 3 && b < 3 && c < 3);
    assert_true(a != b && b != c && a != c);
    assert_false(idslot_take(&s, &d));
    assert_int_equal(idslot_base(&s, 0), 0x70000000u);
    assert_int_equal(idslot_base(&s, 2), 0x70020000u);
    /* The only free block is the one given back. */
    idslot_put(&s, b);
    assert_true(idslot_take(&s, &d));
    assert_int_equal(d, b);
    assert_false(idslot_take(&s, &d));
    assert_int_equal(s.used, 3);
    idslot_free(&s);
}

static void idslot__all_of_a_partial_word_then_none(void **state)
{
    (void)state;
    struct idslots s;
    idslot_init(&s, 1000, 10, 70);
    uint8_t seen[70] = {0};
    for (int i = 0; i < 70; i++) {
        uint32_t k;
        assert_true(idslot_take(&s, &k));
        assert_true(k < 70);
        assert_int_equal(seen[k], 0);
        seen[k] = 1;
    }
    uint32_t k, m;
    assert_false(idslot_take(&s, &k));
    /* Freed anywhere, in either word, found. */
    idslot_put(&s, 66);
    idslot_put(&s, 3);
    assert_true(idslot_take(&s, &k));
    assert_true(idslot_take(&s, &m));
    assert_true((k == 3 && m == 66) || (k == 66 && m == 3));
    assert_false(idslot_take(&s, &k));
    assert_int_equal(idslot_base(&s, 69), 1000 + 690);
    idslot_free(&s);
}

/* A task sees its block (/proc/self/uid_map). Handed out in turn, the blocks of two of its
 * tasks would say how many sandboxes were made for others in between: with 8 sandboxes
 * alive at a time, 4000 sandboxes came one after the other, and the blocks must not. */
static void idslot__a_block_says_nothing_of_how_many_came_before(void **state)
{
    (void)state;
    enum { SLOTS = 1024, LIVE = 8, TAKES = 4000 };
    struct idslots s;
    idslot_init(&s, 0x70000000u, 65536, SLOTS);
    uint32_t live[LIVE], prev = 0, next_in_turn = 0;
    uint16_t times[SLOTS];
    memset(times, 0, sizeof(times));
    for (int i = 0; i < LIVE; i++) {
        assert_true(idslot_take(&s, &live[i]));
    }
    for (int i = 0; i < TAKES; i++) {
        idslot_put(&s, live[i % LIVE]);
        uint32_t k;
        assert_true(idslot_take(&s, &k));
        live[i % LIVE] = k;
        times[k]++;
        if (i > 0 && k == (prev + 1) % SLOTS) {
            next_in_turn++;
        }
        prev = k;
    }
    /* In turn, nearly every block would follow the previous one; at random about 1 in
     * 1000 does. */
    assert_true(next_in_turn < TAKES / 50);
    unsigned distinct = 0, most = 0;
    for (int i = 0; i < SLOTS; i++) {
        distinct += times[i] > 0;
        most = times[i] > most ? times[i] : most;
    }
    /* 3.9 takes per block on average: every block is taken (all but a few), none often. */
    assert_true(distinct > SLOTS * 9 / 10);
    assert_true(most < 25);
    idslot_free(&s);
}

/* Uniform among the free blocks: the held ones are never taken, the free ones equally. */
static void idslot__uniform_among_the_free(void **state)
{
    (void)state;
    struct idslots s;
    idslot_init(&s, 1000, 10, 4);
    uint32_t k, held[2];
    assert_true(idslot_take(&s, &held[0]));
    assert_true(idslot_take(&s, &held[1]));
    unsigned count[4] = {0};
    for (int i = 0; i < 4000; i++) {
        assert_true(idslot_take(&s, &k));
        count[k]++;
        idslot_put(&s, k);
    }
    assert_int_equal(count[held[0]], 0);
    assert_int_equal(count[held[1]], 0);
    for (int i = 0; i < 4; i++) {
        if (i != (int)held[0] && i != (int)held[1]) {
            /* 2000 expected, sd 32 */
            assert_true(count[i] > 1800 && count[i] < 2200);
        }
    }
    idslot_free(&s);
}

static void idslot__the_last_block_reaches_the_top(void **state)
{
    (void)state;
    struct idslots s;
    /* base + count * slots == UINT32_MAX: the last id is (uid_t)-2. */
    idslot_init(&s, UINT32_MAX - 2u * 65536u, 65536, 2);
    uint32_t a, b;
    assert_true(idslot_take(&s, &a));
    assert_true(idslot_take(&s, &b));
    assert_int_equal(a + b, 1);
    assert_int_equal(idslot_base(&s, 1), UINT32_MAX - 65536u);
    idslot_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idslot__blocks_are_disjoint_and_all_are_handed_out),
        cmocka_unit_test(idslot__all_of_a_partial_word_then_none),
        cmocka_unit_test(idslot__a_block_says_nothing_of_how_many_came_before),
        cmocka_unit_test(idslot__uniform_among_the_free),
        cmocka_unit_test(idslot__the_last_block_reaches_the_top),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
