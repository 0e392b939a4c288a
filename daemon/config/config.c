/* SPDX-License-Identifier: MIT */
/* The configuration: deploy/sbxd.yaml and the pool files (from pools_dir or the embedded
 * copies) through libyaml's document API into a struct config, driven by key tables. Every
 * error names "file:line:col" of the offending node. Nothing here logs above debug, touches
 * the system beyond reading the files, or keeps state after returning. */
#define LOG_MOD "config"
#include "config/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <yaml.h>

#include "lib/alloc.h"
#include "wire/ctl.h"
#include "wire/egress_parse.h"
#include "wire/netaddr.h"
#include "config/embedded.h"
#include "lib/textfile.h"
#include "lib/yamlnode.h"
#include "lib/util.h"

#define KIB (1024ULL)
#define MIB (1024ULL * 1024)

/* Config and pool files are small; anything bigger is a mistake, not a config. */
#define CONFIG_FILE_MAX (1024 * 1024)
#define CONFIG_POOLS_MAX 256
#define NAME_LEN_MAX 32
#define CPU_MAX 64.0

/* A node's position, 1-based; line 0 means the value did not come from the file. key_line
 * is where its key was, for "duplicate key" messages. */
struct mark {
    size_t line;
    size_t col;
    size_t key_line;
};

/* Mark slots: index 0 is the document's root, the others one per key of the tables below. */
enum config_mark {
    CM_ROOT,
    CM_SOCKET,
    CM_ADMIN_SOCKET,
    CM_STATE_DIR,
    CM_METRICS,
    CM_INIT_PATH,
    CM_IMAGES_DIR,
    CM_DEFAULT_POOL,
    CM_LOG_LEVEL,
    CM_POOLS_DIR,
    CM_DRAIN_GRACE,
    CM_REFILL,
    CM_TOPUP_IDLE,
    CM_NETNS_RECYCLE,
    CM_FORK_SERVER,
    CM_SCHED_BATCH,
    CM_LIMITS,
    CM_MAX_CONN,
    CM_MAX_REQ,
    CM_MAX_MSG,
    CM_MAX_ARGV,
    CM_CGROUP,
    CM_CG_VERSION,
    CM_CG_PARENT,
    CM_CG_NAME,
    CM_CG_REQUIRE_LIMITS,
    CM_USERNS,
    CM_USERNS_ENABLED,
    CM_USERNS_BASE,
    CM_USERNS_COUNT,
    CM_USERNS_SLOTS,
    CM_EGRESS,
    CM_EGRESS_PORT,
    CM_EGRESS_PROFILES,
    CM_TOKENS,
    CM_TOK_MOUNT_ROOTS,
    CM_TOK_MAX_TTL,
    CM_TOK_DEFAULT_TTL,
    CM_TOK_MAX_TOKENS,
    CM_TOK_REQUIRED,
    CM_AUDIT,
    CM_AUDIT_ENABLED,
    CM_AUDIT_MAX_AGE,
    CM_AUDIT_MAX_ROWS,
    CM_AUDIT_FSYNC,
    CM_COUNT
};

enum pool_mark {
    PM_ROOT,
    PM_NAME,
    PM_WARM,
    PM_MAX,
    PM_QUEUE,
    PM_MEMORY,
    PM_CPU,
    PM_PIDS,
    PM_TIMEOUT,
    PM_MAX_TIMEOUT,
    PM_OUTPUT_CAP,
    PM_TMP_SIZE,
    PM_UID,
    PM_GID,
    PM_NOFILE,
    PM_SECCOMP,
    PM_IMAGE,
    PM_DEV_SHM,
    PM_SHM_SIZE,
    PM_IO_READ_BPS,
    PM_IO_READ_IOPS,
    PM_COUNT
};

struct pool_marks {
    struct mark m[PM_COUNT];
};

enum field_type {
    T_STR,      /* char *, non-empty unless a flag says otherwise */
    T_NAME,     /* char *, [a-z0-9_-]{1,32} */
    T_U32,      /* uint32_t */
    T_SIZE,     /* uint64_t bytes, parse_size */
    T_DURATION, /* uint64_t ns, parse_duration_ns */
    T_CPU,      /* double, plain decimal */
    T_BOOL,     /* bool */
    T_LOG_LEVEL,
    T_CGROUP_VERSION, /* int: auto 0, 1, 2 */
    T_MAP,            /* nested mapping of `sub` fields, same target */
    T_STRLIST,        /* char ** at off, its size_t count right after it */
    T_METHODS,        /* uint32_t EGRESS_METHOD_* bits from a sequence of method names */
    T_PROFILES,       /* egress profiles: a mapping of names (array + count at off) */
    T_ROUTES,         /* egress routes: a sequence of mappings (array + count at off) */
};

#define F_NULLABLE 0x1u  /* null or "" leaves the string NULL */
#define F_EMPTY_OK 0x2u  /* null or "" gives "" */
#define F_LOAD_ONLY 0x4u /* not in struct config: skipped by field_check */

struct field {
    const char *key;
    enum field_type type;
    int mark;
    unsigned flags;
    size_t off; /* in the walk's target */
    const struct field *sub;
    uint64_t min, max; /* T_U32, T_SIZE, T_DURATION: the allowed range */
    /* T_STR and T_STRLIST: a syntax check of each value; sets *why and returns -EINVAL. */
    int (*check)(const char *s, const char **why);
};

/* clang-format off */
#define FIELD(key, type, mark, flags, off) {key, type, mark, flags, off, NULL, 0, 0, NULL}
#define RANGE(key, type, mark, off, min, max) {key, type, mark, 0, off, NULL, min, max, NULL}
#define MAP(key, mark, sub) {key, T_MAP, mark, 0, 0, sub, 0, 0, NULL}
#define CHECKED(key, type, mark, flags, off, check) {key, type, mark, flags, off, NULL, 0, 0, check}
#define END {NULL, T_STR, 0, 0, 0, NULL, 0, 0, NULL}
/* clang-format on */

/* Egress value checks (defined with the egress walkers below). */
static int check_hostport(const char *s, const char **why);
static int check_cidr(const char *s, const char **why);
static int check_route_name(const char *s, const char **why);
static int check_path_prefix(const char *s, const char **why);
static int check_upstream(const char *s, const char **why);
static int check_abs_path(const char *s, const char **why);
static int check_header_name(const char *s, const char **why);

/* What the top level of a config file fills: the config, plus pools_dir, which is only
 * needed while loading. The config comes first, so its offsets also fit a struct config. */
struct top {
    struct config c;
    char *pools_dir;
};
_Static_assert(offsetof(struct top, c) == 0, "struct top must start with its config");

#define TOP(m) offsetof(struct top, m)

