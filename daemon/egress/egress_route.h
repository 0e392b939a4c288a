/* SPDX-License-Identifier: MIT */
#pragma once
/* The route of a plain-HTTP request in an egress profile of the config: the one lookup that
 * reads a config struct, kept out of wire/egress_parse.c so that the parsers know nothing of
 * the config. No I/O, no allocation; any thread. */
#include <stddef.h>
#include <stdint.h>

struct egress_profile_config;

/* Route lookup in p for a plain-HTTP request. host is normalized; path is the request's
 * path without query (len bytes). Returns 0 and *ret_index, or -ENOENT (no route by that
 * name), -EACCES (a route by that name, but not this path) or -EPERM (path fine, method
 * not allowed); *why is a static phrase for the refusal. */
int egress_route_find(const struct egress_profile_config *p, const char *host, uint32_t method,
                      const char *path, size_t len, size_t *ret_index, const char **why);
