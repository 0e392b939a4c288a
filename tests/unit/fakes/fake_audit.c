/* SPDX-License-Identifier: MIT */
/* audit/audit.c's commit wait: the callbacks wait, in order, until the test commits them
 * (fakes.h). */
#include "audit/audit.h"

#include <stdlib.h>

#include "fakes.h"

#define FAKE_AUDIT_WAITS 16

static struct {
    audit_commit_cb cb;
    void *arg;
} waits[FAKE_AUDIT_WAITS];
static size_t n_waits;

void audit_when_committed(struct audit *a, uint64_t ticket, audit_commit_cb cb, void *arg)
{
    (void)a;
    fake_call("audit_when_committed %llu", (unsigned long long)ticket);
    if (ticket == 0) {
        cb(arg, true);
        return;
    }
    if (n_waits == FAKE_AUDIT_WAITS) {
        abort();
    }
    waits[n_waits].cb = cb;
    waits[n_waits].arg = arg;
    n_waits++;
}

void audit_write_ahead(struct audit *a)
{
    (void)a; /* nothing is written: the waits above are what the tests see */
}

bool fake_audit_commit(bool committed)
{
    if (n_waits == 0) {
        return false;
    }
    audit_commit_cb cb = waits[0].cb;
    void *arg = waits[0].arg;
    n_waits--;
    for (size_t i = 0; i < n_waits; i++) {
        waits[i] = waits[i + 1];
    }
    cb(arg, committed);
    return true;
}

size_t fake_audit_waiting(void)
{
    return n_waits;
}

void fake_audit_reset(void)
{
    n_waits = 0;
    fake_audit_ticket = 0;
}
