/* SPDX-License-Identifier: MIT */
#pragma once
/* What the parts of sbx share: the byte queue (byteq.c), the connection to sbxd (sbx_conn.c)
 * and the calls made on it (sbx_rpc.c), daemon text on a terminal (sbx_text.c), and the
 * command table (sbx.c), whose commands run in sbx_<command>.c. Private to cli/: nothing
 * outside sbx includes it. sbx is one blocking thread; nothing here is CHILD-SAFE. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <msgpack.h>

#include "cli/sbx_json.h"
#include "lib/buf.h"
#include "lib/err.h"
#include "lib/log.h"
#include "wire/proto.h"

#define SBX_TEXT_MAX 512 /* daemon text shown in one message or table cell */

#define sbx_errorf(...) log_prog_error("sbx", __VA_ARGS__)

/* sbx's exit statuses besides the command's own, as docker run, podman and GNU timeout
 * give them, so that a task's "exit 69" can never pass for a failure of sbx. */
#define SBX_EXIT_TIMEOUT 124    /* the task hit its timeout */
#define SBX_EXIT_FAIL 125       /* sbx failed: usage, sbxd unreachable or refusing, I/O */
#define SBX_EXIT_CANNOT_RUN 126 /* the command was found but could not be executed */
#define SBX_EXIT_NOT_FOUND 127  /* the command was not found */
#define SBX_EXIT_SIGNAL 128     /* + N: killed by signal N */
#define SBX_EXIT_KILLED 137     /* killed by sbxd: output cap, memory, token expiry */

/* The codes of sbx's own failures in --json's {"error": {"code": ...}}, beside the daemon's
 * (docs/PROTOCOL.md, "The error object"); README.md lists them. */
#define SBX_ERR_UNREACHABLE "unreachable"   /* cannot connect to sbxd */
#define SBX_ERR_DISCONNECTED "disconnected" /* sbxd closed the connection before answering */
#define SBX_ERR_PROTOCOL "protocol"         /* sbxd sent what sbx cannot read */
#define SBX_ERR_SYSTEM "system"             /* a system call of sbx's own failed */
#define SBX_ERR_INTERRUPTED "interrupted"   /* SIGINT or SIGTERM ended sbx */

/* byteq.c */

/* A byte queue: appended at the end, consumed from the front (off); the consumed bytes are
 * moved out only when an append needs their room, so a slow reader costs no copies. */
struct byteq {
    struct buf b;
    size_t off; /* first unconsumed byte */
};

/* The number of unconsumed bytes. */
size_t byteq_pending(const struct byteq *q);
/* The unconsumed bytes ("" when there are none). */
const char *byteq_data(const struct byteq *q);
/* Copies n bytes of p to the end; aborts on OOM, like xmalloc. */
void byteq_append(struct byteq *q, const void *p, size_t n);
/* Drops the first n (at most byteq_pending) unconsumed bytes. */
void byteq_consume(struct byteq *q, size_t n);
/* Frees what q holds; q is empty and usable again afterwards. */
void byteq_release(struct byteq *q);
/* msgpack_packer_write callback: packs straight into a struct byteq. */
int byteq_pack_cb(void *data, const char *p, size_t n);

/* sbx_conn.c */

/* The connection to sbxd: a non-blocking socket, a bounded reader and a send queue. */
struct sbx_conn {
    int fd;
    struct proto_reader *reader;
    struct byteq out;  /* packed, not yet sent */
    msgpack_packer pk; /* packs into out */
    uint32_t next_msgid;
    bool json;         /* failures are also reported as --json's error object */
    bool eof;          /* sbxd closed its side (or reset the connection) */
    bool write_closed; /* sends fail: unsent data was dropped */
};

/* Idempotent; usable as a cleanup attribute once c->fd is -1 or open. */
void sbx_conn_close(struct sbx_conn *c);
/* Connects to the Unix socket at path; the socket is non-blocking afterwards. */
int sbx_conn_open(struct sbx_conn *c, const char *path, struct err *e);
/* Sends what the socket takes now. Returns 0 or -errno with e set. */
int sbx_conn_send(struct sbx_conn *c, struct err *e);
/* Reads what the socket has now into the reader. Returns 0 or -errno with e set. */
int sbx_conn_recv(struct sbx_conn *c, struct err *e);
/* The next complete message: 1 with *ret filled, 0 when more bytes are needed, -errno
 * when the stream is broken. Values that are not msgpack-rpc messages are skipped. */
int sbx_conn_next(struct sbx_conn *c, struct proto_msg *ret, struct err *e);

/* sbx.c: the command table and the usage. */

enum sbx_socket { SBX_SOCKET_AGENT, SBX_SOCKET_ADMIN };

struct sbx_ctx {
    const char *socket_path;
    const char *admin_socket_path;
    const char *path; /* the socket the running command talks to */
};

/* One option of a command: its flag, the name of its value (NULL for a switch) and its
 * help, whose lines after the first continue it. */
