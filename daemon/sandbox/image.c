/* SPDX-License-Identifier: MIT */
/* Pool images: lookup under images_dir, the manifest, the tree hash (one definition, used by
 * `sbxd --image-hash` when an image is built and by the verification here), and the
 * background verification that holds a pool's refills until its image is known good.
 * Hashing runs only on a worker thread or before the loop starts: never on the loop. */
#define LOG_MOD "image"
#include "sandbox/image.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "lib/alloc.h"
#include "config/config.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/sys.h"
#include "lib/util.h"

/* A manifest is a package list and a few lines; a bigger one is not ours. */
#define IMAGE_MANIFEST_MAX (4 * 1024 * 1024)
#define IMAGE_DEPTH_MAX 64
#define IMAGE_DIR_ENTRIES_MAX (1024 * 1024)
#define IMAGE_READ_BUF (256 * 1024)
#define IMAGE_HEX_LEN 64

struct image {
    struct image *next; /* image_setup's list, in verification order */
    uv_loop_t *loop;
    image_ready_cb ready; /* a verification ended (image_setup's caller) */
    void *ready_arg;
    char *name;
    char *dir;       /* images_dir/name; NULL for "host" */
    char *root_path; /* dir/root: what sandboxes' messages call the image */
    enum image_state state;
    bool fallback; /* named a built image, but none was there: the host image stands in */
    bool started;  /* its verification was queued */
    int root_fd;   /* O_PATH of root/, opened once: the tree verified is the one used */
    char expect[IMAGE_HEX_LEN + 1];
    uint64_t size;  /* the manifest's "bytes": smaller images are verified first */
    struct err why; /* IMAGE_REFUSED: the reason */
    /* Written by the worker, read by the loop once the work is done. */
    struct image_hash got;
    int work_r;
    struct err work_err;
    uint64_t started_ns;
    atomic_bool cancel;
    uv_work_t work;
};

/* ---- the tree hash (docs/IMAGES.md, "The tree hash") ---- */

struct walk {
    crypto_hash_sha256_state h;
    const atomic_bool *cancel;
    char *buf; /* IMAGE_READ_BUF bytes */
    char path[PATH_MAX];
    uint64_t files;
    uint64_t bytes;
};

static void closedirp(DIR **d)
{
    if (*d) {
        (void)closedir(*d);
    }
}

static bool walk_cancelled(const struct walk *w)
{
    return w->cancel && atomic_load_explicit(w->cancel, memory_order_relaxed);
}

/* SECURITY: what would let anyone but root change the tree once it is verified, or bring
 * a device into a sandbox, is refused outright. */
static int walk_check(const struct walk *w, const struct stat *st, struct err *e)
{
    mode_t m = st->st_mode;
    if (!S_ISDIR(m) && !S_ISREG(m) && !S_ISLNK(m)) {
        return err_setx(e, -EPERM, "%s: not a file, directory or symlink (mode 0%o)", w->path,
                        (unsigned)m);
    }
    if (st->st_uid != 0 || st->st_gid != 0) {
        return err_setx(e, -EPERM, "%s: owned by %u:%u, not by root", w->path, (unsigned)st->st_uid,
                        (unsigned)st->st_gid);
    }
    if (!S_ISLNK(m) && (m & (S_ISUID | S_ISGID))) {
        return err_setx(e, -EPERM, "%s: setuid or setgid (mode %04o)", w->path,
                        (unsigned)(m & 07777));
    }
    if (!S_ISLNK(m) && (m & (S_IWGRP | S_IWOTH))) {
        return err_setx(e, -EPERM, "%s: writable by group or others (mode %04o)", w->path,
                        (unsigned)(m & 07777));
    }
    return 0;
}

/* One entry's record: path NUL "T MODE UID GID SIZE" NUL, then SIZE bytes of payload (the
 * file's contents or the link's target) fed by the caller. */
static void walk_header(struct walk *w, const struct stat *st, uint64_t size)
{
    char hdr[96];
    char type = S_ISDIR(st->st_mode) ? 'd' : S_ISLNK(st->st_mode) ? 'l' : 'f';
    int n =
        snprintf(hdr, sizeof(hdr), "%c %04o %u %u %" PRIu64, type, (unsigned)(st->st_mode & 07777),
                 (unsigned)st->st_uid, (unsigned)st->st_gid, size);
    (void)crypto_hash_sha256_update(&w->h, (const unsigned char *)w->path, strlen(w->path) + 1);
    (void)crypto_hash_sha256_update(&w->h, (const unsigned char *)hdr, (size_t)n + 1);
    w->files++;
}

