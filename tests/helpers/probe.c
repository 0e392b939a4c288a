/* SPDX-License-Identifier: MIT */
/* probe: a static test program run inside sandboxes. Each subcommand prints one clear
 * result line (env, cat and memhog progress excepted) and exits 0 when the probed thing
 * worked, 1 when it failed as reported, 2 on bad usage. Never used by sbxd itself. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static const char *ename(int err)
{
    const char *n = strerrorname_np(err);
    return n ? n : "E?";
}

static int usage(void)
{
    fprintf(stderr, "usage: probe true|ids|forkbomb|memhog MB|spew BYTES [stdout|stderr|both]|"
                    "daemonize SECONDS|sleep SECONDS|int80|net|ls PATH|write PATH|exec PATH|"
                    "env|cat|hostname\n");
    return 2;
}

static long arg_num(const char *s)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0) {
        return -1;
    }
    return v;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int cmd_ids(void)
{
    static const char *const keys[] = {"CapInh", "CapPrm",     "CapEff", "CapBnd",
                                       "CapAmb", "NoNewPrivs", "Seccomp"};
    gid_t groups[64];
    int ng = getgroups(64, groups);
    printf("uid=%u gid=%u euid=%u groups=", (unsigned)getuid(), (unsigned)getgid(),
           (unsigned)geteuid());
    for (int i = 0; i < ng; i++) {
        printf("%s%u", i ? "," : "", (unsigned)groups[i]);
    }
    if (ng <= 0) {
        printf("none");
    }
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            size_t n = strlen(keys[i]);
            if (strncmp(line, keys[i], n) == 0 && line[n] == ':') {
                char *v = line + n + 1;
                v += strspn(v, " \t");
                v[strcspn(v, "\n")] = '\0';
                printf(" %s=%s", keys[i], v);
            }
        }
    }
    if (f) {
        fclose(f);
    }
    printf("\n");
    return 0;
}

static int cmd_forkbomb(void)
{
    long count = 0;
    int err = 0;
    for (; count < 100000; count++) {
        pid_t pid = fork();
        if (pid < 0) {
            err = errno;
            break;
        }
        if (pid == 0) {
            nap_ms(3000);
            _exit(0);
        }
    }
    printf("forkbomb: forked %ld, then %s\n", count, err ? ename(err) : "no failure");
    fflush(stdout);
    nap_ms(1000);
    return err ? 0 : 1;
}

static int cmd_memhog(const char *arg)
{
    long mb = arg_num(arg);
    if (mb < 0) {
        return usage();
    }
    for (long i = 1; i <= mb; i++) {
        char *p = malloc(1 << 20);
        if (!p) {
            printf("memhog: malloc failed at %ld MiB\n", i);
            return 1;
        }
        memset(p, (int)i, 1 << 20);
        printf("memhog %ld\n", i);
        fflush(stdout);
    }
    printf("memhog: done %ld MiB\n", mb);
    return 0;
}

static int write_n(int fd, const char *buf, size_t chunk, long total)
{
    while (total > 0) {
        size_t n = total < (long)chunk ? (size_t)total : chunk;
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        total -= w;
    }
    return 0;
}

static int cmd_spew(int argc, char **argv)
{
    static char buf[65536];
    long total = argc > 2 ? arg_num(argv[2]) : -1;
    const char *where = argc > 3 ? argv[3] : "stdout";
    if (total < 0) {
        return usage();
    }
    memset(buf, 'x', sizeof(buf));
    int r = 0;
    if (strcmp(where, "stdout") == 0 || strcmp(where, "both") == 0) {
        r = write_n(1, buf, sizeof(buf), total);
    }
    if (r == 0 && (strcmp(where, "stderr") == 0 || strcmp(where, "both") == 0)) {
        r = write_n(2, buf, sizeof(buf), total);
    }
    if (r < 0) {
        dprintf(2, "spew: write failed: %s\n", ename(-r));
        return 1;
    }
    return 0;
}

static int cmd_daemonize(const char *arg)
{
    long secs = arg_num(arg);
    if (secs < 0) {
        return usage();
    }
    pid_t pid = fork();
    if (pid < 0) {
        printf("daemonize: fork: %s\n", ename(errno));
        return 1;
    }
    if (pid == 0) {
        (void)setsid();
        pid_t pid2 = fork();
        if (pid2 != 0) {
            _exit(pid2 < 0);
        }
        /* Let go of the task's stdio like a real daemon, so only the pid namespace ends us. */
        int null = open("/dev/null", O_RDWR);
        for (int fd = 0; fd < 3; fd++) {
            (void)dup2(null, fd);
        }
        for (long i = 0; i < secs; i++) {
            int fd = open("/tmp/daemon-alive", O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                dprintf(fd, "%ld %ld\n", (long)getpid(), i);
                close(fd);
            }
            nap_ms(1000);
        }
        _exit(0);
    }
    int st = 0;
    (void)waitpid(pid, &st, 0);
    printf("daemonize: started for %ld s\n", secs);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static int cmd_int80(void)
{
#if defined(__x86_64__)
    long ret;
    /* i386 getpid is 20 in the 32-bit table. */
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "r8", "r9", "r10", "r11", "memory");
    if (ret < 0) {
        printf("int80: getpid failed: %s\n", ename((int)-ret));
        return 1;
    }
    printf("int80: getpid=%ld (pid %ld)\n", ret, (long)getpid());
    return ret == getpid() ? 0 : 1;
