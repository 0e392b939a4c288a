/* SPDX-License-Identifier: MIT */
/* Tests of cgroup.c with both backends on the real machine: they need root, create cgroups
 * only below test roots named sbx-test-<pid>-*, signal only the children they fork, and
 * every teardown kills those children and removes the test roots, even after a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/cgroup_impl.h"
#include "lib/util.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL /* linux >= 5.7 */
#endif

#define MIB (1024ULL * 1024ULL)
#define WAIT_MS 10000

/* One test root (one cmocka group). */
struct fixture {
    enum cgroup_version version;
    const char *suffix;
    char name[64];
    struct cgroup_root *root;
    char skip_reason[256];
};

/* A forked child: waits for a byte on go, does its job, reports on ready, then waits to be
 * killed. Only registered (unreaped) children are ever signalled by pid. */
enum kid_job {
    KID_BURN,     /* burns ~30 ms of CPU and touches 4 MiB, reports 'R' */
    KID_FORK_ONE, /* forks a waiting grandchild, reports its pid */
    KID_MEMHOG,   /* touches 96 MiB, reports 'S' if it survived */
    KID_FORKBOMB, /* forks until refused, reaps, reports 'A' on EAGAIN else 'N' */
};

struct kid {
    pid_t pid;
    int go_w;
    int ready_r;
};

static struct kid *kids[8];
/* Roots and cgroups of the tests that open their own roots; own_teardown removes them. */
static struct cgroup_root *own_root;
static struct cgroup *own_cg;

static struct fixture fx_auto = {.version = CGROUP_AUTO, .suffix = "auto"};
static struct fixture fx_v2 = {.version = CGROUP_V2, .suffix = "v2"};

/* ---- helpers ------------------------------------------------------------------------ */

static void kid_register(struct kid *k)
{
    for (size_t i = 0; i < ARRAY_SIZE(kids); i++) {
        if (!kids[i]) {
            kids[i] = k;
            return;
        }
    }
    fail_msg("too many children");
}

static void kid_forget(struct kid *k)
{
    for (size_t i = 0; i < ARRAY_SIZE(kids); i++) {
        if (kids[i] == k) {
            kids[i] = NULL;
        }
    }
    k->pid = -1;
    k->go_w = fd_close(k->go_w);
    k->ready_r = fd_close(k->ready_r);
}

static void burn_cpu_ms(long ms)
{
    struct timespec ts;
    do {
        (void)clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    } while (ts.tv_sec * 1000L + ts.tv_nsec / 1000000L < ms);
}

static void touch(size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        _exit(3);
    }
    for (size_t off = 0; off < bytes; off += 4096) {
        ((volatile char *)p)[off] = 1;
    }
}

static void kid_report(int fd, const void *buf, size_t len)
{
    if (fd_write_all(fd, buf, len) < 0) {
        _exit(4);
    }
}

/* The child's side. Never returns. */
static void kid_main(enum kid_job job, int go_r, int ready_w)
{
    char c;
    if (RETRY_EINTR(read(go_r, &c, 1)) != 1) {
        _exit(2);
    }
    switch (job) {
    case KID_BURN:
        burn_cpu_ms(30);
        touch(4 * MIB);
        kid_report(ready_w, "R", 1);
        break;
    case KID_FORK_ONE: {
        pid_t g = fork();
        if (g == 0) {
            for (;;) {
                (void)pause();
            }
        }
        kid_report(ready_w, &g, sizeof(g));
        break;
    }
    case KID_MEMHOG:
        touch(96 * MIB);
        kid_report(ready_w, "S", 1);
        break;
    case KID_FORKBOMB: {
        pid_t pids[64];
        size_t n = 0;
        char res = 'N';
        while (n < ARRAY_SIZE(pids)) {
            pid_t p = fork();
            if (p == 0) {
                _exit(0);
            }
            if (p < 0) {
                res = errno == EAGAIN ? 'A' : 'E';
                break;
            }
            pids[n++] = p; /* left a zombie, so it keeps counting against pids.max */
        }
        for (size_t i = 0; i < n; i++) {
            (void)waitpid(pids[i], NULL, 0);
        }
        kid_report(ready_w, &res, 1);
        break;
    }
    }
    for (;;) {
        (void)pause();
    }
}

static void kid_start(struct kid *k, enum kid_job job)
{
    int go[2], ready[2];
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)close(go[1]);
        (void)close(ready[0]);
        kid_main(job, go[0], ready[1]);
    }
    (void)close(go[0]);
    (void)close(ready[1]);
    *k = (struct kid){.pid = pid, .go_w = go[1], .ready_r = ready[0]};
    kid_register(k);
}

static void kid_go(struct kid *k, void *report, size_t len)
{
    assert_int_equal(fd_write_all(k->go_w, "g", 1), 0);
    ssize_t n = RETRY_EINTR(read(k->ready_r, report, len));
    assert_int_equal(n, (ssize_t)len);
}

/* Waits for pid (a child of ours) with a deadline; returns its status or -1. */
static int reap(pid_t pid)
{
    uint64_t end = clock_now_ns() + WAIT_MS * 1000000ULL;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            return st;
        }
        if (r < 0 || clock_now_ns() > end) {
            return -1;
        }
        struct timespec ts = {0, 1000000};
        (void)nanosleep(&ts, NULL);
    }
}

static int kid_reap(struct kid *k)
{
    int st = reap(k->pid);
    if (st >= 0) {
        kid_forget(k);
    }
    return st;
}

static bool wait_empty(struct cgroup *cg)
{
    uint64_t end = clock_now_ns() + WAIT_MS * 1000000ULL;
    while (!cgroup_is_empty(cg)) {
        if (clock_now_ns() > end) {
            return false;
        }
        struct timespec ts = {0, 1000000};
        (void)nanosleep(&ts, NULL);
    }
    return true;
}

