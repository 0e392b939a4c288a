/* SPDX-License-Identifier: MIT */
#pragma once
/* The cloned child between clone3 and execve of sbxd-init. Everything it needs is in
 * struct child_plan, built by the parent (spawn.c) before clone. CHILD-SAFE: it runs on a
 * small stack in the parent's memory (CLONE_VM) and makes syscalls only through sys.h. */
#include <stdint.h>

struct child_plan {
    const char *path;  /* absolute path to execve */
    char *const *argv; /* NULL-terminated */
    char *const *envp; /* NULL-terminated */
    int ctl_fd;        /* becomes CTL_FD, without CLOEXEC */
    int become_root;   /* in a new user namespace: take uid/gid 0 of its map, no groups */
    int sync_rfd;      /* the child waits here (a socket) for CHILD_GO from the parent */
    int sync_wfd;      /* the parent's end: closed first so that EOF means the parent gave up */
    int report_wfd;    /* CLOEXEC: a struct child_report on failure, EOF on exec */
};

#define CHILD_GO 'g'

enum child_stage {
    CHILD_STAGE_SYNC = 1, /* waiting for CHILD_GO */
    CHILD_STAGE_IDS,      /* setgroups / setresgid / setresuid in the new user namespace */
    CHILD_STAGE_FDS,      /* dup3 / close_range */
    CHILD_STAGE_SIGNALS,  /* dispositions and mask */
    CHILD_STAGE_EXEC,     /* execve */
};

/* What the child writes to report_wfd before it exits. */
struct child_report {
    int32_t stage; /* enum child_stage */
    int32_t err;   /* -errno */
};

/* The clone3 entry point (arg: struct child_plan *). Waits for CHILD_GO, becomes root of
 * its user namespace (when become_root), puts ctl_fd on
 * CTL_FD, closes every other fd, resets signal dispositions and the mask, and execs
 * path with an empty environment. Returns (and so exits) 127 only on failure, after
 * writing a struct child_report. CHILD-SAFE. */
int child_run(void *arg);

/* "exec", "fds", ... for messages. */
const char *child_stage_name(int stage);
