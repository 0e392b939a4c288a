/* SPDX-License-Identifier: MIT */
/* spawnbench: the floor sbx is compared with. Runs a command N times, at most C at once,
 * with posix_spawn and stdio on /dev/null, and measures each run from spawn to reap (through
 * a pidfd, never waitpid(-1)). Prints one JSON line. Standalone: libc only, so that it
 * measures process creation and nothing of ours.
 *
 * For a sandbox assembled from parts (bwrap with limits), --cgroup gives each concurrency
 * slot a cgroup of its own under each DIR, made once with the --cgroup-set limits and reused
 * by the slot's runs, the cheapest way to put every run under limits; --open gives each run
 * a file on a numbered fd (bwrap's --seccomp FD). Runs then start by a clone(CLONE_VM |
 * CLONE_VFORK) of our own, as posix_spawn does, whose child joins the slot's cgroups and
 * opens the files before execve. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SPAWNBENCH_MAX_CGROUPS 8
#define SPAWNBENCH_MAX_SETS 16
#define SPAWNBENCH_MAX_OPENS 8
#define SPAWNBENCH_STACK (64 * 1024)

struct cg_set {
    const char *file;
    const char *value;
    bool optional; /* FILE?=VALUE: no error when no slot's cgroup has FILE */
    uint32_t applied;
};

struct open_fd {
    int fd;
    const char *path;
};

struct run {
    pid_t pid;
    int pidfd;
    uint64_t t0_ns;
};

struct bench {
    uint64_t tasks;
    uint32_t concurrency;
    bool inherit_stderr;
    int64_t stdin_bytes; /* -1: stdin on /dev/null */
    char **argv;
    const char *cg_parents[SPAWNBENCH_MAX_CGROUPS];
    uint32_t n_cg;
    const char *cg_name; /* the slots' cgroups are <name>-<slot>; NULL: spawnbench-<pid> */
    struct cg_set sets[SPAWNBENCH_MAX_SETS];
    uint32_t n_sets;
    struct open_fd opens[SPAWNBENCH_MAX_OPENS];
    uint32_t n_opens;

    /* The clone path (--cgroup or --open): */
    char *exe;        /* argv[0] resolved along PATH once */
    char **slot_dirs; /* concurrency * n_cg, slot-major; NULL when not made */
    int *slot_procs;  /* their cgroup.procs, O_WRONLY */
    char *stack;      /* the clone's stack: one child at a time uses it */
    int devnull;
    const char *stdin_path; /* NULL: stdin on devnull */

    struct run *runs; /* concurrency entries; pid 0 when free */
    struct pollfd *pfds;
    uint64_t *lat_ns; /* one per finished run */
    uint64_t n_lat;
    uint64_t started, failures;
    bool told_failure;
};

static uint64_t spawnbench_now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *spawnbench_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        (void)fputs("spawnbench: out of memory\n", stderr);
        abort();
    }
    return p;
}

static int spawnbench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Exact percentile of sorted values: the ceil(p% * n)-th smallest. */
static double spawnbench_pct_ms(const uint64_t *v, uint64_t n, double p)
{
    if (n == 0) {
        return 0.0;
    }
    uint64_t rank = (uint64_t)(p * (double)n / 100.0 * (1.0 - 1e-12));
    if ((double)rank < p * (double)n / 100.0 * (1.0 - 1e-12)) {
        rank++;
    }
    if (rank < 1) {
        rank = 1;
    }
    if (rank > n) {
        rank = n;
    }
    return (double)v[rank - 1] / 1e6;
}

static void spawnbench_note_failure(struct bench *b, const siginfo_t *si)
{
    b->failures++;
    if (b->told_failure) {
        return;
    }
    b->told_failure = true;
    if (si->si_code == CLD_EXITED) {
        (void)fprintf(stderr, "spawnbench: first failure: '%s' exited with %d\n", b->argv[0],
                      si->si_status);
    } else {
        (void)fprintf(stderr, "spawnbench: first failure: '%s' killed by signal %d\n", b->argv[0],
                      si->si_status);
    }
}

