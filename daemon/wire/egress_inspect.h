/* SPDX-License-Identifier: MIT */
#pragma once
/* What the egress proxy inspects in the byte streams it relays: the server name in a TLS
 * ClientHello on the way in (before anything reaches the upstream), and any echo of a
 * route's credential on the way out (replaced before anything reaches the task). No I/O,
 * no allocation; any thread. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest ClientHello handshake message accepted, and the record bytes that may carry
 * it (record headers included). */
#define EGRESS_HELLO_MAX (16 * 1024)
#define EGRESS_HELLO_BUF (EGRESS_HELLO_MAX + 16 * 5)
/* The longest credential (header value) the scrubber can hold back for. */
#define EGRESS_SECRET_MAX 4096
/* Buffer size for a server name (253 bytes of name, NUL). */
#define EGRESS_SNI_SIZE 256

/* Extracts the server name of a TLS ClientHello from the first bytes a client sent (its
 * records, possibly several, possibly incomplete). On success host (EGRESS_SNI_SIZE bytes)
 * holds the name, lowercased, without a trailing dot. Returns 0, -EAGAIN (more bytes
 * needed), -EPROTO (not a TLS ClientHello, or malformed), -ENOENT (no server_name),
 * -EOPNOTSUPP (Encrypted Client Hello: the real name is hidden) or -E2BIG (larger than
 * EGRESS_HELLO_MAX). */
int egress_inspect_sni_parse(const uint8_t *buf, size_t len, char *host);

/* Replaces every byte of every occurrence of a secret (and of its token part: what follows
 * "Bearer ", "Basic ", "token " ... when at least 8 bytes) with '*', in a stream: the union
 * of the occurrences in the bytes as they came, overlapping ones included, so that no part
 * of either shows. Bytes that could start an occurrence are held back, as they came, until
 * the next feed or the end; a stream scrubbed in any pieces equals the whole scrubbed at
 * once. */
struct egress_scrub {
    const char *pat[2];
    size_t len[2];
    size_t n;
    size_t keep; /* the longest pattern minus one: bytes held back */
    char hold[EGRESS_SECRET_MAX];
    size_t held;
    size_t cover; /* of the held bytes, the first ones an occurrence already seen covers */
};

/* secret (len <= EGRESS_SECRET_MAX, stays owned by the caller and must outlive s); NULL or
 * len 0: a scrubber that passes everything through. */
void egress_inspect_scrub_init(struct egress_scrub *s, const char *secret, size_t len);
/* Appends the held bytes and in (n bytes) to out, scrubbed, keeping back what could start
 * a secret unless final. out must hold n + EGRESS_SECRET_MAX bytes. Returns bytes written. */
size_t egress_inspect_scrub_feed(struct egress_scrub *s, const char *in, size_t n, bool final,
                                 char *out);
/* Scrubs a complete buffer in place. */
void egress_inspect_scrub_buf(const struct egress_scrub *s, char *buf, size_t len);
