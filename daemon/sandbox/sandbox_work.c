/* SPDX-License-Identifier: MIT */
/* A sandbox's workspace as sbxd sees it: the root of its /work tmpfs that init hands over with
 * READY (checked here before the sandbox may be WARM), and the host ids that files sbxd
 * writes there belong to. It never reads or writes the workspace itself (workspace.c does). */
#include "sandbox/sandbox.h"

#include <errno.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "config/config.h"
#include "sandbox/idslot.h"
#include "sandbox/kit.h"

/* SECURITY: sbxd writes and reads the task's files below the fd that init's READY brought
 * (sandbox/workspace.c): it must be what init mounted as the sandbox's /work, a tmpfs's
 * directory of the task's user, and nothing of the host (a shared /dev/shm, say) that an
 * init could have opened instead. Returns 0 or -errno with e. */
int sandbox_work_check(const struct sandbox *sb, struct err *e)
{
    struct stat st;
    struct statfs sfs;
    if (sb->work_fd < 0) {
        return err_setx(e, -EPROTO, "sandbox init sent no /work directory with READY");
    }
    if (fstat(sb->work_fd, &st) < 0 || fstatfs(sb->work_fd, &sfs) < 0) {
        return err_set(e, -errno, "sandbox's /work");
    }
    if (!S_ISDIR(st.st_mode) || sfs.f_type != TMPFS_MAGIC) {
        return err_setx(e, -EPROTO, "sandbox init's /work is not a tmpfs directory");
    }
    uid_t uid;
    gid_t gid;
    sandbox_task_host_ids(sb, &uid, &gid);
    if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != 0755) {
        return err_setx(e, -EPROTO, "sandbox init's /work is not the task's (%u:%u %04o)",
                        (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

int sandbox_work_fd(const struct sandbox *sb)
{
    return sb->work_fd;
}

void sandbox_task_host_ids(const struct sandbox *sb, uid_t *ret_uid, gid_t *ret_gid)
{
    const struct sandbox_env *env = sb->kit->env;
    /* The namespace maps its ids 0.. onto its block (spawn.c's id maps). */
    uint32_t base = sb->has_ids ? idslot_base(env->ids, sb->ids) : 0;
    *ret_uid = (uid_t)(base + sb->kit->pc->uid);
    *ret_gid = (gid_t)(base + sb->kit->pc->gid);
}
