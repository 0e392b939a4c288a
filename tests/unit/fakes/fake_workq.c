/* SPDX-License-Identifier: MIT */
/* lib/workq.c: jobs wait until the test runs them, work then done, on its own thread, so
 * that a creation or a removal ends exactly when the test says (fakes.h). */
#include "lib/workq.h"

#include <stddef.h>

#include "fakes.h"

static struct workq_job *head;
static struct workq_job *tail;
static size_t pending;

void workq_submit(struct workq *q, struct workq_job *j, void (*work)(struct workq_job *),
                  void (*done)(struct workq_job *))
{
    (void)q;
    fake_call("workq_submit");
    j->work = work;
    j->done = done;
    j->next = NULL;
    if (tail) {
        tail->next = j;
    } else {
        head = j;
    }
    tail = j;
    pending++;
}

struct workq_job *fake_workq_peek(void)
{
    return head;
}

size_t fake_workq_pending(void)
{
    return pending;
}

int fake_workq_run(void)
{
    int n = 0;
    struct workq_job *j;
    while ((j = head)) {
        head = j->next;
        if (!head) {
            tail = NULL;
        }
        pending--;
        j->work(j);
        j->done(j); /* may free j, and queue more */
        n++;
    }
    return n;
}
