/* SPDX-License-Identifier: MIT */
#pragma once
/* One interface over cgroup v1 (cgroup_v1.c) and cgroup v2 (cgroup_v2.c).
 * sbxd creates cgroups only below its own subtree: <the cgroup sbxd starts in>/<name>, in
 * every controller it uses, and never moves, changes or removes any other cgroup.
 * Functions here make blocking filesystem calls: call them from a worker thread or at
 * start-up, not on the loop's hot path (cgroup_usage is cheap enough for the loop).
 * Errors: -errno, with e saying which file. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"

struct cgroup_root;
struct cgroup;

enum cgroup_version {
    CGROUP_AUTO = 0,
    CGROUP_V1 = 1,
    CGROUP_V2 = 2,
};

struct cgroup_limits {
    uint64_t memory_bytes; /* memory + swap; 0 = no limit */
    double cpu;            /* CPUs of quota; 0 = no limit */
    uint32_t pids;         /* 0 = no limit */
    /* Reads from one block device (a whole disk: cgroup_block_disk), bytes and requests a
     * second; 0 = no limit. Needs a root opened with CGROUP_ROOT_IO. */
    dev_t io_dev;
    uint64_t io_read_bps;
    uint32_t io_read_iops;
};

struct cgroup_usage {
    uint64_t cpu_ns;         /* total CPU time of the cgroup */
    uint64_t mem_peak_bytes; /* peak memory (0 when the kernel does not report it) */
    uint64_t oom_kills;      /* processes killed by the OOM killer in this cgroup */
    bool oom;                /* memory limit hit (oom_kills > 0 or failcnt at the limit) */
    uint64_t pids_max_hits;  /* fork() refused by pids.max (pids.events max) */
};

/* Opens the daemon's subtree `name` below the cgroup this process is in (or below `parent`
 * when non-NULL, a path relative to each hierarchy's mount point), creating it in each
 * controller. version CGROUP_AUTO picks v2 when memory, cpu and pids are on the unified
 * hierarchy, else v1. Returns 0 or -errno. */
int cgroup_root_open(enum cgroup_version version, const char *parent, const char *name,
                     struct cgroup_root **ret, struct err *e);
/* cgroup_root_open with flags. CGROUP_ROOT_IO: also the io controller (v1 blkio, its own
 * hierarchy: one more attach per sandbox; v2 io), for io limits; -ENODEV when the host has
 * none to give. Without it no io cgroup is made or touched. */
#define CGROUP_ROOT_IO 0x1u
int cgroup_root_open_flags(enum cgroup_version version, const char *parent, const char *name,
                           unsigned flags, struct cgroup_root **ret, struct err *e);
/* The whole disk that holds path's filesystem, for io limits (the kernel limits disks, not
 * partitions). -ENODEV when the filesystem is on no block device (tmpfs, overlay, btrfs
 * subvolumes, NFS). */
int cgroup_block_disk(const char *path, dev_t *ret, struct err *e);
/* Takes an exclusive flock on the subtree's directory (its first hierarchy's), held until
 * cgroup_root_free: what the start-up reaper kills and removes in the subtree is then never
 * another live sbxd's, even one whose state dir lock (the same path, deleted and made
 * again; the same path in another mount namespace) did not stop us. Returns 0, -EBUSY when
 * another process holds it, or -errno. */
int cgroup_root_lock(struct cgroup_root *root, struct err *e);
/* Removes the subtree directories if empty (ignoring EBUSY) and frees. Accepts NULL. */
struct cgroup_root *cgroup_root_free(struct cgroup_root *root);
/* Frees without removing anything (the subtree is another sbxd's: cgroup_root_lock).
 * Accepts NULL; returns NULL. */
struct cgroup_root *cgroup_root_close(struct cgroup_root *root);
enum cgroup_version cgroup_root_version(const struct cgroup_root *root);
/* Whether memory/cpu/pids limits can be enforced (false on a controller-less v2). */
bool cgroup_root_has_limits(const struct cgroup_root *root);
/* Human description, e.g. "v1 memory=/sys/fs/cgroup/memory/x/sbxd ...". */
const char *cgroup_root_describe(const struct cgroup_root *root);

