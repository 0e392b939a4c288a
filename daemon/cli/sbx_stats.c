/* SPDX-License-Identifier: MIT */
/* sbx stats: sbxd's daemon-wide counters (the stats call), one "name value" line each,
 * nested maps flattened to dotted names; or with --json the daemon's answer as JSON. */
#include "cli/cli_impl.h"

#include <stdio.h>
#include <string.h>

#include "cli/sbx_json.h"
#include "lib/util.h"

#define SBX_STATS_DEPTH 4  /* nesting shown; deeper maps are printed as JSON */
#define SBX_STATS_NAME 128 /* longest dotted name */

/* Prints the entries of map m, each name prefixed by prefix (dotted). */
static void sbx_stats_print(const msgpack_object *m, const char *prefix, int depth)
{
    for (uint32_t i = 0; i < m->via.map.size; i++) {
        const msgpack_object_kv *kv = &m->via.map.ptr[i];
        char key[64], name[SBX_STATS_NAME], cell[SBX_TEXT_MAX];

        (void)sbx_text(&kv->key, key, sizeof(key));
        (void)snprintf(name, sizeof(name), "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (kv->val.type == MSGPACK_OBJECT_MAP && depth + 1 < SBX_STATS_DEPTH) {
            sbx_stats_print(&kv->val, name, depth + 1);
            continue;
        }
        (void)printf("%-32s ", name);
        if (kv->val.type == MSGPACK_OBJECT_MAP || kv->val.type == MSGPACK_OBJECT_ARRAY) {
            sbx_json_print_obj(stdout, &kv->val);
        } else {
            (void)sbx_text_cell(&kv->val, cell, sizeof(cell));
            (void)printf("%s\n", cell);
        }
    }
}

int sbx_stats_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    scoped(sbx_conn_close) struct sbx_conn c = {.fd = -1};
    scoped(proto_msg_done) struct proto_msg m = {0};
    bool json = false;
    int status = sbx_no_args(argc, argv, &json);

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    status = sbx_rpc_request(ctx, &c, "stats", NULL, NULL, json, &m);
    sbx_conn_close(&c);
    if (status != 0) {
        return status;
    }
    if (m.result->type != MSGPACK_OBJECT_MAP) {
        return sbx_fail(json, SBX_ERR_PROTOCOL, "unexpected answer to stats: not a map");
    }
    if (json) {
        sbx_json_print_obj(stdout, m.result);
    } else {
        sbx_stats_print(m.result, "", 0);
    }
    return 0;
}
