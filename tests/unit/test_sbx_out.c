/* SPDX-License-Identifier: MIT */
/* Unit tests of cli/sbx_out.c: the paths sbx refuses to write a collected file at (absolute,
 * "..", empty components), and the writes beneath a real directory that must never leave
 * it: through a symlink to a directory outside, a symlink at the file's own name, a hard
 * link to a file outside, or a file where a directory must be. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_impl.h"
#include "lib/util.h"

struct fixture {
    char top[64]; /* a temporary directory: out/ is the destination, outside/ is not */
    int out;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char path[128];
    (void)snprintf(f->top, sizeof(f->top), "/tmp/test_sbx_out.XXXXXX");
    assert_non_null(mkdtemp(f->top));
    (void)snprintf(path, sizeof(path), "%s/out", f->top);
    assert_int_equal(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/outside", f->top);
    assert_int_equal(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/out", f->top);
    f->out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->out >= 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[160];
    (void)close(f->out);
    (void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->top);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* The content of top/rel, or NULL when it cannot be read. */
static char *slurp(const struct fixture *f, const char *rel, char *buf, size_t size)
{
    char path[256];
    (void)snprintf(path, sizeof(path), "%s/%s", f->top, rel);
    ssize_t n = file_read_small(AT_FDCWD, path, buf, size);
    return n < 0 ? NULL : buf;
}

static bool exists(const struct fixture *f, const char *rel)
{
    char path[256];
    struct stat st;
    (void)snprintf(path, sizeof(path), "%s/%s", f->top, rel);
    return lstat(path, &st) == 0;
}

/* The number of entries of top/rel, "." and ".." aside. */
static int entries(const struct fixture *f, const char *rel)
{
    char cmd[256];
    (void)snprintf(cmd, sizeof(cmd), "exit $(ls -A '%s/%s' | wc -l)", f->top, rel);
    return WEXITSTATUS(system(cmd));
}

static void sbx_out_check_path__refuses_what_leaves_the_directory(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "", "/etc/passwd", "..", "../x", "a/../../x", "a/..", "./a", "a/./b", "a//b", "a/", "/",
    };
    const char *why = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        why = NULL;
        assert_int_equal(sbx_out_check_path(bad[i], strlen(bad[i]), &why), -EINVAL);
        assert_non_null(why);
    }
    assert_int_equal(sbx_out_check_path("a\0b", 3, &why), -EINVAL);
    assert_string_equal(why, "NUL byte in the path");
    char longc[300];
    memset(longc, 'x', sizeof(longc) - 1);
    longc[sizeof(longc) - 1] = '\0';
    assert_int_equal(sbx_out_check_path(longc, strlen(longc), &why), -ENAMETOOLONG);
    longc[255] = '\0';
    assert_int_equal(sbx_out_check_path(longc, strlen(longc), &why), 0);
    static const char *const good[] = {"a", "a/b/c.txt", "..a", "a..", ".hidden/x", "caf\xc3\xa9"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
        assert_int_equal(sbx_out_check_path(good[i], strlen(good[i]), &why), 0);
    }
}

static void sbx_out_write__creates_parents_and_applies_the_mode(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char buf[64], path[256];
    struct stat st;
    mode_t old = umask(077);
    assert_int_equal(sbx_out_write(f->out, "d1/d2/x.sh", 10, "#!/bin/sh\n", 10, 0755, &e), 0);
    assert_int_equal(sbx_out_write(f->out, "secret", 6, "s", 1, 0600, &e), 0);
    assert_int_equal(sbx_out_write(f->out, "empty", 5, "", 0, 0644, &e), 0);
    (void)umask(old);
    assert_string_equal(slurp(f, "out/d1/d2/x.sh", buf, sizeof(buf)), "#!/bin/sh\n");
    (void)snprintf(path, sizeof(path), "%s/out/d1/d2/x.sh", f->top);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755); /* the mode is applied, whatever the umask */
    (void)snprintf(path, sizeof(path), "%s/out/secret", f->top);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    (void)snprintf(path, sizeof(path), "%s/out/empty", f->top);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_true(S_ISREG(st.st_mode));
    /* Setuid and the like never come through. */
    assert_int_equal(sbx_out_write(f->out, "suid", 4, "x", 1, 04755, &e), 0);
    (void)snprintf(path, sizeof(path), "%s/out/suid", f->top);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    /* A second write replaces the file. */
    assert_int_equal(sbx_out_write(f->out, "secret", 6, "again", 5, 0640, &e), 0);
    assert_string_equal(slurp(f, "out/secret", buf, sizeof(buf)), "again");
    /* Nothing but the files themselves is left behind (no temporary names). */
    assert_int_equal(entries(f, "out"), 4); /* d1, secret, empty, suid */
}

