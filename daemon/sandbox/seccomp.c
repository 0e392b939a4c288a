/* SPDX-License-Identifier: MIT */
/* seccomp profiles: YAML through libyaml's document API into rules, the always-denied list
 * merged in, then libseccomp to classic BPF for the native architecture, read back through a
 * memfd. Start-up or reload only. Never installs a filter, forks, or logs above debug; the
 * profile files are the only thing it touches. */
#define LOG_MOD "seccomp"
#include "sandbox/seccomp.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <seccomp.h>
#include <yaml.h>

#include "lib/alloc.h"
#include "wire/ctl.h"
#include "config/embedded.h"
#include "lib/log.h"
#include "lib/textfile.h"
#include "lib/yamlnode.h"
#include "lib/util.h"

/* Profiles are small; anything bigger is a mistake, not a profile. */
#define PROFILE_FILE_MAX (1024 * 1024)
#define PROFILES_MAX 64
#define PROFILE_RULES_MAX 4096 /* one per syscall name of every rule */
#define NAME_LEN_MAX 32
#define SYSCALL_NAME_MAX 64
#define ARGS_MAX 6

/* Namespace flags of clone(2)'s first argument. CLONE_NEWTIME (0x80) is not among them: in
 * clone(2) that bit belongs to the exit signal, and only clone3 and unshare take it. */
#define CLONE_NS_FLAGS                                                                             \
    (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |  \
     CLONE_NEWNET)

/* personality(2) takes an unsigned int, so the kernel sees only the low 32 bits of the
 * register and every comparison below masks them. Allowed: PER_LINUX (0), PER_LINUX32 (8,
 * what `linux32`/`setarch i686` set: uname says i686, nothing else changes on x86_64) and
 * 0xffffffff (query, changes nothing). Everything else, ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC
 * and MMAP_PAGE_ZERO among it, is denied. */
#define PERSONA_LO32 0xffffffffULL
static const uint32_t persona_allowed[] = {0x0, 0x8, 0xffffffff};

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

/* ---- The always-denied list (docs/SECCOMP.md explains each entry) ---- */

enum deny_kind {
    DENY_WHOLE,       /* every call */
    DENY_CLONE,       /* calls with a CLONE_NEW* flag in arg0 */
    DENY_PERSONALITY, /* calls whose arg0 is not in persona_allowed */
};

static const struct denied {
    const char *name;
    int err;
    enum deny_kind kind;
} always_denied[] = {
    /* Other processes' memory and execution. */
    {"ptrace", EPERM, DENY_WHOLE},
    {"process_vm_readv", EPERM, DENY_WHOLE},
    {"process_vm_writev", EPERM, DENY_WHOLE},
    /* Mounts, roots and namespaces: the sandbox's shape is fixed before the task runs. */
    {"mount", EPERM, DENY_WHOLE},
    {"umount2", EPERM, DENY_WHOLE},
    {"pivot_root", EPERM, DENY_WHOLE},
    {"chroot", EPERM, DENY_WHOLE},
    {"unshare", EPERM, DENY_WHOLE},
    {"setns", EPERM, DENY_WHOLE},
    {"mount_setattr", EPERM, DENY_WHOLE},
    {"fsopen", EPERM, DENY_WHOLE},
    {"fsmount", EPERM, DENY_WHOLE},
    {"fsconfig", EPERM, DENY_WHOLE},
    {"fspick", EPERM, DENY_WHOLE},
    {"open_tree", EPERM, DENY_WHOLE},
    {"move_mount", EPERM, DENY_WHOLE},
    {"clone", EPERM, DENY_CLONE},
    /* clone3 passes its flags in memory that a filter cannot read: ENOSYS makes glibc fall
     * back to clone, whose flags it can. Not counted: glibc tries it on every thread and
     * every posix_spawn, so it is no sign of a misbehaving task. */
    {"clone3", ENOSYS, DENY_WHOLE},
    /* Kernel keyrings are not namespaced. */
    {"keyctl", EPERM, DENY_WHOLE},
    {"add_key", EPERM, DENY_WHOLE},
    {"request_key", EPERM, DENY_WHOLE},
    /* Large kernel attack surface, rarely needed by a task. */
    {"bpf", EPERM, DENY_WHOLE},
    {"perf_event_open", EPERM, DENY_WHOLE},
    {"userfaultfd", EPERM, DENY_WHOLE},
    {"io_uring_setup", EPERM, DENY_WHOLE},
    {"io_uring_enter", EPERM, DENY_WHOLE},
    {"io_uring_register", EPERM, DENY_WHOLE},
    /* File handles bypass the mount tree (the "shocker" escape). */
    {"open_by_handle_at", EPERM, DENY_WHOLE},
    {"name_to_handle_at", EPERM, DENY_WHOLE},
    /* The machine itself: kernels, modules, I/O ports, swap, power, accounting, quotas,
     * the kernel log, the clock, and the terminal. */
    {"kexec_load", EPERM, DENY_WHOLE},
    {"kexec_file_load", EPERM, DENY_WHOLE},
    {"init_module", EPERM, DENY_WHOLE},
    {"finit_module", EPERM, DENY_WHOLE},
    {"delete_module", EPERM, DENY_WHOLE},
    {"iopl", EPERM, DENY_WHOLE},
    {"ioperm", EPERM, DENY_WHOLE},
    {"swapon", EPERM, DENY_WHOLE},
    {"swapoff", EPERM, DENY_WHOLE},
    {"reboot", EPERM, DENY_WHOLE},
    {"acct", EPERM, DENY_WHOLE},
    {"quotactl", EPERM, DENY_WHOLE},
    {"syslog", EPERM, DENY_WHOLE},
    {"settimeofday", EPERM, DENY_WHOLE},
    {"clock_settime", EPERM, DENY_WHOLE},
    {"clock_adjtime", EPERM, DENY_WHOLE},
    {"adjtimex", EPERM, DENY_WHOLE},
    {"fanotify_init", EPERM, DENY_WHOLE},
    {"lookup_dcookie", EPERM, DENY_WHOLE},
    {"vhangup", EPERM, DENY_WHOLE},
    /* NUMA placement: other tenants' memory locality. */
    {"mbind", EPERM, DENY_WHOLE},
    {"set_mempolicy", EPERM, DENY_WHOLE},
    {"move_pages", EPERM, DENY_WHOLE},
    /* Execution domains: ASLR and exec permissions are not the task's to change. */
    {"personality", EPERM, DENY_PERSONALITY},
};

