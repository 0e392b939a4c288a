/* SPDX-License-Identifier: MIT */
/* Unit tests of err.c's err_set_reported: a failure another process reported (init's
 * CTL_EXEC_FAILED, CTL_SETUP_FAILED) names its error once, whether or not the message
 * carries the name already. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lib/err.h"

static void err_set_reported__names_the_error_once(void **state)
{
    (void)state;
    struct err e = ERR_INIT;
    /* err_set's message ends with the name: not twice. */
    assert_int_equal(
        err_set_reported(&e, -ENOENT, "cannot execute the command", "execve 'x': ENOENT"), -ENOENT);
    assert_string_equal(err_msg(&e), "cannot execute the command: execve 'x': ENOENT");
    assert_int_equal(e.code, -ENOENT);
    /* err_setx's does not: the name is appended. */
    err_set_reported(&e, -EPROTO, "the task could not start", "bad task cwd");
    assert_string_equal(err_msg(&e), "the task could not start: bad task cwd: EPROTO");
    /* Another error's name at the end is not this one's. */
    err_set_reported(&e, -EPERM, "sandbox setup failed at stage 5", "mount: ENOENT");
    assert_string_equal(err_msg(&e), "sandbox setup failed at stage 5: mount: ENOENT: EPERM");
    /* No message: the name alone. */
    err_set_reported(&e, -EACCES, "cannot execute the command", "");
    assert_string_equal(err_msg(&e), "cannot execute the command: EACCES");
}

static void err_set_reported__truncates_within_the_buffer(void **state)
{
    (void)state;
    struct err e = ERR_INIT;
    char what[ERR_MSG_MAX + 16];
    memset(what, 'w', sizeof(what) - 1);
    what[sizeof(what) - 1] = '\0';
    err_set_reported(&e, -EIO, what, "msg");
    assert_int_equal(strlen(err_msg(&e)), ERR_MSG_MAX - 1);
    assert_int_equal(e.code, -EIO);
    assert_int_equal(err_set_reported(NULL, -EIO, "x", "y"), -EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(err_set_reported__names_the_error_once),
        cmocka_unit_test(err_set_reported__truncates_within_the_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
