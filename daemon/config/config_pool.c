/* SPDX-License-Identifier: MIT */
/* Pool files (the YAML files of pools/, or their embedded copies): the pool key table, a
 * pool's defaults, and the rules one pool must keep. Cross-pool rules and the files
 * themselves are config.c's. */
#define LOG_MOD "config"
#include "config/config_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "lib/yamlnode.h"

#define POOL(m) offsetof(struct pool_config, m)

static const struct field pool_fields[] = {
    FIELD("name", T_NAME, PM_NAME, 0, POOL(name)),
    RANGE("warm", T_U32, PM_WARM, POOL(warm), 0, UINT32_MAX),
    RANGE("max", T_U32, PM_MAX, POOL(max), 1, UINT32_MAX),
    RANGE("queue", T_U32, PM_QUEUE, POOL(queue), 0, UINT32_MAX),
    RANGE("memory", T_SIZE, PM_MEMORY, POOL(memory_bytes), 16 * MIB, UINT64_MAX),
    FIELD("cpu", T_CPU, PM_CPU, 0, POOL(cpu)),
    RANGE("pids", T_U32, PM_PIDS, POOL(pids), 1, UINT32_MAX),
    RANGE("timeout", T_DURATION, PM_TIMEOUT, POOL(timeout_ns), 1, UINT64_MAX),
    RANGE("max_timeout", T_DURATION, PM_MAX_TIMEOUT, POOL(max_timeout_ns), 1, UINT64_MAX),
    RANGE("output_cap", T_SIZE, PM_OUTPUT_CAP, POOL(output_cap), 1, 64 * MIB),
    /* SECURITY: a tmpfs of size 0 has no limit at all. */
    RANGE("tmp_size", T_SIZE, PM_TMP_SIZE, POOL(tmp_size), MIB, UINT64_MAX),
    RANGE("work_size", T_SIZE, PM_WORK_SIZE, POOL(work_size), MIB, UINT64_MAX),
    RANGE("uid", T_U32, PM_UID, POOL(uid), 0, UINT32_MAX),
    RANGE("gid", T_U32, PM_GID, POOL(gid), 0, UINT32_MAX),
    /* At least stdio and a few more; at most the kernel's default fs.nr_open. */
    RANGE("nofile", T_U32, PM_NOFILE, POOL(nofile), 16, 1048576),
    FIELD("seccomp", T_NAME, PM_SECCOMP, 0, POOL(seccomp)),
    FIELD("image", T_NAME, PM_IMAGE, 0, POOL(image)),
    FIELD("dev_shm", T_BOOL, PM_DEV_SHM, 0, POOL(dev_shm)),
    RANGE("shm_size", T_SIZE, PM_SHM_SIZE, POOL(shm_size), MIB, UINT64_MAX),
    /* Reads from the image's disk, per sandbox; 0: no limit (cgroup.h). */
    RANGE("io_read_bps", T_SIZE, PM_IO_READ_BPS, POOL(io_read_bps), 0, UINT64_MAX),
    RANGE("io_read_iops", T_U32, PM_IO_READ_IOPS, POOL(io_read_iops), 0, UINT32_MAX),
    /* exec's files and collect (docs/PROTOCOL.md). The collect caps bound the result sbxd
     * holds in memory and sends in one message: at most CONFIG_COLLECT_BYTES_MAX and
     * CONFIG_COLLECT_FILES_MAX, which sbx's reader bound is sized from. */
    RANGE("files_max_bytes", T_SIZE, PM_FILES_MAX_BYTES, POOL(files_max_bytes), 0, UINT64_MAX),
    RANGE("files_max_count", T_U32, PM_FILES_MAX_COUNT, POOL(files_max_count), 0, 100000),
    RANGE("files_path_max", T_U32, PM_FILES_PATH_MAX, POOL(files_path_max), 16,
          CONFIG_FILES_PATH_MAX),
    RANGE("files_timeout", T_DURATION, PM_FILES_TIMEOUT, POOL(files_timeout_ns), 1000000,
          UINT64_MAX),
    RANGE("collect_max_bytes", T_SIZE, PM_COLLECT_MAX_BYTES, POOL(collect_max_bytes), 0,
          CONFIG_COLLECT_BYTES_MAX),
    RANGE("collect_max_files", T_U32, PM_COLLECT_MAX_FILES, POOL(collect_max_files), 0,
          CONFIG_COLLECT_FILES_MAX),
    RANGE("session_ttl", T_DURATION, PM_SESSION_TTL, POOL(session_ttl_ns), 1000000000ULL,
          UINT64_MAX),
    RANGE("session_max_ttl", T_DURATION, PM_SESSION_MAX_TTL, POOL(session_max_ttl_ns),
          1000000000ULL, UINT64_MAX),
    RANGE("session_idle_timeout", T_DURATION, PM_SESSION_IDLE, POOL(session_idle_ns), 1000000ULL,
          UINT64_MAX),
    RANGE("max_sessions", T_U32, PM_MAX_SESSIONS, POOL(max_sessions), 0, UINT32_MAX),
    END,
};

void config_pool_clear(struct pool_config *p)
{
    free(p->name);
    free(p->file);
    free(p->seccomp);
    free(p->image);
    memset(p, 0, sizeof(*p));
}

