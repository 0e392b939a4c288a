/* SPDX-License-Identifier: MIT */
/* Log-linear latency histogram for sbx-load: bucket arithmetic, recording, merging and
 * percentiles. Pure computation over a fixed array: no allocation, no I/O. */
#include "hist.h"

#include <string.h>

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min_us = UINT64_MAX;
}

size_t hist_bucket(uint64_t us)
{
    if (us > HIST_MAX_US) {
        us = HIST_MAX_US;
    }
    if (us < HIST_SUB) {
        return (size_t)us;
    }
    /* exp >= HIST_SUB_BITS; the top HIST_SUB_BITS + 1 bits select the sub-bucket. */
    unsigned exp = 63u - (unsigned)__builtin_clzll(us);
    unsigned shift = exp - HIST_SUB_BITS;
    uint64_t sub = (us >> shift) - HIST_SUB;
    return HIST_SUB + (size_t)shift * HIST_SUB + (size_t)sub;
}

uint64_t hist_bucket_low(size_t idx)
{
    if (idx < HIST_SUB) {
        return idx;
    }
    size_t shift = (idx - HIST_SUB) / HIST_SUB;
    uint64_t sub = (idx - HIST_SUB) % HIST_SUB;
    return (HIST_SUB + sub) << shift;
}

uint64_t hist_bucket_high(size_t idx)
{
    if (idx < HIST_SUB) {
        return idx;
    }
    size_t shift = (idx - HIST_SUB) / HIST_SUB;
    return hist_bucket_low(idx) + (UINT64_C(1) << shift) - 1;
}

void hist_record(struct hist *h, uint64_t us)
{
    h->buckets[hist_bucket(us)]++;
    h->count++;
    h->sum_us += us;
    if (us < h->min_us) {
        h->min_us = us;
    }
    if (us > h->max_us) {
        h->max_us = us;
    }
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    if (src->count == 0) {
        return;
    }
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        dst->buckets[i] += src->buckets[i];
    }
    dst->count += src->count;
    dst->sum_us += src->sum_us;
    if (src->min_us < dst->min_us) {
        dst->min_us = src->min_us;
    }
    if (src->max_us > dst->max_us) {
        dst->max_us = src->max_us;
    }
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    if (h->count == 0) {
        return 0;
    }
    if (p >= 100.0) {
        return h->max_us;
    }
    if (p < 0.0) {
        p = 0.0;
    }
    /* The rank of the wanted value, 1-based: ceil(p% of count), at least the first. */
    /* The tiny shave keeps 99.9% of 1000 at rank 999 despite 99.9 not being exact. */
    double want = p * (double)h->count / 100.0 * (1.0 - 1e-12);
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want) {
        rank++;
    }
    if (rank < 1) {
        rank = 1;
    }
    uint64_t seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = hist_bucket_high(i);
            if (v > h->max_us) {
                v = h->max_us;
            }
            if (v < h->min_us) {
                v = h->min_us;
            }
            return v;
        }
    }
    return h->max_us;
}

double hist_mean(const struct hist *h)
{
    return h->count ? (double)h->sum_us / (double)h->count : 0.0;
}
