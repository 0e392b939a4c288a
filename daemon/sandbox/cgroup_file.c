/* SPDX-License-Identifier: MIT */
/* The cgroup interface, its files: one-write writes and small reads of the control files
 * (numbers, "key value" lines), directly or through a cgroup's held-open copies, for
 * cgroup.c and both backends. Never creates or removes a directory. */
#define LOG_MOD "cgroup"
#include "sandbox/cgroup_impl.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"

bool cgroup_file_exists(int dfd, const char *file)
{
    return faccessat(dfd, file, F_OK, 0) == 0;
}

int cgroup_file_write(int dfd, const char *file, const char *s, struct err *e)
{
    int r = file_write_str(dfd, file, s);
    if (r < 0) {
        return err_set(e, r, "%s: write '%s'", file, s);
    }
    return 0;
}

int cgroup_file_write_u64(int dfd, const char *file, uint64_t v, struct err *e)
{
    char s[24];
    (void)snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
    return cgroup_file_write(dfd, file, s, e);
}

/* Parses a counter file's text (n bytes in buf, NUL-terminated): a number or "max". */
static int parse_counter(char *buf, ssize_t n, uint64_t *ret)
{
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        buf[--n] = '\0';
    }
    if (strcmp(buf, "max") == 0) {
        *ret = UINT64_MAX;
        return 0;
    }
    return parse_u64(buf, ret);
}

/* Reads an open cgroup file whole with one pread from offset 0 (the kernel generates the
 * text anew for each read from the start); NUL-terminated. Returns the length or -errno. */
static ssize_t pread_text(int fd, char *buf, size_t size)
{
    ssize_t n = RETRY_EINTR(pread(fd, buf, size - 1, 0));
    if (n < 0) {
        return -errno;
    }
    buf[n] = '\0';
    return n;
}

int cgroup_file_pread_u64(int fd, uint64_t *ret)
{
    char buf[64];
    ssize_t n = pread_text(fd, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return parse_counter(buf, n, ret);
}

/* cg's held-open copy of file (opened on first use), or -ENOSPC when cg holds all it may
 * (the caller opens the file itself then), or -errno. */
static int cached_fd(struct cgroup *cg, int dfd, const char *file, bool wr)
{
    for (size_t i = 0; i < cg->n_cached; i++) {
        const struct cgroup_cached_file *c = &cg->cached[i];
        if (c->dfd == dfd && c->wr == wr && strcmp(c->file, file) == 0) {
            return c->fd;
        }
    }
    if (cg->n_cached == CGROUP_CACHED_MAX) {
        return -ENOSPC;
    }
    int fd = openat(dfd, file, (wr ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    cg->cached[cg->n_cached++] = (struct cgroup_cached_file){dfd, file, wr, fd};
    return fd;
}

/* Reads a small file whole: through cg's held-open copy when cg is not NULL. */
static ssize_t read_small(struct cgroup *cg, int dfd, const char *file, char *buf, size_t size)
{
    int fd = cg ? cached_fd(cg, dfd, file, false) : -ENOSPC;
    if (fd == -ENOSPC) {
        return file_read_small(dfd, file, buf, size);
    }
    return fd < 0 ? fd : pread_text(fd, buf, size);
}

int cgroup_file_cg_write(struct cgroup *cg, int dfd, const char *file, const char *s, struct err *e)
{
    int fd = cached_fd(cg, dfd, file, true);
    if (fd == -ENOSPC) {
        return cgroup_file_write(dfd, file, s, e);
    }
    int r = fd < 0 ? fd : fd_write_str(fd, s);
    return r < 0 ? err_set(e, r, "%s: write '%s'", file, s) : 0;
}

int cgroup_file_cg_read_u64(struct cgroup *cg, int dfd, const char *file, uint64_t *ret)
{
    char buf[64];
    ssize_t n = read_small(cg, dfd, file, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return parse_counter(buf, n, ret);
}

int cgroup_file_read_u64(int dfd, const char *file, uint64_t *ret)
{
    return cgroup_file_cg_read_u64(NULL, dfd, file, ret);
}

int cgroup_file_read_keys(int dfd, const char *file, const char *const *keys, uint64_t *vals,
                          size_t n)
{
    return cgroup_file_cg_read_keys(NULL, dfd, file, keys, vals, n);
}

int cgroup_file_cg_read_keys(struct cgroup *cg, int dfd, const char *file, const char *const *keys,
                             uint64_t *vals, size_t n)
{
    char buf[4096];
    ssize_t len = read_small(cg, dfd, file, buf, sizeof(buf));
    if (len < 0) {
        return (int)len;
    }
    int found = 0;
    for (char *line = buf; *line;) {
        char *end = strchrnul(line, '\n');
        bool last = *end == '\0';
        *end = '\0';
        char *sp = strchr(line, ' ');
        if (sp) {
            *sp = '\0';
            for (size_t i = 0; i < n; i++) {
                uint64_t v;
                if (strcmp(line, keys[i]) == 0 && parse_u64(sp + 1, &v) == 0) {
                    vals[i] = v;
                    found++;
                    break;
                }
            }
        }
        line = last ? end : end + 1;
    }
    return found;
}

int cgroup_file_read_key(int dfd, const char *file, const char *key, uint64_t *ret)
{
    return cgroup_file_cg_read_key(NULL, dfd, file, key, ret);
}

int cgroup_file_cg_read_key(struct cgroup *cg, int dfd, const char *file, const char *key,
                            uint64_t *ret)
{
    uint64_t v = 0;
    int r = cgroup_file_cg_read_keys(cg, dfd, file, &key, &v, 1);
    if (r <= 0) {
        return r < 0 ? r : -ENODATA;
    }
    *ret = v;
    return 0;
}