static const struct field limits_fields[] = {
    RANGE("max_connections", T_U32, CM_MAX_CONN, TOP(c.max_connections), 1, UINT32_MAX),
    RANGE("max_requests_per_connection", T_U32, CM_MAX_REQ, TOP(c.max_requests_per_conn), 1,
          UINT32_MAX),
    RANGE("max_message_bytes", T_SIZE, CM_MAX_MSG, TOP(c.max_message_bytes), KIB, 64 * MIB),
    /* The whole exec must fit one CTL_TASK packet to the sandbox's init. */
    RANGE("max_argv_bytes", T_SIZE, CM_MAX_ARGV, TOP(c.max_argv_bytes), 1, CTL_TASK_DATA_MAX),
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

/* ---- Egress tables (docs/EGRESS.md) ---- */

#define EGRESS_PROFILES_MAX 64
#define EGRESS_LIST_MAX 256
#define EGRESS_ROUTES_MAX 64

enum profile_mark {
    PFM_ROOT,
    PFM_ALLOW,
    PFM_ALLOW_ADDRESSES,
    PFM_ROUTES,
    PFM_READ_ONLY,
    PFM_MAX_REQUEST,
    PFM_MAX_TASK,
    PFM_MAX_CONN,
    PFM_COUNT
};

enum route_mark {
    RM_ROOT,
    RM_NAME,
    RM_METHODS,
    RM_PATH_PREFIX,
    RM_UPSTREAM,
    RM_CREDENTIAL,
    RM_HEADER,
    RM_COUNT
};

#define PROF(m) offsetof(struct egress_profile_config, m)
#define ROUTE(m) offsetof(struct egress_route_config, m)
/* T_STRLIST, T_ROUTES and T_PROFILES keep their count right after the array pointer. */
_Static_assert(PROF(n_allow) == PROF(allow) + sizeof(char **), "allow count");
_Static_assert(PROF(n_allow_addresses) == PROF(allow_addresses) + sizeof(char **),
               "allow_addresses count");
_Static_assert(PROF(n_routes) == PROF(routes) + sizeof(void *), "routes count");
_Static_assert(TOP(c.n_egress_profiles) == TOP(c.egress_profiles) + sizeof(void *),
               "profiles count");

static const struct field route_fields[] = {
    CHECKED("name", T_STR, RM_NAME, 0, ROUTE(name), check_route_name),
    FIELD("methods", T_METHODS, RM_METHODS, 0, ROUTE(methods)),
    CHECKED("path_prefix", T_STR, RM_PATH_PREFIX, 0, ROUTE(path_prefix), check_path_prefix),
    CHECKED("upstream", T_STR, RM_UPSTREAM, 0, ROUTE(upstream), check_upstream),
    CHECKED("credential_file", T_STR, RM_CREDENTIAL, F_NULLABLE, ROUTE(credential_file),
            check_abs_path),
    CHECKED("header", T_STR, RM_HEADER, 0, ROUTE(header), check_header_name),
    END,
};

static const struct field profile_fields[] = {
    CHECKED("allow", T_STRLIST, PFM_ALLOW, 0, PROF(allow), check_hostport),
    CHECKED("allow_addresses", T_STRLIST, PFM_ALLOW_ADDRESSES, 0, PROF(allow_addresses),
            check_cidr),
    FIELD("routes", T_ROUTES, PFM_ROUTES, 0, PROF(routes)),
    FIELD("read_only", T_BOOL, PFM_READ_ONLY, 0, PROF(read_only)),
    RANGE("max_request_bytes", T_SIZE, PFM_MAX_REQUEST, PROF(max_request_bytes), KIB, UINT64_MAX),
    RANGE("max_task_bytes", T_SIZE, PFM_MAX_TASK, PROF(max_task_bytes), KIB, UINT64_MAX),
    RANGE("max_connections", T_U32, PFM_MAX_CONN, PROF(max_connections), 1, 1024),
    END,
};

static const struct field egress_fields[] = {
    /* Unprivileged: init may hold no privilege over a recycled network namespace. */
    RANGE("port", T_U32, CM_EGRESS_PORT, TOP(c.egress_port), 1024, 65535),
    FIELD("profiles", T_PROFILES, CM_EGRESS_PROFILES, 0, TOP(c.egress_profiles)),
    END,
};

/* Capability tokens (docs/TOKENS.md). */
static const struct field tokens_fields[] = {
    CHECKED("mount_roots", T_STRLIST, CM_TOK_MOUNT_ROOTS, 0, TOP(c.token_mount_roots),
            check_abs_path),
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
    END,
};

static const struct field config_fields[] = {
    FIELD("socket", T_STR, CM_SOCKET, 0, TOP(c.socket_path)),
    FIELD("admin_socket", T_STR, CM_ADMIN_SOCKET, 0, TOP(c.admin_socket_path)),
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
    END,
};

/* Sets e to "file:line:col: msg" (or "file: msg" without a mark) and returns r. */
static int failr(struct err *e, int r, const char *file, const struct mark *m, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int failr(struct err *e, int r, const char *file, const struct mark *m, const char *fmt, ...)
{
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!file) {
        file = "config";
    }
    if (m && m->line > 0) {
        return err_setx(e, r, "%s:%zu:%zu: %s", file, m->line, m->col, msg);
    }
    return err_setx(e, r, "%s: %s", file, msg);
}

#define fail(e, file, m, ...) failr((e), -EINVAL, (file), (m), __VA_ARGS__)

/* The mark of slot id, else of slot alt (-1: none), else the root's; NULL without marks. */
static const struct mark *mark_pick(const struct mark *marks, int id, int alt)
{
    if (!marks) {
        return NULL;
    }
    if (marks[id].line > 0) {
        return &marks[id];
    }
    if (alt >= 0 && marks[alt].line > 0) {
        return &marks[alt];
    }
    return &marks[0];
}

static bool name_ok(const char *s)
{
    size_t n = 0;
    if (!s) {
        return false;
    }
    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) {
            return false;
        }
    }
    return n >= 1 && n <= NAME_LEN_MAX;
}

/* ---- YAML documents ---- */

struct ydoc {
    yaml_document_t doc;
    bool loaded;
};

static void ydoc_done(struct ydoc *y)
{
    if (y->loaded) {
        yaml_document_delete(&y->doc);
        y->loaded = false;
    }
}

struct yparser {
    yaml_parser_t p;
    bool ready;
};

static void yparser_done(struct yparser *y)
{
    if (y->ready) {
        yaml_parser_delete(&y->p);
        y->ready = false;
    }
}

static struct mark mark_of(yaml_mark_t m)
{
    struct yaml_pos q = yamlnode_pos(m);
    return (struct mark){q.line, q.col, q.line};
}

static struct mark node_mark(const yaml_node_t *n)
{
    return mark_of(n->start_mark);
}

static int yaml_problem(const char *file, const char *text, size_t len, const yaml_parser_t *p,
                        struct err *e)
{
    char msg[ERR_MSG_MAX];
    struct yaml_pos q;
    if (yamlnode_problem(p, text, len, &q, msg, sizeof(msg)) < 0) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    struct mark m = {q.line, q.col, q.line};
    return fail(e, file, &m, "%s", msg);
}

/* Parses text as exactly one YAML document into y (an empty stream gives a document without
 * a root); y is left unloaded on failure. */
