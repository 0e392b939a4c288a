/* SPDX-License-Identifier: MIT */
/* One msgpack-rpc call on sbx's connection, driven by a blocking poll(2) loop, and the
 * mapping of a response's error to sbx's exit status. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

#include "lib/util.h"

int sbx_rpc_error(const msgpack_object *error, bool json)
{
    char code[64], msg[SBX_TEXT_MAX];
    const msgpack_object *m =
        error->type == MSGPACK_OBJECT_MAP ? proto_map_get(error, "message") : error;

    (void)sbx_text(proto_map_get(error, "code"), code, sizeof(code));
    (void)sbx_text(m, msg, sizeof(msg));
    if (msg[0] == '\0') {
        (void)snprintf(msg, sizeof(msg), "request failed");
    }
    /* Whatever the daemon refused (denied, busy, an unknown pool, a timeout above the pool's
     * maximum), the command never ran: a failure of sbx, told apart by the code. */
    if (code[0] == '\0') {
        return sbx_fail(json, "internal", "%s", msg);
    }
    sbx_errorf("%s (%s)", msg, code);
    if (json) {
        sbx_print_error_json(code, msg);
    }
    return SBX_EXIT_FAIL;
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
            return sbx_fail(c->json, SBX_ERR_SYSTEM, "poll: %s", strerror(errno));
        }
        r = sbx_conn_send(c, &e);
        if (r >= 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            r = sbx_conn_recv(c, &e);
        }
        while (r >= 0 && (r = sbx_conn_next(c, &m, &e)) == 1) {
            if (m.type == PROTO_RESPONSE && m.msgid == msgid) {
                if (m.error->type != MSGPACK_OBJECT_NIL) {
                    int status = sbx_rpc_error(m.error, c->json);
                    proto_msg_done(&m);
                    return status;
                }
                *ret = m;
                return 0;
            }
            proto_msg_done(&m);
        }
        if (r < 0) {
            return sbx_fail(c->json, SBX_ERR_PROTOCOL, "%s", err_msg(&e));
        }
        if (c->eof) {
            return sbx_fail(c->json, SBX_ERR_DISCONNECTED,
                            "sbxd closed the connection before answering '%s'", method);
        }
    }
}

int sbx_rpc_connect(const struct sbx_ctx *ctx, bool json, struct sbx_conn *c)
{
    struct err e = ERR_INIT;
    if (sbx_conn_open(c, ctx->path, &e) < 0) {
        return sbx_fail(json, SBX_ERR_UNREACHABLE, "%s", err_msg(&e));
    }
    c->json = json;
    return 0;
}

int sbx_rpc_request(const struct sbx_ctx *ctx, struct sbx_conn *c, const char *method,
                    sbx_pack_args_cb pack_args, const void *arg, bool json, struct proto_msg *ret)
{
    int status = sbx_rpc_connect(ctx, json, c);
    return status != 0 ? status : sbx_rpc_call(c, method, pack_args, arg, ret);
}
