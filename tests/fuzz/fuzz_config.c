/* SPDX-License-Identifier: MIT */
/* Fuzz target: configuration and pool files (YAML through libyaml into sbxd's schema).
 * An operator writes them, but a typo must never crash sbxd or leave it half-configured:
 * every input is parsed or refused with a "file:line:col: message" naming the file. The
 * first input byte chooses the whole config or one pool file. */
#include <errno.h>

#include "config/config.h"
#include "lib/err.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    bool pool = data[0] & 1;
    char *text = fuzz_dup(data + 1, size - 1);
    size_t n = size - 1;
    struct err e = ERR_INIT;
    if (pool) {
        struct pool_config p;
        int r = config_parse_pool("fuzz.yaml", text, n, &p, &e);
        FUZZ_CHECK(r <= 0);
        FUZZ_CHECK(r == 0 || strstr(err_msg(&e), "fuzz.yaml") != NULL);
        if (r == 0) {
            config_pool_clear(&p);
        }
    } else {
        struct config *c = NULL;
        /* A relative pools_dir resolves below a directory that does not exist. */
        int r = config_parse("fuzz.yaml", text, n, "/nonexistent/sbx-fuzz", &c, &e);
        FUZZ_CHECK(r <= 0);
        if (r == 0) {
            FUZZ_CHECK(c != NULL);
            e = (struct err)ERR_INIT;
            (void)config_validate(c, &e);
            config_free(c);
        } else {
            FUZZ_CHECK(c == NULL && err_msg(&e)[0] != '\0');
        }
    }
    free(text);
    return 0;
}
