/* SPDX-License-Identifier: MIT */
/* sbx-load's flags: parsing, defaults and the checks that need no daemon. Every value is
 * bounded here, so the run never sees a nonsensical combination. */
#include "load_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sysexits.h>

#include "lib/util.h"
#include "wire/version.h"

void load_opts_usage(FILE *f)
{
    (void)fputs(
        "usage: sbx-load [OPTIONS] (--tasks N | --duration S) [-- COMMAND [ARG...]]\n"
        "Runs COMMAND (default /bin/true) through sbxd's exec and reports throughput and\n"
        "latency.\n"
        "  --socket PATH       sbxd's agents' socket (env SBX_SOCKET, default " LOAD_DEFAULT_SOCKET
        ")\n"
        "  --connections N     connections to open (default: one per 64 tasks in flight)\n"
        "  --concurrency C     tasks in flight at most (default 8)\n"
        "  --tasks N           measured tasks to run\n"
        "  --duration S        run for S seconds (also 500ms, 2m) instead of --tasks\n"
        "  --rate R            open loop: start R tasks per second on a fixed schedule;\n"
        "                      latency counts from each task's intended start. With\n"
        "                      --duration, the schedule holds R * S tasks.\n"
        "  --pool NAME         pool to run in (default: sbxd's default pool)\n"
        "  --scenario FILE     weighted task mix from a YAML file (loadtest/scenarios/);\n"
        "                      results that differ from an entry's expect: count as\n"
        "                      errors \"mismatch\"\n"
        "  --timeout S         task timeout (default: the pool's)\n"
        "  --stdin-bytes N     stream N bytes of stdin to each task, then EOF\n"
        "  --sessions          run each slot's tasks in a session of its own (opened\n"
        "                      before the run, closed after it)\n"
        "  --session-open      each task is a session.open (measured) and its close\n"
        "  --warmup N          run N tasks first, unmeasured\n"
        "  --pid PID           sbxd's pid: report its RSS and CPU time before and after\n"
        "  --json              print the report as one JSON object\n"
        "  --version           print sbx-load's version and exit\n"
        "exit status: 0 when every task exited with status 0 (with --scenario: got its\n"
        "expected result), 1 when some did not or an error happened, 64 usage, 69 sbxd\n"
        "unreachable\n",
        f);
}

static int load_opts_bad(const char *name, const char *v)
{
    load_errorf("%s: invalid value '%s'", name, v);
    load_opts_usage(stderr);
    return EX_USAGE;
}

static int load_opts_u32(const char *name, const char *v, uint32_t min, uint32_t max, uint32_t *ret)
{
    uint64_t x = 0;
    if (parse_u64(v, &x) < 0 || x < min || x > max) {
        return load_opts_bad(name, v);
    }
    *ret = (uint32_t)x;
    return 0;
}

static char *load_opts_default_argv[] = {"/bin/true", NULL};

int load_opts_parse(int argc, char **argv, struct load_opts *o)
{
    const char *v = NULL;
    int r;
    int i;

    *o = (struct load_opts){
        .socket_path = getenv("SBX_SOCKET") ? getenv("SBX_SOCKET") : LOAD_DEFAULT_SOCKET,
        .concurrency = LOAD_DEFAULT_CONCURRENCY,
        .stdin_bytes = -1,
        .argv = load_opts_default_argv,
        .argc = 1,
    };
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            load_opts_usage(stdout);
            return LOAD_OPTS_HELP;
        }
        if (strcmp(a, "--version") == 0) {
            (void)printf("sbx-load %s\n", SBX_VERSION);
            return LOAD_OPTS_HELP;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--sessions") == 0) {
            o->sessions = true;
            continue;
        }
        if (strcmp(a, "--session-open") == 0) {
            o->session_open = true;
            continue;
        }
        if (a[0] != '-') {
            break;
        }
