/* SPDX-License-Identifier: MIT */
#pragma once
/* Helpers over libyaml's document API shared by the parsers of config.c and seccomp.c:
 * 1-based positions, YAML 1.1 nulls, node kinds, and the text of a parser failure.
 * No allocation; start-up only. */
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

/* A position in a file, 1-based (line and column in characters). */
struct yaml_pos {
    size_t line;
    size_t col;
};

struct yaml_pos yamlnode_pos(yaml_mark_t m);
/* The position of a byte offset, for reader errors that carry no mark. */
struct yaml_pos yamlnode_offset_pos(const char *text, size_t len, size_t off);
/* A plain scalar that YAML 1.1 reads as null: "", "~", "null", "Null", "NULL". */
bool yamlnode_is_null(const yaml_node_t *n);
/* "a mapping", "a sequence", "a scalar" or "nothing", for messages. */
const char *yamlnode_kind(const yaml_node_t *n);
/* Describes why the parser p failed on text: returns -ENOMEM for a memory error, else 0
 * with *ret_pos and the message ("problem (context at L:C)") in buf. */
int yamlnode_problem(const yaml_parser_t *p, const char *text, size_t len, struct yaml_pos *ret_pos,
                     char *buf, size_t size);
