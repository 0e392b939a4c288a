/* SPDX-License-Identifier: MIT */
/* sbx exec's collected files: the result's files written beneath --out's directory by
 * sbx_out.c (which refuses any path that would leave it), what could not be written kept
 * for the report and the JSON, and the result's truncated and skipped entries told on
 * stderr. */
#include "cli/cli_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/util.h"

void sbx_collect_release(struct sbx_collect *co)
{
    for (size_t i = 0; i < co->n_errors; i++) {
        free(take_ptr(&co->errors[i].message));
    }
    free(take_ptr(&co->errors));
    co->n_errors = 0;
}

static void sbx_collect_failed(struct sbx_collect *co, const msgpack_object *path, const char *msg)
{
    char shown[SBX_TEXT_MAX];
    sbx_errorf("collect: cannot write '%s': %s", sbx_text(path, shown, sizeof(shown)), msg);
    co->errors = xrealloc(co->errors, (co->n_errors + 1) * sizeof(*co->errors));
    co->errors[co->n_errors++] = (struct sbx_json_file_error){path, xstrdup(msg)};
}

int sbx_collect_write(const msgpack_object *res, int dirfd, bool quiet, struct sbx_collect *co)
{
    const msgpack_object *files = proto_map_get(res, "files");
    const msgpack_object *skipped = proto_map_get(res, "skipped");
    bool truncated = false;
    char shown[SBX_TEXT_MAX], reason[64];

    for (uint32_t i = 0; files && files->type == MSGPACK_OBJECT_ARRAY && i < files->via.array.size;
         i++) {
        const msgpack_object *f = &files->via.array.ptr[i];
        const msgpack_object *path = proto_map_get(f, "path");
        const char *p = NULL, *data = NULL;
        uint32_t p_len = 0, len = 0;
        uint64_t mode = 0644, size = 0;
        bool cut = false;
        struct err e = ERR_INIT;

        if (!path || !proto_obj_bytes(path, &p, &p_len) ||
            !proto_obj_bytes(proto_map_get(f, "data"), &data, &len) ||
            proto_get_u64(f, "mode", &mode, NULL) < 0 || mode > 0777) {
            sbx_collect_failed(co, path, "malformed file entry from sbxd");
            continue;
        }
        (void)proto_get_u64(f, "size", &size, NULL);
        (void)proto_get_bool(f, "truncated", &cut, NULL);
        if (dirfd >= 0 && sbx_out_write(dirfd, p, p_len, data, len, (uint32_t)mode, &e) < 0) {
            sbx_collect_failed(co, path, err_msg(&e));
            continue;
        }
        if (cut && !quiet) {
            sbx_errorf("collect: '%s' truncated: %" PRIu32 " of its %" PRIu64 " bytes",
                       sbx_text(path, shown, sizeof(shown)), len, size);
        }
    }
    for (uint32_t i = 0;
         !quiet && skipped && skipped->type == MSGPACK_OBJECT_ARRAY && i < skipped->via.array.size;
         i++) {
        const msgpack_object *s = &skipped->via.array.ptr[i];
        sbx_errorf("collect: skipped '%s': %s",
                   sbx_text(proto_map_get(s, "path"), shown, sizeof(shown)),
                   sbx_text(proto_map_get(s, "reason"), reason, sizeof(reason)));
    }
    (void)proto_get_bool(res, "collect_truncated", &truncated, NULL);
    if (truncated && !quiet) {
        sbx_errorf("collect: stopped at the pool's collect limits: not every file matched "
                   "was collected");
    }
    return co->n_errors > 0 ? -EIO : 0;
}