static int ydoc_load(const char *file, const char *text, size_t len, struct ydoc *y, struct err *e)
{
    scoped(yparser_done) struct yparser yp = {.ready = false};
    scoped(ydoc_done) struct ydoc first = {.loaded = false};
    scoped(ydoc_done) struct ydoc extra = {.loaded = false};

    if (!yaml_parser_initialize(&yp.p)) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    yp.ready = true;
    yaml_parser_set_input_string(&yp.p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&yp.p, &first.doc)) {
        return yaml_problem(file, text, len, &yp.p, e);
    }
    first.loaded = true;
    /* A second document is a mistake, and its syntax errors are errors too. */
    if (!yaml_parser_load(&yp.p, &extra.doc)) {
        return yaml_problem(file, text, len, &yp.p, e);
    }
    extra.loaded = true;
    yaml_node_t *root = yaml_document_get_root_node(&extra.doc);
    if (root) {
        struct mark m = node_mark(root);
        return fail(e, file, &m, "only one YAML document is allowed");
    }
    y->doc = first.doc;
    y->loaded = true;
    first.loaded = false;
    return 0;
}

/* ---- Scalars ---- */

/* YAML 1.1's booleans, in any case. */
static int parse_bool(const char *s, bool *ret)
{
    static const char *const words[][2] = {{"true", "false"}, {"yes", "no"}, {"on", "off"}};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        if (strcasecmp(s, words[i][0]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(s, words[i][1]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* A plain decimal ("2", "0.5", "1.0"): no sign, exponent, hex, inf or nan. */
static int parse_cpu(const char *s, double *ret)
{
    size_t digits = 0, dots = 0, n = 0;
    for (; s[n]; n++) {
        if (s[n] >= '0' && s[n] <= '9') {
            digits++;
        } else if (s[n] == '.') {
            dots++;
        } else {
            return -EINVAL;
        }
    }
    if (digits == 0 || dots > 1 || n > 24) {
        return -EINVAL;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || !end || *end != '\0' || !isfinite(v)) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_cgroup_version(const char *s, int *ret)
{
    if (strcmp(s, "auto") == 0) {
        *ret = 0;
    } else if (strcmp(s, "1") == 0) {
        *ret = 1;
    } else if (strcmp(s, "2") == 0) {
        *ret = 2;
    } else {
        return -EINVAL;
    }
    return 0;
}

static const char *type_desc(enum field_type t)
{
    switch (t) {
    case T_STR:
        return "a string";
    case T_NAME:
        return "a name matching [a-z0-9_-]{1,32}";
    case T_U32:
        return "a whole number";
    case T_SIZE:
        return "a size like 512MiB";
    case T_DURATION:
        return "a duration like 30s, 500ms or a number of seconds";
    case T_CPU:
        return "a number of CPUs like 1.5";
    case T_BOOL:
        return "true or false";
    case T_LOG_LEVEL:
        return "one of error, warn, info, debug";
    case T_CGROUP_VERSION:
        return "auto, 1 or 2";
    case T_MAP:
        return "a mapping";
    case T_STRLIST:
        return "a sequence of strings";
    case T_METHODS:
        return "a sequence of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
    case T_PROFILES:
        return "a mapping of profile names to profiles";
    case T_ROUTES:
        return "a sequence of routes";
    }
    return "a value";
}

/* ---- Walking a document through a key table ---- */

struct walk {
    const char *file;
    yaml_document_t *doc;
    struct mark *marks;
    char *target;
};

static int walk_map(struct walk *w, yaml_node_t *map, const struct field *fields,
                    const char *parent, struct err *e);
static int walk_strlist(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                        struct err *e);
static int walk_methods(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                        struct err *e);
static int walk_profiles(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                         struct err *e);
static int walk_routes(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                       struct err *e);

static int walk_string(struct walk *w, const struct field *f, const char *path,
                       const yaml_node_t *v, const char *s, const struct mark *m, struct err *e)
{
    char **dst = (char **)(w->target + f->off);
    if (yamlnode_is_null(v) || *s == '\0') {
        if (f->flags & F_NULLABLE) {
            free(*dst);
            *dst = NULL;
            return 0;
        }
        if (!(f->flags & F_EMPTY_OK)) {
            return fail(e, w->file, m, "'%s' must be %s, not empty", path, type_desc(f->type));
        }
        s = "";
    }
    free(*dst);
    *dst = xstrdup(s);
    const char *why = NULL;
    if (f->check && *s && f->check(s, &why) < 0) {
        return fail(e, w->file, m, "'%s' ('%.80s'): %s", path, s, why);
    }
    return 0;
}

static int walk_scalar(struct walk *w, const struct field *f, const char *path,
                       const yaml_node_t *v, const struct mark *m, struct err *e)
{
    const char *s = (const char *)v->data.scalar.value;
    void *dst = w->target + f->off;
    uint64_t u = 0;
    int r = 0;

    if (strlen(s) != v->data.scalar.length) {
        return fail(e, w->file, m, "'%s' must not contain NUL bytes", path);
    }
    switch (f->type) {
    case T_STR:
    case T_NAME:
        return walk_string(w, f, path, v, s, m, e);
    case T_U32:
        r = parse_u64(s, &u);
        if (r == -ERANGE || (r == 0 && u > UINT32_MAX)) {
            return fail(e, w->file, m, "'%s' must be at most %u", path, UINT32_MAX);
        }
        if (r == 0) {
            *(uint32_t *)dst = (uint32_t)u;
        }
        break;
    case T_SIZE:
        r = parse_size(s, &u);
        if (r == -ERANGE) {
            return fail(e, w->file, m, "'%s' is too large", path);
        }
        if (r == 0) {
            *(uint64_t *)dst = u;
        }
        break;
    case T_DURATION:
        r = parse_duration_ns(s, &u);
        if (r == -ERANGE) {
            return fail(e, w->file, m, "'%s' is too long", path);
        }
        if (r == 0) {
            *(uint64_t *)dst = u;
        }
        break;
    case T_CPU:
        r = parse_cpu(s, (double *)dst);
        break;
    case T_BOOL:
        r = parse_bool(s, (bool *)dst);
        break;
    case T_LOG_LEVEL:
        r = log_parse_level(s, (enum log_level *)dst);
        break;
    case T_CGROUP_VERSION:
        r = parse_cgroup_version(s, (int *)dst);
        break;
    case T_MAP:
    case T_STRLIST:
    case T_METHODS:
    case T_PROFILES:
    case T_ROUTES:
        r = -EINVAL;
        break;
    }
    if (r < 0) {
        return fail(e, w->file, m, "'%s' must be %s", path, type_desc(f->type));
    }
    return 0;
}

static int walk_value(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                      struct err *e)
{
    struct mark m = node_mark(v);
    if (f->type == T_MAP) {
        if (yamlnode_is_null(v)) {
            return 0;
        }
        if (v->type != YAML_MAPPING_NODE) {
            return fail(e, w->file, &m, "'%s' must be a mapping, not %s", path, yamlnode_kind(v));
        }
        return walk_map(w, v, f->sub, path, e);
    }
    switch (f->type) {
    case T_STRLIST:
        return walk_strlist(w, f, path, v, e);
    case T_METHODS:
        return walk_methods(w, f, path, v, e);
    case T_PROFILES:
        return walk_profiles(w, f, path, v, e);
    case T_ROUTES:
        return walk_routes(w, f, path, v, e);
    default:
        break;
    }
    if (v->type != YAML_SCALAR_NODE) {
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, type_desc(f->type),
                    yamlnode_kind(v));
    }
    return walk_scalar(w, f, path, v, &m, e);
}

static const struct field *field_find(const struct field *fields, const char *key, size_t len)
{
    for (const struct field *f = fields; f->key; f++) {
        if (strlen(f->key) == len && memcmp(f->key, key, len) == 0) {
            return f;
        }
    }
    return NULL;
}

/* Every key must be known and appear once, so the loop stops at the first stray key and
 * never does more than one pass per table entry. */
static int walk_map(struct walk *w, yaml_node_t *map, const struct field *fields,
                    const char *parent, struct err *e)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, pair->value);
        if (!k || !v) {
            struct mark m = node_mark(map);
            return fail(e, w->file, &m, "malformed mapping");
        }
        struct mark km = node_mark(k);
        if (k->type != YAML_SCALAR_NODE) {
            return fail(e, w->file, &km, "keys must be strings, not %s", yamlnode_kind(k));
        }
        const char *key = (const char *)k->data.scalar.value;
        const struct field *f = field_find(fields, key, k->data.scalar.length);
        if (!f && parent) {
            return fail(e, w->file, &km, "unknown key '%.64s' in '%s'", key, parent);
        }
        if (!f) {
            return fail(e, w->file, &km, "unknown key '%.64s'", key);
        }
        char path[96];
        (void)snprintf(path, sizeof(path), "%s%s%s", parent ? parent : "", parent ? "." : "",
                       f->key);
        struct mark *slot = &w->marks[f->mark];
        if (slot->line > 0) {
            return fail(e, w->file, &km, "duplicate key '%s' (first on line %zu)", path,
                        slot->key_line);
        }
        *slot = node_mark(v);
        slot->key_line = km.line;
        int r = walk_value(w, f, path, v, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* Walks a whole document; an empty one (or a bare null) leaves every default. */
static int walk_document(struct walk *w, const struct field *fields, struct err *e)
{
    yaml_node_t *root = yaml_document_get_root_node(w->doc);
    w->marks[0] = (struct mark){1, 1, 1};
    if (!root) {
        return 0;
    }
    w->marks[0] = node_mark(root);
    if (yamlnode_is_null(root)) {
        return 0;
    }
    if (root->type != YAML_MAPPING_NODE) {
        return fail(e, w->file, &w->marks[0], "the top level must be a mapping of keys, not %s",
                    yamlnode_kind(root));
    }
    return walk_map(w, root, fields, NULL, e);
}

/* ---- Egress profiles ---- */

static bool is_token_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* A DNS name: labels of letters, digits, '-' and '_' (1-63 bytes, no '-' at either end),
 * at most 253 bytes, one trailing dot allowed. The last label must not be numeric, so a
 * name is never read as an address ("127.1", "0x7f.1"). */
static bool hostname_ok(const char *h, size_t n)
{
    if (n > 0 && h[n - 1] == '.') {
        n--;
    }
    if (n == 0 || n > 253) {
        return false;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && h[i] != '.') {
            char ch = h[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) {
                return false;
            }
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || h[start] == '-' || h[i - 1] == '-') {
            return false;
        }
        if (i == n) {
            bool numeric = true;
            for (size_t j = start; j < i; j++) {
                numeric = numeric && h[j] >= '0' && h[j] <= '9';
            }
            if (numeric || (len > 1 && h[start] == '0' && (h[start + 1] | 0x20) == 'x')) {
                return false;
            }
        }
        start = i + 1;
    }
    return true;
}

static bool port_ok(const char *s)
{
    uint64_t port = 0;
    return *s && strlen(s) <= 5 && parse_u64(s, &port) == 0 && port >= 1 && port <= 65535;
}

/* "[v6]", "a.b.c.d" or a DNS name (with "*." first when wildcard_ok), in n bytes. */
static bool host_ok(const char *h, size_t n, bool wildcard_ok)
{
    char buf[256];
    unsigned char addr[16];
    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']') {
            return false;
        }
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = '\0';
        return inet_pton(AF_INET6, buf, addr) == 1;
    }
    memcpy(buf, h, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1) {
        return true;
    }
    if (wildcard_ok && n > 2 && h[0] == '*' && h[1] == '.') {
        return hostname_ok(h + 2, n - 2);
    }
    return hostname_ok(h, n);
}

/* Splits "HOST:PORT" at the port's colon (after a bracketed IPv6 address). */
static const char *port_colon(const char *s)
{
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        return rb && rb[1] == ':' ? rb + 1 : NULL;
    }
    const char *c = strrchr(s, ':');
    return c && memchr(s, ':', (size_t)(c - s)) == NULL ? c : NULL;
}