/* The entry for syscall nr, given the list's numbers on this architecture (-1: absent). */
static const struct denied *denied_find(const int *nrs, int nr)
{
    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        if (nrs[i] == nr) {
            return &always_denied[i];
        }
    }
    return NULL;
}

/* ---- Errors and YAML ---- */

static int failr(struct err *e, int r, const char *file, struct mark m, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int failr(struct err *e, int r, const char *file, struct mark m, const char *fmt, ...)
{
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (m.line > 0) {
        return err_setx(e, r, "%s:%zu:%zu: %s", file, m.line, m.col, msg);
    }
    return err_setx(e, r, "%s: %s", file, msg);
}

#define fail(e, file, m, ...) failr((e), -EINVAL, (file), (m), __VA_ARGS__)

static struct mark mark_of(yaml_mark_t m)
{
    struct yaml_pos q = yamlnode_pos(m);
    return (struct mark){q.line, q.col};
}

static struct mark node_mark(const yaml_node_t *n)
{
    return mark_of(n->start_mark);
}

static int yaml_fail(const char *file, const char *text, size_t len, const yaml_parser_t *p,
                     struct err *e)
{
    char msg[ERR_MSG_MAX];
    struct yaml_pos q;
    if (yamlnode_problem(p, text, len, &q, msg, sizeof(msg)) < 0) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    return fail(e, file, ((struct mark){q.line, q.col}), "%s", msg);
}

struct ydoc {
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_document_t extra;
    bool parser_ready, loaded, extra_loaded;
};

static void ydoc_done(struct ydoc *y)
{
    if (y->extra_loaded) {
        yaml_document_delete(&y->extra);
    }
    if (y->loaded) {
        yaml_document_delete(&y->doc);
    }
    if (y->parser_ready) {
        yaml_parser_delete(&y->parser);
    }
    y->extra_loaded = y->loaded = y->parser_ready = false;
}

/* Parses text as exactly one YAML document. */
static int ydoc_load(const char *file, const char *text, size_t len, struct ydoc *y, struct err *e)
{
    if (!yaml_parser_initialize(&y->parser)) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    y->parser_ready = true;
    yaml_parser_set_input_string(&y->parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&y->parser, &y->doc)) {
        return yaml_fail(file, text, len, &y->parser, e);
    }
    y->loaded = true;
    if (!yaml_parser_load(&y->parser, &y->extra)) {
        return yaml_fail(file, text, len, &y->parser, e);
    }
    y->extra_loaded = true;
    yaml_node_t *root = yaml_document_get_root_node(&y->extra);
    if (root) {
        return fail(e, file, node_mark(root), "only one YAML document is allowed");
    }
    return 0;
}

struct parse {
    const char *file;
    yaml_document_t *doc;
    struct profile *p;
};

/* The text of a scalar node that names `what`; refuses other node kinds and NUL bytes. */
static int scalar(const struct parse *ps, const yaml_node_t *n, const char *what, const char **ret,
                  struct err *e)
{
    if (n->type != YAML_SCALAR_NODE) {
        return fail(e, ps->file, node_mark(n), "'%s' must be a scalar, not %s", what,
                    yamlnode_kind(n));
    }
    const char *s = (const char *)n->data.scalar.value;
    if (strlen(s) != n->data.scalar.length) {
        return fail(e, ps->file, node_mark(n), "'%s' must not contain NUL bytes", what);
    }
    *ret = s;
    return 0;
}