/* Opens name below dfd without following a symlink and checks it is still the entry that
 * was checked (a rename in between would swap in an unchecked one). */
static int walk_open(struct walk *w, int dfd, const char *name, int flags, const struct stat *st,
                     struct err *e)
{
    int fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return err_set(e, -errno, "open %s", w->path);
    }
    struct stat now;
    if (fstat(fd, &now) < 0) {
        int r = -errno;
        (void)fd_close(fd);
        return err_set(e, r, "stat %s", w->path);
    }
    if (now.st_dev != st->st_dev || now.st_ino != st->st_ino || now.st_mode != st->st_mode) {
        (void)fd_close(fd);
        return err_setx(e, -EAGAIN, "%s changed while it was being hashed", w->path);
    }
    return fd;
}

static int walk_file(struct walk *w, int dfd, const char *name, const struct stat *st,
                     struct err *e)
{
    scoped_close int fd = walk_open(w, dfd, name, O_RDONLY, st, e);
    if (fd < 0) {
        return fd;
    }
    uint64_t left = (uint64_t)st->st_size;
    walk_header(w, st, left);
    while (left > 0) {
        if (walk_cancelled(w)) {
            return err_setx(e, -ECANCELED, "cancelled");
        }
        size_t want = left < IMAGE_READ_BUF ? (size_t)left : IMAGE_READ_BUF;
        ssize_t n = RETRY_EINTR(read(fd, w->buf, want));
        if (n < 0) {
            return err_set(e, -errno, "read %s", w->path);
        }
        if (n == 0) {
            return err_setx(e, -EAGAIN, "%s shrank while it was being hashed", w->path);
        }
        (void)crypto_hash_sha256_update(&w->h, (const unsigned char *)w->buf, (size_t)n);
        left -= (uint64_t)n;
    }
    ssize_t n = RETRY_EINTR(read(fd, w->buf, 1));
    if (n != 0) {
        return n < 0 ? err_set(e, -errno, "read %s", w->path)
                     : err_setx(e, -EAGAIN, "%s grew while it was being hashed", w->path);
    }
    w->bytes += (uint64_t)st->st_size;
    return 0;
}

static int walk_link(struct walk *w, int dfd, const char *name, const struct stat *st,
                     struct err *e)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(dfd, name, target, sizeof(target));
    if (n < 0) {
        return err_set(e, -errno, "readlink %s", w->path);
    }
    if ((size_t)n >= sizeof(target)) {
        return err_setx(e, -ENAMETOOLONG, "%s: link target too long", w->path);
    }
    walk_header(w, st, (uint64_t)n);
    (void)crypto_hash_sha256_update(&w->h, (const unsigned char *)target, (size_t)n);
    return 0;
}

static int walk_list(struct walk *w, DIR *dir, struct strv *ns, struct err *e)
{
    struct dirent *de;
    errno = 0;
    while ((de = readdir(dir))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (ns->n == IMAGE_DIR_ENTRIES_MAX) {
            return err_setx(e, -E2BIG, "%s: more than %d entries", w->path, IMAGE_DIR_ENTRIES_MAX);
        }
        strv_push(ns, de->d_name);
        errno = 0;
    }
    if (errno != 0) {
        return err_set(e, -errno, "read directory %s", w->path);
    }
    strv_sort(ns);
    return 0;
}

/* Hashes the entries of the directory fd (owned: closed here) at w->path, in byte order of
 * their names, each directory's record before its contents. */
