/* SPDX-License-Identifier: MIT */
/* /proc sampling for sbx-load: VmRSS from status, CPU times from stat. Read-only, and it
 * trusts nothing about the command name, which may hold spaces and parentheses. */
#include "procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/util.h"

int procstat_read(long pid, struct procstat *ret)
{
    char path[64];
    char buf[4096];
    struct procstat s = {0};
    long tck = sysconf(_SC_CLK_TCK);
    ssize_t n;

    if (pid <= 0 || tck <= 0) {
        return -EINVAL;
    }
    (void)snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    n = file_read_small(AT_FDCWD, path, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    const char *p = strstr(buf, "\nVmRSS:");
    if (!p) {
        return -EINVAL; /* kernel threads and zombies have no VmRSS */
    }
    s.rss_bytes = strtoull(p + strlen("\nVmRSS:"), NULL, 10) * 1024;

    (void)snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    n = file_read_small(AT_FDCWD, path, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    /* Fields start after the last ')': field 3 is the state; utime, stime, cutime and
     * cstime are fields 14 to 17. */
    p = strrchr(buf, ')');
    if (!p) {
        return -EINVAL;
    }
    unsigned long long f[18] = {0};
    char *q = (char *)p + 1;
    for (int i = 3; i <= 17; i++) {
        while (*q == ' ') {
            q++;
        }
        if (*q == '\0' || *q == '\n') {
            return -EINVAL;
        }
        if (i >= 14) {
            f[i] = strtoull(q, &q, 10);
        } else {
            while (*q && *q != ' ') {
                q++;
            }
        }
    }
    s.cpu_s = (double)(f[14] + f[15]) / (double)tck;
    s.children_cpu_s = (double)(f[16] + f[17]) / (double)tck;
    *ret = s;
    return 0;
}
