/* SPDX-License-Identifier: MIT */
#pragma once
/* Inside sandbox/'s seccomp: a profile's rules as seccomp_profile.c parses them from YAML,
 * seccomp_denied.c merges the always-denied list into, seccomp_compile.c compiles to BPF,
 * and seccomp.c keeps as named programs in a set. Nothing outside these four files includes
 * this header. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>
#include <seccomp.h>

#include "lib/err.h"

#define PROFILE_RULES_MAX 4096 /* one per syscall name of every rule */
#define SYSCALL_NAME_MAX 64
#define ARGS_MAX 6

enum act { ACT_ALLOW, ACT_ERRNO, ACT_KILL, ACT_LOG };

/* What happens to a call. counted: an errno denial that goes through USER_NOTIF (and so is
 * counted) when the program is compiled for counting. */
struct verdict {
    enum act act;
    int err;
    bool counted;
};

/* A position in a file, 1-based; line 0: not from a file (the always-denied list). */
struct mark {
    size_t line;
    size_t col;
};

struct cmp {
    unsigned index;
    enum scmp_compare op;
    uint64_t value;
    uint64_t mask;
};

struct rule {
    int nr;
    char name[SYSCALL_NAME_MAX + 1];
    struct verdict v;
    struct cmp cmps[ARGS_MAX];
    unsigned n_cmps;
    struct mark m; /* of the syscall's name in its `names:` list */
};

struct profile {
    struct verdict def;
    bool count;
    struct rule *rules;
    size_t n, cap;
};

/* A compiled profile: its name (the file's base name) and its program. */
struct prog {
    char *name;
    struct sock_filter *insns;
    uint32_t n;
};

/* seccomp_profile.c */

/* Sets e to "file:line:col: msg" (or "file: msg" when m.line is 0) and returns r. */
int seccomp_profile_failr(struct err *e, int r, const char *file, struct mark m, const char *fmt,
                          ...) __attribute__((format(printf, 5, 6)));
#define fail(e, file, m, ...) seccomp_profile_failr((e), -EINVAL, (file), (m), __VA_ARGS__)
/* A new zeroed rule at the end of p's (which grow as needed; xrealloc aborts on OOM). */
struct rule *seccomp_profile_push(struct profile *p);
/* Frees p's rules and zeroes p (a scoped() cleanup). */
void seccomp_profile_done(struct profile *p);
/* "dir/strict.yaml" -> "strict", allocated. */
char *seccomp_profile_name(const char *file);
/* Parses text (named file in messages) into p's default verdict, count flag and rules.
 * Returns 0 or -EINVAL/-ENOMEM/-E2BIG with e set ("file:line:col: message"). */
int seccomp_profile_parse(const char *file, const char *text, size_t len, struct profile *p,
                          struct err *e);

/* seccomp_denied.c */

/* in's rules with the always-denied list applied, into out (empty); with deny_memfd,
 * memfd_create is refused (ENOSYS, counted) in place of in's rules for it. Returns 0 or
 * -EINVAL with e set for a rule that allows a listed call or puts args on one. */
int seccomp_denied_merge(const char *file, const struct profile *in, bool deny_memfd,
                         struct profile *out, struct err *e);

/* seccomp_compile.c */

/* Parses, merges and compiles a profile in the form flags (SECCOMP_COMPILE_*) into *ret:
 * name and insns allocated, owned by the caller. Errors as seccomp_compile_text. */
int seccomp_compile_prog(const char *file, const char *text, size_t len, unsigned flags,
                         struct prog *ret, struct err *e);
