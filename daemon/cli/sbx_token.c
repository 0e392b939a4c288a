/* SPDX-License-Identifier: MIT */
/* sbx token: capability tokens on the admin socket. The token string is printed once, by
 * issue; nothing else here ever shows one. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/sbx_json.h"
#include "lib/alloc.h"
#include "lib/util.h"

#define SBX_TOKEN_MOUNTS_MAX 8
#define SBX_TOKEN_POOLS_MAX 16

struct sbx_token_issue {
    char *src[SBX_TOKEN_MOUNTS_MAX]; /* absolute */
    const char *dst[SBX_TOKEN_MOUNTS_MAX];
    size_t n_mounts;
    const char *pools[SBX_TOKEN_POOLS_MAX];
    size_t n_pools;
    const char *net;
    uint64_t ttl_ns; /* 0: the daemon's default */
    bool has_uses;
    uint64_t uses;
};

static void sbx_token_issue_release(struct sbx_token_issue *ti)
{
    for (size_t i = 0; i < ti->n_mounts; i++) {
        free(take_ptr(&ti->src[i]));
    }
}

static void sbx_token_issue_pack(msgpack_packer *pk, const void *arg)
{
    const struct sbx_token_issue *ti = arg;
    uint32_t n = (ti->n_mounts > 0) + (ti->n_pools > 0) + (ti->net != NULL) + (ti->ttl_ns > 0) +
                 ti->has_uses;
    (void)msgpack_pack_map(pk, n);
    if (ti->n_mounts > 0) {
        proto_pack_cstr(pk, "mounts");
        (void)msgpack_pack_array(pk, (uint32_t)ti->n_mounts);
        for (size_t i = 0; i < ti->n_mounts; i++) {
            (void)msgpack_pack_map(pk, 2);
            proto_pack_kv_str(pk, "src", ti->src[i]);
            proto_pack_kv_str(pk, "dst", ti->dst[i]);
        }
    }
    if (ti->n_pools > 0) {
        proto_pack_cstr(pk, "pools");
        (void)msgpack_pack_array(pk, (uint32_t)ti->n_pools);
        for (size_t i = 0; i < ti->n_pools; i++) {
            proto_pack_cstr(pk, ti->pools[i]);
        }
    }
    if (ti->net) {
        proto_pack_kv_str(pk, "net", ti->net);
    }
    if (ti->ttl_ns > 0 && ti->ttl_ns % 1000000000u == 0) {
        proto_pack_kv_u64(pk, "ttl", ti->ttl_ns / 1000000000u);
    } else if (ti->ttl_ns > 0) {
        proto_pack_kv_f64(pk, "ttl", (double)ti->ttl_ns / 1e9);
    }
    if (ti->has_uses) {
        proto_pack_kv_u64(pk, "uses", ti->uses);
    }
}

/* Splits "SRC:DST" at the last ':' followed by '/', making SRC absolute. */
static int sbx_token_mount(const char *spec, char **ret_src, const char **ret_dst)
{
    const char *sep = NULL;
    for (const char *p = strchr(spec, ':'); p; p = strchr(p + 1, ':')) {
        if (p[1] == '/') {
            sep = p;
        }
    }
    if (!sep || sep == spec) {
        return -EINVAL;
    }
    if (spec[0] == '/') {
        *ret_src = xstrndup(spec, (size_t)(sep - spec));
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd))) {
            return -errno;
        }
        *ret_src = xasprintf("%s/%.*s", cwd, (int)(sep - spec), spec);
    }
    *ret_dst = sep + 1;
    return 0;
}

static int sbx_token_issue_parse(int argc, char **argv, struct sbx_token_issue *ti)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("token");
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        int r;
        if ((r = parse_long_opt(argc, argv, &i, "--mount", &v)) != 0) {
            if (r < 0 || ti->n_mounts >= SBX_TOKEN_MOUNTS_MAX ||
                sbx_token_mount(v, &ti->src[ti->n_mounts], &ti->dst[ti->n_mounts]) < 0) {
                return sbx_usage_error(cmd,
                                       "token issue: --mount needs SRC:DST with an absolute "
                                       "DST (at most %d)",
                                       SBX_TOKEN_MOUNTS_MAX);
            }
            ti->n_mounts++;
        } else if ((r = parse_long_opt(argc, argv, &i, "--pool", &v)) != 0) {
            if (r < 0 || v[0] == '\0' || ti->n_pools >= SBX_TOKEN_POOLS_MAX) {
                return sbx_usage_error(cmd, "token issue: --pool needs a pool name (at most %d)",
                                       SBX_TOKEN_POOLS_MAX);
            }
            ti->pools[ti->n_pools++] = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--net", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(cmd, "token issue: --net needs none or a profile name");
            }
            ti->net = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--ttl", &v)) != 0) {
            if (r < 0 || parse_duration_ns(v, &ti->ttl_ns) < 0 || ti->ttl_ns == 0) {
                return sbx_usage_error(cmd,
                                       "token issue: --ttl needs a positive number of seconds");
            }
        } else if ((r = parse_long_opt(argc, argv, &i, "--uses", &v)) != 0) {
            if (r < 0 || parse_u64(v, &ti->uses) < 0 || ti->uses > UINT32_MAX) {
                return sbx_usage_error(cmd, "token issue: --uses needs a whole number");
            }
            ti->has_uses = true;
        } else {
            return sbx_usage_error(cmd, "token issue: unknown option '%s'", argv[i]);
        }
    }
    return 0;
}