static bool file_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void read_trimmed(const char *path, char *buf, size_t size)
{
    ssize_t n = file_read_small(AT_FDCWD, path, buf, size);
    if (n < 0) {
        fail_msg("read %s: %s", path, strerror((int)-n));
    }
    while (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
    }
}

/* The subtree root of controller ctrl, parsed from the description:
 *   "v1 memory=/p cpu=/p cpuacct=/p pids=/p memsw=yes limits=yes", "v2 /p controllers=..." */
static bool root_path(const struct cgroup_root *root, const char *ctrl, char *buf, size_t size)
{
    char d[4096];
    str_copy(d, cgroup_root_describe(root), sizeof(d));
    char *save = NULL;
    size_t i = 0;
    for (char *t = strtok_r(d, " ", &save); t; t = strtok_r(NULL, " ", &save), i++) {
        if (cgroup_root_version(root) == CGROUP_V2) {
            if (i == 1) {
                str_copy(buf, t, size);
                return true;
            }
            continue;
        }
        char *eq = strchr(t, '=');
        if (!eq || eq[1] != '/') {
            continue;
        }
        *eq = '\0';
        char *csave = NULL;
        for (char *c = strtok_r(t, ",", &csave); c; c = strtok_r(NULL, ",", &csave)) {
            if (strcmp(c, ctrl) == 0) {
                str_copy(buf, eq + 1, size);
                return true;
            }
        }
    }
    return false;
}

/* Each hierarchy's subtree root (deduplicated). */
static size_t root_paths(const struct cgroup_root *root, char paths[][512], size_t max)
{
    static const char *const ctrls[] = {"memory", "cpu", "cpuacct", "pids"};
    size_t n = 0;
    for (size_t c = 0; c < ARRAY_SIZE(ctrls) && n < max; c++) {
        char p[512];
        if (!root_path(root, ctrls[c], p, sizeof(p))) {
            continue;
        }
        bool dup = false;
        for (size_t i = 0; i < n; i++) {
            dup = dup || strcmp(paths[i], p) == 0;
        }
        if (!dup) {
            str_copy(paths[n++], p, sizeof(paths[0]));
        }
    }
    return n;
}

/* Counts directories whose name starts with prefix anywhere below dir (depth-bounded). */
static int count_dirs_prefixed(const char *dir, const char *prefix, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        return 0;
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.') {
            continue;
        }
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            n++;
        }
        if (depth > 0) {
            char sub[1024];
            (void)snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
            n += count_dirs_prefixed(sub, prefix, depth - 1);
        }
    }
    (void)closedir(d);
    return n;
}

static int leftover_test_dirs(void)
{
    char prefix[64];
    (void)snprintf(prefix, sizeof(prefix), "sbx-test-%d-", (int)getpid());
    return count_dirs_prefixed("/sys/fs/cgroup", prefix, 6);
}

/* The /proc/<pid>/cgroup line of the hierarchy holding controller ctrl ("" for cgroup2). */
static void proc_cgroup_line(pid_t pid, const char *ctrl, char *buf, size_t size)
{
    char path[64], all[4096];
    (void)snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    read_trimmed(path, all, sizeof(all));
    buf[0] = '\0';
    char *save = NULL;
    for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char line[1024];
        str_copy(line, l, sizeof(line));
        char *c1 = strchr(l, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            continue;
        }
        *c2 = '\0';
        bool match = !*ctrl && !c1[1];
        char *csave = NULL;
        for (char *c = strtok_r(c1 + 1, ",", &csave); c && !match;
             c = strtok_r(NULL, ",", &csave)) {
            match = strcmp(c, ctrl) == 0;
        }
        if (match) {
            str_copy(buf, line, size);
            return;
        }
    }
}

/* Asserts pid sits in <root>/<cg> in every hierarchy the root uses. */
static void assert_in_cgroup(struct fixture *fx, pid_t pid, const char *cg)
{
    char want[160], line[1024];
    (void)snprintf(want, sizeof(want), "/%s/%s", fx->name, cg);
    if (cgroup_root_version(fx->root) == CGROUP_V2) {
        proc_cgroup_line(pid, "", line, sizeof(line));
        assert_true(strncmp(line, "0::", 3) == 0);
        assert_non_null(strstr(line, want));
        return;
    }
    static const char *const ctrls[] = {"memory", "cpu", "cpuacct", "pids"};
    for (size_t i = 0; i < ARRAY_SIZE(ctrls); i++) {
        proc_cgroup_line(pid, ctrls[i], line, sizeof(line));
        if (!line[0]) {
            continue;
        }
        if (!strstr(line, want)) {
            fail_msg("pid %d: '%s' lacks %s", (int)pid, line, want);
        }
    }
}

static void require(struct fixture *fx)
{
    if (fx->skip_reason[0]) {
        print_message("[  SKIP    ] %s\n", fx->skip_reason);
        skip();
    }
}

static void require_limits(struct fixture *fx)
{
    require(fx);
    if (!cgroup_root_has_limits(fx->root)) {
        print_message("[  SKIP    ] no memory/cpu/pids controllers: %s\n",
                      cgroup_root_describe(fx->root));
        skip();
    }
}

/* ---- setup and teardown ------------------------------------------------------------- */

/* Whether mountinfo has a mount of fstype whose super options mention opt (NULL: any). */
static bool mounted(const char *fstype, const char *opt)
{
    char buf[65536], key[32];
    if (file_read_small(AT_FDCWD, "/proc/self/mountinfo", buf, sizeof(buf)) < 0) {
        return false;
    }
    (void)snprintf(key, sizeof(key), " - %s ", fstype);
    for (char *l = buf; (l = strstr(l, key)) != NULL; l++) {
        char *eol = strchrnul(l, '\n');
        char *m = opt ? strstr(l, opt) : l;
        if (m && m < eol) {
            return true;
        }
    }
    return false;
}

