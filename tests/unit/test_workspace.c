/* SPDX-License-Identifier: MIT */
/* Unit tests of workspace.c against real directories: a tmpfs of the test's own, mounted in
 * a private mount namespace (the test runs as root, as sbxd does), with a fresh tree per
 * test and, beside it, an "outside" directory with a secret that nothing may reach. Every
 * hostile case of a task's /work one by one: symlinks to /etc, to /proc/1/root, in loops and
 * as parents, hard links, FIFOs (a blocking open would hang the test), sockets, devices, a
 * sparse 1 TiB file, 10,000 nested directories, a million entries in one, the byte, file
 * and skip bounds, and a file that grows or is swapped for a symlink while collected. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include <cmocka.h>

#include "lib/err.h"
#include "lib/util.h"
#include "sandbox/workspace.h"
#include "wire/wspath.h"

static char base_dir[] = "/tmp/test_workspace.XXXXXX";
static char outside[sizeof(base_dir) + 16];
static bool mounted;

struct tree {
    int root;
    char path[128];
};

static int group_setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        return 0;
    }
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        return 0;
    }
    if (!mkdtemp(base_dir)) {
        return -1;
    }
    /* nr_inodes: a tmpfs counts every hard link against it, and one test makes a million. */
    if (mount("tmpfs", base_dir, "tmpfs", 0, "size=1g,nr_inodes=4m,mode=0755") < 0) {
        return -1;
    }
    mounted = true;
    snprintf(outside, sizeof(outside), "%s/outside", base_dir);
    if (mkdir(outside, 0755) < 0) {
        return -1;
    }
    char secret[sizeof(outside) + 16];
    snprintf(secret, sizeof(secret), "%s/secret.txt", outside);
    int fd = open(secret, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -1;
    }
    int r = fd_write_all(fd, "SECRET", 6);
    fd_close(fd);
    return r;
}

static int group_teardown(void **state)
{
    (void)state;
    if (mounted) {
        (void)umount2(base_dir, MNT_DETACH);
        (void)rmdir(base_dir);
    }
    return 0;
}

static int setup(void **state)
{
    if (!mounted) {
        *state = NULL;
        return 0;
    }
    struct tree *t = calloc(1, sizeof(*t));
    snprintf(t->path, sizeof(t->path), "%s/t.XXXXXX", base_dir);
    if (!mkdtemp(t->path)) {
        free(t);
        return -1;
    }
    t->root = open(t->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->root < 0) {
        free(t);
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tree *t = *state;
    if (t) {
        fd_close(t->root);
        free(t);
    }
    return 0;
}

static struct tree *tree_of(void **state)
{
    if (!*state) {
        skip(); /* needs root and a mount namespace of its own */
    }
    return *state;
}

static size_t fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    size_t n = 0;
    assert_non_null(d);
    while (readdir(d)) {
        n++;
    }
    closedir(d);
    return n;
}

