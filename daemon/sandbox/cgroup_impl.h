/* SPDX-License-Identifier: MIT */
#pragma once
/* Private to cgroup.c (a sandbox's cgroup), cgroup_root.c (discovery and our subtree),
 * cgroup_file.c (the control files), cgroup_v1.c and cgroup_v2.c: the struct bodies, what
 * discovery found in /proc/self/mountinfo and /proc/self/cgroup, the backend ops table and
 * the file helpers both backends share. Nothing outside these five files includes this
 * header. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/cgroup.h"
#include "lib/err.h"

/* The controllers sbx uses. CPUACCT only reports usage (v1; on v2 cpu.stat is core). */
enum cgroup_ctrl {
    CGROUP_CTRL_MEMORY = 0,
    CGROUP_CTRL_CPU,
    CGROUP_CTRL_CPUACCT,
    CGROUP_CTRL_PIDS,
    CGROUP_CTRL_IO, /* v1 blkio, v2 io; only with CGROUP_ROOT_IO */
    CGROUP_CTRL_COUNT,
};

/* At most one hierarchy per controller (v1 separate mounts); v2 uses hier[0] only. */
#define CGROUP_HIER_MAX CGROUP_CTRL_COUNT
/* The period written to cpu.cfs_period_us / cpu.max, and the kernel's smallest quota. */
#define CGROUP_CPU_PERIOD_US 100000ULL
#define CGROUP_CPU_QUOTA_MIN_US 1000ULL
/* Bound on names we create or open: sandbox ids and the subtree name. */
#define CGROUP_NAME_MAX 128

/* One hierarchy as this process sees it (from mountinfo and /proc/self/cgroup). */
struct cgroup_place {
    char *mnt;      /* mount point; NULL when the hierarchy is not mounted */
    char *mnt_root; /* the hierarchy path the mount shows at mnt ("/" normally) */
    char *own;      /* this process's cgroup in the hierarchy ("/" when unknown) */
    dev_t dev;      /* the mount's st_dev: equal for controllers sharing a hierarchy */
};

struct cgroup_sys {
    struct cgroup_place v1[CGROUP_CTRL_COUNT];
    struct cgroup_place v2;
};

/* Our subtree root in one hierarchy. */
struct cgroup_hier {
    char *path;     /* absolute path of <base>/<name> */
    int dfd;        /* O_DIRECTORY fd of path; every child is made relative to it */
    unsigned ctrls; /* bitmask (1u << enum cgroup_ctrl) of controllers served here */
};

struct cgroup_ops;

/* Immutable after cgroup_root_open, so worker threads may share it without locks. */
struct cgroup_root {
    const struct cgroup_ops *ops;
    char *name;
    char *desc;
    size_t nhier;
    struct cgroup_hier hier[CGROUP_HIER_MAX];
    int ctrl_hier[CGROUP_CTRL_COUNT]; /* index into hier[], -1 when absent */
    bool ctrl_ok[CGROUP_CTRL_COUNT];  /* the controller can limit/report in children */
    bool has_limits;                  /* memory, cpu and pids are all ctrl_ok */
    bool want_io;                     /* CGROUP_ROOT_IO asked (v1 may take blkio on anyway) */
    bool v1_memsw;                    /* memory.memsw.* exists: the limit covers swap too */
    bool v1_tcp;                      /* memory.kmem.tcp.limit_in_bytes exists */
    bool v2_swap;                     /* memory.swap.max exists */
    bool v2_kill;                     /* cgroup.kill exists (linux >= 5.14) */
    bool v2_peak;                     /* memory.peak exists (linux >= 5.19) */
};

#define CGROUP_CACHED_MAX 12

struct cgroup {
    struct cgroup_root *root; /* borrowed: the root outlives its cgroups */
    char *name;
    int dfd[CGROUP_HIER_MAX]; /* per root->hier[], -1 when missing (cgroup_open_existing) */
    int peak_fd; /* v2: memory.peak, held open once reset (the reset is per open file) */
    /* Counter files read at every task's start and end, the files written at every reset,
     * and cgroup.procs written at every attach, held open (the cgroup outlives its
     * sandboxes when the pool reuses it): a pread or a write instead of an open, a read
     * or write and a close. Used by one thread at a time, like the rest of the cgroup. */
    struct cgroup_cached_file {
        int dfd;
        const char *file; /* a string literal of the caller */
        bool wr;          /* O_WRONLY, else O_RDONLY */
        int fd;
    } cached[CGROUP_CACHED_MAX];
    size_t n_cached;
    int procs_fd[CGROUP_HIER_MAX]; /* cgroup.procs, O_WRONLY, -1 until the first attach */
    /* The last cgroup_attach put its process in every hierarchy: all of that sandbox's
     * processes are then in all of them, and one hierarchy's count tells if it is empty. */
    bool attached_all;
};