static void spawnbench_reaped(struct bench *b, struct run *r, const siginfo_t *si)
{
    b->lat_ns[b->n_lat++] = spawnbench_now_ns() - r->t0_ns;
    if (si->si_code != CLD_EXITED || si->si_status != 0) {
        spawnbench_note_failure(b, si);
    }
    if (r->pidfd >= 0) {
        (void)close(r->pidfd);
    }
    r->pid = 0;
    r->pidfd = -1;
}

struct child_arg {
    const struct bench *b;
    uint32_t slot;
};

/* The clone path's child, sharing our memory until execve (CLONE_VFORK): system calls only.
 * Exits 126 when it cannot join a cgroup or open a file, 127 when execve fails. */
static int spawnbench_child(void *arg)
{
    const struct child_arg *a = arg;
    const struct bench *b = a->b;
    for (uint32_t k = 0; k < b->n_cg; k++) {
        if (write(b->slot_procs[a->slot * b->n_cg + k], "0", 1) != 1) {
            _exit(126);
        }
    }
    int in = b->devnull;
    if (b->stdin_path && (in = open(b->stdin_path, O_RDONLY)) < 0) {
        _exit(126);
    }
    if (dup2(in, 0) < 0 || dup2(b->devnull, 1) < 0 ||
        (!b->inherit_stderr && dup2(b->devnull, 2) < 0) || (in != b->devnull && close(in) < 0)) {
        _exit(126);
    }
    for (uint32_t k = 0; k < b->n_opens; k++) {
        int fd = open(b->opens[k].path, O_RDONLY);
        if (fd < 0 || (fd != b->opens[k].fd && (dup2(fd, b->opens[k].fd) < 0 || close(fd) < 0))) {
            _exit(126);
        }
    }
    (void)execve(b->exe, b->argv, environ);
    _exit(127);
}

/* Starts one run in a free entry (slot). Returns 0, or -errno when the spawn failed. */
static int spawnbench_start(struct bench *b, struct run *r, uint32_t slot,
                            const posix_spawn_file_actions_t *fa)
{
    pid_t pid = 0;
    uint64_t t0 = spawnbench_now_ns();
    int err = 0;

    if (b->exe) {
        struct child_arg a = {b, slot};
        /* CLONE_VFORK: we go on once the child has called execve or exited, so the one stack
         * serves every run. */
        pid = clone(spawnbench_child, b->stack + SPAWNBENCH_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
                    &a);
        err = pid < 0 ? errno : 0;
    } else {
        err = posix_spawnp(&pid, b->argv[0], fa, NULL, b->argv, environ);
    }
    b->started++;
    if (err != 0) {
        return -err;
    }
    r->pid = pid;
    r->t0_ns = t0;
    /* A pidfd of a child that already exited still works: it stays a zombie until we reap
     * it, and nothing else reaps it. */
    r->pidfd = pidfd_open(pid, 0);
    if (r->pidfd < 0) {
        /* COMPAT(linux < 5.3): no pidfd_open; wait for this run alone. */
        siginfo_t si = {0};
        int w;
        do {
            w = waitid(P_PID, (id_t)pid, &si, WEXITED);
        } while (w < 0 && errno == EINTR);
        spawnbench_reaped(b, r, &si);
    }
    return 0;
}

/* Writes n bytes of 'x' to fd. Returns 0 or -1 with errno set. */
static int spawnbench_fill(int fd, uint64_t n)
{
    char buf[65536];
    memset(buf, 'x', sizeof(buf));
    while (n > 0) {
        size_t k = n > sizeof(buf) ? sizeof(buf) : (size_t)n;
        ssize_t w = write(fd, buf, k);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        n -= (uint64_t)w;
    }
    return 0;
}

/* cmd along PATH, as posix_spawnp finds it (a name with a slash as it is); NULL when
 * nothing executable is found. */