static int walk_dir(struct walk *w, int fd, unsigned depth, struct err *e)
{
    scoped(closedirp) DIR *dir = fdopendir(fd);
    if (!dir) {
        int r = -errno;
        (void)fd_close(fd);
        return err_set(e, r, "opendir %s", w->path);
    }
    scoped_strv struct strv ns = STRV_INIT;
    int r = walk_list(w, dir, &ns, e);
    if (r < 0) {
        return r;
    }
    int dfd = dirfd(dir);
    size_t base = strlen(w->path);
    bool top = strcmp(w->path, ".") == 0;
    for (size_t i = 0; i < ns.n; i++) {
        const char *name = ns.v[i];
        if (walk_cancelled(w)) {
            return err_setx(e, -ECANCELED, "cancelled");
        }
        int len = top ? snprintf(w->path, sizeof(w->path), "%s", name)
                      : snprintf(w->path + base, sizeof(w->path) - base, "/%s", name);
        if (len < 0 || (size_t)len >= sizeof(w->path) - (top ? 0 : base)) {
            w->path[top ? 0 : base] = '\0';
            return err_setx(e, -ENAMETOOLONG, "%s/%s: path too long", w->path, name);
        }
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            return err_set(e, -errno, "stat %s", w->path);
        }
        r = walk_check(w, &st, e);
        if (r < 0) {
            return r;
        }
        if (S_ISDIR(st.st_mode)) {
            if (depth + 1 > IMAGE_DEPTH_MAX) {
                return err_setx(e, -ELOOP, "%s: deeper than %d directories", w->path,
                                IMAGE_DEPTH_MAX);
            }
            int cfd = walk_open(w, dfd, name, O_RDONLY | O_DIRECTORY, &st, e);
            if (cfd < 0) {
                return cfd;
            }
            walk_header(w, &st, 0);
            r = walk_dir(w, cfd, depth + 1, e);
        } else if (S_ISREG(st.st_mode)) {
            r = walk_file(w, dfd, name, &st, e);
        } else {
            r = walk_link(w, dfd, name, &st, e);
        }
        if (r < 0) {
            return r;
        }
        if (top) {
            (void)str_copy(w->path, ".", sizeof(w->path));
        } else {
            w->path[base] = '\0';
        }
    }
    return 0;
}

int image_hash_tree(int dirfd, const atomic_bool *cancel, struct image_hash *ret, struct err *e)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return err_set(e, -errno, "open the tree's root");
    }
    scoped_free struct walk *w = xcalloc(1, sizeof(*w));
    scoped_free char *buf = xmalloc(IMAGE_READ_BUF);
    w->buf = buf;
    w->cancel = cancel;
    (void)str_copy(w->path, ".", sizeof(w->path));
    (void)crypto_hash_sha256_init(&w->h);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int r = -errno;
        (void)fd_close(fd);
        return err_set(e, r, "stat the tree's root");
    }
    int r = walk_check(w, &st, e);
    if (r < 0) {
        (void)fd_close(fd);
        return r;
    }
    walk_header(w, &st, 0);
    r = walk_dir(w, fd, 0, e);
    if (r < 0) {
        return r;
    }
    unsigned char sum[crypto_hash_sha256_BYTES];
    (void)crypto_hash_sha256_final(&w->h, sum);
    str_hex_encode(sum, sizeof(sum), ret->hex);
    ret->files = w->files;
    ret->bytes = w->bytes;
    return 0;
}

int image_hash_main(const char *path)
{
    struct err e = ERR_INIT;
    struct image_hash h;
    if (sodium_init() < 0) {
        fprintf(stderr, "sbxd: libsodium cannot start\n");
        return 1;
    }
    scoped_close int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sbxd: image tree '%s': %s\n", path, strerror(errno));
        return 1;
    }
    if (image_hash_tree(fd, NULL, &h, &e) < 0) {
        fprintf(stderr, "sbxd: image tree '%s': %s\n", path, err_msg(&e));
        return 1;
    }
    printf("tree sha256:%s\nfiles %" PRIu64 "\nbytes %" PRIu64 "\n", h.hex, h.files, h.bytes);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- lookup and the manifest ---- */

static struct image *image_new(uv_loop_t *loop, image_ready_cb ready, void *arg, const char *name)
{
    struct image *img = xcalloc(1, sizeof(*img));
    img->loop = loop;
    img->ready = ready;
    img->ready_arg = arg;
    img->name = xstrdup(name);
    img->size = UINT64_MAX;
    img->root_fd = -1;
    img->state = IMAGE_HOST;
    atomic_init(&img->cancel, false);
    return img;
}

