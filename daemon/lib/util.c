/* SPDX-License-Identifier: MIT */
/* The cleanup functions behind util.h's scoped_free and scoped_close
 * (util_closep is CHILD-SAFE; util_freep frees). */
#include "lib/util.h"

#include "lib/fd.h"

void util_freep(void *p)
{
    free(*(void **)p);
}

void util_closep(int *fd)
{
    *fd = fd_close(*fd);
}
