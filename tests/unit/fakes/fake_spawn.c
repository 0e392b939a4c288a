/* SPDX-License-Identifier: MIT */
/* sandbox/spawn.c: init is a real child that pauses until it is killed, so that the
 * sandbox's pidfd, SIGKILL and reaping are the kernel's; the test plays init on a dup of
 * the control socket's child end (fakes.h). */
#include "sandbox/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/sys.h"
#include "lib/util.h"

#include "fakes.h"

int fake_spawn_r;
int fake_init_fd = -1;
int fake_init_pidfd = -1;
pid_t fake_init_pid = -1;

int fake_spawn_child(int ctl_fd, struct spawn_result *ret)
{
    if (ctl_fd >= 0) {
        fake_init_fd = fd_close(fake_init_fd);
        fake_init_fd = fcntl(ctl_fd, F_DUPFD_CLOEXEC, 3);
        if (fake_init_fd < 0) {
            return -errno;
        }
    }
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) < 0) {
        return -errno;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int r = -errno;
        (void)close(ready[0]);
        (void)close(ready[1]);
        return r;
    }
    if (pid == 0) {
        /* init leads a session of its own (sandbox.c sets its nice value by group) and
         * holds none of the test's fds: its control socket is the test's. */
        (void)setsid();
        if (write(ready[1], "x", 1) != 1) {
            _exit(1);
        }
        (void)close_range(3, ~0U, 0);
        for (;;) {
            (void)pause();
        }
    }
    (void)close(ready[1]);
    char c;
    (void)RETRY_EINTR(read(ready[0], &c, 1)); /* it is in its session: as spawn returns */
    (void)close(ready[0]);
    int pidfd = sys_pidfd_open(pid, 0);
    if (pidfd < 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        return pidfd;
    }
    fake_init_pidfd = fd_close(fake_init_pidfd);
    fake_init_pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    fake_init_pid = pid;
    ret->pid = pid;
    ret->pidfd = pidfd;
    return 0;
}

void fake_init_kill(void)
{
    if (fake_init_pidfd >= 0) {
        (void)sys_pidfd_send_signal(fake_init_pidfd, SIGKILL);
    }
}

void fake_init_cleanup(void)
{
    if (fake_init_pidfd >= 0) {
        /* Killed and reaped unless the sandbox reaped it already (ECHILD then). */
        fake_init_kill();
        siginfo_t si;
        (void)RETRY_EINTR(waitid(P_PIDFD, (id_t)fake_init_pidfd, &si, WEXITED));
    }
    fake_init_pidfd = fd_close(fake_init_pidfd);
    fake_init_fd = fd_close(fake_init_fd);
    fake_init_pid = -1;
}

int spawn_sandbox(const struct spawn_plan *plan, struct spawn_result *ret, struct err *e)
{
    fake_call("spawn_sandbox");
    if (fake_spawn_r < 0) {
        return err_setx(e, fake_spawn_r, "clone3: fake failure");
    }
    int r = fake_spawn_child(plan->ctl_fd, ret);
    return r < 0 ? err_set(e, r, "fake spawn") : 0;
}