static int group_setup(struct fixture *fx)
{
    (void)snprintf(fx->name, sizeof(fx->name), "sbx-test-%d-%s", (int)getpid(), fx->suffix);
    fx->skip_reason[0] = '\0';
    if (geteuid() != 0) {
        (void)snprintf(fx->skip_reason, sizeof(fx->skip_reason), "not root");
        return 0;
    }
    if (fx->version == CGROUP_V2 && !mounted("cgroup2", NULL)) {
        (void)snprintf(fx->skip_reason, sizeof(fx->skip_reason), "no cgroup2 mount");
        return 0;
    }
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    struct err e = ERR_INIT;
    int r = cgroup_root_open(fx->version, NULL, fx->name, &fx->root, &e);
    if (r < 0) {
        print_message("cgroup_root_open(%s): %s\n", fx->name, err_msg(&e));
        return -1;
    }
    print_message("[  INFO    ] %s\n", cgroup_root_describe(fx->root));
    return 0;
}

static int group_setup_auto(void **state)
{
    *state = &fx_auto;
    return group_setup(&fx_auto);
}

static int group_setup_v2(void **state)
{
    *state = &fx_v2;
    return group_setup(&fx_v2);
}

static void cleanup_child_cb(const char *name, void *ud)
{
    struct fixture *fx = ud;
    struct cgroup *cg = NULL;
    if (cgroup_open_existing(fx->root, name, &cg) < 0) {
        return;
    }
    (void)cgroup_kill_all(cg);
    (void)wait_empty(cg);
    (void)cgroup_remove(cg, NULL);
    cg = cgroup_free(cg);
}

/* Kills and reaps what a test left (after a failed assertion), then removes its cgroups. */
static int test_teardown(void **state)
{
    struct fixture *fx = *state;
    for (size_t i = 0; i < ARRAY_SIZE(kids); i++) {
        if (kids[i] && kids[i]->pid > 0) {
            (void)kill(kids[i]->pid, SIGKILL);
            (void)reap(kids[i]->pid);
            kid_forget(kids[i]);
        }
    }
    if (fx->root) {
        (void)cgroup_root_list(fx->root, cleanup_child_cb, fx);
    }
    /* Orphaned grandchildren come to us (we are a subreaper); they are dead by now. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    return 0;
}

static int group_teardown(void **state)
{
    struct fixture *fx = *state;
    (void)test_teardown(state);
    fx->root = cgroup_root_free(fx->root);
    int left = leftover_test_dirs();
    if (left > 0) {
        print_message("%d test cgroup directories left behind\n", left);
        return -1;
    }
    return 0;
}

/* For the tests with their own roots: removes whatever a failed one left. */
static int own_teardown(void **state)
{
    struct fixture fx = {.root = own_root};
    (void)state;
    if (own_cg) {
        (void)cgroup_remove(own_cg, NULL);
        own_cg = cgroup_free(own_cg);
    }
    if (own_root) {
        (void)cgroup_root_list(own_root, cleanup_child_cb, &fx);
        own_root = cgroup_root_free(own_root);
    }
    return 0;
}

static int test_setup(void **state)
{
    (void)state;
    return 0;
}

/* ---- tests: the default backend (v1 on the build machine) --------------------------- */

static void cgroup_root_open__creates_subtree_in_every_hierarchy(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    char paths[4][512];
    size_t n = root_paths(fx->root, paths, 4);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(file_is_dir(paths[i]));
        assert_non_null(strstr(paths[i], fx->name));
    }
    if (cgroup_root_version(fx->root) == CGROUP_V1) {
        char p[512];
        assert_true(root_path(fx->root, "memory", p, sizeof(p)));
        assert_true(root_path(fx->root, "cpu", p, sizeof(p)));
        assert_true(root_path(fx->root, "pids", p, sizeof(p)));
        assert_true(cgroup_root_has_limits(fx->root));
    }
}

