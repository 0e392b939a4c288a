/* SPDX-License-Identifier: MIT */
#pragma once
/* The path of a plain-HTTP request through the egress proxy: normalized, refused when an
 * upstream could read it as another path than the proxy does, and matched against a route's
 * prefix by whole segments. No I/O, no allocation; any thread. */
#include <stdbool.h>
#include <stddef.h>

/* Normalizes a request's path (len bytes, from the request line, before any '?') into out:
 * escapes of unreserved characters (ALPHA DIGIT - . _ ~) decoded, other escapes kept with
 * capital hex digits (RFC 3986 6.2.2), every other byte as it is, so that the result means
 * the same to every upstream. out has room for len bytes (the result is never longer) and
 * may be path itself; NULL checks only. Refused, so that a prefix stays a boundary for
 * upstreams that decode twice, strip path parameters (Tomcat, Jetty, Spring), take '\' for
 * '/' or fold Unicode compatibility forms:
 * - a segment, or a part of one between ';', made only of dots and spaces ("..", ".",
 *   "..;x=1", "%2e%2e", ".%2e;", "..%3B", "..%20", "...");
 * - an empty segment other than the last ("//", "/;x=1/"), a path not starting with '/';
 * - '\' or an encoded '/' or '\'; an encoded control character or NUL;
 * - "%25" followed by two hex digits (double encoding, "%252e");
 * - escapes of bytes that are not shortest-form UTF-8 ("%c0%ae"), or of a character whose
 *   compatibility form has '.', '/' or '\' (U+FF0E, U+FF0F, U+2024, ...);
 * - a malformed escape, any byte outside RFC 3986's pchar.
 * Returns 0 and *ret_len (if ret_len), or -EINVAL with *why a static phrase that starts
 * with "the path". */
int egress_path_normalize(const char *path, size_t len, char *out, size_t *ret_len,
                          const char **why);
/* Whether egress_path_normalize accepts path (len bytes). */
bool egress_path_safe(const char *path, size_t len);
/* Whether a normalized path (len bytes) lies under prefix by whole segments ("/v1" covers
 * "/v1" and "/v1/x", not "/v1x" or "/v1;x"; "/v1/" covers "/v1/x", not "/v1"; "/" covers
 * every path). prefix is read as egress_path_normalize would write it, so "/%61pi" and
 * "/api" are the same prefix. */
bool egress_path_under(const char *path, size_t len, const char *prefix);