struct sbx_opt {
    const char *flag;
    const char *arg;
    const char *help;
};

/* A command. This table is the one source of the help, the man page and the shell
 * completion (sbx_doc.c): what a command takes is written down here once. */
struct sbx_cmd {
    const char *name;
    enum sbx_socket socket;
    const char *synopsis; /* arguments after the command name */
    const char *summary;
    const char *const *subcmds; /* words that may follow the name, NULL-terminated, or NULL */
    const char *opts_title;     /* heading of opts, or NULL ("options:") */
    const struct sbx_opt *opts; /* terminated by a NULL flag, or NULL */
    const char *notes;          /* text after the options (exit status...), or NULL */
    /* argv[0] is the command name. Returns the process exit status. */
    int (*run)(const struct sbx_ctx *ctx, int argc, char **argv);
};

/* The global options, and the table of commands (n_cmds entries). */
extern const struct sbx_opt sbx_global_opts[];
extern const struct sbx_cmd sbx_cmds[];
extern const size_t sbx_n_cmds;

/* Prints the usage to f: of every command, and the global options; or, when only is not
 * NULL, of that command with its options. */
void sbx_usage(FILE *f, const struct sbx_cmd *only);
/* Prints "sbx: " and the message on stderr, then the usage of cmd (of every command when
 * NULL); returns SBX_EXIT_FAIL. */
