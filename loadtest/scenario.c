/* SPDX-License-Identifier: MIT */
/* Scenario files for sbx-load: parsed once with libyaml's document API into a table of
 * weighted task kinds, each with its expected result. Generated stdin is built here, once,
 * so the run only points at it. */
#include "scenario.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "lib/alloc.h"
#include "lib/util.h"

static const char *const scenario_statuses[] = {
    "exited", "signaled",      "timeout",       "output_limit",
    "oom",    "token_expired", "token_revoked", "error",
};

static const char *scenario_scalar(yaml_document_t *d, yaml_node_t *n)
{
    (void)d;
    if (!n || n->type != YAML_SCALAR_NODE) {
        return NULL;
    }
    return (const char *)n->data.scalar.value;
}

static int scenario_bad(struct err *e, const char *path, yaml_node_t *n, const char *what)
{
    return err_setx(e, -EINVAL, "%s:%zu: %s", path, n ? n->start_mark.line + 1 : 0, what);
}

static int scenario_number(const char *s, double *ret)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* A JSON array of small numbers, padded with spaces to exactly n bytes (n >= 2). */
static void scenario_gen_json(char *p, size_t n)
{
    size_t i = 0;
    p[i++] = '[';
    unsigned k = 0;
    while (i + 8 < n) {
        int w = snprintf(p + i, n - i, "%s%u", k ? "," : "", k % 100000);
        i += (size_t)w;
        k++;
    }
    p[i++] = ']';
    while (i < n) {
        p[i++] = ' ';
    }
}

static int scenario_expect(yaml_document_t *d, yaml_node_t *m, struct scenario_entry *x,
                           const char *path, struct err *e)
{
    if (m->type != YAML_MAPPING_NODE) {
        return scenario_bad(e, path, m, "expect must be a mapping {status: ..., exit_code: N}");
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(d, p->key);
        yaml_node_t *vn = yaml_document_get_node(d, p->value);
        const char *k = scenario_scalar(d, kn);
        const char *v = scenario_scalar(d, vn);
        if (!k || !v) {
            return scenario_bad(e, path, kn, "expect: keys and values must be scalars");
        }
        if (strcmp(k, "status") == 0) {
            bool known = false;
            for (size_t i = 0; i < sizeof(scenario_statuses) / sizeof(scenario_statuses[0]); i++) {
                known = known || strcmp(v, scenario_statuses[i]) == 0;
            }
            if (!known) {
                return scenario_bad(e, path, vn, "expect.status: not a result status");
            }
            (void)str_copy(x->expect_status, v, sizeof(x->expect_status));
        } else if (strcmp(k, "exit_code") == 0) {
            char *end = NULL;
            errno = 0;
            long long c = strtoll(v, &end, 10);
            if (errno || end == v || *end || c < -1 || c > 255) {
                return scenario_bad(e, path, vn, "expect.exit_code: an integer 0..255");
            }
            x->expect_has_code = true;
            x->expect_code = c;
        } else {
            return scenario_bad(e, path, kn, "expect: unknown key (status, exit_code)");
        }
    }
    if (x->expect_has_code && x->expect_status[0] == '\0') {
        (void)str_copy(x->expect_status, "exited", sizeof(x->expect_status));
    }
    return 0;
}

static int scenario_argv(yaml_document_t *d, yaml_node_t *n, struct scenario_entry *x,
                         const char *path, struct err *e)
{
    if (n->type != YAML_SEQUENCE_NODE) {
        return scenario_bad(e, path, n, "argv must be a list of strings");
    }
    size_t c = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (c == 0 || c > SCENARIO_MAX_ARGV) {
        return scenario_bad(e, path, n, "argv: 1 to 64 strings");
    }
    x->argv = xcalloc(c + 1, sizeof(*x->argv));
    for (size_t i = 0; i < c; i++) {
        const char *s =
            scenario_scalar(d, yaml_document_get_node(d, n->data.sequence.items.start[i]));
        if (!s || (i == 0 && s[0] == '\0')) {
            return scenario_bad(e, path, n, "argv: every item a string, the first not empty");
        }
        x->argv[i] = xstrdup(s);
        x->argc++;
    }
    return 0;
}

