/* SPDX-License-Identifier: MIT */
#pragma once
/* Paths and collect patterns a client names under a sandbox's /work: one normal form
 * relative to /work ("a/b"), the spellings that could leave it refused, and patterns matched
 * component by component. No I/O, no allocation; any thread. */
#include <stdbool.h>
#include <stddef.h>

/* The longest component (NAME_MAX). */
#define WSPATH_COMPONENT_MAX 255
/* The most components a normalized path or pattern can have: a path of at most max_len
 * bytes has at most max_len / 2 + 1 of them; wspath_match and wspath_match_dir are
 * defined for patterns of at most this many (longer ones match nothing). */
#define WSPATH_PATTERN_COMPONENTS_MAX 1024

/* Normalizes a client's path (len bytes, not NUL-terminated) into out as a path relative to
 * /work: "a/b", "./a/b", "a//b/", "/work/a/b" and "/work//./a/b" all give "a/b". Refused:
 * an empty path, a NUL byte, any ".." component, an absolute path outside /work (only
 * "/work" followed by '/' is accepted), /work itself ("/work", ".", "/work/."), a component
 * over WSPATH_COMPONENT_MAX bytes, a path longer than max_len (the pool's files_path_max,
 * counted on the client's spelling). out must have room for len + 1 bytes (the result is
 * never longer and is NUL-terminated); a smaller out_size is -ENAMETOOLONG. Returns 0, or
 * -EINVAL / -ENAMETOOLONG with *why a static phrase that starts with "the path" (why may be
 * NULL). */
int wspath_normalize(const char *path, size_t len, size_t max_len, char *out, size_t out_size,
                     const char **why);
/* The same for a directory to list, where /work itself is allowed: "/work", "/work/", "."
 * and "./" give "" (what workspace_list takes for the root). */
int wspath_normalize_dir(const char *path, size_t len, size_t max_len, char *out, size_t out_size,
                         const char **why);
/* The same as wspath_normalize for a collect pattern: a component may hold fnmatch(3) syntax (`*`,
 * `?`,
 * `[...]`, `\` escapes; it matches within one component, dot files included), and a
 * component that is exactly "**" matches zero or more components; adjacent "**" collapse
 * into one. Refused besides what wspath_normalize refuses: "**" inside a longer component,
 * more than WSPATH_PATTERN_COMPONENTS_MAX components. *why starts with "the pattern". */
int wspath_pattern_normalize(const char *pat, size_t len, size_t max_len, char *out,
                             size_t out_size, const char **why);
/* Whether rel (a normalized relative path) matches a normalized pattern. Linear in the
 * components of both for each "**" (no exponential backtracking). */
bool wspath_match(const char *pattern, const char *rel);
/* Whether a path strictly under the directory dir (a normalized relative path; "" is /work
 * itself) could match pattern, that is whether a walk looking for pattern's matches must
 * descend into dir. */
bool wspath_match_dir(const char *pattern, const char *dir);
