/* SPDX-License-Identifier: MIT */
/* One msgpack-rpc call on sbx's connection, driven by a blocking poll(2) loop, and the
 * mapping of a response's error to sbx's exit status. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sysexits.h>

#include "lib/util.h"

int sbx_rpc_error(const msgpack_object *error)
{
    char code[64], msg[SBX_TEXT_MAX];
    const msgpack_object *m =
        error->type == MSGPACK_OBJECT_MAP ? proto_map_get(error, "message") : error;

    (void)sbx_text(proto_map_get(error, "code"), code, sizeof(code));
    (void)sbx_text(m, msg, sizeof(msg));
    if (msg[0] == '\0') {
        (void)snprintf(msg, sizeof(msg), "request failed");
    }
    if (code[0] == '\0') {
        sbx_errorf("%s", msg);
        return EX_SOFTWARE;
    }
    sbx_errorf("%s (%s)", msg, code);
    if (strcmp(code, "denied") == 0) {
        return EX_NOPERM;
    }
    if (strcmp(code, "busy") == 0 || strcmp(code, "limit") == 0 ||
        strcmp(code, "shutting_down") == 0) {
        return EX_UNAVAILABLE;
    }
    /* The request was built from the caller's arguments alone, so a request the daemon
     * refuses as wrong (a pool it lacks, a timeout above the pool's maximum, too many
     * bytes of argv) is the caller's usage error. */
    if (strcmp(code, "bad_request") == 0 || strcmp(code, "unknown_pool") == 0 ||
        strcmp(code, "too_large") == 0) {
        return EX_USAGE;
    }
    return EX_SOFTWARE;
}

int sbx_rpc_call(struct sbx_conn *c, const char *method, sbx_pack_args_cb pack_args,
                 const void *arg, struct proto_msg *ret)
{
    struct err e = ERR_INIT;
    uint32_t msgid = c->next_msgid++;

    proto_pack_request(&c->pk, msgid, method);
    (void)msgpack_pack_array(&c->pk, 1);
    if (pack_args) {
        pack_args(&c->pk, arg);
    } else {
        (void)msgpack_pack_map(&c->pk, 0);
    }
    for (;;) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        struct proto_msg m;
        int r;

        if (byteq_pending(&c->out) > 0 && !c->write_closed) {
            p.events |= POLLOUT;
        }
        if (RETRY_EINTR(poll(&p, 1, -1)) < 0) {
            sbx_errorf("poll: %s", strerror(errno));
            return EX_OSERR;
        }
        r = sbx_conn_send(c, &e);
        if (r >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            r = sbx_conn_recv(c, &e);
        }
        while (r >= 0 && (r = sbx_conn_next(c, &m, &e)) == 1) {
            if (m.type == PROTO_RESPONSE && m.msgid == msgid) {
                if (m.error->type != MSGPACK_OBJECT_NIL) {
                    int status = sbx_rpc_error(m.error);
                    proto_msg_done(&m);
                    return status;
                }
                *ret = m;
                return 0;
            }
            proto_msg_done(&m);
        }
        if (r < 0) {
            sbx_errorf("%s", err_msg(&e));
            return EX_SOFTWARE;
        }
        if (c->eof) {
            sbx_errorf("sbxd closed the connection before answering '%s'", method);
            return EX_UNAVAILABLE;
        }
    }
}

int sbx_rpc_connect(const struct sbx_ctx *ctx, struct sbx_conn *c)
{
    struct err e = ERR_INIT;
    if (sbx_conn_open(c, ctx->path, &e) < 0) {
        sbx_errorf("%s", err_msg(&e));
        return EX_UNAVAILABLE;
    }
    return 0;
}

int sbx_rpc_request(const struct sbx_ctx *ctx, struct sbx_conn *c, const char *method,
                    sbx_pack_args_cb pack_args, const void *arg, struct proto_msg *ret)
{
    int status = sbx_rpc_connect(ctx, c);
    return status != 0 ? status : sbx_rpc_call(c, method, pack_args, arg, ret);
}
