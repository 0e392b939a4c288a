/* SPDX-License-Identifier: MIT */
#pragma once
/* Resident memory and CPU time of one process from /proc, for sbx-load's --pid. */
#include <stdint.h>

struct procstat {
    uint64_t rss_bytes;    /* VmRSS */
    double cpu_s;          /* utime + stime */
    double children_cpu_s; /* cutime + cstime: its reaped children, such as sandboxes */
};

/* Reads /proc/PID/status and /proc/PID/stat. Returns 0, -errno when a file cannot be read
 * (-ENOENT: no such process), or -EINVAL when its format is not understood. */
int procstat_read(long pid, struct procstat *ret);
