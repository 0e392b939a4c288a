/* SPDX-License-Identifier: MIT */
#pragma once
/* What a sandbox is made from. struct sandbox_env: the services every sandbox shares (the
 * loop, the config, the cgroup root, the network namespaces and host id blocks, the worker
 * threads, the init binary, and the reaper's live set as callbacks), one per daemon, filled
 * by main. struct sandbox_kit: one per pool, what its sandboxes are made of (limits, seccomp
 * program, image, fork server) and the emptied cgroups kept for its next ones. Neither knows
 * who owns the sandboxes: that is struct sandbox_ops (sandbox.h). Loop thread only. */
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"
#include "sandbox/cgroup.h"

struct cgroup_root;
struct config;
struct forkserver;
struct idslots;
struct image;
struct netns_pool;
struct pool_config;
struct sock_filter;
struct workq;

/* The reaper's set of live cgroup names (reaper.h), which its leak sweep checks against:
 * a name is tracked before its cgroup exists and untracked once it is removed. */
typedef void (*sandbox_track_cb)(void *arg, const char *cg_name);

struct sandbox_env {
    uv_loop_t *loop;
    const struct config *cfg;
    struct cgroup_root *cg_root;
    struct netns_pool *netns; /* recycled network namespaces (NULL: one per sandbox) */
    struct idslots *ids;      /* host id blocks, one per live sandbox (with userns) */
    struct workq *workq;      /* the threads that create and remove sandboxes */
    const char *init_path;
    uint32_t instance;     /* prefixes sandbox ids */
    uint64_t next_sandbox; /* sandbox_create's counter */
    sandbox_track_cb track;
    sandbox_track_cb untrack;
    void *track_arg;
};

struct sandbox_kit {
    struct sandbox_env *env;
    const struct pool_config *pc;
    struct cgroup_limits limits;
    const struct sock_filter *bpf; /* seccomp program (owned by the daemon's set) or NULL */
    uint32_t bpf_n;
    struct image *image; /* the pool's image (image.c; shared, owned by main); NULL: host */
    /* The pool's fork server (forkserver.c), or NULL when sandboxes are made from scratch. */
    struct forkserver *forkserver;
    /* Emptied cgroups of this pool's dead sandboxes, reset for the next ones (sandbox.c);
     * at most pc->max, counting those being emptied (n_spare_pending). */
    struct cgroup **spare_cg;
    uint32_t n_spare;
    uint32_t n_spare_pending;
    bool draining; /* kit_drain: no spare kept, sandboxes killed as soon as they are ready */
};

/* Makes the kit of a pool (its io limits' disk is looked up here; a fork server is made
 * when the config allows one). bpf is borrowed. Returns 0 or -errno with e. Start-up. */
int kit_new(struct sandbox_env *env, const struct pool_config *pc, const struct sock_filter *bpf,
            uint32_t bpf_n, struct sandbox_kit **ret, struct err *e);
/* Removes the spare cgroups and stops the fork server. Its sandboxes must all be gone.
 * Accepts NULL; returns NULL. */
struct sandbox_kit *kit_free(struct sandbox_kit *k);
/* The drain began: no more spares are kept; a sandbox that becomes ready is killed. */
void kit_drain(struct sandbox_kit *k);
/* Whether the kit's image is still being verified (no sandbox can be made until then). */
bool kit_image_pending(const struct sandbox_kit *k);
/* A spare cgroup for a new sandbox (the caller owns it), or NULL. */
struct cgroup *kit_take_cgroup(struct sandbox_kit *k);
/* Whether one more emptied cgroup may be kept; if so, it counts as pending from now. */
bool kit_reserve_spare(struct sandbox_kit *k);
/* Ends a reservation: cg (reset, owned by the kit from now; removed by kit_free) or NULL
 * when it was not kept. */
void kit_put_cgroup(struct sandbox_kit *k, struct cgroup *cg);
