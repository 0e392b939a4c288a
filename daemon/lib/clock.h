/* SPDX-License-Identifier: MIT */
#pragma once
/* The monotonic clock. */
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t clock_now_ns(void);