#else
    printf("int80: not x86_64\n");
    return 1;
#endif
}

/* Non-blocking connect, waiting up to 1 s for the verdict. Returns 0 or an errno. */
static int try_connect(const char *ip, int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    int err = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {fd, POLLOUT, 0};
            if (poll(&p, 1, 1000) == 1) {
                socklen_t len = sizeof(err);
                (void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            } else {
                err = ETIMEDOUT;
            }
        }
    }
    close(fd);
    return err;
}

static int cmd_net(void)
{
    int lo = try_connect("127.0.0.1", 1);
    int ext = try_connect("1.1.1.1", 53);
    char names[256] = "";
    int only_lo = 1, n = 0;
    /* The interfaces of our network namespace from /proc/net/dev, not if_nameindex(3):
     * that asks netlink, which the default seccomp profile refuses. */
    FILE *f = fopen("/proc/net/dev", "re");
    char line[512];
    for (int ln = 0; f && fgets(line, sizeof(line), f); ln++) {
        char *colon = strchr(line, ':');
        if (ln < 2 || !colon) {
            continue; /* the two header lines */
        }
        *colon = '\0';
        const char *name = line + strspn(line, " ");
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", names[0] ? "," : "",
                 name);
        only_lo &= strcmp(name, "lo") == 0;
        n++;
    }
    if (f) {
        fclose(f);
    }
    only_lo &= n > 0;
    printf("net: lo_connect=%s ext_connect=%s ifaces=%s\n", lo ? ename(lo) : "ok",
           ext ? ename(ext) : "ok", names);
    return ext == ENETUNREACH && lo == ECONNREFUSED && only_lo ? 0 : 1;
}

static int cmd_ls(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        printf("ls %s: %s\n", path, ename(errno));
        return 1;
    }
    printf("ls %s:", path);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            printf(" %s", de->d_name);
        }
    }
    printf("\n");
    closedir(d);
    return 0;
}

/* Copies our own executable to path (mode 0755), then tries to run it: proves both
 * "writable" and "executable" for the filesystem under path. */
static int cmd_write(const char *path)
{
    int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0) {
        printf("write %s: %s\n", path, ename(errno));
        return 1;
    }
    int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n;
    int err = in < 0 ? errno : 0;
    while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            err = errno;
            break;
        }
    }
    if (in >= 0) {
        close(in);
    }
    if (close(out) < 0 && !err) {
        err = errno;
    }
    if (err) {
        printf("write %s: %s\n", path, ename(err));
        return 1;
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {(char *)path, "true", NULL};
        int null = open("/dev/null", O_WRONLY);
        (void)dup2(null, 1);
        execv(path, args);
        int e = errno;
        (void)!write(pipefd[1], &e, sizeof(e));
        _exit(127);
    }
    close(pipefd[1]);
    int e = 0;
    if (read(pipefd[0], &e, sizeof(e)) != sizeof(e)) {
        e = 0;
    }
    close(pipefd[0]);
    int st = 0;
    (void)waitpid(pid, &st, 0);
    printf("write %s: ok exec=%s\n", path, e ? ename(e) : "ok");
    return 0;
}

static int cmd_exec(const char *path)
{
    char *args[] = {(char *)path, "true", NULL};
    execv(path, args);
    printf("exec %s: %s\n", path, ename(errno));
    return 1;
}

static int cmd_cat(void)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(0, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0;
        }
        if (write_n(1, buf, sizeof(buf), n) < 0) {
            return 1;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    const char *c = argv[1];
    const char *a = argc > 2 ? argv[2] : NULL;
    if (strcmp(c, "true") == 0) {
        printf("ok\n");
        return 0;
    }
    if (strcmp(c, "ids") == 0) {
        return cmd_ids();
    }
    if (strcmp(c, "forkbomb") == 0) {
        return cmd_forkbomb();
    }
    if (strcmp(c, "memhog") == 0 && a) {
        return cmd_memhog(a);
    }
    if (strcmp(c, "spew") == 0) {
        return cmd_spew(argc, argv);
    }
    if (strcmp(c, "daemonize") == 0 && a) {
        return cmd_daemonize(a);
    }
    if (strcmp(c, "sleep") == 0 && a && arg_num(a) >= 0) {
        nap_ms(arg_num(a) * 1000);
        printf("slept %s\n", a);
        return 0;
    }
    if (strcmp(c, "int80") == 0) {
        return cmd_int80();
    }
    if (strcmp(c, "net") == 0) {
        return cmd_net();
    }
    if (strcmp(c, "ls") == 0 && a) {
        return cmd_ls(a);
    }
    if (strcmp(c, "write") == 0 && a) {
        return cmd_write(a);
    }
    if (strcmp(c, "exec") == 0 && a) {
        return cmd_exec(a);
    }
    if (strcmp(c, "env") == 0) {
        for (char **e = environ; *e; e++) {
            printf("%s\n", *e);
        }
        return 0;
    }
    if (strcmp(c, "cat") == 0) {
        return cmd_cat();
    }
    if (strcmp(c, "hostname") == 0) {
        struct utsname u;
        uname(&u);
        printf("hostname: %s\n", u.nodename);
        return 0;
    }
    return usage();
}
