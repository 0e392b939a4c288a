/* SPDX-License-Identifier: MIT */
#pragma once
/* Text output of the sbx CLI: a strict UTF-8 decoder, JSON values built with jansson from
 * decoded msgpack and task output, and a sanitizer for daemon-supplied text shown on a
 * terminal. Used only by sbx (cli/). Not CHILD-SAFE (stdio, allocation). */
#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Marks an ill-formed UTF-8 subsequence in sbx_json_utf8_next's *ret_cp. */
#define SBX_JSON_UTF8_BAD UINT32_MAX

/* Decodes the UTF-8 sequence at s (len >= 1 bytes). Returns the number of bytes it covers
 * (1..4) and sets *ret_cp to the code point, or to SBX_JSON_UTF8_BAD for an ill-formed
 * subsequence (overlong forms, surrogates, values above U+10FFFF, stray continuation bytes,
 * truncated sequences). Ill-formed input is split into maximal subparts, as Unicode
 * recommends and as Python's errors="replace" does, so each becomes one U+FFFD. */
size_t sbx_json_utf8_next(const unsigned char *s, size_t len, uint32_t *ret_cp);

/* Whether s (len bytes) is valid UTF-8 throughout (sbx_json_utf8_next finds no ill-formed
 * subsequence). */
bool sbx_json_utf8_valid(const char *s, size_t len);

/* The JSON values below are jansson's (docs/ARCHITECTURE.md, "cli"). Each constructor returns
 * a new reference and never NULL: jansson allocates through the xmalloc family
 * (sbx_json_init), so running out aborts. */

/* Makes jansson allocate with the xmalloc family. Called once, before any other sbx_json_. */
void sbx_json_init(void);

/* A JSON string of s (len bytes, any content): valid UTF-8 as it is, NUL bytes included,
 * each ill-formed subsequence as U+FFFD. */
json_t *sbx_json_str(const char *s, size_t len);

/* A JSON string of the standard base64 (RFC 4648, with padding) of s (len bytes). */
json_t *sbx_json_b64(const char *s, size_t len);

/* A decoded msgpack value as JSON: nil (and a NULL o) as null, str and bin as strings (see
 * sbx_json_str), non-finite floats and ext as null, unsigned integers above INT64_MAX as
 * reals (jansson's integers are int64), map keys as their text (NUL bytes kept), an
 * integer key as its decimal and any other as "?" (a repeated key keeps its last value).
 * Nesting below 64 levels is null. */
json_t *sbx_json_obj(const msgpack_object *o);

/* Sets obj's key to v, taking v's reference. */
void sbx_json_set(json_t *obj, const char *key, json_t *v);

/* Appends v to the array a, taking v's reference. */
void sbx_json_append(json_t *a, json_t *v);

/* Writes j compactly and a newline to f, and drops j's reference. Write errors are left in
 * ferror(f). */
void sbx_json_print(FILE *f, json_t *j);

/* sbx_json_print of sbx_json_obj(o). */
void sbx_json_print_obj(FILE *f, const msgpack_object *o);

/* A collected file sbx could not write (sbx_collect.c). */
struct sbx_json_file_error {
    const msgpack_object *path; /* the result's (NULL when it had none) */
    char *message;
};

/* What sbx exec adds to the result in its --json object. */
struct sbx_json_output {
    const char *out; /* the task's stdout and stderr, as collected */
    size_t out_len;
    const char *err;
    size_t err_len;
    bool dropped; /* the client dropped output above its own cap */
    const struct sbx_json_file_error *file_errors;
    size_t n_file_errors;
};

/* sbx exec's --json object: the fields of the exec result map res (status, exit_code,
 * signal, truncated, wall_ms, cpu_ms, mem_peak_bytes, stdout_bytes, stderr_bytes, sandbox,
 * task, pool, seccomp_denials, cold, egress; null when missing; error, error_stage,
 * error_errno, session, files_in_bytes, files_out_bytes, skipped and collect_truncated only
 * when present) with o's output as "stdout" and "stderr" text and, for a stream that is not
 * valid UTF-8 (whose text has U+FFFD in place of its ill-formed bytes), its exact bytes in
 * base64 as "stdout_b64" or "stderr_b64". truncated is true when res says so or when
 * o->dropped. The result's files (when present) are "files": [{path, mode, size, truncated,
 * data}], data as text and, when not UTF-8, as "data_b64" too; o's file errors are
 * "collect_errors": [{path, message}] (when any). */
json_t *sbx_json_result(const msgpack_object *res, const struct sbx_json_output *o);

/* Copies s (len bytes) into buf (size >= 4 bytes) for display: valid printable UTF-8
 * passes through, control characters become '?', ill-formed subsequences U+FFFD; the
 * copy is cut at a character boundary when buf is too small, and always NUL-terminated.
 * Returns its width in code points. */
size_t sbx_json_sanitize(const char *s, size_t len, char *buf, size_t size);
