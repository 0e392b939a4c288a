/* SPDX-License-Identifier: MIT */
/* The egress proxy's profiles and sessions: the profiles' runtime form, the route
 * credentials (read once at start-up from files only sbxd can read, wiped at exit), one
 * session per task serving the listener its sandbox's init made, and every denial's log,
 * audit event and count. A credential is never written anywhere but into an upstream. */
#define LOG_MOD "egress"
#include "egress/egress.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "lib/alloc.h"
#include "audit/audit.h"
#include "audit/audit_limit.h"
#include "config/config.h"
#include "egress/egress_impl.h"
#include "lib/log.h"
#include "metrics/metrics.h"
#include "wire/proto.h"
#include "lib/scrub.h"
#include "lib/util.h"

#define EGRESS_CRED_MIN 8

static void wipe_free(char *p, size_t n)
{
    if (p) {
        explicit_bzero(p, n);
        free(p);
    }
}

/* Reads one route credential. SECURITY: only a file that nobody but sbxd's user can read
 * or replace is accepted; its one line becomes the header value. */
static int credential_load(const char *path, char **ret, size_t *ret_len, struct err *e)
{
    scoped_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    struct stat st;
    if (fd < 0) {
        return err_set(e, -errno, "credential file '%s'", path);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "credential file '%s'", path);
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, -EINVAL, "credential file '%s' is not a regular file", path);
    }
    if (st.st_uid != geteuid()) {
        return err_setx(e, -EPERM,
                        "credential file '%s' is owned by uid %u, not by sbxd's "
                        "uid %u",
                        path, (unsigned)st.st_uid, (unsigned)geteuid());
    }
    if (st.st_mode & 077) {
        return err_setx(e, -EPERM,
                        "credential file '%s' has mode %04o: it must be readable by "
                        "sbxd only (chmod 600)",
                        path, (unsigned)(st.st_mode & 07777));
    }
    if (st.st_size > EGRESS_SECRET_MAX + 2) {
        return err_setx(e, -EFBIG, "credential file '%s' is larger than %d bytes", path,
                        EGRESS_SECRET_MAX);
    }
    char *buf = xmalloc(EGRESS_SECRET_MAX + 3);
    size_t n = 0;
    for (;;) {
        ssize_t k = RETRY_EINTR(read(fd, buf + n, EGRESS_SECRET_MAX + 3 - n));
        if (k < 0) {
            int r = -errno;
            wipe_free(buf, EGRESS_SECRET_MAX + 3);
            return err_set(e, r, "credential file '%s'", path);
        }
        if (k == 0) {
            break;
        }
        n += (size_t)k;
        if (n == EGRESS_SECRET_MAX + 3) {
            wipe_free(buf, EGRESS_SECRET_MAX + 3);
            return err_setx(e, -EFBIG, "credential file '%s' is larger than %d bytes", path,
                            EGRESS_SECRET_MAX);
        }
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) {
        n--;
    }
    bool ok = n >= EGRESS_CRED_MIN && n <= EGRESS_SECRET_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        ok = c >= 0x20 && c != 0x7f;
    }
    if (!ok) {
        wipe_free(buf, EGRESS_SECRET_MAX + 3);
        return err_setx(e, -EINVAL,
                        "credential file '%s' must hold one line of %d to %d "
                        "printable bytes (the header value)",
                        path, EGRESS_CRED_MIN, EGRESS_SECRET_MAX);
    }
    char *cred = xstrndup(buf, n);
    wipe_free(buf, EGRESS_SECRET_MAX + 3);
    *ret = cred;
    *ret_len = n;
    return 0;
}

static int route_build(const struct egress_route_config *rc, struct scrub *scrub,
                       struct eroute *ret, struct err *e)
{
    const char *auth = rc->upstream + 7; /* config.c checked "http://" */
    size_t alen = strcspn(auth, "/");
    struct eroute r;
    memset(&r, 0, sizeof(r));
    r.rc = rc;
    if (strncasecmp(rc->upstream, "http://", 7) != 0 ||
        egress_parse_authority(auth, alen, 80, &r.up) < 0) {
        return err_setx(e, -EINVAL, "route '%s': bad upstream '%s'", rc->name, rc->upstream);
    }
    const char *base = auth + alen;
    size_t blen = strlen(base);
    while (blen > 0 && base[blen - 1] == '/') {
        blen--;
    }
    if (blen > 0 && !egress_path_safe(base, blen)) {
        return err_setx(e, -EINVAL, "route '%s': bad upstream base path", rc->name);
    }
    if (rc->credential_file) {
        int rr = credential_load(rc->credential_file, &r.cred, &r.cred_len, e);
        if (rr < 0) {
            return err_prefix(e, rr, "route '%s'", rc->name);
        }
        if (scrub) {
            (void)scrub_register(scrub, r.cred, r.cred_len);
            const char *sp = memchr(r.cred, ' ', r.cred_len);
            size_t tl = sp ? r.cred_len - (size_t)(sp - r.cred) - 1 : 0;
            if (sp && tl >= SCRUB_MIN_SECRET) {
                (void)scrub_register(scrub, sp + 1, tl);
            }
        }
    }
    r.base = xstrndup(base, blen);
    *ret = r;
    return 0;
}

