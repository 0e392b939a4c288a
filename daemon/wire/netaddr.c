/* SPDX-License-Identifier: MIT */
/* Address classification and CIDR ranges for the egress proxy. Owns the tables of address
 * ranges a sandbox must not reach by default; it never resolves names and never decides
 * alone: egress.c asks it about the address it is about to dial, after resolution. */
#include "wire/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"

struct range {
    uint8_t a[16];
    unsigned prefix;
    unsigned cls;
};

/* clang-format off */
static const struct range v4_ranges[] = {
    {{0, 0, 0, 0}, 8, NETADDR_RESERVED},          /* "this network"; 0.0.0.0 reaches the host */
    {{10, 0, 0, 0}, 8, NETADDR_PRIVATE},
    {{100, 64, 0, 0}, 10, NETADDR_CGNAT},
    {{127, 0, 0, 0}, 8, NETADDR_LOOPBACK},
    {{169, 254, 0, 0}, 16, NETADDR_LINK_LOCAL},
    {{172, 16, 0, 0}, 12, NETADDR_PRIVATE},
    {{192, 0, 0, 0}, 24, NETADDR_RESERVED},       /* IETF protocol assignments */
    {{192, 0, 2, 0}, 24, NETADDR_RESERVED},       /* TEST-NET-1 */
    {{192, 88, 99, 0}, 24, NETADDR_RESERVED},     /* 6to4 relay anycast (deprecated) */
    {{192, 168, 0, 0}, 16, NETADDR_PRIVATE},
    {{198, 18, 0, 0}, 15, NETADDR_RESERVED},      /* benchmarking */
    {{198, 51, 100, 0}, 24, NETADDR_RESERVED},    /* TEST-NET-2 */
    {{203, 0, 113, 0}, 24, NETADDR_RESERVED},     /* TEST-NET-3 */
    {{224, 0, 0, 0}, 4, NETADDR_MULTICAST},
    {{240, 0, 0, 0}, 4, NETADDR_RESERVED},        /* future use, and 255.255.255.255 */
};

/* Instance metadata services: AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean
 * (169.254.169.254), AWS ECS task metadata (169.254.170.2), AWS time sync (169.254.169.123),
 * Azure's wire server (168.63.129.16, a public address), Alibaba (100.100.100.200). */
static const uint8_t v4_metadata[][4] = {
    {169, 254, 169, 254}, {169, 254, 170, 2}, {169, 254, 169, 123},
    {168, 63, 129, 16},   {100, 100, 100, 200},
};

static const struct range v6_ranges[] = {
    {{0}, 128, NETADDR_RESERVED},                                    /* :: unspecified */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, NETADDR_LOOPBACK},
    {{0}, 96, NETADDR_RESERVED},                                     /* IPv4-compatible */
    {{0x01, 0x00}, 64, NETADDR_RESERVED},                            /* 100::/64 discard */
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, NETADDR_PRIVATE},     /* local-use NAT64 */
    {{0x20, 0x01, 0x00, 0x00}, 32, NETADDR_RESERVED},                /* Teredo */
    {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, NETADDR_RESERVED},    /* benchmarking */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, NETADDR_RESERVED},                /* documentation */
    {{0x3f, 0xff}, 20, NETADDR_RESERVED},                            /* documentation */
    {{0xfc}, 7, NETADDR_PRIVATE},                                    /* unique local */
    {{0xfe, 0x80}, 10, NETADDR_LINK_LOCAL},
    {{0xfe, 0xc0}, 10, NETADDR_PRIVATE},                             /* site-local (deprecated) */
    {{0xff}, 8, NETADDR_MULTICAST},
};

/* AWS's IPv6 instance metadata and its time and DNS services. */
static const uint8_t v6_metadata[][16] = {
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54},
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x23},
    {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x23},
};
/* clang-format on */

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8;
    unsigned rest = bits % 8;
    if (memcmp(a, b, whole) != 0) {
        return false;
    }
    if (rest == 0) {
        return true;
    }
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

/* Turns an IPv4-mapped IPv6 address into its IPv4 address, in place. */
static void normalize(struct netaddr *a)
{
    if (a->family == AF_INET6 && memcmp(a->a, v4_mapped_prefix, 12) == 0) {
        uint8_t v4[4];
        memcpy(v4, a->a + 12, 4);
        memset(a->a, 0, sizeof(a->a));
        memcpy(a->a, v4, 4);
        a->family = AF_INET;
    }
}

int netaddr_from_sockaddr(const struct sockaddr *sa, struct netaddr *ret)
{
    struct netaddr a;
    memset(&a, 0, sizeof(a));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        a.family = AF_INET;
        memcpy(a.a, &in->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        a.family = AF_INET6;
        memcpy(a.a, &in6->sin6_addr, 16);
        normalize(&a);
    } else {
        return -EAFNOSUPPORT;
    }
    *ret = a;
    return 0;
}

int netaddr_parse(const char *s, struct netaddr *ret)
{
    struct netaddr a;
    memset(&a, 0, sizeof(a));
    if (inet_pton(AF_INET, s, a.a) == 1) {
        a.family = AF_INET;
    } else if (inet_pton(AF_INET6, s, a.a) == 1) {
        a.family = AF_INET6;
        normalize(&a);
    } else {
        return -EINVAL;
    }
    *ret = a;
    return 0;
}

