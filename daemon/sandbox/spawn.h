/* SPDX-License-Identifier: MIT */
#pragma once
/* Parent side of sandbox creation: clone3 into new namespaces, id maps, cgroup placement,
 * then execve of sbxd-init with the control socket as CTL_FD. Plan in the parent, execute
 * in the child: everything the child needs is in struct spawn_plan before clone, and the
 * child (child.c) is CHILD-SAFE. Blocking: call from a worker thread. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

struct cgroup;

struct spawn_plan {
    const char *init_path; /* absolute path of sbxd-init */
    bool userns;           /* new user namespace with the map below */
    /* inside ids 0..id_count-1 map to host base..base+count-1, and base creates (so owns)
     * the user namespace (sys_owner_begin); never 0 */
    uint32_t host_id_base;
    uint32_t id_count;
    struct cgroup *cg; /* the sandbox's cgroup: CLONE_INTO_CGROUP on v2, attach on v1 */
    bool cg_attached;  /* v1: the fork server attached it already (forkserver.c) */
    bool sealed;       /* the fork server set its vm.memfd_noexec already (init/forkserver.c) */
    int ctl_fd;        /* the child's end of the control socketpair (becomes CTL_FD) */
    bool join_netns;   /* true: the sandbox joins netns_fd (netns.c) instead of getting a
                          new network namespace from clone3 */
    int netns_fd;
    /* A pool's fork server (forkserver.c) instead of a sandbox: new mount and network
     * namespaces only, as the host's root (userns, cg and join_netns must be unset). */
    bool forkserver;
};

struct spawn_result {
    pid_t pid;
    int pidfd; /* CLOEXEC; owned by the caller */
};

/* Creates the sandbox's init process. On return init runs in its namespaces and cgroup,
 * has exec'd sbxd-init, and waits for CTL_SETUP on its control socket. The parent's
 * ctl_fd stays open (the caller closes it). Returns 0 or -errno with e saying which step. */
int spawn_sandbox(const struct spawn_plan *plan, struct spawn_result *ret, struct err *e);
/* For a sandbox the fork server forked (pid, its pidfd, waiting for CTL_SETUP): writes its id
 * maps from plan, on cgroup v1 attaches it to plan->cg, and unless plan->sealed sets its pid
 * namespace's vm.memfd_noexec to 2 where sbxd can (seccomp_memfd_noexec_fd). Returns 0 or
 * -errno with e. */
int spawn_place(const struct spawn_plan *plan, pid_t pid, int pidfd, struct err *e);
