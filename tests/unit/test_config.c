/* SPDX-License-Identifier: MIT */
/* Unit tests of config.c: defaults, every key, the embedded default, pools_dir loading, and
 * each class of error with its exact "file:line:col: message". Files go to a mkdtemp dir. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "config/config.h"
#include "config/embedded.h"
#include "lib/util.h"
#include "rnd.h"

#define MIB (1024ULL * 1024)
#define SEC 1000000000ULL

/* ---- helpers ---- */

static struct config *parse_ok(const char *text, const char *base_dir)
{
    struct config *c = NULL;
    struct err e = ERR_INIT;
    int r = config_parse("t.yaml", text, strlen(text), base_dir, &c, &e);
    if (r < 0) {
        fail_msg("config_parse: %s", e.msg);
    }
    assert_non_null(c);
    return c;
}

static void parse_fails(const char *text, const char *base_dir, int code, const char *msg)
{
    struct config *c = NULL;
    struct err e = ERR_INIT;
    assert_int_equal(config_parse("t.yaml", text, strlen(text), base_dir, &c, &e), code);
    assert_null(c);
    assert_string_equal(e.msg, msg);
}

static void pool_fails(const char *name, const char *text, const char *msg)
{
    struct pool_config p;
    struct err e = ERR_INIT;
    memset(&p, 0xa5, sizeof(p));
    assert_int_equal(config_parse_pool(name, text, strlen(text), &p, &e), -EINVAL);
    assert_string_equal(e.msg, msg);
    /* Not written on failure. */
    assert_int_equal(p.warm, 0xa5a5a5a5u);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    scoped_free char *path = xasprintf("%s/%s", dir, name);
    scoped_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, text, strlen(text)), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *tmpdir_new(void)
{
    char tmpl[] = "/tmp/sbx-test-config-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    return xstrdup(tmpl);
}

static void tmpdir_remove(char *dir)
{
    assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(dir);
}

static const char pool_a[] = "name: alpha\n";
static const char pool_b[] = "name: beta\nwarm: 0\nmax: 1\n";

/* ---- defaults ---- */

static void config_parse__empty_gives_defaults(void **state)
{
    (void)state;
    struct config *c = parse_ok("", NULL);

    assert_string_equal(c->source, "t.yaml");
    assert_string_equal(c->socket_path, "./var/sbxd.sock");
    assert_string_equal(c->admin_socket_path, "./var/sbxd-admin.sock");
    assert_string_equal(c->state_dir, "./var");
    assert_string_equal(c->metrics_addr, "127.0.0.1:9464");
    assert_null(c->init_path);
    assert_null(c->images_dir);
    assert_string_equal(c->default_pool, "python");
    assert_int_equal(c->log_level, LOG_INFO);
    assert_int_equal(c->max_connections, 256);
    assert_int_equal(c->max_requests_per_conn, 64);
    assert_int_equal(c->max_message_bytes, MIB);
    assert_int_equal(c->max_argv_bytes, 64 * 1024);
    assert_int_equal(c->drain_grace_ns, 10 * SEC);
    assert_int_equal(c->refill_parallelism, 2);
    assert_int_equal(c->topup_idle_ns, 20 * 1000000ULL);
    assert_true(c->sched_batch);
    assert_int_equal(c->cgroup_version, 0);
    assert_null(c->cgroup_parent);
    assert_string_equal(c->cgroup_name, "sbxd");
    assert_true(c->userns);
    assert_int_equal(c->userns_base, CONFIG_USERNS_BASE);
    assert_int_equal(c->userns_count, 65536);
    assert_int_equal(c->userns_slots, 1024);
    /* No pools_dir: the embedded pools. */
    assert_int_equal(c->n_pools, embedded_n_pools);
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);

    /* Comments only, an explicit empty document and a bare null are empty configs too. */
    config_free(parse_ok("# nothing here\n", NULL));
    config_free(parse_ok("---\n", NULL));
    config_free(parse_ok("~\n", NULL));
}

static void config_parse_pool__defaults(void **state)
{
    (void)state;
    struct pool_config p;
    struct err e = ERR_INIT;
    const char *text = "name: p1\n";

    assert_int_equal(config_parse_pool("p1.yaml", text, strlen(text), &p, &e), 0);
    assert_string_equal(p.name, "p1");
    assert_string_equal(p.file, "p1.yaml");
    assert_int_equal(p.warm, 2);
    assert_int_equal(p.max, 16);
    assert_int_equal(p.queue, 64);
    assert_int_equal(p.memory_bytes, 512 * MIB);
    assert_true(p.cpu == 1.0);
    assert_int_equal(p.pids, 128);
    assert_int_equal(p.timeout_ns, 30 * SEC);
    assert_int_equal(p.max_timeout_ns, 120 * SEC);
    assert_int_equal(p.output_cap, 32768);
    assert_int_equal(p.tmp_size, 64 * MIB);
    assert_int_equal(p.work_size, 256 * MIB);
    assert_int_equal(p.uid, 10001);
    assert_int_equal(p.gid, 10001);
    assert_int_equal(p.nofile, 256);
    assert_string_equal(p.seccomp, "default");
    assert_string_equal(p.image, "host");
    assert_false(p.dev_shm);
    assert_int_equal(p.shm_size, 16 * MIB);
    assert_int_equal(p.io_read_bps, 0); /* no io limits unless asked */
    assert_int_equal(p.io_read_iops, 0);
    assert_int_equal(p.files_max_bytes, 128 * MIB);
    assert_int_equal(p.files_max_count, 1000);
    assert_int_equal(p.files_path_max, 1024);
    assert_int_equal(p.files_timeout_ns, 60 * SEC);
    assert_int_equal(p.collect_max_bytes, 16 * MIB);
    assert_int_equal(p.collect_max_files, 1000);
    config_pool_clear(&p);

    /* Derived defaults follow the values given: max_timeout = 4 * timeout, gid = uid. */
    text = "name: p2\ntimeout: 500ms\nuid: 2000\n";
    assert_int_equal(config_parse_pool("p2.yaml", text, strlen(text), &p, &e), 0);
    assert_int_equal(p.timeout_ns, 500000000ULL);
    assert_int_equal(p.max_timeout_ns, 2 * SEC);
    assert_int_equal(p.gid, 2000);
    config_pool_clear(&p);
}

/* ---- every key ---- */

