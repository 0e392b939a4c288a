/* SPDX-License-Identifier: MIT */
#pragma once
/* Secret scrubbing: every string from a client or a sandbox passes through here before it
 * is stored in the audit trail or logged. Redacted spans become SCRUB_MARK. What counts as
 * a secret:
 *   - strings registered with scrub_register (token strings, proxy credentials), and
 *     tokens starting with a registered or well-known prefix (sk-, ghp_, xoxb-, ...);
 *   - JWT-shaped strings (eyJ...<dot>...<dot>...);
 *   - PEM private key blocks (the body between BEGIN and END);
 *   - the credential after "Bearer " / "Basic ", the value after "NAME=" / "NAME: " /
 *     "NAME":" and the word after an option "--NAME " when NAME looks secret
 *     (scrub_name_is_secret), e.g. Authorization, API_TOKEN, --password;
 *   - the password of URL userinfo (scheme://user:PASSWORD@host);
 *   - AWS access key ids (AKIA/ASIA... + 16) and long random-looking base64 runs (which
 *     covers 40-character AWS secret keys).
 * Never by a bare substring or by being long hex: commit ids, sha256 digests, UUIDs,
 * pytest node ids and values that only refer to a secret ($TOKEN, a file path) stay.
 * docs/AUDIT.md has the rules and why. Loop thread only (the registry is not locked); the
 * pattern functions are pure. */
#include <stdbool.h>
#include <stddef.h>

#define SCRUB_MARK "[REDACTED]"
/* Registered secrets shorter than this are refused: they would redact ordinary words. */
#define SCRUB_MIN_SECRET 8
/* Runs of token characters at least this long are checked for entropy. */
#define SCRUB_ENTROPY_MIN_LEN 32

struct scrub;

/* Creates a scrubber with the built-in patterns and no registered secret. Never fails
 * (allocation failure aborts). */
struct scrub *scrub_new(void);
/* Frees (wiping registered secrets first). Accepts NULL; returns NULL. */
struct scrub *scrub_free(struct scrub *s);
/* Registers a secret: every later occurrence in scrubbed text is redacted. The bytes are
 * copied. Returns 0, -EINVAL when shorter than SCRUB_MIN_SECRET or longer than 4096 bytes,
 * -EEXIST when already registered (still registered once). */
int scrub_register(struct scrub *s, const char *secret, size_t len);
/* Forgets a registered secret (wiping the copy). Returns 0 or -ENOENT. */
int scrub_unregister(struct scrub *s, const char *secret, size_t len);
/* Registers the prefix of a random token format such as "sbx_" (2..32 bytes): the prefix
 * followed by at least 8 token characters ([A-Za-z0-9_.-]), a digit or an upper-case letter
 * among them, is redacted (sbx_tasks_total, a metric's name, is not). Returns 0, -EINVAL
 * or -EEXIST. */
int scrub_register_prefix(struct scrub *s, const char *prefix);

/* Whether a variable or option name looks secret (case-insensitive; "-" and "_" separate
 * words): it contains TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL, AUTH, COOKIE,
 * SESSION, PRIVATE, SIGNATURE, APIKEY, or has a word KEY / *KEY, PASS, PWD (not plain PWD). */
bool scrub_name_is_secret(const char *name, size_t len);
/* For argv: whether arg is an option whose value is the next argument and secret
 * ("--token", "--password", "--api-key", "--sig", ...; not "--password-stdin",
 * "--secret-id" or "--no-auth"; an option with "=" is handled by scrub_dup). */
bool scrub_arg_takes_secret(const char *arg, size_t len);
/* For argv: whether the argument after such an option is the secret itself, and so
 * redacted whole; not when it refers to one ($TOKEN, ${TOKEN}, {{ .Values.token }}), is a
 * file path (/run/secrets/token, reports/2024/q1.csv, tls.key), a boolean, or a spec of
 * NAME=value pairs (id=npmrc,src=$HOME/.npmrc), whose pairs scrub_dup judges one by one. */
bool scrub_arg_value_is_secret(const char *val, size_t len);

/* Returns a malloc'ed, NUL-terminated scrubbed copy of text (len bytes, any content but
 * NUL is kept as is), its length in *ret_len (may be NULL), and the number of redactions
 * in *ret_count (may be NULL). s may be NULL (patterns only). */
char *scrub_dup(const struct scrub *s, const char *text, size_t len, size_t *ret_len,
                size_t *ret_count);
/* The same into a fixed buffer (size >= 1), cut to fit: for log lines. Returns buf. */
const char *scrub_copy(const struct scrub *s, const char *text, size_t len, char *buf, size_t size);
