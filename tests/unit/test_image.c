/* SPDX-License-Identifier: MIT */
/* Unit tests of image.c's tree hash: a known answer for a fixed tree (the format of
 * docs/IMAGES.md), sensitivity to contents, modes, link targets and names, and the trees it
 * refuses (setuid, writable by others, not root's, special files). Trees go to mkdtemp dirs;
 * ownership checks need root, so the tests skip without it. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/alloc.h"
#include "sandbox/image.h"
#include "lib/util.h"

/* ---- helpers ---- */

static void write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
    scoped_free char *path = xasprintf("%s/%s", dir, name);
    scoped_close int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, text, strlen(text)), 0);
    assert_int_equal(fchmod(fd, mode), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The tree of the known answer: a.txt "hi\n" 0644, d/ 0755, d/l -> ../a.txt, d/x empty
 * 0755, everything root's. */
static int tree_setup(void **state)
{
    if (geteuid() != 0) {
        *state = NULL;
        return 0;
    }
    char *dir = xstrdup("/tmp/sbx-test-image-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    write_file(dir, "a.txt", "hi\n", 0644);
    scoped_free char *d = xasprintf("%s/d", dir);
    assert_int_equal(mkdir(d, 0755), 0);
    assert_int_equal(chmod(d, 0755), 0);
    scoped_free char *l = xasprintf("%s/d/l", dir);
    assert_int_equal(symlink("../a.txt", l), 0);
    write_file(dir, "d/x", "", 0755);
    *state = dir;
    return 0;
}

static int tree_teardown(void **state)
{
    char *dir = *state;
    if (dir) {
        (void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(dir);
    }
    return 0;
}

static int hash_of(const char *dir, struct image_hash *h, struct err *e)
{
    scoped_close int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return image_hash_tree(fd, NULL, h, e);
}

static void hash_ok(const char *dir, struct image_hash *h)
{
    struct err e = ERR_INIT;
    if (hash_of(dir, h, &e) < 0) {
        fail_msg("image_hash_tree: %s", e.msg);
    }
}

static void hash_refused(const char *dir, const char *msg_part)
{
    struct image_hash h;
    struct err e = ERR_INIT;
    assert_int_equal(hash_of(dir, &h, &e), -EPERM);
    if (!strstr(e.msg, msg_part)) {
        fail_msg("'%s' lacks '%s'", e.msg, msg_part);
    }
}

#define NEED_ROOT()                                                                                \
    do {                                                                                           \
        if (!*state) {                                                                             \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- tests ---- */

static void image_hash_tree__known_answer(void **state)
{
    NEED_ROOT();
    struct image_hash h;
    hash_ok(*state, &h);
    /* Also computed by the independent Python version in tests/e2e/test_images.py. */
    assert_string_equal(h.hex, "60a039407bd2f245b02f59c9371aadf6d7307bfcbc6fd27cf6d7094fe08b88b7");
    assert_int_equal(h.files, 5);
    assert_int_equal(h.bytes, 3);
}

static void image_hash_tree__changes_with_contents_modes_links_and_names(void **state)
{
    NEED_ROOT();
    const char *dir = *state;
    struct image_hash base, h;
    hash_ok(dir, &base);
    hash_ok(dir, &h);
    assert_string_equal(h.hex, base.hex);

    /* Contents, same size. */
    write_file(dir, "a.txt", "ho\n", 0644);
    hash_ok(dir, &h);
    assert_string_not_equal(h.hex, base.hex);
    write_file(dir, "a.txt", "hi\n", 0644);
    hash_ok(dir, &h);
    assert_string_equal(h.hex, base.hex);

    /* Mode. */
    scoped_free char *x = xasprintf("%s/d/x", dir);
    assert_int_equal(chmod(x, 0700), 0);
    hash_ok(dir, &h);
    assert_string_not_equal(h.hex, base.hex);
    assert_int_equal(chmod(x, 0755), 0);

    /* Link target. */
    scoped_free char *l = xasprintf("%s/d/l", dir);
    assert_int_equal(unlink(l), 0);
    assert_int_equal(symlink("/etc/shadow", l), 0);
    hash_ok(dir, &h);
    assert_string_not_equal(h.hex, base.hex);
    assert_int_equal(unlink(l), 0);
    assert_int_equal(symlink("../a.txt", l), 0);

    /* Name. */
    scoped_free char *y = xasprintf("%s/d/y", dir);
    assert_int_equal(rename(x, y), 0);
    hash_ok(dir, &h);
    assert_string_not_equal(h.hex, base.hex);
    assert_int_equal(rename(y, x), 0);

    /* A new empty file. */
    write_file(dir, "new", "", 0644);
    hash_ok(dir, &h);
    assert_string_not_equal(h.hex, base.hex);
    assert_int_equal(h.files, base.files + 1);
    scoped_free char *n = xasprintf("%s/new", dir);
    assert_int_equal(unlink(n), 0);

    hash_ok(dir, &h);
    assert_string_equal(h.hex, base.hex);
}

static void image_hash_tree__refuses_unsafe_trees(void **state)
{
    NEED_ROOT();
    const char *dir = *state;
    scoped_free char *x = xasprintf("%s/d/x", dir);
    scoped_free char *d = xasprintf("%s/d", dir);

    assert_int_equal(chmod(x, 04755), 0);
    hash_refused(dir, "d/x: setuid or setgid (mode 4755)");
    assert_int_equal(chmod(x, 02755), 0);
    hash_refused(dir, "d/x: setuid or setgid");
    assert_int_equal(chmod(x, 0757), 0);
    hash_refused(dir, "d/x: writable by group or others (mode 0757)");
    assert_int_equal(chmod(x, 0755), 0);
    assert_int_equal(chmod(d, 0775), 0);
    hash_refused(dir, "d: writable by group or others");
    assert_int_equal(chmod(d, 0755), 0);

    assert_int_equal(lchown(x, 1000, 0), 0);
    hash_refused(dir, "d/x: owned by 1000:0, not by root");
    assert_int_equal(lchown(x, 0, 0), 0);

    scoped_free char *fifo = xasprintf("%s/d/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    hash_refused(dir, "d/fifo: not a file, directory or symlink");
    assert_int_equal(unlink(fifo), 0);

    struct image_hash h;
    hash_ok(dir, &h);
    assert_string_equal(h.hex, "60a039407bd2f245b02f59c9371aadf6d7307bfcbc6fd27cf6d7094fe08b88b7");
}

static void image_hash_tree__cancel_stops_it(void **state)
{
    NEED_ROOT();
    atomic_bool cancel;
    atomic_init(&cancel, true);
    scoped_close int fd = open(*state, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct image_hash h;
    struct err e = ERR_INIT;
    assert_int_equal(image_hash_tree(fd, &cancel, &h, &e), -ECANCELED);
}

static void image_state_name__host_without_image(void **state)
{
    (void)state;
    int fd = 7;
    const char *path = NULL;
    assert_string_equal(image_state_name(NULL), "host");
    assert_int_equal(image_sandbox_root(NULL, &fd, &path, NULL), 0);
    assert_int_equal(fd, -1);
    assert_string_equal(path, "/");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(image_hash_tree__known_answer, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(
            image_hash_tree__changes_with_contents_modes_links_and_names, tree_setup,
            tree_teardown),
        cmocka_unit_test_setup_teardown(image_hash_tree__refuses_unsafe_trees, tree_setup,
                                        tree_teardown),
        cmocka_unit_test_setup_teardown(image_hash_tree__cancel_stops_it, tree_setup,
                                        tree_teardown),
        cmocka_unit_test(image_state_name__host_without_image),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
