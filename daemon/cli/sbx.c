/* SPDX-License-Identifier: MIT */
/* sbx, the command-line client of sbxd: flags, one msgpack-rpc connection driven by a
 * blocking poll(2) loop, stdio streaming for exec and the mapping of results to exit
 * statuses. It trusts nothing it reads from sbxd: every buffer it keeps is bounded, and
 * daemon text is sanitized before it reaches a terminal.
 *
 * This file is main: the global flags, the command table (the one source of the help, the
 * man page and the completion), the usage, failure reports and the check of what was written
 * to stdout. Each command runs in sbx_<command>.c; the connection is sbx_conn.c and sbx_rpc.c
 * (cli/cli_impl.h). */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/sbx_json.h"
#include "lib/util.h"
#include "wire/version.h"

#define SBX_DEFAULT_SOCKET "./var/sbxd.sock"
#define SBX_DEFAULT_ADMIN_SOCKET "./var/sbxd-admin.sock"
#define SBX_OPT_COL 21 /* where an option's help starts in the usage */

const struct sbx_opt sbx_global_opts[] = {
    {"--socket", "PATH", "agents' socket (env SBX_SOCKET, default " SBX_DEFAULT_SOCKET ")"},
    {"--admin-socket", "PATH",
     "admin socket (env SBX_ADMIN_SOCKET, default " SBX_DEFAULT_ADMIN_SOCKET ")"},
    {"--version", NULL, "print sbx's version and exit"},
    {"--help", NULL, "print this help and exit (also: sbx help [COMMAND])"},
    {NULL, NULL, NULL},
};

static const struct sbx_opt sbx_json_only[] = {
    {"--json", NULL, "print the answer as JSON (failures as {\"error\": {...}})"},
    {NULL, NULL, NULL},
};

static const struct sbx_opt sbx_exec_opts[] = {
    {"--pool", "NAME", "the pool to take the sandbox from (default: the daemon's)"},
    {"--timeout", "SECONDS", "wall-clock limit (also 500ms, 2m, 1h)"},
    {"--env", "K=V", "set an environment variable (repeatable)"},
    {"--cwd", "DIR", "working directory inside the sandbox"},
    {"--token", "TOKEN",
     "capability token whose grants the task gets (env SBX_TOKEN,\n"
     "which keeps it out of the process list)"},
    {"--session", "ID",
     "run in that open session (sbx session open): its /work and /tmp\n"
     "persist between commands; --pool and --token may be left out"},
    {"--file", "LOCAL[:PATH]",
     "copy the local file LOCAL into the sandbox's /work as PATH\n"
     "(relative to /work, or under /work/; default: LOCAL's basename;\n"
     "split at the last ':') with LOCAL's mode, before the command\n"
     "starts (repeatable; large files are streamed)"},
    {"--collect", "PATTERN",
     "after the command, bring back the regular files under /work\n"
     "that match (a path, or *, ? and [...] within a name and ** for\n"
     "any depth; repeatable); truncated and skipped ones are told on\n"
     "stderr"},
    {"--out", "DIR",
     "where --collect writes the files (default: the current\n"
     "directory; created if missing); a path that would leave DIR\n"
     "(absolute, .., a symlink in DIR) is refused"},
    {"--capture", NULL,
     "get stdout and stderr in the result, not as they come (what\n"
     "request/response clients see); printed the same way"},
    {"--json", NULL,
     "print one JSON object with the result and output at the end\n"
     "(\"stdout_b64\"/\"stderr_b64\" hold the bytes of output that is not\n"
     "UTF-8; collected files are in \"files\" with \"data\" and, when not\n"
     "UTF-8, \"data_b64\"; a failure of sbx prints {\"error\": {\"code\",\n"
     "\"message\"}})"},
    {NULL, NULL, NULL},
};

static const char *const sbx_session_subcmds[] = {"open", "list", "ls", "close", NULL};

static const struct sbx_opt sbx_session_opts[] = {
    {"--pool", "NAME", "open: the pool to take the sandbox from (default: the daemon's)"},
    {"--ttl", "SECONDS",
     "open: the session's lifetime, whatever it does (also 30s, 10m,\n"
     "1h; default and maximum: the pool's session_ttl, session_max_ttl)"},
    {"--idle-timeout", "SECONDS",
     "open: end it after this long without a command (default: the\n"
     "pool's session_idle_timeout; at most the ttl)"},
    {"--file", "LOCAL[:PATH]",
     "open: copy a local file into its /work first, as exec's --file\n"
     "does (up to 256 KiB each, 512 KiB together; the rest: sbx cp)"},
    {"--token", "TOKEN",
     "the capability token to open it with, and to use it with\n"
     "(env SBX_TOKEN): a session is its opener's (uid and token)"},
    {"--json", NULL, "print the answer as JSON (failures as {\"error\": {...}})"},
    {NULL, NULL, NULL},
};