static int scenario_entry(yaml_document_t *d, yaml_node_t *m, size_t idx, struct scenario_entry *x,
                          const char *path, struct err *e)
{
    uint64_t gen_bytes = 0;
    bool have_gen = false;
    const char *format = "bytes";
    char name[32];

    if (m->type != YAML_MAPPING_NODE) {
        return scenario_bad(e, path, m, "each task must be a mapping");
    }
    x->weight = 1;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(d, p->key);
        yaml_node_t *vn = yaml_document_get_node(d, p->value);
        const char *k = scenario_scalar(d, kn);
        const char *v = scenario_scalar(d, vn);
        int r = 0;
        if (!k) {
            return scenario_bad(e, path, kn, "keys must be strings");
        }
        if (strcmp(k, "argv") == 0) {
            r = scenario_argv(d, vn, x, path, e);
        } else if (strcmp(k, "expect") == 0) {
            r = scenario_expect(d, vn, x, path, e);
        } else if (!v) {
            return scenario_bad(e, path, vn, "value must be a scalar");
        } else if (strcmp(k, "name") == 0) {
            free(x->name);
            x->name = xstrdup(v);
        } else if (strcmp(k, "weight") == 0) {
            if (scenario_number(v, &x->weight) < 0 || !(x->weight > 0) || x->weight > 1e9) {
                return scenario_bad(e, path, vn, "weight: a number > 0");
            }
        } else if (strcmp(k, "pool") == 0) {
            free(x->pool);
            x->pool = xstrdup(v);
        } else if (strcmp(k, "timeout") == 0) {
            uint64_t ns = 0;
            if (scenario_number(v, &x->timeout_s) < 0) {
                if (parse_duration_ns(v, &ns) < 0) {
                    return scenario_bad(e, path, vn,
                                        "timeout: seconds (0.5) or a duration (500ms)");
                }
                x->timeout_s = (double)ns / 1e9;
            }
            if (!(x->timeout_s > 0) || x->timeout_s > 86400) {
                return scenario_bad(e, path, vn, "timeout: more than 0, at most a day");
            }
        } else if (strcmp(k, "stdin") == 0) {
            size_t n = strlen(v);
            if (n > SCENARIO_MAX_STDIN) {
                return scenario_bad(e, path, vn, "stdin: too long");
            }
            free(x->stdin_data);
            x->stdin_data = xmalloc(n + 1);
            memcpy(x->stdin_data, v, n + 1);
            x->stdin_len = n;
        } else if (strcmp(k, "stdin_bytes") == 0) {
            if (parse_size(v, &gen_bytes) < 0 || gen_bytes > SCENARIO_MAX_STDIN) {
                return scenario_bad(e, path, vn, "stdin_bytes: a size up to 64MiB");
            }
            have_gen = true;
        } else if (strcmp(k, "stdin_format") == 0) {
            if (strcmp(v, "bytes") != 0 && strcmp(v, "json") != 0) {
                return scenario_bad(e, path, vn, "stdin_format: bytes or json");
            }
            format = v;
        } else {
            return scenario_bad(e, path, kn, "unknown key");
        }
        if (r < 0) {
            return r;
        }
    }
    if (!x->argv) {
        return scenario_bad(e, path, m, "a task needs argv");
    }
    if (have_gen && x->stdin_data) {
        return scenario_bad(e, path, m, "give stdin or stdin_bytes, not both");
    }
    if (have_gen) {
        bool json = strcmp(format, "json") == 0;
        if (json && gen_bytes < 2) {
            return scenario_bad(e, path, m, "stdin_format json needs stdin_bytes >= 2");
        }
        x->stdin_len = (size_t)gen_bytes;
        x->stdin_data = xmalloc(x->stdin_len + 1);
        if (json) {
            scenario_gen_json(x->stdin_data, x->stdin_len);
        } else {
            memset(x->stdin_data, 'x', x->stdin_len);
        }
    }
    if (!x->name) {
        (void)snprintf(name, sizeof(name), "entry%zu", idx);
        x->name = xstrdup(name);
    }
    return 0;
}

