/* SPDX-License-Identifier: MIT */
#pragma once
/* A sandbox's /work as sbxd reads and writes it: files created for a task, read, listed and
 * collected, inside a tree a hostile task controlled. Blocking: worker threads only (never
 * the loop). root is a directory fd of the workspace's root (the sandbox's work_fd), which
 * these functions only use, never close. rel is a path relative to it as wspath_normalize
 * writes it ("a/b"); every open is openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV and O_NOFOLLOW, so a symlink anywhere on the way,
 * a mount or a ".." is refused and nothing outside the tree is ever touched. FIFOs, sockets
 * and devices are never opened. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct err;

/* The calling thread's filesystem ids while it writes a workspace: a sandbox's /work is a
 * tmpfs of its user namespace, where sbxd's root is not mapped, so the kernel refuses it an
 * inode (EOVERFLOW); the thread makes them as the task's user (its host ids), which also
 * gives up the file capabilities (DAC override, fowner) meanwhile, so that it writes only
 * where the task could. The fs ids are the thread's own: sbxd's other threads keep theirs.
 * workspace_as_task returns what workspace_as_sbxd puts back. */
struct workspace_ids {
    uid_t uid;
    gid_t gid;
};
struct workspace_ids workspace_as_task(uid_t uid, gid_t gid);
void workspace_as_sbxd(struct workspace_ids saved);

/* Creates rel for writing (call it as the task: workspace_as_task): its missing parents are made
 * (mode 0755, owned by uid:gid: the task's host ids, sandbox_task_host_ids), the file created or
 * truncated, owned by uid:gid and given exactly mode (permission bits only; the umask does not
 * apply). An existing rel that is not a regular file is refused (a directory -EISDIR, a symlink
 * -ELOOP, anything else -ENXIO), as is a parent that is not a directory (-ENOTDIR) or a symlink
 * (-ELOOP). *ret_fd: the file, O_WRONLY, CLOEXEC (writes to a tmpfs do not wait); the caller closes
 * it. -EINVAL for a mode over 0777 or a rel that is not in normal form. */
int workspace_create(int root, const char *rel, uint32_t mode, uid_t uid, gid_t gid, int *ret_fd,
                     struct err *e);
/* Opens the existing regular file rel for writing at any offset (no O_TRUNC, no O_APPEND).
 * -ENOENT when it does not exist; what is not a regular file is refused as by
 * workspace_create. *ret_fd: O_WRONLY, CLOEXEC; the caller closes it. */
int workspace_open_at(int root, const char *rel, int *ret_fd, struct err *e);
/* Reads at most len bytes of the regular file rel from off into buf: *got bytes (fewer at
 * the end of the file; 0 at or past it) and *size the file's size. Errors as
 * workspace_open_at's. */
int workspace_read(int root, const char *rel, uint64_t off, size_t len, char *buf, size_t *got,
                   uint64_t *size, struct err *e);

/* workspace_entry.type */
#define WORKSPACE_FILE 'f'
#define WORKSPACE_DIR 'd'
#define WORKSPACE_SYMLINK 'l'
#define WORKSPACE_OTHER 'o'

struct workspace_entry {
    char *name; /* owned */
    char type;  /* WORKSPACE_FILE ... (what fstatat says, never following a symlink) */
    uint64_t size;
    uint32_t mode; /* permission bits (07777) */
};
/* The name of an entry's type for the protocol: "file", "dir", "symlink" or "other". */
const char *workspace_type_name(char type);
/* One directory's entries (no recursion), sorted by name: rel, or the root itself when rel
 * is "" or ".". At most max of them (*truncated when the directory holds more; which ones
 * then depends on the directory's order, and the walk stops after max + 1). An entry that
 * vanishes while listed is left out. *ret: an array of *n (NULL when empty), freed with
 * workspace_entries_free. -ENOTDIR when rel is not a directory, -ELOOP a symlink. */
int workspace_list(int root, const char *rel, size_t max, struct workspace_entry **ret, size_t *n,
                   bool *truncated, struct err *e);
void workspace_entries_free(struct workspace_entry *v, size_t n);

/* Defaults of workspace_limits' walk bounds (0 in max_depth, max_entries or max_skipped
 * means its default; max_bytes and max_files are taken as they are, 0 collecting nothing). */
#define WORKSPACE_MAX_DEPTH 64
#define WORKSPACE_MAX_ENTRIES 100000
#define WORKSPACE_MAX_SKIPPED 100
/* The deepest walk allowed whatever max_depth says (one directory fd per level is open). */
#define WORKSPACE_DEPTH_LIMIT 256

struct workspace_limits {
    uint64_t max_bytes;   /* data of all files together (the pool's collect_max_bytes) */
    uint32_t max_files;   /* files collected (collect_max_files) */
    uint32_t max_depth;   /* directories below the root the walk enters */
    uint64_t max_entries; /* directory entries the walk reads, in all */
    uint32_t max_skipped; /* skip records kept; later skips are not reported */
};
struct workspace_file {
    char *path;    /* owned; relative to the root */
    uint32_t mode; /* permission bits (07777) */
    uint64_t size; /* the file's size: fstat's at open, or what was there when it shrank */
    char *data;    /* owned, len bytes (NULL when len is 0) */
    size_t len;
    bool truncated; /* len < size: the bytes cap stopped it */
};
/* Skip reasons: "symlink", "fifo", "socket", "device", "directory_too_deep",
 * "too_many_entries", "file_limit" (max_files), "collect_limit" (max_bytes), "unreadable",
 * "vanished" (static strings). */
struct workspace_skip {
    char *path; /* owned; "." for the root itself (too_many_entries there) */
    const char *reason;
};
struct workspace_collect {
    struct workspace_file *files; /* sorted by path */
    size_t n_files;
    struct workspace_skip *skipped; /* sorted by path */
    size_t n_skipped;
    bool truncated; /* max_bytes, max_files, max_depth or max_entries left something out */
    uint64_t bytes; /* the sum of the files' len */
};
/* (workspace_collect.c) Collects the regular files matching any of the n normalized
 * patterns (wspath_pattern_normalize, matched by wspath_match),
 * walking the tree once, depth first, each directory's entries in name order, and entering
 * only directories under which a pattern could match; where the patterns spell out the
 * names they need in a directory (wspath_dir_names), only those are looked up (and
 * counted as entries). A pattern not in normal form is -EINVAL. A match that is a symlink (or a
 * symlink where a pattern could descend), a FIFO, a socket or a device is skipped with its
 * reason, as is what the limits leave out; directories matching are ignored. Each file is
 * read up to the size fstat gives at open and the bytes left of max_bytes (a sparse file's
 * holes too). Hard links are read as the regular files they are. *ret is filled (free it
 * with workspace_collect_free) and 0 returned whenever root is a readable directory; else
 * -errno and *ret untouched. */
int workspace_collect(int root, const char *const *patterns, size_t n,
                      const struct workspace_limits *lim, struct workspace_collect *ret,
                      struct err *e);
void workspace_collect_free(struct workspace_collect *c);
