/* SPDX-License-Identifier: MIT */
/* seccomp profiles, YAML to rules: one document through lib/yamlnode.c's loader, walked
 * into a struct profile (default verdict, count_denials, one rule per syscall name), every
 * error placed by its mark ("file:line:col"). Never compiles, touches a file, or logs
 * above debug. */
#define LOG_MOD "seccomp"
#include "sandbox/seccomp_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "lib/yamlnode.h"

int seccomp_profile_failr(struct err *e, int r, const char *file, struct mark m, const char *fmt,
                          ...)
{
    va_list ap;
    va_start(ap, fmt);
    r = yamlnode_failv(e, r, file, m.line, m.col, fmt, ap);
    va_end(ap);
    return r;
}

static struct mark mark_of(yaml_mark_t m)
{
    struct yaml_pos q = yamlnode_pos(m);
    return (struct mark){q.line, q.col};
}

static struct mark node_mark(const yaml_node_t *n)
{
    return mark_of(n->start_mark);
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

struct rule *seccomp_profile_push(struct profile *p)
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
        struct rule *rule = seccomp_profile_push(ps->p);
        *rule = proto;
        rule->nr = nr;
        (void)str_copy(rule->name, name, sizeof(rule->name));
        rule->m = node_mark(nn);
    }
    return 0;
}

int seccomp_profile_parse(const char *file, const char *text, size_t len, struct profile *p,
                          struct err *e)
{
    struct yamlnode_doc y;
    struct slot s[] = {{"default_action", NULL, {0, 0}},
                       {"default_errno", NULL, {0, 0}},
                       {"count_denials", NULL, {0, 0}},
                       {"rules", NULL, {0, 0}}};
    yaml_node_item_t *it = NULL, *end = NULL;

    memset(&y, 0, sizeof(y));
    int r = yamlnode_doc_load(file, text, len, &y, e);
    if (r < 0) {
        yamlnode_doc_done(&y);
        return r;
    }
    struct parse ps = {file, &y.doc, p};
    yaml_node_t *root = yaml_document_get_root_node(&y.doc);
    if (!root || yamlnode_is_null(root)) {
        yamlnode_doc_done(&y);
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
    yamlnode_doc_done(&y);
    return r;
}

void seccomp_profile_done(struct profile *p)
{
    free(p->rules);
    memset(p, 0, sizeof(*p));
}

/* "dir/strict.yaml" -> "strict". */
char *seccomp_profile_name(const char *file)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".yaml") == 0) {
        len -= 5;
    }
    return xstrndup(base, len);
}
