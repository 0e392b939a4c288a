/* SPDX-License-Identifier: MIT */
/* Capability tokens, the mount policy: which sources a token may mount (under a mount root,
 * clear of the forbidden paths), where (no destination on or below another), and the names
 * of pools and networks it may grant. Pure checks: never opens or mounts anything. */
#include "token/token_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "wire/ctl.h"

bool token_policy_path_within(const char *path, const char *root)
{
    size_t n = strlen(root);
    if (n == 1 && root[0] == '/') {
        return path[0] == '/';
    }
    return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Whether a real path may be exposed: under a root, and neither inside nor holding a
 * forbidden path. Returns 0 or -EACCES with e. */
int token_policy_allows(const struct token_policy *pol, const char *real, struct err *e)
{
    bool rooted = false;
    for (size_t i = 0; i < pol->n_mount_roots && !rooted; i++) {
        rooted = token_policy_path_within(real, pol->mount_roots[i]);
    }
    if (pol->n_mount_roots == 0) {
        return err_setx(e, -EACCES,
                        "no mount roots are configured (tokens.mount_roots, sbxd --mount-root)");
    }
    if (!rooted) {
        return err_setx(e, -EACCES, "mount source '%.200s' is not under an allowed mount root",
                        real);
    }
    /* SECURITY: sbxd's state (the token database) and its sockets are never exposed, nor
     * any directory that holds them. */
    for (size_t i = 0; i < pol->n_forbidden; i++) {
        const char *f = pol->forbidden[i];
        if (token_policy_path_within(real, f) || token_policy_path_within(f, real)) {
            return err_setx(e, -EACCES,
                            "mount source '%.200s' would expose sbxd's state or sockets", real);
        }
    }
    return 0;
}

int token_policy_check_src(const struct token_policy *pol, const char *src, char **ret_real,
                           struct err *e)
{
    char real[PATH_MAX];
    struct stat st;
    if (src[0] != '/') {
        return err_setx(e, -EINVAL, "mount source '%.200s' must be an absolute path", src);
    }
    /* SECURITY: decided on the real path, after every symlink and "..". */
    if (!realpath(src, real)) {
        return err_setx(e, -EINVAL, "mount source '%.200s': %s", src, err_name(-errno));
    }
    int r = token_policy_allows(pol, real, e);
    if (r < 0) {
        return r;
    }
    if (stat(real, &st) < 0) {
        return err_setx(e, -EINVAL, "mount source '%.200s': %s", real, err_name(-errno));
    }
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
        return err_setx(e, -EACCES, "mount source '%.200s' is not a directory or regular file",
                        real);
    }
    *ret_real = xstrdup(real);
    return 0;
}

int token_policy_check_dsts(const struct token_mount *mounts, size_t n, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        const char *why = ctl_mount_dst_check(mounts[i].dst);
        if (why) {
            return err_setx(e, -EACCES, "mount destination '%.200s': %s", mounts[i].dst, why);
        }
        for (size_t j = 0; j < i; j++) {
            if (token_policy_path_within(mounts[i].dst, mounts[j].dst) ||
                token_policy_path_within(mounts[j].dst, mounts[i].dst)) {
                return err_setx(e, -EACCES, "mount destinations '%.100s' and '%.100s' overlap",
                                mounts[j].dst, mounts[i].dst);
            }
        }
    }
    return 0;
}

bool token_policy_name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char c = s[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
            return false;
        }
    }
    return n >= 1 && n <= TOKEN_NAME_MAX;
}