static void config_parse__every_key(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    scoped_free char *pdir = xasprintf("%s/pools.d", dir);
    assert_int_equal(mkdir(pdir, 0755), 0);
    write_file(pdir, "other.yaml", "name: other\nuid: 1000\n");
    const char *text = "socket: /run/sbx/a.sock\n"
                       "admin_socket: '/run/sbx/admin.sock'\n"
                       "state_dir: /var/lib/sbx\n"
                       "metrics: \"[::1]:9000\"\n"
                       "init_path: /usr/libexec/sbxd-init\n"
                       "default_pool: other\n"
                       "log_level: debug\n"
                       "pools_dir: pools.d\n"
                       "drain_grace: 1500ms\n"
                       "refill_parallelism: 64\n"
                       "topup_idle: 0\n"
                       "sched_batch: false\n"
                       "limits:\n"
                       "  max_connections: 10\n"
                       "  max_requests_per_connection: 3\n"
                       "  max_message_bytes: 64MiB\n"
                       "  max_argv_bytes: 96KiB\n"
                       "cgroup:\n"
                       "  version: 1\n"
                       "  parent: /system.slice/sbxd.service\n"
                       "  name: sbx-test\n"
                       "  require_limits: false\n"
                       "userns:\n"
                       "  enabled: false\n"
                       "  host_id_base: 200000\n"
                       "  id_count: 1000\n"
                       "  slots: 7\n";
    struct config *c = parse_ok(text, dir);

    assert_string_equal(c->socket_path, "/run/sbx/a.sock");
    assert_string_equal(c->admin_socket_path, "/run/sbx/admin.sock");
    assert_string_equal(c->state_dir, "/var/lib/sbx");
    assert_string_equal(c->metrics_addr, "[::1]:9000");
    assert_string_equal(c->init_path, "/usr/libexec/sbxd-init");
    assert_string_equal(c->default_pool, "other");
    assert_int_equal(c->log_level, LOG_DEBUG);
    assert_int_equal(c->drain_grace_ns, 1500000000ULL);
    assert_int_equal(c->refill_parallelism, 64);
    assert_int_equal(c->topup_idle_ns, 0);
    assert_false(c->sched_batch);
    assert_int_equal(c->max_connections, 10);
    assert_int_equal(c->max_requests_per_conn, 3);
    assert_int_equal(c->max_message_bytes, 64 * MIB);
    assert_int_equal(c->max_argv_bytes, 96 * 1024);
    assert_int_equal(c->cgroup_version, 1);
    assert_string_equal(c->cgroup_parent, "/system.slice/sbxd.service");
    assert_string_equal(c->cgroup_name, "sbx-test");
    assert_false(c->cgroup_require_limits);
    assert_false(c->userns);
    assert_int_equal(c->userns_base, 200000);
    assert_int_equal(c->userns_count, 1000);
    assert_int_equal(c->userns_slots, 7);
    assert_int_equal(c->n_pools, 1);
    assert_string_equal(c->pools[0].name, "other");
    /* userns is off, so uid 1000 need not be below id_count. */
    assert_int_equal(c->pools[0].uid, 1000);
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);

    /* The other spellings: cgroup version 2 and auto, empty metrics, null init_path. */
    c = parse_ok("cgroup: {version: 2}\nmetrics: ''\ninit_path: ~\nlog_level: error\n", NULL);
    assert_int_equal(c->cgroup_version, 2);
    assert_true(c->cgroup_require_limits);
    assert_string_equal(c->metrics_addr, "");
    assert_null(c->init_path);
    assert_int_equal(c->log_level, LOG_ERROR);
    config_free(c);
    c = parse_ok("cgroup:\n  version: auto\nlimits:\nuserns: {enabled: yes}\n", NULL);
    assert_int_equal(c->cgroup_version, 0);
    assert_true(c->userns);
    config_free(c);
    tmpdir_remove(dir);
}

static void config_parse_pool__every_key(void **state)
{
    (void)state;
    struct pool_config p;
    struct err e = ERR_INIT;
    const char *text = "name: all_keys-1\n"
                       "warm: 3\n"
                       "max: 5\n"
                       "queue: 0\n"
                       "memory: 1GiB\n"
                       "cpu: 0.5\n"
                       "pids: 33\n"
                       "timeout: 2.5\n"
                       "max_timeout: 1m\n"
                       "output_cap: 1MiB\n"
                       "tmp_size: 128M\n"
                       "work_size: 1GiB\n"
                       "uid: 1234\n"
                       "gid: 4321\n"
                       "nofile: 1024\n"
                       "seccomp: strict\n"
                       "image: py312\n"
                       "dev_shm: true\n"
                       "shm_size: 32MiB\n"
                       "io_read_bps: 64MiB\n"
                       "io_read_iops: 500\n";

    assert_int_equal(config_parse_pool("all.yaml", text, strlen(text), &p, &e), 0);
    assert_string_equal(p.name, "all_keys-1");
    assert_int_equal(p.warm, 3);
    assert_int_equal(p.max, 5);
    assert_int_equal(p.queue, 0);
    assert_int_equal(p.memory_bytes, 1024 * MIB);
    assert_true(p.cpu == 0.5);
    assert_int_equal(p.pids, 33);
    assert_int_equal(p.timeout_ns, 2500000000ULL);
    assert_int_equal(p.max_timeout_ns, 60 * SEC);
    assert_int_equal(p.output_cap, MIB);
    assert_int_equal(p.tmp_size, 128 * MIB);
    assert_int_equal(p.work_size, 1024 * MIB);
    assert_int_equal(p.uid, 1234);
    assert_int_equal(p.gid, 4321);
    assert_int_equal(p.nofile, 1024);
    assert_string_equal(p.seccomp, "strict");
    assert_string_equal(p.image, "py312");
    assert_true(p.dev_shm);
    assert_int_equal(p.shm_size, 32 * MIB);
    assert_int_equal(p.io_read_bps, 64 * MIB);
    assert_int_equal(p.io_read_iops, 500);
    config_pool_clear(&p);
}

/* ---- the embedded default ---- */

static void config_load__embedded_default(void **state)
{
    (void)state;
    struct config *c = NULL;
    struct err e = ERR_INIT;

    assert_int_equal(config_load(NULL, &c, &e), 0);
    assert_string_equal(c->source, "<embedded>");
    assert_int_equal(config_validate(c, &e), 0);
    assert_string_equal(c->socket_path, "./var/sbxd.sock");
    assert_string_equal(c->admin_socket_path, "./var/sbxd-admin.sock");
    assert_string_equal(c->state_dir, "./var");
    assert_string_equal(c->metrics_addr, "127.0.0.1:9464");
    assert_string_equal(c->default_pool, "python");
    assert_int_equal(c->n_pools, 4);
    /* Sorted by file name. */
    assert_string_equal(c->pools[0].name, "heavy");
    assert_string_equal(c->pools[1].name, "integrations");
    assert_string_equal(c->pools[2].name, "parsing");
    assert_string_equal(c->pools[3].name, "python");
    assert_string_equal(c->pools[3].file, "pools/python.yaml");

    const struct pool_config *p = config_find_pool(c, "python");
    assert_ptr_equal(p, &c->pools[3]);
    assert_int_equal(p->warm, 4);
    assert_int_equal(p->max, 16);
    assert_int_equal(p->queue, 64);
    assert_int_equal(p->memory_bytes, 512 * MIB);
    assert_true(p->cpu == 1.0);
    assert_int_equal(p->pids, 128);
    assert_int_equal(p->timeout_ns, 30 * SEC);
    assert_int_equal(p->max_timeout_ns, 300 * SEC);
    assert_int_equal(p->output_cap, 32 * 1024);
    assert_int_equal(p->tmp_size, 64 * MIB);
    assert_int_equal(p->work_size, 256 * MIB);
    assert_int_equal(p->uid, 10001);
    assert_string_equal(p->seccomp, "strict");
    assert_string_equal(p->image, "python");
    assert_false(p->dev_shm);

    p = config_find_pool(c, "parsing");
    assert_non_null(p);
    assert_int_equal(p->warm, 2);
    assert_int_equal(p->memory_bytes, 256 * MIB);
    assert_int_equal(p->pids, 64);
    assert_int_equal(p->timeout_ns, 10 * SEC);
    assert_string_equal(p->seccomp, "strict");

    p = config_find_pool(c, "integrations");
    assert_non_null(p);
    assert_int_equal(p->warm, 2);
    assert_int_equal(p->memory_bytes, 512 * MIB);
    assert_int_equal(p->timeout_ns, 60 * SEC);
    assert_string_equal(p->seccomp, "default");

    p = config_find_pool(c, "heavy");
    assert_non_null(p);
    assert_int_equal(p->warm, 1);
    assert_int_equal(p->max, 4);
    assert_int_equal(p->memory_bytes, 2048 * MIB);
    assert_true(p->cpu == 2.0);
    assert_int_equal(p->pids, 512);
    assert_int_equal(p->timeout_ns, 120 * SEC);
    assert_int_equal(p->max_timeout_ns, 900 * SEC);
    assert_int_equal(p->tmp_size, 512 * MIB);
    assert_int_equal(p->work_size, 1024 * MIB);
    assert_true(p->dev_shm);
    assert_string_equal(p->seccomp, "default");

    assert_null(config_find_pool(c, "nope"));
    assert_null(config_find_pool(c, NULL));
    assert_null(config_free(c));
    assert_null(config_free(NULL));
}

/* ---- errors, each with its position ---- */

