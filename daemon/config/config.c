/* SPDX-License-Identifier: MIT */
/* The configuration: deploy/sbxd.yaml and the pool files (from pools_dir or the embedded
 * copies) through libyaml's document API into a struct config, driven by key tables. Every
 * error names "file:line:col" of the offending node. Nothing here logs above debug, touches
 * the system beyond reading the files, or keeps state after returning. This file holds the
 * top-level tables, the files and the whole config's rules; the walker is config_walk.c,
 * egress config_egress.c, pools config_pool.c. */
#define LOG_MOD "config"
#include "config/config.h"

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config_impl.h"
#include "lib/alloc.h"
#include "wire/ctl.h"
#include "config/embedded.h"
#include "lib/str.h"
#include "lib/strv.h"
#include "lib/textfile.h"
#include "lib/util.h"
#include "lib/yamlnode.h"

static const struct field limits_fields[] = {
    RANGE("max_connections", T_U32, CM_MAX_CONN, TOP(c.max_connections), 1, UINT32_MAX),
    RANGE("max_requests_per_connection", T_U32, CM_MAX_REQ, TOP(c.max_requests_per_conn), 1,
          UINT32_MAX),
    RANGE("max_message_bytes", T_SIZE, CM_MAX_MSG, TOP(c.max_message_bytes), KIB, 64 * MIB),
    /* The whole exec must fit one CTL_TASK packet to the sandbox's init. */
    RANGE("max_argv_bytes", T_SIZE, CM_MAX_ARGV, TOP(c.max_argv_bytes), 1, CTL_TASK_DATA_MAX),
    /* Open sessions, all pools (each pool's max_sessions bounds its own). */
    RANGE("max_sessions", T_U32, CM_MAX_SESSIONS, TOP(c.max_sessions), 0, 65536),
    END,
};

static const struct field cgroup_fields[] = {
    FIELD("version", T_CGROUP_VERSION, CM_CG_VERSION, 0, TOP(c.cgroup_version)),
    FIELD("parent", T_STR, CM_CG_PARENT, F_NULLABLE, TOP(c.cgroup_parent)),
    FIELD("name", T_NAME, CM_CG_NAME, 0, TOP(c.cgroup_name)),
    FIELD("require_limits", T_BOOL, CM_CG_REQUIRE_LIMITS, 0, TOP(c.cgroup_require_limits)),
    END,
};

static const struct field userns_fields[] = {
    FIELD("enabled", T_BOOL, CM_USERNS_ENABLED, 0, TOP(c.userns)),
    RANGE("host_id_base", T_U32, CM_USERNS_BASE, TOP(c.userns_base), 0, UINT32_MAX),
    RANGE("id_count", T_U32, CM_USERNS_COUNT, TOP(c.userns_count), 0, UINT32_MAX),
    RANGE("slots", T_U32, CM_USERNS_SLOTS, TOP(c.userns_slots), 1, CONFIG_USERNS_SLOTS_MAX),
    END,
};

/* Capability tokens (docs/TOKENS.md). */
static const struct field tokens_fields[] = {
    CHECKED("mount_roots", T_STRLIST, CM_TOK_MOUNT_ROOTS, 0, TOP(c.token_mount_roots),
            config_egress_check_abs_path),
    RANGE("max_ttl", T_DURATION, CM_TOK_MAX_TTL, TOP(c.token_max_ttl_ns), 1000000000ULL,
          30ULL * 24 * 3600 * 1000000000ULL),
    RANGE("default_ttl", T_DURATION, CM_TOK_DEFAULT_TTL, TOP(c.token_default_ttl_ns), 1000000000ULL,
          30ULL * 24 * 3600 * 1000000000ULL),
    RANGE("max_tokens", T_U32, CM_TOK_MAX_TOKENS, TOP(c.token_max_tokens), 1, 1000000),
    FIELD("required", T_BOOL, CM_TOK_REQUIRED, 0, TOP(c.token_required)),
    END,
};

