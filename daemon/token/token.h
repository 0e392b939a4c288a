/* SPDX-License-Identifier: MIT */
#pragma once
/* Capability tokens (docs/TOKENS.md): a 256-bit random secret shown once as
 * "sbx_" + base64url, of which sbxd keeps only a BLAKE2b hash, in SQLite in the state dir
 * and in an in-memory table that exec-time verification reads without touching the disk.
 * A token grants read-only mounts, a network profile and pools for a time and a number of
 * uses; when it expires or is revoked, every task running under it is killed. Loop thread
 * only, except where a comment says otherwise. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "lib/err.h"

#define TOKEN_PREFIX "sbx_"
#define TOKEN_SECRET_BYTES 32 /* 256 bits from randombytes_buf */
#define TOKEN_STR_LEN 47      /* "sbx_" + 43 base64url characters (no padding) */
#define TOKEN_ID_LEN 16       /* public id: 16 hex digits, random, unrelated to the secret */
#define TOKEN_HASH_BYTES 32
#define TOKEN_MAX_MOUNTS 8 /* CTL_MOUNTS_MAX */
#define TOKEN_MAX_POOLS 16
#define TOKEN_NAME_MAX 32 /* pool and network profile names: [a-z0-9_-]{1,32} */
/* A token stays known (listed, and denied with its precise reason) this long after it
 * expired, then it is forgotten, in memory and in the database. */
#define TOKEN_KEEP_MS (60ULL * 60 * 1000)

struct token;
struct token_store;
struct scrub;

enum token_state {
    TOKEN_ACTIVE = 0,
    TOKEN_EXPIRED,
    TOKEN_REVOKED,
    TOKEN_USED_UP,
};

/* One read-only mount: src is the real path on the host (no symlink, no ".."), dst the
 * normalized path inside the sandbox. */
struct token_mount {
    char *src;
    char *dst;
};

/* What token.issue asks for. Strings are borrowed. */
struct token_request {
    const struct token_mount *mounts; /* src as given (resolved by the policy check) */
    size_t n_mounts;                  /* <= TOKEN_MAX_MOUNTS */
    const char *const *pools;         /* configured pool names; none: every pool */
    size_t n_pools;                   /* <= TOKEN_MAX_POOLS */
    const char *net;                  /* NULL or "none": loopback only; else a profile */
    uint64_t ttl_ns;                  /* 0: the policy's default */
    uint32_t uses;                    /* 0: unlimited */
};

/* The policy tokens are issued under. Paths are real paths (realpath'd by the caller). */
struct token_policy {
    const char *const *mount_roots; /* host directories whose contents tokens may expose */
    size_t n_mount_roots;
    /* Paths never exposed, nor any directory holding them: the state dir, the sockets'
     * directories, credential files. */
    const char *const *forbidden;
    size_t n_forbidden;
    const char *const *net_profiles; /* the egress profiles a token may name */
    size_t n_net_profiles;
    uint64_t max_ttl_ns;      /* > 0 */
    uint64_t default_ttl_ns;  /* > 0, <= max_ttl_ns */
    uint32_t max_tokens;      /* tokens kept (ended ones are evicted first when full) */
    uint64_t (*now_ms)(void); /* the wall clock in Unix ms; NULL: CLOCK_REALTIME (test seam) */
};

/* A task's link to the token it runs under, embedded in the task (tok NULL: none). */
struct token_link {
    struct token *tok;
    struct token_link *prev;
    struct token_link *next;
};

/* Called for each task of a token that expired or was revoked (why: TOKEN_EXPIRED or
 * TOKEN_REVOKED). The callee may token_detach l (and only l) before returning. */
typedef void (*token_kill_cb)(struct token_link *l, enum token_state why, void *arg);

/* What the store tells its owner (loop thread). */
struct token_hooks {
    token_kill_cb kill; /* required */
    /* A token reached its expiry; killed: how many of its tasks were told to die. NULL:
     * not told. */
    void (*expired)(const char *id, size_t killed, void *arg);
    void *arg; /* passed to both */
};

/* Opens (creating it mode 0600) <state_dir>/tokens.db, loads every token into memory,
 * forgets those ended more than TOKEN_KEEP_MS ago, and arms the expiry timer on loop.
 * pol is copied. scrub (borrowed, may be NULL) learns the "sbx_" prefix, so that any
 * token-shaped string is redacted from the audit trail and the log. Start-up only
 * (blocks on the database). Returns 0 or -errno with e. */
int token_store_open(uv_loop_t *loop, const char *state_dir, const struct token_policy *pol,
                     const struct token_hooks *hooks, struct scrub *scrub, struct token_store **ret,
                     struct err *e);
/* Stops the timer (closing its handle) and starts the last write-back of use counts, so
 * that the loop can end. Idempotent; accepts NULL. */
void token_store_shutdown(struct token_store *s);
/* After the loop ended: writes what is still pending (blocking), closes the database and
 * frees. Accepts NULL; returns NULL. */
