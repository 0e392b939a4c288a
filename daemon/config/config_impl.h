/* SPDX-License-Identifier: MIT */
#pragma once
/* Inside config/: the key tables' types, the marks that place every value in its file, and
 * what config.c (the whole config, its files), config_walk.c (YAML documents, the table
 * walker, per-field rules), config_egress.c (egress tables and profiles) and config_pool.c
 * (pool files) call in one another. Nothing outside config/ includes this header. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "config/config.h"
#include "lib/err.h"

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
    CM_SOCKET_GROUP,
    CM_SOCKET_MODE,
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
    CM_MAX_SESSIONS,
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
    CM_AUDIT_MAX_BYTES,
    CM_AUDIT_PER_CONN,
    CM_AUDIT_PER_PEER,
    CM_AUDIT_PER_TASK,
    CM_AUDIT_WINDOW,
    CM_AUDIT_INTERVAL,
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
    PM_WORK_SIZE,
    PM_UID,
    PM_GID,
    PM_NOFILE,
    PM_SECCOMP,
    PM_IMAGE,
    PM_DEV_SHM,
    PM_SHM_SIZE,
    PM_IO_READ_BPS,
    PM_IO_READ_IOPS,
    PM_FILES_MAX_BYTES,
    PM_FILES_MAX_COUNT,
    PM_FILES_PATH_MAX,
    PM_FILES_TIMEOUT,
    PM_COLLECT_MAX_BYTES,
    PM_COLLECT_MAX_FILES,
    PM_SESSION_TTL,
    PM_SESSION_MAX_TTL,
    PM_SESSION_IDLE,
    PM_MAX_SESSIONS,
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

/* What the top level of a config file fills: the config, plus pools_dir, which is only
 * needed while loading. The config comes first, so its offsets also fit a struct config. */
struct top {
    struct config c;
    char *pools_dir;
};
_Static_assert(offsetof(struct top, c) == 0, "struct top must start with its config");

#define TOP(m) offsetof(struct top, m)

/* One walk of a document (or a part of it) into a target struct through a key table. */
struct walk {
    const char *file;
    yaml_document_t *doc;
    struct mark *marks;
    char *target;
};

/* config_walk.c */

/* Sets e to "file:line:col: msg" (or "file: msg" without a mark) and returns r. */
int config_walk_failr(struct err *e, int r, const char *file, const struct mark *m, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));
#define fail(e, file, m, ...) config_walk_failr((e), -EINVAL, (file), (m), __VA_ARGS__)
/* The mark of slot id, else of slot alt (-1: none), else the root's; NULL without marks. */
const struct mark *config_walk_mark_pick(const struct mark *marks, int id, int alt);
/* Whether s is a name: [a-z0-9_-]{1,32}. */
bool config_walk_name_ok(const char *s);
/* Where a node starts in its file. */
struct mark config_walk_node_mark(const yaml_node_t *n);
/* What a value of type t must be, for messages ("a size like 512MiB"). */
const char *config_walk_type_desc(enum field_type t);
/* Walks the mapping map through fields into w->target; parent is the keys' path, or NULL at
 * the top. Returns 0 or -EINVAL with e. */
int config_walk_map(struct walk *w, yaml_node_t *map, const struct field *fields,
                    const char *parent, struct err *e);
/* Walks a whole document; an empty one (or a bare null) leaves every default. */
int config_walk_document(struct walk *w, const struct field *fields, struct err *e);
/* Checks each field of a table against its type and range. target: the struct; marks: its
 * marks, or NULL. Returns 0 or -EINVAL with e. */
int config_walk_fields_check(const struct field *fields, const char *parent, const char *target,
                             const char *file, const struct mark *marks, struct err *e);

/* config_egress.c */

/* The `egress:` table of the config file. */
extern const struct field egress_fields[];
/* The values of T_STRLIST, T_METHODS, T_PROFILES and T_ROUTES fields, for config_walk_map. */
int config_egress_walk_strlist(struct walk *w, const struct field *f, const char *path,
                               yaml_node_t *v, struct err *e);
int config_egress_walk_methods(struct walk *w, const struct field *f, const char *path,
                               yaml_node_t *v, struct err *e);
int config_egress_walk_profiles(struct walk *w, const struct field *f, const char *path,
                                yaml_node_t *v, struct err *e);
int config_egress_walk_routes(struct walk *w, const struct field *f, const char *path,
                              yaml_node_t *v, struct err *e);
/* An absolute path: the check of credential files and token mount roots. */
int config_egress_check_abs_path(const char *s, const char **why);
/* Frees a profile's members and zeroes it. */
void config_egress_profile_clear(struct egress_profile_config *p);
/* Frees n strings and their array. */
void config_egress_strlist_free(char **v, size_t n);
/* Checks egress profiles of a hand-made or parsed config: every value's syntax and the
 * profile rules. m: the config's marks, or NULL. */
int config_egress_check(const struct config *c, const struct mark *m, struct err *e);

/* config_pool.c */

/* Pool rules, each field's and beyond. m: the pool's marks, or NULL for "file: msg". */
int config_pool_check(const struct pool_config *p, const struct mark *m, struct err *e);
/* Parses and checks one pool file into *ret, its marks into *ret_marks. */
int config_pool_parse(const char *file, const char *text, size_t len, struct pool_config *ret,
                      struct pool_marks *ret_marks, struct err *e);
