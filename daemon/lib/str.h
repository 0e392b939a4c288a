/* SPDX-License-Identifier: MIT */
#pragma once
/* Bounded string helpers: copy, hex, UTF-8 sequences. */
#include <stddef.h>

/* strlcpy semantics: always NUL-terminates, returns strlen(src). CHILD-SAFE. */
size_t str_copy(char *dst, const char *src, size_t size);
/* Lowercase hex of len bytes into out (2*len+1 bytes). */
void str_hex_encode(const void *buf, size_t len, char *out);
/* Length (1-4) of the valid UTF-8 sequence at s (n bytes available), or 0 when it is not
 * valid: truncated, overlong, a surrogate or past U+10FFFF. CHILD-SAFE. */
size_t str_utf8_valid_seq(const unsigned char *s, size_t n);