/* Makes the directories of path (relative to the tree) and the file with data and mode. */
static void put(struct tree *t, const char *path, const char *data, size_t len, mode_t mode)
{
    char full[512];
    snprintf(full, sizeof(full), "%s/%s", t->path, path);
    for (char *s = strchr(full + strlen(t->path) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        (void)mkdir(full, 0755);
        *s = '/';
    }
    int fd = open(full, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(fd_write_all(fd, data, len), 0);
    assert_int_equal(fchmod(fd, mode), 0);
    fd_close(fd);
}

static void put_str(struct tree *t, const char *path, const char *data)
{
    put(t, path, data, strlen(data), 0644);
}

static void mk_symlink(struct tree *t, const char *target, const char *path)
{
    assert_int_equal(symlinkat(target, t->root, path), 0);
}

static void mk_socket(struct tree *t, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", t->path, path);
    assert_true(n > 0 && (size_t)n < sizeof(sa.sun_path));
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    fd_close(s);
}

static const struct workspace_file *find_file(const struct workspace_collect *c, const char *p)
{
    for (size_t i = 0; i < c->n_files; i++) {
        if (strcmp(c->files[i].path, p) == 0) {
            return &c->files[i];
        }
    }
    return NULL;
}

static const char *find_skip(const struct workspace_collect *c, const char *p)
{
    for (size_t i = 0; i < c->n_skipped; i++) {
        if (strcmp(c->skipped[i].path, p) == 0) {
            return c->skipped[i].reason;
        }
    }
    return NULL;
}

static const struct workspace_limits big = {.max_bytes = 64 << 20,
                                            .max_files = 1000000,
                                            .max_depth = 0,
                                            .max_entries = 0,
                                            .max_skipped = 0};

/* Other threads may open fds meanwhile. */
static bool churning;

static void collect(struct tree *t, const char *const *pats, size_t n,
                    const struct workspace_limits *lim, struct workspace_collect *c)
{
    struct err e = ERR_INIT;
    size_t before = fd_count();
    assert_int_equal(workspace_collect(t->root, pats, n, lim, c, &e), 0);
    if (!churning) {
        assert_int_equal(fd_count(), before);
    }
    /* The answer's own invariants: sorted, within the bounds, lengths and sizes agree. */
    uint64_t bytes = 0;
    for (size_t i = 0; i < c->n_files; i++) {
        const struct workspace_file *f = &c->files[i];
        if (i > 0) {
            assert_true(strcmp(c->files[i - 1].path, f->path) < 0);
        }
        assert_true(f->len <= f->size);
        assert_true(f->truncated == (f->len < f->size));
        if (f->truncated) {
            assert_true(c->truncated);
        }
        assert_true(f->len == 0 || f->data != NULL);
        bytes += f->len;
        assert_null(memmem(f->data ? f->data : "", f->len, "SECRET", 6));
    }
    assert_true(bytes == c->bytes && bytes <= lim->max_bytes);
    assert_true(c->n_files <= lim->max_files);
    assert_true(c->n_skipped <= (lim->max_skipped ? lim->max_skipped : WORKSPACE_MAX_SKIPPED));
    for (size_t i = 1; i < c->n_skipped; i++) {
        assert_true(strcmp(c->skipped[i - 1].path, c->skipped[i].path) <= 0);
    }
}

static void stat_at(struct tree *t, const char *path, struct stat *st)
{
    assert_int_equal(fstatat(t->root, path, st, AT_SYMLINK_NOFOLLOW), 0);
}

static void workspace_create__parents_owner_and_exact_mode(void **state)
{
    struct tree *t = tree_of(state);
    struct err e = ERR_INIT;
    struct stat st;
    int fd = -1;
    mode_t old = umask(077);
    assert_int_equal(workspace_create(t->root, "a/b/c.txt", 0644, 1234, 4321, &fd, &e), 0);
    assert_int_equal(fd_write_all(fd, "hello", 5), 0);
    fd = fd_close(fd);
    const char *dirs[] = {"a", "a/b"};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        stat_at(t, dirs[i], &st);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(st.st_uid, 1234);
        assert_int_equal(st.st_gid, 4321);
    }
    stat_at(t, "a/b/c.txt", &st);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_int_equal(st.st_uid, 1234);
    assert_int_equal(st.st_size, 5);
    static const uint32_t modes[] = {0600, 0755, 0777, 0, 0400};
    for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
        assert_int_equal(workspace_create(t->root, "m", modes[i], 1, 2, &fd, &e), 0);
        fd = fd_close(fd);
        stat_at(t, "m", &st);
        assert_int_equal(st.st_mode & 07777, modes[i]);
    }
    /* An existing file is replaced: truncated, its owner and mode the new ones. */
    assert_int_equal(workspace_create(t->root, "a/b/c.txt", 0600, 99, 98, &fd, &e), 0);
    fd = fd_close(fd);
    stat_at(t, "a/b/c.txt", &st);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_uid, 99);
    /* A directory that was there keeps its owner and mode. */
    assert_int_equal(mkdirat(t->root, "pre", 0700), 0);
    assert_int_equal(workspace_create(t->root, "pre/new/f", 0644, 7, 7, &fd, &e), 0);
    fd = fd_close(fd);
    stat_at(t, "pre", &st);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(st.st_uid, 0);
    stat_at(t, "pre/new", &st);
    assert_int_equal(st.st_uid, 7);
    umask(old);
}

static void workspace_create__refuses_what_is_not_a_file_or_leaves(void **state)
{
    struct tree *t = tree_of(state);
    struct err e = ERR_INIT;
    struct stat st;
    int fd = -1;
    static const uint32_t bad_modes[] = {04644, 02755, 01777, 010000};
    for (size_t i = 0; i < ARRAY_SIZE(bad_modes); i++) {
        assert_int_equal(workspace_create(t->root, "x", bad_modes[i], 0, 0, &fd, &e), -EINVAL);
    }
    static const char *const bad_rels[] = {"../x", "/abs", "a//b", "", "./a", "a/..", "a/"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_rels); i++) {
        assert_int_equal(workspace_create(t->root, bad_rels[i], 0644, 0, 0, &fd, &e), -EINVAL);
    }
    assert_int_equal(fstatat(t->root, "x", &st, 0), -1);
    /* A symlinked parent (to outside, to /etc) or target is never followed. */
    mk_symlink(t, outside, "out");
    mk_symlink(t, "/etc", "etc");
    mk_symlink(t, "../outside/secret.txt", "sec");
    assert_int_equal(workspace_create(t->root, "out/new", 0644, 0, 0, &fd, &e), -ELOOP);
    assert_int_equal(workspace_create(t->root, "out/secret.txt", 0644, 0, 0, &fd, &e), -ELOOP);
    assert_int_equal(workspace_create(t->root, "etc/sbx-test", 0644, 0, 0, &fd, &e), -ELOOP);
    assert_int_equal(workspace_create(t->root, "sec", 0644, 0, 0, &fd, &e), -ELOOP);
    char p[256];
    snprintf(p, sizeof(p), "%s/new", outside);
    assert_int_equal(stat(p, &st), -1);
    assert_int_equal(stat("/etc/sbx-test", &st), -1);
    snprintf(p, sizeof(p), "%s/secret.txt", outside);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 6);
    /* Types: a directory, a FIFO (no reader: a blocking open would hang here), a socket. */
    assert_int_equal(mkdirat(t->root, "d", 0755), 0);
    assert_int_equal(mkfifoat(t->root, "fifo", 0666), 0);
    mk_socket(t, "sock");
    put_str(t, "file", "x");
    assert_int_equal(workspace_create(t->root, "d", 0644, 0, 0, &fd, &e), -EISDIR);
    assert_int_equal(workspace_create(t->root, "fifo", 0644, 0, 0, &fd, &e), -ENXIO);
    assert_int_equal(workspace_create(t->root, "sock", 0644, 0, 0, &fd, &e), -ENXIO);
    assert_int_equal(workspace_create(t->root, "file/x", 0644, 0, 0, &fd, &e), -ENOTDIR);
    assert_int_equal(workspace_create(t->root, "fifo/x", 0644, 0, 0, &fd, &e), -ENOTDIR);
    assert_non_null(strstr(err_msg(&e), "fifo"));
}