int egress_new(const struct config *cfg, const struct egress_handles *h, struct egress **ret,
               struct err *e)
{
    struct egress *g = xcalloc(1, sizeof(*g));
    if (h) {
        g->h = *h;
    }
    g->port = (uint16_t)cfg->egress_port;
    g->denials_per_task = cfg->audit_denials_per_task;
    g->profiles = xcalloc(cfg->n_egress_profiles + 1, sizeof(*g->profiles));
    for (size_t i = 0; i < cfg->n_egress_profiles; i++) {
        const struct egress_profile_config *pc = &cfg->egress_profiles[i];
        struct eprofile *p = &g->profiles[i];
        p->pc = pc;
        g->n++;
        p->allow = xcalloc(pc->n_allow + 1, sizeof(*p->allow));
        p->cidrs = xcalloc(pc->n_allow_addresses + 1, sizeof(*p->cidrs));
        p->routes = xcalloc(pc->n_routes + 1, sizeof(*p->routes));
        int r = 0;
        for (size_t j = 0; j < pc->n_allow && r == 0; j++) {
            if (egress_parse_allow(pc->allow[j], &p->allow[j]) < 0) {
                r = err_setx(e, -EINVAL, "allow '%s' is not host:port", pc->allow[j]);
            }
        }
        for (size_t j = 0; j < pc->n_allow_addresses && r == 0; j++) {
            if (netaddr_cidr_parse(pc->allow_addresses[j], &p->cidrs[j]) < 0) {
                r = err_setx(e, -EINVAL, "allow_addresses '%s' is not an address range",
                             pc->allow_addresses[j]);
            }
        }
        for (size_t j = 0; j < pc->n_routes && r == 0; j++) {
            r = route_build(&pc->routes[j], g->h.scrub, &p->routes[j], e);
        }
        if (r < 0) {
            egress_free(g);
            return err_prefix(e, r, "egress profile '%s'", pc->name);
        }
    }
    *ret = g;
    return 0;
}

struct egress *egress_free(struct egress *g)
{
    if (!g) {
        return NULL;
    }
    for (size_t i = 0; i < g->n; i++) {
        struct eprofile *p = &g->profiles[i];
        for (size_t j = 0; j < p->pc->n_routes; j++) {
            wipe_free(p->routes[j].cred, p->routes[j].cred_len + 1);
            free(p->routes[j].base);
        }
        free(p->routes);
        free(p->allow);
        free(p->cidrs);
    }
    free(g->profiles);
    free(g);
    return NULL;
}

static const struct eprofile *profile_find(const struct egress *g, const char *name)
{
    for (size_t i = 0; g && i < g->n; i++) {
        if (strcmp(g->profiles[i].pc->name, name) == 0) {
            return &g->profiles[i];
        }
    }
    return NULL;
}

/* A request the profile refused or a limit cut: counted; logged and audited within the
 * task's budget, else counted in its summary. The reason is a one-line phrase built only
 * from validated names (never request bytes as sent). */
void egress_note_denial(struct econn *c, const char *outcome, const char *reason)
{
    struct egress_session *s = c->s;
    char q1[160], q2[80];
    c->outcome = outcome;
    if (s->st.denials < UINT32_MAX) {
        s->st.denials++;
    }
    bool flag_now = !s->st.flagged && s->st.denials >= EGRESS_FLAG_DENIALS;
    if (flag_now) {
        s->st.flagged = true;
        log_warn("task=%s profile=%s denials=%u msg=\"task keeps trying egress outside its "
                 "profile, flagged\"",
                 s->task_id, econn_profile(c), s->st.denials);
    }
    /* SECURITY: a task can be denied as fast as it can connect; beyond its budget its
     * denials are only counted (proxy.denied.summary, sbx_audit_suppressed_total), so that
     * it can neither flood the log nor push other tasks' records out of the trail. */
    if (!audit_limit_take(s->denied, s->g->denials_per_task)) {
        audit_limit_count(s->denied, outcome);
        metrics_audit_suppressed(s->g->h.metrics, "egress");
        return;
    }
    log_info("task=%s profile=%s dest=%s msg=\"egress %s\" reason=%s", s->task_id, econn_profile(c),
             log_quote(c->dest_desc[0] ? c->dest_desc : "-", q2, sizeof(q2)), outcome,
             log_quote(reason, q1, sizeof(q1)));
    audit_event(s->g->h.audit, "proxy.denied", s->task_id, "profile", AUDIT_ID, econn_profile(c),
                "outcome", AUDIT_ID, outcome, "method", AUDIT_STR, c->method[0] ? c->method : NULL,
                "destination", AUDIT_STR, c->dest_desc[0] ? c->dest_desc : NULL, "reason",
                AUDIT_STR, reason, "denials", AUDIT_U64, (uint64_t)s->st.denials, "flagged",
                AUDIT_BOOL, (int)s->st.flagged, NULL);
}

