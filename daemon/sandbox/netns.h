/* SPDX-License-Identifier: MIT */
#pragma once
/* Recycled network namespaces. Creating a network namespace is globally serialized in the
 * kernel and destroying one is deferred to a kernel worker; on a small host both bound the
 * sandbox refill rate. sbxd therefore creates each network namespace once (owned by the
 * host's user namespace, so no task ever holds CAP_NET_ADMIN over it; only `lo`, up), and
 * when a sandbox is gone puts it back in a free list, but only if nothing of the task is
 * left in it (no socket of any kind, TIME_WAIT included). Worker threads only. */
#include <stdint.h>

#include "lib/err.h"

struct netns_pool;

struct netns_stats {
    uint64_t created; /* namespaces made */
    uint64_t reused;  /* handed out again after a clean check */
    uint64_t dropped; /* not clean (or the free list was full): destroyed */
};

/* A network namespace: its fd and its sockstat files, opened inside it so that they go on
 * reading its counters from any thread in any namespace (-1: none, e.g. no IPv6). */
struct netns_ref {
    int fd;
    int sockstat;
    int sockstat6;
};
#define NETNS_REF_NONE ((struct netns_ref){-1, -1, -1})

/* max_free: namespaces kept for reuse. Returns 0 or -errno. */
int netns_pool_new(uint32_t max_free, struct netns_pool **ret, struct err *e);
/* Closes every kept namespace. Accepts NULL; returns NULL. */
struct netns_pool *netns_pool_free(struct netns_pool *p);
/* A clean network namespace for a new sandbox, into *ret, which the caller owns. Worker
 * thread (it switches the calling thread's network namespace briefly when it must create
 * one). Returns 0 or -errno with e saying why. */
int netns_acquire(struct netns_pool *p, struct netns_ref *ret, struct err *e);
/* A kept namespace into *ret, without making one: any thread. Returns 0, or -EAGAIN when
 * none is kept (netns_acquire makes one, on a worker). */
int netns_try_acquire(struct netns_pool *p, struct netns_ref *ret);
/* Takes back a namespace whose sandbox is gone (every process of it dead): kept when
 * clean (its sockstat files, no namespace switch) and there is room, else closed. *ref is
 * NETNS_REF_NONE after. Any thread (the loop, or a worker that emptied a busy cgroup). */
void netns_release(struct netns_pool *p, struct netns_ref *ref);
/* Closes what ref holds; *ref is NETNS_REF_NONE after. */
void netns_ref_close(struct netns_ref *ref);
/* Any thread. */
void netns_get_stats(struct netns_pool *p, struct netns_stats *ret);
