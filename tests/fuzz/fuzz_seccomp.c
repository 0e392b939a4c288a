/* SPDX-License-Identifier: MIT */
/* Fuzz target: seccomp profiles (YAML compiled through libseccomp) and the classic-BPF
 * interpreter that sbxd-init runs to answer a counted denial with its errno
 * (bpf_eval). The first input byte chooses: a profile's text, or a raw program
 * with a syscall to run it over. Checked besides memory safety: a profile compiles or is
 * refused with a message naming its file; a compiled program fits the kernel's bound and
 * runs to a verdict on any syscall; the interpreter ends on any program (a verdict or
 * -EINVAL), and stripping USER_NOTIF leaves no USER_NOTIF. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "lib/err.h"
#include "fuzz.h"
#include "sandbox/seccomp.h"

/* A syscall made of input bytes (or zeroes past the end). */
static void fill_data(struct seccomp_data *d, const uint8_t *p, size_t n)
{
    memset(d, 0, sizeof(*d));
    memcpy(d, p, n < sizeof(*d) ? n : sizeof(*d));
}

static void profile(const uint8_t *data, size_t size)
{
    char *text = fuzz_dup(data, size);
    struct seccomp_set *set = NULL;
    struct err e = ERR_INIT;
    int r = seccomp_compile_text("fuzz.yaml", text, size, SECCOMP_COMPILE_NOTIFY, &set, &e);
    if (r < 0) {
        FUZZ_CHECK(set == NULL && strstr(err_msg(&e), "fuzz.yaml") != NULL);
        free(text);
        return;
    }
    const struct sock_filter *insns = NULL;
    uint32_t n = 0;
    FUZZ_CHECK(seccomp_set_get(set, "fuzz", &insns, &n) == 0);
    FUZZ_CHECK(n > 0 && n <= BPF_MAXINSNS);
    /* A few syscalls: the input's own bytes, and well-known numbers on x86_64. */
    static const int nrs[] = {0, 1, 2, 59, 56, 165, 272, 321, 435, 1000};
    for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
        struct seccomp_data d;
        fill_data(&d, data, size);
        d.nr = nrs[i];
        d.arch = AUDIT_ARCH_X86_64;
        uint32_t v = 0;
        FUZZ_CHECK(bpf_eval(insns, n, &d, &v) == 0);
    }
    set = seccomp_set_free(set);
    free(text);
}

static void program(const uint8_t *data, size_t size)
{
    struct seccomp_data d;
    fill_data(&d, data, size);
    size_t skip = size < sizeof(d) ? size : sizeof(d);
    size_t n = (size - skip) / sizeof(struct sock_filter);
    if (n > BPF_MAXINSNS) {
        n = BPF_MAXINSNS;
    }
    /* Its own block of exactly n instructions (ASan sees a fetch past the end). */
    struct sock_filter *insns = malloc(n ? n * sizeof(*insns) : 1);
    FUZZ_CHECK(insns != NULL);
    memcpy(insns, data + skip, n * sizeof(*insns));
    uint32_t v = 0;
    int r = bpf_eval(insns, (uint32_t)n, &d, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL);
    (void)bpf_notify_errno(insns, (uint32_t)n, &d);
    (void)bpf_early_ok(insns, (uint32_t)n, 3);
    bpf_strip_notify(insns, (uint32_t)n);
    FUZZ_CHECK(!bpf_notifies(insns, (uint32_t)n));
    free(insns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    if (data[0] & 1) {
        program(data + 1, size - 1);
    } else {
        profile(data + 1, size - 1);
    }
    return 0;
}
