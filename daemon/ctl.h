/* SPDX-License-Identifier: MIT */
#pragma once
/* The control protocol between sbxd and a sandbox's init (sbxd-init), over the
 * SOCK_SEQPACKET socket that init has as fd CTL_FD. Fixed-layout structs, one per packet;
 * both ends are built from this tree, and `magic` changes whenever a layout does.
 *
 *   sbxd -> init: CTL_SETUP (once, right after spawn) -> init builds the sandbox
 *   init -> sbxd: CTL_READY | CTL_SETUP_FAILED
 *   sbxd -> init: CTL_TASK + SCM_RIGHTS {stdin, stdout, stderr} (once)
 *   init -> sbxd: CTL_STARTED (task forked) then CTL_EXITED | CTL_EXEC_FAILED
 * After CTL_EXITED sbxd kills init (SIGKILL through its pidfd), which ends every process
 * of the sandbox's pid namespace. If sbxd's end closes, init exits and so does the sandbox. */
#include <stdint.h>

#define CTL_FD 3
#define CTL_MAGIC 0x53425803u

enum ctl_type {
    CTL_SETUP = 1,
    CTL_TASK = 2,
    CTL_READY = 10,
    CTL_SETUP_FAILED = 11,
    CTL_STARTED = 12,
    CTL_EXITED = 13,
    CTL_EXEC_FAILED = 14,
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
};

#define CTL_SETUP_DEV_SHM 0x1u
#define CTL_DENIALS_UNKNOWN 0xffffffffu

#define CTL_PATH_MAX 256
#define CTL_HOSTNAME_MAX 64
/* The largest CTL_TASK packet (header + argv + env). Requests above it are refused by rpc.c. */
#define CTL_TASK_DATA_MAX (96 * 1024)
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
    uint64_t shm_size;      /* bytes for /dev/shm when CTL_SETUP_DEV_SHM */
    char hostname[CTL_HOSTNAME_MAX];
    /* Root of the pool's image as seen by init before pivot_root; "/" is the host image
     * (read-only binds of /usr, and /bin /lib /lib64 /sbin as on the host). */
    char image_root[CTL_PATH_MAX];
};

struct ctl_task {
    uint32_t magic;
    uint32_t type; /* CTL_TASK */
    uint32_t argc; /* >= 1 */
    uint32_t envc;
    uint32_t nofile;   /* RLIMIT_NOFILE for the task */
    uint32_t data_len; /* bytes of data that follow: argc then envc NUL-terminated strings */
    char cwd[CTL_PATH_MAX];
};

struct ctl_event {
    uint32_t magic;
    uint32_t type;    /* CTL_READY .. CTL_EXEC_FAILED */
    int32_t err;      /* -errno for failures, else 0 */
    uint32_t stage;   /* enum ctl_stage for failures */
    int32_t wstatus;  /* CTL_EXITED: status as from waitpid */
    uint32_t pid;     /* the task's pid inside the sandbox */
    uint64_t utime_us; /* CTL_EXITED: rusage of the task and its reaped descendants */
    uint64_t stime_us;
    uint64_t maxrss_kb;
    uint32_t seccomp_denials; /* CTL_EXITED: denied syscalls answered by init, or
                                 CTL_DENIALS_UNKNOWN when the kernel could not count */
    uint32_t reserved;
    char msg[128];    /* a short human note for failures */
};
