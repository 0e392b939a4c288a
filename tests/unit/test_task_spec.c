/* SPDX-License-Identifier: MIT */
/* struct task_spec: building argv and env under the request's limit, setting and replacing
 * env variables (egress's proxy variables), iteration for the audit trail, and packing into
 * CTL_TASK. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/util.h"
#include "sandbox/task_spec.h"
#include "wire/ctl.h"

/* Adds a NUL-terminated argument or NAME=value. */
static void arg(struct task_spec *s, const char *a)
{
    assert_int_equal(task_spec_add_arg(s, a, strlen(a)), 0);
}

static void env(struct task_spec *s, const char *name, const char *value, bool base)
{
    assert_int_equal(task_spec_add_env(s, name, strlen(name), value, strlen(value), base), 0);
}

/* Checks that the strings are exactly want (n of them), in order, filling len. */
static void expect_strings(const struct task_spec *s, const char *const *want, size_t n)
{
    assert_int_equal(s->argc + s->envc, n);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(off < s->len);
        assert_string_equal(s->strings + off, want[i]);
        off += strlen(want[i]) + 1;
    }
    assert_int_equal(off, s->len);
}

static void task_spec_add__fills_one_block_in_order(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    task_spec_begin(&s, 4096);
    arg(&s, "python3");
    arg(&s, "");
    env(&s, "PATH", "/bin", true);
    env(&s, "A", "", false);
    assert_int_equal(s.argc, 2);
    assert_int_equal(s.envc, 2);
    assert_int_equal(s.env_base, 1);
    static const char *const want[] = {"python3", "", "PATH=/bin", "A="};
    expect_strings(&s, want, ARRAY_SIZE(want));
}

static void task_spec_add__refuses_nul_and_the_limit(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    task_spec_begin(&s, 8);
    assert_int_equal(task_spec_add_arg(&s, "a\0b", 3), -EINVAL);
    assert_int_equal(s.argc, 0);
    assert_int_equal(task_spec_add_arg(&s, "1234567", 7), 0); /* 8 bytes with its NUL */
    assert_int_equal(task_spec_add_arg(&s, "", 0), -E2BIG);
    assert_int_equal(task_spec_add_env(&s, "A", 1, "", 0, false), -E2BIG);
    assert_int_equal(s.argc, 1);
    assert_int_equal(s.envc, 0);
    assert_int_equal(s.len, 8);
}

static void task_spec_env_set__replaces_every_value_and_goes_last(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    task_spec_begin(&s, 4096);
    arg(&s, "sh");
    env(&s, "PATH", "/bin", true);
    env(&s, "HOME", "/tmp", true);
    env(&s, "X", "1", false);
    env(&s, "XY", "2", false); /* a longer name is another variable */
    env(&s, "X", "3", false);
    assert_int_equal(task_spec_env_set(&s, "X", "new", &e), 0);
    static const char *const want[] = {"sh", "PATH=/bin", "HOME=/tmp", "XY=2", "X=new"};
    expect_strings(&s, want, ARRAY_SIZE(want));
    assert_int_equal(s.env_base, 2);
    /* A base variable replaced leaves the base env. */
    assert_int_equal(task_spec_env_set(&s, "PATH", "/usr/bin", &e), 0);
    static const char *const want2[] = {"sh", "HOME=/tmp", "XY=2", "X=new", "PATH=/usr/bin"};
    expect_strings(&s, want2, ARRAY_SIZE(want2));
    assert_int_equal(s.env_base, 1);
    task_spec_env_unset(&s, "XY");
    task_spec_env_unset(&s, "nothing");
    static const char *const want3[] = {"sh", "HOME=/tmp", "X=new", "PATH=/usr/bin"};
    expect_strings(&s, want3, ARRAY_SIZE(want3));
}

