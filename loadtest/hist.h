/* SPDX-License-Identifier: MIT */
#pragma once
/* A log-linear latency histogram in the manner of HdrHistogram: values in microseconds,
 * exact below 64 us, then 64 sub-buckets per power of two, so any value is reported within
 * 1/64 (1.6 %) of what was recorded. Fixed size, no allocation: embed it or put it on the
 * stack. Values above HIST_MAX_US land in the top bucket; min, max and sum stay exact. */
#include <stddef.h>
#include <stdint.h>

#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS) /* sub-buckets per power of two */
#define HIST_MAX_EXP 25                /* 2^26 us = 67 s: the range covers 60 s */
#define HIST_MAX_US ((UINT64_C(1) << (HIST_MAX_EXP + 1)) - 1)
#define HIST_BUCKETS (HIST_SUB + (HIST_MAX_EXP - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
    uint64_t count;
    uint64_t min_us; /* UINT64_MAX while empty */
    uint64_t max_us;
    uint64_t sum_us;
    uint64_t buckets[HIST_BUCKETS];
};

/* Empties h. */
void hist_init(struct hist *h);
/* Records one value in microseconds. */
void hist_record(struct hist *h, uint64_t us);
/* Adds every value of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);
/* The value at percentile p (0 < p <= 100): the highest value of the bucket holding the
 * ceil(p% * count)-th smallest value, clamped to [min, max]. 0 when h is empty. */
uint64_t hist_percentile(const struct hist *h, double p);
/* Mean in microseconds; 0 when empty. */
double hist_mean(const struct hist *h);

/* The bucket of a value (values above HIST_MAX_US map to the last bucket). */
size_t hist_bucket(uint64_t us);
/* The lowest and highest value a bucket holds (idx < HIST_BUCKETS). */
uint64_t hist_bucket_low(size_t idx);
uint64_t hist_bucket_high(size_t idx);