struct token_store *token_store_free(struct token_store *s);
/* Test seam: replaces the wall clock (NULL: the real one) and re-arms the timer, as after
 * a jump of the clock. */
void token_store_set_clock(struct token_store *s, uint64_t (*now_ms)(void));

/* Checks rq against the policy and mints a token: the secret into ret_token (shown once;
 * the caller must not log or keep it), the stored token into *ret. Saved to the database
 * (a short synchronous transaction: admin rate) before it exists in memory. Errors:
 * -EINVAL malformed request, -EACCES refused by the policy (mount root, state dir, mount
 * destination, ttl), -ENOSPC too many tokens, -EIO database; e says why. */
int token_issue(struct token_store *s, const struct token_request *rq,
                char ret_token[TOKEN_STR_LEN + 1], const struct token **ret, struct err *e);
/* Revokes a token named by its string or its id, and kills its tasks (kill callback). An
 * already revoked token is revoked again without error (*ret_killed 0). -ENOENT when no
 * such token is known; -EIO when the database could not be updated (the token is revoked
 * in memory all the same, but would come back after a restart). */
int token_revoke(struct token_store *s, const char *token_or_id, size_t len,
                 const struct token **ret, size_t *ret_killed, struct err *e);
/* Verifies a token string for a task in pool, from memory only: no side effect. Returns 0
 * with *ret, or -EACCES with e holding the reason (malformed, unknown, revoked, expired,
 * used up, pool not granted) and, unlike a ret_ parameter, *why set to its label for
 * sbx_denied_total (a literal: token_malformed, token_unknown, token_revoked,
 * token_expired, token_used_up, pool_not_allowed); the token string never appears in e. */
int token_authorize(const struct token_store *s, const char *token, size_t len, const char *pool,
                    const char **why, const struct token **ret, struct err *e);
/* A task authorized under tok was accepted: takes one use (written back in the background)
 * and links l into the token's tasks, so that expiry and revocation reach it. */
void token_attach(struct token_store *s, const struct token *tok, struct token_link *l);
/* The task is done with its token (l->tok NULL: nothing to do). */
void token_detach(struct token_link *l);
/* Opens the token's mounts as detached mount trees (open_tree clones, made private,
 * read-only, nosuid and nodev, recursively) into fds[0..n_mounts), bit i of *ret_files set
 * when mount i is a regular file. The source is re-checked against the current policy and
 * opened without following any symlink, so a path changed since the issue is refused.
 * On failure nothing stays open. Returns the number of mounts or -errno with e. */
int token_open_mounts(const struct token_store *s, const struct token *tok, int *fds,
                      uint32_t *ret_files, struct err *e);

/* What a token grants and where it stands (strings owned by the token). */
struct token_info {
    const char *id;
    enum token_state state;
    uint64_t created_ms; /* Unix ms */
    uint64_t expires_ms;
    uint64_t revoked_ms; /* 0: not revoked */
    uint32_t uses;       /* 0: unlimited */
    uint32_t uses_left;  /* meaningful when uses > 0 */
    uint32_t running;    /* tasks linked now */
    const char *net;     /* NULL: loopback only */
    const struct token_mount *mounts;
    size_t n_mounts;
    char *const *pools; /* none: every pool */
    size_t n_pools;
};

void token_get_info(const struct token_store *s, const struct token *t, struct token_info *ret);
/* Iterates tokens in the order they were issued: pass NULL for the first. */
const struct token *token_next(const struct token_store *s, const struct token *prev);
size_t token_count(const struct token_store *s);
const char *token_state_name(enum token_state st);

/* ---- Pure helpers (exposed for the unit tests and rpc.c) ---- */

/* Whether path is root or lies below it (both absolute and normalized; root "/" contains
 * everything). */
bool token_policy_path_within(const char *path, const char *root);
/* Resolves a mount source (absolute) to its real path and checks it against the policy:
 * a directory or regular file under a mount root, neither inside nor holding a forbidden
 * path. Returns 0 with *ret_real (malloc'ed), -EINVAL when src is not absolute or does not
 * exist, -EACCES when the policy refuses it; e says why. */
int token_policy_check_src(const struct token_policy *pol, const char *src, char **ret_real,
                           struct err *e);
/* Checks the mount destinations of one token: each valid (ctl_mount_dst_check), none on or
 * below another. Returns 0 or -EACCES with e. */
int token_policy_check_dsts(const struct token_mount *mounts, size_t n, struct err *e);
/* Decodes a token string into its secret. Returns 0 or -EINVAL (wrong prefix, length or
 * encoding). */
int token_secret_decode(const char *s, size_t len, uint8_t ret_secret[TOKEN_SECRET_BYTES]);
/* The stored form of a secret: BLAKE2b-256 personalized "sbx-token-v1". */
void token_secret_hash(const uint8_t secret[TOKEN_SECRET_BYTES],
                       uint8_t ret_hash[TOKEN_HASH_BYTES]);
