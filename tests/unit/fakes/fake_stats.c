/* SPDX-License-Identifier: MIT */
/* What pool_get_stats reads of the kit's image and fork server, for tests that link pool.c
 * without sandbox/: no image ("host") and no fork server. */
#include <string.h>

#include "sandbox/forkserver.h"
#include "sandbox/image.h"

const char *image_state_name(const struct image *img)
{
    return img ? "fake" : "host";
}

void forkserver_get_stats(struct forkserver *z, struct forkserver_stats *ret)
{
    (void)z;
    memset(ret, 0, sizeof(*ret));
}