static void cgroup_create__applies_limits(void **state)
{
    struct fixture *fx = *state;
    require_limits(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.memory_bytes = 64 * MIB, .cpu = 0.5, .pids = 17};
    assert_int_equal(cgroup_create(fx->root, "lim", &lim, &cg, &e), 0);
    assert_string_equal(cgroup_name(cg), "lim");
    char dir[512], path[700], buf[128];
    if (cgroup_root_version(fx->root) == CGROUP_V1) {
        assert_int_equal(cgroup_fd(cg), -1);
        assert_true(root_path(fx->root, "memory", dir, sizeof(dir)));
        (void)snprintf(path, sizeof(path), "%s/lim/memory.limit_in_bytes", dir);
        read_trimmed(path, buf, sizeof(buf));
        assert_string_equal(buf, "67108864");
        (void)snprintf(path, sizeof(path), "%s/lim/memory.memsw.limit_in_bytes", dir);
        if (access(path, F_OK) == 0) {
            read_trimmed(path, buf, sizeof(buf));
            assert_string_equal(buf, "67108864");
            assert_non_null(strstr(cgroup_root_describe(fx->root), "memsw=yes"));
        }
        /* Socket buffers: a quarter of the memory limit, at least 16 MiB. */
        (void)snprintf(path, sizeof(path), "%s/lim/memory.kmem.tcp.limit_in_bytes", dir);
        if (access(path, F_OK) == 0) {
            read_trimmed(path, buf, sizeof(buf));
            assert_string_equal(buf, "16777216");
        }
        assert_int_equal(cgroup_v1_socket_limit(512 * MIB), 128 * MIB);
        assert_int_equal(cgroup_v1_socket_limit(32 * MIB), 16 * MIB);
        assert_true(root_path(fx->root, "cpu", dir, sizeof(dir)));
        (void)snprintf(path, sizeof(path), "%s/lim/cpu.cfs_period_us", dir);
        read_trimmed(path, buf, sizeof(buf));
        assert_string_equal(buf, "100000");
        (void)snprintf(path, sizeof(path), "%s/lim/cpu.cfs_quota_us", dir);
        read_trimmed(path, buf, sizeof(buf));
        assert_string_equal(buf, "50000");
        assert_true(root_path(fx->root, "pids", dir, sizeof(dir)));
    } else {
        assert_true(cgroup_fd(cg) >= 0);
        assert_true(root_path(fx->root, "memory", dir, sizeof(dir)));
        (void)snprintf(path, sizeof(path), "%s/lim/memory.max", dir);
        read_trimmed(path, buf, sizeof(buf));
        assert_string_equal(buf, "67108864");
        (void)snprintf(path, sizeof(path), "%s/lim/memory.swap.max", dir);
        if (access(path, F_OK) == 0) {
            read_trimmed(path, buf, sizeof(buf));
            assert_string_equal(buf, "0");
        }
        (void)snprintf(path, sizeof(path), "%s/lim/cpu.max", dir);
        read_trimmed(path, buf, sizeof(buf));
        assert_string_equal(buf, "50000 100000");
    }
    (void)snprintf(path, sizeof(path), "%s/lim/pids.max", dir);
    read_trimmed(path, buf, sizeof(buf));
    assert_string_equal(buf, "17");
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), 0);
    (void)snprintf(path, sizeof(path), "%s/lim", dir);
    assert_false(file_is_dir(path));
    cg = cgroup_free(cg);
}

static void cgroup_create__existing_name_returns_eexist(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    struct err e = ERR_INIT;
    struct cgroup *a = NULL, *b = NULL;
    assert_int_equal(cgroup_create(fx->root, "dup", NULL, &a, &e), 0);
    assert_int_equal(cgroup_create(fx->root, "dup", NULL, &b, &e), -EEXIST);
    assert_null(b);
    assert_non_null(strstr(err_msg(&e), "dup"));
    assert_int_equal(cgroup_remove(a, &e), 0);
    a = cgroup_free(a);
}

static void cgroup_create__rejects_bad_names(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    static const char *const bad[] = {"", ".", "..", ".hidden", "a/b", "a b", "../x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct cgroup *cg = NULL;
        assert_int_equal(cgroup_create(fx->root, bad[i], NULL, &cg, NULL), -EINVAL);
        assert_null(cg);
        assert_int_equal(cgroup_open_existing(fx->root, bad[i], &cg), -EINVAL);
    }
}

static void cgroup_attach__moves_child_and_reports_usage(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.memory_bytes = 256 * MIB, .cpu = 1, .pids = 32};
    assert_int_equal(cgroup_create(fx->root, "life", &lim, &cg, &e), 0);
    assert_true(cgroup_is_empty(cg));

    struct kid k;
    kid_start(&k, KID_BURN);
    int r = cgroup_attach(cg, k.pid, &e);
    if (r < 0) {
        fail_msg("attach: %s", err_msg(&e));
    }
    assert_in_cgroup(fx, k.pid, "life");
    char rep;
    kid_go(&k, &rep, 1);
    assert_int_equal(rep, 'R');

    struct cgroup_usage u;
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_true(u.cpu_ns >= 10 * 1000000ULL);
    if (cgroup_root_version(fx->root) == CGROUP_V1) {
        assert_true(u.mem_peak_bytes >= 4 * MIB);
    }
    assert_false(u.oom);
    assert_int_equal(u.oom_kills, 0);
    assert_int_equal(u.pids_max_hits, 0);

    assert_false(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), -EBUSY);
    assert_int_equal(cgroup_kill_all(cg), 1);
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(cgroup_is_empty(cg));
    /* Readied for another sandbox: the peak starts again (where the kernel reports one),
     * the cumulative CPU does not, and the cgroup can be used again. */
    uint64_t cpu_before = u.cpu_ns;
    r = cgroup_reset(cg, &e);
    if (r < 0) {
        fail_msg("reset: %s", err_msg(&e));
    }
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_true(u.mem_peak_bytes < 4 * MIB);
    assert_true(u.cpu_ns >= cpu_before);
    kid_start(&k, KID_BURN);
    assert_int_equal(cgroup_attach(cg, k.pid, &e), 0);
    assert_in_cgroup(fx, k.pid, "life");
    assert_int_equal(cgroup_kill_all(cg), 1);
    st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(cgroup_is_empty(cg));
    /* Again, through the files the first reset left open. */
    r = cgroup_reset(cg, &e);
    if (r < 0) {
        fail_msg("second reset: %s", err_msg(&e));
    }
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_true(u.mem_peak_bytes < 4 * MIB);
    assert_int_equal(cgroup_remove(cg, &e), 0);
    assert_int_equal(cgroup_remove(cg, &e), 0); /* already gone: tolerated */
    char paths[4][512], path[700];
    size_t n = root_paths(fx->root, paths, 4);
    for (size_t i = 0; i < n; i++) {
        (void)snprintf(path, sizeof(path), "%s/life", paths[i]);
        assert_false(file_is_dir(path));
    }
    cg = cgroup_free(cg);
}

