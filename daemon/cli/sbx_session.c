/* SPDX-License-Identifier: MIT */
/* sbx session: open a session (its id on stdout), list the caller's open sessions, list a
 * directory of one, close one. Commands run in a session with sbx exec --session and files
 * move with sbx cp; a session belongs to its opener's uid and token, so the token given
 * here (or SBX_TOKEN) goes with every request. */
#include "cli/cli_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/sbx_json.h"
#include "lib/util.h"

struct sbx_session_opts {
    const char *sub; /* open, list, ls, close */
    const char *id;
    const char *path; /* ls */
    const char *pool;
    const char *token; /* never printed */
    uint64_t ttl_ns;   /* 0: the pool's default */
    uint64_t idle_ns;
    struct sbx_files files; /* open: inline only */
    bool json;
};

const char *sbx_session_token(const char *flag)
{
    const char *env = getenv("SBX_TOKEN");
    if (flag) {
        return flag;
    }
    return env && env[0] ? env : NULL;
}

void sbx_session_pack_seconds(msgpack_packer *pk, const char *key, uint64_t ns)
{
    if (ns % 1000000000u == 0) {
        proto_pack_kv_u64(pk, key, ns / 1000000000u);
    } else {
        proto_pack_kv_f64(pk, key, (double)ns / 1e9);
    }
}

static void sbx_session_release(struct sbx_session_opts *o)
{
    sbx_files_release(&o->files);
}

static void sbx_session_pack(msgpack_packer *pk, const void *arg)
{
    const struct sbx_session_opts *o = arg;
    bool open = strcmp(o->sub, "open") == 0;
    uint32_t n =
        (o->token != NULL) + (o->id != NULL) + (o->path != NULL) +
        (open ? (o->pool != NULL) + (o->ttl_ns > 0) + (o->idle_ns > 0) + (o->files.n > 0) : 0);

    (void)msgpack_pack_map(pk, n);
    if (o->token) {
        proto_pack_kv_str(pk, "token", o->token);
    }
    if (o->id) {
        proto_pack_kv_str(pk, "session", o->id);
    }
    if (o->path) {
        proto_pack_kv_str(pk, "path", o->path);
    }
    if (open && o->pool) {
        proto_pack_kv_str(pk, "pool", o->pool);
    }
    if (open && o->ttl_ns > 0) {
        sbx_session_pack_seconds(pk, "ttl", o->ttl_ns);
    }
    if (open && o->idle_ns > 0) {
        sbx_session_pack_seconds(pk, "idle_timeout", o->idle_ns);
    }
    if (open && o->files.n > 0) {
        sbx_files_pack(pk, &o->files);
    }
}

/* A unix time in seconds (a float) as ISO 8601 UTC, or "-". */
static const char *sbx_session_time(const msgpack_object *o, char *buf, size_t size)
{
    double t = 0;
    struct tm tm;
    time_t secs;
    if (!o || (o->type != MSGPACK_OBJECT_FLOAT64 && o->type != MSGPACK_OBJECT_FLOAT32 &&
               o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)) {
        return "-";
    }
    t = o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)o->via.u64 : o->via.f64;
    if (!isfinite(t) || t < 0 || t > 1e11) {
        return "-";
    }
    secs = (time_t)t;
    if (!gmtime_r(&secs, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        return "-";
    }
    return buf;
}

static double sbx_session_f64(const msgpack_object *map, const char *key)
{
    double v = 0;
    (void)proto_get_f64(map, key, &v, NULL);
    return v;
}

static int sbx_session_open(const struct sbx_session_opts *o, const msgpack_object *res)
{
    char id[80];
    if (!sbx_text(proto_map_get(res, "session"), id, sizeof(id))[0]) {
        return sbx_fail(o->json, SBX_ERR_PROTOCOL, "malformed session.open result from sbxd");
    }
    if (o->json) {
        sbx_json_print_obj(stdout, res);
    } else {
        char when[40], pool[64];
        (void)printf("%s\n", id);
        /* The id alone on stdout, for $(sbx session open); the rest is for people. */
        (void)fprintf(stderr, "sbx: session %s in pool %s, expires %s, idle timeout %gs\n", id,
                      sbx_text(proto_map_get(res, "pool"), pool, sizeof(pool)),
                      sbx_session_time(proto_map_get(res, "expires_at"), when, sizeof(when)),
                      sbx_session_f64(res, "idle_timeout"));
    }
    return 0;
}

