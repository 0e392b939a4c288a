/* SPDX-License-Identifier: MIT */
#pragma once
/* Pool images. A pool's `image:` is "host" (read-only binds of the host's /usr) or the name
 * of a tree that images/build.sh built under images_dir/NAME: root/ and a manifest holding
 * the tree's hash (docs/IMAGES.md). sbxd checks a built tree against its manifest on a
 * worker thread before the pool's first sandbox, refuses an altered one, and falls back to
 * the host image for an image that was never built. Sandboxes get the verified root as an
 * fd, never by path. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <stddef.h>
#include <uv.h>

#include "lib/err.h"

struct config;
struct image;

/* A pool's use of an image, for image_setup: img is filled in (shared by the uses that name
 * the same image). */
struct image_use {
    const char *pool;  /* the pool's name, for log lines and the verification order */
    const char *image; /* its config's image: "host" or a built one's name */
    struct image *img;
};

/* A verification ended (verified or refused): the pools waiting for it may create now. */
typedef void (*image_ready_cb)(void *arg);

enum image_state {
    IMAGE_HOST,      /* the host image: named "host", or standing in for one never built */
    IMAGE_VERIFYING, /* built; its tree is being checked against its manifest */
    IMAGE_READY,     /* verified: sandboxes get its root */
    IMAGE_REFUSED,   /* altered, unreadable or unsafe: its pools cannot create sandboxes */
};

struct image_hash {
    char hex[65];   /* sha256 of the tree, lowercase hex (docs/IMAGES.md, "The tree hash") */
    uint64_t files; /* entries hashed, the root included */
    uint64_t bytes; /* bytes of regular files */
};

/* Hashes the tree of the directory dirfd (O_PATH is enough) into *ret. SECURITY: refuses a
 * tree holding a device node, fifo or socket, a setuid or setgid file, an entry writable by
 * group or others, or one not owned by root (0:0), since any of them could let someone
 * other than root change the image after it was verified. When *cancel becomes true (cancel
 * may be NULL) it stops with -ECANCELED. Returns 0 or -errno with e naming the path.
 * Blocking (reads the whole tree): a worker thread, or start-up. */
int image_hash_tree(int dirfd, const atomic_bool *cancel, struct image_hash *ret, struct err *e);

/* `sbxd --image-hash DIR`: hashes DIR and prints "tree sha256:HEX", "files N" and "bytes N"
 * lines for the manifest. Returns the process exit code (0, or 1 with a message on
 * stderr). Start-up only. */
int image_hash_main(const char *path);

/* Where built images are: cfg->images_dir, unset: <state_dir>/images (xmalloc'd). */
char *image_dir_of(const struct config *cfg);
/* Start-up, before the loop runs: gives each use its image (uses[i].img), shared by uses
 * that name the same one, from cfg->images_dir (unset:
 * <state_dir>/images). An image never built falls back to the host image, said once in
 * the log, unless `require` is set: then it returns -ENOENT with e naming the pool and the
 * missing manifest; with `require` an unreadable manifest is an error too (else the image
 * is refused). Built images are verified one after the other on the loop's worker threads
 * (image_pending holds their pools' refills until then; ready(arg) is called on the loop
 * as each one ends). *ret is the list of images, freed by image_list_free after the loop
 * ends. Returns 0 or -errno with e. */
int image_setup(uv_loop_t *loop, const struct config *cfg, struct image_use *uses, size_t n_uses,
                bool require, image_ready_cb ready, void *arg, struct image **ret, struct err *e);
/* Drain (loop thread): a verification of the list still running stops early; none is
 * started. */
void image_cancel_all(struct image *list);
/* Whether img is still being verified (no sandbox of it can be made yet). NULL: false. */
bool image_pending(const struct image *img);
/* Frees the list from image_setup (closing the roots) and returns NULL. The loop must have
 * ended: no verification is running. */
struct image *image_list_free(struct image *list);

/* For a sandbox's CTL_SETUP (worker thread; img's state no longer changes once its pool
 * creates sandboxes): *ret_fd is a fresh detached copy (open_tree clone, CLOEXEC, owned by
 * the caller) of the verified root for init to attach in its own mount namespace, and
 * *ret_path names it; or -1 and "/" for the host image (img NULL too). With ret_fd NULL,
 * only the checks and *ret_path (for a fork server, which holds a copy already). Returns
 * 0, -EACCES when the image was refused, -EAGAIN while it is being verified, or the -errno
 * of the clone, with e saying why. */
int image_sandbox_root(const struct image *img, int *ret_fd, const char **ret_path, struct err *e);
/* The state as a word for `pools`: "host", "not_built" (host image standing in), "verifying",
 * "verified" or "refused". img NULL: "host". */
const char *image_state_name(const struct image *img);