static void config_parse__images_dir(void **state)
{
    (void)state;
    /* Unset or null: NULL, which sbxd reads as <state_dir>/images. */
    struct config *c = parse_ok("images_dir: ~\n", NULL);
    assert_null(c->images_dir);
    config_free(c);
    c = parse_ok("state_dir: /var/lib/sbx\nimages_dir: /srv/sbx/images\n", NULL);
    assert_string_equal(c->images_dir, "/srv/sbx/images");
    assert_string_equal(c->state_dir, "/var/lib/sbx");
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);
    parse_fails("images_dir: [a]\n", NULL, -EINVAL,
                "t.yaml:1:13: 'images_dir' must be a string, not a sequence");
    parse_fails("images_dir: 1\nimages_dir: 2\n", NULL, -EINVAL,
                "t.yaml:2:1: duplicate key 'images_dir' (first on line 1)");
}

static void config_parse__audit(void **state)
{
    (void)state;
    struct config *c = parse_ok("", NULL);
    assert_true(c->audit_enabled);
    assert_true(c->audit_max_age_ns == 720ULL * 3600ULL * 1000000000ULL);
    assert_int_equal(c->audit_max_rows, 2000000);
    assert_false(c->audit_fsync);
    /* deploy/sbxd.yaml's values, the same as the built-in defaults. */
    assert_true(c->audit_max_bytes == 1ULL << 30);
    assert_int_equal(c->audit_refusals_per_conn, 20);
    assert_int_equal(c->audit_refusals_per_peer, 100);
    assert_int_equal(c->audit_denials_per_task, 20);
    assert_true(c->audit_budget_window_ns == 3600ULL * 1000000000ULL);
    assert_true(c->audit_summary_interval_ns == 60ULL * 1000000000ULL);
    config_free(c);
    c = parse_ok("audit:\n  max_bytes: 2MiB\n  refusals_per_connection: 0\n"
                 "  refusals_per_peer: 7\n  denials_per_task: 3\n  budget_window: 10m\n"
                 "  summary_interval: 500ms\n",
                 NULL);
    assert_true(c->audit_max_bytes == 2ULL << 20);
    assert_int_equal(c->audit_refusals_per_conn, 0);
    assert_int_equal(c->audit_refusals_per_peer, 7);
    assert_int_equal(c->audit_denials_per_task, 3);
    assert_true(c->audit_budget_window_ns == 600ULL * 1000000000ULL);
    assert_true(c->audit_summary_interval_ns == 500ULL * 1000000ULL);
    config_free(c);
    c = parse_ok("audit:\n  enabled: false\n  max_age: 24h\n  max_rows: 5000\n  fsync: true\n",
                 NULL);
    assert_false(c->audit_enabled);
    assert_true(c->audit_fsync);
    assert_true(c->audit_max_age_ns == 24ULL * 3600ULL * 1000000000ULL);
    assert_int_equal(c->audit_max_rows, 5000);
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);
    /* 0 turns a limit off. */
    c = parse_ok("audit: {max_age: 0, max_rows: 0}\n", NULL);
    assert_true(c->audit_max_age_ns == 0);
    assert_int_equal(c->audit_max_rows, 0);
    config_free(c);
    parse_fails("audit: {max_rows: 10}\n", NULL, -EINVAL,
                "t.yaml:1:19: 'audit.max_rows' must be 0 (no limit) or at least 1000");
    parse_fails("audit: {max_bytes: 64KiB}\n", NULL, -EINVAL,
                "t.yaml:1:20: 'audit.max_bytes' must be 0 (no limit) or at least 1MiB");
    parse_fails("audit:\n  max_rowz: 10\n", NULL, -EINVAL,
                "t.yaml:2:3: unknown key 'max_rowz' in 'audit'");
    parse_fails("audit: {enabled: maybe}\n", NULL, -EINVAL,
                "t.yaml:1:18: 'audit.enabled' must be true or false");
}

static void config_parse__tokens(void **state)
{
    (void)state;
    struct config *c = parse_ok("", NULL);
    assert_int_equal(c->n_token_mount_roots, 0); /* none: tokens can expose nothing */
    assert_true(c->token_max_ttl_ns == 3600 * SEC);
    assert_true(c->token_default_ttl_ns == 900 * SEC);
    assert_int_equal(c->token_max_tokens, 10000);
    assert_false(c->token_required);
    config_free(c);
    c = parse_ok("tokens:\n  mount_roots: [/srv/data, /home/shared]\n  max_ttl: 2h\n"
                 "  default_ttl: 5m\n  max_tokens: 50\n  required: true\n",
                 NULL);
    assert_int_equal(c->n_token_mount_roots, 2);
    assert_string_equal(c->token_mount_roots[0], "/srv/data");
    assert_string_equal(c->token_mount_roots[1], "/home/shared");
    assert_true(c->token_max_ttl_ns == 7200 * SEC);
    assert_true(c->token_default_ttl_ns == 300 * SEC);
    assert_int_equal(c->token_max_tokens, 50);
    assert_true(c->token_required);
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);
    /* A short max_ttl shortens the default too, unless the default was set. */
    c = parse_ok("tokens: {max_ttl: 1m}\n", NULL);
    assert_true(c->token_default_ttl_ns == 60 * SEC);
    config_free(c);
    parse_fails("tokens: {max_ttl: 1m, default_ttl: 2m}\n", NULL, -EINVAL,
                "t.yaml:1:36: 'tokens.default_ttl' must not exceed 'tokens.max_ttl'");
    parse_fails("tokens:\n  mount_roots: [srv/data]\n", NULL, -EINVAL,
                "t.yaml:2:17: 'tokens.mount_roots' entry 'srv/data': must be an absolute path");
    parse_fails("tokens:\n  mount_roots: /srv\n", NULL, -EINVAL,
                "t.yaml:2:16: 'tokens.mount_roots' must be a sequence of strings, not a scalar");
    parse_fails("tokens: {max_ttl: 0}\n", NULL, -EINVAL,
                "t.yaml:1:19: 'tokens.max_ttl' must be between 1s and 2592000s");
    parse_fails("tokens: {max_tokens: 0}\n", NULL, -EINVAL,
                "t.yaml:1:22: 'tokens.max_tokens' must be between 1 and 1000000");
    parse_fails("tokens:\n  mount_root: [/srv]\n", NULL, -EINVAL,
                "t.yaml:2:3: unknown key 'mount_root' in 'tokens'");
}

