/* SPDX-License-Identifier: MIT */
/* sbx audit: the chains of the audit trail, newest first (admin socket), as a table, one
 * chain event by event, or JSON lines; and 'verify', the check of its hash chain. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/sbx_json.h"
#include "lib/util.h"

struct sbx_audit_opts {
    const char *task;
    const char *session;
    const char *pool;
    const char *status;
    uint64_t since_ns; /* 0: any */
    uint64_t limit;    /* 0: the daemon's default */
    bool json;
};

static void sbx_audit_pack_args(msgpack_packer *pk, const void *arg)
{
    const struct sbx_audit_opts *o = arg;
    uint32_t n = (o->task != NULL) + (o->session != NULL) + (o->pool != NULL) +
                 (o->status != NULL) + (o->since_ns != 0) + (o->limit != 0);
    (void)msgpack_pack_map(pk, n);
    if (o->task) {
        proto_pack_kv_str(pk, "task", o->task);
    }
    if (o->session) {
        proto_pack_kv_str(pk, "session", o->session);
    }
    if (o->pool) {
        proto_pack_kv_str(pk, "pool", o->pool);
    }
    if (o->status) {
        proto_pack_kv_str(pk, "status", o->status);
    }
    if (o->since_ns) {
        proto_pack_kv_f64(pk, "since", (double)o->since_ns / 1e9);
    }
    if (o->limit) {
        proto_pack_kv_u64(pk, "limit", o->limit);
    }
}

/* DURATION for --since: what parse_duration_ns takes, and also days ("7d"). */
static int sbx_audit_duration(const char *s, uint64_t *ret)
{
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == 'd') {
        char buf[32];
        uint64_t days;
        if (n >= sizeof(buf)) {
            return -EINVAL;
        }
        memcpy(buf, s, n - 1);
        buf[n - 1] = '\0';
        if (parse_u64(buf, &days) < 0 || days == 0 || days > 36500) {
            return -EINVAL;
        }
        *ret = days * 86400ULL * 1000000000ULL;
        return 0;
    }
    int r = parse_duration_ns(s, ret);
    return r < 0 || *ret == 0 ? -EINVAL : 0;
}

/* ISO 8601 UTC time with milliseconds. */
static const char *sbx_audit_time(int64_t ns, char *buf, size_t size)
{
    time_t secs = (time_t)(ns / 1000000000LL);
    struct tm tm;
    if (ns < 0 || !gmtime_r(&secs, &tm)) {
        (void)snprintf(buf, size, "?");
        return buf;
    }
    size_t w = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    (void)snprintf(buf + w, size - w, ".%03dZ", (int)((ns / 1000000) % 1000));
    return buf;
}

static int64_t sbx_obj_i64(const msgpack_object *o)
{
    if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        return o->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)o->via.u64;
    }
    if (o && o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        return o->via.i64;
    }
    return 0;
}

/* The fields map of the chain's first event of that type, or NULL. */
static const msgpack_object *sbx_audit_fields(const msgpack_object *events, const char *type)
{
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        const msgpack_object *t = proto_map_get(ev, "type");
        if (t && t->type == MSGPACK_OBJECT_STR &&
            proto_str_eq(t->via.str.ptr, t->via.str.size, type)) {
            return proto_map_get(ev, "fields");
        }
    }
    return NULL;
}

/* A chain's pool: its task.request's, or a session's chain's session.open's; NULL if none. */
static const msgpack_object *sbx_audit_pool(const msgpack_object *events)
{
    const msgpack_object *req = sbx_audit_fields(events, "task.request");
    if (!req) {
        req = sbx_audit_fields(events, "session.open");
    }
    return req ? proto_map_get(req, "pool") : NULL;
}

/* A chain's status: its task.result's, or a session's chain's end reason (session.close's);
 * NULL while it has neither. */
static const msgpack_object *sbx_audit_status(const msgpack_object *events)
{
    const msgpack_object *res = sbx_audit_fields(events, "task.result");
    if (res) {
        return proto_map_get(res, "status");
    }
    res = sbx_audit_fields(events, "session.close");
    return res ? proto_map_get(res, "reason") : NULL;
}

