/* SPDX-License-Identifier: MIT */
/* How config/ reads YAML: one document per file through libyaml's document API, walked
 * through a key table into a struct, every value placed by its mark ("file:line:col"), and
 * the per-field rules (types and ranges) that parsed and hand-made structs both pass. Logs
 * nothing; keeps no state after returning. */
#define LOG_MOD "config"
#include "config/config_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/yamlnode.h"
#include "lib/util.h"

int config_walk_failr(struct err *e, int r, const char *file, const struct mark *m, const char *fmt,
                      ...)
{
    va_list ap;
    if (!file) {
        file = "config";
    }
    va_start(ap, fmt);
    r = yamlnode_failv(e, r, file, m ? m->line : 0, m ? m->col : 0, fmt, ap);
    va_end(ap);
    return r;
}

#define fail(e, file, m, ...) config_walk_failr((e), -EINVAL, (file), (m), __VA_ARGS__)
/* The mark of slot id, else of slot alt (-1: none), else the root's; NULL without marks. */
const struct mark *config_walk_mark_pick(const struct mark *marks, int id, int alt)
{
    if (!marks) {
        return NULL;
    }
    if (marks[id].line > 0) {
        return &marks[id];
    }
    if (alt >= 0 && marks[alt].line > 0) {
        return &marks[alt];
    }
    return &marks[0];
}

bool config_walk_name_ok(const char *s)
{
    size_t n = 0;
    if (!s) {
        return false;
    }
    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) {
            return false;
        }
    }
    return n >= 1 && n <= NAME_LEN_MAX;
}

static struct mark mark_of(yaml_mark_t m)
{
    struct yaml_pos q = yamlnode_pos(m);
    return (struct mark){q.line, q.col, q.line};
}

struct mark config_walk_node_mark(const yaml_node_t *n)
{
    return mark_of(n->start_mark);
}

/* YAML 1.1's booleans, in any case. */
static int parse_bool(const char *s, bool *ret)
{
    static const char *const words[][2] = {{"true", "false"}, {"yes", "no"}, {"on", "off"}};
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        if (strcasecmp(s, words[i][0]) == 0) {
            *ret = true;
            return 0;
        }
        if (strcasecmp(s, words[i][1]) == 0) {
            *ret = false;
            return 0;
        }
    }
    return -EINVAL;
}

