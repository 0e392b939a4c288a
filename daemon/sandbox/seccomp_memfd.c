/* SPDX-License-Identifier: MIT */
/* seccomp profiles and vm.memfd_noexec: whether sbxd can set the sysctl in its sandboxes'
 * pid namespaces (spawn.c does), decided once per process, so that the profiles refuse
 * memfd_create exactly where it cannot (docs/SECCOMP.md, "Exec from writable memory").
 * Opens one file (spawn.c's helpers write it); never logs or forks. */
#include "sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

static pthread_once_t memfd_once = PTHREAD_ONCE_INIT;
static int memfd_fd = -ENOENT;

static void memfd_open(void)
{
    /* Opening checks what the write will (the file is the host root's, mode 0644); it
     * fails without the sysctl (linux < 6.3) or where /proc/sys is read-only. */
    int fd = open("/proc/sys/vm/memfd_noexec", O_WRONLY | O_CLOEXEC);
    memfd_fd = fd < 0 ? -errno : fd;
}

int seccomp_memfd_noexec_fd(void)
{
    (void)pthread_once(&memfd_once, memfd_open);
    return memfd_fd;
}
