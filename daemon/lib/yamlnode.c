/* SPDX-License-Identifier: MIT */
/* Positions, nulls, node kinds, parser failures and one-document loads over libyaml, for
 * every YAML parser of sbxd (config/, sandbox/seccomp_profile.c). Nothing here logs; only
 * libyaml's parser and document allocate. */
#include "lib/yamlnode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"

struct yaml_pos yamlnode_pos(yaml_mark_t m)
{
    return (struct yaml_pos){m.line + 1, m.column + 1};
}

struct yaml_pos yamlnode_offset_pos(const char *text, size_t len, size_t off)
{
    struct yaml_pos m = {1, 1};
    for (size_t i = 0; i < off && i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n') {
            m.line++;
            m.col = 1;
        } else if ((ch & 0xc0) != 0x80) {
            m.col++;
        }
    }
    return m;
}

bool yamlnode_is_null(const yaml_node_t *n)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    const char *s = (const char *)n->data.scalar.value;
    return strcmp(s, "") == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

const char *yamlnode_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_NO_NODE:
        break;
    }
    return "nothing";
}

int yamlnode_problem(const yaml_parser_t *p, const char *text, size_t len, struct yaml_pos *ret_pos,
                     char *buf, size_t size)
{
    if (p->error == YAML_MEMORY_ERROR) {
        return -ENOMEM;
    }
    *ret_pos = p->error == YAML_READER_ERROR ? yamlnode_offset_pos(text, len, p->problem_offset)
                                             : yamlnode_pos(p->problem_mark);
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->context) {
        struct yaml_pos cm = yamlnode_pos(p->context_mark);
        (void)snprintf(buf, size, "%s (%s at %zu:%zu)", problem, p->context, cm.line, cm.col);
    } else {
        (void)snprintf(buf, size, "%s", problem);
    }
    return 0;
}

int yamlnode_failv(struct err *e, int r, const char *file, size_t line, size_t col, const char *fmt,
                   va_list ap)
{
    char msg[ERR_MSG_MAX];
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    if (line > 0) {
        return err_setx(e, r, "%s:%zu:%zu: %s", file, line, col, msg);
    }
    return err_setx(e, r, "%s: %s", file, msg);
}

static int yamlnode_fail(struct err *e, int r, const char *file, struct yaml_pos pos,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int yamlnode_fail(struct err *e, int r, const char *file, struct yaml_pos pos,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    r = yamlnode_failv(e, r, file, pos.line, pos.col, fmt, ap);
    va_end(ap);
    return r;
}

void yamlnode_doc_done(struct yamlnode_doc *y)
{
    if (y->loaded) {
        yaml_document_delete(&y->doc);
        y->loaded = false;
    }
}

struct yparser {
    yaml_parser_t p;
    bool ready;
};

static void yparser_done(struct yparser *y)
{
    if (y->ready) {
        yaml_parser_delete(&y->p);
        y->ready = false;
    }
}

static int yaml_problem(const char *file, const char *text, size_t len, const yaml_parser_t *p,
                        struct err *e)
{
    char msg[ERR_MSG_MAX];
    struct yaml_pos q;
    if (yamlnode_problem(p, text, len, &q, msg, sizeof(msg)) < 0) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    return yamlnode_fail(e, -EINVAL, file, q, "%s", msg);
}

int yamlnode_doc_load(const char *file, const char *text, size_t len, struct yamlnode_doc *y,
                      struct err *e)
{
    scoped(yparser_done) struct yparser yp = {.ready = false};
    scoped(yamlnode_doc_done) struct yamlnode_doc first = {.loaded = false};
    scoped(yamlnode_doc_done) struct yamlnode_doc extra = {.loaded = false};

    if (!yaml_parser_initialize(&yp.p)) {
        return err_setx(e, -ENOMEM, "%s: out of memory while parsing", file);
    }
    yp.ready = true;
    yaml_parser_set_input_string(&yp.p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&yp.p, &first.doc)) {
        return yaml_problem(file, text, len, &yp.p, e);
    }
    first.loaded = true;
    /* A second document is a mistake, and its syntax errors are errors too. */
    if (!yaml_parser_load(&yp.p, &extra.doc)) {
        return yaml_problem(file, text, len, &yp.p, e);
    }
    extra.loaded = true;
    yaml_node_t *root = yaml_document_get_root_node(&extra.doc);
    if (root) {
        return yamlnode_fail(e, -EINVAL, file, yamlnode_pos(root->start_mark),
                             "only one YAML document is allowed");
    }
    y->doc = first.doc;
    y->loaded = true;
    first.loaded = false;
    return 0;
}