static void workspace_open_at__existing_regular_files_only(void **state)
{
    struct tree *t = tree_of(state);
    struct err e = ERR_INIT;
    int fd = -1;
    put_str(t, "f", "0123456789");
    assert_int_equal(workspace_open_at(t->root, "f", &fd, &e), 0);
    assert_int_equal(pwrite(fd, "ab", 2, 3), 2);
    fd = fd_close(fd);
    char buf[16] = {0};
    size_t got = 0;
    uint64_t size = 0;
    assert_int_equal(workspace_read(t->root, "f", 0, sizeof(buf), buf, &got, &size, &e), 0);
    assert_int_equal(got, 10);
    assert_memory_equal(buf, "012ab56789", 10);
    mk_symlink(t, "f", "ln");
    assert_int_equal(mkfifoat(t->root, "fifo", 0666), 0);
    assert_int_equal(mkdirat(t->root, "d", 0755), 0);
    assert_int_equal(workspace_open_at(t->root, "missing", &fd, &e), -ENOENT);
    assert_int_equal(workspace_open_at(t->root, "ln", &fd, &e), -ELOOP);
    assert_int_equal(workspace_open_at(t->root, "fifo", &fd, &e), -ENXIO);
    assert_int_equal(workspace_open_at(t->root, "d", &fd, &e), -EISDIR);
    assert_int_equal(workspace_open_at(t->root, "../f", &fd, &e), -EINVAL);
}

static void workspace_read__ranges_and_refusals(void **state)
{
    struct tree *t = tree_of(state);
    struct err e = ERR_INIT;
    char buf[32];
    size_t got = 99;
    uint64_t size = 0;
    put_str(t, "dir/f", "0123456789");
    assert_int_equal(workspace_read(t->root, "dir/f", 2, 4, buf, &got, &size, &e), 0);
    assert_int_equal(got, 4);
    assert_int_equal(size, 10);
    assert_memory_equal(buf, "2345", 4);
    assert_int_equal(workspace_read(t->root, "dir/f", 8, 10, buf, &got, &size, &e), 0);
    assert_int_equal(got, 2);
    assert_memory_equal(buf, "89", 2);
    assert_int_equal(workspace_read(t->root, "dir/f", 20, 10, buf, &got, &size, &e), 0);
    assert_int_equal(got, 0);
    assert_int_equal(workspace_read(t->root, "dir/f", UINT64_MAX, 10, buf, &got, &size, &e), 0);
    assert_int_equal(got, 0);
    mk_symlink(t, "/etc/passwd", "passwd");
    mk_symlink(t, "/proc/1/root", "p1");
    mk_symlink(t, outside, "out");
    mk_symlink(t, "dir", "dirln");
    assert_int_equal(mkfifoat(t->root, "fifo", 0666), 0);
    assert_int_equal(mknodat(t->root, "null", S_IFCHR | 0666, makedev(1, 3)), 0);
    mk_socket(t, "sock");
    assert_int_equal(workspace_read(t->root, "passwd", 0, 10, buf, &got, &size, &e), -ELOOP);
    assert_int_equal(workspace_read(t->root, "p1/etc/passwd", 0, 10, buf, &got, &size, &e), -ELOOP);
    assert_int_equal(workspace_read(t->root, "out/secret.txt", 0, 10, buf, &got, &size, &e),
                     -ELOOP);
    assert_int_equal(workspace_read(t->root, "dirln/f", 0, 10, buf, &got, &size, &e), -ELOOP);
    assert_int_equal(workspace_read(t->root, "fifo", 0, 10, buf, &got, &size, &e), -ENXIO);
    assert_int_equal(workspace_read(t->root, "null", 0, 10, buf, &got, &size, &e), -ENXIO);
    assert_int_equal(workspace_read(t->root, "sock", 0, 10, buf, &got, &size, &e), -ENXIO);
    assert_int_equal(workspace_read(t->root, "dir", 0, 10, buf, &got, &size, &e), -EISDIR);
    assert_int_equal(workspace_read(t->root, "nope", 0, 10, buf, &got, &size, &e), -ENOENT);
}

