/* SPDX-License-Identifier: MIT */
/* sbx, the command-line client of sbxd: flags, one msgpack-rpc connection driven by a
 * blocking poll(2) loop, stdio streaming for exec and the mapping of results to exit
 * statuses. It trusts nothing it reads from sbxd: every buffer it keeps is bounded, and
 * daemon text is sanitized before it reaches a terminal.
 *
 * This file is main: the global flags, the command table and the usage. Each command runs in
 * sbx_<command>.c; the connection is sbx_conn.c and sbx_rpc.c (cli/cli_impl.h). */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>

#include "lib/util.h"

#define SBX_DEFAULT_SOCKET "./var/sbxd.sock"
#define SBX_DEFAULT_ADMIN_SOCKET "./var/sbxd-admin.sock"

/* Commands: adding one is an entry in sbx_cmds and its run function. */

static const struct sbx_cmd sbx_cmds[] = {
    {"ping", SBX_SOCKET_AGENT, "", "check that sbxd answers", NULL, sbx_ping_run},
    {"pools", SBX_SOCKET_AGENT, "", "show every pool and its counters", NULL, sbx_pools_run},
    {"exec", SBX_SOCKET_AGENT, "[OPTIONS] [--] COMMAND [ARG...]",
     "run COMMAND in a fresh sandbox, streaming its stdin, stdout and stderr",
     "  --pool NAME        the pool to take the sandbox from (default: the daemon's)\n"
     "  --timeout SECONDS  wall-clock limit (also 500ms, 2m, 1h)\n"
     "  --env K=V          set an environment variable (repeatable)\n"
     "  --cwd DIR          working directory inside the sandbox\n"
     "  --token TOKEN      capability token whose grants the task gets (env SBX_TOKEN,\n"
     "                     which keeps it out of the process list)\n"
     "  --json             print one JSON object with the result and output at the end\n"
     "exit status: the command's; 128+N if killed by signal N; 124 on timeout; 137 when\n"
     "killed for output or memory; 127 if it could not be executed; 64 usage (also a\n"
     "request sbxd refuses: an unknown pool, a timeout above its maximum); 69 sbxd\n"
     "unreachable or busy; 70 other errors; 77 denied, or killed because its token\n"
     "expired or was revoked\n",
     sbx_exec_run},
    {"token", SBX_SOCKET_ADMIN, "issue [OPTIONS] | revoke TOKEN_OR_ID | list",
     "mint a capability token (printed once), revoke one, or list them (admin socket)",
     "  issue options:\n"
     "  --mount SRC:DST    expose host path SRC read-only at DST in the sandbox (repeatable,\n"
     "                     at most 8; SRC must be under one of sbxd's mount roots)\n"
     "  --net none|PROFILE network profile (default none: loopback only)\n"
     "  --pool NAME        a pool the token may run in (repeatable; default: every pool)\n"
     "  --ttl SECONDS      lifetime (also 30s, 10m, 1h; default and maximum: sbxd's policy)\n"
     "  --uses N           number of tasks it may start (default 0: unlimited)\n"
     "issue prints the token on stdout and its id and expiry on stderr; list shows ids,\n"
     "grants, expiry and uses, never a token\n",
     sbx_token_run},
    {"audit", SBX_SOCKET_ADMIN, "[OPTIONS] | verify [--json]",
     "show the audit trail's task chains, newest first; 'verify' checks its hash chain",
     "  --task ID          one task's chain, event by event\n"
     "  --since DURATION   tasks requested in the last DURATION (30s, 15m, 2h, 7d)\n"
     "  --pool NAME        tasks of that pool\n"
     "  --status S         tasks whose result was S (exited, timeout, denied, abandoned, ...;\n"
     "                     'running' for tasks with no result yet)\n"
     "  --limit N          at most N chains (1..1000, default 50)\n"
     "  --json             one JSON object per chain, one per line\n"
     "exit status: 0; 1 when verify finds a bad row or --task finds nothing; 64 usage;\n"
     "69 sbxd unreachable; 70 other errors\n",
     sbx_audit_run},
};

