/* SPDX-License-Identifier: MIT */
#pragma once
/* sbxd's configuration: libyaml into an immutable struct config. Unknown keys, wrong types
 * and out-of-range values are errors reported as "file:line:col: msg". Start-up only (not
 * the loop's hot path); not CHILD-SAFE. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/err.h"
#include "lib/log.h"
#include "wire/egress_parse.h"

/* The default first host id of the sandboxes' blocks (userns.host_id_base): above systemd's
 * range for containers (0x00080000-0x6fffffff) and the /etc/subuid ranges handed to users
 * (100000 on), below 2^31, which some tools read as negative. With the default 1024 blocks of
 * 65536 ids the sandboxes use host ids 0x70000000-0x73ffffff. */
#define CONFIG_USERNS_BASE 0x70000000u
#define CONFIG_USERNS_SLOTS_MAX 65536u

/* Upper bounds of the pool's files and collect keys. A result holds at most
 * CONFIG_COLLECT_BYTES_MAX bytes of files and CONFIG_COLLECT_FILES_MAX paths of at most
 * CONFIG_FILES_PATH_MAX bytes (cli/sbx_conn.c sizes its reader from these). */
#define CONFIG_FILES_PATH_MAX 4096u
#define CONFIG_COLLECT_BYTES_MAX (64ull << 20)
#define CONFIG_COLLECT_FILES_MAX 10000u

struct pool_config {
    char *name;              /* [a-z0-9_-]{1,32}, from the file's `name:` */
    char *file;              /* where it came from (for messages) */
    uint32_t warm;           /* sandboxes kept ready; default 2 */
    uint32_t max;            /* concurrent sandboxes (warm + busy); default 16, >= warm, >= 1 */
    uint32_t queue;          /* tasks waiting for a sandbox; default 64 */
    uint64_t memory_bytes;   /* memory + swap; default 512 MiB */
    double cpu;              /* CPUs; default 1.0, > 0 */
    uint32_t pids;           /* default 128 */
    uint64_t timeout_ns;     /* default task timeout; default 30 s */
    uint64_t max_timeout_ns; /* the largest timeout a request may ask; default = 4 * timeout */
    uint64_t output_cap;     /* stdout + stderr bytes; default 32768 */
    uint64_t tmp_size;       /* /tmp tmpfs bytes; default 64 MiB */
    uint64_t work_size;      /* /work tmpfs bytes (the task's workspace); default 256 MiB */
    uint32_t uid;            /* task user inside the sandbox; default 10001 */
    uint32_t gid;            /* default = uid */
    uint32_t nofile;         /* RLIMIT_NOFILE of the task; default 256 */
    char *seccomp;           /* profile name; default "default" */
    char *image;             /* image name; default "host" */
    bool dev_shm;            /* mount /dev/shm; default false */
    uint64_t shm_size;       /* default 16 MiB */
    uint64_t io_read_bps;    /* bytes a second read from the image's disk; 0 (default): no limit */
    uint32_t io_read_iops;   /* reads a second from it; 0 (default): no limit */
    /* exec's files (written into /work before the command) and collect (read back after). */
    uint64_t files_max_bytes;   /* bytes of one request's files; default 128 MiB */
    uint32_t files_max_count;   /* entries of one request's files; default 1000 */
    uint32_t files_path_max;    /* bytes of one normalized path; default 1024 */
    uint64_t files_timeout_ns;  /* from the request until every streamed byte came; 60 s */
    uint64_t collect_max_bytes; /* file data in one result; default 16 MiB */
    uint32_t collect_max_files; /* files in one result; default 1000 */
    /* Sessions (docs/PROTOCOL.md, "Sessions"): the default and the longest lifetime, the
     * default idle timeout, and how many may be open at once (each holds a sandbox, counted
     * against max; default max / 2, always below max so that one-shot tasks keep a place). */
    uint64_t session_ttl_ns;     /* default 15 min, <= session_max_ttl_ns */
    uint64_t session_max_ttl_ns; /* default 4 h */
    uint64_t session_idle_ns;    /* default 5 min, <= session_ttl_ns */
    uint32_t max_sessions;       /* default max / 2, < max */
};