static int sbx_session_list(const struct sbx_session_opts *o, const msgpack_object *res)
{
    const msgpack_object *v = proto_map_get(res, "sessions");
    if (!v || v->type != MSGPACK_OBJECT_ARRAY) {
        return sbx_fail(o->json, SBX_ERR_PROTOCOL, "malformed session.list result from sbxd");
    }
    if (o->json) {
        sbx_json_print_obj(stdout, v);
        return 0;
    }
    (void)printf("%-34s %-16s %-20s %-20s %6s %8s %s\n", "SESSION", "POOL", "CREATED", "EXPIRES",
                 "IDLE_S", "COMMANDS", "BUSY");
    for (uint32_t i = 0; i < v->via.array.size; i++) {
        const msgpack_object *s = &v->via.array.ptr[i];
        char id[80], pool[64], created[40], expires[40];
        uint64_t commands = 0;
        bool busy = false;
        (void)proto_get_u64(s, "commands", &commands, NULL);
        (void)proto_get_bool(s, "busy", &busy, NULL);
        (void)printf("%-34s %-16s %-20s %-20s %6.0f %8" PRIu64 " %s\n",
                     sbx_text(proto_map_get(s, "session"), id, sizeof(id)),
                     sbx_text(proto_map_get(s, "pool"), pool, sizeof(pool)),
                     sbx_session_time(proto_map_get(s, "created_at"), created, sizeof(created)),
                     sbx_session_time(proto_map_get(s, "expires_at"), expires, sizeof(expires)),
                     sbx_session_f64(s, "idle_timeout"), commands, busy ? "yes" : "no");
    }
    return 0;
}

