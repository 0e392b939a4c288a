/* SPDX-License-Identifier: MIT */
/* egress/egress.c's sessions as a task sees them: logged; with a profile, a session whose
 * proxy listens on port 3128 (fakes.h). */
#include "egress/egress.h"

#include "lib/util.h"
#include "wire/proto.h"

#include "fakes.h"

int fake_egress_start_r;

struct egress_session {
    uint16_t port;
};

static struct egress_session the_session = {.port = 3128};

int egress_session_start(struct egress *g, const char *profile, int proxy_fd, const char *task_id,
                         const char *sandbox_id, struct egress_session **ret, struct err *e)
{
    (void)g;
    (void)task_id;
    fake_call("egress_session_start %s %s", profile ? profile : "-", sandbox_id);
    (void)fd_close(proxy_fd);
    *ret = NULL;
    if (fake_egress_start_r < 0) {
        return err_setx(e, fake_egress_start_r, "the fake egress refused the session");
    }
    if (profile) {
        *ret = &the_session;
    }
    return 0;
}

uint16_t egress_session_env(const struct egress_session *s)
{
    return s->port;
}

struct egress_session *egress_session_end(struct egress_session *s, struct egress_stats *ret)
{
    if (!s) {
        return NULL;
    }
    fake_call("egress_session_end");
    if (ret) {
        ret->requests = 1;
    }
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
    msgpack_pack_map(pk, 2); /* a subset of the real map's keys */
    proto_pack_kv_str(pk, "profile", profile);
    proto_pack_kv_u64(pk, "requests", st->requests);
}
