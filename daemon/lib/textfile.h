/* SPDX-License-Identifier: MIT */
#pragma once
/* Reading a small configuration-like text file whole (config, pool files, seccomp
 * profiles). Start-up only; not CHILD-SAFE (allocates). */
#include <stddef.h>

#include "lib/err.h"

/* Reads the regular file dirfd/path (at most max bytes) into a NUL-terminated buffer the
 * caller frees. label names the file in messages ("<label>: cannot open: ENOENT").
 * Returns 0 or -errno: -EINVAL not a regular file, -EFBIG larger than max, -EAGAIN it
 * grew while being read. */
int textfile_read(int dirfd, const char *path, const char *label, size_t max, char **ret,
                  size_t *ret_len, struct err *e);