static void cgroup_kill_all__kills_forked_descendants(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    assert_int_equal(cgroup_create(fx->root, "tree", NULL, &cg, &e), 0);
    struct kid k;
    kid_start(&k, KID_FORK_ONE);
    assert_int_equal(cgroup_attach(cg, k.pid, &e), 0);
    pid_t g = 0;
    kid_go(&k, &g, sizeof(g));
    assert_true(g > 0);
    assert_in_cgroup(fx, g, "tree");
    assert_false(cgroup_is_empty(cg));
    assert_int_equal(cgroup_kill_all(cg), 2);
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* The grandchild was reparented to us (subreaper). */
    st = reap(g);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_kill_all(cg), 0);
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

static void cgroup_usage__memory_limit_ooms(void **state)
{
    struct fixture *fx = *state;
    require_limits(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.memory_bytes = 32 * MIB, .pids = 16};
    assert_int_equal(cgroup_create(fx->root, "oom", &lim, &cg, &e), 0);
    struct kid k;
    kid_start(&k, KID_MEMHOG);
    assert_int_equal(cgroup_attach(cg, k.pid, &e), 0);
    assert_int_equal(fd_write_all(k.go_w, "g", 1), 0);
    char rep = 0;
    ssize_t n = RETRY_EINTR(read(k.ready_r, &rep, 1));
    assert_int_equal(n, 0); /* killed before it could report */
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    struct cgroup_usage u;
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_true(u.oom);
    assert_true(u.oom_kills >= 1);
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

static void cgroup_usage__pids_limit_counts_refused_forks(void **state)
{
    struct fixture *fx = *state;
    require_limits(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.pids = 5};
    assert_int_equal(cgroup_create(fx->root, "pids", &lim, &cg, &e), 0);
    struct kid k;
    kid_start(&k, KID_FORKBOMB);
    assert_int_equal(cgroup_attach(cg, k.pid, &e), 0);
    char rep = 0;
    kid_go(&k, &rep, 1);
    assert_int_equal(rep, 'A');
    struct cgroup_usage u;
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_true(u.pids_max_hits > 0);
    assert_int_equal(cgroup_kill_all(cg), 1);
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st));
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

struct seen {
    bool a, b;
    int other;
};

static void seen_cb(const char *name, void *ud)
{
    struct seen *s = ud;
    if (strcmp(name, "la") == 0) {
        s->a = true;
    } else if (strcmp(name, "lb") == 0) {
        s->b = true;
    } else {
        s->other++;
    }
}

static void cgroup_root_list__finds_children_for_the_reaper(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    struct err e = ERR_INIT;
    struct cgroup *a = NULL, *b = NULL, *x = NULL;
    assert_int_equal(cgroup_create(fx->root, "la", NULL, &a, &e), 0);
    assert_int_equal(cgroup_create(fx->root, "lb", NULL, &b, &e), 0);
    a = cgroup_free(a);
    struct seen s = {0};
    assert_int_equal(cgroup_root_list(fx->root, seen_cb, &s), 2);
    assert_true(s.a && s.b);
    assert_int_equal(s.other, 0);
    assert_int_equal(cgroup_open_existing(fx->root, "nope", &x), -ENOENT);
    assert_null(x);
    assert_int_equal(cgroup_open_existing(fx->root, "la", &x), 0);
    assert_string_equal(cgroup_name(x), "la");
    assert_true(cgroup_is_empty(x));
    struct cgroup_usage u;
    assert_int_equal(cgroup_usage(x, &u), 0);
    assert_int_equal(cgroup_remove(x, &e), 0);
    x = cgroup_free(x);
    assert_int_equal(cgroup_remove(b, &e), 0);
    b = cgroup_free(b);
    s = (struct seen){0};
    assert_int_equal(cgroup_root_list(fx->root, seen_cb, &s), 0);
}

/* ---- tests with their own roots ----------------------------------------------------- */

static void cgroup_root_open__forced_v1(void **state)
{
    (void)state;
    if (geteuid() != 0 || !mounted("cgroup", "memory")) {
        print_message("[  SKIP    ] %s\n", geteuid() != 0 ? "not root" : "no v1 memory");
        skip();
    }
    char name[64];
    (void)snprintf(name, sizeof(name), "sbx-test-%d-v1", (int)getpid());
    struct err e = ERR_INIT;
    int r = cgroup_root_open(CGROUP_V1, NULL, name, &own_root, &e);
    if (r < 0) {
        fail_msg("%s", err_msg(&e));
    }
    assert_int_equal(cgroup_root_version(own_root), CGROUP_V1);
    assert_true(cgroup_root_has_limits(own_root));
    const char *d = cgroup_root_describe(own_root);
    assert_true(strncmp(d, "v1 ", 3) == 0);
    assert_non_null(strstr(d, "memory="));
    assert_non_null(strstr(d, "pids="));
    own_root = cgroup_root_free(own_root);
}

/* The disk under /usr (what io limits of a host-image pool name), or the test is skipped. */
static dev_t usr_disk_or_skip(void)
{
    struct err e = ERR_INIT;
    dev_t disk = 0;
    if (cgroup_block_disk("/usr", &disk, &e) < 0) {
        print_message("[  SKIP    ] %s\n", err_msg(&e));
        skip();
    }
    return disk;
}

/* Opens own_root on v1 as `name` with flags, or fails the test. */
static void open_v1_root(const char *name, unsigned flags)
{
    struct err e = ERR_INIT;
    if (cgroup_root_open_flags(CGROUP_V1, NULL, name, flags, &own_root, &e) < 0) {
        fail_msg("%s", err_msg(&e));
    }
}

/* The io controller only for a root that asks (CGROUP_ROOT_IO): none of its cgroups, and no
 * attach to them, for the others. With it, a cgroup's io limits name the disk. */
