/* SPDX-License-Identifier: MIT */
#include "sandbox/idslot.h"

#include <assert.h>
#include <stdlib.h>

#include "lib/alloc.h"

void idslot_init(struct idslots *s, uint32_t base, uint32_t count, uint32_t slots)
{
    assert(slots > 0 && count > 0);
    assert((uint64_t)base + (uint64_t)count * slots <= UINT32_MAX);
    *s = (struct idslots){.base = base, .count = count, .slots = slots};
    s->bits = xcalloc((slots + 63) / 64, sizeof(*s->bits));
}

void idslot_free(struct idslots *s)
{
    free(s->bits);
    s->bits = NULL;
}

bool idslot_take(struct idslots *s, uint32_t *slot)
{
    if (s->used == s->slots) {
        return false;
    }
    /* The k-th free block, k uniform in [0, free). */
    uint32_t k = arc4random_uniform(s->slots - s->used);
    uint32_t words = (s->slots + 63) / 64;
    for (uint32_t w = 0; w < words; w++) {
        uint64_t avail = ~s->bits[w];
        uint32_t tail = s->slots - w * 64;
        if (tail < 64) {
            avail &= (UINT64_C(1) << tail) - 1;
        }
        uint32_t n = (uint32_t)__builtin_popcountll(avail);
        if (k >= n) {
            k -= n;
            continue;
        }
        for (; k > 0; k--) {
            avail &= avail - 1; /* drop the lowest free block */
        }
        uint32_t at = w * 64 + (uint32_t)__builtin_ctzll(avail);
        s->bits[w] |= UINT64_C(1) << (at % 64);
        s->used++;
        *slot = at;
        return true;
    }
    assert(!"idslots: used is below slots but no block is free");
    return false;
}

void idslot_put(struct idslots *s, uint32_t slot)
{
    assert(slot < s->slots);
    uint64_t bit = UINT64_C(1) << (slot % 64);
    assert(s->bits[slot / 64] & bit);
    s->bits[slot / 64] &= ~bit;
    s->used--;
}

uint32_t idslot_base(const struct idslots *s, uint32_t slot)
{
    assert(slot < s->slots);
    return s->base + slot * s->count;
}
