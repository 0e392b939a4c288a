/* SPDX-License-Identifier: MIT */
/* A pool's kit: what its sandboxes are made of (limits, seccomp program, image, fork server)
 * and the emptied cgroups kept for its next sandboxes. It owns the spares and the fork
 * server; it never decides when a sandbox is made (core/pool.c does). */
#define LOG_MOD "pool"
#include "sandbox/kit.h"

#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "sandbox/forkserver.h"
#include "sandbox/image.h"

/* The disk a pool's sandboxes read their image from, for its io limits: a built image's
 * under images_dir (image.c) when it is there, else the host's /usr, which the host image
 * binds (and a built image that is missing falls back to). */
static int kit_io_disk(const struct config *cfg, const struct pool_config *pc, dev_t *ret,
                       struct err *e)
{
    scoped_free char *img = NULL;
    const char *path = "/usr";
    if (strcmp(pc->image, "host") != 0) {
        scoped_free char *dir = image_dir_of(cfg);
        img = xasprintf("%s/%s", dir, pc->image);
        if (access(img, F_OK) == 0) {
            path = img;
        }
    }
    int r = cgroup_block_disk(path, ret, e);
    return r < 0 ? err_prefix(e, r, "pool %s: io limits", pc->name) : 0;
}

int kit_new(struct sandbox_env *env, const struct pool_config *pc, const struct sock_filter *bpf,
            uint32_t bpf_n, struct sandbox_kit **ret, struct err *e)
{
    dev_t io_dev = 0;
    if (pool_config_limits_io(pc)) {
        int r = kit_io_disk(env->cfg, pc, &io_dev, e);
        if (r < 0) {
            return r;
        }
    }
    struct sandbox_kit *k = xcalloc(1, sizeof(*k));
    k->env = env;
    k->pc = pc;
    k->limits.memory_bytes = pc->memory_bytes;
    k->limits.cpu = pc->cpu;
    k->limits.pids = pc->pids;
    k->limits.io_dev = io_dev;
    k->limits.io_read_bps = pc->io_read_bps;
    k->limits.io_read_iops = pc->io_read_iops;
    k->bpf = bpf;
    k->bpf_n = bpf_n;
    /* The fork server forks sandboxes into user namespaces: without them, none. */
    if (env->cfg->fork_server && env->cfg->userns) {
        k->forkserver = forkserver_new(pc->name, env->loop);
    }
    *ret = k;
    return 0;
}

/* At shutdown, on the loop: the spares are empty, so this is one rmdir per hierarchy. */
static void free_spares(struct sandbox_kit *k)
{
    for (uint32_t i = 0; i < k->n_spare; i++) {
        struct cgroup *cg = k->spare_cg[i];
        struct err e = ERR_INIT;
        if (cgroup_remove(cg, &e) < 0) {
            log_error("pool=%s cgroup=%s msg=\"spare cgroup not removed\" detail=\"%s\"",
                      k->pc->name, cgroup_name(cg), err_msg(&e));
        } else {
            k->env->untrack(k->env->track_arg, cgroup_name(cg));
        }
        cgroup_free(cg);
    }
    k->n_spare = 0;
    free(k->spare_cg);
    k->spare_cg = NULL;
}

struct sandbox_kit *kit_free(struct sandbox_kit *k)
{
    if (k) {
        free_spares(k);
        k->forkserver = forkserver_free(k->forkserver);
        free(k);
    }
    return NULL;
}

void kit_drain(struct sandbox_kit *k)
{
    k->draining = true;
}

bool kit_image_pending(const struct sandbox_kit *k)
{
    return image_pending(k->image);
}

struct cgroup *kit_take_cgroup(struct sandbox_kit *k)
{
    return k->n_spare > 0 ? k->spare_cg[--k->n_spare] : NULL;
}

bool kit_reserve_spare(struct sandbox_kit *k)
{
    if (k->draining || k->n_spare + k->n_spare_pending >= k->pc->max) {
        return false;
    }
    k->n_spare_pending++;
    return true;
}

void kit_put_cgroup(struct sandbox_kit *k, struct cgroup *cg)
{
    k->n_spare_pending--;
    if (!cg) {
        return;
    }
    if (!k->spare_cg) {
        k->spare_cg = xcalloc(k->pc->max, sizeof(*k->spare_cg));
    }
    k->spare_cg[k->n_spare++] = cg;
}
