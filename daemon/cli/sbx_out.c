/* SPDX-License-Identifier: MIT */
/* Files that sbxd sent back (exec's collected files) written under a local directory. The
 * paths come from a sandbox, so nothing here trusts them: a path must be relative and plain,
 * every directory on the way is opened with O_NOFOLLOW beneath the one before it, and the
 * file is written to a new name and renamed into place, so that neither a symlink nor a
 * hard link already in the directory can send the bytes anywhere else. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/util.h"

#define SBX_OUT_COMPONENT_MAX 255

int sbx_out_check_path(const char *path, size_t len, const char **why)
{
    size_t start = 0;

    if (len == 0) {
        *why = "empty path";
        return -EINVAL;
    }
    if (len >= PATH_MAX) {
        *why = "path too long";
        return -ENAMETOOLONG;
    }
    if (memchr(path, '\0', len)) {
        *why = "NUL byte in the path";
        return -EINVAL;
    }
    if (path[0] == '/') {
        *why = "absolute path";
        return -EINVAL;
    }
    for (size_t i = 0; i <= len; i++) {
        if (i < len && path[i] != '/') {
            continue;
        }
        size_t n = i - start;
        const char *c = path + start;
        if (n == 0) {
            *why = "empty path component";
            return -EINVAL;
        }
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
            *why = "'.' or '..' component";
            return -EINVAL;
        }
        if (n > SBX_OUT_COMPONENT_MAX) {
            *why = "path component over 255 bytes";
            return -ENAMETOOLONG;
        }
        start = i + 1;
    }
    return 0;
}

/* Opens the directory name beneath at, creating it when missing; a symlink or anything but
 * a directory there is refused. */
static int sbx_out_subdir(int at, const char *name, const char *shown, struct err *e)
{
    if (mkdirat(at, name, 0777) < 0 && errno != EEXIST) {
        return err_setx(e, -errno, "cannot create directory '%s': %s", shown, strerror(errno));
    }
    /* SECURITY: O_NOFOLLOW, so that a symlink already in the directory (to /etc, to ..)
     * is never a way out of it. */
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
        return err_setx(e, -errno, "'%s' is a symlink or not a directory", shown);
    }
    if (fd < 0) {
        return err_setx(e, -errno, "cannot open directory '%s': %s", shown, strerror(errno));
    }
    return fd;
}

int sbx_out_write(int dirfd, const char *path, size_t path_len, const char *data, size_t len,
                  uint32_t mode, struct err *e)
{
    static unsigned serial;
    char rel[PATH_MAX], tmp[64];
    scoped_close int sub = -1;
    scoped_close int fd = -1;
    const char *why = NULL;
    int at = dirfd;
    char *name = rel;
    struct stat st;
    int r;

    r = sbx_out_check_path(path, path_len, &why);
    if (r < 0) {
        return err_setx(e, r, "%s", why);
    }
    memcpy(rel, path, path_len);
    rel[path_len] = '\0';
    for (char *slash = strchr(name, '/'); slash; slash = strchr(name, '/')) {
        *slash = '\0';
        r = sbx_out_subdir(at, name, rel, e);
        *slash = '/';
        if (r < 0) {
            return r;
        }
        sub = fd_close(sub);
        sub = r;
        at = sub;
        name = slash + 1;
    }
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
        return err_setx(e, -EEXIST, "'%s' exists and is not a regular file", rel);
    }
    /* A new name beside it, renamed over it at the end: a hard link at the name is replaced,
     * never written through, and a half-written file never has the name. */
    (void)snprintf(tmp, sizeof(tmp), ".sbx-out-%ld-%u", (long)getpid(), serial++);
    fd = openat(at, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return err_setx(e, -errno, "cannot create '%s': %s", rel, strerror(errno));
    }
    r = fd_write_all(fd, data, len);
    if (r >= 0 && fchmod(fd, mode & 0777u) < 0) {
        r = -errno;
    }
    if (r >= 0 && close(take_fd(&fd)) < 0) {
        r = -errno;
    }
    if (r >= 0 && renameat(at, tmp, at, name) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlinkat(at, tmp, 0);
        return err_setx(e, r, "cannot write '%s': %s", rel, strerror(-r));
    }
    return 0;
}
