/* SPDX-License-Identifier: MIT */
/* sandbox/kit.c: the drain flag, the image's state, and the spare cgroups as a stack the
 * test fills (fakes.h). */
#include "sandbox/kit.h"

#include <stdlib.h>

#include "fakes.h"

bool fake_kit_image_pending;
bool fake_kit_reserve;
struct cgroup *fake_kit_spare[FAKE_KIT_SPARES];
size_t fake_kit_n_spare;

struct sandbox_kit *kit_free(struct sandbox_kit *k)
{
    fake_call("kit_free");
    free(k);
    return NULL;
}

void kit_drain(struct sandbox_kit *k)
{
    fake_call("kit_drain");
    k->draining = true;
}

bool kit_image_pending(const struct sandbox_kit *k)
{
    (void)k;
    return fake_kit_image_pending;
}

struct cgroup *kit_take_cgroup(struct sandbox_kit *k)
{
    (void)k;
    return fake_kit_n_spare > 0 ? fake_kit_spare[--fake_kit_n_spare] : NULL;
}

bool kit_reserve_spare(struct sandbox_kit *k)
{
    if (!fake_kit_reserve) {
        return false;
    }
    k->n_spare_pending++;
    return true;
}

void kit_put_cgroup(struct sandbox_kit *k, struct cgroup *cg)
{
    k->n_spare_pending--;
    fake_call("kit_put_cgroup %s", cg ? "kept" : "none");
    if (cg && fake_kit_n_spare < FAKE_KIT_SPARES) {
        fake_kit_spare[fake_kit_n_spare++] = cg;
    }
}
