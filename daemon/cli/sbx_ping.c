/* SPDX-License-Identifier: MIT */
/* sbx ping: whether sbxd answers, and its version. */
#include "cli/cli_impl.h"

#include <stdio.h>

#include "lib/util.h"

int sbx_ping_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    char version[128];
    bool pong = false;
    int status = sbx_no_args(argc, argv, NULL);

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_rpc_request(ctx, &c, "ping", NULL, NULL, false, &m);
    if (status != 0) {
        return status;
    }
    if (proto_get_bool(m.result, "pong", &pong, NULL) < 0 || !pong) {
        return sbx_fail(false, SBX_ERR_PROTOCOL, "unexpected answer to ping");
    }
    if (sbx_text(proto_map_get(m.result, "version"), version, sizeof(version))[0]) {
        (void)printf("pong (version %s)\n", version);
    } else {
        (void)printf("pong\n");
    }
    return 0;
}
