/* SPDX-License-Identifier: MIT */
#pragma once
/* The egress proxy (docs/EGRESS.md): served from sbxd's loop on a listening socket that
 * each sandbox's init created on 127.0.0.1:<egress.port> in the sandbox's own network
 * namespace. For a task with a network profile it relays HTTPS CONNECT tunnels to allowed
 * destinations (the TLS ClientHello's server name must match) and plain-HTTP requests
 * along named routes (the route's credential header added on the way out); it resolves
 * names off the loop, dials only addresses that pass the profile, and enforces the
 * profile's byte and connection limits. Loop thread only, except egress_new (start-up). */
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/err.h"

struct config;
struct egress;
struct egress_session;
struct sandbox;
struct scrub;
struct task;

/* Denials (refusals and limit cuts) after which a task is flagged in its result. */
#define EGRESS_FLAG_DENIALS 3

/* What a task did through the proxy; in its result as "egress". */
struct egress_stats {
    bool active;       /* the task had a network profile */
    uint32_t requests; /* requests and CONNECTs received */
    uint32_t denials;  /* refused (403/400) or cut by a limit */
    uint64_t bytes;    /* relayed, both directions */
    bool flagged;      /* denials reached EGRESS_FLAG_DENIALS */
};

/* Builds the runtime form of cfg's egress profiles (allowlists, address ranges, routes)
 * and reads each route's credential file, which must be a regular file owned by sbxd's
 * user with no group or other permission bits, holding one line of at least 8 bytes.
 * Credentials are registered with scrub (may be NULL) so they never reach a log or the
 * audit trail. Start-up only (reads files). Returns 0 or -errno with e naming the profile
 * and file. *ret owns the credentials. */
int egress_new(const struct config *cfg, struct scrub *scrub, struct egress **ret, struct err *e);
/* Wipes the credentials and frees. Accepts NULL; returns NULL. Every session must be
 * gone. */
struct egress *egress_free(struct egress *g);

/* task_start, before CTL_TASK is sent. For a task with a network profile (t->net_profile,
 * not "none"): adds HTTP_PROXY, HTTPS_PROXY, http_proxy and https_proxy to its env (replacing
 * any the request set) and starts serving the sandbox's proxy listener for it. Without a
 * profile: closes the listener, so nothing listens in the sandbox. Either way
 * sb->proxy_fd is consumed. Returns 0, or -errno with e when the task must not start
 * (unknown profile, no listener, env too large). */
int egress_task_start(struct task *t, struct sandbox *sb, struct err *e);
/* The task ended (exited, failed, killed, or its sandbox died): stops serving, closes every
 * proxy connection, and keeps the counts in t->egress_stats. Safe to call more than once. */
void egress_task_end(struct task *t);
/* Packs the result's "egress" entry (key and value: a map, or nil without a profile). */
void egress_pack_result(msgpack_packer *pk, const struct task *t);
