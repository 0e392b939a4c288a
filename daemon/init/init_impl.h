/* SPDX-License-Identifier: MIT */
#pragma once
/* What the parts of sbxd-init share: struct init, one per process, and the functions one
 * part calls in another. pid1.c is pid 1's setup, task_run.c pid 1's side of the tasks (the
 * loop), task_child.c the task's process until its execve (CHILD-SAFE), forkserver.c a
 * pool's fork server. Private to init/: nothing outside sbxd-init includes it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include "wire/ctl.h"
#include "lib/err.h"
#include "init/mount.h"

/* The largest packet we accept: a CTL_TASK (its header and up to CTL_TASK_DATA_MAX bytes of
 * strings), or a CTL_SETUP with the largest filter. */
#define INIT_SETUP_MAX                                                                             \
    (sizeof(struct ctl_setup) + CTL_SECCOMP_MAX_INSNS * sizeof(struct sock_filter))
#define INIT_TASK_MAX (sizeof(struct ctl_task) + CTL_TASK_DATA_MAX)
#define INIT_BUF_SIZE ((INIT_TASK_MAX > INIT_SETUP_MAX ? INIT_TASK_MAX : INIT_SETUP_MAX) + 1)

/* The room left below every stack of init's for its guard page (task_child_guard_page): any page
 * size up to it. */
#define INIT_GUARD_ROOM (64 * 1024)

/* TASK_NONE: the task child waits for its task; TASK_RUNNING: it has it; TASK_DONE: the
 * task ended, or will never start. */
enum init_task_state { TASK_NONE, TASK_RUNNING, TASK_DONE };

struct init;

/* The argument of the task child's clone. */
struct init_child_arg {
    const struct init *in;
    int sock;    /* its end of the socket to init */
    int drop[6]; /* init's fds it must not hold, -1 for none */
};

/* One per process, page-aligned: main's, and in a sandbox forked by the fork server a fresh one
 * (init_forkserver_child) that starts as a copy of the fork server's up to the filter, and writes
 * all of it but the end of the filter. The filter comes last, so that with a filter of up
 * to about 400 instructions (`default` has about 260) a sandbox writes one page of it
 * ("Address space" in docs/ARCHITECTURE.md). */
struct init {
    int ctl;
    /* Forked by the pool's fork server (forkserver_run): the root comes from its template, and our
     * ids are still the host's until CTL_SETUP (sbxd has written the maps by then). */
    bool from_forkserver;
    int image_fd; /* CTL_SETUP_IMAGE_FD: the image's root until the mounts are built, else -1 */
    int work_fd;  /* the /work tmpfs's root from the mounts until CTL_READY hands it over */
    int sigfd;
    struct ctl_setup setup;
    unsigned short filter_len;
    /* The task child installs the filter as soon as it is cloned (bpf_early_ok),
     * not when its task comes: the task then starts that much sooner. */
    bool filter_early;
    char *buf; /* INIT_BUF_SIZE bytes, 8-aligned: the packet being received */
    enum init_task_state state;
    pid_t task;     /* the task child, cloned at setup (and after each CTL_TASK_KEEP task) */
    uint32_t tasks; /* CTL_TASK packets received: token mounts come only with the first */
    bool keep;      /* the running task is CTL_TASK_KEEP: another follows its report */
    /* Our end of the task child's socket (SOCK_SEQPACKET, CLOEXEC) until EOF: the child's end
     * closes on execve. We send the task on it, once (TASK_NONE), then only read the child's
     * reports (non-blocking). */
    int report;
    bool failed; /* the child sent a failure record: `failure` */
    struct init_report {
        int32_t stage; /* enum ctl_stage; CTL_STAGE_NONE with the listener attached */
        int32_t err;   /* -errno */
    } failure;
    int listener;                /* the task's seccomp listener, or -1 */
    bool listener_hup;           /* no process uses the filter: kept, no longer polled */
    bool counting;               /* a listener came, and answering never failed */
    uint32_t denials;            /* notifications answered */
    struct seccomp_notif *notif; /* notif_size bytes (the kernel's size, maybe > ours) */
    struct seccomp_notif_resp *resp;
    size_t notif_size;
    size_t resp_size;
    char argv0[64]; /* for messages */
    char cwd[CTL_PATH_MAX];
    struct init_child_arg child_arg;
    struct sock_filter filter[CTL_SECCOMP_MAX_INSNS];
};

