/* SPDX-License-Identifier: MIT */
#pragma once
/* Coverage-guided fuzz targets of sbxd's parsers of untrusted bytes (tests/fuzz/README.md).
 * Each fuzz_<name>.c defines the libFuzzer entry point; `make fuzz` links it with libFuzzer
 * (clang), and `make test` links it with replay.c, which feeds it the committed corpus. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A failed oracle: says which and aborts, which both libFuzzer and the replay report. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The bytes in a heap block of exactly their length, so that ASan sees a read past the end
 * (libFuzzer's own buffer is such a block; a piece of it is not). Never NULL. */
static inline char *fuzz_dup(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    FUZZ_CHECK(p != NULL);
    if (n) {
        memcpy(p, data, n);
    }
    return p;
}

/* Whether s[0..n) is valid UTF-8 (RFC 3629: no overlongs, surrogates or values above
 * U+10FFFF). Written apart from proto.c's, as the oracle of its output. */
static inline int fuzz_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned min;
        unsigned v;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            k = 1, min = 0x80, v = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, min = 0x800, v = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, min = 0x10000, v = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= k) {
            return 0;
        }
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) {
                return 0;
            }
            v = (v << 6) | (s[i + j] & 0x3f);
        }
        if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
            return 0;
        }
        i += k + 1;
    }
    return 1;
}