static int check_hostport(const char *s, const char **why)
{
    const char *colon = port_colon(s);
    if (!colon || !port_ok(colon + 1)) {
        *why = "must be HOST:PORT with a port from 1 to 65535";
        return -EINVAL;
    }
    if (!host_ok(s, (size_t)(colon - s), true)) {
        *why = "the host must be a DNS name, '*.' and a DNS name, an IPv4 address or [IPv6]";
        return -EINVAL;
    }
    return 0;
}

static int check_cidr(const char *s, const char **why)
{
    struct netaddr_cidr c;
    *why = "must be an address or ADDRESS/PREFIX with zero host bits";
    return netaddr_cidr_parse(s, &c) < 0 ? -EINVAL : 0;
}

static int check_route_name(const char *s, const char **why)
{
    if (!hostname_ok(s, strlen(s)) || s[strlen(s) - 1] == '.') {
        *why = "must be a host name of letters, digits, '-' and '.' (the task asks for "
               "http://NAME/...)";
        return -EINVAL;
    }
    return 0;
}

/* A path of unreserved, percent-encoded and sub-delimiter characters, ':', '@' and '/',
 * with no "." or ".." segment (plain or encoded) and no empty segment. */
static bool url_path_ok(const char *p)
{
    if (p[0] != '/') {
        return false;
    }
    const char *seg = p + 1;
    for (const char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            size_t n = (size_t)(c - seg);
            bool dot1 = n == 1 && seg[0] == '.';
            bool dot2 = n == 2 && seg[0] == '.' && seg[1] == '.';
            if (dot1 || dot2 || (n == 0 && *c == '/')) {
                return false;
            }
            if (*c == '\0') {
                return true;
            }
            seg = c + 1;
            continue;
        }
        char ch = *c;
        if (ch == '%') {
            /* Encoded dots, slashes and backslashes could hide a segment: refused. */
            if (!isxdigit((unsigned char)c[1]) || !isxdigit((unsigned char)c[2])) {
                return false;
            }
            char hex[3] = {c[1], c[2], '\0'};
            unsigned long v = strtoul(hex, NULL, 16);
            if (v == '.' || v == '/' || v == '\\' || v < 0x20) {
                return false;
            }
            c += 2;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("-._~!$&'()*+,;=:@", ch) != NULL)) {
            return false;
        }
    }
}