static void workspace_list__one_directory_sorted_with_types(void **state)
{
    struct tree *t = tree_of(state);
    struct err e = ERR_INIT;
    struct workspace_entry *v = NULL;
    size_t n = 0;
    bool trunc = true;
    put(t, "b.sh", "#!", 2, 0755);
    put(t, "sub/inner", "x", 1, 0600);
    mk_symlink(t, "/etc", "a-link");
    assert_int_equal(mkfifoat(t->root, "c-fifo", 0640), 0);
    assert_int_equal(workspace_list(t->root, "", 100, &v, &n, &trunc, &e), 0);
    assert_int_equal(n, 4);
    assert_false(trunc);
    assert_string_equal(v[0].name, "a-link");
    assert_int_equal(v[0].type, WORKSPACE_SYMLINK);
    assert_string_equal(workspace_type_name(v[0].type), "symlink");
    assert_string_equal(v[1].name, "b.sh");
    assert_int_equal(v[1].type, WORKSPACE_FILE);
    assert_int_equal(v[1].size, 2);
    assert_int_equal(v[1].mode, 0755);
    assert_string_equal(v[2].name, "c-fifo");
    assert_int_equal(v[2].type, WORKSPACE_OTHER);
    assert_int_equal(v[2].mode, 0640);
    assert_string_equal(v[3].name, "sub");
    assert_int_equal(v[3].type, WORKSPACE_DIR);
    assert_string_equal(workspace_type_name(v[3].type), "dir");
    workspace_entries_free(v, n);
    assert_int_equal(workspace_list(t->root, ".", 2, &v, &n, &trunc, &e), 0);
    assert_int_equal(n, 2);
    assert_true(trunc);
    workspace_entries_free(v, n);
    assert_int_equal(workspace_list(t->root, "sub", 10, &v, &n, &trunc, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].name, "inner");
    assert_int_equal(v[0].mode, 0600);
    workspace_entries_free(v, n);
    assert_int_equal(workspace_list(t->root, "a-link", 10, &v, &n, &trunc, &e), -ELOOP);
    assert_int_equal(workspace_list(t->root, "b.sh", 10, &v, &n, &trunc, &e), -ENOTDIR);
    assert_int_equal(workspace_list(t->root, "c-fifo", 10, &v, &n, &trunc, &e), -ENOTDIR);
    assert_int_equal(workspace_list(t->root, "../x", 10, &v, &n, &trunc, &e), -EINVAL);
    assert_int_equal(mkdirat(t->root, "empty", 0755), 0);
    assert_int_equal(workspace_list(t->root, "empty", 10, &v, &n, &trunc, &e), 0);
    assert_int_equal(n, 0);
    workspace_entries_free(v, n);
}

static void workspace_collect__symlinks_are_skipped_never_followed(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    put_str(t, "ok.txt", "fine");
    mk_symlink(t, "/etc", "etc");
    mk_symlink(t, "/etc/passwd", "passwd");
    mk_symlink(t, "/proc/1/root", "p1");
    mk_symlink(t, "loop2", "loop1");
    mk_symlink(t, "loop1", "loop2");
    mk_symlink(t, "../outside", "dirlink");
    mk_symlink(t, "ok.txt", "alias.txt");
    const char *pats[] = {"**", "etc/passwd", "p1/etc/*", "dirlink/secret.txt", "loop1/*"};
    collect(t, pats, ARRAY_SIZE(pats), &big, &c);
    assert_int_equal(c.n_files, 1);
    assert_string_equal(c.files[0].path, "ok.txt");
    assert_memory_equal(c.files[0].data, "fine", 4);
    static const char *const links[] = {"alias.txt", "dirlink", "etc",   "loop1",
                                        "loop2",     "p1",      "passwd"};
    assert_int_equal(c.n_skipped, ARRAY_SIZE(links));
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        assert_string_equal(c.skipped[i].path, links[i]);
        assert_string_equal(c.skipped[i].reason, "symlink");
    }
    assert_false(c.truncated);
    workspace_collect_free(&c);
    /* A symlinked directory in a pattern's literal path is reported once, as a symlink. */
    const char *through[] = {"dirlink/secret.txt"};
    collect(t, through, 1, &big, &c);
    assert_int_equal(c.n_files, 0);
    assert_int_equal(c.n_skipped, 1);
    assert_string_equal(find_skip(&c, "dirlink"), "symlink");
    workspace_collect_free(&c);
    /* A pattern that concerns no symlink reports none. */
    const char *only[] = {"ok.txt"};
    collect(t, only, 1, &big, &c);
    assert_int_equal(c.n_files, 1);
    assert_int_equal(c.n_skipped, 0);
    workspace_collect_free(&c);
}