int sbx_usage_error(const struct sbx_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Reports a failure: "sbx: MESSAGE" on stderr and, when json, {"error": {"code": code,
 * "message": MESSAGE}} and a newline on stdout. */
void sbx_report(bool json, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints {"error": {"code": code, "message": msg}} and a newline on stdout. */
void sbx_print_error_json(const char *code, const char *msg);
/* sbx_report, for a failure of sbx: returns SBX_EXIT_FAIL. */
int sbx_fail(bool json, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Ends sbx as a process killed by SIGPIPE would end (status 141 in a shell): what the
 * pipeline convention asks of a writer whose reader has gone. */
__attribute__((noreturn)) void sbx_sigpipe_exit(void);
/* The command called name, or NULL. */
const struct sbx_cmd *sbx_cmd_find(const char *name);
/* For commands without arguments but --json: a usage error status, or 0; -1 when it
 * printed the help (-h, --help). *ret_json (NULL: --json is refused) is set by --json. */
int sbx_no_args(int argc, char **argv, bool *ret_json);

/* The commands' run functions (struct sbx_cmd's run), each in sbx_<command>.c. */
int sbx_ping_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_pools_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_exec_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_token_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_audit_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_stats_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_completion_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_session_run(const struct sbx_ctx *ctx, int argc, char **argv);
int sbx_cp_run(const struct sbx_ctx *ctx, int argc, char **argv);

/* sbx_doc.c: the man page and the shell completion, from the command table. */

/* Writes sbx(1) in roff (man macros) to f. */
void sbx_doc_man(FILE *f);
/* Writes the bash completion script (the function _sbx, registered for sbx) to f. */
void sbx_doc_bash(FILE *f);

/* sbx_rpc.c */

/* Prints a response's error (also as the error object, when json) and returns
 * SBX_EXIT_FAIL. */
int sbx_rpc_error(const msgpack_object *error, bool json);

/* Packs the map of named arguments of a request. */
typedef void (*sbx_pack_args_cb)(msgpack_packer *pk, const void *arg);

/* Sends [0, msgid, method, [args]] (args packed by pack_args, or {} when it is NULL) and
 * waits for the response, skipping notifications. Returns 0 with *ret holding a successful
 * response (proto_msg_done it), or prints the failure and returns the exit status. */
int sbx_rpc_call(struct sbx_conn *c, const char *method, sbx_pack_args_cb pack_args,
                 const void *arg, struct proto_msg *ret);
/* Opens c to the socket the command talks to (ctx->path); json says how failures on c
 * are reported (sbx_report). Returns 0, or prints why and returns SBX_EXIT_FAIL. */
int sbx_rpc_connect(const struct sbx_ctx *ctx, bool json, struct sbx_conn *c);
/* Connects and makes one call (sbx_rpc_call). Returns 0 with *ret, or the exit status. */
int sbx_rpc_request(const struct sbx_ctx *ctx, struct sbx_conn *c, const char *method,
                    sbx_pack_args_cb pack_args, const void *arg, bool json, struct proto_msg *ret);

/* sbx_files.c: exec's --file. */

#define SBX_FILES_INLINE_MAX (256u << 10) /* larger files are streamed as exec.file */
#define SBX_FILES_CHUNK (64u << 10)       /* an exec.file chunk */
/* Inline files go in the request itself, which must stay well below sbxd's message bound
 * (max_message_bytes, 1 MiB by default) with its argv, env and paths. */
#define SBX_FILES_INLINE_TOTAL (512u << 10)

/* A local file to send: checked and sized when it is added. */
struct sbx_file {
    char *local; /* the local path */
    char *path;  /* where it goes in the sandbox, as given (sbxd checks it) */
    int fd;      /* open only while it is read */
    dev_t dev;   /* the file that was checked, which a reopen must find again */
    ino_t ino;
    uint64_t size; /* what is declared and sent, whatever the file does meanwhile */
    uint32_t mode; /* the local file's permission bits */
    bool streamed; /* sent as exec.file chunks after the request, declared by size */
    char *data;    /* an inline file's bytes, once loaded (its fd is closed then) */
};

struct sbx_files {
    struct sbx_file *v;
    size_t n;
    size_t next;   /* the file the stream is in */
    uint64_t sent; /* bytes of v[next] streamed */
    uint64_t left; /* bytes of every streamed file not yet packed */
    char *buf;     /* one chunk */
};

/* Frees what fs holds and closes its files; fs is empty afterwards. Idempotent. */
void sbx_files_release(struct sbx_files *fs);
/* Adds --file's LOCAL[:PATH] (split at the last ':'; PATH empty or missing: LOCAL's
 * basename) and checks that LOCAL opens and is a regular file; spec is not kept. Returns 0
 * or -errno with e set. */
int sbx_files_add(struct sbx_files *fs, const char *spec, struct err *e);
/* Decides which files are inline (at most SBX_FILES_INLINE_MAX each, and together with their
 * paths within a budget well below sbxd's message bound) and which are streamed. */
void sbx_files_plan(struct sbx_files *fs);
/* Reads the inline files (after sbx_files_plan) into memory and closes them. Returns 0 or
 * -errno with e set (a read failed, or a file got shorter). */
int sbx_files_load(struct sbx_files *fs, struct err *e);
/* Packs "files" and its array (a key and a value of the request's map): the inline files'
 * loaded bytes, the streamed ones declared by size. */
void sbx_files_pack(msgpack_packer *pk, const struct sbx_files *fs);
/* Whether sbx_files_plan made any file a streamed one. */
bool sbx_files_streamed(const struct sbx_files *fs);
/* Whether streamed bytes are left to pack. */
bool sbx_files_pending(const struct sbx_files *fs);
/* Packs the next [2, "exec.file", [msgid, bin]] of at most SBX_FILES_CHUNK bytes (only while
 * sbx_files_pending). Returns 0 or -errno with e set. */
int sbx_files_pack_chunk(struct sbx_files *fs, msgpack_packer *pk, uint32_t msgid, struct err *e);

/* sbx_collect.c: exec's collected files. */

/* The collected files sbx could not write, for the report. */
struct sbx_collect {
    struct sbx_json_file_error *errors; /* paths borrowed from the result */
    size_t n_errors;
};

/* Frees what co holds. Idempotent. */
void sbx_collect_release(struct sbx_collect *co);
/* Writes the files of the exec result res beneath the directory dirfd (none when dirfd <
 * 0) with sbx_out_write, telling each that cannot be written on stderr and keeping it in co
 * (which borrows from res); unless quiet, also tells the truncated files, the skipped
 * entries and a collect_truncated result on stderr. Returns 0, or -EIO when some file could
 * not be written. */
int sbx_collect_write(const msgpack_object *res, int dirfd, bool quiet, struct sbx_collect *co);

/* sbx_out.c: files from sbxd written under a local directory, never outside it. */

/* Whether a path sbxd sent (len bytes) may be written under a directory: relative, no
 * empty, "." or ".." component, no NUL, components of at most 255 bytes, under PATH_MAX.
 * Returns 0, or -EINVAL / -ENAMETOOLONG with *why set (static text). */
int sbx_out_check_path(const char *path, size_t len, const char **why);
/* Writes data (len bytes) as path (path_len bytes, checked as sbx_out_check_path does)
 * beneath the directory dirfd with the permission bits of mode (0..0777, umask aside):
 * missing directories are created, a symlink or non-directory on the way is refused, an
 * existing regular file is replaced (by a rename: a hard link is never written through),
 * anything else at the name is refused. Returns 0 or -errno with e set. */
int sbx_out_write(int dirfd, const char *path, size_t path_len, const char *data, size_t len,
                  uint32_t mode, struct err *e);

/* sbx_session.c */

/* The token of a session command: flag (--token) when not NULL, else $SBX_TOKEN when set
 * and not empty, else NULL. */
const char *sbx_session_token(const char *flag);
/* Packs key and a duration of ns as seconds: an integer when whole, else a float. */
void sbx_session_pack_seconds(msgpack_packer *pk, const char *key, uint64_t ns);

/* sbx_text.c */

/* Daemon text (str or bin) sanitized into buf; "" for other types. */
const char *sbx_text(const msgpack_object *o, char *buf, size_t size);
/* Formats one table cell into buf; returns its width in characters. */
size_t sbx_text_cell(const msgpack_object *o, char *buf, size_t size);
/* Prints one cell of an aligned table on stdout: text, width characters wide, padded to
 * col_width (on the left when right); last ends the row. */
void sbx_text_print_cell(const char *text, size_t width, size_t col_width, bool right, bool last);
