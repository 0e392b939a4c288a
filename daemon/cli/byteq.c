/* SPDX-License-Identifier: MIT */
/* sbx's byte queues: what waits for the socket to sbxd or for our stdout and stderr. They
 * never cap what they hold; every producer stops on its own high-water mark first. */
#include "cli/cli_impl.h"

#define SBX_QUEUE_MIN 4096 /* first allocation of a byte queue */

size_t byteq_pending(const struct byteq *q)
{
    return q->b.len - q->off;
}

const char *byteq_data(const struct byteq *q)
{
    return q->b.p ? q->b.p + q->off : "";
}

void byteq_append(struct byteq *q, const void *p, size_t n)
{
    if (n == 0) {
        return;
    }
    if (q->off > 0 && buf_room(&q->b) < n) {
        buf_consume(&q->b, q->off);
        q->off = 0;
    }
    if (q->b.cap == 0) {
        (void)buf_reserve(&q->b, SBX_QUEUE_MIN - 1);
    }
    /* Uncapped: what feeds a queue stops while it is above SBX_SEND_HIGH or SBX_OUT_HIGH,
     * and --json output is bounded by SBX_JSON_CAP. */
    (void)buf_append(&q->b, p, n);
}

void byteq_consume(struct byteq *q, size_t n)
{
    q->off += n;
    if (q->off == q->b.len) {
        q->off = 0;
        buf_reset(&q->b);
    }
}

void byteq_release(struct byteq *q)
{
    buf_free(&q->b);
    q->off = 0;
}

int byteq_pack_cb(void *data, const char *p, size_t n)
{
    byteq_append(data, p, n);
    return 0;
}
