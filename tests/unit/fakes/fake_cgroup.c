/* SPDX-License-Identifier: MIT */
/* sandbox/cgroup.c: handles with a name and nothing on disk; what a sandbox does to its
 * cgroup is logged (fakes.h). */
#include "sandbox/cgroup.h"

#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"

#include "fakes.h"

struct cgroup {
    char name[24];
};

int fake_cgroup_create_r;
bool fake_cgroup_empty = true;
int fake_cgroup_reset_r;
unsigned fake_cgroup_live;

struct cgroup *fake_cgroup_new(const char *name)
{
    struct cgroup *cg = xcalloc(1, sizeof(*cg));
    str_copy(cg->name, name, sizeof(cg->name));
    fake_cgroup_live++;
    return cg;
}

int cgroup_create(struct cgroup_root *root, const char *name, const struct cgroup_limits *lim,
                  struct cgroup **ret, struct err *e)
{
    (void)root;
    (void)lim;
    fake_call("cgroup_create %s", name);
    if (fake_cgroup_create_r < 0) {
        return err_setx(e, fake_cgroup_create_r, "cgroup %s: fake failure", name);
    }
    *ret = fake_cgroup_new(name);
    return 0;
}

struct cgroup *cgroup_free(struct cgroup *cg)
{
    if (cg) {
        fake_cgroup_live--;
        free(cg);
    }
    return NULL;
}

const char *cgroup_name(const struct cgroup *cg)
{
    return cg->name;
}

bool cgroup_is_empty(struct cgroup *cg)
{
    (void)cg;
    return fake_cgroup_empty;
}

int cgroup_kill_all(struct cgroup *cg)
{
    fake_call("cgroup_kill_all %s", cg->name);
    return 0;
}

int cgroup_reset(struct cgroup *cg, struct err *e)
{
    fake_call("cgroup_reset %s", cg->name);
    if (fake_cgroup_reset_r < 0) {
        return err_setx(e, fake_cgroup_reset_r, "cgroup %s: fake reset failure", cg->name);
    }
    return 0;
}

int cgroup_remove(struct cgroup *cg, struct err *e)
{
    (void)e;
    fake_call("cgroup_remove %s", cg->name);
    return 0;
}

struct cgroup_usage fake_cgroup_usage;

int cgroup_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
    (void)cg;
    *ret = fake_cgroup_usage;
    return 0;
}