static void config_parse__egress(void **state)
{
    (void)state;
    struct config *c = parse_ok("", NULL);
    assert_int_equal(c->egress_port, 3128);
    assert_int_equal(c->n_egress_profiles, 0);
    assert_null(config_find_egress_profile(c, "none"));
    config_free(c);
    c = parse_ok("egress:\n"
                 "  port: 8128\n"
                 "  profiles:\n"
                 "    github:\n"
                 "      allow: [\"api.github.com:443\", \"*.githubusercontent.com:443\", "
                 "\"[::1]:8443\", \"10.0.0.5:443\"]\n"
                 "      allow_addresses: [10.0.0.0/8, \"::1\", 169.254.169.254/32]\n"
                 "      max_request_bytes: 1MiB\n"
                 "      max_task_bytes: 10MiB\n"
                 "      max_connections: 4\n"
                 "      routes:\n"
                 "        - name: issues\n"
                 "          methods: [GET, POST]\n"
                 "          path_prefix: /repos/\n"
                 "          upstream: http://127.0.0.1:8080/api/v3/\n"
                 "          credential_file: /etc/sbx/github.cred\n"
                 "          header: X-Api-Key\n"
                 "        - {name: docs.internal, upstream: \"http://[::1]\"}\n"
                 "    docs:\n"
                 "      read_only: true\n"
                 "      routes:\n"
                 "        - {name: docs, upstream: \"http://docs.example.com:8000\"}\n"
                 "    empty:\n",
                 NULL);
    assert_int_equal(c->egress_port, 8128);
    assert_int_equal(c->n_egress_profiles, 3);
    const struct egress_profile_config *p = config_find_egress_profile(c, "github");
    assert_non_null(p);
    assert_int_equal(p->n_allow, 4);
    assert_string_equal(p->allow[1], "*.githubusercontent.com:443");
    assert_int_equal(p->n_allow_addresses, 3);
    assert_string_equal(p->allow_addresses[1], "::1");
    assert_false(p->read_only);
    assert_true(p->max_request_bytes == MIB);
    assert_true(p->max_task_bytes == 10 * MIB);
    assert_int_equal(p->max_connections, 4);
    assert_int_equal(p->n_routes, 2);
    assert_string_equal(p->routes[0].name, "issues");
    assert_int_equal(p->routes[0].methods, EGRESS_METHOD_GET | EGRESS_METHOD_POST);
    assert_string_equal(p->routes[0].path_prefix, "/repos/");
    assert_string_equal(p->routes[0].upstream, "http://127.0.0.1:8080/api/v3/");
    assert_string_equal(p->routes[0].credential_file, "/etc/sbx/github.cred");
    assert_string_equal(p->routes[0].header, "X-Api-Key");
    /* Defaults of a route. */
    assert_int_equal(p->routes[1].methods, EGRESS_METHODS_ALL);
    assert_string_equal(p->routes[1].path_prefix, "/");
    assert_null(p->routes[1].credential_file);
    assert_string_equal(p->routes[1].header, "Authorization");
    /* A read-only profile's routes default to the read-only methods. */
    p = config_find_egress_profile(c, "docs");
    assert_true(p->read_only);
    assert_int_equal(p->routes[0].methods, EGRESS_METHODS_READ_ONLY);
    /* An empty profile gets the default limits. */
    p = config_find_egress_profile(c, "empty");
    assert_int_equal(p->n_allow + p->n_routes + p->n_allow_addresses, 0);
    assert_true(p->max_request_bytes == 8 * MIB);
    assert_true(p->max_task_bytes == 64 * MIB);
    assert_int_equal(p->max_connections, 16);
    assert_null(config_find_egress_profile(c, "nope"));
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);
}

static void config_parse__egress_errors(void **state)
{
    (void)state;
    parse_fails("egress:\n  profiles:\n    none: {}\n", NULL, -EINVAL,
                "t.yaml:3:5: egress profile name 'none' is reserved (loopback only)");
    parse_fails("egress:\n  profiles:\n    Bad: {}\n", NULL, -EINVAL,
                "t.yaml:3:5: egress profile names must match [a-z0-9_-]{1,32}");
    parse_fails("egress:\n  profiles:\n    p:\n      allow: [example.com]\n", NULL, -EINVAL,
                "t.yaml:4:15: 'egress.profiles.p.allow' entry 'example.com': must be HOST:PORT "
                "with a port from 1 to 65535");
    parse_fails("egress:\n  profiles:\n    p:\n      allow: [\"exa mple.com:443\"]\n", NULL,
                -EINVAL,
                "t.yaml:4:15: 'egress.profiles.p.allow' entry 'exa mple.com:443': the host must "
                "be a DNS name, '*.' and a DNS name, an IPv4 address or [IPv6]");
    parse_fails("egress:\n  profiles:\n    p:\n      allow: [\"127.1:443\"]\n", NULL, -EINVAL,
                "t.yaml:4:15: 'egress.profiles.p.allow' entry '127.1:443': the host must "
                "be a DNS name, '*.' and a DNS name, an IPv4 address or [IPv6]");
    parse_fails("egress:\n  profiles:\n    p:\n      allow_addresses: [10.0.0.1/8]\n", NULL,
                -EINVAL,
                "t.yaml:4:25: 'egress.profiles.p.allow_addresses' entry '10.0.0.1/8': must be "
                "an address or ADDRESS/PREFIX with zero host bits");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n        - {name: a}\n", NULL, -EINVAL,
                "t.yaml:5:11: 'egress.profiles.p.routes[0]': missing required key "
                "'upstream'");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"https://x\"}\n",
                NULL, -EINVAL,
                "t.yaml:5:31: 'egress.profiles.p.routes[0].upstream' ('https://x'): must start "
                "with http:// (sbxd does not originate TLS)");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"http://x/a/../b\"}\n",
                NULL, -EINVAL,
                "t.yaml:5:31: 'egress.profiles.p.routes[0].upstream' ('http://x/a/../b'): the "
                "base path must be a plain URL path (no query, fragment, '.', '..' or empty "
                "segments)");
    /* A prefix the proxy would refuse in every request (the '..;' spelling) is a dead
     * route: refused at load. */
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"http://x\", path_prefix: \"/a/..;/\"}\n",
                NULL, -EINVAL,
                "t.yaml:5:56: 'egress.profiles.p.routes[0].path_prefix' ('/a/..;/'): the path "
                "has a '.' or '..' segment (in some spelling: '..;', '%2e', ...)");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"http://x\", methods: [TRACE]}\n",
                NULL, -EINVAL,
                "t.yaml:5:53: 'egress.profiles.p.routes[0].methods' entries must be GET, HEAD, "
                "POST, PUT, PATCH, DELETE or OPTIONS (in capitals)");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"http://x\", header: Content-Length}\n",
                NULL, -EINVAL,
                "t.yaml:5:51: 'egress.profiles.p.routes[0].header' ('Content-Length'): names a "
                "header that the proxy controls itself");
    parse_fails("egress:\n  profiles:\n    p:\n      routes:\n"
                "        - {name: a, upstream: \"http://x\", credential_file: rel/path}\n",
                NULL, -EINVAL,
                "t.yaml:5:60: 'egress.profiles.p.routes[0].credential_file' ('rel/path'): must "
                "be an absolute path");
    parse_fails("egress:\n  profiles:\n    p:\n      read_only: true\n"
                "      allow: [\"a.com:443\"]\n",
                NULL, -EINVAL,
                "t.yaml:5:14: egress profile 'p': a read_only profile cannot allow CONNECT "
                "destinations (the method inside TLS cannot be checked)");
    parse_fails("egress:\n  profiles:\n    p:\n      read_only: true\n      routes:\n"
                "        - {name: a, upstream: \"http://x\", methods: [GET, POST]}\n",
                NULL, -EINVAL,
                "t.yaml:6:9: egress profile 'p': route 'a' allows methods beyond GET, HEAD and "
                "OPTIONS in a read_only profile");
    parse_fails("egress:\n  port: 80\n", NULL, -EINVAL,
                "t.yaml:2:9: 'egress.port' must be between 1024 and 65535");
    parse_fails("egress:\n  profiles:\n    p: {max_connections: 0}\n", NULL, -EINVAL,
                "t.yaml:3:26: 'egress.profiles.p.max_connections' must be between 1 and 1024");
    parse_fails("egress:\n  profiles:\n    p: {allow: [a.com:1], alow: []}\n", NULL, -EINVAL,
                "t.yaml:3:27: unknown key 'alow' in 'egress.profiles.p'");
}

static void config_parse__unknown_key(void **state)
{
    (void)state;
    parse_fails("# sbxd\n"
                "socket: ./a.sock\n"
                "\n"
                "state_dir: ./var\n"
                "# the next key is misspelt\n"
                "metrics: ''\n"
                "sockett: ./b.sock\n",
                NULL, -EINVAL, "t.yaml:7:1: unknown key 'sockett'");
    parse_fails("limits:\n  max_connections: 5\n  max_conections: 6\n", NULL, -EINVAL,
                "t.yaml:3:3: unknown key 'max_conections' in 'limits'");
    pool_fails("pools/x.yaml", "name: x\nmemroy: 1GiB\n", "pools/x.yaml:2:1: unknown key 'memroy'");
    /* Keys that are not plain strings. */
    parse_fails("? [a, b]\n: 1\n", NULL, -EINVAL,
                "t.yaml:1:3: keys must be strings, not a sequence");
}