/* The items of a sequence node (a null node is an empty sequence). */
static int sequence(const struct parse *ps, yaml_node_t *n, const char *what,
                    yaml_node_item_t **ret_start, yaml_node_item_t **ret_end, struct err *e)
{
    if (yamlnode_is_null(n)) {
        *ret_start = *ret_end = NULL;
        return 0;
    }
    if (n->type != YAML_SEQUENCE_NODE) {
        return fail(e, ps->file, node_mark(n), "'%s' must be a sequence, not %s", what,
                    yamlnode_kind(n));
    }
    *ret_start = n->data.sequence.items.start;
    *ret_end = n->data.sequence.items.top;
    return 0;
}

struct slot {
    const char *key;
    yaml_node_t *value;
    struct mark key_mark;
};

/* Sorts a mapping's values into slots by key; unknown and repeated keys are errors.
 * `where` completes "unknown key 'x'" for nested mappings. */
static int map_slots(const struct parse *ps, yaml_node_t *map, const char *what, const char *where,
                     struct slot *slots, size_t n, struct err *e)
{
    if (map->type != YAML_MAPPING_NODE) {
        return fail(e, ps->file, node_mark(map), "%s must be a mapping, not %s", what,
                    yamlnode_kind(map));
    }
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(ps->doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(ps->doc, pair->value);
        if (!k || !v) {
            return fail(e, ps->file, node_mark(map), "malformed mapping");
        }
        const char *key = NULL;
        int r = scalar(ps, k, "key", &key, e);
        if (r < 0) {
            return r;
        }
        struct slot *s = NULL;
        for (size_t i = 0; i < n && !s; i++) {
            if (strcmp(slots[i].key, key) == 0) {
                s = &slots[i];
            }
        }
        if (!s) {
            return fail(e, ps->file, node_mark(k), "unknown key '%.64s'%s", key, where);
        }
        if (s->value) {
            return fail(e, ps->file, node_mark(k), "duplicate key '%s' (first at %zu:%zu)", s->key,
                        s->key_mark.line, s->key_mark.col);
        }
        s->value = v;
        s->key_mark = node_mark(k);
    }
    return 0;
}

/* ---- Values ---- */

static int parse_action(const struct parse *ps, const yaml_node_t *n, enum act *ret, struct err *e)
{
    static const struct {
        const char *name;
        enum act act;
    } acts[] = {{"allow", ACT_ALLOW}, {"errno", ACT_ERRNO}, {"kill", ACT_KILL}, {"log", ACT_LOG}};
    const char *s = NULL;
    int r = scalar(ps, n, "action", &s, e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < ARRAY_SIZE(acts); i++) {
        if (strcmp(s, acts[i].name) == 0) {
            *ret = acts[i].act;
            return 0;
        }
    }
    return fail(e, ps->file, node_mark(n), "unknown action '%.64s' (allow, errno, kill or log)", s);
}

/* An errno by its symbolic name ("EPERM"), as glibc knows them. */
static int parse_errno(const struct parse *ps, const yaml_node_t *n, int *ret, struct err *e)
{
    const char *s = NULL;
    int r = scalar(ps, n, "errno", &s, e);
    if (r < 0) {
        return r;
    }
    for (int i = 1; i < 512; i++) {
        const char *name = strerrorname_np(i);
        if (name && strcmp(name, s) == 0) {
            *ret = i;
            return 0;
        }
    }
    return fail(e, ps->file, node_mark(n), "unknown errno '%.64s'", s);
}

/* A decimal or 0x-prefixed hexadecimal 64-bit number. */
static int parse_number(const struct parse *ps, const yaml_node_t *n, const char *what,
                        uint64_t *ret, struct err *e)
{
    const char *s = NULL;
    int r = scalar(ps, n, what, &s, e);
    if (r < 0) {
        return r;
    }
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        uint64_t v = 0;
        size_t i = 2;
        for (; s[i]; i++) {
            char ch = s[i];
            unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                         : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                         : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                                  : 16u;
            if (d == 16 || i >= 18) {
                break;
            }
            v = v << 4 | d;
        }
        if (i > 2 && s[i] == '\0') {
            *ret = v;
            return 0;
        }
    } else if (parse_u64(s, ret) == 0) {
        return 0;
    }
    return fail(e, ps->file, node_mark(n), "'%s' must be a 64-bit number (decimal or 0x hex)",
                what);
}

static int parse_bool(const struct parse *ps, const yaml_node_t *n, const char *what, bool *ret,
                      struct err *e)
{
    const char *s = NULL;
    int r = scalar(ps, n, what, &s, e);
    if (r < 0) {
        return r;
    }
    if (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0) {
        *ret = true;
    } else if (strcmp(s, "false") == 0 || strcmp(s, "no") == 0) {
        *ret = false;
    } else {
        return fail(e, ps->file, node_mark(n), "'%s' must be true or false", what);
    }
    return 0;
}

