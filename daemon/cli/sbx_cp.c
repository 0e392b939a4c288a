/* SPDX-License-Identifier: MIT */
/* sbx cp: one file into an open session (session.write) or out of it (session.read), in
 * SBX_CP_CHUNK pieces by offset, as docker cp names the two sides (ID:PATH is the session's,
 * - is stdin or stdout). One request at a time on one connection: each chunk stays far below
 * sbxd's message bound and memory stays at one chunk. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/util.h"

#define SBX_CP_CHUNK (512u << 10)
#define SBX_CP_ID_MAX 128

struct sbx_cp {
    const char *token; /* never printed */
    char id[SBX_CP_ID_MAX];
    const char *remote; /* the path in the session */
    const char *local;  /* "-": stdin or stdout */
    bool upload;
    /* The chunk of the request being packed. */
    uint64_t offset;
    const char *data;
    size_t len;
    bool has_mode;
    uint32_t mode;
};

/* Whether a is the session's side, ID:PATH: a ':' with no '/' before it, and not a path
 * that starts with '/' or '.' (which docker cp takes as local, so "./a:b" names a file). */
static bool sbx_cp_is_remote(const char *a)
{
    const char *colon = strchr(a, ':');
    if (a[0] == '/' || a[0] == '.' || !colon || colon == a) {
        return false;
    }
    return memchr(a, '/', (size_t)(colon - a)) == NULL;
}

static void sbx_cp_pack(msgpack_packer *pk, const void *arg)
{
    const struct sbx_cp *cp = arg;
    uint32_t n = 3 + (cp->token != NULL) + (cp->upload ? 1 + cp->has_mode : 1);
    (void)msgpack_pack_map(pk, n);
    proto_pack_kv_str(pk, "session", cp->id);
    proto_pack_kv_str(pk, "path", cp->remote);
    proto_pack_kv_u64(pk, "offset", cp->offset);
    if (cp->token) {
        proto_pack_kv_str(pk, "token", cp->token);
    }
    if (cp->upload) {
        proto_pack_cstr(pk, "data");
        (void)msgpack_pack_bin_with_body(pk, cp->data, cp->len);
        if (cp->has_mode) {
            proto_pack_kv_u64(pk, "mode", cp->mode);
        }
    } else {
        proto_pack_kv_u64(pk, "length", SBX_CP_CHUNK);
    }
}