static void config_parse__duplicate_key(void **state)
{
    (void)state;
    parse_fails("socket: ./a.sock\nstate_dir: ./v\nsocket: ./b.sock\n", NULL, -EINVAL,
                "t.yaml:3:1: duplicate key 'socket' (first on line 1)");
    parse_fails("limits:\n  max_connections: 5\n\nlimits:\n  max_connections: 6\n", NULL, -EINVAL,
                "t.yaml:4:1: duplicate key 'limits' (first on line 1)");
    parse_fails("userns: {enabled: true, enabled: false}\n", NULL, -EINVAL,
                "t.yaml:1:25: duplicate key 'userns.enabled' (first on line 1)");
    pool_fails("p.yaml", "name: a\nwarm: 1\nwarm: 2\n",
               "p.yaml:3:1: duplicate key 'warm' (first on line 2)");
}

static void config_parse_pool__bad_size(void **state)
{
    (void)state;
    pool_fails("pools/python.yaml", "# python\nname: python\nwarm: 4\nmemory: 512MiX\n",
               "pools/python.yaml:4:9: 'memory' must be a size like 512MiB");
    pool_fails("p.yaml", "name: p\noutput_cap: -1\n",
               "p.yaml:2:13: 'output_cap' must be a size like 512MiB");
    pool_fails("p.yaml", "name: p\ntmp_size: 99999999999999999999G\n",
               "p.yaml:2:11: 'tmp_size' is too large");
    parse_fails("limits:\n  max_message_bytes: lots\n", NULL, -EINVAL,
                "t.yaml:2:22: 'limits.max_message_bytes' must be a size like 512MiB");
}

static void config_parse_pool__bad_duration(void **state)
{
    (void)state;
    pool_fails("p.yaml", "name: p\ntimeout: 30 s\n",
               "p.yaml:2:10: 'timeout' must be a duration like 30s, 500ms or a number of seconds");
    pool_fails(
        "p.yaml", "name: p\nmax_timeout: -5\n",
        "p.yaml:2:14: 'max_timeout' must be a duration like 30s, 500ms or a number of seconds");
    parse_fails(
        "drain_grace: 10d\n", NULL, -EINVAL,
        "t.yaml:1:14: 'drain_grace' must be a duration like 30s, 500ms or a number of seconds");
}

static void config_parse_pool__bad_scalars(void **state)
{
    (void)state;
    pool_fails("p.yaml", "name: p\nwarm: 1.5\n", "p.yaml:2:7: 'warm' must be a whole number");
    pool_fails("p.yaml", "name: p\npids: 4294967296\n",
               "p.yaml:2:7: 'pids' must be at most 4294967295");
    pool_fails("p.yaml", "name: p\ncpu: 1e3\n",
               "p.yaml:2:6: 'cpu' must be a number of CPUs like 1.5");
    pool_fails("p.yaml", "name: p\ncpu: nan\n",
               "p.yaml:2:6: 'cpu' must be a number of CPUs like 1.5");
    pool_fails("p.yaml", "name: p\ndev_shm: maybe\n",
               "p.yaml:2:10: 'dev_shm' must be true or false");
    pool_fails("p.yaml", "name: Python\n",
               "p.yaml:1:7: 'name' must be a name matching [a-z0-9_-]{1,32}");
    pool_fails("p.yaml", "name: ../../etc\n",
               "p.yaml:1:7: 'name' must be a name matching [a-z0-9_-]{1,32}");
    pool_fails("p.yaml", "name: p\nseccomp: ../x\n",
               "p.yaml:2:10: 'seccomp' must be a name matching [a-z0-9_-]{1,32}");
    pool_fails("p.yaml", "name: p\nimage:\n",
               "p.yaml:2:7: 'image' must be a name matching [a-z0-9_-]{1,32}, not empty");
    pool_fails("p.yaml", "name: \"a\\0b\"\n", "p.yaml:1:7: 'name' must not contain NUL bytes");
    pool_fails("p.yaml", "# no name\nwarm: 1\n", "p.yaml:2:1: missing required key 'name'");
    pool_fails("p.yaml", "", "p.yaml:1:1: missing required key 'name'");
    parse_fails("log_level: verbose\n", NULL, -EINVAL,
                "t.yaml:1:12: 'log_level' must be one of error, warn, info, debug");
    parse_fails("cgroup:\n  version: 3\n", NULL, -EINVAL,
                "t.yaml:2:12: 'cgroup.version' must be auto, 1 or 2");
    parse_fails("socket: ''\n", NULL, -EINVAL, "t.yaml:1:9: 'socket' must be a string, not empty");
}

/* Sessions: defaults (max_sessions half of max), and the rules between the keys. */
static void config_parse_pool__session_keys(void **state)
{
    (void)state;
    struct pool_config p;
    struct err e = ERR_INIT;
    const char *text = "name: p\nmax: 9\n";
    assert_int_equal(config_parse_pool("p.yaml", text, strlen(text), &p, &e), 0);
    assert_int_equal(p.session_ttl_ns, 15 * 60 * SEC);
    assert_int_equal(p.session_max_ttl_ns, 4 * 3600 * SEC);
    assert_int_equal(p.session_idle_ns, 5 * 60 * SEC);
    assert_int_equal(p.max_sessions, 4);
    config_pool_clear(&p);
    text = "name: p\nmax: 4\nmax_sessions: 3\nsession_ttl: 1h\nsession_max_ttl: 2h\n"
           "session_idle_timeout: 30s\n";
    assert_int_equal(config_parse_pool("p.yaml", text, strlen(text), &p, &e), 0);
    assert_int_equal(p.max_sessions, 3);
    assert_int_equal(p.session_ttl_ns, 3600 * SEC);
    assert_int_equal(p.session_max_ttl_ns, 7200 * SEC);
    assert_int_equal(p.session_idle_ns, 30 * SEC);
    config_pool_clear(&p);
    pool_fails("p.yaml", "name: p\nmax: 4\nmax_sessions: 4\n",
               "p.yaml:3:15: 'max_sessions' (4) must be below 'max' (4)");
    pool_fails("p.yaml", "name: p\nsession_ttl: 5h\n",
               "p.yaml:2:14: 'session_ttl' must not exceed 'session_max_ttl'");
    pool_fails("p.yaml", "name: p\nsession_ttl: 1m\n",
               "p.yaml:2:14: 'session_idle_timeout' must not exceed 'session_ttl'");
    parse_fails("limits:\n  max_sessions: 65537\n", NULL, -EINVAL,
                "t.yaml:2:17: 'limits.max_sessions' must be between 0 and 65536");
}

static void config_parse_pool__warm_above_max(void **state)
{
    (void)state;
    pool_fails("p.yaml", "name: p\nwarm: 5\nmax: 4\n",
               "p.yaml:2:7: 'warm' (5) must not exceed 'max' (4)");
    /* warm left at its default (2): the position is max's. */
    pool_fails("p.yaml", "name: p\nmax: 1\n", "p.yaml:2:6: 'warm' (2) must not exceed 'max' (1)");
}