static int check_path_prefix(const char *s, const char **why)
{
    if (!url_path_ok(s) && strcmp(s, "/") != 0) {
        *why = "must be an absolute URL path without '.', '..' or empty segments, query or "
               "encoded '.', '/' or '\\\\'";
        return -EINVAL;
    }
    return 0;
}

static int check_upstream(const char *s, const char **why)
{
    if (strncasecmp(s, "http://", 7) != 0) {
        *why = "must start with http:// (sbxd does not originate TLS)";
        return -EINVAL;
    }
    const char *auth = s + 7;
    size_t alen = strcspn(auth, "/");
    const char *path = auth + alen;
    char host[300];
    if (alen == 0 || alen >= sizeof(host)) {
        *why = "must name a host: http://HOST[:PORT][/BASE]";
        return -EINVAL;
    }
    memcpy(host, auth, alen);
    host[alen] = '\0';
    if (strchr(host, '@') || strchr(host, '?') || strchr(host, '#')) {
        *why = "must be http://HOST[:PORT][/BASE] without user info, query or fragment";
        return -EINVAL;
    }
    const char *colon = port_colon(host);
    size_t hlen = colon ? (size_t)(colon - host) : alen;
    if ((colon && !port_ok(colon + 1)) || !host_ok(host, hlen, false)) {
        *why = "must be http://HOST[:PORT][/BASE] with a DNS name, an IPv4 address or [IPv6] "
               "and a port from 1 to 65535";
        return -EINVAL;
    }
    if (*path && strcmp(path, "/") != 0) {
        size_t plen = strlen(path);
        scoped_free char *p = xstrndup(path, path[plen - 1] == '/' ? plen - 1 : plen);
        if (!url_path_ok(p)) {
            *why = "the base path must be a plain URL path (no query, fragment, '.', '..' or "
                   "empty segments)";
            return -EINVAL;
        }
    }
    return 0;
}

static int check_abs_path(const char *s, const char **why)
{
    if (s[0] != '/') {
        *why = "must be an absolute path";
        return -EINVAL;
    }
    return 0;
}

static int check_header_name(const char *s, const char **why)
{
    /* Framing and hop-by-hop headers are the proxy's own business. */
    static const char *const reserved[] = {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
    };
    size_t n = strlen(s);
    *why = "must be an HTTP header name (letters, digits, '-'; at most 64 bytes)";
    if (n == 0 || n > 64) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_token_char(s[i])) {
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
        if (strcasecmp(s, reserved[i]) == 0) {
            *why = "names a header that the proxy controls itself";
            return -EINVAL;
        }
    }
    return 0;
}

static int fields_check(const struct field *fields, const char *parent, const char *target,
                        const char *file, const struct mark *marks, struct err *e);

static void route_clear(struct egress_route_config *r)
{
    free(r->name);
    free(r->path_prefix);
    free(r->upstream);
    free(r->credential_file);
    free(r->header);
    memset(r, 0, sizeof(*r));
}

static void route_defaults(struct egress_route_config *r)
{
    *r = (struct egress_route_config){
        .name = NULL,
        .methods = 0, /* set from the profile's read_only when the profile is complete */
        .path_prefix = xstrdup("/"),
        .upstream = NULL,
        .credential_file = NULL,
        .header = xstrdup("Authorization"),
    };
}

static void strlist_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

static void profile_clear(struct egress_profile_config *p)
{
    free(p->name);
    strlist_free(p->allow, p->n_allow);
    strlist_free(p->allow_addresses, p->n_allow_addresses);
    for (size_t i = 0; i < p->n_routes; i++) {
        route_clear(&p->routes[i]);
    }
    free(p->routes);
    memset(p, 0, sizeof(*p));
}

static void profile_defaults(struct egress_profile_config *p, const char *name)
{
    *p = (struct egress_profile_config){
        .name = xstrdup(name),
        .read_only = false,
        .max_request_bytes = 8 * MIB,
        .max_task_bytes = 64 * MIB,
        .max_connections = 16,
    };
}

static int walk_strlist(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                        struct err *e)
{
    struct mark m = node_mark(v);
    char ***list = (char ***)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(char **));
    if (yamlnode_is_null(v)) {
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE) {
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, type_desc(f->type),
                    yamlnode_kind(v));
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!item) {
            return fail(e, w->file, &m, "malformed sequence");
        }
        struct mark im = node_mark(item);
        const char *s = (const char *)item->data.scalar.value;
        if (item->type != YAML_SCALAR_NODE || yamlnode_is_null(item) || *s == '\0' ||
            strlen(s) != item->data.scalar.length) {
            return fail(e, w->file, &im, "'%s' entries must be non-empty strings", path);
        }
        const char *why = NULL;
        if (f->check && f->check(s, &why) < 0) {
            return fail(e, w->file, &im, "'%s' entry '%.80s': %s", path, s, why);
        }
        if (*n >= EGRESS_LIST_MAX) {
            return fail(e, w->file, &im, "'%s' has more than %d entries", path, EGRESS_LIST_MAX);
        }
        *list = xrealloc(*list, (*n + 1) * sizeof(char *));
        (*list)[(*n)++] = xstrdup(s);
    }
    return 0;
}

static int walk_methods(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                        struct err *e)
{
    struct mark m = node_mark(v);
    uint32_t bits = 0;
    if (v->type != YAML_SEQUENCE_NODE ||
        v->data.sequence.items.start == v->data.sequence.items.top) {
        return fail(e, w->file, &m, "'%s' must be %s", path, type_desc(f->type));
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        struct mark im = item ? node_mark(item) : m;
        uint32_t bit = 0;
        if (item && item->type == YAML_SCALAR_NODE) {
            const char *name = (const char *)item->data.scalar.value;
            bit = egress_method_bit(name, strlen(name));
        }
        if (bit == 0) {
            return fail(e, w->file, &im,
                        "'%s' entries must be GET, HEAD, POST, PUT, PATCH, "
                        "DELETE or OPTIONS (in capitals)",
                        path);
        }
        bits |= bit;
    }
    *(uint32_t *)(w->target + f->off) = bits;
    return 0;
}

static int walk_routes(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                       struct err *e)
{
    struct mark m = node_mark(v);
    struct egress_route_config **routes = (struct egress_route_config **)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(void *));
    if (yamlnode_is_null(v)) {
        return 0;
    }
    if (v->type != YAML_SEQUENCE_NODE) {
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, type_desc(f->type),
                    yamlnode_kind(v));
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!item) {
            return fail(e, w->file, &m, "malformed sequence");
        }
        struct mark im = node_mark(item);
        char rpath[128];
        (void)snprintf(rpath, sizeof(rpath), "%s[%zu]", path, *n);
        if (item->type != YAML_MAPPING_NODE) {
            return fail(e, w->file, &im, "'%s' must be a mapping, not %s", rpath,
                        yamlnode_kind(item));
        }
        if (*n >= EGRESS_ROUTES_MAX) {
            return fail(e, w->file, &im, "'%s' has more than %d routes", path, EGRESS_ROUTES_MAX);
        }
        scoped(route_clear) struct egress_route_config r;
        struct mark rm[RM_COUNT];
        memset(rm, 0, sizeof(rm));
        route_defaults(&r);
        rm[RM_ROOT] = im;
        struct walk rw = {w->file, w->doc, rm, (char *)&r};
        int ret = walk_map(&rw, item, route_fields, rpath, e);
        if (ret < 0) {
            return ret;
        }
        if (!r.name) {
            return fail(e, w->file, &im, "'%s': missing required key 'name'", rpath);
        }
        if (!r.upstream) {
            return fail(e, w->file, &im, "'%s': missing required key 'upstream'", rpath);
        }
        ret = fields_check(route_fields, rpath, (const char *)&r, w->file, rm, e);
        if (ret < 0) {
            return ret;
        }
        *routes = xrealloc(*routes, (*n + 1) * sizeof(**routes));
        (*routes)[(*n)++] = r;
        memset(&r, 0, sizeof(r));
    }
    return 0;
}