static const struct field audit_fields[] = {
    FIELD("enabled", T_BOOL, CM_AUDIT_ENABLED, 0, TOP(c.audit_enabled)),
    RANGE("max_age", T_DURATION, CM_AUDIT_MAX_AGE, TOP(c.audit_max_age_ns), 0, UINT64_MAX),
    RANGE("max_rows", T_U32, CM_AUDIT_MAX_ROWS, TOP(c.audit_max_rows), 0, UINT32_MAX),
    FIELD("fsync", T_BOOL, CM_AUDIT_FSYNC, 0, TOP(c.audit_fsync)),
    RANGE("max_bytes", T_SIZE, CM_AUDIT_MAX_BYTES, TOP(c.audit_max_bytes), 0, UINT64_MAX),
    RANGE("refusals_per_connection", T_U32, CM_AUDIT_PER_CONN, TOP(c.audit_refusals_per_conn), 0,
          UINT32_MAX),
    RANGE("refusals_per_peer", T_U32, CM_AUDIT_PER_PEER, TOP(c.audit_refusals_per_peer), 0,
          UINT32_MAX),
    RANGE("denials_per_task", T_U32, CM_AUDIT_PER_TASK, TOP(c.audit_denials_per_task), 0,
          UINT32_MAX),
    RANGE("budget_window", T_DURATION, CM_AUDIT_WINDOW, TOP(c.audit_budget_window_ns),
          1000000000ULL, 30ULL * 24 * 3600 * 1000000000ULL),
    RANGE("summary_interval", T_DURATION, CM_AUDIT_INTERVAL, TOP(c.audit_summary_interval_ns),
          100000000ULL, 24ULL * 3600 * 1000000000ULL),
    END,
};

static const struct field config_fields[] = {
    FIELD("socket", T_STR, CM_SOCKET, 0, TOP(c.socket_path)),
    FIELD("admin_socket", T_STR, CM_ADMIN_SOCKET, 0, TOP(c.admin_socket_path)),
    FIELD("socket_group", T_STR, CM_SOCKET_GROUP, F_NULLABLE, TOP(c.socket_group)),
    FIELD("socket_mode", T_STR, CM_SOCKET_MODE, F_NULLABLE, TOP(c.socket_mode)),
    FIELD("state_dir", T_STR, CM_STATE_DIR, 0, TOP(c.state_dir)),
    FIELD("metrics", T_STR, CM_METRICS, F_EMPTY_OK, TOP(c.metrics_addr)),
    FIELD("init_path", T_STR, CM_INIT_PATH, F_NULLABLE, TOP(c.init_path)),
    FIELD("images_dir", T_STR, CM_IMAGES_DIR, F_NULLABLE, TOP(c.images_dir)),
    FIELD("default_pool", T_NAME, CM_DEFAULT_POOL, 0, TOP(c.default_pool)),
    FIELD("log_level", T_LOG_LEVEL, CM_LOG_LEVEL, 0, TOP(c.log_level)),
    FIELD("pools_dir", T_STR, CM_POOLS_DIR, F_LOAD_ONLY, TOP(pools_dir)),
    RANGE("drain_grace", T_DURATION, CM_DRAIN_GRACE, TOP(c.drain_grace_ns), 0, UINT64_MAX),
    RANGE("refill_parallelism", T_U32, CM_REFILL, TOP(c.refill_parallelism), 1, 64),
    RANGE("topup_idle", T_DURATION, CM_TOPUP_IDLE, TOP(c.topup_idle_ns), 0, 60ULL * 1000000000ULL),
    FIELD("netns_recycle", T_BOOL, CM_NETNS_RECYCLE, 0, TOP(c.netns_recycle)),
    FIELD("fork_server", T_BOOL, CM_FORK_SERVER, 0, TOP(c.fork_server)),
    FIELD("sched_batch", T_BOOL, CM_SCHED_BATCH, 0, TOP(c.sched_batch)),
    MAP("limits", CM_LIMITS, limits_fields),
    MAP("cgroup", CM_CGROUP, cgroup_fields),
    MAP("userns", CM_USERNS, userns_fields),
    MAP("tokens", CM_TOKENS, tokens_fields),
    MAP("egress", CM_EGRESS, egress_fields),
    MAP("audit", CM_AUDIT, audit_fields),
    END,
};