/* "2025-01-31T12:00:00Z" from Unix milliseconds. */
static const char *sbx_utc(uint64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        (void)snprintf(buf, size, "?");
    }
    return buf;
}

static int sbx_token_issue(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(sbx_token_issue_release) struct sbx_token_issue ti;
    scoped(proto_msg_done) struct proto_msg m = {0};
    char id[64], when[32];
    uint64_t expires = 0;

    memset(&ti, 0, sizeof(ti));
    int status = sbx_token_issue_parse(argc, argv, &ti);
    if (status != 0) {
        return status;
    }
    status = sbx_rpc_request(ctx, &c, "token.issue", sbx_token_issue_pack, &ti, false, &m);
    if (status != 0) {
        return status;
    }
    const msgpack_object *tok = proto_map_get(m.result, "token");
    const msgpack_object *info = proto_map_get(m.result, "info");
    /* Printed as is only when it looks like a token: no terminal control can pass. */
    bool ok = tok && tok->type == MSGPACK_OBJECT_STR && tok->via.str.size > 4 &&
              tok->via.str.size < 128 && memcmp(tok->via.str.ptr, "sbx_", 4) == 0;
    for (uint32_t i = 0; ok && i < tok->via.str.size; i++) {
        char ch = tok->via.str.ptr[i];
        ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || ch == '-';
    }
    if (!ok) {
        return sbx_fail(false, SBX_ERR_PROTOCOL, "malformed answer to token.issue");
    }
    (void)fwrite(tok->via.str.ptr, 1, tok->via.str.size, stdout);
    (void)fputc('\n', stdout);
    (void)proto_get_u64(info, "expires_at_ms", &expires, NULL);
    sbx_errorf("token %s expires %s", sbx_text(proto_map_get(info, "id"), id, sizeof(id)),
               sbx_utc(expires, when, sizeof(when)));
    return 0;
}

static void sbx_token_revoke_pack(msgpack_packer *pk, const void *arg)
{
    const char *which = arg;
    (void)msgpack_pack_map(pk, 1);
    /* A token string is sent as such (sbxd hashes it); anything else is an id. */
    proto_pack_kv_str(pk, strncmp(which, "sbx_", 4) == 0 ? "token" : "id", which);
}

static int sbx_token_revoke(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    char id[64];
    uint64_t killed = 0;
    if (argc != 3 || argv[2][0] == '\0') {
        return sbx_usage_error(sbx_cmd_find("token"), "token revoke: needs one TOKEN or ID");
    }
    int status =
        sbx_rpc_request(ctx, &c, "token.revoke", sbx_token_revoke_pack, argv[2], false, &m);
    if (status != 0) {
        return status;
    }
    (void)proto_get_u64(m.result, "killed", &killed, NULL);
    (void)printf("revoked %s (%" PRIu64 " running task%s killed)\n",
                 sbx_text(proto_map_get(m.result, "id"), id, sizeof(id)), killed,
                 killed == 1 ? "" : "s");
    return 0;
}

enum {
    SBX_TOK_ID,
    SBX_TOK_STATE,
    SBX_TOK_EXPIRES,
    SBX_TOK_USES,
    SBX_TOK_RUNNING,
    SBX_TOK_NET,
    SBX_TOK_POOLS,
    SBX_TOK_MOUNTS,
    SBX_TOK_NCOLS
};

static const char *const sbx_token_titles[SBX_TOK_NCOLS] = {
    "ID", "STATE", "EXPIRES", "USES", "RUNNING", "NET", "POOLS", "MOUNTS"};

/* Appends sanitized daemon text to buf at *off (cut to fit). */
static void sbx_append(char *buf, size_t size, size_t *off, const msgpack_object *o)
{
    if (*off + 1 < size) {
        (void)sbx_text(o, buf + *off, size - *off);
        *off += strlen(buf + *off);
    }
}

static void sbx_append_str(char *buf, size_t size, size_t *off, const char *s)
{
    int n = snprintf(buf + *off, size - *off, "%s", s);
    *off = n < 0 ? *off : (*off + (size_t)n < size ? *off + (size_t)n : size - 1);
}