static struct image *image_free(struct image *img)
{
    if (img) {
        img->root_fd = fd_close(img->root_fd);
        free(img->name);
        free(img->dir);
        free(img->root_path);
        free(img);
    }
    return NULL;
}

struct image *image_list_free(struct image *list)
{
    while (list) {
        struct image *next = list->next;
        image_free(list);
        list = next;
    }
    return NULL;
}

static void image_list_freep(struct image **list)
{
    *list = image_list_free(*list);
}

static bool hex_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* Reads dir/manifest: "format 1", "name NAME" and "tree sha256:HEX" are what sbxd needs;
 * other lines (packages, build facts) are for people. */
static int image_read_manifest(struct image *img, int dirfd, struct err *e)
{
    scoped_free char *buf = xmalloc(IMAGE_MANIFEST_MAX + 1);
    ssize_t n = file_read_small(dirfd, "manifest", buf, IMAGE_MANIFEST_MAX + 1);
    if (n < 0) {
        return err_set(e, (int)n, "read %s/manifest", img->dir);
    }
    if ((size_t)n >= IMAGE_MANIFEST_MAX) {
        return err_setx(e, -EFBIG, "%s/manifest is larger than %d bytes", img->dir,
                        IMAGE_MANIFEST_MAX);
    }
    bool format = false, name = false;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strcmp(line, "format 1") == 0) {
            format = true;
        } else if (strncmp(line, "name ", 5) == 0) {
            if (strcmp(line + 5, img->name) != 0) {
                return err_setx(e, -EINVAL, "%s/manifest is for image '%.64s'", img->dir, line + 5);
            }
            name = true;
        } else if (strncmp(line, "tree sha256:", 12) == 0) {
            const char *hex = line + 12;
            if (strlen(hex) != IMAGE_HEX_LEN || !hex_ok(hex, IMAGE_HEX_LEN)) {
                return err_setx(e, -EINVAL, "%s/manifest: malformed tree hash", img->dir);
            }
            (void)str_copy(img->expect, hex, sizeof(img->expect));
        } else if (strncmp(line, "bytes ", 6) == 0) {
            (void)parse_u64(line + 6, &img->size);
        }
    }
    if (!format || !name || !img->expect[0]) {
        return err_setx(e, -EINVAL, "%s/manifest lacks a 'format 1', 'name' or 'tree' line",
                        img->dir);
    }
    return 0;
}

/* Opens a built image: 0 (root opened, manifest read), -ENOENT when it was never built, or
 * another -errno with e. */
