/* SPDX-License-Identifier: MIT */
#pragma once
/* Internals shared by token.c (the store: memory, write-back, expiry), token_secret.c
 * (minting and hashing), token_policy.c (the mount policy), token_mount.c (mount fds) and
 * token_db.c (SQLite). Nothing outside these five files includes this header. */
#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "lib/err.h"
#include "token/token.h"

#define TOKEN_DB_NAME "tokens.db"

struct token {
    char id[TOKEN_ID_LEN + 1];
    uint8_t hash[TOKEN_HASH_BYTES];
    uint64_t created_ms;
    uint64_t expires_ms;
    uint64_t revoked_ms; /* 0: not revoked */
    uint32_t uses_max;   /* 0: unlimited */
    uint32_t uses_left;
    char *net; /* NULL: loopback only */
    struct token_mount *mounts;
    size_t n_mounts;
    char **pools;
    size_t n_pools;
    struct token_link *links; /* tasks running under it */
    uint32_t running;
    bool expiry_seen;    /* its expiry was handled (tasks killed) */
    bool revoke_saved;   /* revoked_ms is in the database */
    struct token *hnext; /* hash bucket */
    struct token *prev;  /* every token, in the order issued */
    struct token *next;
};

/* A write the background writer owes the database. */
struct token_op {
    char id[TOKEN_ID_LEN + 1];
    bool del; /* forget the token, else set its uses_left */
    uint32_t uses_left;
};

/* Mints a secret: its string into str, its hash into hash; the secret itself is wiped
 * (token_secret.c). */
void token_secret_mint(char str[TOKEN_STR_LEN + 1], uint8_t hash[TOKEN_HASH_BYTES]);
/* Whether real (a resolved path) is under a mount root of pol and neither inside nor
 * holding a forbidden path; -EACCES with e when not (token_policy.c). */
int token_policy_allows(const struct token_policy *pol, const char *real, struct err *e);
/* Whether s is a pool or network name: [a-z0-9_-]{1,TOKEN_NAME_MAX} (token_policy.c). */
bool token_policy_name_ok(const char *s);
/* Opens one mount source, re-checked against pol, as a detached, private, read-only tree:
 * *ret_fd, and *ret_file when it is a regular file. Returns 0 or -errno with e
 * (token_mount.c). */
int token_mount_open(const struct token_policy *pol, const struct token_mount *m, int *ret_fd,
                     bool *ret_file, struct err *e);

/* Frees a token and what it owns (not its links). Accepts NULL. */
void token_free(struct token *t);

/* Opens a connection to the database at path: WAL, synchronous=FULL, foreign keys. With
 * create, the file is made mode 0600 first and the schema is created. Returns 0 or -errno
 * (-EIO for SQLite errors) with e. Blocking. */
int token_db_connect(const char *path, bool create, sqlite3 **ret, struct err *e);
/* Closes *db (NULL allowed) and sets it to NULL. */
void token_db_close(sqlite3 **db);
/* Takes a loaded token (always, also on error). Returns 0 to go on, 1 to stop loading, or
 * -errno with e to fail the load. */
typedef int (*token_db_add_cb)(void *arg, struct token *t, struct err *e);
/* Deletes the tokens ended more than TOKEN_KEEP_MS before now, then hands every other one,
 * with its mounts and pools, to add in issue order. Returns 0 or -errno with e. Start-up
 * only (blocks). */
int token_db_load(sqlite3 *db, uint64_t now, token_db_add_cb add, void *arg, struct err *e);
/* Inserts a token and its grants in one transaction. Returns 0 or -EIO with e. */
int token_db_insert(sqlite3 *db, const struct token *t, struct err *e);
/* Writes t->revoked_ms. Returns 0 or -EIO with e. */
int token_db_revoke(sqlite3 *db, const struct token *t, struct err *e);
/* Applies a batch of write-back ops in one transaction. Returns 0 or -EIO with e. */
int token_db_apply(sqlite3 *db, const struct token_op *ops, size_t n, struct err *e);