/* A plain decimal ("2", "0.5", "1.0"): no sign, exponent, hex, inf or nan. */
static int parse_cpu(const char *s, double *ret)
{
    size_t digits = 0, dots = 0, n = 0;
    for (; s[n]; n++) {
        if (s[n] >= '0' && s[n] <= '9') {
            digits++;
        } else if (s[n] == '.') {
            dots++;
        } else {
            return -EINVAL;
        }
    }
    if (digits == 0 || dots > 1 || n > 24) {
        return -EINVAL;
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || !end || *end != '\0' || !isfinite(v)) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_cgroup_version(const char *s, int *ret)
{
    if (strcmp(s, "auto") == 0) {
        *ret = 0;
    } else if (strcmp(s, "1") == 0) {
        *ret = 1;
    } else if (strcmp(s, "2") == 0) {
        *ret = 2;
    } else {
        return -EINVAL;
    }
    return 0;
}

const char *config_walk_type_desc(enum field_type t)
{
    switch (t) {
    case T_STR:
        return "a string";
    case T_NAME:
        return "a name matching [a-z0-9_-]{1,32}";
    case T_U32:
        return "a whole number";
    case T_SIZE:
        return "a size like 512MiB";
    case T_DURATION:
        return "a duration like 30s, 500ms or a number of seconds";
    case T_CPU:
        return "a number of CPUs like 1.5";
    case T_BOOL:
        return "true or false";
    case T_LOG_LEVEL:
        return "one of error, warn, info, debug";
    case T_CGROUP_VERSION:
        return "auto, 1 or 2";
    case T_MAP:
        return "a mapping";
    case T_STRLIST:
        return "a sequence of strings";
    case T_METHODS:
        return "a sequence of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
    case T_PROFILES:
        return "a mapping of profile names to profiles";
    case T_ROUTES:
        return "a sequence of routes";
    }
    return "a value";
}

static int walk_string(struct walk *w, const struct field *f, const char *path,
                       const yaml_node_t *v, const char *s, const struct mark *m, struct err *e)
{
    char **dst = (char **)(w->target + f->off);
    if (yamlnode_is_null(v) || *s == '\0') {
        if (f->flags & F_NULLABLE) {
            free(*dst);
            *dst = NULL;
            return 0;
        }
        if (!(f->flags & F_EMPTY_OK)) {
            return fail(e, w->file, m, "'%s' must be %s, not empty", path,
                        config_walk_type_desc(f->type));
        }
        s = "";
    }
    free(*dst);
    *dst = xstrdup(s);
    const char *why = NULL;
    if (f->check && *s && f->check(s, &why) < 0) {
        return fail(e, w->file, m, "'%s' ('%.80s'): %s", path, s, why);
    }
    return 0;
}

static int walk_scalar(struct walk *w, const struct field *f, const char *path,
                       const yaml_node_t *v, const struct mark *m, struct err *e)
{
    const char *s = (const char *)v->data.scalar.value;
    void *dst = w->target + f->off;
    uint64_t u = 0;
    int r = 0;

    if (strlen(s) != v->data.scalar.length) {
        return fail(e, w->file, m, "'%s' must not contain NUL bytes", path);
    }
    switch (f->type) {
    case T_STR:
    case T_NAME:
        return walk_string(w, f, path, v, s, m, e);
    case T_U32:
        r = parse_u64(s, &u);
        if (r == -ERANGE || (r == 0 && u > UINT32_MAX)) {
            return fail(e, w->file, m, "'%s' must be at most %u", path, UINT32_MAX);
        }
        if (r == 0) {
            *(uint32_t *)dst = (uint32_t)u;
        }
        break;
    case T_SIZE:
        r = parse_size(s, &u);
        if (r == -ERANGE) {
            return fail(e, w->file, m, "'%s' is too large", path);
        }
        if (r == 0) {
            *(uint64_t *)dst = u;
        }
        break;
    case T_DURATION:
        r = parse_duration_ns(s, &u);
        if (r == -ERANGE) {
            return fail(e, w->file, m, "'%s' is too long", path);
        }
        if (r == 0) {
            *(uint64_t *)dst = u;
        }
        break;
    case T_CPU:
        r = parse_cpu(s, (double *)dst);
        break;
    case T_BOOL:
        r = parse_bool(s, (bool *)dst);
        break;
    case T_LOG_LEVEL:
        r = log_parse_level(s, (enum log_level *)dst);
        break;
    case T_CGROUP_VERSION:
        r = parse_cgroup_version(s, (int *)dst);
        break;
    case T_MAP:
    case T_STRLIST:
    case T_METHODS:
    case T_PROFILES:
    case T_ROUTES:
        r = -EINVAL;
        break;
    }
    if (r < 0) {
        return fail(e, w->file, m, "'%s' must be %s", path, config_walk_type_desc(f->type));
    }
    return 0;
}

static int walk_value(struct walk *w, const struct field *f, const char *path, yaml_node_t *v,
                      struct err *e)
{
    struct mark m = config_walk_node_mark(v);
    if (f->type == T_MAP) {
        if (yamlnode_is_null(v)) {
            return 0;
        }
        if (v->type != YAML_MAPPING_NODE) {
            return fail(e, w->file, &m, "'%s' must be a mapping, not %s", path, yamlnode_kind(v));
        }
        return config_walk_map(w, v, f->sub, path, e);
    }
    switch (f->type) {
    case T_STRLIST:
        return config_egress_walk_strlist(w, f, path, v, e);
    case T_METHODS:
        return config_egress_walk_methods(w, f, path, v, e);
    case T_PROFILES:
        return config_egress_walk_profiles(w, f, path, v, e);
    case T_ROUTES:
        return config_egress_walk_routes(w, f, path, v, e);
    default:
        break;
    }
    if (v->type != YAML_SCALAR_NODE) {
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, config_walk_type_desc(f->type),
                    yamlnode_kind(v));
    }
    return walk_scalar(w, f, path, v, &m, e);
}