static int image_open(struct image *img, const char *images_dir, struct err *e)
{
    img->dir = xasprintf("%s/%s", images_dir, img->name);
    img->root_path = xasprintf("%s/root", img->dir);
    scoped_close int dfd = open(img->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return err_set(e, -errno, "open %s", img->dir);
    }
    struct stat st;
    if (fstatat(dfd, "manifest", &st, 0) < 0 && errno == ENOENT) {
        return err_set(e, -ENOENT, "no %s/manifest", img->dir);
    }
    /* SECURITY: O_NOFOLLOW: root/ itself must be the directory that is verified. */
    img->root_fd = openat(dfd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (img->root_fd < 0 && errno == ENOENT) {
        /* A manifest without its tree was built and then damaged: refused, not a fallback. */
        return err_setx(e, -EINVAL, "%s has a manifest but no root/ tree", img->dir);
    }
    if (img->root_fd < 0) {
        return err_set(e, -errno, "open %s", img->root_path);
    }
    return image_read_manifest(img, dfd, e);
}

static void image_refuse(struct image *img, const struct err *why)
{
    img->state = IMAGE_REFUSED;
    img->why = *why;
    img->root_fd = fd_close(img->root_fd);
}

/* ---- verification: one image at a time, so that the worker threads stay free for
 * sandbox creation ---- */

static void verify_work(uv_work_t *w)
{
    struct image *img = container_of(w, struct image, work);
    img->work_r = image_hash_tree(img->root_fd, &img->cancel, &img->got, &img->work_err);
}

static void image_verify_next(struct image *from);

static void verify_done(uv_work_t *w, int status)
{
    struct image *img = container_of(w, struct image, work);
    uint64_t ms = (clock_now_ns() - img->started_ns) / 1000000;

    if (status == UV_ECANCELED || img->work_r == -ECANCELED) {
        log_info("image=%s msg=\"verification stopped: shutting down\"", img->name);
        return;
    }
    if (img->work_r < 0) {
        image_refuse(img, &img->work_err);
        log_error("image=%s root=%s msg=\"refusing image: its tree cannot be verified; pools "
                  "using it cannot start sandboxes\" detail=\"%s\"",
                  img->name, img->root_path, err_msg(&img->why));
    } else if (strcmp(img->got.hex, img->expect) != 0) {
        struct err why = ERR_INIT;
        (void)err_setx(&why, -EACCES,
                       "altered: its tree hashes to sha256:%.12s..., its manifest says "
                       "sha256:%.12s...; rebuild it (make images)",
                       img->got.hex, img->expect);
        image_refuse(img, &why);
        log_error("image=%s root=%s found=sha256:%s expected=sha256:%s msg=\"refusing altered "
                  "image: its tree does not match its manifest; pools using it cannot start "
                  "sandboxes\"",
                  img->name, img->root_path, img->got.hex, img->expect);
    } else {
        img->state = IMAGE_READY;
        log_info("image=%s root=%s files=%" PRIu64 " bytes=%" PRIu64 " ms=%" PRIu64
                 " msg=\"image verified\"",
                 img->name, img->root_path, img->got.files, img->got.bytes, ms);
    }
    image_verify_next(img->next);
    img->ready(img->ready_arg);
}

static void image_verify_next(struct image *from)
{
    for (struct image *img = from; img; img = img->next) {
        if (img->state != IMAGE_VERIFYING || img->started) {
            continue;
        }
        if (atomic_load(&img->cancel)) {
            return; /* draining */
        }
        img->started = true;
        img->started_ns = clock_now_ns();
        int r = uv_queue_work(img->loop, &img->work, verify_work, verify_done);
        if (r == 0) {
            return;
        }
        struct err why = ERR_INIT;
        (void)err_setx(&why, r, "cannot queue its verification: %s", uv_strerror(r));
        image_refuse(img, &why);
        log_error("image=%s msg=\"refusing image: %s\"", img->name, err_msg(&why));
    }
}

/* Names of the pools using img, for log lines. */
static void pools_of(const struct image_use *uses, size_t n_uses, const struct image *img,
                     char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n_uses && off < size; i++) {
        if (uses[i].img == img) {
            int n = snprintf(buf + off, size - off, "%s%s", off ? "," : "", uses[i].pool);
            off += n > 0 ? (size_t)n : 0;
        }
    }
}

/* The verification order: the default pool's image first, then the smaller before the
 * larger, so that most pools can start soonest. Returns the reordered list. */
static struct image *image_order(const struct image_use *uses, size_t n_uses,
                                 const char *default_pool, struct image *list)
{
    const struct image_use *def = NULL;
    for (size_t i = 0; i < n_uses; i++) {
        if (strcmp(uses[i].pool, default_pool) == 0) {
            def = &uses[i];
        }
    }
    struct image *sorted = NULL;
    while (list) {
        struct image *img = list;
        list = img->next;
        bool img_first = def && def->img == img;
        struct image **pp = &sorted;
        while (*pp) {
            bool cur_first = def && def->img == *pp;
            if (img_first && !cur_first) {
                break;
            }
            if (!img_first && !cur_first && img->size < (*pp)->size) {
                break;
            }
            pp = &(*pp)->next;
        }
        img->next = *pp;
        *pp = img;
    }
    return sorted;
}

char *image_dir_of(const struct config *cfg)
{
    return cfg->images_dir ? xstrdup(cfg->images_dir) : xasprintf("%s/images", cfg->state_dir);
}

