/* SPDX-License-Identifier: MIT */
/* Builds the audit events of a task's chain from the request, the task and its outcome.
 * Client strings (argv, env names, cwd, reasons quoting them) go through the scrubber in
 * audit.c; env values and task output are never read here. */
#include "core/task_audit.h"

#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "config/config.h"
#include "core/task.h"
#include "core/task_impl.h"
#include "core/pool.h"
#include "wire/proto.h"
#include "sandbox/sandbox.h"
#include "lib/scrub.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"

/* Bytes of one argument looked at: the rest is cut (audit.c cuts to AUDIT_VALUE_MAX). */
#define ARG_SCAN_MAX (4 * AUDIT_VALUE_MAX)

static bool is_sep(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == ',' ||
           c == ';' || c == '&' || c == '(' || c == ')' || c == '{' || c == '}' || c == '[' ||
           c == ']' || c == '<' || c == '>' || c == '|';
}

/* An argument for the trail. A long one is cut before scrubbing; the word the cut fell
 * in is dropped whole, so a secret split by the cut cannot survive half-recognised. */
static void arg_item(struct audit_ev *ev, const char *s, size_t len)
{
    if (len <= ARG_SCAN_MAX) {
        audit_array_str(ev, s, len);
        return;
    }
    size_t n = ARG_SCAN_MAX;
    while (n > 0 && !is_sep((unsigned char)s[n - 1])) {
        n--;
    }
    char buf[ARG_SCAN_MAX + 16];
    memcpy(buf, s, n);
    memcpy(buf + n, "[...]", 5);
    audit_array_str(ev, buf, n + 5);
}

/* Who sent it: the socket, the connection and its peer. */
static void peer_fields(struct audit_ev *ev, const struct task_audit_peer *peer)
{
    audit_id(ev, "socket", peer->admin ? "admin" : "agents");
    audit_u64(ev, "conn", peer->conn_id);
    audit_u64(ev, "peer_uid", peer->uid);
    audit_i64(ev, "peer_pid", peer->pid);
    audit_u64(ev, "peer_gid", peer->gid);
}

void task_audit_refused(struct task_env *tenv, const struct task_audit_peer *peer, const char *code,
                        const char *method, size_t method_len, const char *reason)
{
    struct audit_ev *ev = audit_begin(tenv->audit, "rpc.refused", NULL);
    if (!ev) {
        return;
    }
    audit_mark_refusal(ev);
    peer_fields(ev, peer);
    audit_id(ev, "code", code);
    if (method) {
        audit_strn(ev, "method", method, method_len < 64 ? method_len : 64);
    }
    audit_str(ev, "reason", reason);
    audit_end(ev);
}

/* argv with its redaction rule: an argument after an option that takes a secret (such as
 * --token) is redacted whole, unless it only refers to one ($TOKEN, a file path). */
static void argv_begin(struct audit_ev *ev, uint64_t argc)
{
    audit_u64(ev, "argc", argc);
    audit_array_begin(ev, "argv");
}

static void argv_item(struct audit_ev *ev, const char *s, size_t len, bool *secret_next)
{
    if (*secret_next && scrub_arg_value_is_secret(s, len)) {
        audit_array_id(ev, "[REDACTED]");
    } else {
        arg_item(ev, s, len);
    }
    *secret_next = scrub_arg_takes_secret(s, len);
}

/* The timeout asked for (secs), in ms. */
static void timeout_field(struct audit_ev *ev, double secs)
{
    if (secs > 0 && secs < 1e9) {
        audit_u64(ev, "timeout_ms", (uint64_t)(secs * 1000.0));
    }
}

/* A task.request event begun with who asked (marked as a refused request's when refusal),
 * or NULL when the trail takes no event. */
static struct audit_ev *request_begin(struct task_env *tenv, const char *task_id,
                                      const struct task_audit_peer *peer, bool refusal)
{
    struct audit_ev *ev = audit_begin(tenv->audit, "task.request", task_id);
    if (ev) {
        if (refusal) {
            audit_mark_refusal(ev);
        }
        peer_fields(ev, peer);
    }
    return ev;
}

/* exec's files (paths, modes, sizes: never their data) and collect's patterns. The arrays
 * are parallel; the totals stay exact when the event's bound cuts the arrays. */
