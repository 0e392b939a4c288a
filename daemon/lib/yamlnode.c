/* SPDX-License-Identifier: MIT */
/* Positions, nulls, node kinds and parser failures over libyaml, for every YAML parser of
 * sbxd (config.c, seccomp.c). Nothing here allocates or logs. */
#include "lib/yamlnode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