static void sbx_out_write__refuses_hostile_paths_and_writes_nothing(void **state)
{
    struct fixture *f = *state;
    static const char *const bad[] = {"../outside/x", "/tmp/x", "a/../../outside/x", ""};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct err e = ERR_INIT;
        assert_true(sbx_out_write(f->out, bad[i], strlen(bad[i]), "x", 1, 0644, &e) < 0);
        assert_true(err_msg(&e)[0] != '\0');
    }
    assert_int_equal(entries(f, "outside"), 0);
    assert_int_equal(entries(f, "out"), 0);
}

static void sbx_out_write__never_follows_a_symlink_on_the_way(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char path[256], target[256], buf[16];
    (void)snprintf(path, sizeof(path), "%s/out/link", f->top);
    (void)snprintf(target, sizeof(target), "%s/outside", f->top);
    assert_int_equal(symlink(target, path), 0);
    /* O_DIRECTORY | O_NOFOLLOW on a symlink: ENOTDIR (ELOOP on some kernels). */
    int r = sbx_out_write(f->out, "link/x", 6, "x", 1, 0644, &e);
    assert_true(r == -ENOTDIR || r == -ELOOP);
    assert_non_null(strstr(err_msg(&e), "'link' is a symlink or not a directory"));
    /* A symlink at the file's own name is not written through either, nor replaced. */
    (void)snprintf(path, sizeof(path), "%s/out/name", f->top);
    (void)snprintf(target, sizeof(target), "%s/outside/victim", f->top);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(sbx_out_write(f->out, "name", 4, "x", 1, 0644, &e), -EEXIST);
    assert_false(exists(f, "outside/victim"));
    /* A relative symlink to the parent, deeper down. */
    (void)snprintf(path, sizeof(path), "%s/out/d", f->top);
    assert_int_equal(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/out/d/up", f->top);
    assert_int_equal(symlink("../..", path), 0);
    r = sbx_out_write(f->out, "d/up/outside/y", 14, "y", 1, 0644, &e);
    assert_true(r == -ENOTDIR || r == -ELOOP);
    assert_int_equal(entries(f, "outside"), 0);
    /* A file where a directory must be. */
    assert_int_equal(sbx_out_write(f->out, "plain", 5, "p", 1, 0644, &e), 0);
    assert_int_equal(sbx_out_write(f->out, "plain/z", 7, "z", 1, 0644, &e), -ENOTDIR);
    assert_string_equal(slurp(f, "out/plain", buf, sizeof(buf)), "p");
    /* A directory where the file must be. */
    assert_int_equal(sbx_out_write(f->out, "d", 1, "z", 1, 0644, &e), -EEXIST);
}

static void sbx_out_write__replaces_a_hard_link_without_writing_through_it(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char path[256], target[256], buf[16];
    (void)snprintf(target, sizeof(target), "%s/outside/keep", f->top);
    int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, "original", 8), 0);
    (void)close(fd);
    (void)snprintf(path, sizeof(path), "%s/out/hard", f->top);
    assert_int_equal(link(target, path), 0);
    assert_int_equal(sbx_out_write(f->out, "hard", 4, "new", 3, 0644, &e), 0);
    assert_string_equal(slurp(f, "outside/keep", buf, sizeof(buf)), "original");
    assert_string_equal(slurp(f, "out/hard", buf, sizeof(buf)), "new");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sbx_out_check_path__refuses_what_leaves_the_directory),
        cmocka_unit_test_setup_teardown(sbx_out_write__creates_parents_and_applies_the_mode, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(sbx_out_write__refuses_hostile_paths_and_writes_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(sbx_out_write__never_follows_a_symlink_on_the_way, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            sbx_out_write__replaces_a_hard_link_without_writing_through_it, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