static char *spawnbench_which(const char *cmd)
{
    if (strchr(cmd, '/')) {
        return access(cmd, X_OK) == 0 ? strdup(cmd) : NULL;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    while (*path) {
        size_t len = strcspn(path, ":");
        char *full = NULL;
        if (asprintf(&full, "%.*s/%s", (int)(len ? len : 1), len ? path : ".", cmd) < 0) {
            return NULL;
        }
        if (access(full, X_OK) == 0) {
            return full;
        }
        free(full);
        path += len + (path[len] == ':');
    }
    return NULL;
}

/* Writes value to the existing file dir/name. Returns 0, 1 when there is no such file, or
 * -errno. */
static int spawnbench_write_at(const char *dir, const char *name, const char *value)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
        return -ENAMETOOLONG;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT ? 1 : -errno;
    }
    size_t len = strlen(value);
    ssize_t w = write(fd, value, len);
    int r = w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
    (void)close(fd);
    return r;
}

/* Makes each slot's cgroup under every --cgroup DIR, with the --cgroup-set values, and opens
 * its cgroup.procs. Returns 0, or EX_OSERR / EX_USAGE after saying why. */
static int spawnbench_cgroups_make(struct bench *b)
{
    size_t n = (size_t)b->concurrency * b->n_cg;
    b->slot_dirs = spawnbench_calloc(n, sizeof(*b->slot_dirs));
    b->slot_procs = spawnbench_calloc(n, sizeof(*b->slot_procs));
    for (size_t i = 0; i < n; i++) {
        b->slot_procs[i] = -1;
    }
    for (size_t i = 0; i < n; i++) {
        char *dir = NULL;
        int len = b->cg_name ? asprintf(&dir, "%s/%s-%zu", b->cg_parents[i % b->n_cg], b->cg_name,
                                        i / b->n_cg)
                             : asprintf(&dir, "%s/spawnbench-%d-%zu", b->cg_parents[i % b->n_cg],
                                        (int)getpid(), i / b->n_cg);
        if (len < 0) {
            return EX_OSERR;
        }
        if (mkdir(dir, 0755) < 0) {
            (void)fprintf(stderr, "spawnbench: mkdir %s: %s\n", dir, strerror(errno));
            free(dir);
            return EX_OSERR;
        }
        b->slot_dirs[i] = dir;
        /* In the order given: memory.memsw.limit_in_bytes may not go below limit_in_bytes. */
        for (uint32_t k = 0; k < b->n_sets; k++) {
            int r = spawnbench_write_at(dir, b->sets[k].file, b->sets[k].value);
            if (r < 0) {
                (void)fprintf(stderr, "spawnbench: %s/%s = %s: %s\n", dir, b->sets[k].file,
                              b->sets[k].value, strerror(-r));
                return EX_OSERR;
            }
            b->sets[k].applied += r == 0;
        }
        char procs[4096];
        (void)snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        b->slot_procs[i] = open(procs, O_WRONLY | O_CLOEXEC);
        if (b->slot_procs[i] < 0) {
            (void)fprintf(stderr, "spawnbench: %s: %s\n", procs, strerror(errno));
            return EX_OSERR;
        }
    }
    for (uint32_t k = 0; k < b->n_sets; k++) {
        if (b->sets[k].applied == 0 && !b->sets[k].optional) {
            (void)fprintf(stderr, "spawnbench: no cgroup under any --cgroup has '%s'\n",
                          b->sets[k].file);
            return EX_USAGE;
        }
    }
    return 0;
}

/* Removes the slots' cgroups (after every run was reaped; a cgroup whose last process was
 * just reaped can stay busy for a moment). Returns 0, or EX_OSERR when one stays. */
static int spawnbench_cgroups_remove(struct bench *b)
{
    int status = 0;
    size_t n = (size_t)b->concurrency * b->n_cg;
    for (size_t i = 0; b->slot_dirs && i < n; i++) {
        if (b->slot_procs[i] >= 0) {
            (void)close(b->slot_procs[i]);
        }
        if (!b->slot_dirs[i]) {
            continue;
        }
        int tries = 0;
        while (rmdir(b->slot_dirs[i]) < 0) {
            if (errno != EBUSY || ++tries == 400) {
                (void)fprintf(stderr, "spawnbench: rmdir %s: %s\n", b->slot_dirs[i],
                              strerror(errno));
                status = EX_OSERR;
                break;
            }
            (void)usleep(5000);
        }
        free(b->slot_dirs[i]);
    }
    free(b->slot_dirs);
    free(b->slot_procs);
    b->slot_dirs = NULL;
    b->slot_procs = NULL;
    return status;
}