/* Rules of one profile beyond its fields' syntax; also completes route defaults that depend
 * on the profile. pm: the profile's marks, or NULL. */
static int profile_finish(struct egress_profile_config *p, const char *file, const struct mark *pm,
                          struct err *e)
{
    if (p->read_only && p->n_allow > 0) {
        return fail(e, file, mark_pick(pm, PFM_ALLOW, PFM_READ_ONLY),
                    "egress profile '%s': a read_only profile cannot allow CONNECT destinations "
                    "(the method inside TLS cannot be checked)",
                    p->name);
    }
    for (size_t i = 0; i < p->n_routes; i++) {
        struct egress_route_config *r = &p->routes[i];
        if (r->methods == 0) {
            r->methods = p->read_only ? EGRESS_METHODS_READ_ONLY : EGRESS_METHODS_ALL;
        }
        if (p->read_only && (r->methods & ~(uint32_t)EGRESS_METHODS_READ_ONLY)) {
            return fail(e, file, mark_pick(pm, PFM_ROUTES, PFM_READ_ONLY),
                        "egress profile '%s': route '%s' allows methods beyond GET, HEAD and "
                        "OPTIONS in a read_only profile",
                        p->name, r->name);
        }
    }
    return 0;
}

static int walk_profiles(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                         struct err *e)
{
    struct mark m = node_mark(v);
    struct egress_profile_config **list = (struct egress_profile_config **)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(void *));
    if (yamlnode_is_null(v)) {
        return 0;
    }
    if (v->type != YAML_MAPPING_NODE) {
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, type_desc(f->type),
                    yamlnode_kind(v));
    }
    for (yaml_node_pair_t *pair = v->data.mapping.pairs.start; pair < v->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, pair->key);
        yaml_node_t *val = yaml_document_get_node(w->doc, pair->value);
        if (!k || !val) {
            return fail(e, w->file, &m, "malformed mapping");
        }
        struct mark km = node_mark(k);
        const char *name = (const char *)k->data.scalar.value;
        if (k->type != YAML_SCALAR_NODE || !name_ok(name)) {
            return fail(e, w->file, &km, "egress profile names must match [a-z0-9_-]{1,32}");
        }
        if (strcmp(name, "none") == 0) {
            return fail(e, w->file, &km, "egress profile name 'none' is reserved (loopback only)");
        }
        for (size_t i = 0; i < *n; i++) {
            if (strcmp((*list)[i].name, name) == 0) {
                return fail(e, w->file, &km, "duplicate egress profile '%s'", name);
            }
        }
        if (*n >= EGRESS_PROFILES_MAX) {
            return fail(e, w->file, &km, "more than %d egress profiles", EGRESS_PROFILES_MAX);
        }
        char ppath[160];
        (void)snprintf(ppath, sizeof(ppath), "%.64s.%.32s", path, name);
        scoped(profile_clear) struct egress_profile_config p;
        struct mark pm[PFM_COUNT];
        memset(pm, 0, sizeof(pm));
        profile_defaults(&p, name);
        pm[PFM_ROOT] = node_mark(val);
        if (!yamlnode_is_null(val)) {
            if (val->type != YAML_MAPPING_NODE) {
                struct mark vm = node_mark(val);
                return fail(e, w->file, &vm, "'%s' must be a mapping, not %s", ppath,
                            yamlnode_kind(val));
            }
            struct walk pw = {w->file, w->doc, pm, (char *)&p};
            int r = walk_map(&pw, val, profile_fields, ppath, e);
            if (r < 0) {
                return r;
            }
        }
        int r = fields_check(profile_fields, ppath, (const char *)&p, w->file, pm, e);
        if (r < 0) {
            return r;
        }
        r = profile_finish(&p, w->file, pm, e);
        if (r < 0) {
            return r;
        }
        *list = xrealloc(*list, (*n + 1) * sizeof(**list));
        (*list)[(*n)++] = p;
        memset(&p, 0, sizeof(p));
    }
    return 0;
}

/* Checks egress profiles of a hand-made or parsed config: every value's syntax and the
 * profile rules. m: the config's marks, or NULL. */
static int config_check_egress(const struct config *c, const struct mark *m, struct err *e)
{
    const char *f = c->source;
    const struct mark *pm = mark_pick(m, CM_EGRESS_PROFILES, CM_EGRESS);
    const char *why = NULL;
    if (c->egress_port < 1024 || c->egress_port > 65535) {
        return fail(e, f, mark_pick(m, CM_EGRESS_PORT, CM_EGRESS),
                    "'egress.port' must be between 1024 and 65535");
    }
    for (size_t i = 0; i < c->n_egress_profiles; i++) {
        const struct egress_profile_config *p = &c->egress_profiles[i];
        if (!name_ok(p->name) || strcmp(p->name, "none") == 0) {
            return fail(e, f, pm,
                        "egress profile names must match [a-z0-9_-]{1,32} and not be "
                        "'none'");
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->egress_profiles[j].name, p->name) == 0) {
                return fail(e, f, pm, "duplicate egress profile '%s'", p->name);
            }
        }
        for (size_t j = 0; j < p->n_allow; j++) {
            if (check_hostport(p->allow[j], &why) < 0) {
                return fail(e, f, pm, "egress profile '%s': allow '%.80s': %s", p->name,
                            p->allow[j], why);
            }
        }
        for (size_t j = 0; j < p->n_allow_addresses; j++) {
            if (check_cidr(p->allow_addresses[j], &why) < 0) {
                return fail(e, f, pm, "egress profile '%s': allow_addresses '%.80s': %s", p->name,
                            p->allow_addresses[j], why);
            }
        }
        if (p->max_request_bytes < KIB || p->max_task_bytes < KIB || p->max_connections < 1 ||
            p->max_connections > 1024) {
            return fail(e, f, pm,
                        "egress profile '%s': byte limits must be at least 1KiB and "
                        "max_connections between 1 and 1024",
                        p->name);
        }
        for (size_t j = 0; j < p->n_routes; j++) {
            const struct egress_route_config *r = &p->routes[j];
            if (!r->name || check_route_name(r->name, &why) < 0 || !r->upstream ||
                check_upstream(r->upstream, &why) < 0 || !r->path_prefix ||
                check_path_prefix(r->path_prefix, &why) < 0 || !r->header ||
                check_header_name(r->header, &why) < 0 ||
                (r->credential_file && check_abs_path(r->credential_file, &why) < 0) ||
                r->methods == 0 || (r->methods & ~(uint32_t)EGRESS_METHODS_ALL)) {
                return fail(e, f, pm, "egress profile '%s': route %zu is incomplete or invalid%s%s",
                            p->name, j, why ? ": " : "", why ? why : "");
            }
            if (p->read_only && (r->methods & ~(uint32_t)EGRESS_METHODS_READ_ONLY)) {
                return fail(e, f, pm,
                            "egress profile '%s': route '%s' allows methods beyond "
                            "GET, HEAD and OPTIONS in a read_only profile",
                            p->name, r->name);
            }
        }
        if (p->read_only && p->n_allow > 0) {
            return fail(e, f, pm,
                        "egress profile '%s': a read_only profile cannot allow CONNECT "
                        "destinations",
                        p->name);
        }
    }
    return 0;
}