/* `action:` plus the optional `errno:` beside it (default EPERM, only with errno). */
static int parse_verdict(const struct parse *ps, const yaml_node_t *act_node,
                         const yaml_node_t *errno_node, const char *errno_key, struct verdict *ret,
                         struct err *e)
{
    struct verdict v = {ACT_ALLOW, 0, true};
    int r = parse_action(ps, act_node, &v.act, e);
    if (r < 0) {
        return r;
    }
    if (v.act == ACT_ERRNO) {
        v.err = EPERM;
        if (errno_node) {
            r = parse_errno(ps, errno_node, &v.err, e);
            if (r < 0) {
                return r;
            }
        }
    } else if (errno_node) {
        return fail(e, ps->file, node_mark(errno_node), "'%s' needs action errno", errno_key);
    }
    *ret = v;
    return 0;
}

/* ---- Rules ---- */

static int parse_cmp(const struct parse *ps, yaml_node_t *n, struct cmp *ret, struct err *e)
{
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {
        {"eq", SCMP_CMP_EQ},
        {"ne", SCMP_CMP_NE},
        {"lt", SCMP_CMP_LT},
        {"le", SCMP_CMP_LE},
        {"gt", SCMP_CMP_GT},
        {"ge", SCMP_CMP_GE},
        {"masked_eq", SCMP_CMP_MASKED_EQ},
    };
    struct slot s[] = {{"index", NULL, {0, 0}},
                       {"op", NULL, {0, 0}},
                       {"value", NULL, {0, 0}},
                       {"mask", NULL, {0, 0}}};
    struct cmp c = {0, SCMP_CMP_EQ, 0, 0};
    const char *op = NULL;
    uint64_t index = 0;

    int r = map_slots(ps, n, "an argument comparison",
                      " in an argument comparison (index, op, value, mask)", s, ARRAY_SIZE(s), e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < 3; i++) {
        if (!s[i].value) {
            return fail(e, ps->file, node_mark(n), "missing key '%s' in an argument comparison",
                        s[i].key);
        }
    }
    r = parse_number(ps, s[0].value, "index", &index, e);
    if (r < 0) {
        return r;
    }
    if (index >= ARGS_MAX) {
        return fail(e, ps->file, node_mark(s[0].value), "'index' must be 0 to 5");
    }
    c.index = (unsigned)index;
    r = scalar(ps, s[1].value, "op", &op, e);
    if (r < 0) {
        return r;
    }
    size_t i = 0;
    while (i < ARRAY_SIZE(ops) && strcmp(ops[i].name, op) != 0) {
        i++;
    }
    if (i == ARRAY_SIZE(ops)) {
        return fail(e, ps->file, node_mark(s[1].value),
                    "unknown op '%.64s' (eq, ne, lt, le, gt, ge or masked_eq)", op);
    }
    c.op = ops[i].op;
    r = parse_number(ps, s[2].value, "value", &c.value, e);
    if (r < 0) {
        return r;
    }
    if (c.op == SCMP_CMP_MASKED_EQ && !s[3].value) {
        return fail(e, ps->file, node_mark(n), "op masked_eq needs a 'mask'");
    }
    if (c.op != SCMP_CMP_MASKED_EQ && s[3].value) {
        return fail(e, ps->file, s[3].key_mark, "'mask' needs op masked_eq");
    }
    if (s[3].value) {
        r = parse_number(ps, s[3].value, "mask", &c.mask, e);
        if (r < 0) {
            return r;
        }
    }
    *ret = c;
    return 0;
}

static struct rule *profile_push(struct profile *p)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 16;
        p->rules = xrealloc(p->rules, p->cap * sizeof(*p->rules));
    }
    struct rule *r = &p->rules[p->n++];
    memset(r, 0, sizeof(*r));
    return r;
}

/* One entry of `rules:`: a rule per syscall of its `names:`. Names that libseccomp knows for
 * other architectures only are skipped, so one profile can serve several. */
