/* SPDX-License-Identifier: MIT */
/* Capability tokens, their mounts: a granted source re-checked against the policy of now
 * and opened as a detached, private, read-only tree for sbxd-init to attach. Never mounts
 * anything into sbxd's own tree. */
#include "token/token_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "lib/sys.h"
#include "lib/util.h"

#ifndef RESOLVE_NO_SYMLINKS
#define RESOLVE_NO_SYMLINKS 0x04 /* linux 5.6 */
#endif

/* Opens one mount source as a detached, private, read-only tree. */
int token_mount_open(const struct token_policy *pol, const struct token_mount *m, int *ret_fd,
                     bool *ret_file, struct err *e)
{
    struct stat st;
    /* SECURITY: the policy of now, not only that of the issue. */
    int r = token_policy_allows(pol, m->src, e);
    if (r < 0) {
        return r;
    }
    /* SECURITY: the real path was checked; a symlink swapped in since is refused. */
    scoped_close int src = sys_openat2(AT_FDCWD, m->src, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
                                       RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (src < 0) {
        return err_set(e, src, "mount source '%.200s'", m->src);
    }
    if (fstat(src, &st) < 0) {
        return err_set(e, -errno, "mount source '%.200s'", m->src);
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        return err_setx(e, -EACCES, "mount source '%.200s' is no longer a directory or file",
                        m->src);
    }
    scoped_close int tree =
        sys_open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0) {
        return err_set(e, tree, "open_tree '%.200s'", m->src);
    }
    /* SECURITY: a clone of a shared mount joins its peer group, and a mount made later
     * below the source on the host would then appear in the sandbox, writable. Made
     * private first, so that the recursive read-only below covers anything that did. */
    char path[64];
    (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", tree);
    if (mount(NULL, path, NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        return err_set(e, -errno, "make mount of '%.200s' private", m->src);
    }
    r = sys_mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE,
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
    if (r < 0) {
        return err_set(e, r, "read-only mount of '%.200s'", m->src);
    }
    *ret_fd = take_fd(&tree);
    *ret_file = S_ISREG(st.st_mode);
    return 0;
}
