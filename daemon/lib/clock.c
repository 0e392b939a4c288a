/* SPDX-License-Identifier: MIT */
/* The monotonic clock in nanoseconds. */
#include "lib/clock.h"

#include <time.h>

uint64_t clock_now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
