/* SPDX-License-Identifier: MIT */
/* Finds the route of a plain-HTTP request in an egress profile: by the route's name, then on
 * the normalized path (wire/egress_path.c, which refuses what an upstream could resolve
 * elsewhere) by its path prefix in whole segments, and its methods, in the profile's order.
 * It only reads the profile. */
#include "egress/egress_route.h"

#include <errno.h>
#include <stdbool.h>
#include <strings.h>

#include "config/config.h"
#include "wire/egress_path.h"

int egress_route_find(const struct egress_profile_config *p, const char *host, uint32_t method,
                      const char *path, size_t len, char *norm, size_t *ret_index, size_t *ret_len,
                      const char **why)
{
    bool named = false;
    bool under = false;
    size_t nlen = 0;
    for (size_t i = 0; i < p->n_routes; i++) {
        const struct egress_route_config *r = &p->routes[i];
        if (strcasecmp(r->name, host) != 0) {
            continue;
        }
        /* SECURITY: prefixes are matched on the form the upstream gets, never on the raw
         * path, and only once it cannot be read as another path. */
        if (!named && egress_path_normalize(path, len, norm, &nlen, why) < 0) {
            return -EACCES;
        }
        named = true;
        if (!egress_path_under(norm, nlen, r->path_prefix)) {
            continue;
        }
        under = true;
        if (!(r->methods & method)) {
            continue;
        }
        *ret_index = i;
        *ret_len = nlen;
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