void sbx_usage(FILE *f, const struct sbx_cmd *only)
{
    (void)fputs("usage: sbx [--socket PATH] [--admin-socket PATH] COMMAND [ARGS]\n", f);
    for (size_t i = 0; i < ARRAY_SIZE(sbx_cmds); i++) {
        const struct sbx_cmd *c = &sbx_cmds[i];
        if (only && only != c) {
            continue;
        }
        (void)fprintf(f, "  sbx %s%s%s\n      %s\n", c->name, c->synopsis[0] ? " " : "",
                      c->synopsis, c->summary);
        if (only && c->options) {
            (void)fputs(c->options, f);
        }
    }
    if (!only) {
        (void)fputs("global options:\n"
                    "  --socket PATH        agents' socket (env SBX_SOCKET, "
                    "default " SBX_DEFAULT_SOCKET ")\n"
                    "  --admin-socket PATH  admin socket (env SBX_ADMIN_SOCKET, "
                    "default " SBX_DEFAULT_ADMIN_SOCKET ")\n",
                    f);
    }
}

int sbx_usage_error(const struct sbx_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_prog_verror("sbx", fmt, ap);
    va_end(ap);
    sbx_usage(stderr, cmd);
    return EX_USAGE;
}

const struct sbx_cmd *sbx_cmd_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(sbx_cmds); i++) {
        if (strcmp(sbx_cmds[i].name, name) == 0) {
            return &sbx_cmds[i];
        }
    }
    return NULL;
}

int sbx_no_args(int argc, char **argv)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        sbx_usage(stdout, cmd);
        return -1;
    }
    if (argc > 1) {
        return sbx_usage_error(cmd, "%s: unexpected argument '%s'", argv[0], argv[1]);
    }
    return 0;
}

/* Makes sure fds 0-2 are open, so the socket can never become "stdout". */
static void sbx_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (n < 0) {
                _exit(EX_OSERR);
            }
            if (n != fd) {
                /* Lower fds were open, so open() returned a higher one: impossible. */
                (void)close(n);
            }
        }
    }
}

int main(int argc, char **argv)
{
    struct sbx_ctx ctx = {
        .socket_path = getenv("SBX_SOCKET"),
        .admin_socket_path = getenv("SBX_ADMIN_SOCKET"),
    };
    const struct sbx_cmd *cmd;
    int i = 1;

    sbx_std_fds();
    (void)signal(SIGPIPE, SIG_IGN);
    if (!ctx.socket_path || !ctx.socket_path[0]) {
        ctx.socket_path = SBX_DEFAULT_SOCKET;
    }
    if (!ctx.admin_socket_path || !ctx.admin_socket_path[0]) {
        ctx.admin_socket_path = SBX_DEFAULT_ADMIN_SOCKET;
    }
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *v = NULL;
        int r;

        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, NULL);
            return 0;
        }
        if ((r = parse_long_opt(argc, argv, &i, "--socket", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(NULL, "--socket needs a path");
            }
            ctx.socket_path = v;
        } else if ((r = parse_long_opt(argc, argv, &i, "--admin-socket", &v)) != 0) {
            if (r < 0 || v[0] == '\0') {
                return sbx_usage_error(NULL, "--admin-socket needs a path");
            }
            ctx.admin_socket_path = v;
        } else {
            return sbx_usage_error(NULL, "unknown option '%s'", argv[i]);
        }
    }
    if (i >= argc) {
        return sbx_usage_error(NULL, "missing command");
    }
    if (strcmp(argv[i], "help") == 0) {
        sbx_usage(stdout, i + 1 < argc ? sbx_cmd_find(argv[i + 1]) : NULL);
        return 0;
    }
    cmd = sbx_cmd_find(argv[i]);
    if (!cmd) {
        return sbx_usage_error(NULL, "unknown command '%s'", argv[i]);
    }
    ctx.path = cmd->socket == SBX_SOCKET_ADMIN ? ctx.admin_socket_path : ctx.socket_path;
    return cmd->run(&ctx, argc - i, argv + i);
}
