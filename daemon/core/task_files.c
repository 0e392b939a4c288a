/* SPDX-License-Identifier: MIT */
/* A task's files. STAGING writes exec's files into its sandbox's /work before the command
 * starts: inline ones at once, streamed ones as their exec.file chunks arrive, one byte
 * stream over the streamed entries in request order. COLLECTING reads collect's matches back
 * once every process of the sandbox is dead. Every write and read runs as a workq job over a
 * dup of the work fd of its own, with buffers of its own: the loop never touches /work. A
 * job holds a reference on its task (open_handles), so the task outlives the job; the job's
 * completion looks at what became of the task before it does anything. File data never
 * reaches the log or the trail; only paths and byte counts do. */
#define LOG_MOD "exec"
#include "core/task_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "core/task.h"
#include "core/task_impl.h"
#include "lib/alloc.h"
#include "lib/log.h"
#include "lib/util.h"
#include "sandbox/sandbox.h"
#include "sandbox/task_spec.h"
#include "sandbox/workspace.h"
#include "wire/proto.h"

/* Skip records in one result (docs/PROTOCOL.md). */
#define COLLECT_MAX_SKIPPED 100

struct file_chunk {
    struct file_chunk *next;
    size_t len;
    char data[];
};

struct task_stage {
    struct workq_job job;
    struct task *t;
    /* The loop's: chunks that arrived and are not in a job yet. */
    struct file_chunk *q_head;
    struct file_chunk *q_tail;
    size_t q_bytes;
    bool started; /* the task has its sandbox: jobs may run */
    bool busy;    /* a job runs: everything below is the worker's until it ends */
    bool finished;
    int root; /* a dup of the sandbox's work fd, for the jobs */
    uid_t uid;
    gid_t gid;
    uint64_t work_size;           /* the pool's, for the message of a full /work */
    struct task_spec_file *files; /* taken from the spec at task_files_begin */
    uint32_t n_files;
    bool inline_done;         /* the inline entries are written */
    uint32_t idx;             /* the streamed cursor: entry, */
    uint64_t off;             /* offset in it, */
    int cur_fd;               /* and its fd while it is open */
    struct file_chunk *batch; /* the chunks the running job writes */
    size_t batch_bytes;
    bool last;        /* the batch ends the stream */
    uint64_t written; /* file bytes written, for files_in_bytes */
    int r;
    struct err e;
};

struct collect_job {
    struct workq_job job;
    struct task *t;
    int root; /* the task's dup of the work fd, the job's own now */
    const char *const *patterns;
    size_t n;
    struct workspace_limits lim;
    struct workspace_collect out;
    int r;
    struct err e;
};

static const char *quote_path(const char *p, char *buf, size_t size)
{
    return log_quote(p, buf, size);
}

void task_files_init(struct task *t)
{
    t->collect_fd = -1;
    if (t->spec.n_files == 0) {
        return;
    }
    struct task_stage *st = xcalloc(1, sizeof(*st));
    st->t = t;
    st->root = -1;
    st->cur_fd = -1;
    t->stage = st;
}

/* ---- STAGING: the worker's side ---- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = RETRY_EINTR(write(fd, p, n));
        if (w < 0) {
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The error for entry f: its path, and for a full /work what bounds it. */
static int stage_fail(struct task_stage *st, const struct task_spec_file *f, int r)
{
    char q[96];
    if (r == -ENOSPC || r == -EDQUOT) {
        return err_setx(&st->e, r, "files: %s: /work is full (the pool's work_size is %llu bytes)",
                        quote_path(f->path, q, sizeof(q)), (unsigned long long)st->work_size);
    }
    if (st->e.msg[0] != '\0') {
        return err_prefix(&st->e, r, "files"); /* workspace.c's message names the path */
    }
    return err_setx(&st->e, r, "files: %s: %s", quote_path(f->path, q, sizeof(q)), strerror(-r));
}

static int create_file(struct task_stage *st, const struct task_spec_file *f, int *ret_fd)
{
    st->e.msg[0] = '\0';
    int r = workspace_create(st->root, f->path, f->mode, st->uid, st->gid, ret_fd, &st->e);
    return r < 0 ? stage_fail(st, f, r) : 0;
}

