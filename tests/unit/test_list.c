/* SPDX-License-Identifier: MIT */
/* Unit tests of lib/list.h: the doubly linked list (push, remove from any place, links of
 * other names) and the singly linked FIFO (append, pop, remove from any place). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "lib/list.h"
#include "lib/util.h"

struct node {
    int v;
    struct node *prev, *next;
    struct node *cprev, *cnext; /* a second list the node is on */
    struct node *qnext;
};

/* The values of a doubly linked list front to back, checking every back link. */
static size_t dlist_values(const struct node *head, int *out, size_t max)
{
    size_t n = 0;
    const struct node *before = NULL;
    for (const struct node *x = head; x && n < max; x = x->next) {
        assert_ptr_equal(x->prev, before);
        out[n++] = x->v;
        before = x;
    }
    return n;
}

static void dlist_push__puts_the_node_first(void **state)
{
    (void)state;
    struct node a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
    struct node *head = NULL;
    DLIST_PUSH(head, &a);
    DLIST_PUSH(head, &b);
    DLIST_PUSH(head, &c);
    int got[4];
    assert_int_equal(dlist_values(head, got, 4), 3);
    assert_int_equal(got[0], 3);
    assert_int_equal(got[1], 2);
    assert_int_equal(got[2], 1);
}

static void dlist_remove__unlinks_first_middle_and_last(void **state)
{
    (void)state;
    struct node n[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    struct node *head = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(n); i++) {
        DLIST_PUSH(head, &n[i]); /* 3 2 1 0 */
    }
    int got[4];
    DLIST_REMOVE(head, &n[2]); /* middle */
    assert_null(n[2].prev);
    assert_null(n[2].next);
    assert_int_equal(dlist_values(head, got, 4), 3);
    assert_int_equal(got[0], 3);
    assert_int_equal(got[1], 1);
    assert_int_equal(got[2], 0);
    DLIST_REMOVE(head, &n[3]); /* first */
    assert_ptr_equal(head, &n[1]);
    DLIST_REMOVE(head, &n[0]); /* last */
    assert_int_equal(dlist_values(head, got, 4), 1);
    assert_int_equal(got[0], 1);
    DLIST_REMOVE(head, &n[1]);
    assert_null(head);
}

static void dlist_push_l__keeps_two_lists_apart(void **state)
{
    (void)state;
    struct node a = {.v = 1}, b = {.v = 2};
    struct node *all = NULL, *some = NULL;
    DLIST_PUSH(all, &a);
    DLIST_PUSH(all, &b);
    DLIST_PUSH_L(some, &a, cprev, cnext);
    DLIST_PUSH_L(some, &b, cprev, cnext);
    DLIST_REMOVE_L(some, &b, cprev, cnext);
    assert_ptr_equal(some, &a);
    assert_null(a.cnext);
    assert_null(a.cprev);
    /* The other list is untouched. */
    assert_ptr_equal(all, &b);
    assert_ptr_equal(b.next, &a);
    assert_ptr_equal(a.prev, &b);
}

static void dlist_append__keeps_order_and_tail(void **state)
{
    (void)state;
    struct node n[3] = {{.v = 0}, {.v = 1}, {.v = 2}};
    struct node *head = NULL, *tail = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(n); i++) {
        DLIST_APPEND(head, tail, &n[i]);
    }
    int got[4];
    assert_int_equal(dlist_values(head, got, 4), 3);
    assert_int_equal(got[0], 0);
    assert_int_equal(got[2], 2);
    assert_ptr_equal(tail, &n[2]);
}

static void dlist_unlink__fixes_head_and_tail(void **state)
{
    (void)state;
    struct node n[3] = {{.v = 0}, {.v = 1}, {.v = 2}};
    struct node *head = NULL, *tail = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(n); i++) {
        DLIST_APPEND(head, tail, &n[i]);
    }
    int got[4];
    DLIST_UNLINK(head, tail, &n[2]); /* last */
    assert_ptr_equal(tail, &n[1]);
    assert_null(n[1].next);
    assert_null(n[2].prev);
    DLIST_UNLINK(head, tail, &n[0]); /* first */
    assert_ptr_equal(head, &n[1]);
    assert_int_equal(dlist_values(head, got, 4), 1);
    DLIST_UNLINK(head, tail, &n[1]); /* the only one */
    assert_null(head);
    assert_null(tail);
    DLIST_APPEND(head, tail, &n[2]);
    assert_ptr_equal(head, &n[2]);
    assert_ptr_equal(tail, &n[2]);
    assert_null(n[2].prev);
}

static void slist_append__keeps_fifo_order(void **state)
{
    (void)state;
    struct node n[3] = {{.v = 0}, {.v = 1}, {.v = 2}};
    struct node *head = NULL, *tail = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(n); i++) {
        n[i].qnext = &n[0]; /* stale: append must clear it */
        SLIST_APPEND(head, tail, &n[i], qnext);
    }
    assert_ptr_equal(head, &n[0]);
    assert_ptr_equal(tail, &n[2]);
    assert_null(n[2].qnext);
    int v = 0;
    for (struct node *x = head; x; x = x->qnext) {
        assert_int_equal(x->v, v++);
    }
    assert_int_equal(v, 3);
}

static void slist_pop__takes_the_first_and_empties_the_tail(void **state)
{
    (void)state;
    struct node a = {.v = 1}, b = {.v = 2};
    struct node *head = NULL, *tail = NULL;
    assert_null(SLIST_POP(head, tail, qnext));
    SLIST_APPEND(head, tail, &a, qnext);
    SLIST_APPEND(head, tail, &b, qnext);
    struct node *x = SLIST_POP(head, tail, qnext);
    assert_ptr_equal(x, &a);
    assert_null(a.qnext);
    assert_ptr_equal(head, &b);
    assert_ptr_equal(tail, &b);
    assert_ptr_equal(SLIST_POP(head, tail, qnext), &b);
    assert_null(head);
    assert_null(tail);
    /* An emptied queue takes appends again. */
    SLIST_APPEND(head, tail, &a, qnext);
    assert_ptr_equal(head, &a);
    assert_ptr_equal(tail, &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dlist_push__puts_the_node_first),
        cmocka_unit_test(dlist_remove__unlinks_first_middle_and_last),
        cmocka_unit_test(dlist_push_l__keeps_two_lists_apart),
        cmocka_unit_test(dlist_append__keeps_order_and_tail),
        cmocka_unit_test(dlist_unlink__fixes_head_and_tail),
        cmocka_unit_test(slist_append__keeps_fifo_order),
        cmocka_unit_test(slist_pop__takes_the_first_and_empties_the_tail),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
