/* SPDX-License-Identifier: MIT */
#pragma once
/* Blocks of host ids for the sandboxes' user namespaces (config.h, userns.slots): each live
 * sandbox holds one, so that no two sandboxes share a host id, and the base id of its block
 * (its root's host id) creates its namespace. The kernel counts some limits per host id
 * (pipe buffers, fds in flight) and others per namespace owner up the chain of user
 * namespaces (inotify instances and watches, POSIX queue bytes, pending signals): shared
 * ids would let one task spend another's budget, and the host root's (docs/ARCHITECTURE.md).
 * Loop thread only. */
#include <stdbool.h>
#include <stdint.h>

struct idslots {
    uint32_t base;  /* host id of block 0 */
    uint32_t count; /* ids per block */
    uint32_t slots; /* blocks */
    uint32_t used;  /* blocks held */
    uint64_t *bits; /* a set bit is a held block */
};

/* base + count * slots must not exceed UINT32_MAX (config.c checks it). */
void idslot_init(struct idslots *s, uint32_t base, uint32_t count, uint32_t slots);
void idslot_free(struct idslots *s);
/* Takes a free block chosen uniformly at random (arc4random) among the free ones. A task
 * sees its block in /proc/self/uid_map: blocks handed out in turn would tell it how many
 * sandboxes were made for others between two of its tasks. Returns true with *slot set,
 * false when every block is held. */
bool idslot_take(struct idslots *s, uint32_t *slot);
/* Gives block slot back; it must be held. */
void idslot_put(struct idslots *s, uint32_t slot);
/* The first host id of block slot. */
uint32_t idslot_base(const struct idslots *s, uint32_t slot);
