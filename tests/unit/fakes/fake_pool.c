/* SPDX-License-Identifier: MIT */
/* core/pool.c as its tasks see it: a warm sandbox the test set goes at once, else the queue
 * is one waiter, which the test hands a sandbox or refuses (fakes.h). */
#include "core/pool.h"

#include "config/config.h"

#include "fakes.h"

int fake_pool_submit_r;
struct pool_waiter *fake_pool_waiter;
struct sandbox *fake_pool_warm;

int pool_submit(struct pool *p, struct pool_waiter *w)
{
    fake_call("pool_submit %s", p->pc->name);
    if (fake_pool_submit_r < 0) {
        return fake_pool_submit_r;
    }
    if (fake_pool_warm) {
        struct sandbox *sb = fake_pool_warm;
        fake_pool_warm = NULL;
        w->cold = false;
        w->ops->got(w, sb);
        return 0;
    }
    w->cold = true;
    fake_pool_waiter = w;
    return 0;
}

void pool_cancel(struct pool *p, struct pool_waiter *w)
{
    fake_call("pool_cancel %s", p->pc->name);
    if (w == fake_pool_waiter) {
        fake_pool_waiter = NULL;
    }
}

void fake_pool_got(struct sandbox *sb)
{
    struct pool_waiter *w = fake_pool_waiter;
    fake_pool_waiter = NULL;
    w->ops->got(w, sb);
}

void fake_pool_refused(const char *code, const char *message)
{
    struct pool_waiter *w = fake_pool_waiter;
    fake_pool_waiter = NULL;
    w->ops->refused(w, code, message);
}