static void config_parse_pool__out_of_range(void **state)
{
    (void)state;
    pool_fails("p.yaml", "name: p\nwarm: 0\nmax: 0\n", "p.yaml:3:6: 'max' must be at least 1");
    pool_fails("p.yaml", "name: p\nmemory: 15MiB\n", "p.yaml:2:9: 'memory' must be at least 16MiB");
    pool_fails("p.yaml", "name: p\ncpu: 0\n", "p.yaml:2:6: 'cpu' must be above 0 and at most 64");
    pool_fails("p.yaml", "name: p\ncpu: 64.5\n",
               "p.yaml:2:6: 'cpu' must be above 0 and at most 64");
    pool_fails("p.yaml", "name: p\npids: 0\n", "p.yaml:2:7: 'pids' must be at least 1");
    pool_fails("p.yaml", "name: p\ntimeout: 0s\n", "p.yaml:2:10: 'timeout' must be above 0");
    pool_fails("p.yaml", "name: p\ntimeout: 10s\nmax_timeout: 9s\n",
               "p.yaml:3:14: 'max_timeout' must not be shorter than 'timeout'");
    /* max_timeout given, timeout raised past it: the position is max_timeout's. */
    pool_fails("p.yaml", "name: p\nmax_timeout: 20s\ntimeout: 30s\n",
               "p.yaml:2:14: 'max_timeout' must not be shorter than 'timeout'");
    pool_fails("p.yaml", "name: p\noutput_cap: 0\n",
               "p.yaml:2:13: 'output_cap' must be between 1 and 64MiB");
    pool_fails("p.yaml", "name: p\noutput_cap: 65MiB\n",
               "p.yaml:2:13: 'output_cap' must be between 1 and 64MiB");
    pool_fails("p.yaml", "name: p\ntmp_size: 0\n", "p.yaml:2:11: 'tmp_size' must be at least 1MiB");
    /* SECURITY: a tmpfs of size 0 has no limit; /work's too. */
    pool_fails("p.yaml", "name: p\nwork_size: 0\n",
               "p.yaml:2:12: 'work_size' must be at least 1MiB");
    pool_fails("p.yaml", "name: p\nwork_size: 512K\n",
               "p.yaml:2:12: 'work_size' must be at least 1MiB");
    /* A result holds the collect whole: its caps are bounded (sbx's reader is sized so). */
    pool_fails("p.yaml", "name: p\ncollect_max_bytes: 65MiB\n",
               "p.yaml:2:20: 'collect_max_bytes' must be between 0 and 64MiB");
    pool_fails("p.yaml", "name: p\ncollect_max_files: 10001\n",
               "p.yaml:2:20: 'collect_max_files' must be between 0 and 10000");
    pool_fails("p.yaml", "name: p\nfiles_path_max: 4097\n",
               "p.yaml:2:17: 'files_path_max' must be between 16 and 4096");
    pool_fails("p.yaml", "name: p\nnofile: 2\n",
               "p.yaml:2:9: 'nofile' must be between 16 and 1048576");
    pool_fails("p.yaml", "name: p\nio_read_bps: -1\n",
               "p.yaml:2:14: 'io_read_bps' must be a size like 512MiB");
    pool_fails("p.yaml", "name: p\nio_read_iops: 5000000000\n",
               "p.yaml:2:15: 'io_read_iops' must be at most 4294967295");
    pool_fails("p.yaml", "name: p\nuid: 0\n", "p.yaml:2:6: 'uid' must not be 0 (root)");
    pool_fails("p.yaml", "name: p\ngid: 0\n", "p.yaml:2:6: 'gid' must not be 0 (root)");
}

static void config_parse__global_out_of_range(void **state)
{
    (void)state;
    parse_fails("refill_parallelism: 0\n", NULL, -EINVAL,
                "t.yaml:1:21: 'refill_parallelism' must be between 1 and 64");
    parse_fails("refill_parallelism: 65\n", NULL, -EINVAL,
                "t.yaml:1:21: 'refill_parallelism' must be between 1 and 64");
    parse_fails("topup_idle: 61s\n", NULL, -EINVAL,
                "t.yaml:1:13: 'topup_idle' must be between 0ns and 60s");
    parse_fails("limits:\n  max_message_bytes: 1023\n", NULL, -EINVAL,
                "t.yaml:2:22: 'limits.max_message_bytes' must be between 1KiB and 64MiB");
    parse_fails("limits:\n  max_message_bytes: 65MiB\n", NULL, -EINVAL,
                "t.yaml:2:22: 'limits.max_message_bytes' must be between 1KiB and 64MiB");
    parse_fails("limits: {max_argv_bytes: 97KiB}\n", NULL, -EINVAL,
                "t.yaml:1:26: 'limits.max_argv_bytes' must be between 1 and 96KiB");
    parse_fails("limits: {max_connections: 0}\n", NULL, -EINVAL,
                "t.yaml:1:27: 'limits.max_connections' must be at least 1");
    parse_fails("metrics: localhost\n", NULL, -EINVAL,
                "t.yaml:1:10: 'metrics' must be ADDR:PORT like 127.0.0.1:9464, or \"\" to disable");
    parse_fails("metrics: 127.0.0.1:0\n", NULL, -EINVAL,
                "t.yaml:1:10: 'metrics' must be ADDR:PORT like 127.0.0.1:9464, or \"\" to disable");
    parse_fails("socket: ./s\nadmin_socket: ./s\n", NULL, -EINVAL,
                "t.yaml:2:15: 'socket' and 'admin_socket' must differ");
    parse_fails("cgroup:\n  parent: /a/../b\n", NULL, -EINVAL,
                "t.yaml:2:11: 'cgroup.parent' must be a path without '..'");
    parse_fails("userns:\n  host_id_base: 0\n", NULL, -EINVAL,
                "t.yaml:2:17: 'userns.host_id_base' must not be 0 (host root)");
    parse_fails("userns:\n  host_id_base: 4294000000\n  id_count: 1000000\n  slots: 1\n", NULL,
                -EINVAL,
                "t.yaml:4:10: 'userns.host_id_base' + 'userns.id_count' * 'userns.slots' must not "
                "exceed 4294967295");
    /* Each of the 1024 default blocks must fit too, not only the first. */
    parse_fails("userns:\n  host_id_base: 4250000000\n", NULL, -EINVAL,
                "t.yaml:2:17: 'userns.host_id_base' + 'userns.id_count' * 'userns.slots' must "
                "not exceed 4294967295");
    parse_fails("userns:\n  slots: 0\n", NULL, -EINVAL,
                "t.yaml:2:10: 'userns.slots' must be between 1 and 65536");
}

static void config_parse__wrong_type(void **state)
{
    (void)state;
    parse_fails("socket:\n  path: ./a.sock\n", NULL, -EINVAL,
                "t.yaml:2:3: 'socket' must be a string, not a mapping");
    parse_fails("refill_parallelism: [1, 2]\n", NULL, -EINVAL,
                "t.yaml:1:21: 'refill_parallelism' must be a whole number, not a sequence");
    parse_fails("limits: 5\n", NULL, -EINVAL,
                "t.yaml:1:9: 'limits' must be a mapping, not a scalar");
    parse_fails("- socket\n", NULL, -EINVAL,
                "t.yaml:1:1: the top level must be a mapping of keys, not a sequence");
    parse_fails("just text\n", NULL, -EINVAL,
                "t.yaml:1:1: the top level must be a mapping of keys, not a scalar");
    pool_fails("p.yaml", "name: p\nmemory: {value: 1GiB}\n",
               "p.yaml:2:9: 'memory' must be a size like 512MiB, not a mapping");
}

static void config_parse__yaml_syntax_error(void **state)
{
    (void)state;
    parse_fails("socket: ./a.sock\n  state_dir: ./var\n", NULL, -EINVAL,
                "t.yaml:2:12: mapping values are not allowed in this context");
    parse_fails("socket: \"./a.sock\n", NULL, -EINVAL,
                "t.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar at "
                "1:9)");
    parse_fails("limits: {max_connections: 5\n", NULL, -EINVAL,
                "t.yaml:2:1: did not find expected ',' or '}' (while parsing a flow mapping at "
                "1:9)");
    parse_fails("socket: *nowhere\n", NULL, -EINVAL, "t.yaml:1:9: found undefined alias");
    /* Invalid UTF-8 has no libyaml mark: the position comes from the byte offset. */
    parse_fails("socket: ./a\nstate_dir: \xff\n", NULL, -EINVAL,
                "t.yaml:2:12: invalid leading UTF-8 octet");
    /* One document only; a broken second document is a syntax error too. */
    parse_fails("socket: ./a\n---\nsocket: ./b\n", NULL, -EINVAL,
                "t.yaml:3:1: only one YAML document is allowed");
    pool_fails("p.yaml", "name: p\n---\n[\n",
               "p.yaml:4:1: did not find expected node content (while parsing a flow node at 4:1)");
}