int netaddr_cidr_parse(const char *s, struct netaddr_cidr *ret)
{
    char buf[64];
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    if (alen == 0 || alen >= sizeof(buf)) {
        return -EINVAL;
    }
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    struct netaddr_cidr c;
    memset(&c, 0, sizeof(c));
    int family;
    if (inet_pton(AF_INET, buf, c.addr.a) == 1) {
        family = AF_INET;
    } else if (inet_pton(AF_INET6, buf, c.addr.a) == 1) {
        family = AF_INET6;
    } else {
        return -EINVAL;
    }
    c.addr.family = family;
    unsigned max = family == AF_INET ? 32 : 128;
    c.prefix = max;
    if (slash) {
        uint64_t p = 0;
        /* parse_u64 takes plain digits only: no sign, no spaces. */
        if (parse_u64(slash + 1, &p) < 0 || p > max || strlen(slash + 1) > 3) {
            return -EINVAL;
        }
        c.prefix = (unsigned)p;
    }
    /* Host bits must be zero. */
    for (unsigned bit = c.prefix; bit < max; bit++) {
        if (c.addr.a[bit / 8] & (0x80u >> (bit % 8))) {
            return -EINVAL;
        }
    }
    if (family == AF_INET6 && c.prefix >= 96 && memcmp(c.addr.a, v4_mapped_prefix, 12) == 0) {
        normalize(&c.addr);
        c.prefix -= 96;
    }
    *ret = c;
    return 0;
}

bool netaddr_cidr_contains(const struct netaddr_cidr *c, const struct netaddr *a)
{
    if (c->addr.family != a->family) {
        return false;
    }
    return prefix_match(c->addr.a, a->a, c->prefix);
}

static unsigned classify_v4(const uint8_t *v4)
{
    unsigned cls = 0;
    for (size_t i = 0; i < ARRAY_SIZE(v4_ranges); i++) {
        if (prefix_match(v4_ranges[i].a, v4, v4_ranges[i].prefix)) {
            cls |= v4_ranges[i].cls;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(v4_metadata); i++) {
        if (memcmp(v4_metadata[i], v4, 4) == 0) {
            cls |= NETADDR_METADATA;
        }
    }
    return cls;
}

unsigned netaddr_classify(const struct netaddr *a)
{
    if (a->family == AF_INET) {
        return classify_v4(a->a);
    }
    unsigned cls = 0;
    for (size_t i = 0; i < ARRAY_SIZE(v6_ranges); i++) {
        if (prefix_match(v6_ranges[i].a, a->a, v6_ranges[i].prefix)) {
            cls |= v6_ranges[i].cls;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(v6_metadata); i++) {
        if (memcmp(v6_metadata[i], a->a, 16) == 0) {
            cls |= NETADDR_METADATA;
        }
    }
    /* SECURITY: translation prefixes reach the IPv4 address they embed. */
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    static const uint8_t six_to_four[2] = {0x20, 0x02};
    if (memcmp(a->a, nat64, 12) == 0) {
        cls |= classify_v4(a->a + 12);
    } else if (memcmp(a->a, six_to_four, 2) == 0) {
        cls |= classify_v4(a->a + 2);
    }
    return cls;
}

const char *netaddr_class_name(unsigned cls)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {
        {NETADDR_METADATA, "cloud metadata"}, {NETADDR_LOOPBACK, "loopback"},
        {NETADDR_LINK_LOCAL, "link-local"},   {NETADDR_PRIVATE, "private"},
        {NETADDR_CGNAT, "shared (CGNAT)"},    {NETADDR_MULTICAST, "multicast"},
        {NETADDR_RESERVED, "reserved"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        if (cls & names[i].bit) {
            return names[i].name;
        }
    }
    return "public";
}

bool netaddr_permitted(const struct netaddr *a, const struct netaddr_cidr *allow, size_t n_allow,
                       unsigned *ret_cls)
{
    unsigned cls = netaddr_classify(a);
    if (cls == NETADDR_PUBLIC) {
        return true;
    }
    unsigned host_bits = a->family == AF_INET ? 32 : 128;
    for (size_t i = 0; i < n_allow; i++) {
        if (!netaddr_cidr_contains(&allow[i], a)) {
            continue;
        }
        /* SECURITY: metadata only by its exact address, never through a wide range. */
        if ((cls & NETADDR_METADATA) && allow[i].prefix != host_bits) {
            continue;
        }
        return true;
    }
    if (ret_cls) {
        *ret_cls = cls;
    }
    return false;
}

const char *netaddr_format(const struct netaddr *a, char *buf, size_t size)
{
    char tmp[INET6_ADDRSTRLEN];
    if (!inet_ntop(a->family, a->a, tmp, sizeof(tmp))) {
        str_copy(tmp, "?", sizeof(tmp));
    }
    str_copy(buf, tmp, size);
    return buf;
}

socklen_t netaddr_to_sockaddr(const struct netaddr *a, uint16_t port, struct sockaddr_storage *ret)
{
    memset(ret, 0, sizeof(*ret));
    if (a->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ret;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, a->a, 4);
        return sizeof(*in);
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ret;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    memcpy(&in6->sin6_addr, a->a, 16);
    return sizeof(*in6);
}
