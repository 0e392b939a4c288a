/* SPDX-License-Identifier: MIT */
#pragma once
/* The combined output cap of a task: stdout and stderr count together, the client gets
 * exactly the first `cap` bytes, and the byte that would exceed it trips the cap.
 * Pure arithmetic, no I/O: unit-tested in tests/unit/test_outcap.c. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outcap {
    uint64_t cap;     /* bytes allowed, stdout + stderr */
    uint64_t passed;  /* bytes let through so far */
    uint64_t dropped; /* bytes seen after the cap */
    bool tripped;     /* more output arrived than the cap allows */
};

void outcap_init(struct outcap *oc, uint64_t cap);
/* Accounts n new bytes; returns how many of them may pass (a prefix of the chunk). When
 * fewer than n pass, the cap has tripped and the task must be killed. */
size_t outcap_take(struct outcap *oc, size_t n);