static const struct sbx_opt sbx_cp_opts[] = {
    {"--token", "TOKEN", "the token the session was opened with (env SBX_TOKEN)"},
    {NULL, NULL, NULL},
};

static const char *const sbx_token_subcmds[] = {"issue", "revoke", "list", NULL};

static const struct sbx_opt sbx_token_opts[] = {
    {"--mount", "SRC:DST",
     "expose host path SRC read-only at DST in the sandbox (repeatable,\n"
     "at most 8; SRC must be under one of sbxd's mount roots)"},
    {"--net", "none|PROFILE", "network profile (default none: loopback only)"},
    {"--pool", "NAME", "a pool the token may run in (repeatable; default: every pool)"},
    {"--ttl", "SECONDS", "lifetime (also 30s, 10m, 1h; default and maximum: sbxd's policy)"},
    {"--uses", "N", "number of tasks it may start (default 0: unlimited)"},
    {"--json", NULL, "list: print the tokens as a JSON array"},
    {NULL, NULL, NULL},
};

static const char *const sbx_audit_subcmds[] = {"verify", NULL};

static const struct sbx_opt sbx_audit_opts[] = {
    {"--task", "ID", "one task's chain, event by event"},
    {"--since", "DURATION", "tasks requested in the last DURATION (30s, 15m, 2h, 7d)"},
    {"--pool", "NAME", "tasks of that pool"},
    {"--status", "S",
     "tasks whose result was S (exited, timeout, denied, abandoned, ...;\n"
     "'running' for tasks with no result yet)"},
    {"--session", "ID", "a session's open and close events and its commands' chains"},
    {"--limit", "N", "at most N chains (1..1000, default 50)"},
    {"--json", NULL, "one JSON object per chain, one per line (verify: one object)"},
    {NULL, NULL, NULL},
};

static const char *const sbx_completion_subcmds[] = {"bash", NULL};

/* Commands: adding one is an entry here and its run function. */
const struct sbx_cmd sbx_cmds[] = {
    {"ping", SBX_SOCKET_AGENT, "", "check that sbxd answers", NULL, NULL, NULL, NULL, sbx_ping_run},
    {"pools", SBX_SOCKET_AGENT, "[--json]", "show every pool and its counters", NULL, NULL,
     sbx_json_only, NULL, sbx_pools_run},
    {"stats", SBX_SOCKET_AGENT, "[--json]",
     "show sbxd's daemon-wide counters (sandboxes, tasks, network namespaces, host ids)", NULL,
     NULL, sbx_json_only, NULL, sbx_stats_run},
    {"exec", SBX_SOCKET_AGENT, "[OPTIONS] [--] COMMAND [ARG...]",
     "run COMMAND in a fresh sandbox (or an open session's), streaming its stdin, stdout\n"
     "and stderr, with files copied in before and collected after",
     NULL, NULL, sbx_exec_opts,
     "exit status: the command's; 128+N if killed by signal N; 124 on timeout; 137 when\n"
     "killed for output, memory or its token's expiry or revocation; 126 if the command\n"
     "was found but could not be executed; 127 if it was not found; 125 when sbx failed:\n"
     "a usage error, sbxd unreachable, a request sbxd refused (denied, busy, an unknown\n"
     "pool, a --file path or size refused...), a broken connection, a write error or a\n"
     "collected file that could not be written. If stdout closes (a pipe's reader went\n"
     "away), the task is cancelled and sbx ends by SIGPIPE.\n",
     sbx_exec_run},
    {"session", SBX_SOCKET_AGENT, "open [OPTIONS] | list | ls ID [PATH] | close ID",
     "open a session (a sandbox kept for several commands, sbx exec --session) and print\n"
     "its id, list your open sessions, list a directory of one, or close one",
     sbx_session_subcmds, NULL, sbx_session_opts,
     "A session ends at close, at its ttl, after its idle timeout, or when its token\n"
     "expires or is revoked; its sandbox is destroyed with every file in it. Only its\n"
     "opener (the same uid and token) may use it. exit status: 0; 125 when sbx failed\n",
     sbx_session_run},
    {"cp", SBX_SOCKET_AGENT, "[--token TOKEN] LOCAL|- ID:PATH | ID:PATH LOCAL|-",
     "copy a file into an open session or out of it, as docker cp does: PATH is under\n"
     "/work (relative to it, or /work/...); - is stdin or stdout; a PATH or LOCAL that\n"
     "ends in / (or a LOCAL directory) takes the other side's basename",
     NULL, NULL, sbx_cp_opts,
     "An upload keeps LOCAL's mode. exit status: 0; 125 when sbx failed (usage, sbxd\n"
     "unreachable, a refused request, a local read or write error)\n",
     sbx_cp_run},
    {"token", SBX_SOCKET_ADMIN, "issue [OPTIONS] | revoke TOKEN_OR_ID | list [--json]",
     "mint a capability token (printed once), revoke one, or list them (admin socket)",
     sbx_token_subcmds, "issue options:", sbx_token_opts,
     "issue prints the token on stdout and its id and expiry on stderr; list shows ids,\n"
     "grants, expiry and uses, never a token. exit status: 0; 125 when sbx failed\n",
     sbx_token_run},
    {"audit", SBX_SOCKET_ADMIN, "[OPTIONS] | verify [--json]",
     "show the audit trail's task chains, newest first; 'verify' checks its hash chain",
     sbx_audit_subcmds, NULL, sbx_audit_opts,
     "exit status: 0; 1 when verify finds a bad row or --task or --session finds nothing;\n"
     "125 when sbx failed (usage, sbxd unreachable, a refused request, a write error)\n",
     sbx_audit_run},
    {"completion", SBX_SOCKET_AGENT, "bash",
     "print the shell completion script (source it, or install it as\n"
     "/usr/share/bash-completion/completions/sbx)",
     sbx_completion_subcmds, NULL, NULL, NULL, sbx_completion_run},
};

