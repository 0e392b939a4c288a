/* SPDX-License-Identifier: MIT */
/* struct task_spec's strings (argv and env in one block, as CTL_TASK carries them), its
 * grants' resources, and its packing into CTL_TASK. It never reads msgpack (api/ decodes)
 * and never sends (sandbox.c does). */
#include "sandbox/task_spec.h"

#include <assert.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"
#include "wire/egress_parse.h"

void task_spec_begin(struct task_spec *s, size_t limit)
{
    assert(limit <= TASK_SPEC_STRINGS_MAX);
    free(s->strings);
    /* One block for the whole request, as big as it may grow: nothing is reallocated while
     * decoding, and the pages it does not fill are never touched. */
    s->strings = xmalloc(limit > 0 ? limit : 1);
    s->cap = limit;
    s->limit = limit;
    s->len = s->env_off = 0;
    s->argc = s->envc = s->env_base = 0;
}

int task_spec_add_arg(struct task_spec *s, const char *arg, size_t len)
{
    assert(s->envc == 0);
    if (len > 0 && memchr(arg, '\0', len)) {
        return -EINVAL;
    }
    if (s->len + len + 1 > s->limit) {
        return -E2BIG;
    }
    memcpy(s->strings + s->len, arg, len);
    s->strings[s->len + len] = '\0';
    s->len += len + 1;
    s->env_off = s->len;
    s->argc++;
    return 0;
}

int task_spec_add_env(struct task_spec *s, const char *name, size_t name_len, const char *value,
                      size_t value_len, bool base)
{
    assert(!base || s->env_base == s->envc);
    if (s->len + name_len + 1 + value_len + 1 > s->limit) {
        return -E2BIG;
    }
    char *o = s->strings + s->len;
    memcpy(o, name, name_len);
    o[name_len] = '=';
    memcpy(o + name_len + 1, value, value_len);
    o[name_len + 1 + value_len] = '\0';
    s->len += name_len + 1 + value_len + 1;
    s->envc++;
    s->env_base += base ? 1 : 0;
    return 0;
}

/* Whether kv ("NAME=value") sets name (name_len bytes). */
static bool env_is(const char *kv, const char *name, size_t name_len)
{
    return strncmp(kv, name, name_len) == 0 && kv[name_len] == '=';
}

/* Whether kv sets one of the n names. */
static bool env_is_any(const char *kv, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (env_is(kv, names[i], strlen(names[i]))) {
            return true;
        }
    }
    return false;
}

/* Removes the env strings that set any of the n names, keeping the others' order, in one
 * pass. */
static void env_remove(struct task_spec *s, size_t start, const char *const *names, size_t n)
{
    size_t o = start;
    uint32_t envc = 0, base = 0;
    for (size_t off = start, i = 0; off < s->len; i++) {
        size_t len = strlen(s->strings + off) + 1;
        if (!env_is_any(s->strings + off, names, n)) {
            memmove(s->strings + o, s->strings + off, len);
            o += len;
            envc++;
            base += i < s->env_base ? 1 : 0;
        }
        off += len;
    }
    s->len = o;
    s->envc = envc;
    s->env_base = base;
}

/* Appends "name=value" to the env; the caller made room (len <= s->cap). */
static void env_append(struct task_spec *s, const char *name, const char *value)
{
    size_t name_len = strlen(name);
    size_t value_len = strlen(value);
    char *kv = s->strings + s->len;
    memcpy(kv, name, name_len);
    kv[name_len] = '=';
    memcpy(kv + name_len + 1, value, value_len + 1);
    s->len += name_len + 1 + value_len + 1;
    s->envc++;
}

/* Makes room for len bytes of strings in all. */
static void strings_reserve(struct task_spec *s, size_t len)
{
    if (len > s->cap) {
        s->strings = xrealloc(s->strings, len);
        s->cap = len;
    }
}

void task_spec_env_unset(struct task_spec *s, const char *name)
{
    if (s->strings) {
        env_remove(s, s->env_off, &name, 1);
    }
}

int task_spec_env_set(struct task_spec *s, const char *name, const char *value, struct err *e)
{
    size_t name_len = strlen(name);
    size_t value_len = strlen(value);
    size_t start = s->env_off;
    /* First what it takes, so that a refusal leaves s as it was. */
    size_t drop = 0;
    for (size_t off = start; off < s->len;) {
        size_t n = strlen(s->strings + off) + 1;
        drop += env_is(s->strings + off, name, name_len) ? n : 0;
        off += n;
    }
    size_t len = s->len - drop + name_len + 1 + value_len + 1;
    if (len > TASK_SPEC_STRINGS_MAX) {
        return err_setx(e, -E2BIG, "argv and env exceed %d bytes", TASK_SPEC_STRINGS_MAX);
    }
    if (drop > 0) {
        env_remove(s, start, &name, 1);
    }
    strings_reserve(s, len);
    env_append(s, name, value);
    return 0;
}