/* Reads a regular file of at most CONFIG_FILE_MAX bytes, NUL-terminated. */
static int read_text(int dirfd, const char *path, const char *label, char **ret, size_t *ret_len,
                     struct err *e)
{
    return textfile_read(dirfd, path, label, CONFIG_FILE_MAX, ret, ret_len, e);
}

struct build {
    struct config *c;
    struct pool_marks *pm; /* parallel to c->pools */
};

static int build_add_pool(struct build *b, const char *file, const char *text, size_t len,
                          struct err *e)
{
    struct config *c = b->c;
    struct pool_config p;
    struct pool_marks pm;

    if (c->n_pools >= CONFIG_POOLS_MAX) {
        return err_setx(e, -E2BIG, "%s: too many pools (at most %d)", file, CONFIG_POOLS_MAX);
    }
    int r = config_pool_parse(file, text, len, &p, &pm, e);
    if (r < 0) {
        return r;
    }
    c->pools = xrealloc(c->pools, (c->n_pools + 1) * sizeof(*c->pools));
    b->pm = xrealloc(b->pm, (c->n_pools + 1) * sizeof(*b->pm));
    c->pools[c->n_pools] = p;
    b->pm[c->n_pools] = pm;
    c->n_pools++;
    return 0;
}

static void dir_closep(DIR **d)
{
    if (*d) {
        (void)closedir(*d);
    }
}

static bool is_pool_file(const char *n)
{
    size_t len = strlen(n);
    return n[0] != '.' && len > 5 && strcmp(n + len - 5, ".yaml") == 0;
}

/* Loads every *.yaml of dir (hidden files aside) in name order. cfg/dm: the config file
 * and the pools_dir node, for messages. */
static int build_pools_dir(struct build *b, const char *dir, const char *cfg, const struct mark *dm,
                           struct err *e)
{
    scoped(dir_closep) DIR *d = opendir(dir);
    scoped_strv struct strv ns = STRV_INIT;