/* Whether the pool limits its sandboxes' disk reads (io_read_bps or io_read_iops). */
static inline bool pool_config_limits_io(const struct pool_config *pc)
{
    return pc->io_read_bps > 0 || pc->io_read_iops > 0;
}

/* Egress (docs/EGRESS.md): the methods a route may allow are wire/egress_parse.h's
 * EGRESS_METHOD_* bits. */
/* A plain-HTTP route: a task's `METHOD http://NAME/PATH` under path_prefix goes to
 * upstream + PATH, with the credential header added by sbxd. */
struct egress_route_config {
    char *name;            /* host name the task uses; [a-z0-9-] labels */
    uint32_t methods;      /* EGRESS_METHOD_* bits; default all (read_only: GET HEAD OPTIONS) */
    char *path_prefix;     /* default "/"; matches whole segments */
    char *upstream;        /* "http://HOST[:PORT][/BASE]" */
    char *credential_file; /* NULL: none; else read once at start-up, mode 0600 */
    char *header;          /* the credential's header name; default "Authorization" */
};

struct egress_profile_config {
    char *name;   /* [a-z0-9_-]{1,32}, not "none" */
    char **allow; /* CONNECT destinations: "host:port" or "*.suffix:port" */
    size_t n_allow;
    char **allow_addresses; /* CIDRs that may be dialed although not public */
    size_t n_allow_addresses;
    struct egress_route_config *routes;
    size_t n_routes;
    bool read_only;             /* GET, HEAD, OPTIONS only; no CONNECT; default false */
    uint64_t max_request_bytes; /* one request and its response (a tunnel); default 8 MiB */
    uint64_t max_task_bytes;    /* everything through the proxy for one task; default 64 MiB */
    uint32_t max_connections;   /* open at once for one task; default 16 */
};

/* Who may use the agents' socket, from socket_group and socket_mode. */
struct config_socket_access {
    bool has_group; /* else the socket stays root's group */
    gid_t gid;
    unsigned mode; /* default 0660 */
};

struct config {
    char *source;             /* file path, or "<embedded>" */
    char *socket_path;        /* agents' socket; default "./var/sbxd.sock" */
    char *admin_socket_path;  /* default "./var/sbxd-admin.sock" */
    char *socket_group;       /* the agents' socket's group (name or gid); NULL: root's */
    char *socket_mode;        /* its mode, octal; NULL: 0660 */
    char *state_dir;          /* default "./var" */
    char *metrics_addr;       /* "ADDR:PORT"; default "127.0.0.1:9464"; "" disables */
    char *init_path;          /* sbxd-init; default NULL = next to the sbxd executable */
    char *images_dir;         /* built pool images; default NULL = <state_dir>/images */
    char *default_pool;       /* default "python"; must name a loaded pool */
    enum log_level log_level; /* default info */

    uint32_t max_connections;       /* default 256 */
    uint32_t max_requests_per_conn; /* in-flight requests per connection; default 64 */
    uint64_t max_message_bytes;     /* largest msgpack message from a client; default 1 MiB */
    uint64_t max_argv_bytes;        /* argv + env bytes of one exec; default 64 KiB */
    uint32_t max_sessions;          /* open sessions, all pools; default 256 */
    uint64_t drain_grace_ns;        /* SIGTERM: how long running tasks may finish; default 10 s */
    uint32_t refill_parallelism;    /* sandboxes created at once, all pools; default 2 */
    uint64_t topup_idle_ns;         /* top-up waits this long after a task start; 20 ms */
    bool netns_recycle;             /* reuse clean network namespaces (netns.c); default true */
    bool fork_server; /* fork sandboxes from a fork server per pool (forkserver.c); default
                         true; needs userns */
    bool sched_batch; /* sbxd and its sandboxes under SCHED_BATCH; default true */

    int cgroup_version;         /* 0 auto, 1, 2; default 0 */
    char *cgroup_parent;        /* NULL: the cgroup sbxd starts in */
    char *cgroup_name;          /* subtree name; default "sbxd" */
    bool cgroup_require_limits; /* refuse to start without memory, cpu and pids; default true */