/* One JSON line per chain: task (or session), pool, status and its events. */
static void sbx_audit_json(const msgpack_object *task, const msgpack_object *events)
{
    json_t *doc = json_object(), *list = json_array();
    char tbuf[48];
    sbx_json_set(doc, "task", sbx_json_obj(task));
    sbx_json_set(doc, "pool", sbx_json_obj(sbx_audit_pool(events)));
    sbx_json_set(doc, "status", sbx_json_obj(sbx_audit_status(events)));
    for (uint32_t i = 0; events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        const char *when =
            sbx_audit_time(sbx_obj_i64(proto_map_get(ev, "time_ns")), tbuf, sizeof(tbuf));
        json_t *one = json_object();
        sbx_json_set(one, "seq", sbx_json_obj(proto_map_get(ev, "seq")));
        sbx_json_set(one, "time", sbx_json_str(when, strlen(when)));
        sbx_json_set(one, "time_ns", sbx_json_obj(proto_map_get(ev, "time_ns")));
        sbx_json_set(one, "type", sbx_json_obj(proto_map_get(ev, "type")));
        sbx_json_set(one, "fields", sbx_json_obj(proto_map_get(ev, "fields")));
        sbx_json_append(list, one);
    }
    sbx_json_set(doc, "events", list);
    sbx_json_print(stdout, doc);
}

/* argv joined by spaces, sanitized and cut to fit buf. */
static const char *sbx_audit_argv(const msgpack_object *req, char *buf, size_t size)
{
    const msgpack_object *av = req ? proto_map_get(req, "argv") : NULL;
    size_t off = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; av && av->type == MSGPACK_OBJECT_ARRAY && i < av->via.array.size; i++) {
        char one[SBX_TEXT_MAX];
        sbx_text(&av->via.array.ptr[i], one, sizeof(one));
        int n = snprintf(buf + off, size - off, "%s%s", i ? " " : "", one);
        if (n < 0 || (size_t)n >= size - off) {
            break;
        }
        off += (size_t)n;
    }
    return buf;
}

static void sbx_audit_row(const msgpack_object *task, const msgpack_object *events, bool detail)
{
    const msgpack_object *req = sbx_audit_fields(events, "task.request");
    const msgpack_object *res = sbx_audit_fields(events, "task.result");
    bool session = !req && sbx_audit_fields(events, "session.open");
    const msgpack_object *fin = sbx_audit_fields(events, "task.finished");
    const msgpack_object *first =
        events && events->via.array.size ? &events->via.array.ptr[0] : NULL;
    char tbuf[48], id[64], pool[64], status[64], code[32], argv[160];
    const msgpack_object *ec = res ? proto_map_get(res, "exit_code") : NULL;
    if (ec && (ec->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
               ec->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
        (void)snprintf(code, sizeof(code), "%" PRId64, sbx_obj_i64(ec));
    } else {
        (void)snprintf(code, sizeof(code), "-");
    }
    sbx_text(sbx_audit_status(events), status, sizeof(status));
    sbx_text(sbx_audit_pool(events), pool, sizeof(pool));
    (void)printf("%-24s %-16s %-12s %-13s %5s %8" PRId64 " %2u  %s\n",
                 sbx_audit_time(sbx_obj_i64(first ? proto_map_get(first, "time_ns") : NULL), tbuf,
                                sizeof(tbuf)),
                 sbx_text(task, id, sizeof(id)), pool[0] ? pool : "-",
                 status[0] ? status : "(open)", code,
                 sbx_obj_i64(fin ? proto_map_get(fin, "wall_ms") : NULL),
                 events ? events->via.array.size : 0,
                 session ? "(session)" : sbx_audit_argv(req, argv, sizeof(argv)));
    for (uint32_t i = 0; detail && events && i < events->via.array.size; i++) {
        const msgpack_object *ev = &events->via.array.ptr[i];
        char type[40];
        (void)printf("    %8" PRId64 "  %s  %-18s ", sbx_obj_i64(proto_map_get(ev, "seq")),
                     sbx_audit_time(sbx_obj_i64(proto_map_get(ev, "time_ns")), tbuf, sizeof(tbuf)),
                     sbx_text(proto_map_get(ev, "type"), type, sizeof(type)));
        sbx_json_print_obj(stdout, proto_map_get(ev, "fields"));
    }
}

static int sbx_audit_verify(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("audit");
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else {
            return sbx_usage_error(cmd, "audit verify: unexpected argument '%s'", argv[i]);
        }
    }
    int status = sbx_rpc_request(ctx, &c, "audit.verify", NULL, NULL, json, &m);
    if (status != 0) {
        return status;
    }
    bool ok = false;
    char msg[SBX_TEXT_MAX], hash[80];
    uint64_t rows = 0, head = 0;
    (void)proto_get_bool(m.result, "ok", &ok, NULL);
    (void)proto_get_u64(m.result, "rows", &rows, NULL);
    (void)proto_get_u64(m.result, "head_seq", &head, NULL);
    if (json) {
        sbx_json_print_obj(stdout, m.result);
    } else if (ok) {
        (void)printf("ok: %" PRIu64 " rows verified, chain head seq %" PRIu64 " hash %s\n", rows,
                     head, sbx_text(proto_map_get(m.result, "head_hash"), hash, sizeof(hash)));
    } else {
        uint64_t bad = 0;
        char problem[32];
        (void)proto_get_u64(m.result, "bad_seq", &bad, NULL);
        (void)printf("FAILED: row seq %" PRIu64 " %s: %s\n", bad,
                     sbx_text(proto_map_get(m.result, "problem"), problem, sizeof(problem)),
                     sbx_text(proto_map_get(m.result, "message"), msg, sizeof(msg)));
    }
    return ok ? 0 : 1;
}

