/* SPDX-License-Identifier: MIT */
/* spawnbench: the floor sbx is compared with. Runs a command N times, at most C at once,
 * with posix_spawn and stdio on /dev/null, and measures each run from spawn to reap (through
 * a pidfd, never waitpid(-1)). Prints one JSON line. Standalone: libc only, so that it
 * measures process creation and nothing of ours. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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

/* Starts one run in a free entry. Returns 0, or -errno when posix_spawn failed. */
static int spawnbench_start(struct bench *b, struct run *r, const posix_spawn_file_actions_t *fa)
{
    pid_t pid = 0;
    uint64_t t0 = spawnbench_now_ns();
    int err = posix_spawnp(&pid, b->argv[0], fa, NULL, b->argv, environ);

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

static void spawnbench_usage(FILE *f)
{
    (void)fputs("usage: spawnbench --tasks N [--concurrency C] [--stderr] [--stdin-bytes N]\n"
                "                  -- COMMAND [ARG...]\n"
                "Runs COMMAND N times, at most C at once (default 1), stdio on /dev/null\n"
                "(--stderr keeps stderr; --stdin-bytes gives each run its own read of an\n"
                "N-byte in-memory file as stdin), and prints one JSON line: tasks, seconds, rate,\n"
                "p50_ms, p90_ms, p99_ms, max_ms, failures, concurrency.\n",
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
        } else if (a[0] == '-') {
            (void)fprintf(stderr, "spawnbench: unknown option or missing value: '%s'\n", a);
            spawnbench_usage(stderr);
            return EX_USAGE;
        } else {
            break;
        }
    }
    if (b->tasks == 0 || i >= argc) {
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
            int r = spawnbench_start(&b, &b.runs[i], &fa);
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
                return EX_OSERR;
            }
            spawnbench_reaped(&b, &b.runs[i], &si);
        }
    }
    uint64_t elapsed = spawnbench_now_ns() - t0;
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