/* A proxy.denied.summary names the task's profile, and its denials and flag so far. */
static void denied_fill(void *arg, struct audit_ev *ev)
{
    struct egress_session *s = arg;
    audit_id(ev, "profile", s->p->pc->name);
    audit_u64(ev, "denials", s->st.denials);
    audit_bool(ev, "flagged", s->st.flagged);
}

void egress_session_unref(struct egress_session *s)
{
    if (--s->refs == 0) {
        audit_limit_free(s->denied);
        free(s);
    }
}

static void listener_closed(uv_handle_t *h)
{
    struct egress_session *s = h->data;
    egress_session_unref(s);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct egress_session *s = server->data;
    if (status < 0 || s->stopping) {
        return;
    }
    egress_conn_accept(s, server);
}

/* SECURITY: the fd came from the sandbox's init; serve it only if it is what init must
 * have made: a listening IPv4 TCP socket. */
static int listener_check(int fd, struct err *e)
{
    int v = 0;
    socklen_t l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_INET) {
        return err_setx(e, -EPROTO, "the sandbox's proxy socket is not an IPv4 socket");
    }
    l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_STREAM) {
        return err_setx(e, -EPROTO, "the sandbox's proxy socket is not a stream socket");
    }
    l = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || v != 1) {
        return err_setx(e, -EPROTO, "the sandbox's proxy socket is not listening");
    }
    return 0;
}

int egress_session_start(struct egress *g, const char *profile, int proxy_fd, const char *task_id,
                         const char *sandbox_id, struct egress_session **ret, struct err *e)
{
    scoped_close int fd = proxy_fd;
    if (!profile || strcmp(profile, "none") == 0) {
        *ret = NULL;
        return 0; /* the listener closes here: nothing listens in the sandbox */
    }
    const struct eprofile *p = profile_find(g, profile);
    char q[64];
    if (!p) {
        return err_setx(e, -ENOENT, "network profile %s is not configured",
                        log_quote(profile, q, sizeof(q)));
    }
    if (fd < 0) {
        return err_setx(e, -ENOTCONN, "sandbox %s has no egress proxy listener", sandbox_id);
    }
    int r = listener_check(fd, e);
    if (r < 0) {
        return r;
    }
    struct egress_session *s = xcalloc(1, sizeof(*s));
    s->g = g;
    s->p = p;
    s->refs = 1;
    s->st.active = true;
    str_copy(s->task_id, task_id, sizeof(s->task_id));
    char label[80];
    (void)snprintf(label, sizeof(label), "profile=%s", p->pc->name);
    s->denied = audit_limit_new(g->h.audit, "proxy.denied.summary", task_id, label, denied_fill, s);
    uv_tcp_init(g->h.loop, &s->listener);
    s->listener.data = s;
    r = uv_tcp_open(&s->listener, fd);
    if (r == 0) {
        fd = -1; /* the handle owns it */
        r = uv_listen((uv_stream_t *)&s->listener, 64, on_connection);
    }
    if (r < 0) {
        s->stopping = true;
        uv_close((uv_handle_t *)&s->listener, listener_closed);
        return err_setx(e, r, "cannot serve the egress proxy: %s", uv_strerror(r));
    }
    log_debug("task=%s sb=%s profile=%s msg=\"egress proxy serving\"", task_id, sandbox_id,
              p->pc->name);
    *ret = s;
    return 0;
}

uint16_t egress_session_env(const struct egress_session *s)
{
    return s->g->port;
}

struct egress_session *egress_session_end(struct egress_session *s, struct egress_stats *ret)
{
    if (!s) {
        return NULL;
    }
    s->stopping = true;
    for (struct econn *c = s->conns; c; c = c->next) {
        egress_conn_close(c);
    }
    /* Before the task's result: its summary is part of its chain. */
    audit_limit_flush(s->denied);
    if (ret) {
        *ret = s->st;
    }
    uv_close((uv_handle_t *)&s->listener, listener_closed);
    return NULL;
}

void egress_pack_result(msgpack_packer *pk, const char *profile, const struct egress_stats *st)
{
    msgpack_pack_str(pk, 6);
    msgpack_pack_str_body(pk, "egress", 6);
    if (!st->active || !profile) {
        msgpack_pack_nil(pk);
        return;
    }
    msgpack_pack_map(pk, 5);
    proto_pack_kv_str(pk, "profile", profile);
    proto_pack_kv_u64(pk, "requests", st->requests);
    proto_pack_kv_u64(pk, "denials", st->denials);
    proto_pack_kv_u64(pk, "bytes", st->bytes);
    proto_pack_kv_bool(pk, "flagged", st->flagged);
}