static void pool_defaults(struct pool_config *p, const char *file)
{
    *p = (struct pool_config){
        .name = NULL,
        .file = xstrdup(file),
        .warm = 2,
        .max = 16,
        .queue = 64,
        .memory_bytes = 512 * MIB,
        .cpu = 1.0,
        .pids = 128,
        .timeout_ns = 30ULL * 1000000000ULL,
        .max_timeout_ns = 0,
        .output_cap = 32768,
        .tmp_size = 64 * MIB,
        .work_size = 256 * MIB,
        .uid = 10001,
        .gid = 10001,
        .nofile = 256,
        .seccomp = xstrdup("default"),
        .image = xstrdup("host"),
        .dev_shm = false,
        .shm_size = 16 * MIB,
        .files_max_bytes = 128 * MIB,
        .files_max_count = 1000,
        .files_path_max = 1024,
        .files_timeout_ns = 60ULL * 1000000000ULL,
        .collect_max_bytes = 16 * MIB,
        .collect_max_files = 1000,
        .session_ttl_ns = 15ULL * 60 * 1000000000ULL,
        .session_max_ttl_ns = 4ULL * 3600 * 1000000000ULL,
        .session_idle_ns = 5ULL * 60 * 1000000000ULL,
    };
}

/* Pool rules beyond each field's own. m: the pool's marks, or NULL for "file: msg". */
int config_pool_check(const struct pool_config *p, const struct mark *m, struct err *e)
{
    const char *f = p->file;
    int r = config_walk_fields_check(pool_fields, NULL, (const char *)p, f, m, e);
    if (r < 0) {
        return r;
    }
    if (p->warm > p->max) {
        return fail(e, f, config_walk_mark_pick(m, PM_WARM, PM_MAX),
                    "'warm' (%u) must not exceed 'max' (%u)", p->warm, p->max);
    }
    if (p->max_timeout_ns < p->timeout_ns) {
        return fail(e, f, config_walk_mark_pick(m, PM_MAX_TIMEOUT, PM_TIMEOUT),
                    "'max_timeout' must not be shorter than 'timeout'");
    }
    if (p->session_ttl_ns > p->session_max_ttl_ns) {
        return fail(e, f, config_walk_mark_pick(m, PM_SESSION_TTL, PM_SESSION_MAX_TTL),
                    "'session_ttl' must not exceed 'session_max_ttl'");
    }
    if (p->session_idle_ns > p->session_ttl_ns) {
        return fail(e, f, config_walk_mark_pick(m, PM_SESSION_IDLE, PM_SESSION_TTL),
                    "'session_idle_timeout' must not exceed 'session_ttl'");
    }
    /* A session holds a sandbox for minutes: one-shot tasks must always keep a place. */
    if (p->max_sessions >= p->max) {
        return fail(e, f, config_walk_mark_pick(m, PM_MAX_SESSIONS, PM_MAX),
                    "'max_sessions' (%u) must be below 'max' (%u)", p->max_sessions, p->max);
    }
    /* SECURITY: tasks never run as root, not even root of their own user namespace. */
    if (p->uid == 0) {
        return fail(e, f, config_walk_mark_pick(m, PM_UID, -1), "'uid' must not be 0 (root)");
    }
    if (p->gid == 0) {
        return fail(e, f, config_walk_mark_pick(m, PM_GID, PM_UID), "'gid' must not be 0 (root)");
    }
    return 0;
}

/* Parses and checks one pool file into *ret, its marks into *ret_marks. */
int config_pool_parse(const char *file, const char *text, size_t len, struct pool_config *ret,
                      struct pool_marks *ret_marks, struct err *e)
{
    scoped(config_pool_clear) struct pool_config p = {0};
    scoped(yamlnode_doc_done) struct yamlnode_doc y = {.loaded = false};
    struct pool_marks pm;

    memset(&pm, 0, sizeof(pm));
    pool_defaults(&p, file);
    int r = yamlnode_doc_load(file, text, len, &y, e);
    if (r < 0) {
        return r;
    }
    struct walk w = {file, &y.doc, pm.m, (char *)&p};
    r = config_walk_document(&w, pool_fields, e);
    if (r < 0) {
        return r;
    }
    if (!p.name) {
        return fail(e, file, &pm.m[PM_ROOT], "missing required key 'name'");
    }
    /* Derived defaults: timeout_ns is at most 1e18, so 4 times it fits. */
    if (pm.m[PM_MAX_TIMEOUT].line == 0) {
        p.max_timeout_ns = 4 * p.timeout_ns;
    }
    if (pm.m[PM_GID].line == 0) {
        p.gid = p.uid;
    }
    if (pm.m[PM_MAX_SESSIONS].line == 0) {
        p.max_sessions = p.max / 2;
    }
    r = config_pool_check(&p, pm.m, e);
    if (r < 0) {
        return r;
    }
    *ret = p;
    memset(&p, 0, sizeof(p));
    *ret_marks = pm;
    return 0;
}

int config_parse_pool(const char *name, const char *text, size_t len, struct pool_config *ret,
                      struct err *e)
{
    struct pool_marks pm;
    return config_pool_parse(name, text, len, ret, &pm, e);
}
