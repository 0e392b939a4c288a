/* SPDX-License-Identifier: MIT */
/* seccomp profiles, the set: every profile of a directory (or of the copies embedded in
 * sbxd) compiled by seccomp_compile.c and kept by name, and the built-in profiles exported
 * one at a time. Start-up or reload only. Never installs a filter, forks, or logs above
 * debug; the profile files are the only thing it touches. */
#define LOG_MOD "seccomp"
#include "sandbox/seccomp.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "config/embedded.h"
#include "lib/alloc.h"
#include "lib/textfile.h"
#include "lib/util.h"
#include "sandbox/seccomp_impl.h"

/* Profiles are small; anything bigger is a mistake, not a profile. */
#define PROFILE_FILE_MAX (1024 * 1024)
#define PROFILES_MAX 64
#define NAME_LEN_MAX 32

struct seccomp_set {
    struct prog *progs;
    size_t n;
};

int seccomp_export_embedded(const char *name, unsigned flags, int fd, struct err *e)
{
    for (size_t i = 0; i < embedded_n_seccomp; i++) {
        const struct embedded_file *f = &embedded_seccomp[i];
        scoped_free char *fname = seccomp_profile_name(f->name);
        if (strcmp(fname, name) != 0) {
            continue;
        }
        struct prog p = {0};
        int r = seccomp_compile_prog(f->name, f->text, f->len, flags, &p, e);
        if (r < 0) {
            return r;
        }
        r = fd_write_all(fd, p.insns, (size_t)p.n * sizeof(*p.insns));
        free(p.insns);
        free(p.name);
        return r < 0 ? err_set(e, r, "write the program of '%s'", name) : 0;
    }
    return err_setx(e, -ENOENT, "no seccomp profile '%s' is built in", name);
}

struct seccomp_set *seccomp_set_free(struct seccomp_set *s)
{
    if (!s) {
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        free(s->progs[i].name);
        free(s->progs[i].insns);
    }
    free(s->progs);
    free(s);
    return NULL;
}

static void set_freep(struct seccomp_set **s)
{
    *s = seccomp_set_free(*s);
}

static bool name_ok(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) {
            return false;
        }
    }
    return n >= 1 && n <= NAME_LEN_MAX;
}

static int set_add(struct seccomp_set *s, const char *file, const char *text, size_t len,
                   unsigned flags, bool check_name, struct err *e)
{
    struct prog p = {NULL, NULL, 0};
    if (check_name) {
        scoped_free char *name = seccomp_profile_name(file);
        if (!name_ok(name)) {
            return err_setx(e, -EINVAL, "%s: a profile's name must match [a-z0-9_-]{1,32}", file);
        }
    }
    if (s->n >= PROFILES_MAX) {
        return err_setx(e, -E2BIG, "%s: more than %d profiles", file, PROFILES_MAX);
    }
    int r = seccomp_compile_prog(file, text, len, flags, &p, e);
    if (r < 0) {
        return r;
    }
    s->progs = xrealloc(s->progs, (s->n + 1) * sizeof(*s->progs));
    s->progs[s->n++] = p;
    return 0;
}

int seccomp_compile_text(const char *file, const char *text, size_t len, unsigned flags,
                         struct seccomp_set **ret, struct err *e)
{
    scoped(set_freep) struct seccomp_set *s = xcalloc(1, sizeof(*s));
    int r = set_add(s, file, text, len, flags, false, e);
    if (r < 0) {
        return r;
    }
    *ret = take_ptr(&s);
    return 0;
}

/* Reads a regular file of at most PROFILE_FILE_MAX bytes, NUL-terminated. */
static int read_text(const char *path, char **ret, size_t *ret_len, struct err *e)
{
    return textfile_read(AT_FDCWD, path, path, PROFILE_FILE_MAX, ret, ret_len, e);
}

static int is_profile_file(const struct dirent *de)
{
    size_t len = strlen(de->d_name);
    return de->d_name[0] != '.' && len > 5 && strcmp(de->d_name + len - 5, ".yaml") == 0;
}

struct dir_list {
    struct dirent **v;
    int n;
};

static void dir_list_done(struct dir_list *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i]);
    }
    free(l->v);
}

/* Every *.yaml of dir (hidden files aside), in name order. */
static int set_add_dir(struct seccomp_set *s, const char *dir, struct err *e)
{
    scoped(dir_list_done) struct dir_list l = {NULL, 0};
    size_t dlen = strlen(dir);

    int n = scandir(dir, &l.v, is_profile_file, alphasort);
    if (n < 0) {
        return err_set(e, -errno, "seccomp profiles '%s': cannot open", dir);
    }
    l.n = n;
    if (n > PROFILES_MAX) {
        return err_setx(e, -E2BIG, "seccomp profiles '%s': more than %d files", dir, PROFILES_MAX);
    }
    while (dlen > 1 && dir[dlen - 1] == '/') {
        dlen--;
    }
    for (int i = 0; i < n; i++) {
        scoped_free char *path = xasprintf("%.*s/%s", (int)dlen, dir, l.v[i]->d_name);
        scoped_free char *text = NULL;
        size_t len = 0;
        int r = read_text(path, &text, &len, e);
        if (r < 0) {
            return r;
        }
        r = set_add(s, path, text, len, SECCOMP_COMPILE_AUTO, true, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

static int prog_cmp(const void *a, const void *b)
{
    return strcmp(((const struct prog *)a)->name, ((const struct prog *)b)->name);
}

int seccomp_set_load(const char *dir, struct seccomp_set **ret, struct err *e)
{
    scoped(set_freep) struct seccomp_set *s = xcalloc(1, sizeof(*s));
    int r = 0;

    if (dir) {
        r = set_add_dir(s, dir, e);
    } else {
        for (size_t i = 0; r == 0 && i < embedded_n_seccomp; i++) {
            const struct embedded_file *f = &embedded_seccomp[i];
            r = set_add(s, f->name, f->text, f->len, SECCOMP_COMPILE_AUTO, true, e);
        }
    }
    if (r < 0) {
        return r;
    }
    if (s->n == 0) {
        return err_setx(e, -ENOENT, "seccomp profiles '%s': no *.yaml profile",
                        dir ? dir : "<embedded>");
    }
    qsort(s->progs, s->n, sizeof(*s->progs), prog_cmp);
    for (size_t i = 1; i < s->n; i++) {
        if (strcmp(s->progs[i - 1].name, s->progs[i].name) == 0) {
            return err_setx(e, -EINVAL, "seccomp profile '%s' is defined twice", s->progs[i].name);
        }
    }
    *ret = take_ptr(&s);
    return 0;
}

int seccomp_set_get(const struct seccomp_set *s, const char *name,
                    const struct sock_filter **ret_insns, uint32_t *ret_n)
{
    for (size_t i = 0; i < s->n; i++) {
        if (strcmp(s->progs[i].name, name) == 0) {
            *ret_insns = s->progs[i].insns;
            *ret_n = s->progs[i].n;
            return 0;
        }
    }
    return -ENOENT;
}

const char *seccomp_set_name(const struct seccomp_set *s, size_t i)
{
    return i < s->n ? s->progs[i].name : NULL;
}
