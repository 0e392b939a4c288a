/* SPDX-License-Identifier: MIT */
#pragma once
/* A task's files (core/task_files.c): STAGING writes exec's files into its sandbox's /work
 * before the command starts, COLLECTING reads collect's matches back after every process of
 * the sandbox is dead, both as workq jobs. For core/task.c only (task_file_chunk, in
 * core/task.h, is rpc.c's). Loop thread only. */
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct err;
struct sandbox;
struct task;

/* At task_new: the queue for the request's streamed bytes (chunks may arrive before the
 * task has a sandbox), and the files_timeout timer when some are streamed. */
void task_files_init(struct task *t);
/* Arms the files_timeout timer (t->timer, from the request on) when some files are
 * streamed: the task is aborted (status error) if they have not all arrived by then. */
void task_files_arm_timeout(struct task *t);
/* The task has claimed its sandbox sb: keeps a dup of sb's work fd for collect (with
 * collect) and, with files, starts writing them. Returns 1 when staging began (the task
 * is run by task_run once every file is written), 0 when there is nothing to write (the
 * caller runs it now), or -errno with e (the task must not run). */
int task_files_begin(struct task *t, struct sandbox *sb, struct err *e);
/* Stream bytes the task holds in memory for its client's accounting (queued and in a
 * job), which detach_client gives back. */
size_t task_files_pending(const struct task *t);
/* From maybe_finish, once the task exited (every process of its sandbox dead) and its
 * output is drained: starts the collect job when the request has collect and a client to
 * send it to. Returns true while the task must wait for it (task_maybe_finish is called
 * again when it ends), false when the result can go now. */
bool task_files_collect(struct task *t);
/* The result's files keys: their number, and the keys themselves (files_in_bytes,
 * files_out_bytes; with collect files, skipped and collect_truncated). */
uint32_t task_files_result_keys(const struct task *t);
void task_files_pack_result(const struct task *t, msgpack_packer *pk);
/* Frees what the task's files hold (queued chunks, the stage, the collect's result, the
 * work fd's dup). Once no job holds the task. */
void task_files_free(struct task *t);
/* Frees the collect's result once it was sent (it may be megabytes). */
void task_files_drop_result(struct task *t);