/* The clone path's parts: the command's path, the clone's stack, the slots' cgroups.
 * Returns 0, or EX_* after saying why (what was made stays for the caller to free). */
static int spawnbench_prepare_clone(struct bench *b)
{
    b->exe = spawnbench_which(b->argv[0]);
    if (!b->exe) {
        (void)fprintf(stderr, "spawnbench: '%s': not found or not executable\n", b->argv[0]);
        return EX_USAGE;
    }
    b->stack = aligned_alloc(64, SPAWNBENCH_STACK);
    if (!b->stack) {
        (void)fputs("spawnbench: out of memory\n", stderr);
        return EX_OSERR;
    }
    return b->n_cg > 0 ? spawnbench_cgroups_make(b) : 0;
}

static void spawnbench_usage(FILE *f)
{
    (void)fputs("usage: spawnbench --tasks N [--concurrency C] [--stderr] [--stdin-bytes N]\n"
                "                  [--cgroup DIR]... [--cgroup-set FILE[?]=VALUE]...\n"
                "                  [--cgroup-name NAME]\n"
                "                  [--open FD:PATH]... -- COMMAND [ARG...]\n"
                "Runs COMMAND N times, at most C at once (default 1), stdio on /dev/null\n"
                "(--stderr keeps stderr; --stdin-bytes gives each run its own read of an\n"
                "N-byte in-memory file as stdin), and prints one JSON line: tasks, seconds, rate,\n"
                "p50_ms, p90_ms, p99_ms, max_ms, failures, concurrency.\n"
                "--cgroup: each of the C slots gets a cgroup under DIR (one DIR per hierarchy),\n"
                "made at start with every --cgroup-set FILE that it has written (FILE? where\n"
                "no cgroup need have it), removed at the end; each run joins its slot's.\n"
                "The slots' cgroups are NAME-<slot> (default spawnbench-<pid>-<slot>).\n"
                "--open: each run gets PATH opened read-only on fd FD.\n",
                f);
}