static int parse_rule(const struct parse *ps, yaml_node_t *n, struct err *e)
{
    struct slot s[] = {{"names", NULL, {0, 0}},
                       {"action", NULL, {0, 0}},
                       {"errno", NULL, {0, 0}},
                       {"args", NULL, {0, 0}}};
    struct rule proto;
    yaml_node_item_t *it = NULL, *end = NULL;

    memset(&proto, 0, sizeof(proto));
    int r =
        map_slots(ps, n, "a rule", " in a rule (names, action, errno, args)", s, ARRAY_SIZE(s), e);
    if (r < 0) {
        return r;
    }
    for (size_t i = 0; i < 2; i++) {
        if (!s[i].value) {
            return fail(e, ps->file, node_mark(n), "missing key '%s' in a rule", s[i].key);
        }
    }
    r = parse_verdict(ps, s[1].value, s[2].value, "errno", &proto.v, e);
    if (r < 0) {
        return r;
    }
    if (s[3].value) {
        r = sequence(ps, s[3].value, "args", &it, &end, e);
        if (r < 0) {
            return r;
        }
        for (; it < end; it++) {
            yaml_node_t *a = yaml_document_get_node(ps->doc, *it);
            if (proto.n_cmps == ARGS_MAX) {
                return fail(e, ps->file, node_mark(a), "at most %d argument comparisons", ARGS_MAX);
            }
            struct cmp c;
            r = parse_cmp(ps, a, &c, e);
            if (r < 0) {
                return r;
            }
            for (unsigned j = 0; j < proto.n_cmps; j++) {
                if (proto.cmps[j].index == c.index) {
                    return fail(e, ps->file, node_mark(a), "argument %u is compared twice",
                                c.index);
                }
            }
            proto.cmps[proto.n_cmps++] = c;
        }
    }
    r = sequence(ps, s[0].value, "names", &it, &end, e);
    if (r < 0) {
        return r;
    }
    if (it == end) {
        return fail(e, ps->file, node_mark(s[0].value), "'names' must list at least one syscall");
    }
    for (; it < end; it++) {
        yaml_node_t *nn = yaml_document_get_node(ps->doc, *it);
        const char *name = NULL;
        r = scalar(ps, nn, "names", &name, e);
        if (r < 0) {
            return r;
        }
        int nr = strlen(name) <= SYSCALL_NAME_MAX
                     ? seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name)
                     : __NR_SCMP_ERROR;
        if (nr == __NR_SCMP_ERROR) {
            return fail(e, ps->file, node_mark(nn), "unknown syscall '%.64s'", name);
        }
        if (nr < 0) {
            log_debug("file=%s syscall=%s msg=\"not on this architecture, skipping\"", ps->file,
                      name);
            continue;
        }
        if (ps->p->n >= PROFILE_RULES_MAX) {
            return fail(e, ps->file, node_mark(nn), "more than %d syscall rules",
                        PROFILE_RULES_MAX);
        }
        struct rule *rule = profile_push(ps->p);
        *rule = proto;
        rule->nr = nr;
        (void)str_copy(rule->name, name, sizeof(rule->name));
        rule->m = node_mark(nn);
    }
    return 0;
}

static int parse_profile(const char *file, const char *text, size_t len, struct profile *p,
                         struct err *e)
{
    struct ydoc y;
    struct slot s[] = {{"default_action", NULL, {0, 0}},
                       {"default_errno", NULL, {0, 0}},
                       {"count_denials", NULL, {0, 0}},
                       {"rules", NULL, {0, 0}}};
    yaml_node_item_t *it = NULL, *end = NULL;

    memset(&y, 0, sizeof(y));
    int r = ydoc_load(file, text, len, &y, e);
    if (r < 0) {
        ydoc_done(&y);
        return r;
    }
    struct parse ps = {file, &y.doc, p};
    yaml_node_t *root = yaml_document_get_root_node(&y.doc);
    if (!root || yamlnode_is_null(root)) {
        ydoc_done(&y);
        return fail(e, file, ((struct mark){1, 1}), "missing key 'default_action'");
    }
    r = map_slots(&ps, root, "the top level", "", s, ARRAY_SIZE(s), e);
    if (r == 0 && !s[0].value) {
        r = fail(e, file, node_mark(root), "missing key 'default_action'");
    }
    if (r == 0) {
        r = parse_verdict(&ps, s[0].value, s[1].value, "default_errno", &p->def, e);
    }
    p->count = true;
    if (r == 0 && s[2].value) {
        r = parse_bool(&ps, s[2].value, "count_denials", &p->count, e);
    }
    if (r == 0 && s[3].value) {
        r = sequence(&ps, s[3].value, "rules", &it, &end, e);
    }
    for (; r == 0 && it < end; it++) {
        r = parse_rule(&ps, yaml_document_get_node(&y.doc, *it), e);
    }
    ydoc_done(&y);
    return r;
}

/* ---- Merging in the always-denied list ---- */