int image_setup(uv_loop_t *loop, const struct config *cfg, struct image_use *uses, size_t n_uses,
                bool require, image_ready_cb ready, void *arg, struct image **ret, struct err *e)
{
    scoped_free char *conf_dir = image_dir_of(cfg);
    char real[PATH_MAX];
    /* Absolute when it exists, so that log lines and sandboxes' messages say where. */
    const char *images_dir = realpath(conf_dir, real) ? real : conf_dir;
    scoped(image_list_freep) struct image *list = NULL;
    struct image **tail = &list;

    if (sodium_init() < 0) {
        return err_setx(e, -EIO, "libsodium cannot start");
    }
    for (size_t i = 0; i < n_uses; i++) {
        const char *name = uses[i].image;
        struct image *img = list;
        while (img && strcmp(img->name, name) != 0) {
            img = img->next;
        }
        if (!img) {
            img = image_new(loop, ready, arg, name);
            *tail = img;
            tail = &img->next;
            if (strcmp(name, "host") != 0) {
                struct err why = ERR_INIT;
                int r = image_open(img, images_dir, &why);
                if (r < 0 && require) {
                    for (size_t j = 0; j < n_uses; j++) {
                        uses[j].img = NULL;
                    }
                    return err_setx(
                        e, r, "pool '%s': image '%s' %s (--require-images): %s", uses[i].pool, name,
                        r == -ENOENT ? "was never built" : "cannot be used", err_msg(&why));
                }
                if (r == -ENOENT) {
                    img->fallback = true;
                    img->root_fd = fd_close(img->root_fd);
                } else if (r < 0) {
                    image_refuse(img, &why);
                } else {
                    img->state = IMAGE_VERIFYING;
                }
            }
        }
        uses[i].img = img;
    }
    list = image_order(uses, n_uses, cfg->default_pool, list);
    for (struct image *img = list; img; img = img->next) {
        char pools[256];
        pools_of(uses, n_uses, img, pools, sizeof(pools));
        if (img->fallback) {
            log_warn("image=%s pools=%s dir=%s msg=\"image not built: using the host image "
                     "instead (make images builds it)\"",
                     img->name, pools, img->dir);
        } else if (img->state == IMAGE_REFUSED) {
            log_error("image=%s pools=%s msg=\"refusing image: its manifest cannot be used; "
                      "pools using it cannot start sandboxes\" detail=\"%s\"",
                      img->name, pools, err_msg(&img->why));
        } else if (img->state == IMAGE_VERIFYING) {
            log_info("image=%s pools=%s root=%s msg=\"verifying the image in the background; "
                     "its pools start sandboxes once it is verified\"",
                     img->name, pools, img->root_path);
        }
    }
    image_verify_next(list);
    *ret = take_ptr(&list);
    return 0;
}

void image_cancel_all(struct image *list)
{
    for (struct image *img = list; img; img = img->next) {
        atomic_store(&img->cancel, true);
    }
}

bool image_pending(const struct image *img)
{
    return img && img->state == IMAGE_VERIFYING;
}

int image_sandbox_root(const struct image *img, int *ret_fd, const char **ret_path, struct err *e)
{
    if (ret_fd) {
        *ret_fd = -1;
    }
    if (!img || img->state == IMAGE_HOST) {
        *ret_path = "/";
        return 0;
    }
    switch (img->state) {
    case IMAGE_READY: {
        /* A clone of the very tree that was verified, not a path: init cannot reach our
         * state dir, and a path could be pointed elsewhere after verification. Init cannot
         * clone our mounts itself (they are in another mount namespace), only attach a
         * detached copy. */
        struct stat st;
        if (fstat(img->root_fd, &st) == 0 && st.st_nlink == 0) {
            return err_setx(e, -ESTALE,
                            "image '%s': %s was removed or replaced after it was verified; "
                            "restart sbxd to verify and use the new one",
                            img->name, img->root_path);
        }
        *ret_path = img->root_path;
        if (!ret_fd) {
            return 0;
        }
        int fd = sys_open_tree(img->root_fd, "",
                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (fd < 0) {
            return err_set(e, fd, "image '%s': clone %s", img->name, img->root_path);
        }
        *ret_fd = fd;
        return 0;
    }
    case IMAGE_REFUSED:
        return err_setx(e, -EACCES, "image '%s' refused: %s", img->name, err_msg(&img->why));
    default:
        return err_setx(e, -EAGAIN, "image '%s' is still being verified", img->name);
    }
}

const char *image_state_name(const struct image *img)
{
    if (!img) {
        return "host";
    }
    switch (img->state) {
    case IMAGE_HOST:
        return img->fallback ? "not_built" : "host";
    case IMAGE_VERIFYING:
        return "verifying";
    case IMAGE_READY:
        return "verified";
    default:
        return "refused";
    }
}
