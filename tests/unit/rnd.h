/* SPDX-License-Identifier: MIT */
#pragma once
/* Deterministic random numbers for the unit tests' random inputs (xorshift64*): the same
 * sequence on every run, so that a failure reproduces. One state per test program. */
#include <stdint.h>

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static inline uint64_t rnd(void)
{
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 0x2545f4914f6cdd1dULL;
}

/* 0 .. n-1 (0 when n is 0). */
static inline uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}