/* Reads until buf is full or the input ends. Returns the bytes read or -errno. */
static ssize_t sbx_cp_fill(int fd, char *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = RETRY_EINTR(read(fd, buf + got, size - got));
        if (n < 0) {
            return -errno;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* path with the basename of from appended when path is empty or ends in '/' (owned). */
static char *sbx_cp_target(const char *path, const char *from)
{
    size_t n = strlen(path);
    if (n > 0 && path[n - 1] != '/') {
        return xstrdup(path);
    }
    const char *slash = strrchr(from, '/');
    return xasprintf("%s%s", path, slash ? slash + 1 : from);
}

static int sbx_cp_upload(struct sbx_conn *c, struct sbx_cp *cp)
{
    bool in = strcmp(cp->local, "-") == 0;
    scoped_close int fd = in ? -1 : open(cp->local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    scoped_free char *buf = xmalloc(SBX_CP_CHUNK);
    struct stat st;

    if (!in && fd < 0) {
        return sbx_fail(false, SBX_ERR_SYSTEM, "cp: cannot open '%s': %s", cp->local,
                        strerror(errno));
    }
    if (!in && fstat(fd, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            return sbx_fail(false, SBX_ERR_SYSTEM, "cp: '%s' is a directory (cp copies one file)",
                            cp->local);
        }
        cp->has_mode = S_ISREG(st.st_mode);
        cp->mode = (uint32_t)st.st_mode & 0777u;
    }
    /* The first chunk (offset 0) creates or replaces the file, even an empty one. */
    for (bool first = true;; first = false) {
        scoped(proto_msg_done) struct proto_msg m = {0};
        ssize_t n = sbx_cp_fill(in ? STDIN_FILENO : fd, buf, SBX_CP_CHUNK);
        if (n < 0) {
            return sbx_fail(false, SBX_ERR_SYSTEM, "cp: reading '%s': %s", cp->local,
                            strerror((int)-n));
        }
        if (n == 0 && !first) {
            return 0;
        }
        cp->data = buf;
        cp->len = (size_t)n;
        int status = sbx_rpc_call(c, "session.write", sbx_cp_pack, cp, &m);
        if (status != 0) {
            return status;
        }
        cp->offset += (uint64_t)n;
        cp->has_mode = false;
        if ((size_t)n < SBX_CP_CHUNK) {
            return 0;
        }
    }
}

static int sbx_cp_download(struct sbx_conn *c, struct sbx_cp *cp)
{
    bool out = strcmp(cp->local, "-") == 0;
    scoped_free char *target = NULL;
    scoped_close int fd = -1;
    struct stat st;

    if (!out) {
        size_t n = strlen(cp->local);
        target =
            n > 0 && cp->local[n - 1] != '/' && stat(cp->local, &st) == 0 && S_ISDIR(st.st_mode)
                ? xasprintf("%s/", cp->local)
                : xstrdup(cp->local);
        char *full = sbx_cp_target(target, cp->remote);
        free(target);
        target = full;
    }
    for (;;) {
        scoped(proto_msg_done) struct proto_msg m = {0};
        const char *data = NULL;
        uint32_t len = 0;
        bool eof = false;
        int status = sbx_rpc_call(c, "session.read", sbx_cp_pack, cp, &m);
        if (status != 0) {
            return status;
        }
        if (!proto_obj_bytes(proto_map_get(m.result, "data"), &data, &len) ||
            proto_get_bool(m.result, "eof", &eof, NULL) < 0 || len > SBX_CP_CHUNK ||
            (len == 0 && !eof)) {
            return sbx_fail(false, SBX_ERR_PROTOCOL, "malformed session.read result from sbxd");
        }
        /* Opened once sbxd has answered, so that a refused read leaves no empty file. */
        if (!out && fd < 0) {
            fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
            if (fd < 0) {
                return sbx_fail(false, SBX_ERR_SYSTEM, "cp: cannot create '%s': %s", target,
                                strerror(errno));
            }
        }
        int r = 0;
        if (out) {
            /* Write errors show at the close of stdout (sbx.c). */
            (void)fwrite(data, 1, len, stdout);
        } else {
            r = fd_write_all(fd, data, len);
        }
        if (r < 0) {
            return sbx_fail(false, SBX_ERR_SYSTEM, "cp: writing '%s': %s", target, strerror(-r));
        }
        cp->offset += len;
        if (eof) {
            break;
        }
    }
    if (fd >= 0 && close(take_fd(&fd)) < 0) {
        return sbx_fail(false, SBX_ERR_SYSTEM, "cp: writing '%s': %s", target, strerror(errno));
    }
    return 0;
}

int sbx_cp_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped_free char *remote = NULL;
    struct sbx_cp cp = {0};
    const char *pos[3];
    size_t n_pos = 0;

    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return 0;
        }
        if (strcmp(argv[i], "--") == 0) {
            for (i++; i < argc && n_pos < 3; i++) {
                pos[n_pos++] = argv[i];
            }
            break;
        }
        if ((r = parse_long_opt(argc, argv, &i, "--token", &v)) != 0) {
            if (r < 0 || !v[0]) {
                return sbx_usage_error(cmd, "cp: --token needs a token");
            }
            cp.token = v;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return sbx_usage_error(cmd, "cp: unknown option '%s'", argv[i]);
        } else if (n_pos < 3) {
            pos[n_pos++] = argv[i];
        }
    }
    if (n_pos != 2) {
        return sbx_usage_error(cmd, "cp: needs a source and a destination");
    }
    bool src_remote = sbx_cp_is_remote(pos[0]), dst_remote = sbx_cp_is_remote(pos[1]);
    if (src_remote == dst_remote) {
        return sbx_usage_error(cmd, "cp: exactly one side must be a session's, ID:PATH");
    }
    const char *spec = src_remote ? pos[0] : pos[1];
    const char *colon = strchr(spec, ':');
    if ((size_t)(colon - spec) >= sizeof(cp.id)) {
        return sbx_usage_error(cmd, "cp: '%.*s' is no session id", (int)(colon - spec), spec);
    }
    memcpy(cp.id, spec, (size_t)(colon - spec));
    cp.id[colon - spec] = '\0';
    cp.upload = dst_remote;
    cp.local = src_remote ? pos[1] : pos[0];
    cp.token = sbx_session_token(cp.token);
    if (cp.local[0] == '\0') {
        return sbx_usage_error(cmd, "cp: an empty local path");
    }
    if (cp.upload) {
        size_t n = strlen(colon + 1);
        if ((n == 0 || colon[n] == '/') && strcmp(cp.local, "-") == 0) {
            return sbx_usage_error(cmd, "cp: from stdin, ID:PATH must name the file");
        }
        remote = sbx_cp_target(colon + 1, cp.local);
    } else {
        if (colon[1] == '\0') {
            return sbx_usage_error(cmd, "cp: which file of the session? (ID:PATH)");
        }
        remote = xstrdup(colon + 1);
    }
    cp.remote = remote;
    int status = sbx_rpc_connect(ctx, false, &c);
    if (status != 0) {
        return status;
    }
    return cp.upload ? sbx_cp_upload(&c, &cp) : sbx_cp_download(&c, &cp);
}