const size_t sbx_n_cmds = ARRAY_SIZE(sbx_cmds);

/* Prints text with every line after the first indented by indent spaces. */
static void sbx_print_indented(FILE *f, const char *text, int indent)
{
    for (const char *p = text; *p;) {
        const char *nl = strchrnul(p, '\n');
        (void)fprintf(f, "%.*s\n", (int)(nl - p), p);
        if (*nl == '\0') {
            break;
        }
        p = nl + 1;
        (void)fprintf(f, "%*s", indent, "");
    }
}

static void sbx_print_opts(FILE *f, const struct sbx_opt *opts)
{
    for (const struct sbx_opt *o = opts; o && o->flag; o++) {
        char head[64];
        (void)snprintf(head, sizeof(head), "  %s%s%s", o->flag, o->arg ? " " : "",
                       o->arg ? o->arg : "");
        if ((int)strlen(head) >= SBX_OPT_COL - 1) {
            (void)fprintf(f, "%s ", head);
        } else {
            (void)fprintf(f, "%-*s", SBX_OPT_COL, head);
        }
        sbx_print_indented(f, o->help, SBX_OPT_COL);
    }
}

void sbx_usage(FILE *f, const struct sbx_cmd *only)
{
    (void)fputs("usage: sbx [--socket PATH] [--admin-socket PATH] COMMAND [ARGS]\n", f);
    for (size_t i = 0; i < ARRAY_SIZE(sbx_cmds); i++) {
        const struct sbx_cmd *c = &sbx_cmds[i];
        if (only && only != c) {
            continue;
        }
        (void)fprintf(f, "  sbx %s%s%s\n      ", c->name, c->synopsis[0] ? " " : "", c->synopsis);
        sbx_print_indented(f, c->summary, 6);
        if (only && c->opts) {
            (void)fprintf(f, "%s\n", c->opts_title ? c->opts_title : "options:");
            sbx_print_opts(f, c->opts);
        }
        if (only && c->notes) {
            (void)fputs(c->notes, f);
        }
    }
    if (!only) {
        (void)fputs("global options:\n", f);
        sbx_print_opts(f, sbx_global_opts);
    }
}

int sbx_usage_error(const struct sbx_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_prog_verror("sbx", fmt, ap);
    va_end(ap);
    sbx_usage(stderr, cmd);
    return SBX_EXIT_FAIL;
}

void sbx_print_error_json(const char *code, const char *msg)
{
    json_t *err = json_object(), *doc = json_object();
    sbx_json_set(err, "code", sbx_json_str(code, strlen(code)));
    sbx_json_set(err, "message", sbx_json_str(msg, strlen(msg)));
    sbx_json_set(doc, "error", err);
    sbx_json_print(stdout, doc);
}

static void sbx_vreport(bool json, const char *code, const char *fmt, va_list ap)
{
    char msg[SBX_TEXT_MAX];
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    sbx_errorf("%s", msg);
    if (json) {
        sbx_print_error_json(code, msg);
    }
}

