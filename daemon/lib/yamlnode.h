/* SPDX-License-Identifier: MIT */
#pragma once
/* Helpers over libyaml's document API shared by the parsers of config/ and
 * sandbox/seccomp_profile.c: 1-based positions, YAML 1.1 nulls, node kinds, the text of a
 * parser failure, "file:line:col: msg" errors, and loading exactly one document from a
 * buffer. Start-up only; nothing but libyaml's document allocates. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#include "lib/err.h"

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
/* Sets e to "file:line:col: msg" (or "file: msg" when line is 0) from fmt and ap, and
 * returns r. */
int yamlnode_failv(struct err *e, int r, const char *file, size_t line, size_t col, const char *fmt,
                   va_list ap) __attribute__((format(printf, 6, 0)));

/* A document parsed by libyaml; loaded says whether doc holds one to free. */
struct yamlnode_doc {
    yaml_document_t doc;
    bool loaded;
};

/* Frees y's document, if loaded (a scoped() cleanup). */
void yamlnode_doc_done(struct yamlnode_doc *y);
/* Parses text as exactly one YAML document into y (an empty stream gives a document without
 * a root); y is left unloaded on failure. file (not NULL) names the text in messages.
 * Returns 0, or -EINVAL (bad YAML, a second document) or -ENOMEM, with e set. */
int yamlnode_doc_load(const char *file, const char *text, size_t len, struct yamlnode_doc *y,
                      struct err *e);