static void task_spec_env_set__grows_past_the_request_limit_to_the_packet(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    task_spec_begin(&s, 4);
    arg(&s, "abc");
    assert_int_equal(task_spec_env_set(&s, "NAME", "value", &e), 0);
    static const char *const want[] = {"abc", "NAME=value"};
    expect_strings(&s, want, ARRAY_SIZE(want));
    assert_true(s.cap >= s.len);
    /* Past TASK_SPEC_STRINGS_MAX: refused, nothing changed. */
    size_t big = TASK_SPEC_STRINGS_MAX - s.len - 2; /* "B=" and its NUL reach the max + 1 */
    scoped_free char *v = xmalloc(big + 1);
    memset(v, 'v', big);
    v[big] = '\0';
    assert_int_equal(task_spec_env_set(&s, "B", v, &e), -E2BIG);
    assert_string_equal(err_msg(&e), "argv and env exceed 98304 bytes");
    expect_strings(&s, want, ARRAY_SIZE(want));
    v[big - 1] = '\0'; /* exactly the max */
    assert_int_equal(task_spec_env_set(&s, "B", v, &e), 0);
    assert_int_equal(s.len, TASK_SPEC_STRINGS_MAX);
    /* Replacing NAME with a value as long frees as much as it takes: still fits. */
    assert_int_equal(task_spec_env_set(&s, "NAME", "VALUE", &e), 0);
    assert_int_equal(s.len, TASK_SPEC_STRINGS_MAX);
    assert_int_equal(task_spec_env_set(&s, "NAME", "VALUE!", &e), -E2BIG);
}

/* The rules egress_env_rewrite had: the four variables, the request's own replaced, the
 * rest kept in order, argv untouched. */
static void task_spec_set_proxy__replaces_proxy_variables(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    task_spec_begin(&s, 4096);
    arg(&s, "python3");
    arg(&s, "-c");
    arg(&s, "x");
    env(&s, "PATH", "/bin", true);
    env(&s, "HTTP_PROXY", "http://evil:1", false);
    env(&s, "https_proxy", "x", false);
    env(&s, "NO_PROXY", "*", false);
    assert_int_equal(task_spec_set_proxy(&s, 3128, &e), 0);
    assert_int_equal(s.argc, 3);
    assert_int_equal(s.envc, 6);
    static const char *const want[] = {"python3",
                                       "-c",
                                       "x",
                                       "PATH=/bin",
                                       "NO_PROXY=*",
                                       "HTTP_PROXY=http://127.0.0.1:3128",
                                       "HTTPS_PROXY=http://127.0.0.1:3128",
                                       "http_proxy=http://127.0.0.1:3128",
                                       "https_proxy=http://127.0.0.1:3128"};
    expect_strings(&s, want, ARRAY_SIZE(want));
}

static void task_spec_set_proxy__bounds(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    size_t n = TASK_SPEC_STRINGS_MAX - 10;
    task_spec_begin(&s, TASK_SPEC_STRINGS_MAX);
    scoped_free char *a = xmalloc(n);
    memset(a, 'a', n);
    assert_int_equal(task_spec_add_arg(&s, a, n - 1), 0);
    assert_int_equal(task_spec_set_proxy(&s, 3128, &e), -E2BIG);
    assert_string_equal(err_msg(&e), "argv and env exceed 98304 bytes with the proxy variables");
    assert_int_equal(s.len, n); /* argv untouched */
    assert_int_equal(s.envc, 0);
}

static void task_spec_iter__argv_and_the_requests_env(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    task_spec_begin(&s, 4096);
    arg(&s, "ls");
    arg(&s, "");
    arg(&s, "-l");
    env(&s, "PATH", "/bin", true);
    env(&s, "HOME", "/tmp", true);
    env(&s, "A", "1", false);
    env(&s, "B", "", false);
    struct task_spec_iter it;
    const char *str;
    size_t len;
    static const char *const argv[] = {"ls", "", "-l"};
    task_spec_argv(&s, &it);
    for (size_t i = 0; i < ARRAY_SIZE(argv); i++) {
        assert_true(task_spec_next(&it, &str, &len));
        assert_int_equal(len, strlen(argv[i]));
        assert_memory_equal(str, argv[i], len);
    }
    assert_false(task_spec_next(&it, &str, &len));
    task_spec_request_env(&s, &it);
    assert_true(task_spec_next(&it, &str, &len));
    assert_string_equal(str, "A=1");
    assert_true(task_spec_next(&it, &str, &len));
    assert_string_equal(str, "B=");
    assert_int_equal(len, 2);
    assert_false(task_spec_next(&it, &str, &len));
    /* Nothing to walk in an empty spec. */
    struct task_spec empty = TASK_SPEC_INIT;
    task_spec_argv(&empty, &it);
    assert_false(task_spec_next(&it, &str, &len));
    task_spec_request_env(&empty, &it);
    assert_false(task_spec_next(&it, &str, &len));
}

