/* SPDX-License-Identifier: MIT */
#pragma once
/* The control protocol between sbxd and a sandbox's init (sbxd-init), over the
 * SOCK_SEQPACKET socket that init has as fd CTL_FD. Fixed-layout structs, one per packet;
 * both ends are built from this tree, and `magic` changes whenever a layout does.
 *
 *   sbxd -> init: CTL_SETUP (once, right after spawn) -> init builds the sandbox
 *   init -> sbxd: CTL_READY (pid: the task's, of the child cloned at setup; + SCM_RIGHTS
 *                 {the /work tmpfs's root directory, [egress proxy listener when
 *                 proxy_port != 0]}) | CTL_SETUP_FAILED
 *   sbxd -> init: CTL_TASK + SCM_RIGHTS {stdin, stdout, stderr, n_mounts mount fds}
 *   sbxd -> init: CTL_KILL (a bare struct ctl_hdr), at any time: while a task runs, init
 *                 kills every process of the namespace but itself, and reports CTL_EXITED
 *                 as for any end (the main process's SIGKILL); ignored when none runs
 *   init -> sbxd: CTL_EXITED | CTL_EXEC_FAILED (nothing when the task starts: sbxd counts
 *                 it started once CTL_TASK is sent)
 * Before either report init kills (SIGKILL) and reaps every other process of its pid
 * namespace, so that nothing of the task runs once sbxd hears that it ended. Without
 * CTL_TASK_KEEP init then exits, which ends the sandbox (sbxd reaps it through its pidfd).
 * With CTL_TASK_KEEP it clones a fresh task child first, whose pid the report carries in
 * next_pid, and serves the next CTL_TASK (whose token mounts must be none: mounts are
 * accepted on a sandbox's first task only); next_pid 0 says it could not, and it exits.
 * If sbxd's end closes, init exits and so does the sandbox.
 *
 * The fork server (a pool's fork server, docs/ARCHITECTURE.md) is sbxd-init too, spoken to on its
 * own control socket:
 *   sbxd -> fork server: CTL_FORKSERVER (a struct ctl_setup; + SCM_RIGHTS {image} with
 *                   CTL_SETUP_IMAGE_FD) -> it builds the pool's root once
 *   fork server -> sbxd: CTL_READY | CTL_SETUP_FAILED
 *   sbxd -> fork server: CTL_SPAWN + SCM_RIGHTS {the new sandbox's control socket, [its network
 *                   namespace], [its cgroup (v2)], [its cgroup.procs files (v1)]}, any
 *                   number of times, without waiting for the replies
 *   fork server -> sbxd: CTL_SPAWNED (pid) + SCM_RIGHTS {pidfd} | CTL_SETUP_FAILED, in order
 * The spawned sandbox is sbxd's child (CLONE_PARENT) and waits for CTL_SETUP like any init;
 * the fork server attaches it on cgroup v1 (writes its pid to the cgroup.procs files that came,
 * which sbxd opened) before it answers, and sbxd writes its id maps before CTL_SETUP. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_FD 3
#define CTL_MAGIC 0x53425808u

enum ctl_type {
    CTL_SETUP = 1,
    CTL_TASK = 2,
    CTL_FORKSERVER = 3,
    CTL_SPAWN = 4,
    CTL_KILL = 5,
    CTL_READY = 10,
    CTL_SETUP_FAILED = 11,
    /* 12 was CTL_STARTED */
    CTL_EXITED = 13,
    CTL_EXEC_FAILED = 14,
    CTL_SPAWNED = 15,
};

/* Setup stages, reported in ctl_event.stage when setup or exec fails. */
enum ctl_stage {
    CTL_STAGE_NONE = 0,
    CTL_STAGE_PROTOCOL,
    CTL_STAGE_CGROUPNS,
    CTL_STAGE_MOUNT,
    CTL_STAGE_HOSTNAME,
    CTL_STAGE_NETWORK,
    CTL_STAGE_FORK,
    CTL_STAGE_SETSID,
    CTL_STAGE_FDS,
    CTL_STAGE_CHDIR,
    CTL_STAGE_RLIMIT,
    CTL_STAGE_SETUID,
    CTL_STAGE_CAPS,
    CTL_STAGE_NNP,
    CTL_STAGE_SECCOMP,
    CTL_STAGE_EXEC,
    CTL_STAGE_TASK_MOUNT,    /* attaching a token's mounts before the fork */
    CTL_STAGE_IDS,           /* a fork server's sandbox taking its namespace's root ids */
    CTL_STAGE_FORKSERVER,    /* the fork server: its template or a fork */
    CTL_STAGE_CGROUP_ATTACH, /* the fork server: attaching a forked sandbox (v1) */
};

/* The host's /etc files a sandbox of the host image sees (relative to the image root): a
 * template copies them, and sbxd replaces a fork server when one of them changes. */
