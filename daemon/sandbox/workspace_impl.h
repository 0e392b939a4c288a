/* SPDX-License-Identifier: MIT */
#pragma once
/* What workspace.c and workspace_collect.c share: the one way a path under a workspace is
 * opened, the check of a path's normal form, and directory reading. Worker threads only. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/workspace.h"

/* openat2 of path under dfd with flags | O_CLOEXEC | O_NOCTTY (and O_NOFOLLOW but for
 * O_DIRECTORY) and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV: a symlink anywhere on the way is -ELOOP, a way out -EXDEV. Returns the fd
 * or -errno. */
int workspace_open_beneath(int dfd, const char *path, int flags, mode_t mode);
/* Whether rel is in wspath_normalize's form (non-empty components of at most NAME_MAX bytes,
 * none "." or "..", single '/' between them); patterns too. */
bool workspace_rel_ok(const char *rel);
/* pread of up to len bytes at off, fewer only at the end of the file. Returns the bytes read
 * or -errno. */
ssize_t workspace_read_at(int fd, char *buf, size_t len, uint64_t off);
/* A DIR over its own copy of dfd (dfd stays the caller's, for the *at calls); NULL and errno
 * on failure. */
DIR *workspace_dir_open(int dfd);
/* scoped() cleanup of a DIR *. */
void workspace_closedirp(DIR **d);
/* Whether n is "." or "..". */
bool workspace_dot_name(const char *n);
