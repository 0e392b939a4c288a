/* SPDX-License-Identifier: MIT */
#pragma once
/* IP addresses for the egress proxy: a family-tagged address normalized so that an
 * IPv4-mapped IPv6 address is its IPv4 address, CIDR ranges, and the classification that
 * decides which destinations a sandbox may never reach unless a profile names them
 * (loopback, private, link-local, CGNAT, multicast, reserved, cloud metadata). Pure: no
 * I/O, no allocation; safe on any thread. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address. family is AF_INET (bytes 0-3 used) or AF_INET6 (all 16). IPv4-mapped IPv6
 * addresses (::ffff:a.b.c.d) are always stored as AF_INET. */
struct netaddr {
    int family;
    uint8_t a[16];
};

/* A range: the first `prefix` bits of addr (the rest are zero). */
struct netaddr_cidr {
    struct netaddr addr;
    unsigned prefix; /* 0..32 for AF_INET, 0..128 for AF_INET6 */
};

/* Classes, as bits: an address can be in several (fd00:ec2::254 is private and metadata).
 * 0 is an ordinary public unicast address. */
enum netaddr_class {
    NETADDR_PUBLIC = 0,
    NETADDR_LOOPBACK = 1u << 0,   /* 127.0.0.0/8, ::1 */
    NETADDR_PRIVATE = 1u << 1,    /* 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10 */
    NETADDR_LINK_LOCAL = 1u << 2, /* 169.254/16, fe80::/10 */
    NETADDR_CGNAT = 1u << 3,      /* 100.64/10 (shared address space) */
    NETADDR_MULTICAST = 1u << 4,  /* 224/4, ff00::/8 */
    NETADDR_RESERVED = 1u << 5,   /* unspecified, "this network", broadcast, 240/4,
                                     documentation, benchmarking, IETF, Teredo, discard... */
    NETADDR_METADATA = 1u << 6,   /* cloud instance metadata endpoints */
};

/* Longest netaddr_format output, with its NUL. */
#define NETADDR_STRLEN 46

/* Fills ret from an AF_INET or AF_INET6 sockaddr (mapped addresses become AF_INET).
 * Returns 0 or -EAFNOSUPPORT. */
int netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *ret);
/* Parses a numeric address ("10.0.0.1", "::1", "::ffff:127.0.0.1"; no brackets, no zone).
 * Returns 0 or -EINVAL. */
int netaddr_parse(const char *s, struct netaddr *ret);
/* Parses "ADDR/PREFIX" or a bare address (a host range: /32 or /128). Bits past the prefix
 * must be zero ("10.0.0.1/8" is refused: it is ambiguous). A mapped IPv6 range of at least
 * /96 becomes its IPv4 range. Returns 0 or -EINVAL. */
int netaddr_cidr_parse(const char *s, struct netaddr_cidr *ret);
/* Whether the range contains the address (families must match after normalization). */
bool netaddr_cidr_contains(const struct netaddr_cidr *c, const struct netaddr *a);
/* The address's class bits (enum netaddr_class). Addresses that embed an IPv4 address
 * (NAT64 64:ff9b::/96, 6to4 2002::/16) carry the classes of the embedded address. */
unsigned netaddr_classify(const struct netaddr *a);
/* A short name for the most telling class bit ("metadata", "loopback", ...; "public"). */
const char *netaddr_class_name(unsigned cls);
/* Whether a profile may dial the address: public addresses always; any other only when a
 * range of allow contains it, and a metadata address only when one of allow is exactly
 * that host (/32 or /128), so a broad range never opens the metadata service by accident.
 * On refusal *ret_cls (may be NULL) holds the class bits. */
bool netaddr_permitted(const struct netaddr *a, const struct netaddr_cidr *allow, size_t n_allow,
                       unsigned *ret_cls);
/* Formats the address ("127.0.0.1", "::1") into buf (at least NETADDR_STRLEN bytes is
 * always enough). Returns buf. */
const char *netaddr_format(const struct netaddr *a, char *buf, size_t size);
/* Fills a sockaddr_storage for the address and port; returns its length. */
socklen_t netaddr_to_sockaddr(const struct netaddr *a, uint16_t port, struct sockaddr_storage *ret);