/* What differs between v1 and v2. All return 0 or -errno. */
struct cgroup_ops {
    enum cgroup_version version;
    /* Fills root->hier, ctrl_hier, ctrl_ok and the flags, creating <base>/<name> in each
     * hierarchy. On failure the caller frees root (which removes what was created). */
    int (*root_open)(struct cgroup_root *root, const struct cgroup_sys *sys, const char *parent,
                     struct err *e);
    /* Writes lim into a freshly made, still empty cgroup. Skips controllers that are not
     * ctrl_ok (cgroup_root_has_limits tells the caller). */
    int (*set_limits)(struct cgroup *cg, const struct cgroup_limits *lim, struct err *e);
    int (*usage)(struct cgroup *cg, struct cgroup_usage *ret);
    bool (*is_empty)(struct cgroup *cg);
    int (*kill_all)(struct cgroup *cg);
    /* Readies an emptied cgroup for another sandbox (cgroup_reset). */
    int (*reset)(struct cgroup *cg, struct err *e);
};

extern const struct cgroup_ops cgroup_v1_ops;
extern const struct cgroup_ops cgroup_v2_ops;

/* cgroup.c */

/* "memory", "cpu", "cpuacct", "pids", "blkio" (v1 names). */
const char *cgroup_ctrl_name(enum cgroup_ctrl c);
/* The same with v2's names ("io" for CGROUP_CTRL_IO). */
const char *cgroup_ctrl_v2_name(enum cgroup_ctrl c);
/* cg's directory fd in the hierarchy serving controller c, or -1. */
int cgroup_ctrl_dfd(const struct cgroup *cg, enum cgroup_ctrl c);
/* The CFS quota in microseconds per CGROUP_CPU_PERIOD_US for `cpu` CPUs (at least the
 * kernel's minimum). */
uint64_t cgroup_cpu_quota_us(double cpu);
/* Whether name may be a directory below our subtree (at most CGROUP_NAME_MAX). */
bool cgroup_name_valid(const char *name);

/* cgroup_root.c */

/* The directory below which our subtree lives in one hierarchy: <mnt>/<parent> when parent
 * is set, else <mnt>/<own cgroup relative to the mount's root>. Returns 0 or -errno;
 * *ret is xmalloc'd. */
int cgroup_root_place_base(const struct cgroup_place *p, const char *parent, char **ret,
                           struct err *e);
/* Creates (or reuses) <base>/<name> and opens it into h. Returns 0 or -errno. */
int cgroup_root_hier_open(struct cgroup_hier *h, const char *base, const char *name, struct err *e);
/* Whether list (a space-separated list such as cgroup.controllers) holds word. */
bool cgroup_root_list_has(const char *list, const char *word);

/* cgroup_file.c */

/* Whether file exists in dfd. */
bool cgroup_file_exists(int dfd, const char *file);
/* Writes s to file with one write(2); e says "<file>: write '<s>': ERRNO". */
int cgroup_file_write(int dfd, const char *file, const char *s, struct err *e);
/* Writes v in decimal. */
int cgroup_file_write_u64(int dfd, const char *file, uint64_t v, struct err *e);
/* cgroup_file_write through cg's held-open copy of the file. */
int cgroup_file_cg_write(struct cgroup *cg, int dfd, const char *file, const char *s,
                         struct err *e);
/* Reads a file holding one number ("max" reads as UINT64_MAX). */
int cgroup_file_read_u64(int dfd, const char *file, uint64_t *ret);
/* The same, and cgroup_file_read_keys/cgroup_file_read_key below, through cg's held-open copy of
 * the file (opened at the first read; an uncached read when cg holds CGROUP_CACHED_MAX). */
int cgroup_file_cg_read_u64(struct cgroup *cg, int dfd, const char *file, uint64_t *ret);
int cgroup_file_cg_read_keys(struct cgroup *cg, int dfd, const char *file, const char *const *keys,
                             uint64_t *vals, size_t n);
int cgroup_file_cg_read_key(struct cgroup *cg, int dfd, const char *file, const char *key,
                            uint64_t *ret);
/* The same from an open counter file, read from its start. */
int cgroup_file_pread_u64(int fd, uint64_t *ret);
/* Reads the values of "<key> <value>" lines of a flat-keyed file (cpu.stat, memory.events,
 * pids.events, memory.oom_control) with one read: vals[i] is set for each keys[i] found and
 * left alone otherwise. Returns how many keys were found or -errno. */
int cgroup_file_read_keys(int dfd, const char *file, const char *const *keys, uint64_t *vals,
                          size_t n);
/* One key; -ENODATA when it is absent. */
int cgroup_file_read_key(int dfd, const char *file, const char *key, uint64_t *ret);
/* cgroup_v1.c */

/* cgroup.procs, the v1 way (cgroup_v1.c); v2 uses it before linux 5.14 (no cgroup.kill).
 * 1 when cgroup.procs in dfd lists no process, 0 when it does, -errno on failure. */
int cgroup_v1_procs_empty(int dfd);
/* Number of processes listed in cgroup.procs, or -errno. */
int cgroup_v1_procs_count(int dfd);
/* SIGKILLs, in rounds until they are all gone or a bound is reached, the processes listed
 * in cgroup.procs of each of the n dirs (-1 entries skipped). SECURITY: only pids read from
 * these files are signalled, through a pidfd opened before the file is read again, so a
 * recycled pid is never hit. Returns the number of processes signalled or -errno. */
int cgroup_v1_procs_kill(const int *dfds, size_t n);
