/* SPDX-License-Identifier: MIT */
/* Runs a fuzz target over files without libFuzzer: each argument is a file, or a directory
 * whose regular files are each one input. What `make test` does with the committed corpus
 * (tests/fuzz/corpus/<target>/), under SAN=1 with ASan and UBSan: a crash the fuzzer found
 * once stays found. Prints a cmocka-style summary for tests/run.sh. */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "fuzz.h"

static size_t n_inputs;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096;
    size_t n = 0;
    uint8_t *buf = malloc(cap);
    FUZZ_CHECK(buf != NULL);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            FUZZ_CHECK(buf != NULL);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: %s: read error\n", path);
        return -1;
    }
    /* An exact-size copy, as libFuzzer passes it. */
    uint8_t *in = (uint8_t *)fuzz_dup(buf, n);
    free(buf);
    (void)LLVMFuzzerTestOneInput(in, n);
    free(in);
    n_inputs++;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') {
            continue;
        }
        names = realloc(names, (n + 1) * sizeof(*names));
        FUZZ_CHECK(names != NULL);
        size_t len = strlen(dir) + strlen(de->d_name) + 2;
        names[n] = malloc(len);
        FUZZ_CHECK(names[n] != NULL);
        (void)snprintf(names[n], len, "%s/%s", dir, de->d_name);
        n++;
    }
    closedir(d);
    /* In name order, so that a run is the same everywhere. */
    qsort(names, n, sizeof(*names), name_cmp);
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        if (r == 0 && run_file(names[i]) < 0) {
            r = -1;
        }
        free(names[i]);
    }
    free(names);
    return r;
}

int main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    printf("[==========] Running 1 test(s).\n[ RUN      ] %s\n", name);
    fflush(stdout);
    int r = 0;
    for (int i = 1; i < argc && r == 0; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            r = -1;
        } else {
            r = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        }
    }
    /* An empty corpus proves nothing: a target without inputs fails. */
    if (r == 0 && n_inputs == 0) {
        fprintf(stderr, "replay: no input\n");
        r = -1;
    }
    if (r < 0) {
        printf("[  FAILED  ] %s\n[  FAILED  ] 1 test(s), listed below:\n", name);
        return 1;
    }
    printf("[       OK ] %s (%zu inputs)\n[  PASSED  ] 1 test(s).\n", name, n_inputs);
    return 0;
}
