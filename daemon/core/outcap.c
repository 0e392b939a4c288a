/* SPDX-License-Identifier: MIT */
/* Combined stdout+stderr cap accounting for one task. No I/O and no allocation. */
#include "core/outcap.h"

void outcap_init(struct outcap *oc, uint64_t cap)
{
    oc->cap = cap;
    oc->passed = 0;
    oc->dropped = 0;
    oc->tripped = false;
}

size_t outcap_take(struct outcap *oc, size_t n)
{
    uint64_t room = oc->cap - oc->passed;
    if ((uint64_t)n <= room) {
        oc->passed += n;
        return n;
    }
    oc->passed += room;
    oc->dropped += (uint64_t)n - room;
    oc->tripped = true;
    return (size_t)room;
}