static void workspace_collect__hard_links_read_as_files(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    put_str(t, "orig", "shared bytes");
    assert_int_equal(linkat(t->root, "orig", t->root, "linked", 0), 0);
    const char *pats[] = {"*"};
    collect(t, pats, 1, &big, &c);
    assert_int_equal(c.n_files, 2);
    assert_string_equal(c.files[0].path, "linked");
    assert_string_equal(c.files[1].path, "orig");
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(c.files[i].len, 12);
        assert_memory_equal(c.files[i].data, "shared bytes", 12);
    }
    workspace_collect_free(&c);
}

static void workspace_collect__fifo_socket_device_skipped_without_blocking(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    /* A FIFO without a writer: a blocking open for reading would hang this test. */
    assert_int_equal(mkfifoat(t->root, "fifo", 0666), 0);
    mk_socket(t, "sock");
    assert_int_equal(mknodat(t->root, "null", S_IFCHR | 0666, makedev(1, 3)), 0);
    assert_int_equal(mknodat(t->root, "blk", S_IFBLK | 0600, makedev(7, 0)), 0);
    put_str(t, "real", "r");
    const char *pats[] = {"*"};
    collect(t, pats, 1, &big, &c);
    assert_int_equal(c.n_files, 1);
    assert_string_equal(c.files[0].path, "real");
    assert_int_equal(c.n_skipped, 4);
    assert_string_equal(find_skip(&c, "fifo"), "fifo");
    assert_string_equal(find_skip(&c, "sock"), "socket");
    assert_string_equal(find_skip(&c, "null"), "device");
    assert_string_equal(find_skip(&c, "blk"), "device");
    workspace_collect_free(&c);
}

static void workspace_collect__sparse_1tib_file_read_to_the_cap(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    int fd = openat(t->root, "sparse", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)1 << 40), 0);
    assert_int_equal(pwrite(fd, "end", 3, ((off_t)1 << 40) - 3), 3);
    fd_close(fd);
    struct workspace_limits lim = {.max_bytes = 1 << 20, .max_files = 10};
    const char *pats[] = {"sparse"};
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 1);
    assert_true(c.files[0].size == (uint64_t)1 << 40);
    assert_int_equal(c.files[0].len, 1 << 20);
    assert_true(c.files[0].truncated);
    assert_true(c.truncated);
    for (size_t i = 0; i < c.files[0].len; i++) {
        assert_int_equal(c.files[0].data[i], 0);
    }
    workspace_collect_free(&c);
}

static void workspace_collect__10000_deep_directories_bounded(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    int fd = fcntl(t->root, F_DUPFD_CLOEXEC, 3);
    for (int depth = 1; depth <= 10000; depth++) {
        assert_int_equal(mkdirat(fd, "d", 0755), 0);
        int sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(sub >= 0);
        fd_close(fd);
        fd = sub;
        if (depth == 5 || depth == 64 || depth == 65 || depth == 100) {
            int f = openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            assert_true(f >= 0);
            fd_close(f);
        }
    }
    fd_close(fd);
    char deep[64 * 2 + 8] = "";
    for (int i = 0; i < 64; i++) {
        strcat(deep, "d/");
    }
    const char *pats[] = {"**/f"};
    collect(t, pats, 1, &big, &c);
    /* Directories 1..64 are entered: the files in the 5th and the 64th. */
    assert_int_equal(c.n_files, 2);
    strcat(deep, "f");
    assert_string_equal(c.files[0].path, deep);
    assert_string_equal(c.files[1].path, "d/d/d/d/d/f");
    assert_int_equal(c.n_skipped, 1);
    deep[strlen(deep) - 1] = 'd';
    assert_string_equal(c.skipped[0].path, deep);
    assert_string_equal(c.skipped[0].reason, "directory_too_deep");
    assert_true(c.truncated);
    workspace_collect_free(&c);
    struct workspace_limits lim = big;
    lim.max_depth = 3;
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 0);
    assert_string_equal(find_skip(&c, "d/d/d/d"), "directory_too_deep");
    workspace_collect_free(&c);
    /* Any max_depth is held to WORKSPACE_DEPTH_LIMIT (each level holds a directory fd). */
    lim.max_depth = UINT32_MAX;
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 4);
    assert_true(c.truncated);
    assert_int_equal(c.n_skipped, 1);
    assert_int_equal(strlen(c.skipped[0].path), 2 * (WORKSPACE_DEPTH_LIMIT + 1) - 1);
    workspace_collect_free(&c);
}

