/* SPDX-License-Identifier: MIT */
#pragma once
/* Files compiled into sbxd by daemon/gen_embedded.sh (build/embedded.c): the default
 * config (deploy/sbxd.yaml), the pool files and the seccomp profiles. NUL-terminated texts. */
#include <stddef.h>

struct embedded_file {
    const char *name; /* the path in the source tree */
    const char *text;
    size_t len;
};

extern const struct embedded_file embedded_config;
extern const struct embedded_file embedded_pools[];
extern const size_t embedded_n_pools;
extern const struct embedded_file embedded_seccomp[];
extern const size_t embedded_n_seccomp;