static void task_spec_pack__fills_the_header(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    task_spec_begin(&s, 4096);
    arg(&s, "true");
    env(&s, "PATH", "/bin", true);
    str_copy(s.cwd, "/work", sizeof(s.cwd));
    s.n_mounts = 2;
    s.mount_fds[0] = s.mount_fds[1] = -1;
    s.mount_files = 2;
    str_copy(s.mount_dst[0], "/data", sizeof(s.mount_dst[0]));
    str_copy(s.mount_dst[1], "/etc/x.conf", sizeof(s.mount_dst[1]));
    struct ctl_task hdr;
    memset(&hdr, 0xff, sizeof(hdr));
    assert_int_equal(task_spec_pack(&s, 64, &hdr, &e), 0);
    assert_int_equal(hdr.magic, CTL_MAGIC);
    assert_int_equal(hdr.type, CTL_TASK);
    assert_int_equal(hdr.argc, 1);
    assert_int_equal(hdr.envc, 1);
    assert_int_equal(hdr.nofile, 64);
    assert_int_equal(hdr.data_len, sizeof("true") + sizeof("PATH=/bin"));
    assert_string_equal(hdr.cwd, "/work");
    assert_int_equal(hdr.n_mounts, 2);
    assert_int_equal(hdr.mount_files, 2);
    assert_string_equal(hdr.mount_dst[0], "/data");
    assert_string_equal(hdr.mount_dst[1], "/etc/x.conf");
    assert_int_equal(hdr.mount_dst[2][0], '\0'); /* the rest zeroed, as init reads it */
    assert_int_equal(hdr.flags, 0);
    /* A session's command: the sandbox outlives it. */
    s.keep = true;
    assert_int_equal(task_spec_pack(&s, 64, &hdr, &e), 0);
    assert_int_equal(hdr.flags, CTL_TASK_KEEP);
}

static void task_spec_pack__limits(void **state)
{
    (void)state;
    scoped(task_spec_clear) struct task_spec s = TASK_SPEC_INIT;
    struct err e = ERR_INIT;
    struct ctl_task hdr;
    assert_int_equal(task_spec_pack(&s, 64, &hdr, &e), -EINVAL); /* no argv */
    assert_string_equal(err_msg(&e), "task has no argv");
    task_spec_begin(&s, 16);
    arg(&s, "true");
    s.n_mounts = TASK_SPEC_MOUNTS_MAX + 1;
    assert_int_equal(task_spec_pack(&s, 64, &hdr, &e), -EINVAL);
    s.n_mounts = 0;
    s.len = TASK_SPEC_STRINGS_MAX + 1; /* only set_proxy's own bound keeps this out */
    assert_int_equal(task_spec_pack(&s, 64, &hdr, &e), -E2BIG);
    s.len = 5;
}

static void task_spec_move__and_clear_own_the_grants(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct task_spec a = TASK_SPEC_INIT;
    task_spec_begin(&a, 64);
    arg(&a, "true");
    a.token_id = xstrdup("tok_1");
    a.net_profile = xstrdup("pypi");
    a.n_mounts = 1;
    a.mount_fds[0] = p[0];
    struct task_spec b = TASK_SPEC_INIT;
    task_spec_move(&b, &a);
    assert_null(a.strings);
    assert_null(a.token_id);
    assert_int_equal(a.n_mounts, 0);
    task_spec_clear(&a); /* owns nothing: a no-op */
    assert_string_equal(b.strings, "true");
    assert_string_equal(b.token_id, "tok_1");
    /* The payload goes once CTL_TASK is sent; the names stay for the result. */
    task_spec_drop_payload(&b);
    assert_null(b.strings);
    assert_int_equal(b.mount_fds[0], -1);
    assert_int_equal(close(p[0]), -1); /* it was closed */
    assert_string_equal(b.net_profile, "pypi");
    task_spec_clear(&b);
    assert_null(b.token_id);
    task_spec_clear(&b);
    task_spec_clear(NULL);
    (void)close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(task_spec_add__fills_one_block_in_order),
        cmocka_unit_test(task_spec_add__refuses_nul_and_the_limit),
        cmocka_unit_test(task_spec_env_set__replaces_every_value_and_goes_last),
        cmocka_unit_test(task_spec_env_set__grows_past_the_request_limit_to_the_packet),
        cmocka_unit_test(task_spec_set_proxy__replaces_proxy_variables),
        cmocka_unit_test(task_spec_set_proxy__bounds),
        cmocka_unit_test(task_spec_iter__argv_and_the_requests_env),
        cmocka_unit_test(task_spec_pack__fills_the_header),
        cmocka_unit_test(task_spec_pack__limits),
        cmocka_unit_test(task_spec_move__and_clear_own_the_grants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