static void config_parse__missing_default_pool(void **state)
{
    (void)state;
    parse_fails("socket: ./a.sock\ndefault_pool: nope\n", NULL, -EINVAL,
                "t.yaml:2:15: default_pool 'nope' is not a loaded pool (loaded: heavy, "
                "integrations, parsing, python)");

    /* Default default_pool ("python") with a pools_dir that has no python: the position is
     * the document's. */
    char *dir = tmpdir_new();
    write_file(dir, "a.yaml", pool_a);
    parse_fails("# c\nstate_dir: ./v\npools_dir: .\n", dir, -EINVAL,
                "t.yaml:2:1: default_pool 'python' is not a loaded pool (loaded: alpha)");
    tmpdir_remove(dir);
}

/* ---- pools_dir ---- */

static void config_load__pools_dir(void **state)
{
    (void)state;
    char *dir = tmpdir_new();
    scoped_free char *pdir = xasprintf("%s/pools", dir);
    scoped_free char *cfg = xasprintf("%s/sbxd.yaml", dir);
    struct config *c = NULL;
    struct err e = ERR_INIT;

    assert_int_equal(mkdir(pdir, 0755), 0);
    write_file(pdir, "b.yaml", pool_b);
    write_file(pdir, "a.yaml", pool_a);
    write_file(pdir, "README", "not a pool\n");
    write_file(pdir, ".hidden.yaml", "this: is ignored\n");
    write_file(pdir, "c.yml", "neither: is this\n");
    write_file(dir, "sbxd.yaml", "default_pool: beta\npools_dir: pools/\n");

    assert_int_equal(config_load(cfg, &c, &e), 0);
    assert_string_equal(c->source, cfg);
    assert_int_equal(c->n_pools, 2);
    assert_string_equal(c->pools[0].name, "alpha");
    assert_string_equal(c->pools[1].name, "beta");
    scoped_free char *label = xasprintf("%s/pools/a.yaml", dir);
    assert_string_equal(c->pools[0].file, label);
    assert_int_equal(c->pools[1].warm, 0);
    assert_int_equal(c->pools[1].max, 1);
    assert_ptr_equal(config_find_pool(c, "beta"), &c->pools[1]);
    assert_int_equal(config_validate(c, &e), 0);
    c = config_free(c);

    /* An absolute pools_dir ignores the config's directory. */
    scoped_free char *abs = xasprintf("default_pool: alpha\npools_dir: %s\n", pdir);
    c = parse_ok(abs, "/nonexistent");
    assert_int_equal(c->n_pools, 2);
    c = config_free(c);

    /* An error in a pool file names that file. */
    write_file(pdir, "b.yaml", "name: beta\nwarm: 9\nmax: 3\n");
    scoped_free char *want =
        xasprintf("%s/pools/b.yaml:2:7: 'warm' (9) must not exceed 'max' (3)", dir);
    assert_int_equal(config_load(cfg, &c, &e), -EINVAL);
    assert_null(c);
    assert_string_equal(e.msg, want);

    /* Two files with the same pool name. */
    write_file(pdir, "b.yaml", "# again\nname: alpha\n");
    scoped_free char *dup = xasprintf("%s/pools/b.yaml:2:7: pool name 'alpha' is already used by "
                                      "%s/pools/a.yaml",
                                      dir, dir);
    assert_int_equal(config_load(cfg, &c, &e), -EINVAL);
    assert_string_equal(e.msg, dup);

    /* uid beyond the user namespace's map. */
    write_file(pdir, "b.yaml", "name: beta\nuid: 70000\n");
    scoped_free char *uid = xasprintf("%s/pools/b.yaml:2:6: 'uid' (70000) must be below "
                                      "userns.id_count (65536)",
                                      dir);
    assert_int_equal(config_load(cfg, &c, &e), -EINVAL);
    assert_string_equal(e.msg, uid);
    write_file(pdir, "b.yaml", "name: beta\ngid: 65536\n");
    scoped_free char *gid = xasprintf("%s/pools/b.yaml:2:6: 'gid' (65536) must be below "
                                      "userns.id_count (65536)",
                                      dir);
    assert_int_equal(config_load(cfg, &c, &e), -EINVAL);
    assert_string_equal(e.msg, gid);

    /* A pools_dir that does not exist, or has no pool files. */
    write_file(dir, "sbxd.yaml", "default_pool: beta\npools_dir: missing\n");
    scoped_free char *miss =
        xasprintf("%s:2:12: pools_dir '%s/missing': cannot open: ENOENT", cfg, dir);
    assert_int_equal(config_load(cfg, &c, &e), -ENOENT);
    assert_string_equal(e.msg, miss);
    scoped_free char *edir = xasprintf("%s/empty", dir);
    assert_int_equal(mkdir(edir, 0755), 0);
    write_file(dir, "sbxd.yaml", "pools_dir: empty\n");
    scoped_free char *empty =
        xasprintf("%s:1:12: pools_dir '%s/empty' has no *.yaml pool files", cfg, dir);
    assert_int_equal(config_load(cfg, &c, &e), -EINVAL);
    assert_string_equal(e.msg, empty);

    /* A config without pools_dir uses the embedded pools. */
    write_file(dir, "sbxd.yaml", "metrics: ''\n");
    assert_int_equal(config_load(cfg, &c, &e), 0);
    assert_int_equal(c->n_pools, 4);
    c = config_free(c);
    tmpdir_remove(dir);
}

static void config_load__missing_file(void **state)
{
    (void)state;
    struct config *c = NULL;
    struct err e = ERR_INIT;

    assert_int_equal(config_load("/nonexistent/sbxd.yaml", &c, &e), -ENOENT);
    assert_null(c);
    assert_string_equal(e.msg, "/nonexistent/sbxd.yaml: cannot open: ENOENT");
    assert_int_equal(config_load("/tmp", &c, &e), -EINVAL);
    assert_string_equal(e.msg, "/tmp: not a regular file");
}

/* ---- config_validate on a changed struct ---- */

static void config_validate__changed_config(void **state)
{
    (void)state;
    struct config *c = NULL;
    struct err e = ERR_INIT;

    assert_int_equal(config_load(NULL, &c, &e), 0);
    free(c->default_pool);
    c->default_pool = xstrdup("gone");
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "<embedded>: default_pool 'gone' is not a loaded pool (loaded: "
                               "heavy, integrations, parsing, python)");
    free(c->default_pool);
    c->default_pool = xstrdup("python");

    c->pools[1].warm = 100;
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "pools/integrations.yaml: 'warm' (100) must not exceed 'max' (16)");
    c->pools[1].warm = 2;

    free(c->pools[1].name);
    c->pools[1].name = xstrdup("heavy");
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "pools/integrations.yaml: pool name 'heavy' is already used by "
                               "pools/heavy.yaml");
    free(c->pools[1].name);
    c->pools[1].name = xstrdup("integrations");

    c->userns_count = 10000;
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg,
                        "pools/heavy.yaml: 'uid' (10001) must be below userns.id_count (10000)");
    c->userns_count = 65536;
    /* A block of host ids per sandbox: the pools at their max must fit. */
    c->userns_slots = 51;
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "<embedded>: the pools' max add up to 52 sandboxes, more than "
                               "userns.slots (51)");
    c->userns_slots = 52;
    assert_int_equal(config_validate(c, &e), 0);
    c->userns_count = 10000;
    c->userns = false;
    assert_int_equal(config_validate(c, &e), 0);

    c->refill_parallelism = 0;
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "<embedded>: 'refill_parallelism' must be between 1 and 64");
    c->refill_parallelism = 2;

    size_t n = c->n_pools;
    c->n_pools = 0;
    assert_int_equal(config_validate(c, &e), -EINVAL);
    assert_string_equal(e.msg, "<embedded>: at least one pool is required");
    c->n_pools = n;
    assert_int_equal(config_validate(c, NULL), 0);
    config_free(c);
}

/* ---- random edits ---- */