static void workspace_collect__million_entries_stop_at_max_entries(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    assert_int_equal(mkdirat(t->root, "wide", 0755), 0);
    int dfd = openat(t->root, "wide", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    int f = openat(dfd, "x0", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(f >= 0);
    fd_close(f);
    /* Hard links: a million names for one inode, quick to make. */
    char name[16];
    for (int i = 1; i < 1000000; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        assert_int_equal(linkat(dfd, "x0", dfd, name, 0), 0);
    }
    fd_close(dfd);
    const char *pats[] = {"wide/*"};
    collect(t, pats, 1, &big, &c);
    /* "wide" itself was the first entry; 99,999 of its own make the 100,000. */
    assert_int_equal(c.n_files, WORKSPACE_MAX_ENTRIES - 1);
    assert_true(c.truncated);
    assert_int_equal(c.n_skipped, 1);
    assert_string_equal(find_skip(&c, "wide"), "too_many_entries");
    workspace_collect_free(&c);
    /* A bound of its own, and a pattern that does not need the wide directory. */
    struct workspace_limits lim = big;
    lim.max_entries = 10;
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 9);
    workspace_collect_free(&c);
    /* Names a pattern spells out are looked up, not searched for among the million. */
    const char *named[] = {"wide/x999999", "wide/x5", "wide/nope", "wide/x5"};
    collect(t, named, ARRAY_SIZE(named), &big, &c);
    assert_int_equal(c.n_files, 2);
    assert_string_equal(c.files[0].path, "wide/x5");
    assert_string_equal(c.files[1].path, "wide/x999999");
    assert_int_equal(c.n_skipped, 0);
    assert_false(c.truncated);
    workspace_collect_free(&c);
    put_str(t, "other/a", "a");
    const char *other[] = {"other/*"};
    collect(t, other, 1, &big, &c);
    assert_int_equal(c.n_files, 1);
    assert_int_equal(c.n_skipped, 0);
    assert_false(c.truncated);
    workspace_collect_free(&c);
}

static void workspace_collect__bytes_files_and_skip_bounds(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    char data[100];
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof(name), "f%d", i);
        memset(data, 'a' + i, sizeof(data));
        put(t, name, data, sizeof(data), 0644);
    }
    put(t, "z-empty", "", 0, 0644);
    const char *pats[] = {"*"};
    struct workspace_limits lim = {.max_bytes = 250, .max_files = 100};
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 4);
    assert_int_equal(c.files[0].len, 100);
    assert_int_equal(c.files[1].len, 100);
    assert_string_equal(c.files[2].path, "f2");
    assert_int_equal(c.files[2].len, 50);
    assert_int_equal(c.files[2].size, 100);
    assert_true(c.files[2].truncated);
    assert_memory_equal(c.files[2].data, "cccccccccc", 10);
    assert_string_equal(c.files[3].path, "z-empty");
    assert_int_equal(c.files[3].len, 0);
    assert_int_equal(c.bytes, 250);
    assert_true(c.truncated);
    assert_int_equal(c.n_skipped, 7);
    for (size_t i = 0; i < c.n_skipped; i++) {
        assert_string_equal(c.skipped[i].reason, "collect_limit");
    }
    workspace_collect_free(&c);
    lim = (struct workspace_limits){.max_bytes = 1 << 20, .max_files = 3};
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 3);
    assert_string_equal(c.files[2].path, "f2");
    assert_string_equal(find_skip(&c, "f3"), "file_limit");
    assert_true(c.truncated);
    workspace_collect_free(&c);
    lim.max_files = 0;
    collect(t, pats, 1, &lim, &c);
    assert_int_equal(c.n_files, 0);
    assert_true(c.truncated);
    workspace_collect_free(&c);
    /* No patterns, nothing collected, nothing read. */
    collect(t, pats, 0, &big, &c);
    assert_int_equal(c.n_files + c.n_skipped, 0);
    workspace_collect_free(&c);
    /* Skip records stop at max_skipped. */
    for (int i = 0; i < 150; i++) {
        char name[16];
        snprintf(name, sizeof(name), "p%03d", i);
        assert_int_equal(mkfifoat(t->root, name, 0600), 0);
    }
    const char *fifos[] = {"p*"};
    collect(t, fifos, 1, &big, &c);
    assert_int_equal(c.n_skipped, WORKSPACE_MAX_SKIPPED);
    workspace_collect_free(&c);
    lim = big;
    lim.max_skipped = 5;
    collect(t, fifos, 1, &lim, &c);
    assert_int_equal(c.n_skipped, 5);
    assert_string_equal(c.skipped[0].path, "p000");
    workspace_collect_free(&c);
}

static void workspace_collect__unicode_names_binary_data_and_modes(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    static const char bin[] = {'\0', '\xff', '\n', '\0', 'x'};
    put(t, "r\xc3\xa9sum\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt", "\xe2\x82\xac", 3, 0600);
    put(t, "run.sh", "#!/bin/sh\n", 10, 0755);
    put(t, "bin", bin, sizeof(bin), 0640);
    put(t, "empty", "", 0, 0444);
    const char *pats[] = {"**"};
    collect(t, pats, 1, &big, &c);
    assert_int_equal(c.n_files, 4);
    const struct workspace_file *f =
        find_file(&c, "r\xc3\xa9sum\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt");
    assert_non_null(f);
    assert_int_equal(f->mode, 0600);
    assert_memory_equal(f->data, "\xe2\x82\xac", 3);
    f = find_file(&c, "run.sh");
    assert_int_equal(f->mode, 0755);
    f = find_file(&c, "bin");
    assert_int_equal(f->mode, 0640);
    assert_int_equal(f->len, sizeof(bin));
    assert_memory_equal(f->data, bin, sizeof(bin));
    f = find_file(&c, "empty");
    assert_int_equal(f->len, 0);
    assert_int_equal(f->size, 0);
    assert_false(f->truncated);
    assert_false(c.truncated);
    workspace_collect_free(&c);
}