static bool cmps_equal(const struct rule *a, const struct rule *b)
{
    if (a->n_cmps != b->n_cmps) {
        return false;
    }
    for (unsigned i = 0; i < a->n_cmps; i++) {
        bool found = false;
        for (unsigned j = 0; j < b->n_cmps && !found; j++) {
            found = a->cmps[i].index == b->cmps[j].index && a->cmps[i].op == b->cmps[j].op &&
                    a->cmps[i].value == b->cmps[j].value && a->cmps[i].mask == b->cmps[j].mask;
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

/* libseccomp keeps the first of two rules for a syscall when one has no comparisons or both
 * have the same, whatever their actions, and says nothing: such profiles are refused here so
 * that what a file says is what the filter does. */
static int check_conflicts(const char *file, const struct profile *p, struct err *e)
{
    for (size_t i = 1; i < p->n; i++) {
        const struct rule *b = &p->rules[i];
        for (size_t j = 0; j < i; j++) {
            const struct rule *a = &p->rules[j];
            if (a->nr != b->nr) {
                continue;
            }
            if (a->n_cmps == 0 || b->n_cmps == 0) {
                return fail(e, file, b->m,
                            "'%s' already has a rule at %zu:%zu; a rule without args must be "
                            "its only rule",
                            b->name, a->m.line, a->m.col);
            }
            if (cmps_equal(a, b)) {
                return fail(e, file, b->m, "'%s' already has a rule with the same args at %zu:%zu",
                            b->name, a->m.line, a->m.col);
            }
        }
    }
    return 0;
}

static void rule_add_cmp(struct profile *out, int nr, const char *name, struct verdict v,
                         uint64_t mask, uint64_t value)
{
    struct rule *r = profile_push(out);
    r->nr = nr;
    (void)str_copy(r->name, name, sizeof(r->name));
    r->v = v;
    r->n_cmps = 1;
    r->cmps[0] = (struct cmp){0, SCMP_CMP_MASKED_EQ, value, mask};
}

/* The calls of a conditional entry that stay possible, with the profile's verdict. */
static void add_safe_subset(struct profile *out, const struct rule *pr, const struct denied *d)
{
    if (d->kind == DENY_CLONE) {
        rule_add_cmp(out, pr->nr, pr->name, pr->v, CLONE_NS_FLAGS, 0);
        return;
    }
    for (size_t i = 0; i < ARRAY_SIZE(persona_allowed); i++) {
        rule_add_cmp(out, pr->nr, pr->name, pr->v, PERSONA_LO32, persona_allowed[i]);
    }
}

/* The denial rules of an always-denied entry. Their conditions cover exactly the calls that
 * add_safe_subset leaves out, since libseccomp rules can only be or-ed. */
static void add_denial(struct profile *out, int nr, const struct denied *d)
{
    struct verdict v = {ACT_ERRNO, d->err, d->kind != DENY_WHOLE || d->err != ENOSYS};
    if (d->kind == DENY_WHOLE) {
        struct rule *r = profile_push(out);
        r->nr = nr;
        (void)str_copy(r->name, d->name, sizeof(r->name));
        r->v = v;
        return;
    }
    if (d->kind == DENY_CLONE) {
        for (unsigned bit = 0; bit < 32; bit++) {
            uint64_t f = 1ULL << bit;
            if (f & CLONE_NS_FLAGS) {
                rule_add_cmp(out, nr, d->name, v, f, f);
            }
        }
        return;
    }
    /* arg0's low 32 bits outside {0, 8, 0xffffffff}. Let y be those bits without bit 3
     * (31 bits). If y has both ones and zeroes, then going round its bits cyclically some
     * one is followed by a zero: one rule per cyclically adjacent pair (bit i set, next
     * clear) catches all those. Otherwise y is all zeroes (0 or 8: allowed) or all ones
     * (0xffffffff: allowed, or 0xfffffff7: the last rule). */
    unsigned bits[31], nb = 0;
    for (unsigned b = 0; b < 32; b++) {
        if (b != 3) {
            bits[nb++] = b;
        }
    }
    for (unsigned i = 0; i < nb; i++) {
        uint64_t one = 1ULL << bits[i], zero = 1ULL << bits[(i + 1) % nb];
        rule_add_cmp(out, nr, d->name, v, one | zero, one);
    }
    rule_add_cmp(out, nr, d->name, v, PERSONA_LO32, 0xfffffff7);
}

/* The profile's rules with the always-denied list applied. A profile may deny a listed
 * syscall itself (a rule without args, action errno or kill), which replaces the built-in
 * denial; allowing or logging one is refused, except for the conditional entries (clone,
 * personality), where it allows or logs the harmless calls only. */
static int merge_denied(const char *file, const struct profile *in, struct profile *out,
                        struct err *e)
{
    bool replaced[ARRAY_SIZE(always_denied)] = {false};
    int nrs[ARRAY_SIZE(always_denied)];

    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        nrs[i] = seccomp_syscall_resolve_name(always_denied[i].name);
        nrs[i] = nrs[i] < 0 ? -1 : nrs[i];
    }
    out->def = in->def;
    out->count = in->count;
    for (size_t i = 0; i < in->n; i++) {
        const struct rule *pr = &in->rules[i];
        const struct denied *d = denied_find(nrs, pr->nr);
        if (!d) {
            *profile_push(out) = *pr;
            continue;
        }
        bool permits = pr->v.act == ACT_ALLOW || pr->v.act == ACT_LOG;
        if (permits && d->kind == DENY_WHOLE) {
            return fail(e, file, pr->m, "'%s' is on the always-denied list", pr->name);
        }
        if (pr->n_cmps > 0) {
            return fail(e, file, pr->m,
                        "'%s' is on the always-denied list: a rule for it takes no args", pr->name);
        }
        if (permits) {
            add_safe_subset(out, pr, d);
            continue;
        }
        *profile_push(out) = *pr;
        replaced[d - always_denied] = true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(always_denied); i++) {
        if (!replaced[i] && nrs[i] >= 0) {
            add_denial(out, nrs[i], &always_denied[i]);
        }
    }
    return 0;
}

/* ---- libseccomp ---- */

/* Counted errno denials of a counting program go through libseccomp as SCMP_ACT_TRACE with
 * the errno as data (libseccomp takes no data with SCMP_ACT_NOTIFY), and are rewritten to
 * SECCOMP_RET_USER_NOTIF | errno in the exported BPF. No profile can ask for TRACE. */
static uint32_t scmp_action(struct verdict v, bool notify)
{
    switch (v.act) {
    case ACT_ALLOW:
        return SCMP_ACT_ALLOW;
    case ACT_LOG:
        return SCMP_ACT_LOG;
    case ACT_KILL:
        return SCMP_ACT_KILL_PROCESS;
    case ACT_ERRNO:
        break;
    }
    return notify && v.counted ? SCMP_ACT_TRACE((uint32_t)v.err) : SCMP_ACT_ERRNO((uint32_t)v.err);
}

static void ctx_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx) {
        seccomp_release(*ctx);
    }
}

