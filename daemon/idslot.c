/* SPDX-License-Identifier: MIT */
#include "idslot.h"

#include <assert.h>
#include <stdlib.h>

#include "alloc.h"

void idslots_init(struct idslots *s, uint32_t base, uint32_t count, uint32_t slots)
{
    assert(slots > 0 && count > 0);
    assert((uint64_t)base + (uint64_t)count * slots <= UINT32_MAX);
    *s = (struct idslots){.base = base, .count = count, .slots = slots};
    s->bits = xcalloc((slots + 63) / 64, sizeof(*s->bits));
}

void idslots_free(struct idslots *s)
{
    free(s->bits);
    s->bits = NULL;
}

bool idslots_take(struct idslots *s, uint32_t *slot)
{
    if (s->used == s->slots) {
        return false;
    }
    uint32_t i = s->cursor;
    for (;;) {
        uint64_t word = s->bits[i / 64] | ((UINT64_C(1) << (i % 64)) - 1); /* below i: skip */
        if (word != UINT64_MAX) {
            uint32_t at = i / 64 * 64 + (uint32_t)__builtin_ctzll(~word);
            if (at < s->slots) {
                s->bits[at / 64] |= UINT64_C(1) << (at % 64);
                s->used++;
                s->cursor = at + 1 == s->slots ? 0 : at + 1;
                *slot = at;
                return true;
            }
        }
        i = (i / 64 + 1) * 64;
        if (i >= s->slots) {
            i = 0; /* used < slots: a free block is below the cursor */
        }
    }
}

void idslots_put(struct idslots *s, uint32_t slot)
{
    assert(slot < s->slots);
    uint64_t bit = UINT64_C(1) << (slot % 64);
    assert(s->bits[slot / 64] & bit);
    s->bits[slot / 64] &= ~bit;
    s->used--;
}

uint32_t idslots_base(const struct idslots *s, uint32_t slot)
{
    assert(slot < s->slots);
    return s->base + slot * s->count;
}