#define OPT(name) ((r = parse_long_opt(argc, argv, &i, (name), &v)) != 0)
        if (OPT("--socket")) {
            o->socket_path = v;
        } else if (OPT("--connections")) {
            if (r > 0 && load_opts_u32("--connections", v, 1, 4096, &o->connections)) {
                return EX_USAGE;
            }
        } else if (OPT("--concurrency")) {
            if (r > 0 && load_opts_u32("--concurrency", v, 1, 1u << 20, &o->concurrency)) {
                return EX_USAGE;
            }
        } else if (OPT("--tasks")) {
            if (r > 0 && (parse_u64(v, &o->tasks) < 0 || o->tasks == 0)) {
                return load_opts_bad("--tasks", v);
            }
        } else if (OPT("--warmup")) {
            if (r > 0 && parse_u64(v, &o->warmup) < 0) {
                return load_opts_bad("--warmup", v);
            }
        } else if (OPT("--duration")) {
            if (r > 0 && (parse_duration_ns(v, &o->duration_ns) < 0 || o->duration_ns == 0)) {
                return load_opts_bad("--duration", v);
            }
        } else if (OPT("--rate")) {
            char *end = NULL;
            if (r > 0) {
                errno = 0;
                o->rate = strtod(v, &end);
                if (errno || end == v || *end || !(o->rate > 0) || o->rate > 1e7) {
                    return load_opts_bad("--rate", v);
                }
            }
        } else if (OPT("--scenario")) {
            o->scenario = v;
        } else if (OPT("--pool")) {
            o->pool = v;
        } else if (OPT("--timeout")) {
            uint64_t ns = 0;
            if (r > 0 && (parse_duration_ns(v, &ns) < 0 || ns == 0)) {
                return load_opts_bad("--timeout", v);
            }
            o->timeout_s = (double)ns / 1e9;
        } else if (OPT("--stdin-bytes")) {
            uint64_t n = 0;
            if (r > 0 && (parse_size(v, &n) < 0 || n > (UINT64_C(1) << 40))) {
                return load_opts_bad("--stdin-bytes", v);
            }
            o->stdin_bytes = (int64_t)n;
        } else if (OPT("--pid")) {
            uint64_t pid = 0;
            if (r > 0 && (parse_u64(v, &pid) < 0 || pid == 0 || pid > INT32_MAX)) {
                return load_opts_bad("--pid", v);
            }
            o->pid = (long)pid;
        } else {
            load_errorf("unknown option '%s'", a);
            load_opts_usage(stderr);
            return EX_USAGE;
        }
#undef OPT
        if (r < 0) {
            load_errorf("%s needs a value", a);
            load_opts_usage(stderr);
            return EX_USAGE;
        }
    }
    if (i < argc) {
        o->argv = argv + i;
        o->argc = (size_t)(argc - i);
    }
    if (o->scenario && (i < argc || o->pool || o->stdin_bytes >= 0 || o->timeout_s > 0)) {
        load_errorf("--scenario gives the commands, pools, stdin and timeouts: "
                    "no COMMAND, --pool, --stdin-bytes or --timeout with it");
        return EX_USAGE;
    }
    if (o->sessions && (o->session_open || o->scenario || o->stdin_bytes >= 0 || o->rate > 0)) {
        load_errorf("--sessions runs closed loop without --session-open, --scenario, "
                    "--stdin-bytes or --rate");
        return EX_USAGE;
    }
    if (o->session_open && (o->scenario || o->stdin_bytes >= 0)) {
        load_errorf("--session-open runs no command: no --scenario or --stdin-bytes with it");
        return EX_USAGE;
    }
    if ((o->tasks > 0) == (o->duration_ns > 0)) {
        load_errorf("give exactly one of --tasks and --duration");
        load_opts_usage(stderr);
        return EX_USAGE;
    }
    if (o->argv[0][0] == '\0') {
        load_errorf("the command must not be empty");
        return EX_USAGE;
    }
    if (strlen(o->socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        load_errorf("socket path too long (at most %zu bytes): %s",
                    sizeof(((struct sockaddr_un *)0)->sun_path) - 1, o->socket_path);
        return EX_USAGE;
    }
    if (o->connections == 0) {
        o->connections = (o->concurrency + LOAD_PER_CONN_DEFAULT - 1) / LOAD_PER_CONN_DEFAULT;
    }
    if (o->connections > o->concurrency) {
        o->connections = o->concurrency;
    }
    return 0;
}
