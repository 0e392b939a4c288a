/* SPDX-License-Identifier: MIT */
/* Unit tests of lib/listener.c: a server is freed exactly once, by whichever comes last of
 * its listener's close and its last connection's close, and never before listener_close;
 * stopping early closes the handle once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "lib/listener.h"
#include "lib/util.h"

struct server {
    int before;
    struct listener l;
    int *freed;
};

static void server_free(struct listener *l)
{
    struct server *s = container_of(l, struct server, l);
    (*s->freed)++;
    free(s);
}

static struct server *server_new(uv_loop_t *loop, int *freed)
{
    struct server *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->freed = freed;
    listener_init(&s->l, server_free);
    assert_int_equal(uv_tcp_init(loop, &s->l.tcp), 0);
    s->l.tcp.data = s;
    return s;
}

static void listener_close__no_connections_frees_after_the_handle_closes(void **state)
{
    (void)state;
    uv_loop_t loop;
    int freed = 0;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct server *s = server_new(&loop, &freed);
    listener_close(&s->l);
    assert_int_equal(freed, 0); /* the handle's close callback has not run */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(freed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void listener_conn_closed__last_connection_frees(void **state)
{
    (void)state;
    uv_loop_t loop;
    int freed = 0;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct server *s = server_new(&loop, &freed);
    listener_conn_opened(&s->l);
    listener_conn_opened(&s->l);
    assert_int_equal(s->l.n_conns, 2);
    listener_close(&s->l);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(freed, 0); /* two connections are still open */
    listener_conn_closed(&s->l);
    assert_int_equal(freed, 0);
    listener_conn_closed(&s->l);
    assert_int_equal(freed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void listener_stop__closes_once_and_frees_only_at_close(void **state)
{
    (void)state;
    uv_loop_t loop;
    int freed = 0;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct server *s = server_new(&loop, &freed);
    listener_conn_opened(&s->l);
    listener_stop(&s->l);
    listener_stop(&s->l); /* a second uv_close would abort in libuv */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(s->l.handle_closed);
    listener_conn_closed(&s->l);
    assert_int_equal(freed, 0); /* not closing yet: the owner still runs */
    listener_close(&s->l);
    assert_int_equal(freed, 1);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(listener_close__no_connections_frees_after_the_handle_closes),
        cmocka_unit_test(listener_conn_closed__last_connection_frees),
        cmocka_unit_test(listener_stop__closes_once_and_frees_only_at_close),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