int sbx_audit_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    struct sbx_audit_opts o = {0};
    if (argc > 1 && strcmp(argv[1], "verify") == 0) {
        return sbx_audit_verify(ctx, argc - 1, argv + 1);
    }
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return 0;
        }
        if (strcmp(argv[i], "--json") == 0) {
            o.json = true;
        } else if ((r = parse_long_opt(argc, argv, &i, "--task", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --task needs a task id");
            }
            o.task = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--session", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --session needs a session id");
            }
            o.session = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --pool needs a pool name");
            }
            o.pool = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--status", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "audit: --status needs a status");
            }
            o.status = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--since", &v)) != 0) {
            if (r < 0 || sbx_audit_duration(v, &o.since_ns) < 0) {
                return sbx_usage_error(cmd, "audit: --since needs a duration (30s, 15m, 2h, 7d)");
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--limit", &v)) != 0) {
            if (r < 0 || parse_u64(v, &o.limit) < 0 || o.limit == 0 || o.limit > 1000) {
                return sbx_usage_error(cmd, "audit: --limit needs a number from 1 to 1000");
            }
        } else {
            return sbx_usage_error(cmd, "audit: unknown argument '%s'", argv[i]);
        }
    }
    int status = sbx_rpc_request(ctx, &c, "audit.query", sbx_audit_pack_args, &o, o.json, &m);
    if (status != 0) {
        return status;
    }
    const msgpack_object *chains = proto_map_get(m.result, "chains");
    bool more = false;
    (void)proto_get_bool(m.result, "more", &more, NULL);
    if (!chains || chains->type != MSGPACK_OBJECT_ARRAY) {
        return sbx_fail(o.json, SBX_ERR_PROTOCOL, "malformed audit.query result from sbxd");
    }
    if (!o.json) {
        (void)printf("%-24s %-16s %-12s %-13s %5s %8s %2s  %s\n", "TIME", "TASK", "POOL", "STATUS",
                     "EXIT", "WALL_MS", "EV", "ARGV");
    }
    for (uint32_t i = 0; i < chains->via.array.size; i++) {
        const msgpack_object *ch = &chains->via.array.ptr[i];
        const msgpack_object *events = proto_map_get(ch, "events");
        if (events && events->type != MSGPACK_OBJECT_ARRAY) {
            events = NULL;
        }
        if (o.json) {
            sbx_audit_json(proto_map_get(ch, "task"), events);
        } else {
            sbx_audit_row(proto_map_get(ch, "task"), events, o.task != NULL || o.session != NULL);
        }
    }
    if (more) {
        sbx_errorf("more chains match: narrow with --since, --pool, --status or raise --limit");
    }
    if ((o.task || o.session) && chains->via.array.size == 0) {
        sbx_errorf("no audit events for %s '%s'", o.task ? "task" : "session",
                   o.task ? o.task : o.session);
        return 1;
    }
    return 0;
}