#define CTL_HOST_ETC_FILES                                                                         \
    "etc/ld.so.cache", "etc/ld.so.conf", "etc/ld.so.conf.d", "etc/alternatives", "etc/localtime"

#define CTL_SETUP_DEV_SHM 0x1u
/* A detached mount tree of the image's root (open_tree clone) comes with CTL_SETUP
 * (SCM_RIGHTS): init attaches it rather than opening image_root, which then only names the
 * image in messages. */
#define CTL_SETUP_IMAGE_FD 0x2u
/* The sandbox's network namespace is one of sbxd's (netns.c), whose loopback sbxd brought
 * up when it made it and which the sandbox has no right to take down: init skips its
 * check (a socket and an ioctl). */
#define CTL_SETUP_LO_UP 0x4u
#define CTL_DENIALS_UNKNOWN 0xffffffffu

#define CTL_PATH_MAX 256
#define CTL_HOSTNAME_MAX 64
/* The largest CTL_TASK data (argv + env). Requests above it are refused (sandbox/task_spec.h). */
#define CTL_TASK_DATA_MAX (96 * 1024)
/* Read-only mounts one task may receive from its capability token (detached mount fds). */
#define CTL_MOUNTS_MAX 8
/* The largest seccomp program, in instructions (BPF_MAXINSNS). */
#define CTL_SECCOMP_MAX_INSNS 4096

struct ctl_setup {
    uint32_t magic;
    uint32_t type; /* CTL_SETUP */
    uint32_t uid;  /* the task's uid and gid inside the sandbox */
    uint32_t gid;
    uint32_t flags;         /* CTL_SETUP_* */
    uint32_t seccomp_insns; /* struct sock_filter entries following this struct (0: none) */
    uint64_t tmp_size;      /* bytes for the /tmp tmpfs */
    uint64_t work_size;     /* bytes for the /work tmpfs (the task's workspace) */
    uint64_t shm_size;      /* bytes for /dev/shm when CTL_SETUP_DEV_SHM */
    char hostname[CTL_HOSTNAME_MAX];
    /* Root of the pool's image as seen by init before pivot_root; "/" is the host image
     * (read-only binds of /usr, and /bin /lib /lib64 /sbin as on the host). */
    char image_root[CTL_PATH_MAX];
    /* Egress proxy (docs/EGRESS.md): when not 0, init listens on 127.0.0.1:proxy_port in the
     * sandbox's network namespace after bringing up lo, and hands the listening socket to
     * sbxd with CTL_READY, keeping no copy. sbxd serves it for a task with a network
     * profile and closes it otherwise, so nothing listens there for the task. */
    uint32_t proxy_port;
};

/* CTL_SPAWN: the fds that come with it, in this order: the sandbox's end of its control
 * socket (always), its network namespace (with CTL_SPAWN_NETNS, else the sandbox gets a new
 * one), its cgroup directory (with CTL_SPAWN_CGROUP: CLONE_INTO_CGROUP, cgroup v2), then
 * n_attach cgroup.procs files (cgroup v1: one per hierarchy), to which the fork server writes the
 * new sandbox's pid before it answers. A v1 attach may wait for an RCU grace period (the
 * kernel's threadgroup lock): in the fork server it holds up no one but the next fork. An attach
 * that fails still answers CTL_SPAWNED, with err set and stage CTL_STAGE_CGROUP_ATTACH: the
 * sandbox exists, and sbxd kills and reaps it. */
#define CTL_SPAWN_CGROUP 0x1u
#define CTL_SPAWN_NETNS 0x2u
#define CTL_SPAWN_ATTACH_MAX 8
struct ctl_spawn {
    uint32_t magic;
    uint32_t type; /* CTL_SPAWN */
    uint32_t flags;
    uint32_t n_attach; /* <= CTL_SPAWN_ATTACH_MAX */
    /* The host uid that creates, and so owns, the sandbox's user namespace: its root's (the
     * first id of its block), never 0 (sys.h, sys_owner_begin). */
    uint32_t owner;
};

/* The first fields of every packet; CTL_KILL is this alone. */
struct ctl_hdr {
    uint32_t magic;
    uint32_t type;
};

/* The sandbox outlives the task (a session's command): init serves another CTL_TASK after
 * this one's report. */
#define CTL_TASK_KEEP 0x1u

struct ctl_task {
    uint32_t magic;
    uint32_t type;  /* CTL_TASK */
    uint32_t flags; /* CTL_TASK_* */
    uint32_t argc;  /* >= 1 */
    uint32_t envc;
    uint32_t nofile;   /* RLIMIT_NOFILE for the task */
    uint32_t data_len; /* bytes of data that follow: argc then envc NUL-terminated strings */
    char cwd[CTL_PATH_MAX];
    /* Token mounts: the fds after stdio are detached, read-only, private mount trees
     * (open_tree clones made by sbxd); init attaches fd i at mount_dst[i] before the fork.
     * Bit i of mount_files: fd i is a regular file (else a directory). */
    uint32_t n_mounts; /* <= CTL_MOUNTS_MAX */
    uint32_t mount_files;
    char mount_dst[CTL_MOUNTS_MAX][CTL_PATH_MAX];
};

