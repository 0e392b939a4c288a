/* SPDX-License-Identifier: MIT */
#pragma once
/* Small files read and written whole, by path under a directory fd (AT_FDCWD allowed). */
#include <sys/types.h>

/* Reads a small file whole into buf (NUL-terminated). Returns length or -errno. */
ssize_t file_read_small(int dirfd, const char *path, char *buf, size_t size);
/* Writes a string to a file (O_WRONLY, no create), as fd_write_str. Returns 0 or -errno. */
int file_write_str(int dirfd, const char *path, const char *s);