    bool userns; /* default true */
    /* Sandbox k of the userns_slots alive at once maps its ids 0..userns_count-1 to host
     * ids userns_base + k * userns_count.., and that base id owns its user namespace. */
    uint32_t userns_base;  /* default CONFIG_USERNS_BASE */
    uint32_t userns_count; /* default 65536 */
    uint32_t userns_slots; /* default 1024 */

    struct pool_config *pools;
    size_t n_pools;

    /* Audit trail (audit.c, <state_dir>/audit.db). */
    bool audit_enabled;        /* default true; false writes nothing (benchmarks only) */
    bool audit_fsync;          /* default false: commits survive sbxd's death, not the
                                  machine's; true: each commit is on disk (fsync) */
    uint64_t audit_max_age_ns; /* older rows are pruned; default 720 h; 0 keeps them */
    uint32_t audit_max_rows;   /* rows beyond are pruned, refused requests' first, then the
                                  oldest; default 2000000; 0: no limit, else at least 1000 */
    uint64_t audit_max_bytes;  /* the database file is held under it, pruning as for max_rows;
                                  default 1 GiB; 0: no limit, else at least 1 MiB */
    /* Budgets (docs/AUDIT.md, "Budgets and summaries"): refusals and proxy denials recorded
     * one by one per budget window, per connection, per peer uid and per task; the rest are
     * counted and written as one summary per source per summary interval. */
    uint32_t audit_refusals_per_conn;   /* default 20 */
    uint32_t audit_refusals_per_peer;   /* default 100 */
    uint32_t audit_denials_per_task;    /* default 20 */
    uint64_t audit_budget_window_ns;    /* default 1 h */
    uint64_t audit_summary_interval_ns; /* default 1 min */

    /* Capability tokens (docs/TOKENS.md). */
    char **token_mount_roots;      /* host dirs tokens may expose (absolute); default none */
    size_t n_token_mount_roots;    /* (must follow token_mount_roots: a T_STRLIST) */
    uint64_t token_max_ttl_ns;     /* longest ttl a token may get; default 1 h */
    uint64_t token_default_ttl_ns; /* ttl of a token issued without one; default 15 min */
    uint32_t token_max_tokens;     /* tokens kept in memory and in the database; default 10000 */
    bool token_required;           /* exec without a token is denied; default false */

    uint32_t egress_port; /* the proxy's port on 127.0.0.1 in each sandbox; default 3128 */
    struct egress_profile_config *egress_profiles;
    size_t n_egress_profiles;
};

/* Loads a config file (path) or, when path is NULL, the embedded default (deploy/sbxd.yaml
 * compiled in). Pools come from the file's `pools_dir` (relative to the file's directory)
 * or, when it has none, from the embedded pool files. Returns 0 or -errno with e holding
 * "file:line:col: message". */
int config_load(const char *path, struct config **ret, struct err *e);
/* Parses config text from memory; `name` is used in messages and `base_dir` resolves a
 * relative pools_dir (NULL: the current directory); text without pools_dir uses the
 * embedded pool files. For tests and config_load. */
int config_parse(const char *name, const char *text, size_t len, const char *base_dir,
                 struct config **ret, struct err *e);
/* Parses one pool file's text into *ret (fields defaulted first). */
int config_parse_pool(const char *name, const char *text, size_t len, struct pool_config *ret,
                      struct err *e);
/* Frees what config_parse_pool filled in and zeroes *p. */
void config_pool_clear(struct pool_config *p);
/* Checks cross-field rules (default pool exists, unique names, limits). */
int config_validate(const struct config *c, struct err *e);
/* The agents' socket's group and mode (socket_group resolved now, by name or as a number).
 * Returns 0, -ESRCH for an unknown group or -EINVAL for a bad mode, with e. */
int config_socket_access(const struct config *c, struct config_socket_access *ret, struct err *e);
struct config *config_free(struct config *c);
const struct pool_config *config_find_pool(const struct config *c, const char *name);
/* The egress profile of that name, or NULL. */
const struct egress_profile_config *config_find_egress_profile(const struct config *c,
                                                               const char *name);