static void files_fields(struct audit_ev *ev, const struct task_spec *spec)
{
    if (spec->n_files > 0) {
        audit_u64(ev, "files_count", spec->n_files);
        audit_u64(ev, "files_bytes", spec->files_bytes);
        audit_u64(ev, "files_streamed", spec->files_streamed);
        audit_array_begin(ev, "files");
        for (uint32_t i = 0; i < spec->n_files; i++) {
            audit_array_str(ev, spec->files[i].path, strlen(spec->files[i].path));
        }
        audit_array_end(ev);
        char num[32];
        audit_array_begin(ev, "file_modes");
        for (uint32_t i = 0; i < spec->n_files; i++) {
            (void)snprintf(num, sizeof(num), "%04o", spec->files[i].mode);
            audit_array_id(ev, num);
        }
        audit_array_end(ev);
        audit_array_begin(ev, "file_sizes");
        for (uint32_t i = 0; i < spec->n_files; i++) {
            (void)snprintf(num, sizeof(num), "%llu", (unsigned long long)spec->files[i].size);
            audit_array_id(ev, num);
        }
        audit_array_end(ev);
    }
    if (spec->has_collect) {
        audit_array_begin(ev, "collect");
        for (uint32_t i = 0; i < spec->n_collect; i++) {
            audit_array_str(ev, spec->collect[i], strlen(spec->collect[i]));
        }
        audit_array_end(ev);
    }
}

/* The raw request's files and collect, whatever their types: paths and sizes as given. */
static void files_raw(struct audit_ev *ev, const msgpack_object *args)
{
    const msgpack_object *fo = proto_map_get(args, "files");
    if (fo && fo->type == MSGPACK_OBJECT_ARRAY) {
        audit_u64(ev, "files_count", fo->via.array.size);
        audit_array_begin(ev, "files");
        for (uint32_t i = 0; i < fo->via.array.size; i++) {
            const msgpack_object *f = &fo->via.array.ptr[i];
            const msgpack_object *po =
                f->type == MSGPACK_OBJECT_MAP ? proto_map_get(f, "path") : NULL;
            if (po && po->type == MSGPACK_OBJECT_STR) {
                audit_array_str(ev, po->via.str.ptr, po->via.str.size);
            } else {
                audit_array_str(ev, NULL, 0);
            }
        }
        audit_array_end(ev);
    }
    const msgpack_object *co = proto_map_get(args, "collect");
    if (co && co->type == MSGPACK_OBJECT_ARRAY) {
        audit_array_begin(ev, "collect");
        for (uint32_t i = 0; i < co->via.array.size; i++) {
            const msgpack_object *o = &co->via.array.ptr[i];
            if (o->type == MSGPACK_OBJECT_STR) {
                audit_array_str(ev, o->via.str.ptr, o->via.str.size);
            } else {
                audit_array_str(ev, NULL, 0);
            }
        }
        audit_array_end(ev);
    }
}

static void request_spec(struct task_env *tenv, const char *task_id,
                         const struct task_audit_peer *peer, const struct task_spec *spec,
                         const char *session, bool refusal)
{
    struct audit_ev *ev = request_begin(tenv, task_id, peer, refusal);
    if (!ev) {
        return;
    }
    if (session) {
        audit_id(ev, "session", session);
    }
    audit_id(ev, "token_id", spec->token_id);
    /* A name the client sent is a client string (scrubbed), the default is sbxd's. */
    if (spec->has_pool) {
        audit_str(ev, "pool", spec->pool->name);
    } else {
        audit_id(ev, "pool", spec->pool->name);
    }
    struct task_spec_iter it;
    const char *str;
    size_t len;
    argv_begin(ev, spec->argc);
    bool secret_next = false;
    task_spec_argv(spec, &it);
    while (task_spec_next(&it, &str, &len)) {
        argv_item(ev, str, len, &secret_next);
    }
    audit_array_end(ev);
    if (spec->has_env) {
        /* Names only: values may be secrets and are never stored. */
        audit_array_begin(ev, "env");
        task_spec_request_env(spec, &it);
        while (task_spec_next(&it, &str, &len)) {
            const char *eq = memchr(str, '=', len);
            audit_array_str(ev, str, eq ? (size_t)(eq - str) : len);
        }
        audit_array_end(ev);
    }
    if (spec->has_cwd) {
        audit_str(ev, "cwd", spec->cwd);
    }
    timeout_field(ev, spec->timeout_s);
    if (spec->has_stdin) {
        audit_bool(ev, "stdin", spec->stdin);
    }
    if (spec->capture) { /* where the output went: the result, not notifications */
        audit_bool(ev, "capture", true);
    }
    files_fields(ev, spec);
    audit_end(ev);
}

void task_audit_request(struct task_env *tenv, const char *task_id,
                        const struct task_audit_peer *peer, const struct task_spec *spec)
{
    request_spec(tenv, task_id, peer, spec, NULL, false);
}

void task_audit_request_session(struct task_env *tenv, const char *task_id,
                                const struct task_audit_peer *peer, const struct task_spec *spec,
                                const char *session)
{
    request_spec(tenv, task_id, peer, spec, session, false);
}