int scenario_load(const char *path, struct scenario *ret, struct err *e)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct scenario s = {0};
    int r = 0;

    *ret = (struct scenario){0};
    FILE *f = fopen(path, "re");
    if (!f) {
        return err_set(e, -errno, "%s", path);
    }
    if (!yaml_parser_initialize(&parser)) {
        (void)fclose(f);
        return err_setx(e, -ENOMEM, "%s: libyaml init failed", path);
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        r = err_setx(e, -EINVAL, "%s:%zu: %s", path, parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "YAML error");
        yaml_parser_delete(&parser);
        (void)fclose(f);
        return r;
    }
    yaml_parser_delete(&parser);
    (void)fclose(f);

    yaml_node_t *root = yaml_document_get_root_node(&doc);
    yaml_node_t *tasks = NULL;
    if (!root || root->type != YAML_MAPPING_NODE) {
        r = scenario_bad(e, path, root, "the file must be a mapping with 'tasks:'");
        goto out;
    }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = yaml_document_get_node(&doc, p->key);
        const char *k = scenario_scalar(&doc, kn);
        if (k && strcmp(k, "tasks") == 0) {
            tasks = yaml_document_get_node(&doc, p->value);
        } else if (!k || strcmp(k, "description") != 0) {
            r = scenario_bad(e, path, kn, "unknown top-level key (tasks, description)");
            goto out;
        }
    }
    if (!tasks || tasks->type != YAML_SEQUENCE_NODE) {
        r = scenario_bad(e, path, root, "'tasks:' must be a list");
        goto out;
    }
    size_t n = (size_t)(tasks->data.sequence.items.top - tasks->data.sequence.items.start);
    if (n == 0 || n > SCENARIO_MAX_ENTRIES) {
        r = scenario_bad(e, path, tasks, "'tasks:' needs 1 to 64 entries");
        goto out;
    }
    s.v = xcalloc(n, sizeof(*s.v));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *m = yaml_document_get_node(&doc, tasks->data.sequence.items.start[i]);
        s.n++;
        r = scenario_entry(&doc, m, i, &s.v[i], path, e);
        if (r < 0) {
            goto out;
        }
        s.total_weight += s.v[i].weight;
    }
    *ret = s;
    s = (struct scenario){0};
out:
    yaml_document_delete(&doc);
    scenario_free(&s);
    return r;
}

size_t scenario_pick(const struct scenario *s, uint64_t *rng)
{
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    double u = (double)(x >> 11) / 9007199254740992.0 * s->total_weight;
    for (size_t i = 0; i < s->n; i++) {
        if (u < s->v[i].weight) {
            return i;
        }
        u -= s->v[i].weight;
    }
    return s->n - 1;
}

bool scenario_matches(const struct scenario_entry *x, const char *status, size_t status_len,
                      bool has_code, int64_t code)
{
    if (x->expect_status[0] != '\0' && (strlen(x->expect_status) != status_len ||
                                        memcmp(x->expect_status, status, status_len) != 0)) {
        return false;
    }
    if (x->expect_has_code && (!has_code || code != x->expect_code)) {
        return false;
    }
    return true;
}

void scenario_free(struct scenario *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct scenario_entry *x = &s->v[i];
        free(x->name);
        free(x->pool);
        for (size_t k = 0; x->argv && k < x->argc; k++) {
            free(x->argv[k]);
        }
        free(x->argv);
        free(x->stdin_data);
    }
    free(s->v);
    *s = (struct scenario){0};
}