/* pid1.c */

/* Sends an event to sbxd (its magic set here); exits when the control socket fails. */
void pid1_send(const struct init *in, struct ctl_event *ev);
/* Sends a CTL_SETUP_FAILED or CTL_EXEC_FAILED (type) to sbxd; exits when the control socket
 * fails. */
void pid1_send_failure(const struct init *in, uint32_t type, uint32_t stage, int err,
                       const char *msg);
/* Sends an event to sbxd with one fd attached; exits when the control socket fails. */
void pid1_send_with_fd(const struct init *in, struct ctl_event *ev, int fd);
/* Receives one packet from sock into buf (size bytes) with up to nfds fds. CHILD-SAFE. */
ssize_t pid1_recv_sized(char *buf, size_t size, int sock, int *fds, size_t nfds, size_t *got);
/* pid1_recv_sized into an INIT_BUF_SIZE buffer. CHILD-SAFE. */
ssize_t pid1_recv_into(char *buf, int sock, int *fds, size_t nfds, size_t *got);
/* Receives one setup packet into in->buf; exits on EOF. */
ssize_t pid1_recv_setup(struct init *in, size_t *got);
/* Checks a CTL_SETUP or CTL_FORKSERVER (type) in in->buf into in->setup and in->filter.
 * Returns 0 or -errno with e. */
int pid1_parse_setup(struct init *in, ssize_t n, size_t got, uint32_t type, struct err *e);
/* Builds the filesystem of in->setup in mode (mount.c). Returns 0 or -errno with e. */
int pid1_mount(struct init *in, enum mount_mode mode, struct err *e);
/* Reports CTL_READY, with the /work tmpfs's root (in->work_fd) and the egress proxy's
 * listener when proxy >= 0, both closed here. */
void pid1_ready(struct init *in, int proxy);
/* Checks the CTL_TASK in buf; with ret_argv (the task child, CHILD-SAFE, e NULL) also points
 * argv and envp into it. Returns 0 or -EPROTO with e. */
int pid1_parse_task(char *buf, size_t n, char ***ret_argv, char ***ret_envp, struct err *e);
/* A sandbox's init from its setup (n bytes in in->buf, got fds) on: never returns. */
__attribute__((noreturn)) void pid1_sandbox(struct init *in, ssize_t n, size_t got);
/* Gives back the pages of the setup packet's buffer (the fork server, once). */
void pid1_buf_release(void);

/* task_child.c */

/* Makes the page below area + INIT_GUARD_ROOM PROT_NONE, once, and points *stack there.
 * Returns 0 or -errno. */
int task_child_guard_page(char *area, char **stack);
/* task_child_guard_page for the task child's stack. */
int task_child_stack_guard(void);
/* Narrows effective and permitted to caps, inheritable to none. Returns 0 or -errno.
 * CHILD-SAFE. */
int task_child_capset(uint32_t caps);
/* Clones the task child ahead of its task (init's side); exits after CTL_SETUP_FAILED on
 * failure. proxy and in->work_fd are closed in the child. */
void task_child_clone(struct init *in, int proxy);
/* Clones a task child for a sandbox's next task (after a CTL_TASK_KEEP task), when the
 * last one is gone. Returns 0 (in->task and in->report set) or -errno with e. */
int task_child_respawn(struct init *in, struct err *e);

/* task_run.c */

/* A sandbox's init from READY on: serves its tasks (CTL_TASK, CTL_KILL), answers their
 * seccomp notifications, reaps, reports; exits after the last task's report or when the
 * control socket closes. Never returns. */
__attribute__((noreturn)) void task_run_loop(struct init *in);

/* forkserver.c */

/* The fork server, from its CTL_FORKSERVER (n bytes in in->buf, got fds) on: never returns. */
__attribute__((noreturn)) void forkserver_run(struct init *in, ssize_t n, size_t got);