static void workspace_collect__patterns_select(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c;
    static const char *const paths[] = {"a.txt",     "b.log",   "d/c.txt",
                                        "d/e/f.txt", "g/z.txt", ".hidden.txt"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        put_str(t, paths[i], paths[i]);
    }
    static const struct {
        const char *pats[2];
        const char *want;
    } cases[] = {
        {{"*.txt"}, ".hidden.txt a.txt"},
        {{"**/*.txt"}, ".hidden.txt a.txt d/c.txt d/e/f.txt g/z.txt"},
        {{"d/**"}, "d/c.txt d/e/f.txt"},
        {{"d/*/f.txt", "a.txt"}, "a.txt d/e/f.txt"},
        {{"*.txt", "a.txt"}, ".hidden.txt a.txt"},
        {{"d", "g"}, ""},
        {{"?.log"}, "b.log"},
        {{"[dg]/*.txt"}, "d/c.txt g/z.txt"},
        {{"nothing/here"}, ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t n = cases[i].pats[1] ? 2 : 1;
        collect(t, cases[i].pats, n, &big, &c);
        char got[256] = "";
        for (size_t j = 0; j < c.n_files; j++) {
            if (j) {
                strcat(got, " ");
            }
            strcat(got, c.files[j].path);
            assert_int_equal(c.files[j].len, strlen(c.files[j].path));
            assert_memory_equal(c.files[j].data, c.files[j].path, c.files[j].len);
        }
        if (strcmp(got, cases[i].want) != 0) {
            fail_msg("%s: got '%s', want '%s'", cases[i].pats[0], got, cases[i].want);
        }
        assert_int_equal(c.n_skipped, 0);
        workspace_collect_free(&c);
    }
}

static void workspace_collect__root_a_directory_and_patterns_normalized(void **state)
{
    struct tree *t = tree_of(state);
    struct workspace_collect c = {0};
    struct err e = ERR_INIT;
    put_str(t, "f", "x");
    int fd = openat(t->root, "f", O_RDONLY | O_CLOEXEC);
    const char *pats[] = {"*"};
    assert_int_equal(workspace_collect(fd, pats, 1, &big, &c, &e), -ENOTDIR);
    assert_null(c.files);
    fd_close(fd);
    /* Patterns come normalized (wspath_pattern_normalize); any other is refused, so that a
     * name looked up as the pattern spells it is never "..". */
    static const char *const bad[] = {"..",  "../outside/secret.txt", "a/../b", "/etc", "", "./a",
                                      "a//b"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(workspace_collect(t->root, &bad[i], 1, &big, &c, &e), -EINVAL);
    }
}

/* Two threads change the tree while it is collected: one appends to a file (and now and then
 * truncates it), one renames a symlink to the secret and a regular file over "swap" in turn. */
struct churn {
    struct tree *t;
    atomic_bool stop;
    atomic_int failed_line; /* cmocka's asserts are for the test's own thread */
};

#define CHURN_CHECK(ch, cond)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_store(&(ch)->failed_line, __LINE__);                                            \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

static void *grow_thread(void *arg)
{
    struct churn *ch = arg;
    char block[4096];
    memset(block, 'g', sizeof(block));
    int fd = openat(ch->t->root, "grow", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    CHURN_CHECK(ch, fd >= 0);
    for (unsigned i = 0; !atomic_load(&ch->stop); i++) {
        CHURN_CHECK(ch, fd_write_all(fd, block, sizeof(block)) == 0);
        if (i % 1024 == 1023) {
            CHURN_CHECK(ch, ftruncate(fd, 0) == 0);
        }
    }
    fd_close(fd);
    return NULL;
}

static void *swap_thread(void *arg)
{
    struct churn *ch = arg;
    int root = ch->t->root;
    while (!atomic_load(&ch->stop)) {
        (void)unlinkat(root, "swap.l", 0);
        CHURN_CHECK(ch, symlinkat("../outside/secret.txt", root, "swap.l") == 0);
        CHURN_CHECK(ch, renameat(root, "swap.l", root, "swap") == 0);
        int fd = openat(root, "swap.r", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        CHURN_CHECK(ch, fd >= 0);
        CHURN_CHECK(ch, fd_write_all(fd, "REGULAR", 7) == 0);
        fd_close(fd);
        CHURN_CHECK(ch, renameat(root, "swap.r", root, "swap") == 0);
        (void)mkfifoat(root, "swap.p", 0600);
        (void)renameat(root, "swap.p", root, "swap");
    }
    return NULL;
}

/* "p" is a directory, then a symlink to outside, in turn (an atomic exchange of the two). */
static void *flip_thread(void *arg)
{
    struct churn *ch = arg;
    int root = ch->t->root;
    while (!atomic_load(&ch->stop)) {
        CHURN_CHECK(ch, renameat2(root, "p", root, "p.other", RENAME_EXCHANGE) == 0);
    }
    return NULL;
}

/* The parents of a file being created swapped for a symlink to outside meanwhile: the file
 * lands in the tree or the create fails; nothing is ever made outside. */
static void workspace_create__parent_swapped_for_a_symlink(void **state)
{
    struct tree *t = tree_of(state);
    struct churn ch = {.t = t};
    struct err e = ERR_INIT;
    pthread_t flip;
    struct stat st;
    char leak[256];
    snprintf(leak, sizeof(leak), "%s/x", outside);
    assert_int_equal(mkdirat(t->root, "p", 0755), 0);
    mk_symlink(t, outside, "p.other");
    assert_int_equal(pthread_create(&flip, NULL, flip_thread, &ch), 0);
    size_t made = 0;
    size_t refused = 0;
    for (int i = 0; i < 5000; i++) {
        int fd = -1;
        int r = workspace_create(t->root, "p/x", 0644, 1, 1, &fd, &e);
        if (r == 0) {
            made++;
            fd_close(fd);
        } else {
            assert_true(r == -ELOOP || r == -ENOENT || r == -ENOTDIR);
            refused++;
        }
        assert_int_equal(stat(leak, &st), -1);
    }
    atomic_store(&ch.stop, true);
    pthread_join(flip, NULL);
    assert_int_equal(atomic_load(&ch.failed_line), 0);
    assert_int_equal(stat(leak, &st), -1);
    print_message("created %zu, refused %zu\n", made, refused);
}

static void workspace_collect__file_grows_while_read(void **state)
{
    struct tree *t = tree_of(state);
    struct churn ch = {.t = t};
    pthread_t grow;
    churning = true;
    assert_int_equal(pthread_create(&grow, NULL, grow_thread, &ch), 0);
    const char *pats[] = {"grow"};
    struct workspace_limits lim = {.max_bytes = 1 << 20, .max_files = 10};
    for (int i = 0; i < 300; i++) {
        struct workspace_collect c;
        collect(t, pats, ARRAY_SIZE(pats), &lim, &c);
        const struct workspace_file *g = find_file(&c, "grow");
        if (g) {
            /* Never more than the cap or than the file had at open; only what was written. */
            assert_true(g->len <= lim.max_bytes);
            for (size_t j = 0; j < g->len; j++) {
                assert_int_equal(g->data[j], 'g');
            }
        }
        workspace_collect_free(&c);
    }
    atomic_store(&ch.stop, true);
    pthread_join(grow, NULL);
    churning = false;
    assert_int_equal(atomic_load(&ch.failed_line), 0);
}

/* A regular file, a symlink to the secret and a FIFO take turns as "swap": whichever the
 * walk's fstatat saw, the open and the fstat on its fd decide, so the secret is never read
 * (collect() checks every answer for it) and the FIFO never opened for a read that waits. */
static void workspace_collect__file_swapped_while_read(void **state)
{
    struct tree *t = tree_of(state);
    struct churn ch = {.t = t};
    pthread_t swap;
    put_str(t, "swap", "REGULAR");
    churning = true;
    assert_int_equal(pthread_create(&swap, NULL, swap_thread, &ch), 0);
    const char *pats[] = {"swap"};
    struct workspace_limits lim = {.max_bytes = 1 << 20, .max_files = 10};
    size_t seen[4] = {0};
    for (int i = 0; i < 20000; i++) {
        struct workspace_collect c;
        collect(t, pats, ARRAY_SIZE(pats), &lim, &c);
        const struct workspace_file *s = find_file(&c, "swap");
        const char *why = find_skip(&c, "swap");
        if (s) {
            assert_int_equal(s->len, 7);
            assert_memory_equal(s->data, "REGULAR", 7);
            seen[0]++;
        } else if (why) {
            if (strcmp(why, "symlink") == 0) {
                seen[1]++;
            } else if (strcmp(why, "fifo") == 0) {
                seen[2]++;
            } else if (strcmp(why, "vanished") == 0) {
                seen[3]++;
            } else {
                fail_msg("swap skipped: %s", why);
            }
        }
        workspace_collect_free(&c);
    }
    atomic_store(&ch.stop, true);
    pthread_join(swap, NULL);
    churning = false;
    assert_int_equal(atomic_load(&ch.failed_line), 0);
    print_message("swap: file %zu, symlink %zu, fifo %zu, vanished %zu\n", seen[0], seen[1],
                  seen[2], seen[3]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(workspace_create__parents_owner_and_exact_mode, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_create__refuses_what_is_not_a_file_or_leaves,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_create__parent_swapped_for_a_symlink, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_open_at__existing_regular_files_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_read__ranges_and_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_list__one_directory_sorted_with_types, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__symlinks_are_skipped_never_followed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__hard_links_read_as_files, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            workspace_collect__fifo_socket_device_skipped_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__sparse_1tib_file_read_to_the_cap, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__10000_deep_directories_bounded, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__million_entries_stop_at_max_entries,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__bytes_files_and_skip_bounds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__unicode_names_binary_data_and_modes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__patterns_select, setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__root_a_directory_and_patterns_normalized,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__file_grows_while_read, setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_collect__file_swapped_while_read, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