int task_spec_set_proxy(struct task_spec *s, uint16_t port, struct err *e)
{
    char url[EGRESS_PROXY_URL_MAX];
    egress_parse_proxy_url(port, url, sizeof(url));
    const char *names[EGRESS_PROXY_VARS];
    size_t add = 0;
    for (size_t i = 0; i < EGRESS_PROXY_VARS; i++) {
        names[i] = egress_parse_proxy_var(i);
        add += strlen(names[i]) + 1 + strlen(url) + 1;
    }
    /* The request's own values go first, in one pass, so that the block grows at most once,
     * to its final length. */
    env_remove(s, s->env_off, names, EGRESS_PROXY_VARS);
    if (s->len + add > TASK_SPEC_STRINGS_MAX) {
        return err_setx(e, -E2BIG, "argv and env exceed %d bytes with the proxy variables",
                        TASK_SPEC_STRINGS_MAX);
    }
    strings_reserve(s, s->len + add);
    for (size_t i = 0; i < EGRESS_PROXY_VARS; i++) {
        env_append(s, names[i], url);
    }
    return 0;
}

static void iter_at(const struct task_spec *s, size_t off, uint32_t n, struct task_spec_iter *it)
{
    it->p = s->strings ? s->strings + off : NULL;
    it->end = s->strings ? s->strings + s->len : NULL;
    it->left = n;
}

void task_spec_argv(const struct task_spec *s, struct task_spec_iter *it)
{
    iter_at(s, 0, s->argc, it);
}

void task_spec_request_env(const struct task_spec *s, struct task_spec_iter *it)
{
    size_t off = s->env_off;
    for (uint32_t i = 0; i < s->env_base; i++) {
        off += strlen(s->strings + off) + 1;
    }
    iter_at(s, off, s->envc - s->env_base, it);
}

bool task_spec_next(struct task_spec_iter *it, const char **ret, size_t *ret_len)
{
    if (it->left == 0 || it->p >= it->end) {
        return false;
    }
    size_t n = strlen(it->p);
    *ret = it->p;
    *ret_len = n;
    it->p += n + 1;
    it->left--;
    return true;
}

int task_spec_pack(const struct task_spec *s, uint32_t nofile, struct ctl_task *ret, struct err *e)
{
    if (s->argc == 0 || !s->strings) {
        return err_setx(e, -EINVAL, "task has no argv");
    }
    if (s->len > TASK_SPEC_STRINGS_MAX) {
        return err_setx(e, -E2BIG, "argv and env exceed %d bytes", TASK_SPEC_STRINGS_MAX);
    }
    if (s->n_mounts > TASK_SPEC_MOUNTS_MAX) {
        return err_setx(e, -EINVAL, "%u mounts, at most %d", s->n_mounts, TASK_SPEC_MOUNTS_MAX);
    }
    memset(ret, 0, sizeof(*ret));
    ret->magic = CTL_MAGIC;
    ret->type = CTL_TASK;
    ret->flags = s->keep ? CTL_TASK_KEEP : 0;
    ret->argc = s->argc;
    ret->envc = s->envc;
    ret->nofile = nofile;
    ret->data_len = (uint32_t)s->len;
    memcpy(ret->cwd, s->cwd, sizeof(ret->cwd));
    ret->n_mounts = s->n_mounts;
    ret->mount_files = s->mount_files;
    memcpy(ret->mount_dst, s->mount_dst, s->n_mounts * sizeof(ret->mount_dst[0]));
    return 0;
}

void task_spec_drop_payload(struct task_spec *s)
{
    free(s->strings);
    s->strings = NULL;
    s->len = s->cap = s->limit = s->env_off = 0;
    s->argc = s->envc = s->env_base = 0;
    for (uint32_t i = 0; i < s->n_mounts; i++) {
        s->mount_fds[i] = fd_close(s->mount_fds[i]);
    }
    task_spec_files_free(s->files, s->n_files);
    s->files = NULL;
    s->n_files = 0;
}

void task_spec_files_free(struct task_spec_file *files, uint32_t n)
{
    for (uint32_t i = 0; files && i < n; i++) {
        free(files[i].path);
        free(files[i].data);
    }
    free(files);
}

void task_spec_move(struct task_spec *dst, struct task_spec *src)
{
    *dst = *src;
    src->strings = NULL;
    src->token_id = NULL;
    src->net_profile = NULL;
    src->n_mounts = 0;
    src->files = NULL;
    src->n_files = 0;
    src->collect = NULL;
    src->n_collect = 0;
    src->len = src->cap = src->limit = src->env_off = 0;
    src->argc = src->envc = src->env_base = 0;
}

void task_spec_clear(struct task_spec *s)
{
    if (!s) {
        return;
    }
    task_spec_drop_payload(s);
    free(s->token_id);
    free(s->net_profile);
    s->token_id = s->net_profile = NULL;
    s->n_mounts = 0;
    for (uint32_t i = 0; i < s->n_collect; i++) {
        free(s->collect[i]);
    }
    free(s->collect);
    s->collect = NULL;
    s->n_collect = 0;
}