/* ---- Per-field rules, for parsed and hand-made structs alike ---- */

/* "16MiB", "1KiB", "1" (bytes), "30s", "500ms": a limit as a person would write it. */
static void limit_format(enum field_type t, uint64_t v, char *buf, size_t size)
{
    static const struct {
        uint64_t unit;
        const char *sizes;
        const char *durations;
    } units[] = {
        {1ULL << 30, "GiB", NULL}, {1000000000ULL, NULL, "s"}, {1ULL << 20, "MiB", NULL},
        {1000000ULL, NULL, "ms"},  {1ULL << 10, "KiB", NULL},
    };
    for (size_t i = 0; v > 0 && t != T_U32 && i < ARRAY_SIZE(units); i++) {
        const char *suffix = t == T_SIZE ? units[i].sizes : units[i].durations;
        if (suffix && v % units[i].unit == 0) {
            (void)snprintf(buf, size, "%llu%s", (unsigned long long)(v / units[i].unit), suffix);
            return;
        }
    }
    (void)snprintf(buf, size, "%llu%s", (unsigned long long)v, t == T_DURATION ? "ns" : "");
}

static int range_fail(const struct field *f, const char *path, const char *file,
                      const struct mark *m, struct err *e)
{
    char lo[32], hi[32];
    bool open_top = f->max == (f->type == T_U32 ? UINT32_MAX : UINT64_MAX);

    limit_format(f->type, f->min, lo, sizeof(lo));
    limit_format(f->type, f->max, hi, sizeof(hi));
    if (open_top && f->type == T_DURATION && f->min == 1) {
        return fail(e, file, m, "'%s' must be above 0", path);
    }
    if (open_top) {
        return fail(e, file, m, "'%s' must be at least %s", path, lo);
    }
    return fail(e, file, m, "'%s' must be between %s and %s", path, lo, hi);
}

/* Checks each field of a table against its type and range: names, non-empty strings, enum
 * values, numeric ranges. target: the struct; marks: its marks, or NULL. */
static int fields_check(const struct field *fields, const char *parent, const char *target,
                        const char *file, const struct mark *marks, struct err *e)
{
    for (const struct field *f = fields; f->key; f++) {
        if (f->flags & F_LOAD_ONLY) {
            continue;
        }
        const void *v = target + f->off;
        const struct mark *m = mark_pick(marks, f->mark, -1);
        char path[96];
        int r = 0;
        (void)snprintf(path, sizeof(path), "%s%s%s", parent ? parent : "", parent ? "." : "",
                       f->key);
        switch (f->type) {
        case T_STR:
        case T_NAME: {
            const char *s = *(char *const *)v;
            if (!s && !(f->flags & F_NULLABLE)) {
                return fail(e, file, m, "'%s' must be set", path);
            }
            if (s && !*s && !(f->flags & F_EMPTY_OK)) {
                return fail(e, file, m, "'%s' must be %s, not empty", path, type_desc(f->type));
            }
            if (s && f->type == T_NAME && !name_ok(s)) {
                return fail(e, file, m, "'%s' must be %s", path, type_desc(f->type));
            }
            break;
        }
        case T_U32: {
            uint32_t u = *(const uint32_t *)v;
            if (u < f->min || u > f->max) {
                return range_fail(f, path, file, m, e);
            }
            break;
        }
        case T_SIZE:
        case T_DURATION: {
            uint64_t u = *(const uint64_t *)v;
            if (u < f->min || u > f->max) {
                return range_fail(f, path, file, m, e);
            }
            break;
        }
        case T_CPU: {
            double d = *(const double *)v;
            if (!(d > 0.0 && d <= CPU_MAX)) {
                return fail(e, file, m, "'%s' must be above 0 and at most 64", path);
            }
            break;
        }
        case T_LOG_LEVEL: {
            int l = (int)*(const enum log_level *)v;
            if (l < (int)LOG_ERROR || l > (int)LOG_DEBUG) {
                return fail(e, file, m, "'%s' must be %s", path, type_desc(f->type));
            }
            break;
        }
        case T_CGROUP_VERSION: {
            int ver = *(const int *)v;
            if (ver < 0 || ver > 2) {
                return fail(e, file, m, "'%s' must be %s", path, type_desc(f->type));
            }
            break;
        }
        case T_BOOL:
        case T_STRLIST: /* egress lists: config_check_egress */
        case T_METHODS:
        case T_PROFILES:
        case T_ROUTES:
            break;
        case T_MAP:
            r = fields_check(f->sub, f->key, target, file, marks, e);
            break;
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* ---- Pools ---- */

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
        .uid = 10001,
        .gid = 10001,
        .nofile = 256,
        .seccomp = xstrdup("default"),
        .image = xstrdup("host"),
        .dev_shm = false,
        .shm_size = 16 * MIB,
    };
}

/* Pool rules beyond each field's own. m: the pool's marks, or NULL for "file: msg". */
static int pool_check(const struct pool_config *p, const struct mark *m, struct err *e)
{
    const char *f = p->file;
    int r = fields_check(pool_fields, NULL, (const char *)p, f, m, e);
    if (r < 0) {
        return r;
    }
    if (p->warm > p->max) {
        return fail(e, f, mark_pick(m, PM_WARM, PM_MAX), "'warm' (%u) must not exceed 'max' (%u)",
                    p->warm, p->max);
    }
    if (p->max_timeout_ns < p->timeout_ns) {
        return fail(e, f, mark_pick(m, PM_MAX_TIMEOUT, PM_TIMEOUT),
                    "'max_timeout' must not be shorter than 'timeout'");
    }
    /* SECURITY: tasks never run as root, not even root of their own user namespace. */
    if (p->uid == 0) {
        return fail(e, f, mark_pick(m, PM_UID, -1), "'uid' must not be 0 (root)");
    }
    if (p->gid == 0) {
        return fail(e, f, mark_pick(m, PM_GID, PM_UID), "'gid' must not be 0 (root)");
    }
    return 0;
}

/* Parses and checks one pool file into *ret, its marks into *ret_marks. */
static int pool_parse(const char *file, const char *text, size_t len, struct pool_config *ret,
                      struct pool_marks *ret_marks, struct err *e)
{
    scoped(config_pool_clear) struct pool_config p = {0};
    scoped(ydoc_done) struct ydoc y = {.loaded = false};
    struct pool_marks pm;

    memset(&pm, 0, sizeof(pm));
    pool_defaults(&p, file);
    int r = ydoc_load(file, text, len, &y, e);
    if (r < 0) {
        return r;
    }
    struct walk w = {file, &y.doc, pm.m, (char *)&p};
    r = walk_document(&w, pool_fields, e);
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
    r = pool_check(&p, pm.m, e);
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
    return pool_parse(name, text, len, ret, &pm, e);
}

/* ---- Files ---- */

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
    int r = pool_parse(file, text, len, &p, &pm, e);
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

struct names {
    char **v;
    size_t n;
};

static void names_done(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        free(ns->v[i]);
    }
    free(ns->v);
    ns->v = NULL;
    ns->n = 0;
}