static void cgroup_root_open__io_only_when_asked(void **state)
{
    (void)state;
    if (geteuid() != 0 || !mounted("cgroup", "blkio") || !mounted("cgroup", "memory")) {
        print_message("[  SKIP    ] %s\n", geteuid() != 0 ? "not root" : "no v1 blkio or memory");
        skip();
    }
    struct err e = ERR_INIT;
    dev_t disk = usr_disk_or_skip();
    char name[64], path[512], got[128], want[64];
    (void)snprintf(name, sizeof(name), "sbx-test-%d-io", (int)getpid());
    open_v1_root(name, 0);
    assert_null(strstr(cgroup_root_describe(own_root), "blkio="));
    own_root = cgroup_root_free(own_root);
    open_v1_root(name, CGROUP_ROOT_IO);
    const char *d = strstr(cgroup_root_describe(own_root), "blkio=");
    assert_non_null(d);
    (void)snprintf(path, sizeof(path), "%.*s", (int)strcspn(d + 6, " "), d + 6);
    const struct cgroup_limits lim = {.memory_bytes = 64 * MIB,
                                      .pids = 16,
                                      .io_dev = disk,
                                      .io_read_bps = 4 * MIB,
                                      .io_read_iops = 100};
    if (cgroup_create(own_root, "io", &lim, &own_cg, &e) < 0) {
        fail_msg("%s", err_msg(&e));
    }
    char file[600];
    (void)snprintf(file, sizeof(file), "%s/io/blkio.throttle.read_bps_device", path);
    read_trimmed(file, got, sizeof(got));
    (void)snprintf(want, sizeof(want), "%u:%u %llu", major(disk), minor(disk),
                   (unsigned long long)(4 * MIB));
    assert_string_equal(got, want);
    (void)snprintf(file, sizeof(file), "%s/io/blkio.throttle.read_iops_device", path);
    read_trimmed(file, got, sizeof(got));
    (void)snprintf(want, sizeof(want), "%u:%u 100", major(disk), minor(disk));
    assert_string_equal(got, want);
    assert_int_equal(cgroup_remove(own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    own_root = cgroup_root_free(own_root);
    /* A root without the io controller refuses io limits rather than ignore them. */
    open_v1_root(name, 0);
    assert_int_equal(cgroup_create(own_root, "io", &lim, &own_cg, &e), -ENODEV);
    assert_null(own_cg);
    own_root = cgroup_root_free(own_root);
    /* An sbxd with io limits that died left its blkio subtree with a cgroup in it: the next
     * one, without io limits, takes blkio on for its run, so that the leftover can be
     * removed, and the subtree goes at its exit; the one after has no blkio at all. */
    open_v1_root(name, CGROUP_ROOT_IO);
    assert_int_equal(cgroup_create(own_root, "left", NULL, &own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    own_root = cgroup_root_close(own_root);
    assert_int_equal(access(path, F_OK), 0);
    open_v1_root(name, 0);
    assert_non_null(strstr(cgroup_root_describe(own_root), "blkio="));
    assert_int_equal(cgroup_open_existing(own_root, "left", &own_cg), 0);
    assert_int_equal(cgroup_remove(own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    own_root = cgroup_root_free(own_root);
    assert_int_not_equal(access(path, F_OK), 0);
    open_v1_root(name, 0);
    assert_null(strstr(cgroup_root_describe(own_root), "blkio="));
    own_root = cgroup_root_free(own_root);
}

/* v2: io.max where the host delegates io; a clear refusal where it does not (this VM's
 * cgroup2 mount has no controllers at all). */
static void cgroup_root_open__v2_io(void **state)
{
    (void)state;
    if (geteuid() != 0 || !mounted("cgroup2", NULL)) {
        print_message("[  SKIP    ] %s\n", geteuid() != 0 ? "not root" : "no cgroup2 mount");
        skip();
    }
    struct err e = ERR_INIT;
    dev_t disk = usr_disk_or_skip();
    char name[64];
    (void)snprintf(name, sizeof(name), "sbx-test-%d-v2io", (int)getpid());
    int r = cgroup_root_open_flags(CGROUP_V2, NULL, name, CGROUP_ROOT_IO, &own_root, &e);
    if (r < 0) {
        assert_int_equal(r, -ENODEV);
        assert_non_null(strstr(err_msg(&e), "io controller"));
        assert_null(own_root);
        return;
    }
    const struct cgroup_limits lim = {.io_dev = disk, .io_read_bps = 4 * MIB};
    if (cgroup_create(own_root, "io", &lim, &own_cg, &e) < 0) {
        fail_msg("%s", err_msg(&e));
    }
    const char *d = cgroup_root_describe(own_root);
    char path[512], file[600], got[256], want[64];
    (void)snprintf(path, sizeof(path), "%.*s", (int)strcspn(strchr(d, '/'), " "), strchr(d, '/'));
    (void)snprintf(file, sizeof(file), "%s/io/io.max", path);
    read_trimmed(file, got, sizeof(got));
    (void)snprintf(want, sizeof(want), "%u:%u rbps=%llu", major(disk), minor(disk),
                   (unsigned long long)(4 * MIB));
    assert_non_null(strstr(got, want));
    assert_int_equal(cgroup_remove(own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    own_root = cgroup_root_free(own_root);
}

static void cgroup_block_disk__finds_the_disk_or_says_none(void **state)
{
    (void)state;
    struct err e = ERR_INIT;
    dev_t d = 0;
    assert_int_equal(cgroup_block_disk("/proc", &d, &e), -ENODEV);
    assert_non_null(strstr(err_msg(&e), "no block device"));
    assert_int_equal(cgroup_block_disk("/no/such/path", &d, &e), -ENOENT);
    struct stat st;
    if (stat("/usr", &st) == 0 && cgroup_block_disk("/usr", &d, &e) == 0) {
        /* The disk itself, with no partition file, and /usr's device or its parent. */
        char p[96];
        (void)snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/partition", major(d), minor(d));
        assert_int_not_equal(access(p, F_OK), 0);
        if (d != st.st_dev) {
            (void)snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/partition", major(st.st_dev),
                           minor(st.st_dev));
            assert_int_equal(access(p, F_OK), 0);
        }
    }
}

static void cgroup_root_open__below_configured_parent(void **state)
{
    (void)state;
    if (geteuid() != 0 || !mounted("cgroup2", NULL)) {
        print_message("[  SKIP    ] %s\n", geteuid() != 0 ? "not root" : "no cgroup2 mount");
        skip();
    }
    char name[64], path[512];
    (void)snprintf(name, sizeof(name), "sbx-test-%d-par", (int)getpid());
    struct err e = ERR_INIT;
    assert_int_equal(cgroup_root_open(CGROUP_V2, "/no-such-parent", name, &own_root, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "no-such-parent"));
    assert_null(own_root);
    int r = cgroup_root_open(CGROUP_V2, "/", name, &own_root, &e);
    if (r < 0) {
        fail_msg("%s", err_msg(&e));
    }
    assert_true(root_path(own_root, "memory", path, sizeof(path)));
    const char *slash = strrchr(path, '/');
    assert_non_null(slash);
    assert_string_equal(slash + 1, name);
    assert_true(file_is_dir(path));
    own_root = cgroup_root_free(own_root);
    assert_false(file_is_dir(path));
}

static void cgroup_root_open__rejects_bad_input(void **state)
{
    (void)state;
    struct err e = ERR_INIT;
    assert_int_equal(cgroup_root_open(CGROUP_AUTO, NULL, "a/b", &own_root, &e), -EINVAL);
    assert_int_equal(cgroup_root_open(CGROUP_AUTO, NULL, "..", &own_root, &e), -EINVAL);
    assert_int_equal(cgroup_root_open((enum cgroup_version)7, NULL, "x", &own_root, &e), -EINVAL);
    assert_int_equal(cgroup_root_open(CGROUP_AUTO, "../..", "x", &own_root, &e), -EINVAL);
    assert_null(own_root);
}

static void cgroup_root_free__removes_empty_subtree_keeps_busy_one(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("[  SKIP    ] not root\n");
        skip();
    }
    char name[64], paths[4][512];
    (void)snprintf(name, sizeof(name), "sbx-test-%d-free", (int)getpid());
    struct err e = ERR_INIT;
    assert_int_equal(cgroup_root_open(CGROUP_AUTO, NULL, name, &own_root, &e), 0);
    size_t n = root_paths(own_root, paths, 4);
    assert_true(n >= 1);
    assert_int_equal(cgroup_create(own_root, "busy", NULL, &own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    /* A child remains: the subtree stays (EBUSY ignored). */
    own_root = cgroup_root_free(own_root);
    for (size_t i = 0; i < n; i++) {
        assert_true(file_is_dir(paths[i]));
    }
    /* Reopening finds it, as the reaper would, and cleans up. */
    assert_int_equal(cgroup_root_open(CGROUP_AUTO, NULL, name, &own_root, &e), 0);
    assert_int_equal(cgroup_open_existing(own_root, "busy", &own_cg), 0);
    assert_int_equal(cgroup_remove(own_cg, &e), 0);
    own_cg = cgroup_free(own_cg);
    own_root = cgroup_root_free(own_root);
    for (size_t i = 0; i < n; i++) {
        assert_false(file_is_dir(paths[i]));
    }
    assert_null(cgroup_root_free(NULL));
    assert_null(cgroup_free(NULL));
}

/* ---- tests: forced cgroup v2 -------------------------------------------------------- */

static pid_t clone3_into_cgroup(int cgfd)
{
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = (uint64_t)cgfd;
    return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

static void cgroup_fd__v2_clone_into_cgroup(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    assert_int_equal(cgroup_root_version(fx->root), CGROUP_V2);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.memory_bytes = 64 * MIB, .cpu = 1, .pids = 16};
    int r = cgroup_create(fx->root, "c3", &lim, &cg, &e);
    if (r < 0) {
        fail_msg("%s", err_msg(&e));
    }
    assert_true(cgroup_fd(cg) >= 0);
    assert_true(cgroup_is_empty(cg));
    pid_t pid = clone3_into_cgroup(cgroup_fd(cg));
    if (pid == 0) {
        for (;;) {
            (void)pause();
        }
    }
    assert_true(pid > 0);
    struct kid k = {.pid = pid, .go_w = -1, .ready_r = -1};
    kid_register(&k);
    assert_in_cgroup(fx, pid, "c3");
    assert_false(cgroup_is_empty(cg));
    struct cgroup_usage u;
    assert_int_equal(cgroup_usage(cg, &u), 0);
    assert_int_equal(cgroup_remove(cg, &e), -EBUSY);
    assert_int_equal(cgroup_kill_all(cg), 1);
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

/* COMPAT(linux < 5.14): without cgroup.kill v2 falls back to the cgroup.procs loop. */
static void cgroup_kill_all__v2_procs_loop_without_cgroup_kill(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    bool had_kill = fx->root->v2_kill;
    fx->root->v2_kill = false;
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    assert_int_equal(cgroup_create(fx->root, "nokill", NULL, &cg, &e), 0);
    struct kid k;
    kid_start(&k, KID_FORK_ONE);
    assert_int_equal(cgroup_attach(cg, k.pid, &e), 0);
    pid_t g = 0;
    kid_go(&k, &g, sizeof(g));
    int n = cgroup_kill_all(cg);
    fx->root->v2_kill = had_kill;
    assert_int_equal(n, 2);
    int st = kid_reap(&k);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    st = reap(g);
    assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_true(cgroup_is_empty(cg));
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

/* v1: another process (the fork server) attaches through the cgroup.procs files the cgroup
 * holds open, one per hierarchy, written with the pid as cgroup_attach would; the cgroup
 * counts as attached everywhere. v2: none (CLONE_INTO_CGROUP places the child). */
static void cgroup_procs_fds__let_another_writer_attach(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    struct err e = ERR_INIT;
    struct cgroup *cg = NULL;
    const struct cgroup_limits lim = {.memory_bytes = 256 * MIB, .cpu = 1, .pids = 32};
    assert_int_equal(cgroup_create(fx->root, "procs", &lim, &cg, &e), 0);
    int fds[8];
    int n = cgroup_procs_fds(cg, fds, 8, &e);
    if (n < 0) {
        fail_msg("procs fds: %s", err_msg(&e));
    }
    if (cgroup_root_version(fx->root) == CGROUP_V2) {
        assert_int_equal(n, 0);
        assert_true(cgroup_fd(cg) >= 0);
    } else {
        assert_true(n >= 1);
        assert_int_equal(cgroup_procs_fds(cg, fds, (size_t)n - 1, &e), -E2BIG);
        /* The same held-open files each time: nothing to close for the caller. */
        int again[8];
        assert_int_equal(cgroup_procs_fds(cg, again, 8, &e), n);
        assert_memory_equal(fds, again, sizeof(int) * (size_t)n);
        struct kid k;
        kid_start(&k, KID_BURN);
        char pid[16];
        int len = snprintf(pid, sizeof(pid), "%d", (int)k.pid);
        for (int i = 0; i < n; i++) {
            assert_int_equal(write(fds[i], pid, (size_t)len), len);
        }
        assert_in_cgroup(fx, k.pid, "procs");
        assert_false(cgroup_is_empty(cg));
        assert_int_equal(cgroup_kill_all(cg), 1);
        int st = kid_reap(&k);
        assert_true(st >= 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        assert_true(cgroup_is_empty(cg));
    }
    assert_int_equal(cgroup_remove(cg, &e), 0);
    cg = cgroup_free(cg);
}

static void cgroup_root_open__v2_reports_limits_honestly(void **state)
{
    struct fixture *fx = *state;
    require(fx);
    const char *d = cgroup_root_describe(fx->root);
    assert_true(strncmp(d, "v2 /", 4) == 0);
    assert_non_null(strstr(d, cgroup_root_has_limits(fx->root) ? "limits=yes" : "limits=no"));
    if (!cgroup_root_has_limits(fx->root)) {
        assert_non_null(strstr(d, "controllers=none"));
    }
}

#define T(fn, fx) cmocka_unit_test_prestate_setup_teardown(fn, test_setup, test_teardown, fx)

int main(void)
{
    const struct CMUnitTest plain[] = {
        cmocka_unit_test_teardown(cgroup_root_open__rejects_bad_input, own_teardown),
        cmocka_unit_test_teardown(cgroup_root_open__forced_v1, own_teardown),
        cmocka_unit_test_teardown(cgroup_root_open__below_configured_parent, own_teardown),
        cmocka_unit_test_teardown(cgroup_root_open__io_only_when_asked, own_teardown),
        cmocka_unit_test_teardown(cgroup_root_open__v2_io, own_teardown),
        cmocka_unit_test(cgroup_block_disk__finds_the_disk_or_says_none),
        cmocka_unit_test_teardown(cgroup_root_free__removes_empty_subtree_keeps_busy_one,
                                  own_teardown),
    };
    const struct CMUnitTest with_auto[] = {
        T(cgroup_root_open__creates_subtree_in_every_hierarchy, &fx_auto),
        T(cgroup_create__applies_limits, &fx_auto),
        T(cgroup_create__existing_name_returns_eexist, &fx_auto),
        T(cgroup_create__rejects_bad_names, &fx_auto),
        T(cgroup_attach__moves_child_and_reports_usage, &fx_auto),
        T(cgroup_procs_fds__let_another_writer_attach, &fx_auto),
        T(cgroup_kill_all__kills_forked_descendants, &fx_auto),
        T(cgroup_usage__memory_limit_ooms, &fx_auto),
        T(cgroup_usage__pids_limit_counts_refused_forks, &fx_auto),
        T(cgroup_root_list__finds_children_for_the_reaper, &fx_auto),
    };
    const struct CMUnitTest with_v2[] = {
        T(cgroup_root_open__v2_reports_limits_honestly, &fx_v2),
        T(cgroup_fd__v2_clone_into_cgroup, &fx_v2),
        T(cgroup_attach__moves_child_and_reports_usage, &fx_v2),
        T(cgroup_procs_fds__let_another_writer_attach, &fx_v2),
        T(cgroup_kill_all__kills_forked_descendants, &fx_v2),
        T(cgroup_kill_all__v2_procs_loop_without_cgroup_kill, &fx_v2),
        T(cgroup_create__existing_name_returns_eexist, &fx_v2),
        T(cgroup_root_list__finds_children_for_the_reaper, &fx_v2),
    };
    int failed = 0;
    failed += cmocka_run_group_tests_name("cgroup", plain, NULL, NULL);
    failed +=
        cmocka_run_group_tests_name("cgroup_auto", with_auto, group_setup_auto, group_teardown);
    failed += cmocka_run_group_tests_name("cgroup_v2", with_v2, group_setup_v2, group_teardown);
    int left = leftover_test_dirs();
    if (left > 0) {
        print_message("%d sbx-test cgroup directories left behind\n", left);
        failed++;
    }
    return failed == 0 ? 0 : 1;
}