/* seed with a few random edits, NUL-terminated in a block of its exact length. */
static char *edit(const char *seed, size_t *ret_len)
{
    size_t n = strlen(seed), cap = n + 64;
    char *b = xmalloc(cap);
    memcpy(b, seed, n);
    static const char bytes[] = ":-[]{}'\"#&*!|>%@`,? \n\t0x1e9.~\\";
    for (uint32_t k = 1 + rnd_below(4); k > 0; k--) {
        size_t at = n ? rnd_below((uint32_t)n) : 0;
        uint32_t op = rnd_below(4);
        if (op == 0 && n) {
            b[at] = rnd_below(4) ? bytes[rnd_below(sizeof(bytes) - 1)] : (char)(1 + rnd_below(255));
        } else if (op == 1 && n + 1 < cap) {
            memmove(b + at + 1, b + at, n - at);
            b[at] = bytes[rnd_below(sizeof(bytes) - 1)];
            n++;
        } else if (op == 2 && n) {
            size_t del = 1 + rnd_below(8);
            del = del > n - at ? n - at : del;
            memmove(b + at, b + at + del, n - at - del);
            n -= del;
        } else {
            n = at;
        }
    }
    char *exact = xmalloc(n + 1);
    memcpy(exact, b, n);
    exact[n] = '\0';
    free(b);
    *ret_len = n;
    return exact;
}

/* The shipped config and pool files, and one with egress profiles, each edited at random:
 * parsing either succeeds or fails with a message that names where, never crashes (ASan and
 * UBSan under SAN=1) and leaks nothing (LeakSanitizer). */
static void config_parse__random_edits_never_crash(void **state)
{
    (void)state;
    static const char egress[] =
        "egress:\n  port: 3128\n  profiles:\n    github:\n"
        "      allow: [\"api.github.com:443\", \"*.githubusercontent.com:443\", \"[::1]:8443\"]\n"
        "      allow_addresses: [10.0.0.0/8, \"::1\"]\n      max_request_bytes: 1MiB\n"
        "      routes:\n        - name: issues\n          methods: [GET, POST]\n"
        "          path_prefix: /repos/\n          upstream: http://127.0.0.1:8080/api/v3/\n"
        "          header: X-Api-Key\n        - {name: docs.internal, upstream: \"http://[::1]\"}\n"
        "tokens:\n  mount_roots: [/srv/data]\n  max_ttl: 1h\n"
        "cgroup: {version: 2, require_limits: false, parent: /a/b}\n";
    size_t ok[2] = {0, 0}, bad[2] = {0, 0};
    for (int iter = 0; iter < 3000; iter++) {
        struct err e = ERR_INIT;
        size_t n;
        if (iter % 3 == 2) {
            const struct embedded_file *f = &embedded_pools[rnd_below((uint32_t)embedded_n_pools)];
            char *text = edit(f->text, &n);
            struct pool_config p;
            int r = config_parse_pool(f->name, text, n, &p, &e);
            if (r == 0) {
                config_pool_clear(&p);
                ok[1]++;
            } else {
                assert_true(r < 0);
                assert_non_null(strstr(err_msg(&e), f->name));
                bad[1]++;
            }
            free(text);
            continue;
        }
        char *text = edit(iter % 3 ? egress : embedded_config.text, &n);
        struct config *c = NULL;
        int r = config_parse("t.yaml", text, n, NULL, &c, &e);
        if (r == 0) {
            assert_non_null(c);
            (void)config_validate(c, &e);
            config_free(c);
            ok[0]++;
        } else {
            assert_true(r < 0);
            assert_null(c);
            assert_true(err_msg(&e)[0] != '\0');
            bad[0]++;
        }
        free(text);
    }
    print_message("[  INFO    ] configs %zu parsed, %zu refused; pools %zu, %zu\n", ok[0], bad[0],
                  ok[1], bad[1]);
    assert_true(ok[0] > 100 && bad[0] > 100 && ok[1] > 50 && bad[1] > 50);
}

/* The agents' socket's group (a name or a gid) and mode; the admin socket has neither. */
static void config_parse__socket_access(void **state)
{
    (void)state;
    struct config_socket_access sa;
    struct err e = ERR_INIT;
    struct config *c = parse_ok("state_dir: /var/lib/sbx\n", NULL);
    assert_int_equal(config_socket_access(c, &sa, &e), 0);
    assert_false(sa.has_group);
    assert_int_equal(sa.mode, 0660);
    config_free(c);
    c = parse_ok("socket: /run/sbx/sbxd.sock\nsocket_group: root\nsocket_mode: 0660\n", NULL);
    assert_string_equal(c->socket_group, "root");
    assert_int_equal(config_socket_access(c, &sa, &e), 0);
    assert_true(sa.has_group);
    assert_int_equal(sa.gid, 0);
    assert_int_equal(sa.mode, 0660);
    config_free(c);
    /* A number is a gid even with no name for it. */
    c = parse_ok("socket: /run/sbx/sbxd.sock\nsocket_group: 43210\nsocket_mode: '0666'\n", NULL);
    assert_int_equal(config_socket_access(c, &sa, &e), 0);
    assert_int_equal(sa.gid, 43210);
    assert_int_equal(sa.mode, 0666);
    config_free(c);
    parse_fails("socket: /run/sbx/s.sock\nsocket_group: no-such-group-sbx\n", NULL, -EINVAL,
                "t.yaml:2:15: 'socket_group': no group 'no-such-group-sbx'");
    parse_fails("socket: /run/sbx/s.sock\nsocket_mode: 0789\n", NULL, -EINVAL,
                "t.yaml:2:14: 'socket_mode' must be an octal mode like 0660, not '0789'");
    parse_fails("socket_mode: 01777\n", NULL, -EINVAL,
                "t.yaml:1:14: 'socket_mode' must be an octal mode like 0660, not '01777'");
    /* Inside the 0700 state dir a group would open nothing. */
    parse_fails("state_dir: /var/lib/sbx/\nsocket: /var/lib/sbx/sbxd.sock\nsocket_group: root\n",
                NULL, -EINVAL,
                "t.yaml:2:9: with 'socket_group', 'socket' must be outside 'state_dir' (e.g. "
                "/run/sbx/sbxd.sock)");
    parse_fails("socket_group: root\n", NULL, -EINVAL,
                "t.yaml:1:15: with 'socket_group', 'socket' must be outside 'state_dir' (e.g. "
                "/run/sbx/sbxd.sock)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_parse__random_edits_never_crash),
        cmocka_unit_test(config_parse__empty_gives_defaults),
        cmocka_unit_test(config_parse_pool__defaults),
        cmocka_unit_test(config_parse__every_key),
        cmocka_unit_test(config_parse__socket_access),
        cmocka_unit_test(config_parse_pool__every_key),
        cmocka_unit_test(config_load__embedded_default),
        cmocka_unit_test(config_parse__images_dir),
        cmocka_unit_test(config_parse__audit),
        cmocka_unit_test(config_parse__tokens),
        cmocka_unit_test(config_parse__egress),
        cmocka_unit_test(config_parse__egress_errors),
        cmocka_unit_test(config_parse__unknown_key),
        cmocka_unit_test(config_parse__duplicate_key),
        cmocka_unit_test(config_parse_pool__bad_size),
        cmocka_unit_test(config_parse_pool__bad_duration),
        cmocka_unit_test(config_parse_pool__bad_scalars),
        cmocka_unit_test(config_parse_pool__session_keys),
        cmocka_unit_test(config_parse_pool__warm_above_max),
        cmocka_unit_test(config_parse_pool__out_of_range),
        cmocka_unit_test(config_parse__global_out_of_range),
        cmocka_unit_test(config_parse__wrong_type),
        cmocka_unit_test(config_parse__yaml_syntax_error),
        cmocka_unit_test(config_parse__missing_default_pool),
        cmocka_unit_test(config_load__pools_dir),
        cmocka_unit_test(config_load__missing_file),
        cmocka_unit_test(config_validate__changed_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
