/* SPDX-License-Identifier: MIT */
#pragma once
/* Intrusive lists: the links live in the element, so linking allocates nothing and an
 * element finds its list in O(1). The macros name the link fields, so one element can sit on
 * several lists. Heads, tails and nodes are lvalues; arguments may be evaluated more than
 * once. CHILD-SAFE. */
#include <stdbool.h>
#include <stddef.h>

/* Doubly linked: `head` is the first node (NULL when empty); a node's `prev` and `next`
 * fields (or the two named) link it. Push puts node first; remove unlinks it from wherever
 * it is and clears its own links. */
#define DLIST_PUSH_L(head, node, prev, next)                                                       \
    do {                                                                                           \
        (node)->prev = NULL;                                                                       \
        (node)->next = (head);                                                                     \
        if (head) {                                                                                \
            (head)->prev = (node);                                                                 \
        }                                                                                          \
        (head) = (node);                                                                           \
    } while (0)
#define DLIST_REMOVE_L(head, node, prev, next)                                                     \
    do {                                                                                           \
        if ((node)->prev) {                                                                        \
            (node)->prev->next = (node)->next;                                                     \
        } else {                                                                                   \
            (head) = (node)->next;                                                                 \
        }                                                                                          \
        if ((node)->next) {                                                                        \
            (node)->next->prev = (node)->prev;                                                     \
        }                                                                                          \
        (node)->prev = (node)->next = NULL;                                                        \
    } while (0)
#define DLIST_PUSH(head, node) DLIST_PUSH_L(head, node, prev, next)
#define DLIST_REMOVE(head, node) DLIST_REMOVE_L(head, node, prev, next)

/* Singly linked FIFO: `head` and `tail` (both NULL when empty), a node's `link` field points
 * to the next. Append puts node last; pop takes the first (NULL when empty), clears its link
 * and evaluates to it. */
#define SLIST_APPEND(head, tail, node, link)                                                       \
    do {                                                                                           \
        (node)->link = NULL;                                                                       \
        if (tail) {                                                                                \
            (tail)->link = (node);                                                                 \
        } else {                                                                                   \
            (head) = (node);                                                                       \
        }                                                                                          \
        (tail) = (node);                                                                           \
    } while (0)
#define SLIST_POP(head, tail, link)                                                                \
    ({                                                                                             \
        typeof(head) _first = (head);                                                              \
        if (_first) {                                                                              \
            (head) = _first->link;                                                                 \
            if (!(head)) {                                                                         \
                (tail) = NULL;                                                                     \
            }                                                                                      \
            _first->link = NULL;                                                                   \
        }                                                                                          \
        _first;                                                                                    \
    })
/* Doubly linked with a tail too (`prev` and `next` fields), for a list kept in order:
 * append puts node last; unlink takes it out from wherever it is and clears its links. */
#define DLIST_APPEND(head, tail, node)                                                             \
    do {                                                                                           \
        (node)->prev = (tail);                                                                     \
        SLIST_APPEND(head, tail, node, next);                                                      \
    } while (0)
#define DLIST_UNLINK(head, tail, node)                                                             \
    do {                                                                                           \
        if (!(node)->next) {                                                                       \
            (tail) = (node)->prev;                                                                 \
        }                                                                                          \
        DLIST_REMOVE(head, node);                                                                  \
    } while (0)