/* Builds the libseccomp filter of a merged profile. Only the native architecture: calls
 * from any other ABI (int 0x80's x86, or x32 numbers with __X32_SYSCALL_BIT, which
 * libseccomp checks for on x86_64) kill the process. */
static int build_ctx(const char *file, const struct profile *p, bool notify, scmp_filter_ctx *ret,
                     struct err *e)
{
    uint32_t def = scmp_action(p->def, notify);
    scoped(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(def);
    int r;

    if (!ctx) {
        return err_setx(e, -EINVAL, "%s: libseccomp refused the default action", file);
    }
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0) {
        /* init sets no_new_privs itself; the filter is only exported here. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    }
    if (r == 0) {
        /* A binary search over syscall numbers instead of a linear list. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    }
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp attributes", file);
    }
    for (size_t i = 0; i < p->n; i++) {
        const struct rule *rule = &p->rules[i];
        uint32_t act = scmp_action(rule->v, notify);
        struct scmp_arg_cmp cmps[ARGS_MAX];
        if (act == def) {
            continue; /* the default does it; libseccomp refuses such rules */
        }
        for (unsigned j = 0; j < rule->n_cmps; j++) {
            const struct cmp *c = &rule->cmps[j];
            cmps[j] = (struct scmp_arg_cmp){c->index, c->op,
                                            c->op == SCMP_CMP_MASKED_EQ ? c->mask : c->value,
                                            c->op == SCMP_CMP_MASKED_EQ ? c->value : 0};
        }
        r = seccomp_rule_add_exact_array(ctx, act, rule->nr, rule->n_cmps, cmps);
        if (r < 0) {
            return failr(e, r, file, rule->m, "libseccomp refused the rule for '%s': %s",
                         rule->name, err_name(r));
        }
    }
    *ret = take_ptr(&ctx);
    return 0;
}

/* Exports ctx's BPF through a memfd (libseccomp 2.5 has no in-memory export). */
static int export_bpf(const char *file, scmp_filter_ctx ctx, bool notify, struct sock_filter **ret,
                      uint32_t *ret_n, struct err *e)
{
    scoped_close int fd = memfd_create("sbxd-seccomp", MFD_CLOEXEC);
    struct stat st;

    if (fd < 0) {
        return err_set(e, -errno, "%s: memfd_create", file);
    }
    int r = seccomp_export_bpf(ctx, fd);
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp export", file);
    }
    if (fstat(fd, &st) < 0) {
        return err_set(e, -errno, "%s: fstat of the exported program", file);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0 || size % sizeof(struct sock_filter) != 0) {
        return err_setx(e, -EIO, "%s: libseccomp exported %zu bytes", file, size);
    }
    if (size / sizeof(struct sock_filter) > CTL_SECCOMP_MAX_INSNS) {
        return err_setx(e, -EFBIG, "%s: the program has %zu instructions, more than %d", file,
                        size / sizeof(struct sock_filter), CTL_SECCOMP_MAX_INSNS);
    }
    scoped_free struct sock_filter *insns = xmalloc(size);
    size_t off = 0;
    while (off < size) {
        ssize_t n = RETRY_EINTR(pread(fd, (char *)insns + off, size - off, (off_t)off));
        if (n < 0) {
            return err_set(e, -errno, "%s: reading the exported program", file);
        }
        if (n == 0) {
            return err_setx(e, -EIO, "%s: the exported program is short", file);
        }
        off += (size_t)n;
    }
    uint32_t count = (uint32_t)(size / sizeof(struct sock_filter));
    for (uint32_t i = 0; i < count; i++) {
        struct sock_filter *f = &insns[i];
        if (f->code == (BPF_RET | BPF_K) && (f->k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_TRACE) {
            assert(notify); /* only counting programs have placeholders */
            f->k = SECCOMP_RET_USER_NOTIF | (f->k & SECCOMP_RET_DATA);
        }
    }
    *ret = take_ptr(&insns);
    *ret_n = count;
    return 0;
}

/* ---- Profiles ---- */

struct prog {
    char *name;
    struct sock_filter *insns;
    uint32_t n;
};

struct seccomp_set {
    struct prog *progs;
    size_t n;
};

static void profile_done(struct profile *p)
{
    free(p->rules);
    memset(p, 0, sizeof(*p));
}