    if (!d) {
        int r = -errno;
        return config_walk_failr(e, r, cfg, dm, "pools_dir '%s': cannot open: %s", dir,
                                 err_name(r));
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                int r = -errno;
                return config_walk_failr(e, r, cfg, dm, "pools_dir '%s': cannot read: %s", dir,
                                         err_name(r));
            }
            break;
        }
        if (!is_pool_file(de->d_name)) {
            continue;
        }
        if (ns.n >= CONFIG_POOLS_MAX) {
            return config_walk_failr(e, -E2BIG, cfg, dm, "pools_dir '%s': more than %d pool files",
                                     dir, CONFIG_POOLS_MAX);
        }
        strv_push(&ns, de->d_name);
    }
    if (ns.n == 0) {
        return fail(e, cfg, dm, "pools_dir '%s' has no *.yaml pool files", dir);
    }
    strv_sort(&ns);
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') {
        dlen--;
    }
    for (size_t i = 0; i < ns.n; i++) {
        scoped_free char *label = xasprintf("%.*s/%s", (int)dlen, dir, ns.v[i]);
        scoped_free char *text = NULL;
        size_t len = 0;
        int r = read_text(dirfd(d), ns.v[i], label, &text, &len, e);
        if (r < 0) {
            return r;
        }
        r = build_add_pool(b, label, text, len, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int build_pools_embedded(struct build *b, struct err *e)
{
    for (size_t i = 0; i < embedded_n_pools; i++) {
        const struct embedded_file *f = &embedded_pools[i];
        int r = build_add_pool(b, f->name, f->text, f->len, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static void config_defaults(struct config *c)
{
    *c = (struct config){
        .source = NULL,
        .socket_path = xstrdup("./var/sbxd.sock"),
        .admin_socket_path = xstrdup("./var/sbxd-admin.sock"),
        .state_dir = xstrdup("./var"),
        .metrics_addr = xstrdup("127.0.0.1:9464"),
        .init_path = NULL,
        .images_dir = NULL,
        .default_pool = xstrdup("python"),
        .log_level = LOG_INFO,
        .max_connections = 256,
        .max_requests_per_conn = 64,
        .max_message_bytes = MIB,
        .max_argv_bytes = 64 * KIB,
        .max_sessions = 256,
        .drain_grace_ns = 10ULL * 1000000000ULL,
        .refill_parallelism = 2,
        .topup_idle_ns = 20ULL * 1000000ULL,
        .netns_recycle = true,
        .fork_server = true,
        .sched_batch = true,
        .cgroup_version = 0,
        .cgroup_parent = NULL,
        .cgroup_name = xstrdup("sbxd"),
        .cgroup_require_limits = true,
        .userns = true,
        .userns_base = CONFIG_USERNS_BASE,
        .userns_count = 65536,
        .userns_slots = 1024,
        .egress_port = 3128,
        .token_max_ttl_ns = 3600ULL * 1000000000ULL,
        .token_default_ttl_ns = 900ULL * 1000000000ULL,
        .token_max_tokens = 10000,
        .token_required = false,
        .audit_enabled = true,
        .audit_max_age_ns = 720ULL * 3600ULL * 1000000000ULL,
        .audit_max_rows = 2000000,
        .audit_max_bytes = 1ULL << 30,
        .audit_refusals_per_conn = 20,
        .audit_refusals_per_peer = 100,
        .audit_denials_per_task = 20,
        .audit_budget_window_ns = 3600ULL * 1000000000ULL,
        .audit_summary_interval_ns = 60ULL * 1000000000ULL,
        .pools = NULL,
        .n_pools = 0,
    };
}

/* Frees what c owns, not c itself. */
static void config_clear(struct config *c)
{
    for (size_t i = 0; i < c->n_pools; i++) {
        config_pool_clear(&c->pools[i]);
    }
    free(c->pools);
    for (size_t i = 0; i < c->n_egress_profiles; i++) {
        config_egress_profile_clear(&c->egress_profiles[i]);
    }
    free(c->egress_profiles);
    config_egress_strlist_free(c->token_mount_roots, c->n_token_mount_roots);
    free(c->source);
    free(c->socket_path);
    free(c->admin_socket_path);
    free(c->socket_group);
    free(c->socket_mode);
    free(c->state_dir);
    free(c->metrics_addr);
    free(c->init_path);
    free(c->images_dir);
    free(c->default_pool);
    free(c->cgroup_name);
    free(c->cgroup_parent);
    memset(c, 0, sizeof(*c));
}

static void top_clear(struct top *t)
{
    config_clear(&t->c);
    free(t->pools_dir);
    t->pools_dir = NULL;
}

/* "ADDR:PORT" with a non-empty address (IPv6 in brackets) and a port in 1..65535. */
static bool metrics_addr_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    uint64_t port = 0;
    if (!colon || colon == s || parse_u64(colon + 1, &port) < 0 || port < 1 || port > 65535) {
        return false;
    }
    if (s[0] == '[') {
        return colon[-1] == ']' && colon - s > 2;
    }
    return memchr(s, ':', (size_t)(colon - s)) == NULL;
}

/* No ".." component: the parent is a path below each hierarchy's mount point. */
static bool cgroup_parent_ok(const char *s)
{
    if (!*s) {
        return false;
    }
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            return false;
        }
        p += n;
        while (*p == '/') {
            p++;
        }
    }
    return true;
}

/* Whether path's directory is dir, both as written (trailing slashes aside): the config
 * is checked before any directory exists. */
static bool in_dir(const char *path, const char *dir)
{
    const char *slash = strrchr(path, '/');
    const char *d = slash ? path : ".";
    size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    size_t m = strlen(dir);
    while (m > 1 && dir[m - 1] == '/') {
        m--;
    }
    while (n > 1 && d[n - 1] == '/') {
        n--;
    }
    return n == m && strncmp(d, dir, n) == 0;
}

int config_socket_access(const struct config *c, struct config_socket_access *ret, struct err *e)
{
    *ret = (struct config_socket_access){.has_group = false, .gid = 0, .mode = 0660};
    if (c->socket_mode) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(c->socket_mode, &end, 8);
        if (errno || end == c->socket_mode || *end || c->socket_mode[0] == '-' || v > 0777) {
            return err_setx(e, -EINVAL, "'socket_mode' must be an octal mode like 0660, not '%s'",
                            c->socket_mode);
        }
        ret->mode = (unsigned)v;
    }
    if (c->socket_group) {
        /* A number is a gid, even one without a name in /etc/group. */
        char *end;
        errno = 0;
        unsigned long v = strtoul(c->socket_group, &end, 10);
        const struct group *g = getgrnam(c->socket_group);
        if (g) {
            ret->gid = g->gr_gid;
        } else if (!errno && end != c->socket_group && !*end && c->socket_group[0] != '-' &&
                   v < UINT32_MAX) {
            ret->gid = (gid_t)v;
        } else {
            return err_setx(e, -ESRCH, "'socket_group': no group '%s'", c->socket_group);
        }
        ret->has_group = true;
    }
    return 0;
}

/* Top-level rules. m: the config's marks, or NULL for "file: msg" messages. */
static int config_check_globals(const struct config *c, const struct mark *m, struct err *e)
{
    const char *f = c->source;
    int r = config_walk_fields_check(config_fields, NULL, (const char *)c, f, m, e);
    if (r < 0) {
        return r;
    }
    if (strcmp(c->socket_path, c->admin_socket_path) == 0) {
        return fail(e, f, config_walk_mark_pick(m, CM_ADMIN_SOCKET, CM_SOCKET),
                    "'socket' and 'admin_socket' must differ");
    }
    struct config_socket_access sa;
    r = config_socket_access(c, &sa, e);
    if (r < 0) {
        char msg[256];
        str_copy(msg, err_msg(e), sizeof(msg));
        int key = r == -ESRCH ? CM_SOCKET_GROUP : CM_SOCKET_MODE;
        return fail(e, f, config_walk_mark_pick(m, key, -1), "%s", msg);
    }
    if (sa.has_group && in_dir(c->socket_path, c->state_dir)) {
        /* The state dir is 0700: a group on a socket inside it would open nothing. */
        return fail(e, f, config_walk_mark_pick(m, CM_SOCKET, CM_SOCKET_GROUP),
                    "with 'socket_group', 'socket' must be outside 'state_dir' (e.g. "
                    "/run/sbx/sbxd.sock)");
    }
    if (*c->metrics_addr && !metrics_addr_ok(c->metrics_addr)) {
        return fail(e, f, config_walk_mark_pick(m, CM_METRICS, -1),
                    "'metrics' must be ADDR:PORT like 127.0.0.1:9464, or \"\" to disable");
    }
    if (c->cgroup_parent && !cgroup_parent_ok(c->cgroup_parent)) {
        return fail(e, f, config_walk_mark_pick(m, CM_CG_PARENT, -1),
                    "'cgroup.parent' must be a path without '..'");
    }
    if (c->userns) {
        /* SECURITY: a map starting at host id 0 would make sandbox root the host's root. */
        if (c->userns_base == 0) {
            return fail(e, f, config_walk_mark_pick(m, CM_USERNS_BASE, CM_USERNS_ENABLED),
                        "'userns.host_id_base' must not be 0 (host root)");
        }
        if (c->userns_count < 1) {
            return fail(e, f, config_walk_mark_pick(m, CM_USERNS_COUNT, CM_USERNS_ENABLED),
                        "'userns.id_count' must be at least 1");
        }
        /* (uid_t)-1 is no id, so the last mapped id stays below it. */
        if ((uint64_t)c->userns_base + (uint64_t)c->userns_count * c->userns_slots >
            (uint64_t)UINT32_MAX) {
            return fail(e, f, config_walk_mark_pick(m, CM_USERNS_SLOTS, CM_USERNS_BASE),
                        "'userns.host_id_base' + 'userns.id_count' * 'userns.slots' must not "
                        "exceed %u",
                        UINT32_MAX);
        }
    }
    if (c->token_default_ttl_ns > c->token_max_ttl_ns) {
        return fail(e, f, config_walk_mark_pick(m, CM_TOK_DEFAULT_TTL, CM_TOK_MAX_TTL),
                    "'tokens.default_ttl' must not exceed 'tokens.max_ttl'");
    }
    if (c->audit_max_rows != 0 && c->audit_max_rows < 1000) {
        return fail(e, f, config_walk_mark_pick(m, CM_AUDIT_MAX_ROWS, CM_AUDIT),
                    "'audit.max_rows' must be 0 (no limit) or at least 1000");
    }
    if (c->audit_max_bytes != 0 && c->audit_max_bytes < MIB) {
        return fail(e, f, config_walk_mark_pick(m, CM_AUDIT_MAX_BYTES, CM_AUDIT),
                    "'audit.max_bytes' must be 0 (no limit) or at least 1MiB");
    }
    return config_egress_check(c, m, e);
}

/* Rules across the config and its pools. cm, pm: marks, or NULL. */
static int config_check_cross(const struct config *c, const struct mark *cm,
                              const struct pool_marks *pm, struct err *e)
{
    if (c->n_pools == 0 || !c->pools) {
        return fail(e, c->source, config_walk_mark_pick(cm, CM_POOLS_DIR, -1),
                    "at least one pool is required");
    }
    for (size_t i = 0; i < c->n_pools; i++) {
        const struct pool_config *p = &c->pools[i];
        const struct mark *m = pm ? pm[i].m : NULL;
        for (size_t j = 0; j < i; j++) {
            if (p->name && c->pools[j].name && strcmp(p->name, c->pools[j].name) == 0) {
                return fail(e, p->file, config_walk_mark_pick(m, PM_NAME, -1),
                            "pool name '%s' is already used by %s", p->name,
                            c->pools[j].file ? c->pools[j].file : "another pool");
            }
        }
        if (c->userns && p->uid >= c->userns_count) {
            return fail(e, p->file, config_walk_mark_pick(m, PM_UID, -1),
                        "'uid' (%u) must be below userns.id_count (%u)", p->uid, c->userns_count);
        }
        if (c->userns && p->gid >= c->userns_count) {
            return fail(e, p->file, config_walk_mark_pick(m, PM_GID, PM_UID),
                        "'gid' (%u) must be below userns.id_count (%u)", p->gid, c->userns_count);
        }
    }
    if (c->userns) {
        /* Each live sandbox holds a block of host ids: the pools' sandboxes at once must fit
         * (sbxd waits for a block when dying ones still hold them). */
        uint64_t sum = 0;
        for (size_t i = 0; i < c->n_pools; i++) {
            sum += c->pools[i].max;
        }
        if (sum > c->userns_slots) {
            return fail(e, c->source, config_walk_mark_pick(cm, CM_USERNS_SLOTS, CM_USERNS),
                        "the pools' max add up to %llu sandboxes, more than userns.slots (%u)",
                        (unsigned long long)sum, c->userns_slots);
        }
    }
    if (!config_find_pool(c, c->default_pool)) {
        char names[256];
        size_t o = 0;
        names[0] = '\0';
        for (size_t i = 0; i < c->n_pools && o < sizeof(names); i++) {
            int n = snprintf(names + o, sizeof(names) - o, "%s%s", i ? ", " : "",
                             c->pools[i].name ? c->pools[i].name : "?");
            o = n < 0 ? sizeof(names) : o + (size_t)n;
        }
        return fail(e, c->source, config_walk_mark_pick(cm, CM_DEFAULT_POOL, -1),
                    "default_pool '%s' is not a loaded pool (loaded: %s)", c->default_pool, names);
    }
    return 0;
}

int config_validate(const struct config *c, struct err *e)
{
    int r = config_check_globals(c, NULL, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < c->n_pools; i++) {
        r = config_pool_check(&c->pools[i], NULL, e);
        if (r < 0) {
            return r;
        }
    }
    return config_check_cross(c, NULL, NULL, e);
}

static char *resolve_dir(const char *base_dir, const char *dir)
{
    if (dir[0] == '/' || !base_dir || !*base_dir) {
        return xstrdup(dir);
    }
    size_t n = strlen(base_dir);
    return xasprintf("%s%s%s", base_dir, base_dir[n - 1] == '/' ? "" : "/", dir);
}

int config_parse(const char *name, const char *text, size_t len, const char *base_dir,
                 struct config **ret, struct err *e)
{
    scoped(top_clear) struct top t;
    scoped(yamlnode_doc_done) struct yamlnode_doc y = {.loaded = false};
    scoped_free struct pool_marks *pm = NULL;
    struct mark cm[CM_COUNT];

    memset(&t, 0, sizeof(t));
    memset(cm, 0, sizeof(cm));
    config_defaults(&t.c);
    t.c.source = xstrdup(name);
    int r = yamlnode_doc_load(name, text, len, &y, e);
    if (r < 0) {
        return r;
    }
    struct walk w = {name, &y.doc, cm, (char *)&t};
    r = config_walk_document(&w, config_fields, e);
    if (r < 0) {
        return r;
    }
    yamlnode_doc_done(&y);
    /* Derived default: a short max_ttl also shortens the default. */
    if (cm[CM_TOK_DEFAULT_TTL].line == 0 && t.c.token_default_ttl_ns > t.c.token_max_ttl_ns) {
        t.c.token_default_ttl_ns = t.c.token_max_ttl_ns;
    }
    r = config_check_globals(&t.c, cm, e);
    if (r < 0) {
        return r;
    }
    struct build b = {&t.c, NULL};
    if (t.pools_dir) {
        scoped_free char *dir = resolve_dir(base_dir, t.pools_dir);
        r = build_pools_dir(&b, dir, name, &cm[CM_POOLS_DIR], e);
    } else {
        r = build_pools_embedded(&b, e);
    }
    pm = b.pm;
    if (r < 0) {
        return r;
    }
    r = config_check_cross(&t.c, cm, pm, e);
    if (r < 0) {
        return r;
    }
    struct config *c = xmalloc(sizeof(*c));
    *c = t.c;
    memset(&t.c, 0, sizeof(t.c));
    char q[128];
    log_debug("msg=\"config parsed\" source=%s pools=%zu", log_quote(c->source, q, sizeof(q)),
              c->n_pools);
    *ret = c;
    return 0;
}

int config_load(const char *path, struct config **ret, struct err *e)
{
    struct config *c = NULL;
    int r;

    if (!path) {
        r = config_parse(embedded_config.name, embedded_config.text, embedded_config.len, NULL, &c,
                         e);
        if (r < 0) {
            return r;
        }
        free(c->source);
        c->source = xstrdup("<embedded>");
        *ret = c;
        return 0;
    }
    scoped_free char *text = NULL;
    scoped_free char *base = NULL;
    size_t len = 0;
    r = read_text(AT_FDCWD, path, path, &text, &len, e);
    if (r < 0) {
        return r;
    }
    const char *slash = strrchr(path, '/');
    if (slash) {
        base = slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
    }
    r = config_parse(path, text, len, base, &c, e);
    if (r < 0) {
        return r;
    }
    *ret = c;
    return 0;
}

struct config *config_free(struct config *c)
{
    if (c) {
        config_clear(c);
        free(c);
    }
    return NULL;
}

const struct egress_profile_config *config_find_egress_profile(const struct config *c,
                                                               const char *name)
{
    if (!c || !name) {
        return NULL;
    }
    for (size_t i = 0; i < c->n_egress_profiles; i++) {
        if (strcmp(c->egress_profiles[i].name, name) == 0) {
            return &c->egress_profiles[i];
        }
    }
    return NULL;
}

const struct pool_config *config_find_pool(const struct config *c, const char *name)
{
    if (!c || !name) {
        return NULL;
    }
    for (size_t i = 0; i < c->n_pools; i++) {
        if (c->pools[i].name && strcmp(c->pools[i].name, name) == 0) {
            return &c->pools[i];
        }
    }
    return NULL;
}
