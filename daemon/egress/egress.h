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

struct audit;
struct config;
struct egress;
struct egress_session;
struct metrics;
struct scrub;
struct uv_loop_s;

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

/* The services the proxy uses, handed over by the composition root. Each may be NULL when
 * egress_new only checks a configuration (then no session may start). */
struct egress_handles {
    struct uv_loop_s *loop;  /* sessions and connections run on it */
    struct audit *audit;     /* proxy.denied events */
    struct metrics *metrics; /* sbx_proxy_requests_total */
    struct scrub *scrub;     /* route credentials are registered with it */
};

/* Builds the runtime form of cfg's egress profiles (allowlists, address ranges, routes)
 * and reads each route's credential file, which must be a regular file owned by sbxd's
 * user with no group or other permission bits, holding one line of at least 8 bytes.
 * Credentials are registered with h->scrub so they never reach a log or the audit trail.
 * h (copied; NULL: none of them) must outlive g. Start-up only (reads files). Returns 0 or
 * -errno with e naming the profile and file. *ret owns the credentials. */
int egress_new(const struct config *cfg, const struct egress_handles *h, struct egress **ret,
               struct err *e);
/* Wipes the credentials and frees. Accepts NULL; returns NULL. Every session must be
 * gone. */
struct egress *egress_free(struct egress *g);

/* A task's proxy, before its CTL_TASK is sent. proxy_fd (consumed, may be -1) is the
 * listener its sandbox's init made. Without a profile (NULL or "none") the listener closes,
 * so nothing listens in the sandbox, and *ret is NULL. With one, its session serves the
 * listener for task_id (sandbox_id names the sandbox in messages); the caller then puts the
 * proxy variables of egress_session_env in the task's env. Returns 0, or -errno with e when
 * the task must not start (unknown profile, no listener or not a listening socket). */
int egress_session_start(struct egress *g, const char *profile, int proxy_fd, const char *task_id,
                         const char *sandbox_id, struct egress_session **ret, struct err *e);
/* The port the task's proxy variables (HTTP_PROXY, HTTPS_PROXY, http_proxy, https_proxy =
 * http://127.0.0.1:port, set by sandbox/task_spec.c's task_spec_set_proxy) point at. */
uint16_t egress_session_env(const struct egress_session *s);
/* The task ended (exited, failed, killed, or its sandbox died): stops serving and closes
 * every proxy connection; the session frees itself once they are closed. Its counts go to
 * *ret (may be NULL). Accepts NULL (then *ret is untouched); returns NULL. */
struct egress_session *egress_session_end(struct egress_session *s, struct egress_stats *ret);
/* Packs the result's "egress" entry (key and value: a map, or nil without a profile or when
 * st is not active). */
void egress_pack_result(msgpack_packer *pk, const char *profile, const struct egress_stats *st);
