/* SPDX-License-Identifier: MIT */
/* sandbox/sandbox.c as its owner sees it: sandbox_create and sandbox_kill logged, and the
 * rest of a sandbox's life driven by the test, reported through the owner's ops in the
 * order sandbox.c reports them (fakes.h). */
#include "sandbox/sandbox.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/alloc.h"
#include "lib/util.h"

#include "fakes.h"

struct sandbox *fake_sandbox[FAKE_SANDBOXES];
size_t fake_n_sandbox;

static void set_state(struct sandbox *sb, enum sandbox_state to)
{
    if (sb->state == to) {
        return;
    }
    enum sandbox_state from = sb->state;
    sb->state = to;
    sb->ops->state(sb->owner, sb, from, to);
}

void sandbox_create(struct sandbox_kit *kit, const struct sandbox_ops *ops, void *arg)
{
    struct sandbox *sb = xcalloc(1, sizeof(*sb));
    sb->kit = kit;
    sb->ops = ops;
    sb->owner = arg;
    sb->pid = -1;
    sb->pidfd = -1;
    sb->ctl_fd = -1;
    sb->proxy_fd = -1;
    sb->state = SB_CREATING;
    sb->created_ns = clock_now_ns();
    (void)snprintf(sb->id, sizeof(sb->id), "sb%zu", fake_n_sandbox);
    if (fake_n_sandbox < FAKE_SANDBOXES) {
        fake_sandbox[fake_n_sandbox] = sb;
    }
    fake_n_sandbox++;
    fake_call("sandbox_create %s", sb->id);
}

void sandbox_kill(struct sandbox *sb)
{
    fake_call("sandbox_kill %s", sb->id);
    if (sb->state == SB_DEAD || sb->state == SB_DYING) {
        return;
    }
    if (sb->state == SB_WARM) {
        sb->ops->unwarm(sb->owner, sb);
    }
    set_state(sb, SB_DYING);
}

void fake_sandbox_created(struct sandbox *sb, bool ok)
{
    sb->ops->created(sb->owner, sb, ok);
}

void fake_sandbox_ready(struct sandbox *sb)
{
    sb->ready_ns = clock_now_ns();
    set_state(sb, SB_WARM);
    sb->ops->ready(sb->owner, sb);
}

void fake_sandbox_failed(struct sandbox *sb, const char *msg)
{
    struct err e = ERR_INIT;
    err_setx(&e, -EIO, "%s", msg);
    sb->ops->failed(sb->owner, sb, &e);
}

void fake_sandbox_start_task(struct sandbox *sb)
{
    set_state(sb, SB_BUSY);
}

void fake_sandbox_gone(struct sandbox *sb)
{
    if (sb->state == SB_WARM) {
        sb->ops->unwarm(sb->owner, sb);
    }
    set_state(sb, SB_DEAD);
    const struct sandbox_ops *ops = sb->ops;
    void *owner = sb->owner;
    for (size_t i = 0; i < FAKE_SANDBOXES; i++) {
        if (fake_sandbox[i] == sb) {
            fake_sandbox[i] = NULL;
        }
    }
    free(sb);
    ops->freed(owner);
}

void fake_sandbox_free_all(void)
{
    for (size_t i = 0; i < FAKE_SANDBOXES; i++) {
        free(fake_sandbox[i]);
        fake_sandbox[i] = NULL;
    }
    fake_n_sandbox = 0;
}
