/* SPDX-License-Identifier: MIT */
/* Unit tests of lib/buf.c: growth in powers of two with the NUL counted, the cap refusing
 * before anything grows, formatted appends, reading into the free room, and the hand-overs
 * (steal, reset, free). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/util.h"

static void buf_append__grows_in_powers_of_two_and_terminates(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    assert_int_equal(buf_append(&b, "abc", 3), 0);
    assert_int_equal(b.len, 3);
    assert_int_equal(b.cap, BUF_MIN);
    assert_string_equal(b.p, "abc");
    /* 63 bytes and the NUL fill 64 exactly; one more doubles. */
    char x[60];
    memset(x, 'x', sizeof(x));
    assert_int_equal(buf_append(&b, x, sizeof(x)), 0);
    assert_int_equal(b.len, 63);
    assert_int_equal(b.cap, 64);
    assert_int_equal(buf_append(&b, "y", 1), 0);
    assert_int_equal(b.cap, 128);
    assert_int_equal(b.p[64], '\0');
    /* Binary data keeps its NULs. */
    assert_int_equal(buf_append(&b, "\0z", 2), 0);
    assert_int_equal(b.len, 66);
    assert_int_equal(b.p[65], 'z');
    /* A large append goes straight to the power of two that holds it. */
    char big[1000] = {0};
    assert_int_equal(buf_append(&b, big, sizeof(big)), 0);
    assert_int_equal(b.cap, 2048);
}

static void buf_reserve__one_allocation_of_the_size_asked(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    assert_int_equal(buf_reserve(&b, 255), 0);
    assert_int_equal(b.cap, 256);
    assert_int_equal(buf_room(&b), 255);
    assert_int_equal(b.len, 0);
    char *p = b.p;
    char x[255];
    memset(x, 'x', sizeof(x));
    assert_int_equal(buf_append(&b, x, sizeof(x)), 0);
    assert_ptr_equal(b.p, p); /* no growth: the room was there */
    assert_int_equal(buf_room(&b), 0);
}

static void buf_append__cap_refuses_and_leaves_the_buffer(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT_MAX(10);
    assert_int_equal(buf_append(&b, "0123456789", 10), 0);
    assert_int_equal(buf_append(&b, "a", 1), -ENOBUFS);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.p, "0123456789");
    /* Growth stops at the cap plus the NUL, not at the next power of two. */
    assert_int_equal(b.cap, 11);
    scoped(buf_free) struct buf c = BUF_INIT_MAX(100);
    char x[100] = {0};
    assert_int_equal(buf_append(&c, x, 70), 0);
    assert_int_equal(c.cap, 101);
    assert_int_equal(buf_append(&c, x, 30), 0);
    assert_int_equal(buf_append(&c, x, 1), -ENOBUFS);
    /* A size that would overflow is refused by the cap, not computed. */
    assert_int_equal(buf_reserve(&c, SIZE_MAX), -ENOBUFS);
    assert_null(buf_push(&c, 1));
}

static void buf_printf__formats_within_and_past_the_room(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    assert_int_equal(buf_printf(&b, "%s=%d", "a", 1), 0);
    assert_string_equal(b.p, "a=1");
    assert_int_equal(b.len, 3);
    char x[200];
    memset(x, 'q', sizeof(x) - 1);
    x[sizeof(x) - 1] = '\0';
    assert_int_equal(buf_printf(&b, " %s|", x), 0); /* past the first 64 bytes */
    assert_int_equal(b.len, 3 + 1 + 199 + 1);
    assert_int_equal(strlen(b.p), b.len);
    assert_int_equal(b.p[b.len - 1], '|');
    assert_int_equal(buf_puts(&b, "end"), 0);
    assert_string_equal(b.p + b.len - 4, "|end");
}

static void buf_printf__cap_refuses_and_leaves_the_buffer(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT_MAX(8);
    assert_int_equal(buf_printf(&b, "%d", 1234), 0);
    /* Fits the memory already there, but not the cap. */
    assert_int_equal(buf_printf(&b, "%d", 56789), -ENOBUFS);
    assert_string_equal(b.p, "1234");
    assert_int_equal(b.len, 4);
    assert_int_equal(buf_printf(&b, "%d", 5678), 0);
    assert_string_equal(b.p, "12345678");
    assert_int_equal(buf_printf(&b, "%s", ""), 0);
    assert_int_equal(buf_printf(&b, "%c", 'x'), -ENOBUFS);
    assert_string_equal(b.p, "12345678");
}

static void buf_commit__counts_bytes_read_into_the_room(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    assert_int_equal(buf_room(&b), 0);
    assert_int_equal(buf_reserve(&b, 15), 0);
    assert_int_equal(buf_room(&b), 63); /* BUF_MIN less the NUL */
    memcpy(buf_tail(&b), "hello", 5);
    buf_commit(&b, 5);
    assert_string_equal(b.p, "hello");
    assert_int_equal(buf_room(&b), 58);
    int *rec = buf_push(&b, sizeof(int));
    assert_non_null(rec);
    assert_int_equal(b.len, 5 + sizeof(int));
}

static void buf_consume__drops_the_front(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    assert_int_equal(buf_puts(&b, "abcdef"), 0);
    buf_consume(&b, 0);
    assert_string_equal(b.p, "abcdef");
    buf_consume(&b, 2);
    assert_string_equal(b.p, "cdef");
    assert_int_equal(b.len, 4);
    buf_consume(&b, 4);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.p, "");
}

static void buf_steal__hands_over_and_empties(void **state)
{
    (void)state;
    struct buf b = BUF_INIT_MAX(100);
    size_t len = 99;
    /* An empty buffer steals as "". */
    char *s = buf_steal(&b, &len);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    assert_int_equal(buf_puts(&b, "text"), 0);
    s = buf_steal(&b, &len);
    assert_string_equal(s, "text");
    assert_int_equal(len, 4);
    free(s);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 100); /* the cap stays */
    buf_free(&b);
    assert_int_equal(b.max, 100);
}

static void buf_reset__keeps_the_memory(void **state)
{
    (void)state;
    scoped(buf_free) struct buf b = BUF_INIT;
    buf_reset(&b); /* before anything: no memory, nothing to do */
    assert_null(b.p);
    assert_int_equal(buf_puts(&b, "abc"), 0);
    char *p = b.p;
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.p, "");
    assert_ptr_equal(b.p, p);
    assert_int_equal(b.cap, BUF_MIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_append__grows_in_powers_of_two_and_terminates),
        cmocka_unit_test(buf_reserve__one_allocation_of_the_size_asked),
        cmocka_unit_test(buf_append__cap_refuses_and_leaves_the_buffer),
        cmocka_unit_test(buf_printf__formats_within_and_past_the_room),
        cmocka_unit_test(buf_printf__cap_refuses_and_leaves_the_buffer),
        cmocka_unit_test(buf_commit__counts_bytes_read_into_the_room),
        cmocka_unit_test(buf_consume__drops_the_front),
        cmocka_unit_test(buf_steal__hands_over_and_empties),
        cmocka_unit_test(buf_reset__keeps_the_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