/* "dir/strict.yaml" -> "strict". */
static char *profile_name(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".yaml") == 0) {
        len -= 5;
    }
    return xstrndup(base, len);
}

static bool profile_counts(const struct profile *p, unsigned flags)
{
    if (!p->count || flags == SECCOMP_COMPILE_PLAIN) {
        return false;
    }
    /* API level 5: the kernel has SECCOMP_RET_USER_NOTIF and FILTER_FLAG_NEW_LISTENER. */
    return flags == SECCOMP_COMPILE_NOTIFY || seccomp_api_get() >= 5;
}

/* Parses and merges a profile, then builds its libseccomp filter. */
static int profile_ctx(const char *file, const char *text, size_t len, unsigned flags,
                       scmp_filter_ctx *ret, bool *ret_notify, struct err *e)
{
    scoped(profile_done) struct profile parsed = {{ACT_ALLOW, 0, true}, true, NULL, 0, 0};
    scoped(profile_done) struct profile merged = {{ACT_ALLOW, 0, true}, true, NULL, 0, 0};

    if (flags > SECCOMP_COMPILE_NOTIFY) {
        return err_setx(e, -EINVAL, "%s: bad compile flags %u", file, flags);
    }
    int r = parse_profile(file, text, len, &parsed, e);
    if (r == 0) {
        r = check_conflicts(file, &parsed, e);
    }
    if (r == 0) {
        r = merge_denied(file, &parsed, &merged, e);
    }
    if (r < 0) {
        return r;
    }
    bool notify = profile_counts(&merged, flags);
    r = build_ctx(file, &merged, notify, ret, e);
    if (r == 0) {
        *ret_notify = notify;
    }
    return r;
}

static void *mfree(void *p)
{
    free(p);
    return NULL;
}

/* Between installing a counting filter and handing the listener over, the task makes one
 * call: sendmsg on its socket to init (flags 0). Were that call a notification, nobody could
 * answer it yet and the task would hang, so it must be allowed. */
static bool handover_allowed(const struct sock_filter *insns, uint32_t n)
{
    struct seccomp_data d;
    uint32_t v = 0;
    memset(&d, 0, sizeof(d));
    d.arch = seccomp_arch_native();
    d.nr = seccomp_syscall_resolve_name("sendmsg");
    if (bpf_eval(insns, n, &d, &v) < 0) {
        return false;
    }
    v &= SECCOMP_RET_ACTION_FULL;
    return v == SECCOMP_RET_ALLOW || v == SECCOMP_RET_LOG;
}

static int profile_compile(const char *file, const char *text, size_t len, unsigned flags,
                           struct prog *ret, struct err *e)
{
    scoped(ctx_releasep) scmp_filter_ctx ctx = NULL;
    bool notify = false;

    int r = profile_ctx(file, text, len, flags, &ctx, &notify, e);
    if (r < 0) {
        return r;
    }
    r = export_bpf(file, ctx, notify, &ret->insns, &ret->n, e);
    if (r < 0) {
        return r;
    }
    if (notify && !handover_allowed(ret->insns, ret->n)) {
        ret->insns = mfree(ret->insns);
        return err_setx(e, -EINVAL,
                        "%s: with count_denials, 'sendmsg' must be allowed: the task hands its "
                        "seccomp listener to sbxd-init with it after the filter is on",
                        file);
    }
    ret->name = profile_name(file);
    log_debug("file=%s profile=%s insns=%u count_denials=%s", file, ret->name, ret->n,
              notify ? "true" : "false");
    return 0;
}

int seccomp_compile_pfc(const char *file, const char *text, size_t len, unsigned flags, int fd,
                        struct err *e)
{
    scoped(ctx_releasep) scmp_filter_ctx ctx = NULL;
    bool notify = false;

    int r = profile_ctx(file, text, len, flags, &ctx, &notify, e);
    if (r < 0) {
        return r;
    }
    r = seccomp_export_pfc(ctx, fd);
    if (r < 0) {
        return err_set(e, r, "%s: libseccomp PFC export", file);
    }
    return 0;
}

int seccomp_export_embedded(const char *name, unsigned flags, int fd, struct err *e)
{
    for (size_t i = 0; i < embedded_n_seccomp; i++) {
        const struct embedded_file *f = &embedded_seccomp[i];
        scoped_free char *fname = profile_name(f->name);
        if (strcmp(fname, name) != 0) {
            continue;
        }
        struct prog p = {0};
        int r = profile_compile(f->name, f->text, f->len, flags, &p, e);
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

/* ---- Sets ---- */

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
        scoped_free char *name = profile_name(file);
        if (!name_ok(name)) {
            return err_setx(e, -EINVAL, "%s: a profile's name must match [a-z0-9_-]{1,32}", file);
        }
    }
    if (s->n >= PROFILES_MAX) {
        return err_setx(e, -E2BIG, "%s: more than %d profiles", file, PROFILES_MAX);
    }
    int r = profile_compile(file, text, len, flags, &p, e);
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