static int write_inline(struct task_stage *st)
{
    for (uint32_t i = 0; i < st->n_files; i++) {
        struct task_spec_file *f = &st->files[i];
        if (f->streamed) {
            continue;
        }
        int fd = -1;
        int r = create_file(st, f, &fd);
        if (r < 0) {
            return r;
        }
        st->e.msg[0] = '\0';
        r = write_all(fd, f->data, f->size);
        fd = fd_close(fd);
        if (r < 0) {
            return stage_fail(st, f, r);
        }
        st->written += f->size;
        free(f->data); /* written: the memory goes now, not with the task */
        f->data = NULL;
    }
    return 0;
}

/* Moves the streamed cursor past inline entries and empty streamed ones (created here), to
 * the next entry that takes bytes, or the end. */
static int advance(struct task_stage *st)
{
    while (st->idx < st->n_files) {
        const struct task_spec_file *f = &st->files[st->idx];
        if (f->streamed && f->size > 0) {
            return 0;
        }
        if (f->streamed) {
            int fd = -1;
            int r = create_file(st, f, &fd);
            if (r < 0) {
                return r;
            }
            fd = fd_close(fd);
        }
        st->idx++;
    }
    return 0;
}

static int write_stream(struct task_stage *st, const char *p, size_t len)
{
    while (len > 0) {
        int r = advance(st);
        if (r < 0) {
            return r;
        }
        if (st->idx >= st->n_files) {
            /* The loop refuses bytes past the declared total before they are queued. */
            return err_setx(&st->e, -EPROTO, "files: more bytes than declared");
        }
        const struct task_spec_file *f = &st->files[st->idx];
        if (st->cur_fd < 0) {
            r = create_file(st, f, &st->cur_fd);
            if (r < 0) {
                return r;
            }
        }
        uint64_t room = f->size - st->off;
        size_t n = len < room ? len : (size_t)room;
        r = write_all(st->cur_fd, p, n);
        if (r < 0) {
            return stage_fail(st, f, r);
        }
        st->off += n;
        st->written += n;
        p += n;
        len -= n;
        if (st->off == f->size) {
            st->cur_fd = fd_close(st->cur_fd);
            st->off = 0;
            st->idx++;
        }
    }
    return 0;
}

static void stage_work(struct workq_job *j)
{
    struct task_stage *st = container_of(j, struct task_stage, job);
    int r = 0;
    struct workspace_ids sbxd_ids = workspace_as_task(st->uid, st->gid);
    if (!st->inline_done) {
        r = write_inline(st);
        st->inline_done = r == 0;
    }
    for (struct file_chunk *c = st->batch; r == 0 && c; c = c->next) {
        r = write_stream(st, c->data, c->len);
    }
    if (r == 0 && st->last) {
        r = advance(st); /* the empty entries after the last byte */
        st->finished = r == 0;
    }
    st->r = r;
    workspace_as_sbxd(sbxd_ids);
}

/* ---- STAGING: the loop's side ---- */

static void stage_done(struct workq_job *j);

static void chunks_free(struct file_chunk *c)
{
    while (c) {
        struct file_chunk *next = c->next;
        free(c);
        c = next;
    }
}

/* Hands what there is to write to a job, or, when everything is written, runs the task. */
static void stage_kick(struct task_stage *st)
{
    struct task *t = st->t;
    if (!st->started || st->busy) {
        return;
    }
    bool all_arrived = t->files_received == t->spec.files_streamed;
    if (st->finished) {
        /* Written: the entries and the fd go now, not with the task. */
        st->root = fd_close(st->root);
        task_spec_files_free(st->files, st->n_files);
        st->files = NULL;
        st->n_files = 0;
        task_run(t);
        return;
    }
    if (st->inline_done && !st->q_head && !all_arrived) {
        return; /* waiting for chunks */
    }
    st->batch = st->q_head;
    st->batch_bytes = st->q_bytes;
    st->q_head = st->q_tail = NULL;
    st->q_bytes = 0;
    st->last = all_arrived;
    st->busy = true;
    t->open_handles++; /* the job holds the task */
    workq_submit(t->env->workq, &st->job, stage_work, stage_done);
}

