/* SPDX-License-Identifier: MIT */
/* sandbox/forkserver.c: the loop's request is held until the test answers it, with a child
 * as spawn_sandbox's (fake_spawn.c); a worker's request finds no fork server (fakes.h). */
#include "sandbox/forkserver.h"

#include <fcntl.h>

#include "lib/util.h"

#include "fakes.h"

struct forkserver fake_forkserver;
int fake_forkserver_async_r;
struct forkserver_req *fake_forkserver_req;

int forkserver_spawn(struct forkserver *z, const struct spawn_plan *plan,
                     const struct ctl_setup *setup, const struct image *img,
                     struct spawn_result *ret, struct err *e)
{
    (void)z;
    (void)plan;
    (void)setup;
    (void)img;
    (void)ret;
    (void)e;
    fake_call("forkserver_spawn");
    return -EAGAIN;
}

int forkserver_spawn_async(struct forkserver *z, const struct spawn_plan *plan,
                           const struct ctl_setup *setup, struct forkserver_req *req)
{
    (void)setup;
    fake_call("forkserver_spawn_async");
    if (fake_forkserver_async_r < 0) {
        return fake_forkserver_async_r;
    }
    z->requests++;
    /* The caller closes plan->ctl_fd on return: the fork server would hold it now. */
    fake_init_fd = fd_close(fake_init_fd);
    fake_init_fd = fcntl(plan->ctl_fd, F_DUPFD_CLOEXEC, 3);
    req->plan = *plan;
    fake_forkserver_req = req;
    return 0;
}

void fake_forkserver_answer(int r)
{
    struct forkserver_req *req = take_ptr(&fake_forkserver_req);
    struct spawn_result res = {.pid = -1, .pidfd = -1};
    struct err e = ERR_INIT;
    if (r == 0) {
        r = fake_spawn_child(-1, &res);
        (void)err_set(&e, r, "fake fork");
    } else {
        (void)err_setx(&e, r, "the pool's fork server was lost");
    }
    req->done(req, r, r == 0 ? &res : NULL, &e);
}