static const struct field *field_find(const struct field *fields, const char *key, size_t len)
{
    for (const struct field *f = fields; f->key; f++) {
        if (strlen(f->key) == len && memcmp(f->key, key, len) == 0) {
            return f;
        }
    }
    return NULL;
}

/* Every key must be known and appear once, so the loop stops at the first stray key and
 * never does more than one pass per table entry. */
int config_walk_map(struct walk *w, yaml_node_t *map, const struct field *fields,
                    const char *parent, struct err *e)
{
    for (yaml_node_pair_t *pair = map->data.mapping.pairs.start; pair < map->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, pair->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, pair->value);
        if (!k || !v) {
            struct mark m = config_walk_node_mark(map);
            return fail(e, w->file, &m, "malformed mapping");
        }
        struct mark km = config_walk_node_mark(k);
        if (k->type != YAML_SCALAR_NODE) {
            return fail(e, w->file, &km, "keys must be strings, not %s", yamlnode_kind(k));
        }
        const char *key = (const char *)k->data.scalar.value;
        const struct field *f = field_find(fields, key, k->data.scalar.length);
        if (!f && parent) {
            return fail(e, w->file, &km, "unknown key '%.64s' in '%s'", key, parent);
        }
        if (!f) {
            return fail(e, w->file, &km, "unknown key '%.64s'", key);
        }
        char path[96];
        (void)snprintf(path, sizeof(path), "%s%s%s", parent ? parent : "", parent ? "." : "",
                       f->key);
        struct mark *slot = &w->marks[f->mark];
        if (slot->line > 0) {
            return fail(e, w->file, &km, "duplicate key '%s' (first on line %zu)", path,
                        slot->key_line);
        }
        *slot = config_walk_node_mark(v);
        slot->key_line = km.line;
        int r = walk_value(w, f, path, v, e);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* Walks a whole document; an empty one (or a bare null) leaves every default. */
int config_walk_document(struct walk *w, const struct field *fields, struct err *e)
{
    yaml_node_t *root = yaml_document_get_root_node(w->doc);
    w->marks[0] = (struct mark){1, 1, 1};
    if (!root) {
        return 0;
    }
    w->marks[0] = config_walk_node_mark(root);
    if (yamlnode_is_null(root)) {
        return 0;
    }
    if (root->type != YAML_MAPPING_NODE) {
        return fail(e, w->file, &w->marks[0], "the top level must be a mapping of keys, not %s",
                    yamlnode_kind(root));
    }
    return config_walk_map(w, root, fields, NULL, e);
}

/* "16MiB", "1KiB", "1" (bytes), "30s", "500ms": a limit as a person would write it. */
static void limit_format(enum field_type t, uint64_t v, char *buf, size_t size)
{
    static const struct {
        uint64_t unit;
        const char *sizes;
        const char *durations;
    } units[] = {
        {1ULL << 30, "GiB", NULL}, {1000000000ULL, NULL, "s"}, {1ULL << 20, "MiB", NULL},
        {1000000ULL, NULL, "ms"},  {1ULL << 10, "KiB", NULL},
    };
    for (size_t i = 0; v > 0 && t != T_U32 && i < ARRAY_SIZE(units); i++) {
        const char *suffix = t == T_SIZE ? units[i].sizes : units[i].durations;
        if (suffix && v % units[i].unit == 0) {
            (void)snprintf(buf, size, "%llu%s", (unsigned long long)(v / units[i].unit), suffix);
            return;
        }
    }
    (void)snprintf(buf, size, "%llu%s", (unsigned long long)v, t == T_DURATION ? "ns" : "");
}

static int range_fail(const struct field *f, const char *path, const char *file,
                      const struct mark *m, struct err *e)
{
    char lo[32], hi[32];
    bool open_top = f->max == (f->type == T_U32 ? UINT32_MAX : UINT64_MAX);

    limit_format(f->type, f->min, lo, sizeof(lo));
    limit_format(f->type, f->max, hi, sizeof(hi));
    if (open_top && f->type == T_DURATION && f->min == 1) {
        return fail(e, file, m, "'%s' must be above 0", path);
    }
    if (open_top) {
        return fail(e, file, m, "'%s' must be at least %s", path, lo);
    }
    return fail(e, file, m, "'%s' must be between %s and %s", path, lo, hi);
}

/* Checks each field of a table against its type and range: names, non-empty strings, enum
 * values, numeric ranges. target: the struct; marks: its marks, or NULL. */
int config_walk_fields_check(const struct field *fields, const char *parent, const char *target,
                             const char *file, const struct mark *marks, struct err *e)
{
    for (const struct field *f = fields; f->key; f++) {
        if (f->flags & F_LOAD_ONLY) {
            continue;
        }
        const void *v = target + f->off;
        const struct mark *m = config_walk_mark_pick(marks, f->mark, -1);
        char path[96];
        int r = 0;
        (void)snprintf(path, sizeof(path), "%s%s%s", parent ? parent : "", parent ? "." : "",
                       f->key);
        switch (f->type) {
        case T_STR:
        case T_NAME: {
            const char *s = *(char *const *)v;
            if (!s && !(f->flags & F_NULLABLE)) {
                return fail(e, file, m, "'%s' must be set", path);
            }
            if (s && !*s && !(f->flags & F_EMPTY_OK)) {
                return fail(e, file, m, "'%s' must be %s, not empty", path,
                            config_walk_type_desc(f->type));
            }
            if (s && f->type == T_NAME && !config_walk_name_ok(s)) {
                return fail(e, file, m, "'%s' must be %s", path, config_walk_type_desc(f->type));
            }
            break;
        }
        case T_U32: {
            uint32_t u = *(const uint32_t *)v;
            if (u < f->min || u > f->max) {
                return range_fail(f, path, file, m, e);
            }
            break;
        }
        case T_SIZE:
        case T_DURATION: {
            uint64_t u = *(const uint64_t *)v;
            if (u < f->min || u > f->max) {
                return range_fail(f, path, file, m, e);
            }
            break;
        }
        case T_CPU: {
            double d = *(const double *)v;
            if (!(d > 0.0 && d <= CPU_MAX)) {
                return fail(e, file, m, "'%s' must be above 0 and at most 64", path);
            }
            break;
        }
        case T_LOG_LEVEL: {
            int l = (int)*(const enum log_level *)v;
            if (l < (int)LOG_ERROR || l > (int)LOG_DEBUG) {
                return fail(e, file, m, "'%s' must be %s", path, config_walk_type_desc(f->type));
            }
            break;
        }
        case T_CGROUP_VERSION: {
            int ver = *(const int *)v;
            if (ver < 0 || ver > 2) {
                return fail(e, file, m, "'%s' must be %s", path, config_walk_type_desc(f->type));
            }
            break;
        }
        case T_BOOL:
        case T_STRLIST: /* egress lists: config_egress_check */
        case T_METHODS:
        case T_PROFILES:
        case T_ROUTES:
            break;
        case T_MAP:
            r = config_walk_fields_check(f->sub, f->key, target, file, marks, e);
            break;
        }
        if (r < 0) {
            return r;
        }
    }
    return 0;
}
