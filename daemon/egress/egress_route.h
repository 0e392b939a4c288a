/* SPDX-License-Identifier: MIT */
#pragma once
/* The route of a plain-HTTP request in an egress profile of the config: the one lookup that
 * reads a config struct, kept out of wire/ so that the parsers know nothing of the config.
 * No I/O, no allocation; any thread. */
#include <stddef.h>
#include <stdint.h>

struct egress_profile_config;

/* Route lookup in p for a plain-HTTP request. host is normalized; path is the request's path
 * as it came, without query (len bytes). For a host with routes the path is normalized into
 * norm (room for len bytes; it may be path itself) by egress_path_normalize, and the routes'
 * prefixes are matched against that, the form the upstream gets. Returns 0 with *ret_index
 * and *ret_len (the normalized path's length), or -ENOENT (no route by that name), -EACCES
 * (a route by that name, but a path egress_path_normalize refuses or none of its prefixes
 * covers) or -EPERM (path fine, method not allowed); *why is a static phrase for the
 * refusal. */
int egress_route_find(const struct egress_profile_config *p, const char *host, uint32_t method,
                      const char *path, size_t len, char *norm, size_t *ret_index, size_t *ret_len,
                      const char **why);
