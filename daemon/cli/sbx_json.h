/* SPDX-License-Identifier: MIT */
#pragma once
/* Text output helpers of the sbx CLI: a strict UTF-8 decoder, JSON string and value
 * writers over stdio, and a sanitizer for daemon-supplied text shown on a terminal.
 * Used only by sbx (cli/); nothing here allocates. Not CHILD-SAFE (stdio). */
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

/* Writes s (len bytes, any content) to f as a JSON string literal, quotes included: valid
 * UTF-8 passes through, '"' and '\' get their escapes, C0 and C1 control characters and
 * DEL are escaped (\n, \t, ... or \u00XX), each ill-formed subsequence becomes \ufffd.
 * Write errors are left in ferror(f). */
void sbx_json_write_str(FILE *f, const char *s, size_t len);

/* Whether s (len bytes) is valid UTF-8 throughout (sbx_json_utf8_next finds no ill-formed
 * subsequence). */
bool sbx_json_utf8_valid(const char *s, size_t len);

/* Writes s (len bytes, any content) to f as a JSON string of its standard base64 (RFC 4648,
 * with padding), quotes included. */
void sbx_json_write_b64(FILE *f, const char *s, size_t len);

/* Writes a decoded msgpack value as JSON: nil (and a NULL o) as null, str and bin as strings (see
 * sbx_json_write_str), non-finite floats and ext as null, non-string map keys as their
 * decimal or "?" text. Nesting below 64 levels is written as null. */
void sbx_json_write_obj(FILE *f, const msgpack_object *o);

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

/* Writes sbx exec's --json object and a newline to f: the fields of the exec result map
 * res (status, exit_code, signal, truncated, wall_ms, cpu_ms, mem_peak_bytes,
 * stdout_bytes, stderr_bytes, sandbox, task, pool, seccomp_denials, cold, egress; null when
 * missing; error, error_stage, error_errno, session, files_in_bytes, files_out_bytes,
 * skipped and collect_truncated only when present) with o's output as "stdout" and
 * "stderr" text and, for a stream that is not valid UTF-8 (whose text has U+FFFD in place
 * of its ill-formed bytes), its exact bytes in base64 as "stdout_b64" or "stderr_b64".
 * truncated is true when res says so or when o->dropped. The result's files (when present)
 * are "files": [{path, mode, size, truncated, data}], data as text and, when not UTF-8, as
 * "data_b64" too; o's file errors are "collect_errors": [{path, message}] (when any). */
void sbx_json_write_result(FILE *f, const msgpack_object *res, const struct sbx_json_output *o);

/* Copies s (len bytes) into buf (size >= 4 bytes) for display: valid printable UTF-8
 * passes through, control characters become '?', ill-formed subsequences U+FFFD; the
 * copy is cut at a character boundary when buf is too small, and always NUL-terminated.
 * Returns its width in code points. */
size_t sbx_json_sanitize(const char *s, size_t len, char *buf, size_t size);
