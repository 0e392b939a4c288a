/* SPDX-License-Identifier: MIT */
/* sandbox/sandbox.c as a task sees it: handing it the task, killing it, its usage and its
 * reports, logged or driven by the test (fakes.h). Not linked with fake_sandbox.c (the
 * pool's view). */
#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"

#include "fakes.h"

int fake_task_start_r;
int fake_task_fd[3] = {-1, -1, -1};
int fake_usage_r;
struct cgroup_usage fake_usage;

struct sandbox *fake_task_sandbox(const char *id)
{
    struct sandbox *sb = xcalloc(1, sizeof(*sb));
    str_copy(sb->id, id, sizeof(sb->id));
    sb->state = SB_WARM;
    sb->pid = -1;
    sb->pidfd = -1;
    sb->ctl_fd = -1;
    sb->proxy_fd = -1;
    sb->task_pid = 2;
    sb->work_fd = -1;
    return sb;
}

/* Silent: the call logs the tests expect are those of sandbox_start_task. */
void sandbox_claim(struct sandbox *sb, const struct sandbox_task_ops *ops, void *arg)
{
    sb->state = SB_HELD;
    sb->task_ops = ops;
    sb->task = arg;
}

int sandbox_work_fd(const struct sandbox *sb)
{
    return sb->work_fd;
}

void sandbox_task_host_ids(const struct sandbox *sb, uid_t *ret_uid, gid_t *ret_gid)
{
    (void)sb;
    *ret_uid = getuid();
    *ret_gid = getgid();
}

int sandbox_start_task(struct sandbox *sb, const struct task_spec *spec, int fds[3],
                       const struct sandbox_task_ops *ops, void *arg, struct err *e)
{
    struct task_spec_iter it;
    const char *arg0 = "";
    size_t len = 0;
    task_spec_argv(spec, &it);
    (void)task_spec_next(&it, &arg0, &len);
    /* The proxy variable egress set, when it did (the request's env has none here). */
    const char *proxy = "";
    size_t proxy_len = 0;
    const char *env;
    size_t env_len;
    task_spec_request_env(spec, &it);
    while (task_spec_next(&it, &env, &env_len)) {
        if (env_len > 11 && memcmp(env, "HTTP_PROXY=", 11) == 0) {
            proxy = env;
            proxy_len = env_len;
        }
    }
    fake_call("sandbox_start_task %s argv0=%.*s cwd=%s%s%.*s", sb->id, (int)len, arg0, spec->cwd,
              proxy_len ? " " : "", (int)proxy_len, proxy);
    if (fake_task_start_r < 0) {
        return err_setx(e, fake_task_start_r, "the fake sandbox refused the task");
    }
    for (int i = 0; i < 3; i++) {
        fake_task_fd[i] = fd_close(fake_task_fd[i]);
        fake_task_fd[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
        if (fake_task_fd[i] < 0) {
            return err_set(e, -errno, "dup");
        }
    }
    sb->state = SB_BUSY;
    sb->task_ops = ops;
    sb->task = arg;
    return 0;
}

void sandbox_detach_task(struct sandbox *sb)
{
    fake_call("sandbox_detach_task %s", sb->id);
    sb->task_ops = NULL;
    sb->task = NULL;
}

void sandbox_kill(struct sandbox *sb)
{
    fake_call("sandbox_kill %s", sb->id);
    if (sb->state != SB_DEAD) {
        sb->state = SB_DYING;
    }
}

int sandbox_usage(struct sandbox *sb, struct cgroup_usage *ret)
{
    fake_call("sandbox_usage %s", sb->id);
    if (fake_usage_r == 0) {
        *ret = fake_usage;
    }
    return fake_usage_r;
}

void fake_task_write(int fd, const char *s)
{
    size_t n = strlen(s);
    if (write(fake_task_fd[fd], s, n) != (ssize_t)n) {
        abort();
    }
}

void fake_task_close_stdio(void)
{
    for (int i = 0; i < 3; i++) {
        fake_task_fd[i] = fd_close(fake_task_fd[i]);
    }
}

static void send_event(struct sandbox *sb, const struct ctl_event *ev)
{
    if (sb->task_ops) {
        sb->task_ops->event(sb->task, ev);
    }
}

void fake_task_exited(struct sandbox *sb, int wstatus)
{
    send_event(sb, &(struct ctl_event){.magic = CTL_MAGIC,
                                       .type = CTL_EXITED,
                                       .wstatus = wstatus,
                                       .pid = sb->task_pid,
                                       .utime_us = 3000,
                                       .stime_us = 1000,
                                       .seccomp_denials = 0});
}

void fake_task_exec_failed(struct sandbox *sb, uint32_t stage, int err, const char *msg)
{
    struct ctl_event ev = {.magic = CTL_MAGIC, .type = CTL_EXEC_FAILED, .err = err, .stage = stage};
    str_copy(ev.msg, msg, sizeof(ev.msg));
    send_event(sb, &ev);
}

void fake_task_died(struct sandbox *sb)
{
    sb->state = SB_DEAD;
    const struct sandbox_task_ops *ops = sb->task_ops;
    void *arg = sb->task;
    sb->task_ops = NULL;
    sb->task = NULL;
    if (ops) {
        ops->died(arg);
    }
}

void sandbox_kill_task(struct sandbox *sb)
{
    fake_call("sandbox_kill_task %s", sb->id);
}

void fake_task_kept_exited(struct sandbox *sb, int wstatus)
{
    /* As sandbox.c reports a kept task's end: detached first, the sandbox held again. */
    const struct sandbox_task_ops *ops = sb->task_ops;
    void *arg = sb->task;
    sb->task_ops = NULL;
    sb->task = NULL;
    sb->state = SB_HELD;
    if (ops) {
        ops->event(arg, &(struct ctl_event){.magic = CTL_MAGIC,
                                            .type = CTL_EXITED,
                                            .wstatus = wstatus,
                                            .pid = sb->task_pid,
                                            .utime_us = 3000,
                                            .stime_us = 1000,
                                            .seccomp_denials = 0});
    }
}
