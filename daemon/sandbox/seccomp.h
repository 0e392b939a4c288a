/* SPDX-License-Identifier: MIT */
#pragma once
/* seccomp profiles: the YAML files of seccomp/ (or their copies compiled into sbxd) turned
 * into classic BPF with libseccomp, once at start-up, for the native architecture only.
 * Every profile gets the always-denied list (docs/SECCOMP.md) on top of its own rules. sbxd
 * sends a profile's program to sbxd-init in CTL_SETUP; the task's process installs it after
 * no_new_privs: as soon as it is cloned when bpf_early_ok allows, else just before
 * execve.
 *
 * Denial counting: where the kernel has SECCOMP_RET_USER_NOTIF and the profile keeps
 * `count_denials: true`, every counted errno denial is compiled as
 * SECCOMP_RET_USER_NOTIF | errno instead of SECCOMP_RET_ERRNO | errno (the kernel ignores
 * the low 16 bits of a USER_NOTIF return). The supervisor answers each notification with
 * the errno that bpf_eval() finds by running the same program over the
 * notification's seccomp_data, and counts it. Those helpers on compiled programs are in
 * wire/bpf.h: CHILD-SAFE and free of libseccomp, for sbxd-init. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

#include "lib/err.h"
#include "wire/bpf.h"

/* Every profile of a directory (or of the embedded copies), compiled. Immutable once
 * loaded, so any thread may read it. */
struct seccomp_set;

/* How seccomp_compile_text chooses between the two forms of a program. */
enum {
    /* USER_NOTIF for counted denials when the kernel supports it and the profile counts. */
    SECCOMP_COMPILE_AUTO = 0,
    /* SECCOMP_RET_ERRNO only: nothing to supervise, nothing counted. */
    SECCOMP_COMPILE_PLAIN = 1,
    /* USER_NOTIF when the profile counts, without asking the kernel (tests, dumps). */
    SECCOMP_COMPILE_NOTIFY = 2,
    /* Or-ed with one of the above: memfd_create refused with ENOSYS, replacing the profile's
     * rules for it. SECCOMP_COMPILE_AUTO adds it by itself when seccomp_memfd_noexec_fd()
     * fails (docs/SECCOMP.md, "Exec from writable memory"). */
    SECCOMP_COMPILE_DENY_MEMFD = 4,
};

/* vm.memfd_noexec (linux >= 6.3) belongs to a pid namespace: each sandbox's is set to 2
 * (spawn.c), so that no memfd of its tasks can be made executable. Returns >= 0 (the
 * sysctl's file, opened for writing once per process, CLOEXEC, never closed; spawn.c's
 * helpers write it at offset 0) when sbxd can set it, or -errno when it cannot (-ENOENT: the kernel
 * lacks it; -EACCES, -EROFS: not ours to write); then every profile compiled in
 * SECCOMP_COMPILE_AUTO form refuses memfd_create instead. The first call decides for the
 * process's life, so the profiles and the sandboxes always agree. Any thread. */
int seccomp_memfd_noexec_fd(void);

/* Loads and compiles every DIR/<name>.yaml (name: [a-z0-9_-]{1,32}), or the profiles
 * embedded in sbxd when dir is NULL. The first bad profile fails the whole set, with e
 * holding "file:line:col: message" (file as DIR/name.yaml or seccomp/name.yaml). Programs
 * are in SECCOMP_COMPILE_AUTO form. Returns 0, or -EINVAL (bad profile), -ENOENT (no such
 * directory, or no profile in it), -EFBIG (file or program too large), -E2BIG (more than 64
 * profiles or 4096 rules), -errno from the filesystem or libseccomp.
 * Start-up or reload only: it forks nothing but takes milliseconds per profile. */
int seccomp_set_load(const char *dir, struct seccomp_set **ret, struct err *e);

/* Compiles one profile from memory into a set of one. `file` names it in messages and, by
 * its base name without ".yaml", in the set (any name is accepted here). flags is one of
 * SECCOMP_COMPILE_*. Errors as seccomp_set_load. */
int seccomp_compile_text(const char *file, const char *text, size_t len, unsigned flags,
                         struct seccomp_set **ret, struct err *e);

/* Writes libseccomp's pseudo filter code (a readable listing of the same rules) of a
 * profile to fd. PFC omits the x32 check that the BPF has (docs/SECCOMP.md), and in the
 * counting form shows each counted denial as TRACE(errno), the placeholder that becomes
 * USER_NOTIF | errno in the BPF. Returns 0 or -errno with e set. */
int seccomp_compile_pfc(const char *file, const char *text, size_t len, unsigned flags, int fd,
                        struct err *e);

/* Compiles the built-in profile `name` (seccomp/<name>.yaml as embedded in sbxd) in the form
 * flags (SECCOMP_COMPILE_*) and writes its program to fd as raw struct sock_filter, the form
 * that bwrap --seccomp and prctl(PR_SET_SECCOMP) take. Returns 0, -ENOENT for no such
 * profile, or an error of seccomp_compile_text or of the write, with e set. */
int seccomp_export_embedded(const char *name, unsigned flags, int fd, struct err *e);

/* Frees s (NULL allowed) and returns NULL. */
struct seccomp_set *seccomp_set_free(struct seccomp_set *s);

/* The compiled program of a profile: *ret_insns stays owned by s and valid until
 * seccomp_set_free; *ret_n is at most BPF_MAXINSNS. Returns 0 or -ENOENT for an unknown
 * name. */
int seccomp_set_get(const struct seccomp_set *s, const char *name,
                    const struct sock_filter **ret_insns, uint32_t *ret_n);

/* The i-th profile's name (sorted by name), or NULL when i is past the end. */
const char *seccomp_set_name(const struct seccomp_set *s, size_t i);