static int spawnbench_parse_u64(const char *s, uint64_t *ret)
{
    char *end = NULL;
    if (!s || *s < '0' || *s > '9') {
        return -EINVAL;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int spawnbench_args(int argc, char **argv, struct bench *b)
{
    uint64_t v = 0;
    int i;

    b->concurrency = 1;
    b->stdin_bytes = -1;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            spawnbench_usage(stdout);
            return -1;
        }
        if (strcmp(a, "--stderr") == 0) {
            b->inherit_stderr = true;
        } else if (strcmp(a, "--tasks") == 0 && i + 1 < argc) {
            if (spawnbench_parse_u64(argv[++i], &v) < 0 || v == 0 || v > (1u << 30)) {
                (void)fprintf(stderr, "spawnbench: bad --tasks '%s'\n", argv[i]);
                return EX_USAGE;
            }
            b->tasks = v;
        } else if (strcmp(a, "--stdin-bytes") == 0 && i + 1 < argc) {
            if (spawnbench_parse_u64(argv[++i], &v) < 0 || v > (UINT64_C(1) << 30)) {
                (void)fprintf(stderr, "spawnbench: bad --stdin-bytes '%s'\n", argv[i]);
                return EX_USAGE;
            }
            b->stdin_bytes = (int64_t)v;
        } else if (strcmp(a, "--concurrency") == 0 && i + 1 < argc) {
            if (spawnbench_parse_u64(argv[++i], &v) < 0 || v == 0 || v > 4096) {
                (void)fprintf(stderr, "spawnbench: bad --concurrency '%s'\n", argv[i]);
                return EX_USAGE;
            }
            b->concurrency = (uint32_t)v;
        } else if (strcmp(a, "--cgroup") == 0 && i + 1 < argc) {
            if (b->n_cg == SPAWNBENCH_MAX_CGROUPS || argv[i + 1][0] != '/') {
                (void)fprintf(stderr, "spawnbench: bad --cgroup '%s' (absolute, at most %d)\n",
                              argv[i + 1], SPAWNBENCH_MAX_CGROUPS);
                return EX_USAGE;
            }
            b->cg_parents[b->n_cg++] = argv[++i];
        } else if (strcmp(a, "--cgroup-name") == 0 && i + 1 < argc) {
            b->cg_name = argv[++i];
            if (!*b->cg_name || strchr(b->cg_name, '/') || b->cg_name[0] == '.') {
                (void)fprintf(stderr, "spawnbench: bad --cgroup-name '%s'\n", b->cg_name);
                return EX_USAGE;
            }
        } else if (strcmp(a, "--cgroup-set") == 0 && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            if (b->n_sets == SPAWNBENCH_MAX_SETS || !eq || eq == argv[i] || strchr(argv[i], '/')) {
                (void)fprintf(stderr, "spawnbench: bad --cgroup-set '%s'\n", argv[i]);
                return EX_USAGE;
            }
            struct cg_set *cs = &b->sets[b->n_sets++];
            *eq = '\0';
            cs->value = eq + 1;
            cs->optional = eq[-1] == '?';
            if (cs->optional) {
                eq[-1] = '\0';
            }
            cs->file = argv[i];
        } else if (strcmp(a, "--open") == 0 && i + 1 < argc) {
            char *colon = strchr(argv[++i], ':');
            uint64_t fd = 0;
            if (b->n_opens == SPAWNBENCH_MAX_OPENS || !colon) {
                (void)fprintf(stderr, "spawnbench: bad --open '%s'\n", argv[i]);
                return EX_USAGE;
            }
            *colon = '\0';
            if (spawnbench_parse_u64(argv[i], &fd) < 0 || fd < 3 || fd > 255 || !colon[1]) {
                (void)fprintf(stderr, "spawnbench: bad --open '%s:%s' (FD 3-255:PATH)\n", argv[i],
                              colon + 1);
                return EX_USAGE;
            }
            b->opens[b->n_opens++] = (struct open_fd){(int)fd, colon + 1};
        } else if (a[0] == '-') {
            (void)fprintf(stderr, "spawnbench: unknown option or missing value: '%s'\n", a);
            spawnbench_usage(stderr);
            return EX_USAGE;
        } else {
            break;
        }
    }
    if (b->tasks == 0 || i >= argc || (b->n_sets > 0 && b->n_cg == 0)) {
        spawnbench_usage(stderr);
        return EX_USAGE;
    }
    b->argv = argv + i;
    return 0;
}