static void request_raw(struct task_env *tenv, const char *task_id,
                        const struct task_audit_peer *peer, const msgpack_object *args,
                        bool refusal)
{
    struct audit_ev *ev = request_begin(tenv, task_id, peer, refusal);
    if (!ev) {
        return;
    }
    audit_id(ev, "token_id", NULL);
    if (!args || args->type != MSGPACK_OBJECT_MAP) {
        audit_bool(ev, "malformed", true);
        audit_end(ev);
        return;
    }
    const msgpack_object *sess = proto_map_get(args, "session");
    if (sess && sess->type == MSGPACK_OBJECT_STR) {
        audit_strn(ev, "session", sess->via.str.ptr, sess->via.str.size);
    }
    const msgpack_object *po = proto_map_get(args, "pool");
    if (po && po->type == MSGPACK_OBJECT_STR) {
        audit_strn(ev, "pool", po->via.str.ptr, po->via.str.size);
    } else {
        audit_id(ev, "pool", tenv->cfg->default_pool);
    }
    const msgpack_object *av = proto_map_get(args, "argv");
    if (av && av->type == MSGPACK_OBJECT_ARRAY) {
        argv_begin(ev, av->via.array.size);
        bool secret_next = false;
        for (uint32_t i = 0; i < av->via.array.size; i++) {
            const char *arg;
            uint32_t len;
            if (!proto_obj_bytes(&av->via.array.ptr[i], &arg, &len)) {
                audit_array_str(ev, NULL, 0);
                secret_next = false;
                continue;
            }
            argv_item(ev, arg, len, &secret_next);
        }
        audit_array_end(ev);
    }
    const msgpack_object *env = proto_map_get(args, "env");
    if (env && env->type == MSGPACK_OBJECT_MAP) {
        /* Names only: values may be secrets and are never stored. */
        audit_array_begin(ev, "env");
        for (uint32_t i = 0; i < env->via.map.size; i++) {
            const msgpack_object *k = &env->via.map.ptr[i].key;
            if (k->type == MSGPACK_OBJECT_STR) {
                audit_array_str(ev, k->via.str.ptr, k->via.str.size);
            } else {
                audit_array_str(ev, NULL, 0);
            }
        }
        audit_array_end(ev);
    }
    const msgpack_object *co = proto_map_get(args, "cwd");
    if (co && co->type == MSGPACK_OBJECT_STR) {
        audit_strn(ev, "cwd", co->via.str.ptr, co->via.str.size);
    }
    const msgpack_object *to = proto_map_get(args, "timeout");
    if (to && (to->type == MSGPACK_OBJECT_POSITIVE_INTEGER || to->type == MSGPACK_OBJECT_FLOAT32 ||
               to->type == MSGPACK_OBJECT_FLOAT64)) {
        timeout_field(ev, to->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)to->via.u64
                                                                      : to->via.f64);
    }
    const msgpack_object *so = proto_map_get(args, "stdin");
    if (so && so->type == MSGPACK_OBJECT_BOOLEAN) {
        audit_bool(ev, "stdin", so->via.boolean);
    }
    files_raw(ev, args);
    audit_end(ev);
}

static void decision(struct task_env *tenv, const char *task_id, bool allowed, const char *code,
                     const char *reason, bool refusal)
{
    struct audit_ev *ev = audit_begin(tenv->audit, "policy.decision", task_id);
    if (refusal) {
        audit_mark_refusal(ev);
    }
    audit_bool(ev, "allowed", allowed);
    if (allowed) {
        audit_str(ev, "reason", reason ? reason : "valid request");
    } else {
        audit_id(ev, "code", code);
        audit_str(ev, "reason", reason);
    }
    audit_end(ev);
}

void task_audit_decision(struct task_env *tenv, const char *task_id, bool allowed, const char *code,
                         const char *reason)
{
    decision(tenv, task_id, allowed, code, reason, false);
}

static void denied(struct task_env *tenv, const char *task_id, const char *code, const char *reason,
                   bool refusal)
{
    decision(tenv, task_id, false, code, reason, refusal);
    struct audit_ev *ev = audit_begin(tenv->audit, "task.result", task_id);
    if (refusal) {
        audit_mark_refusal(ev);
    }
    audit_id(ev, "status", "denied");
    audit_id(ev, "code", code);
    audit_str(ev, "error", reason);
    audit_bool(ev, "delivered", true);
    audit_end(ev);
}

void task_audit_refused_exec(struct task_env *tenv, const char *task_id,
                             const struct task_audit_peer *peer, const struct task_spec *spec,
                             const msgpack_object *args, const char *code, const char *reason)
{
    if (spec) {
        request_spec(tenv, task_id, peer, spec, NULL, true);
    } else {
        request_raw(tenv, task_id, peer, args, true);
    }
    denied(tenv, task_id, code, reason, true);
}