void sbx_report(bool json, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbx_vreport(json, code, fmt, ap);
    va_end(ap);
}

int sbx_fail(bool json, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbx_vreport(json, code, fmt, ap);
    va_end(ap);
    return SBX_EXIT_FAIL;
}

void sbx_sigpipe_exit(void)
{
    sigset_t set;
    (void)sigemptyset(&set);
    (void)sigaddset(&set, SIGPIPE);
    (void)signal(SIGPIPE, SIG_DFL);
    (void)sigprocmask(SIG_UNBLOCK, &set, NULL);
    (void)raise(SIGPIPE);
    _exit(SBX_EXIT_SIGNAL + SIGPIPE); /* not reached: the default action is to die */
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

int sbx_no_args(int argc, char **argv, bool *ret_json)
{
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            sbx_usage(stdout, cmd);
            return -1;
        }
        if (ret_json && strcmp(argv[i], "--json") == 0) {
            *ret_json = true;
            continue;
        }
        return sbx_usage_error(cmd, "%s: unexpected argument '%s'", argv[0], argv[i]);
    }
    return 0;
}

int sbx_completion_run(const struct sbx_ctx *ctx, int argc, char **argv)
{
    (void)ctx;
    const struct sbx_cmd *cmd = sbx_cmd_find(argv[0]);
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        sbx_usage(stdout, cmd);
        return 0;
    }
    if (argc != 2 || strcmp(argv[1], "bash") != 0) {
        return sbx_usage_error(cmd, "completion: which shell? (bash)");
    }
    sbx_doc_bash(stdout);
    return 0;
}

/* Makes sure fds 0-2 are open, so the socket can never become "stdout". */
static void sbx_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", O_RDWR | O_CLOEXEC);
            if (n < 0) {
                _exit(SBX_EXIT_FAIL);
            }
            if (n != fd) {
                /* Lower fds were open, so open() returned a higher one: impossible. */
                (void)close(n);
            }
        }
    }
}

/* The last check of what went to stdout: buffered output is flushed and the stream closed,
 * and a write that failed at any point (a full disk, /dev/full, EIO) makes sbx fail, since
 * what it printed is not what it was asked to print. A closed pipe never gets here: with
 * SIGPIPE's default action the write that met it ended sbx. */
static int sbx_close_stdout(int status)
{
    bool failed = ferror(stdout) != 0;
    errno = 0;
    if (fclose(stdout) != 0) {
        failed = true;
    }
    if (!failed) {
        return status;
    }
    if (errno == EPIPE) {
        sbx_sigpipe_exit();
    }
    sbx_errorf("writing to stdout: %s", errno ? strerror(errno) : "write error");
    return SBX_EXIT_FAIL;
}

static int sbx_main(int argc, char **argv)
{
    struct sbx_ctx ctx = {
        .socket_path = getenv("SBX_SOCKET"),
        .admin_socket_path = getenv("SBX_ADMIN_SOCKET"),
    };
    const struct sbx_cmd *cmd;
    int i = 1;

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
        if (strcmp(argv[i], "--version") == 0) {
            (void)printf("sbx %s\n", SBX_VERSION);
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
        if (i + 1 < argc && strcmp(argv[i + 1], "--man") == 0) {
            sbx_doc_man(stdout);
            return 0;
        }
        cmd = i + 1 < argc ? sbx_cmd_find(argv[i + 1]) : NULL;
        if (i + 1 < argc && !cmd) {
            return sbx_usage_error(NULL, "help: unknown command '%s'", argv[i + 1]);
        }
        sbx_usage(stdout, cmd);
        return 0;
    }
    cmd = sbx_cmd_find(argv[i]);
    if (!cmd) {
        return sbx_usage_error(NULL, "unknown command '%s'", argv[i]);
    }
    ctx.path = cmd->socket == SBX_SOCKET_ADMIN ? ctx.admin_socket_path : ctx.socket_path;
    return cmd->run(&ctx, argc - i, argv + i);
}

int main(int argc, char **argv)
{
    sigset_t pipe;

    sbx_std_fds();
    sbx_json_init();
    /* SIGPIPE's default action, whatever was inherited: a reader that goes away ends sbx as
     * it ends any writer in a pipeline. (Sends to sbxd use MSG_NOSIGNAL; exec handles the
     * EPIPE of its output itself, to cancel its task first.) */
    (void)signal(SIGPIPE, SIG_DFL);
    (void)sigemptyset(&pipe);
    (void)sigaddset(&pipe, SIGPIPE);
    (void)sigprocmask(SIG_UNBLOCK, &pipe, NULL);
    return sbx_close_stdout(sbx_main(argc, argv));
}
