/* SPDX-License-Identifier: MIT */
/* Finds the route of a plain-HTTP request in an egress profile: by the route's name, its path
 * prefix (whole segments, egress_parse_path_under) and its methods, in the profile's order. It only
 * reads the profile; the request is parsed and normalized by wire/egress_parse.c. */
#include "egress/egress_route.h"

#include <errno.h>
#include <stdbool.h>
#include <strings.h>

#include "config/config.h"
#include "wire/egress_parse.h"

int egress_route_find(const struct egress_profile_config *p, const char *host, uint32_t method,
                      const char *path, size_t len, size_t *ret_index, const char **why)
{
    bool named = false;
    bool under = false;
    for (size_t i = 0; i < p->n_routes; i++) {
        const struct egress_route_config *r = &p->routes[i];
        if (strcasecmp(r->name, host) != 0) {
            continue;
        }
        named = true;
        if (!egress_parse_path_under(path, len, r->path_prefix)) {
            continue;
        }
        under = true;
        if (!(r->methods & method)) {
            continue;
        }
        *ret_index = i;
        return 0;
    }
    if (!named) {
        *why = "no route by that name";
        return -ENOENT;
    }
    if (!under) {
        *why = "the path is outside the route's prefix";
        return -EACCES;
    }
    *why = "the method is not allowed on the route";
    return -EPERM;
}
