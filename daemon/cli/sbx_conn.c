/* SPDX-License-Identifier: MIT */
/* sbx's connection to sbxd: a non-blocking Unix socket, a reader bounded by SBX_MAX_MSG and
 * a send queue. It only moves bytes and splits messages; what they mean is sbx_rpc.c's and
 * the commands'. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "lib/util.h"

/* The largest message accepted from sbxd: its largest result. exec's collect brings at most
 * 64 MiB of file data (a pool's collect_max_bytes, CONFIG_COLLECT_BYTES_MAX) and 10000 paths
 * (collect_max_files) of at most 65 components of 255 bytes (workspace.c's walk depth), about
 * 163 MiB in the worst case; captured output adds a pool's output_cap, at most 64 MiB. A
 * bound, not an allocation: the reader holds only what arrives. The default pool's largest
 * result is about 17 MiB. */
#define SBX_MAX_MSG (320u << 20)
#define SBX_READ_CHUNK (64u << 10) /* socket read size */

void sbx_conn_close(struct sbx_conn *c)
{
    c->fd = fd_close(c->fd);
    c->reader = proto_reader_free(c->reader);
    byteq_release(&c->out);
}

int sbx_conn_open(struct sbx_conn *c, const char *path, struct err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    scoped_close int fd = -1;
    int r;

    *c = (struct sbx_conn){.fd = -1, .next_msgid = 1};
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return err_setx(e, -ENAMETOOLONG, "socket path too long (%zu bytes, at most %zu): '%s'",
                        strlen(path), sizeof(sa.sun_path) - 1, path);
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return err_setx(e, -errno, "socket: %s", strerror(errno));
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = errno;
        /* Who may connect is the socket's mode and group: say so, not just EACCES. */
        const char *hint = err == EACCES ? " (run as root, or as a member of sbxd's "
                                           "socket_group for the agents' socket)"
                                         : "";
        return err_setx(e, -err, "cannot connect to sbxd at '%s': %s%s", path, strerror(err), hint);
    }
    r = fd_set_nonblock(fd, true);
    if (r < 0) {
        return err_setx(e, r, "socket: %s", strerror(-r));
    }
    r = proto_reader_new(SBX_MAX_MSG, &c->reader);
    if (r < 0) {
        return err_setx(e, r, "out of memory");
    }
    msgpack_packer_init(&c->pk, &c->out, byteq_pack_cb);
    c->fd = take_fd(&fd);
    return 0;
}

int sbx_conn_send(struct sbx_conn *c, struct err *e)
{
    while (byteq_pending(&c->out) > 0 && !c->write_closed) {
        ssize_t n = send(c->fd, byteq_data(&c->out), byteq_pending(&c->out), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return 0;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            /* sbxd went away: what it said before is still readable. */
            c->write_closed = true;
            byteq_release(&c->out);
            return 0;
        }
        if (n < 0) {
            return err_setx(e, -errno, "sending to sbxd: %s", strerror(errno));
        }
        byteq_consume(&c->out, (size_t)n);
    }
    return 0;
}

int sbx_conn_recv(struct sbx_conn *c, struct err *e)
{
    char *p;
    size_t len;
    int r = proto_reader_buffer(c->reader, SBX_READ_CHUNK, &p, &len);
    if (r < 0) {
        return err_setx(e, r, "message from sbxd above the %u byte limit", SBX_MAX_MSG);
    }
    ssize_t n = RETRY_EINTR(read(c->fd, p, len));
    if (n < 0 && errno == EAGAIN) {
        return 0;
    }
    if (n < 0 && errno == ECONNRESET) {
        c->eof = true;
        return 0;
    }
    if (n < 0) {
        return err_setx(e, -errno, "reading from sbxd: %s", strerror(errno));
    }
    if (n == 0) {
        c->eof = true;
        return 0;
    }
    proto_reader_consumed(c->reader, (size_t)n);
    return 0;
}

int sbx_conn_next(struct sbx_conn *c, struct proto_msg *ret, struct err *e)
{
    for (;;) {
        struct err pe = ERR_INIT;
        int r = proto_reader_next(c->reader, ret, &pe);
        if (r == -EPROTO) {
            proto_msg_done(ret);
            continue;
        }
        if (r < 0) {
            return err_setx(e, r, "bad message from sbxd: %s", err_msg(&pe));
        }
        return r;
    }
}