void task_audit_assigned(const struct task *t)
{
    struct audit_ev *ev = audit_begin(t->env->audit, "sandbox.assigned", t->id);
    audit_id(ev, "sandbox", t->sb_id);
    if (t->sb) {
        audit_id(ev, "cgroup", t->sb->cg_name);
    }
    audit_id(ev, "pool", t->pool->pc->name);
    audit_bool(ev, "warm", !t->wait.cold);
    audit_u64(ev, "queued_ms",
              t->t_start_ns > t->t_request_ns ? (t->t_start_ns - t->t_request_ns) / 1000000 : 0);
    audit_end(ev);
}

void task_audit_started(const struct task *t, uint32_t pid)
{
    struct audit_ev *ev = audit_begin(t->env->audit, "task.started", t->id);
    audit_id(ev, "sandbox", t->sb_id);
    audit_u64(ev, "pid", pid);
    audit_end(ev);
}

static const char *kill_name(enum task_kill_reason k)
{
    switch (k) {
    case KILL_TIMEOUT:
        return "timeout";
    case KILL_OUTPUT:
        return "output_limit";
    case KILL_CLIENT:
        return "client_gone";
    case KILL_SHUTDOWN:
        return "shutdown";
    case KILL_TOKEN_EXPIRED:
        return "token_expired";
    case KILL_TOKEN_REVOKED:
        return "token_revoked";
    case KILL_SESSION_CLOSED:
        return "session_closed";
    case KILL_FILES:
        return "files";
    case KILL_NONE:
        break;
    }
    return NULL;
}

static void outcome_fields(struct audit_ev *ev, const struct task_outcome *o)
{
    if (o->has_exit_code) {
        audit_i64(ev, "exit_code", o->exit_code);
    } else {
        audit_null(ev, "exit_code");
    }
    if (o->has_signal) {
        audit_i64(ev, "signal", o->signal);
    } else {
        audit_null(ev, "signal");
    }
}

void task_audit_finished(const struct task *t, const struct task_outcome *o)
{
    struct audit_ev *ev = audit_begin(t->env->audit, "task.finished", t->id);
    audit_id(ev, "status", o->status);
    outcome_fields(ev, o);
    audit_u64(ev, "wall_ms", o->wall_ms);
    audit_u64(ev, "cpu_ms", o->cpu_ms);
    audit_u64(ev, "mem_peak_bytes", o->mem_peak_bytes);
    audit_u64(ev, "stdout_bytes", t->out_bytes);
    audit_u64(ev, "stderr_bytes", t->err_bytes);
    audit_bool(ev, "truncated", t->cap.tripped);
    if (t->seccomp_denials == CTL_DENIALS_UNKNOWN) {
        audit_null(ev, "seccomp_denials");
    } else {
        audit_u64(ev, "seccomp_denials", t->seccomp_denials);
    }
    audit_bool(ev, "oom", t->have_usage && t->usage.oom);
    audit_id(ev, "killed_for", kill_name(t->kill));
    if (o->error) {
        audit_str(ev, "error", o->error);
    }
    audit_end(ev);
}

void task_audit_destroyed(const struct task *t, bool already_reaped)
{
    struct audit_ev *ev = audit_begin(t->env->audit, "sandbox.destroyed", t->id);
    audit_id(ev, "sandbox", t->sb_id);
    audit_id(ev, "how", already_reaped ? "exited" : "killed");
    audit_end(ev);
}

uint64_t task_audit_result(const struct task *t, const char *status, const char *code,
                           const char *message, const struct task_outcome *o)
{
    struct audit_ev *ev = audit_begin(t->env->audit, "task.result", t->id);
    audit_id(ev, "status", status);
    audit_id(ev, "pool", t->pool->pc->name);
    if (o) {
        outcome_fields(ev, o);
        audit_u64(ev, "wall_ms", o->wall_ms);
    }
    if (code) {
        audit_id(ev, "code", code);
    }
    if (message) {
        audit_str(ev, "error", message);
    }
    if (o) {
        audit_u64(ev, "files_in_bytes", t->files_in_bytes);
        audit_u64(ev, "files_out_bytes", t->files_out_bytes);
    }
    if (o && t->spec.has_collect) {
        /* What the client was sent of /work: the paths and their bytes, never the data. */
        const struct workspace_collect *c = &t->collect;
        audit_u64(ev, "collected_count", c->n_files);
        audit_bool(ev, "collect_truncated", c->truncated || t->collect_failed);
        audit_array_begin(ev, "collected");
        for (size_t i = 0; i < c->n_files; i++) {
            audit_array_str(ev, c->files[i].path, strlen(c->files[i].path));
        }
        audit_array_end(ev);
        audit_u64(ev, "skipped_count", c->n_skipped);
    }
    audit_bool(ev, "delivered", t->sink.ops != NULL);
    return audit_end(ev);
}
