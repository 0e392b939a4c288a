/* SPDX-License-Identifier: MIT */
#pragma once
/* One string vector: an owned array of owned strings, NULL-terminated once anything was
 * pushed (v[n] == NULL), so v can be handed to what takes an argv. Memory comes from the
 * xmalloc family: callers bound client-controlled counts first. Not CHILD-SAFE. */
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/util.h"

struct strv {
    char **v; /* NULL until the first push */
    size_t n;
    size_t cap;
};

#define STRV_INIT ((struct strv){0})
/* A vector freed when it goes out of scope. */
#define scoped_strv scoped(strv_free)

/* Appends a copy of s. */
void strv_push(struct strv *sv, const char *s);
/* Appends a copy of the first len bytes of s. */
void strv_pushn(struct strv *sv, const char *s, size_t len);
/* Appends s itself: the vector owns it from now on. */
void strv_push_owned(struct strv *sv, char *s);
size_t strv_len(const struct strv *sv);
/* The index of the first string equal to s, or -1. */
ssize_t strv_find(const struct strv *sv, const char *s);
bool strv_contains(const struct strv *sv, const char *s);
/* Sorts the strings in strcmp order. */
void strv_sort(struct strv *sv);
/* Hands the array over (NULL-terminated; NULL when nothing was pushed) and its length in
 * *ret_n (may be NULL): the caller frees each string and the array. sv is empty afterwards. */
char **strv_steal(struct strv *sv, size_t *ret_n);
/* Frees the strings and the array; sv is empty afterwards. Usable as scoped(strv_free). */
void strv_free(struct strv *sv);
