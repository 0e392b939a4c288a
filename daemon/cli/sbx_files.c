/* SPDX-License-Identifier: MIT */
/* sbx exec's --file: local files sent inline in the request when small and streamed after it
 * as exec.file chunks when not, so that no message comes near sbxd's message bound. Each is
 * sized when it is opened and exactly that many bytes are sent: one that grows meanwhile is
 * cut at its size, one that gets shorter fails sbx (and so cancels the task). */
#include "cli/cli_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/util.h"

void sbx_files_release(struct sbx_files *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        fs->v[i].fd = fd_close(fs->v[i].fd);
        free(take_ptr(&fs->v[i].local));
        free(take_ptr(&fs->v[i].path));
        free(take_ptr(&fs->v[i].data));
    }
    free(take_ptr(&fs->v));
    free(take_ptr(&fs->buf));
    fs->n = 0;
}

int sbx_files_add(struct sbx_files *fs, const char *spec, struct err *e)
{
    const char *colon = strrchr(spec, ':');
    scoped_free char *local = xstrndup(spec, colon ? (size_t)(colon - spec) : strlen(spec));
    scoped_free char *path = NULL;
    scoped_close int fd = -1;
    struct stat st;

    if (local[0] == '\0') {
        return err_setx(e, -EINVAL, "--file needs LOCAL[:PATH], not '%s'", spec);
    }
    if (colon && colon[1] != '\0') {
        path = xstrdup(colon + 1);
    } else {
        const char *slash = strrchr(local, '/');
        path = xstrdup(slash ? slash + 1 : local);
        if (path[0] == '\0') {
            return err_setx(e, -EINVAL, "--file '%s': LOCAL names a directory", spec);
        }
    }
    fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return err_setx(e, -errno, "--file: cannot open '%s': %s", local, strerror(errno));
    }
    if (fstat(fd, &st) < 0) {
        return err_setx(e, -errno, "--file: '%s': %s", local, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return err_setx(e, -EINVAL, "--file: '%s' is not a regular file", local);
    }
    /* Closed until it is read, so that a thousand files need no thousand fds. */
    fs->v = xrealloc(fs->v, (fs->n + 1) * sizeof(*fs->v));
    fs->v[fs->n++] = (struct sbx_file){
        .local = take_ptr(&local),
        .path = take_ptr(&path),
        .fd = -1,
        .dev = st.st_dev,
        .ino = st.st_ino,
        .size = (uint64_t)st.st_size,
        .mode = (uint32_t)st.st_mode & 0777u,
    };
    return 0;
}

/* Opens f again for reading: it must still be the file that was sized and checked. */
static int sbx_files_open(struct sbx_file *f, struct err *e)
{
    struct stat st;
    if (f->fd >= 0) {
        return 0;
    }
    scoped_close int fd = open(f->local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        return err_setx(e, -errno, "--file: cannot open '%s': %s", f->local, strerror(errno));
    }
    if (fstat(fd, &st) < 0) {
        return err_setx(e, -errno, "--file: '%s': %s", f->local, strerror(errno));
    }
    if (!S_ISREG(st.st_mode) || st.st_dev != f->dev || st.st_ino != f->ino) {
        return err_setx(e, -ESTALE, "--file: '%s' was replaced while it was sent", f->local);
    }
    f->fd = take_fd(&fd);
    return 0;
}

void sbx_files_plan(struct sbx_files *fs)
{
    size_t inline_total = 0;
    fs->left = 0;
    for (size_t i = 0; i < fs->n; i++) {
        struct sbx_file *f = &fs->v[i];
        f->streamed = f->size > SBX_FILES_INLINE_MAX ||
                      inline_total + f->size + strlen(f->path) > SBX_FILES_INLINE_TOTAL;
        if (f->streamed) {
            fs->left += f->size;
        } else {
            inline_total += f->size + strlen(f->path);
        }
    }
    fs->next = 0;
    fs->sent = 0;
}

/* Reads exactly n bytes of f at off into p; a file that got shorter is an error. */
static int sbx_files_read(const struct sbx_file *f, uint64_t off, char *p, size_t n, struct err *e)
{
    while (n > 0) {
        ssize_t r = RETRY_EINTR(pread(f->fd, p, n, (off_t)off));
        if (r < 0) {
            return err_setx(e, -errno, "--file: reading '%s': %s", f->local, strerror(errno));
        }
        if (r == 0) {
            return err_setx(e, -EIO, "--file: '%s' got shorter while it was sent", f->local);
        }
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return 0;
}

int sbx_files_load(struct sbx_files *fs, struct err *e)
{
    for (size_t i = 0; i < fs->n; i++) {
        struct sbx_file *f = &fs->v[i];
        if (f->streamed || f->data) {
            continue;
        }
        scoped_free char *data = xmalloc(f->size ? f->size : 1);
        int r = sbx_files_open(f, e);
        if (r >= 0) {
            r = sbx_files_read(f, 0, data, f->size, e);
        }
        f->fd = fd_close(f->fd);
        if (r < 0) {
            return r;
        }
        f->data = take_ptr(&data);
    }
    return 0;
}

void sbx_files_pack(msgpack_packer *pk, const struct sbx_files *fs)
{
    proto_pack_cstr(pk, "files");
    (void)msgpack_pack_array(pk, (uint32_t)fs->n);
    for (size_t i = 0; i < fs->n; i++) {
        const struct sbx_file *f = &fs->v[i];
        (void)msgpack_pack_map(pk, 3);
        proto_pack_kv_str(pk, "path", f->path);
        proto_pack_kv_u64(pk, "mode", f->mode);
        if (f->streamed) {
            proto_pack_kv_u64(pk, "size", f->size);
        } else {
            proto_pack_cstr(pk, "data");
            (void)msgpack_pack_bin_with_body(pk, f->data, f->size);
        }
    }
}

bool sbx_files_streamed(const struct sbx_files *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        if (fs->v[i].streamed) {
            return true;
        }
    }
    return false;
}

bool sbx_files_pending(const struct sbx_files *fs)
{
    return fs->left > 0;
}

int sbx_files_pack_chunk(struct sbx_files *fs, msgpack_packer *pk, uint32_t msgid, struct err *e)
{
    size_t n = 0;
    if (!fs->buf) {
        fs->buf = xmalloc(SBX_FILES_CHUNK);
    }
    /* One chunk may span files: the streamed entries are one byte stream. */
    while (n < SBX_FILES_CHUNK && fs->left > 0) {
        struct sbx_file *f = &fs->v[fs->next];
        if (!f->streamed || fs->sent == f->size) {
            f->fd = fd_close(f->fd);
            fs->next++;
            fs->sent = 0;
            continue;
        }
        uint64_t want = f->size - fs->sent;
        size_t k = want < SBX_FILES_CHUNK - n ? (size_t)want : SBX_FILES_CHUNK - n;
        int r = sbx_files_open(f, e);
        if (r >= 0) {
            r = sbx_files_read(f, fs->sent, fs->buf + n, k, e);
        }
        if (r < 0) {
            return r;
        }
        n += k;
        fs->sent += k;
        fs->left -= k;
    }
    proto_pack_notify(pk, "exec.file");
    (void)msgpack_pack_array(pk, 2);
    (void)msgpack_pack_uint32(pk, msgid);
    (void)msgpack_pack_bin_with_body(pk, fs->buf, n);
    return 0;
}