int main(int argc, char **argv)
{
    struct bench b = {0};
    posix_spawn_file_actions_t fa;
    int status = spawnbench_args(argc, argv, &b);
    int devnull;
    int memfd = -1;
    char memfd_path[64];

    if (status != 0) {
        return status < 0 ? 0 : status;
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        (void)fprintf(stderr, "spawnbench: /dev/null: %s\n", strerror(errno));
        return EX_OSERR;
    }
    /* dup2 onto 0, 1 and 2 clears CLOEXEC on the copies only. */
    (void)posix_spawn_file_actions_init(&fa);
    if (b.stdin_bytes >= 0) {
        /* Each child opens the file anew through /proc/self/fd (its own offset 0). */
        memfd = memfd_create("spawnbench-stdin", MFD_CLOEXEC);
        if (memfd < 0 || spawnbench_fill(memfd, (uint64_t)b.stdin_bytes) < 0) {
            (void)fprintf(stderr, "spawnbench: stdin file: %s\n", strerror(errno));
            return EX_OSERR;
        }
        (void)snprintf(memfd_path, sizeof(memfd_path), "/proc/self/fd/%d", memfd);
        (void)posix_spawn_file_actions_addopen(&fa, 0, memfd_path, O_RDONLY, 0);
    } else {
        (void)posix_spawn_file_actions_adddup2(&fa, devnull, 0);
    }
    (void)posix_spawn_file_actions_adddup2(&fa, devnull, 1);
    if (!b.inherit_stderr) {
        (void)posix_spawn_file_actions_adddup2(&fa, devnull, 2);
    }
    (void)signal(SIGPIPE, SIG_IGN);

    b.devnull = devnull;
    if (b.n_cg > 0 || b.n_opens > 0) {
        b.stdin_path = b.stdin_bytes >= 0 ? memfd_path : NULL;
        status = spawnbench_prepare_clone(&b);
    }
    if (status != 0) {
        (void)spawnbench_cgroups_remove(&b);
        free(b.exe);
        free(b.stack);
        (void)posix_spawn_file_actions_destroy(&fa);
        (void)close(devnull);
        if (memfd >= 0) {
            (void)close(memfd);
        }
        return status;
    }

    b.runs = spawnbench_calloc(b.concurrency, sizeof(*b.runs));
    b.pfds = spawnbench_calloc(b.concurrency, sizeof(*b.pfds));
    b.lat_ns = spawnbench_calloc(b.tasks, sizeof(*b.lat_ns));
    for (uint32_t i = 0; i < b.concurrency; i++) {
        b.runs[i].pidfd = -1;
    }

    uint64_t t0 = spawnbench_now_ns();
    uint32_t running = 0;
    for (;;) {
        /* Fill every free entry while runs remain. */
        for (uint32_t i = 0; i < b.concurrency && b.started < b.tasks; i++) {
            if (b.runs[i].pid != 0) {
                continue;
            }
            int r = spawnbench_start(&b, &b.runs[i], i, &fa);
            if (r < 0) {
                (void)fprintf(stderr, "spawnbench: cannot spawn '%s': %s\n", b.argv[0],
                              strerror(-r));
                status = EX_OSERR;
                b.tasks = b.started; /* stop starting; reap what runs */
                break;
            }
        }
        running = 0;
        for (uint32_t i = 0; i < b.concurrency; i++) {
            b.pfds[i] =
                (struct pollfd){.fd = b.runs[i].pid ? b.runs[i].pidfd : -1, .events = POLLIN};
            running += b.runs[i].pid != 0;
        }
        if (running == 0) {
            break;
        }
        int n = poll(b.pfds, b.concurrency, -1);
        if (n < 0 && errno != EINTR) {
            (void)fprintf(stderr, "spawnbench: poll: %s\n", strerror(errno));
            (void)spawnbench_cgroups_remove(&b);
            return EX_OSERR;
        }
        for (uint32_t i = 0; i < b.concurrency && n > 0; i++) {
            if (b.pfds[i].fd < 0 || !(b.pfds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            siginfo_t si = {0};
            int w;
            do {
                w = waitid(P_PIDFD, (id_t)b.runs[i].pidfd, &si, WEXITED);
            } while (w < 0 && errno == EINTR);
            if (w < 0) {
                (void)fprintf(stderr, "spawnbench: waitid: %s\n", strerror(errno));
                (void)spawnbench_cgroups_remove(&b);
                return EX_OSERR;
            }
            spawnbench_reaped(&b, &b.runs[i], &si);
        }
    }
    uint64_t elapsed = spawnbench_now_ns() - t0;
    int rm = spawnbench_cgroups_remove(&b);
    if (status == 0) {
        status = rm;
    }
    free(b.exe);
    free(b.stack);
    (void)close(devnull);
    if (memfd >= 0) {
        (void)close(memfd);
    }
    (void)posix_spawn_file_actions_destroy(&fa);

    qsort(b.lat_ns, b.n_lat, sizeof(*b.lat_ns), spawnbench_cmp_u64);
    double secs = (double)elapsed / 1e9;
    (void)printf("{\"tasks\": %" PRIu64 ", \"seconds\": %.3f, \"rate\": %.1f, \"p50_ms\": %.3f, "
                 "\"p90_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"failures\": %" PRIu64
                 ", \"concurrency\": %u}\n",
                 b.n_lat, secs, secs > 0 ? (double)b.n_lat / secs : 0.0,
                 spawnbench_pct_ms(b.lat_ns, b.n_lat, 50), spawnbench_pct_ms(b.lat_ns, b.n_lat, 90),
                 spawnbench_pct_ms(b.lat_ns, b.n_lat, 99),
                 b.n_lat ? (double)b.lat_ns[b.n_lat - 1] / 1e6 : 0.0, b.failures, b.concurrency);
    free(b.runs);
    free(b.pfds);
    free(b.lat_ns);
    if (status == 0 && b.failures > 0) {
        status = 1;
    }
    return status;
}