/* "drwxr-xr-x" from an entry's type and mode. */
static const char *sbx_session_mode(const msgpack_object *e, char buf[11])
{
    static const char rwx[] = "rwxrwxrwx";
    char type[16];
    uint64_t mode = 0;
    (void)proto_get_u64(e, "mode", &mode, NULL);
    sbx_text(proto_map_get(e, "type"), type, sizeof(type));
    buf[0] = strcmp(type, "dir") == 0       ? 'd'
             : strcmp(type, "symlink") == 0 ? 'l'
             : strcmp(type, "file") == 0    ? '-'
                                            : '?';
    for (int i = 0; i < 9; i++) {
        buf[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
    }
    buf[10] = '\0';
    return buf;
}

static int sbx_session_ls(const struct sbx_session_opts *o, const msgpack_object *res)
{
    const msgpack_object *v = proto_map_get(res, "entries");
    bool truncated = false;
    if (!v || v->type != MSGPACK_OBJECT_ARRAY) {
        return sbx_fail(o->json, SBX_ERR_PROTOCOL, "malformed session.list result from sbxd");
    }
    if (o->json) {
        sbx_json_print_obj(stdout, res);
        return 0;
    }
    for (uint32_t i = 0; i < v->via.array.size; i++) {
        const msgpack_object *e = &v->via.array.ptr[i];
        char mode[11], name[SBX_TEXT_MAX];
        uint64_t size = 0;
        (void)proto_get_u64(e, "size", &size, NULL);
        (void)printf("%s %12" PRIu64 " %s\n", sbx_session_mode(e, mode), size,
                     sbx_text(proto_map_get(e, "name"), name, sizeof(name)));
    }
    (void)proto_get_bool(res, "truncated", &truncated, NULL);
    if (truncated) {
        sbx_errorf("more entries than sbxd lists: the listing is cut");
    }
    return 0;
}

static int sbx_session_close(const struct sbx_session_opts *o, const msgpack_object *res)
{
    char id[80], reason[32];
    uint64_t commands = 0, ms = 0;
    if (o->json) {
        sbx_json_print_obj(stdout, res);
        return 0;
    }
    (void)proto_get_u64(res, "commands", &commands, NULL);
    (void)proto_get_u64(res, "lifetime_ms", &ms, NULL);
    (void)printf("%s %s after %" PRIu64 " command%s in %.1fs\n",
                 sbx_text(proto_map_get(res, "session"), id, sizeof(id)),
                 sbx_text(proto_map_get(res, "reason"), reason, sizeof(reason)), commands,
                 commands == 1 ? "" : "s", (double)ms / 1000.0);
    return 0;
}

/* Parses what follows the subcommand. Returns 0, -1 after printing the help, or an exit
 * status. */
static int sbx_session_parse(int argc, char **argv, struct sbx_session_opts *o)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("session");
    const char *pos[2] = {NULL, NULL};
    size_t n_pos = 0;
    bool open = strcmp(o->sub, "open") == 0;

    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            sbx_usage(stdout, cmd);
            return -1;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if ((r = parse_long_opt(argc, argv, &i, "--token", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "session: --token needs a token");
            }
            o->token = v;
        } else if (open && (r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "session open: --pool needs a pool name");
            }
            o->pool = v;
        } else if (open && (r = parse_long_opt(argc, argv, &i, "--ttl", &v)) != 0) {
            if (r < 0 || parse_duration_ns(v, &o->ttl_ns) < 0 || o->ttl_ns == 0) {
                return sbx_usage_error(cmd, "session open: --ttl needs a positive duration");
            }
        } else if (open && (r = parse_long_opt(argc, argv, &i, "--idle-timeout", &v)) != 0) {
            if (r < 0 || parse_duration_ns(v, &o->idle_ns) < 0 || o->idle_ns == 0) {
                return sbx_usage_error(cmd,
                                       "session open: --idle-timeout needs a positive duration");
            }
        } else if (open && (r = parse_long_opt(argc, argv, &i, "--file", &v)) != 0) {
            struct err e = ERR_INIT;
            if (r < 0) {
                return sbx_usage_error(cmd, "session open: --file needs LOCAL[:PATH]");
            }
            if (sbx_files_add(&o->files, v, &e) < 0) {
                return sbx_usage_error(cmd, "session open: %s", err_msg(&e));
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return sbx_usage_error(cmd, "session %s: unknown option '%s'", o->sub, a);
        } else if (n_pos < 2) {
            pos[n_pos++] = a;
        } else {
            return sbx_usage_error(cmd, "session %s: unexpected argument '%s'", o->sub, a);
        }
    }
    size_t want_min = open || strcmp(o->sub, "list") == 0 ? 0 : 1;
    size_t want_max = strcmp(o->sub, "ls") == 0 ? 2 : want_min;
    if (n_pos < want_min) {
        return sbx_usage_error(cmd, "session %s: which session? (an id from sbx session open)",
                               o->sub);
    }
    if (n_pos > want_max) {
        return sbx_usage_error(cmd, "session %s: unexpected argument '%s'", o->sub, pos[want_max]);
    }
    o->id = pos[0];
    o->path = pos[1];
    o->token = sbx_session_token(o->token);
    sbx_files_plan(&o->files);
    if (sbx_files_streamed(&o->files)) {
        /* session.open takes inline files only: the rest go with sbx cp. */
        return sbx_usage_error(cmd,
                               "session open: --file takes files of up to %u KiB (%u KiB "
                               "together); copy larger ones in with sbx cp",
                               SBX_FILES_INLINE_MAX >> 10, SBX_FILES_INLINE_TOTAL >> 10);
    }
    struct err e = ERR_INIT;
    if (sbx_files_load(&o->files, &e) < 0) {
        return sbx_fail(o->json, SBX_ERR_SYSTEM, "%s", err_msg(&e));
    }
    return 0;
}

int sbx_session_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    static const struct {
        const char *sub, *method;
        int (*show)(const struct sbx_session_opts *o, const msgpack_object *res);
    } subs[] = {
        {"open", "session.open", sbx_session_open},
        {"list", "session.list", sbx_session_list},
        {"ls", "session.list", sbx_session_ls},
        {"close", "session.close", sbx_session_close},
    };
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    scoped(sbx_session_release) struct sbx_session_opts o = {0};
    size_t k = 0;

    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        sbx_usage(stdout, cmd);
        return 0;
    }
    for (; argc > 1 && k < ARRAY_SIZE(subs); k++) {
        if (strcmp(argv[1], subs[k].sub) == 0) {
            break;
        }
    }
    if (argc < 2 || k == ARRAY_SIZE(subs)) {
        return sbx_usage_error(cmd, "session: open, list, ls or close?");
    }
    o.sub = subs[k].sub;
    int status = sbx_session_parse(argc, argv, &o);
    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_rpc_request(ctx, &c, subs[k].method, sbx_session_pack, &o, o.json, &m);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_MAP) {
        return sbx_fail(o.json, SBX_ERR_PROTOCOL, "malformed %s result from sbxd", subs[k].method);
    }
    return subs[k].show(&o, m.result);
}