static void stage_done(struct workq_job *j)
{
    struct task_stage *st = container_of(j, struct task_stage, job);
    struct task *t = st->t;
    st->busy = false;
    chunks_free(st->batch);
    st->batch = NULL;
    if (t->sink.ops) {
        t->sink.ops->stdin_written(&t->sink, st->batch_bytes);
    }
    st->batch_bytes = 0;
    t->files_in_bytes = st->written;
    if (t->state == TASK_STAGING) {
        if (st->r < 0) {
            log_debug("task=%s msg=\"files not written, task not run\" detail=\"%s\"", t->id,
                      err_msg(&st->e));
            task_abort(t, &st->e, true);
        } else {
            stage_kick(st);
        }
    }
    task_unref(t);
}

int task_files_begin(struct task *t, struct sandbox *sb, struct err *e)
{
    if (t->spec.has_collect) {
        t->collect_fd = fcntl(sandbox_work_fd(sb), F_DUPFD_CLOEXEC, 3);
        if (t->collect_fd < 0) {
            t->collect_fd = -1;
            return err_set(e, -errno, "sandbox %s: keep /work for collect", sb->id);
        }
    }
    struct task_stage *st = t->stage;
    if (!st) {
        return 0;
    }
    st->root = fcntl(sandbox_work_fd(sb), F_DUPFD_CLOEXEC, 3);
    if (st->root < 0) {
        st->root = -1;
        return err_set(e, -errno, "sandbox %s: open /work for the files", sb->id);
    }
    sandbox_task_host_ids(sb, &st->uid, &st->gid);
    st->work_size = t->pool->pc->work_size;
    st->files = take_ptr(&t->spec.files);
    st->n_files = t->spec.n_files;
    t->spec.n_files = 0;
    st->started = true;
    t->state = TASK_STAGING;
    stage_kick(st);
    return 1;
}

static void files_timeout_cb(uv_timer_t *h)
{
    struct task *t = h->data;
    struct err e = ERR_INIT;
    err_setx(&e, -ETIMEDOUT, "the files did not arrive within files_timeout (%.3f s)",
             (double)t->pool->pc->files_timeout_ns / 1e9);
    task_abort(t, &e, true);
}

void task_files_arm_timeout(struct task *t)
{
    if (t->stage && t->spec.files_streamed > 0) {
        uv_timer_start(&t->timer, files_timeout_cb,
                       (t->pool->pc->files_timeout_ns + 999999) / 1000000, 0);
    }
}

int task_file_chunk(struct task *t, const char *data, size_t len)
{
    if (t->state == TASK_DONE || t->exited) {
        return 0; /* the task ended already: late bytes are dropped, as late stdin is */
    }
    uint64_t declared = t->spec.files_streamed;
    if (len > declared - t->files_received) {
        struct err e = ERR_INIT;
        err_setx(&e, -EPROTO,
                 "exec.file: more bytes than the request's files declared (%llu); the task is "
                 "not run",
                 (unsigned long long)declared);
        if (t->state == TASK_RUNNING || t->state == TASK_FINISHING) {
            t->error = e;
            task_kill(t, KILL_FILES);
        } else {
            task_abort(t, &e, true);
        }
        return -EPROTO;
    }
    if (len == 0) {
        return 0;
    }
    struct task_stage *st = t->stage;
    struct file_chunk *c = xmalloc(sizeof(*c) + len);
    c->next = NULL;
    c->len = len;
    memcpy(c->data, data, len);
    if (st->q_tail) {
        st->q_tail->next = c;
    } else {
        st->q_head = c;
    }
    st->q_tail = c;
    st->q_bytes += len;
    t->files_received += len;
    /* Counted as stdin is, so that the connection stops reading while these wait. */
    if (t->sink.ops) {
        t->sink.ops->stdin_queued(&t->sink, len);
    }
    if (t->files_received == declared) {
        uv_timer_stop(&t->timer); /* every byte came: files_timeout no longer applies */
    }
    stage_kick(st);
    return 0;
}

size_t task_files_pending(const struct task *t)
{
    return t->stage ? t->stage->q_bytes + t->stage->batch_bytes : 0;
}

/* ---- COLLECTING ---- */

static void collect_work(struct workq_job *j)
{
    struct collect_job *cj = container_of(j, struct collect_job, job);
    cj->r = workspace_collect(cj->root, cj->patterns, cj->n, &cj->lim, &cj->out, &cj->e);
}

