/* SPDX-License-Identifier: MIT */
/* sandbox/netns.c: no namespace is ever made (the tests' sandbox_env has no netns pool);
 * acquiring fails, a reference is closed as the real one closes it (fakes.h). */
#include "sandbox/netns.h"

#include <errno.h>

#include "lib/util.h"

#include "fakes.h"

int netns_acquire(struct netns_pool *p, struct netns_ref *ret, struct err *e)
{
    (void)p;
    *ret = NETNS_REF_NONE;
    fake_call("netns_acquire");
    return err_setx(e, -EOPNOTSUPP, "no network namespaces in the fake");
}

int netns_try_acquire(struct netns_pool *p, struct netns_ref *ret)
{
    (void)p;
    *ret = NETNS_REF_NONE;
    fake_call("netns_try_acquire");
    return -EAGAIN;
}

void netns_release(struct netns_pool *p, struct netns_ref *ref)
{
    (void)p;
    fake_call("netns_release");
    netns_ref_close(ref);
}

void netns_ref_close(struct netns_ref *ref)
{
    ref->fd = fd_close(ref->fd);
    ref->sockstat = fd_close(ref->sockstat);
    ref->sockstat6 = fd_close(ref->sockstat6);
}