static void dir_closep(DIR **d)
{
    if (*d) {
        (void)closedir(*d);
    }
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    scoped(names_done) struct names ns = {NULL, 0};

    if (!d) {
        int r = -errno;
        return failr(e, r, cfg, dm, "pools_dir '%s': cannot open: %s", dir, err_name(r));
    }
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno != 0) {
                int r = -errno;
                return failr(e, r, cfg, dm, "pools_dir '%s': cannot read: %s", dir, err_name(r));
            }
            break;
        }
        if (!is_pool_file(de->d_name)) {
            continue;
        }
        if (ns.n >= CONFIG_POOLS_MAX) {
            return failr(e, -E2BIG, cfg, dm, "pools_dir '%s': more than %d pool files", dir,
                         CONFIG_POOLS_MAX);
        }
        ns.v = xrealloc(ns.v, (ns.n + 1) * sizeof(*ns.v));
        ns.v[ns.n++] = xstrdup(de->d_name);
    }
    if (ns.n == 0) {
        return fail(e, cfg, dm, "pools_dir '%s' has no *.yaml pool files", dir);
    }
    qsort(ns.v, ns.n, sizeof(*ns.v), name_cmp);
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

/* ---- Config ---- */

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
        profile_clear(&c->egress_profiles[i]);
    }
    free(c->egress_profiles);
    strlist_free(c->token_mount_roots, c->n_token_mount_roots);
    free(c->source);
    free(c->socket_path);
    free(c->admin_socket_path);
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

/* Top-level rules. m: the config's marks, or NULL for "file: msg" messages. */
static int config_check_globals(const struct config *c, const struct mark *m, struct err *e)
{
    const char *f = c->source;
    int r = fields_check(config_fields, NULL, (const char *)c, f, m, e);
    if (r < 0) {
        return r;
    }
    if (strcmp(c->socket_path, c->admin_socket_path) == 0) {
        return fail(e, f, mark_pick(m, CM_ADMIN_SOCKET, CM_SOCKET),
                    "'socket' and 'admin_socket' must differ");
    }
    if (*c->metrics_addr && !metrics_addr_ok(c->metrics_addr)) {
        return fail(e, f, mark_pick(m, CM_METRICS, -1),
                    "'metrics' must be ADDR:PORT like 127.0.0.1:9464, or \"\" to disable");
    }
    if (c->cgroup_parent && !cgroup_parent_ok(c->cgroup_parent)) {
        return fail(e, f, mark_pick(m, CM_CG_PARENT, -1),
                    "'cgroup.parent' must be a path without '..'");
    }
    if (c->userns) {
        /* SECURITY: a map starting at host id 0 would make sandbox root the host's root. */
        if (c->userns_base == 0) {
            return fail(e, f, mark_pick(m, CM_USERNS_BASE, CM_USERNS_ENABLED),
                        "'userns.host_id_base' must not be 0 (host root)");
        }
        if (c->userns_count < 1) {
            return fail(e, f, mark_pick(m, CM_USERNS_COUNT, CM_USERNS_ENABLED),
                        "'userns.id_count' must be at least 1");
        }
        /* (uid_t)-1 is no id, so the last mapped id stays below it. */
        if ((uint64_t)c->userns_base + (uint64_t)c->userns_count * c->userns_slots >
            (uint64_t)UINT32_MAX) {
            return fail(e, f, mark_pick(m, CM_USERNS_SLOTS, CM_USERNS_BASE),
                        "'userns.host_id_base' + 'userns.id_count' * 'userns.slots' must not "
                        "exceed %u",
                        UINT32_MAX);
        }
    }
    if (c->token_default_ttl_ns > c->token_max_ttl_ns) {
        return fail(e, f, mark_pick(m, CM_TOK_DEFAULT_TTL, CM_TOK_MAX_TTL),
                    "'tokens.default_ttl' must not exceed 'tokens.max_ttl'");
    }
    if (c->audit_max_rows != 0 && c->audit_max_rows < 1000) {
        return fail(e, f, mark_pick(m, CM_AUDIT_MAX_ROWS, CM_AUDIT),
                    "'audit.max_rows' must be 0 (no limit) or at least 1000");
    }
    return config_check_egress(c, m, e);
}

/* Rules across the config and its pools. cm, pm: marks, or NULL. */
static int config_check_cross(const struct config *c, const struct mark *cm,
                              const struct pool_marks *pm, struct err *e)
{
    if (c->n_pools == 0 || !c->pools) {
        return fail(e, c->source, mark_pick(cm, CM_POOLS_DIR, -1), "at least one pool is required");
    }
    for (size_t i = 0; i < c->n_pools; i++) {
        const struct pool_config *p = &c->pools[i];
        const struct mark *m = pm ? pm[i].m : NULL;
        for (size_t j = 0; j < i; j++) {
            if (p->name && c->pools[j].name && strcmp(p->name, c->pools[j].name) == 0) {
                return fail(e, p->file, mark_pick(m, PM_NAME, -1),
                            "pool name '%s' is already used by %s", p->name,
                            c->pools[j].file ? c->pools[j].file : "another pool");
            }
        }
        if (c->userns && p->uid >= c->userns_count) {
            return fail(e, p->file, mark_pick(m, PM_UID, -1),
                        "'uid' (%u) must be below userns.id_count (%u)", p->uid, c->userns_count);
        }
        if (c->userns && p->gid >= c->userns_count) {
            return fail(e, p->file, mark_pick(m, PM_GID, PM_UID),
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
            return fail(e, c->source, mark_pick(cm, CM_USERNS_SLOTS, CM_USERNS),
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
        return fail(e, c->source, mark_pick(cm, CM_DEFAULT_POOL, -1),
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
        r = pool_check(&c->pools[i], NULL, e);
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
    scoped(ydoc_done) struct ydoc y = {.loaded = false};
    scoped_free struct pool_marks *pm = NULL;
    struct mark cm[CM_COUNT];

    memset(&t, 0, sizeof(t));
    memset(cm, 0, sizeof(cm));
    config_defaults(&t.c);
    t.c.source = xstrdup(name);
    int r = ydoc_load(name, text, len, &y, e);
    if (r < 0) {
        return r;
    }
    struct walk w = {name, &y.doc, cm, (char *)&t};
    r = walk_document(&w, config_fields, e);
    if (r < 0) {
        return r;
    }
    ydoc_done(&y);
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