/* One cell of the token table into buf; returns its width. */
static size_t sbx_token_cell(const msgpack_object *row, int col, char *buf, size_t size)
{
    uint64_t v = 0, left = 0;
    size_t off = 0;
    buf[0] = '\0';
    switch (col) {
    case SBX_TOK_ID:
        return sbx_text_cell(proto_map_get(row, "id"), buf, size);
    case SBX_TOK_STATE:
        return sbx_text_cell(proto_map_get(row, "state"), buf, size);
    case SBX_TOK_EXPIRES:
        (void)proto_get_u64(row, "expires_at_ms", &v, NULL);
        return strlen(sbx_utc(v, buf, size));
    case SBX_TOK_USES:
        if (proto_get_u64(row, "uses", &v, NULL) < 0) {
            return (size_t)snprintf(buf, size, "unlimited");
        }
        (void)proto_get_u64(row, "uses_left", &left, NULL);
        return (size_t)snprintf(buf, size, "%" PRIu64 "/%" PRIu64 " left", left, v);
    case SBX_TOK_RUNNING:
        return sbx_text_cell(proto_map_get(row, "running"), buf, size);
    case SBX_TOK_NET:
        return sbx_text_cell(proto_map_get(row, "net"), buf, size);
    case SBX_TOK_POOLS:
    case SBX_TOK_MOUNTS: {
        const msgpack_object *a = proto_map_get(row, col == SBX_TOK_POOLS ? "pools" : "mounts");
        if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size == 0) {
            return (size_t)snprintf(buf, size, col == SBX_TOK_POOLS ? "any" : "-");
        }
        for (uint32_t i = 0; i < a->via.array.size; i++) {
            const msgpack_object *x = &a->via.array.ptr[i];
            sbx_append_str(buf, size, &off, i ? "," : "");
            if (col == SBX_TOK_POOLS) {
                sbx_append(buf, size, &off, x);
            } else {
                sbx_append(buf, size, &off, proto_map_get(x, "src"));
                sbx_append_str(buf, size, &off, ":");
                sbx_append(buf, size, &off, proto_map_get(x, "dst"));
            }
        }
        return strlen(buf);
    }
    default:
        return 0;
    }
}

static int sbx_token_list(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    size_t widths[SBX_TOK_NCOLS];
    char cell[SBX_TEXT_MAX];
    bool json = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") != 0) {
            return sbx_usage_error(sbx_cmd_find("token"), "token list: unexpected argument '%s'",
                                   argv[i]);
        }
        json = true;
    }
    int status = sbx_rpc_request(ctx, &c, "token.list", NULL, NULL, json, &m);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_ARRAY) {
        return sbx_fail(json, SBX_ERR_PROTOCOL, "unexpected answer to token.list: not an array");
    }
    if (json) {
        /* token.list never carries a token, only ids and grants (docs/TOKENS.md). */
        sbx_json_print_obj(stdout, m.result);
        return 0;
    }
    const msgpack_object_array *rows = &m.result->via.array;
    for (int j = 0; j < SBX_TOK_NCOLS; j++) {
        widths[j] = strlen(sbx_token_titles[j]);
        for (uint32_t i = 0; i < rows->size; i++) {
            size_t w = sbx_token_cell(&rows->ptr[i], j, cell, sizeof(cell));
            widths[j] = w > widths[j] ? w : widths[j];
        }
    }
    for (int j = 0; j < SBX_TOK_NCOLS; j++) {
        sbx_text_print_cell(sbx_token_titles[j], strlen(sbx_token_titles[j]), widths[j],
                            j == SBX_TOK_RUNNING, j + 1 == SBX_TOK_NCOLS);
    }
    for (uint32_t i = 0; i < rows->size; i++) {
        for (int j = 0; j < SBX_TOK_NCOLS; j++) {
            size_t w = sbx_token_cell(&rows->ptr[i], j, cell, sizeof(cell));
            sbx_text_print_cell(cell, w, widths[j], j == SBX_TOK_RUNNING, j + 1 == SBX_TOK_NCOLS);
        }
    }
    return 0;
}

int sbx_token_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find("token");
    if (argc < 2) {
        return sbx_usage_error(cmd, "token: issue, revoke or list?");
    }
    /* Help wherever it is asked for, as every other command answers it. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return 0;
        }
    }
    int (*run)(const struct sbx_ctx *, int, char **) = NULL;
    if (strcmp(argv[1], "issue") == 0) {
        run = sbx_token_issue;
    } else if (strcmp(argv[1], "revoke") == 0) {
        run = sbx_token_revoke;
    } else if (strcmp(argv[1], "list") == 0) {
        run = sbx_token_list;
    } else {
        return sbx_usage_error(cmd, "token: unknown subcommand '%s'", argv[1]);
    }
    return run(ctx, argc, argv);
}