static void collect_done(struct workq_job *j)
{
    struct collect_job *cj = container_of(j, struct collect_job, job);
    struct task *t = cj->t;
    cj->root = fd_close(cj->root);
    t->collecting = false;
    t->collected = true;
    if (cj->r < 0) {
        log_warn("task=%s msg=\"collect failed, the result has no files\" detail=\"%s\"", t->id,
                 err_msg(&cj->e));
        t->collect_failed = true;
    } else {
        t->collect = cj->out;
        t->files_out_bytes = cj->out.bytes;
    }
    free(cj);
    task_maybe_finish(t);
    task_unref(t);
}

bool task_files_collect(struct task *t)
{
    if (!t->spec.has_collect || t->collected) {
        return false;
    }
    if (t->collecting) {
        return true;
    }
    /* Nobody to send it to, or sbxd is draining, or the task never had its files: none. */
    if (t->collect_fd < 0 || !t->sink.ops || t->files_failed || t->kill == KILL_CLIENT ||
        t->kill == KILL_SHUTDOWN) {
        t->collected = true;
        return false;
    }
    const struct pool_config *pc = t->pool->pc;
    struct collect_job *cj = xcalloc(1, sizeof(*cj));
    cj->t = t;
    cj->root = take_fd(&t->collect_fd);
    cj->patterns = (const char *const *)t->spec.collect;
    cj->n = t->spec.n_collect;
    cj->lim = (struct workspace_limits){
        .max_bytes = pc->collect_max_bytes,
        .max_files = pc->collect_max_files,
        .max_skipped = COLLECT_MAX_SKIPPED,
    };
    t->collecting = true;
    t->open_handles++; /* the job holds the task */
    workq_submit(t->env->workq, &cj->job, collect_work, collect_done);
    return true;
}

/* ---- the result ---- */

/* A path from the sandbox: a str when it is UTF-8 (nearly always), else bin with its bytes
 * as they are, so that a client can still name the file it got. */
static void pack_path(msgpack_packer *pk, const char *p)
{
    size_t n = strlen(p);
    size_t i = 0;
    size_t k;
    while (i < n && (k = proto_utf8_seq(p + i, n - i)) > 0) {
        i += k;
    }
    proto_pack_cstr(pk, "path");
    if (i == n) {
        (void)msgpack_pack_str_with_body(pk, p, n);
    } else {
        (void)msgpack_pack_bin_with_body(pk, p, n);
    }
}

uint32_t task_files_result_keys(const struct task *t)
{
    return 2 + (t->spec.has_collect ? 3 : 0);
}

void task_files_pack_result(const struct task *t, msgpack_packer *pk)
{
    proto_pack_kv_u64(pk, "files_in_bytes", t->files_in_bytes);
    proto_pack_kv_u64(pk, "files_out_bytes", t->files_out_bytes);
    if (!t->spec.has_collect) {
        return;
    }
    const struct workspace_collect *c = &t->collect;
    proto_pack_cstr(pk, "files");
    msgpack_pack_array(pk, c->n_files);
    for (size_t i = 0; i < c->n_files; i++) {
        const struct workspace_file *f = &c->files[i];
        msgpack_pack_map(pk, 5);
        pack_path(pk, f->path);
        proto_pack_kv_u64(pk, "mode", f->mode);
        proto_pack_kv_u64(pk, "size", f->size);
        proto_pack_cstr(pk, "data");
        msgpack_pack_bin_with_body(pk, f->data ? f->data : "", f->len);
        proto_pack_kv_bool(pk, "truncated", f->truncated);
    }
    proto_pack_cstr(pk, "skipped");
    msgpack_pack_array(pk, c->n_skipped);
    for (size_t i = 0; i < c->n_skipped; i++) {
        msgpack_pack_map(pk, 2);
        pack_path(pk, c->skipped[i].path);
        proto_pack_kv_str(pk, "reason", c->skipped[i].reason);
    }
    proto_pack_kv_bool(pk, "collect_truncated", c->truncated || t->collect_failed);
}

void task_files_drop_result(struct task *t)
{
    workspace_collect_free(&t->collect);
    memset(&t->collect, 0, sizeof(t->collect));
}

void task_files_free(struct task *t)
{
    struct task_stage *st = t->stage;
    if (st) {
        chunks_free(st->q_head);
        chunks_free(st->batch);
        st->cur_fd = fd_close(st->cur_fd);
        st->root = fd_close(st->root);
        task_spec_files_free(st->files, st->n_files);
        free(st);
        t->stage = NULL;
    }
    t->collect_fd = fd_close(t->collect_fd);
    task_files_drop_result(t);
}