/* Creates <root>/<name> with limits applied. Returns 0 or -errno (-EEXIST if present). */
int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                  struct cgroup **ret, struct err *e);
/* v2: an O_DIRECTORY fd of the cgroup for clone3(CLONE_INTO_CGROUP); v1: -1. */
int cgroup_fd(const struct cgroup *cg);
/* Moves pid into the cgroup in every controller (v1) or via cgroup.procs (v2). */
int cgroup_attach(struct cgroup *cg, pid_t pid, struct err *e);
/* v1: the cgroup's cgroup.procs files, one per hierarchy, opened for writing and held by the
 * cgroup, into fds (at most max), for another process to attach a pid with (the fork server:
 * the kernel checks the opener's credentials, ours). The cgroup then counts as attached in
 * every hierarchy (cgroup_is_empty reads one count): a caller whose attach failed kills and
 * reaps that process before the cgroup is emptied. Returns how many, or -errno with e. */
int cgroup_procs_fds(struct cgroup *cg, int *fds, size_t max, struct err *e);
/* Reads usage counters. Returns 0 or -errno. */
int cgroup_usage(struct cgroup *cg, struct cgroup_usage *ret);
/* True when no process is left in the cgroup (every controller). */
bool cgroup_is_empty(struct cgroup *cg);
/* SIGKILLs every process in the cgroup (v2: cgroup.kill when available; v1: cgroup.procs
 * loop). Returns the number of processes signalled or -errno. */
int cgroup_kill_all(struct cgroup *cg);
/* Readies an emptied cgroup for another sandbox of the same limits, instead of removing it
 * and making a new one (a mkdir and rmdir per hierarchy, and the limits written again, are
 * a large part of a sandbox's cost on v1). Resets what a caller cannot take as a difference
 * of two readings: the memory peak (v1: and failcnt). Cumulative counters (CPU, OOM kills,
 * pids.max hits) are not reset: read them before and after. Returns 0, -EOPNOTSUPP when
 * the kernel cannot reset the peak (v2 before linux 6.12: remove the cgroup instead),
 * -ENOTEMPTY when more than CGROUP_REUSE_LEFTOVER_MAX bytes of page cache stay charged to
 * it (remove it instead), or -errno. */
int cgroup_reset(struct cgroup *cg, struct err *e);
/* The page cache a sandbox brought in (the files it read first) stays charged to its cgroup
 * after it is gone, until reclaimed. A cgroup reused with more than this would report an
 * earlier sandbox's files in its next sandbox's memory peak (up to the whole limit: a task
 * that read 512 MiB of the image's files left every later `true` of its cgroup a peak of
 * 512 MiB), and tell that task how much the earlier one read. Past it the cgroup is
 * removed; the pages stay cached, charged to the removed cgroup until the kernel reclaims
 * them. A `python3 -c pass` leaves about 0.8 MiB. (The dentries and inodes of a sandbox's
 * lookups stay charged too, as kernel memory, not counted here: what dead processes leave
 * there is still being freed when the cgroup is reset.) */
#define CGROUP_REUSE_LEFTOVER_MAX (4u << 20)
/* cgroup v1 counts a cgroup's socket buffers apart from its memory, against a limit of their
 * own (memory.kmem.tcp.limit_in_bytes, which also turns the counting on): a quarter of the
 * memory limit, and at least CGROUP_V1_SOCKET_MIN. A sandbox may so hold up to 1.25 times
 * its memory limit on v1; on v2 socket buffers count in memory.max. */
#define CGROUP_V1_SOCKET_MIN (16u << 20)
uint64_t cgroup_v1_socket_limit(uint64_t memory_bytes);
/* Removes the cgroup directories (must be empty). Returns 0 or -errno (-EBUSY if busy). */
int cgroup_remove(struct cgroup *cg, struct err *e);
/* Frees the handle (does not remove). Accepts NULL; returns NULL. */
struct cgroup *cgroup_free(struct cgroup *cg);
const char *cgroup_name(const struct cgroup *cg);

/* Calls fn for each child cgroup name found in the subtree (for the reaper). */
int cgroup_root_list(struct cgroup_root *root, void (*fn)(const char *name, void *ud), void *ud);
/* Opens an existing child by name without changing it (for the reaper). */
int cgroup_open_existing(struct cgroup_root *root, const char *name, struct cgroup **ret);