struct ctl_event {
    uint32_t magic;
    uint32_t type;     /* CTL_READY .. CTL_EXEC_FAILED */
    int32_t err;       /* -errno for failures, else 0 */
    uint32_t stage;    /* enum ctl_stage for failures */
    int32_t wstatus;   /* CTL_EXITED: status as from waitpid */
    uint32_t pid;      /* the task's pid inside the sandbox */
    uint64_t utime_us; /* CTL_EXITED: rusage of the task and its reaped descendants */
    uint64_t stime_us;
    uint64_t maxrss_kb;
    uint32_t seccomp_denials; /* CTL_EXITED: denied syscalls answered by init, or
                                 CTL_DENIALS_UNKNOWN when the kernel could not count */
    /* CTL_EXITED, CTL_EXEC_FAILED of a CTL_TASK_KEEP task: the pid of the task child that
     * waits for the next task, or 0 when there is none (init exits after this report). */
    uint32_t next_pid;
    char msg[128]; /* a short human note for failures */
};

/* An event as sbxd may use it: err a negative errno (-EPROTO for anything else) or 0, msg
 * NUL-terminated printable ASCII ('?' for any other byte). It comes from a process sbxd
 * does not trust, and its fields end up in messages, logs and replies. */
static inline void ctl_event_clean(struct ctl_event *ev)
{
    if (ev->err > 0 || ev->err < -4095) {
        ev->err = -EPROTO;
    }
    ev->msg[sizeof(ev->msg) - 1] = '\0';
    for (size_t i = 0; ev->msg[i] != '\0'; i++) {
        unsigned char c = (unsigned char)ev->msg[i];
        if (c < 0x20 || c > 0x7e) {
            ev->msg[i] = '?';
        }
    }
}

/* Where a token mount may appear inside a sandbox: the one rule both sbxd (when a token is
 * issued) and init (before attaching) apply. Returns NULL when dst is acceptable, else why
 * not. Acceptable: absolute, shorter than CTL_PATH_MAX, normalized (no empty, "." or ".."
 * component, no trailing "/"), no control characters, and not on or under a system
 * directory of the image ("/", /usr, /bin, /sbin, /lib*, /etc, /proc, /dev, /sys, /run,
 * /boot, /var, /root) nor /tmp itself (below /tmp is fine). New top-level directories
 * such as /data, /mnt, /srv, /opt, /work or /home are created by init. CHILD-SAFE. */
static inline const char *ctl_mount_dst_check(const char *dst)
{
    static const char *const system_dirs[] = {"usr", "bin", "sbin", "etc", "proc", "dev",
                                              "sys", "run", "boot", "var", "root"};
    size_t len = 0;
    while (len < CTL_PATH_MAX && dst[len] != '\0') {
        len++;
    }
    if (len == CTL_PATH_MAX) {
        return "too long";
    }
    if (dst[0] != '/') {
        return "not an absolute path";
    }
    if (len == 1) {
        return "'/' would hide the whole image";
    }
    size_t first_len = 0;
    for (size_t i = 1, start = 1; i <= len; i++) {
        unsigned char c = (unsigned char)dst[i];
        if (c != '\0' && c != '/') {
            if (c < 0x20 || c == 0x7f) {
                return "control character in path";
            }
            continue;
        }
        size_t n = i - start;
        if (n == 0) {
            return "empty path component (\"//\" or trailing \"/\")";
        }
        if ((n == 1 && dst[start] == '.') ||
            (n == 2 && dst[start] == '.' && dst[start + 1] == '.')) {
            return "\".\" or \"..\" component";
        }
        if (start == 1) {
            first_len = n;
        }
        start = i + 1;
    }
    const char *first = dst + 1;
    if (first_len >= 3 && first[0] == 'l' && first[1] == 'i' && first[2] == 'b') {
        return "a system directory of the image";
    }
    for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
        size_t n = 0;
        while (system_dirs[i][n] != '\0') {
            n++;
        }
        if (n == first_len && __builtin_memcmp(first, system_dirs[i], n) == 0) {
            return "a system directory of the image";
        }
    }
    if (first_len == 3 && __builtin_memcmp(first, "tmp", 3) == 0 && len == 4) {
        return "/tmp itself would hide the task's scratch space";
    }
    if (first_len == 4 && __builtin_memcmp(first, "work", 4) == 0 && len == 5) {
        return "/work itself would hide the task's workspace";
    }
    return NULL;
}
