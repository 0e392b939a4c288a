/* SPDX-License-Identifier: MIT */
/* Unit tests of netaddr.c: parsing and normalization (IPv4-mapped IPv6 is IPv4), CIDR
 * ranges, the class of every range a sandbox must not reach by default (loopback, private,
 * link-local, CGNAT, multicast, reserved, cloud metadata, and IPv6 forms that embed them),
 * and the permission rule: metadata only by its exact address. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/netaddr.h"
#include "lib/util.h"

static struct netaddr addr(const char *s)
{
    struct netaddr a;
    if (netaddr_parse(s, &a) < 0) {
        fail_msg("netaddr_parse(%s)", s);
    }
    return a;
}

static unsigned cls(const char *s)
{
    struct netaddr a = addr(s);
    return netaddr_classify(&a);
}

static struct netaddr_cidr cidr(const char *s)
{
    struct netaddr_cidr c;
    if (netaddr_cidr_parse(s, &c) < 0) {
        fail_msg("netaddr_cidr_parse(%s)", s);
    }
    return c;
}

static void netaddr_parse__mapped_is_ipv4(void **state)
{
    (void)state;
    char buf[NETADDR_STRLEN];
    struct netaddr a = addr("::ffff:127.0.0.1");
    assert_int_equal(a.family, AF_INET);
    assert_string_equal(netaddr_format(&a, buf, sizeof(buf)), "127.0.0.1");
    a = addr("::FFFF:a9fe:a9fe");
    assert_string_equal(netaddr_format(&a, buf, sizeof(buf)), "169.254.169.254");
    a = addr("2001:db8::1");
    assert_int_equal(a.family, AF_INET6);
    assert_string_equal(netaddr_format(&a, buf, sizeof(buf)), "2001:db8::1");
    struct netaddr b;
    const char *bad[] = {"",      "1.2.3",      "1.2.3.4.5", "01.2.3.4",
                         "[::1]", "fe80::1%lo", "x",         " 1.2.3.4"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(netaddr_parse(bad[i], &b), -EINVAL);
    }
}

static void netaddr_from_sockaddr__both_families(void **state)
{
    (void)state;
    struct sockaddr_in6 in6;
    memset(&in6, 0, sizeof(in6));
    in6.sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, "::ffff:10.1.2.3", &in6.sin6_addr), 1);
    struct netaddr a;
    assert_int_equal(netaddr_from_sockaddr((struct sockaddr *)&in6, &a), 0);
    assert_int_equal(a.family, AF_INET);
    assert_int_equal(netaddr_classify(&a), NETADDR_PRIVATE);
    struct sockaddr_storage ss;
    socklen_t l = netaddr_to_sockaddr(&a, 443, &ss);
    assert_int_equal(l, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 443);
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_int_equal(netaddr_from_sockaddr(&un, &a), -EAFNOSUPPORT);
}

static void netaddr_classify__ipv4_ranges(void **state)
{
    (void)state;
    assert_int_equal(cls("8.8.8.8"), NETADDR_PUBLIC);
    assert_int_equal(cls("1.1.1.1"), NETADDR_PUBLIC);
    assert_int_equal(cls("127.0.0.1"), NETADDR_LOOPBACK);
    assert_int_equal(cls("127.255.255.254"), NETADDR_LOOPBACK);
    assert_int_equal(cls("10.0.0.1"), NETADDR_PRIVATE);
    assert_int_equal(cls("172.16.0.1"), NETADDR_PRIVATE);
    assert_int_equal(cls("172.31.255.255"), NETADDR_PRIVATE);
    assert_int_equal(cls("172.32.0.1"), NETADDR_PUBLIC);
    assert_int_equal(cls("192.168.1.1"), NETADDR_PRIVATE);
    assert_int_equal(cls("169.254.1.1"), NETADDR_LINK_LOCAL);
    assert_int_equal(cls("100.64.0.1"), NETADDR_CGNAT);
    assert_int_equal(cls("100.127.255.255"), NETADDR_CGNAT);
    assert_int_equal(cls("100.128.0.1"), NETADDR_PUBLIC);
    assert_int_equal(cls("224.0.0.1"), NETADDR_MULTICAST);
    assert_int_equal(cls("239.255.255.250"), NETADDR_MULTICAST);
    assert_int_equal(cls("0.0.0.0"), NETADDR_RESERVED);
    assert_int_equal(cls("0.1.2.3"), NETADDR_RESERVED);
    assert_int_equal(cls("255.255.255.255"), NETADDR_RESERVED);
    assert_int_equal(cls("240.0.0.1"), NETADDR_RESERVED);
    assert_int_equal(cls("192.0.2.1"), NETADDR_RESERVED);
    assert_int_equal(cls("198.18.0.1"), NETADDR_RESERVED);
    assert_int_equal(cls("198.51.100.1"), NETADDR_RESERVED);
    assert_int_equal(cls("203.0.113.1"), NETADDR_RESERVED);
}

static void netaddr_classify__metadata(void **state)
{
    (void)state;
    assert_int_equal(cls("169.254.169.254"), NETADDR_LINK_LOCAL | NETADDR_METADATA);
    assert_int_equal(cls("169.254.170.2"), NETADDR_LINK_LOCAL | NETADDR_METADATA);
    assert_int_equal(cls("168.63.129.16"), NETADDR_METADATA); /* public, yet metadata */
    assert_int_equal(cls("100.100.100.200"), NETADDR_CGNAT | NETADDR_METADATA);
    assert_int_equal(cls("fd00:ec2::254"), NETADDR_PRIVATE | NETADDR_METADATA);
    assert_int_equal(cls("::ffff:169.254.169.254"), NETADDR_LINK_LOCAL | NETADDR_METADATA);
    assert_string_equal(netaddr_class_name(cls("169.254.169.254")), "cloud metadata");
}

static void netaddr_classify__ipv6_ranges(void **state)
{
    (void)state;
    assert_int_equal(cls("2606:4700::1111"), NETADDR_PUBLIC);
    assert_true(cls("::1") & NETADDR_LOOPBACK);
    assert_string_equal(netaddr_class_name(cls("::1")), "loopback");
    assert_true(cls("::") & NETADDR_RESERVED);
    assert_int_equal(cls("fe80::1"), NETADDR_LINK_LOCAL);
    assert_int_equal(cls("fc00::1"), NETADDR_PRIVATE);
    assert_int_equal(cls("fd12:3456::1"), NETADDR_PRIVATE);
    assert_int_equal(cls("fec0::1"), NETADDR_PRIVATE);
    assert_int_equal(cls("ff02::1"), NETADDR_MULTICAST);
    assert_int_equal(cls("2001:db8::1"), NETADDR_RESERVED);
    assert_int_equal(cls("2001::1"), NETADDR_RESERVED); /* Teredo */
    assert_int_equal(cls("100::1"), NETADDR_RESERVED);
    /* IPv4-compatible, NAT64 and 6to4 forms carry the class of the address they embed. */
    assert_true(cls("::127.0.0.1") & NETADDR_RESERVED);
    assert_int_equal(cls("64:ff9b::7f00:1"), NETADDR_LOOPBACK);
    assert_int_equal(cls("64:ff9b::a9fe:a9fe"), NETADDR_LINK_LOCAL | NETADDR_METADATA);
    assert_int_equal(cls("64:ff9b::808:808"), NETADDR_PUBLIC);
    assert_int_equal(cls("2002:7f00:1::1"), NETADDR_LOOPBACK);
    assert_int_equal(cls("2002:c0a8:101::1"), NETADDR_PRIVATE);
    assert_int_equal(cls("2002:808:808::1"), NETADDR_PUBLIC);
}

static void netaddr_cidr_parse__forms(void **state)
{
    (void)state;
    struct netaddr_cidr c = cidr("10.0.0.0/8");
    assert_int_equal(c.prefix, 8);
    c = cidr("127.0.0.1");
    assert_int_equal(c.prefix, 32);
    c = cidr("::1");
    assert_int_equal(c.prefix, 128);
    c = cidr("::ffff:127.0.0.0/104"); /* a mapped range is an IPv4 range */
    assert_int_equal(c.addr.family, AF_INET);
    assert_int_equal(c.prefix, 8);
    c = cidr("0.0.0.0/0");
    assert_int_equal(c.prefix, 0);
    const char *bad[] = {"10.0.0.1/8",  "10.0.0.0/33", "::/129",        "10.0.0.0/", "/8",
                         "10.0.0.0/-1", "10.0.0.0/ 8", "10.0.0.0/0008", "x/8",       "fe80::1/10"};
    struct netaddr_cidr b;
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(netaddr_cidr_parse(bad[i], &b), -EINVAL);
    }
}

static void netaddr_cidr_contains__bounds(void **state)
{
    (void)state;
    struct netaddr_cidr c = cidr("172.16.0.0/12");
    struct netaddr a = addr("172.31.255.255");
    assert_true(netaddr_cidr_contains(&c, &a));
    a = addr("172.32.0.0");
    assert_false(netaddr_cidr_contains(&c, &a));
    a = addr("::ffff:172.20.1.1");
    assert_true(netaddr_cidr_contains(&c, &a));
    a = addr("2001:db8::1");
    assert_false(netaddr_cidr_contains(&c, &a));
    c = cidr("2001:db8::/33");
    a = addr("2001:db8:7fff::1");
    assert_true(netaddr_cidr_contains(&c, &a));
    a = addr("2001:db8:8000::1");
    assert_false(netaddr_cidr_contains(&c, &a));
    c = cidr("0.0.0.0/0");
    a = addr("127.0.0.1");
    assert_true(netaddr_cidr_contains(&c, &a));
}

static void netaddr_permitted__needs_an_explicit_range(void **state)
{
    (void)state;
    unsigned why = 0;
    struct netaddr a = addr("8.8.8.8");
    assert_true(netaddr_permitted(&a, NULL, 0, &why));
    a = addr("127.0.0.1");
    assert_false(netaddr_permitted(&a, NULL, 0, &why));
    assert_int_equal(why, NETADDR_LOOPBACK);
    struct netaddr_cidr allow[] = {cidr("127.0.0.1/32"), cidr("10.0.0.0/8")};
    assert_true(netaddr_permitted(&a, allow, 2, &why));
    a = addr("::ffff:127.0.0.1");
    assert_true(netaddr_permitted(&a, allow, 2, &why));
    a = addr("127.0.0.2");
    assert_false(netaddr_permitted(&a, allow, 2, &why));
    a = addr("::1");
    assert_false(netaddr_permitted(&a, allow, 2, &why));
    a = addr("10.9.9.9");
    assert_true(netaddr_permitted(&a, allow, 2, &why));
}

static void netaddr_permitted__metadata_only_by_exact_address(void **state)
{
    (void)state;
    unsigned why = 0;
    struct netaddr md = addr("169.254.169.254");
    struct netaddr_cidr wide[] = {cidr("169.254.0.0/16"), cidr("0.0.0.0/0")};
    assert_false(netaddr_permitted(&md, wide, 2, &why));
    assert_true(why & NETADDR_METADATA);
    /* The wide range still opens other link-local addresses. */
    struct netaddr ll = addr("169.254.1.2");
    assert_true(netaddr_permitted(&ll, wide, 2, &why));
    struct netaddr_cidr exact[] = {cidr("169.254.169.254")};
    assert_true(netaddr_permitted(&md, exact, 1, &why));
    /* Azure's wire server is a public address, and metadata nonetheless. */
    struct netaddr az = addr("168.63.129.16");
    assert_false(netaddr_permitted(&az, NULL, 0, &why));
    struct netaddr v6 = addr("fd00:ec2::254");
    struct netaddr_cidr ula[] = {cidr("fd00::/8")};
    assert_false(netaddr_permitted(&v6, ula, 1, &why));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(netaddr_parse__mapped_is_ipv4),
        cmocka_unit_test(netaddr_from_sockaddr__both_families),
        cmocka_unit_test(netaddr_classify__ipv4_ranges),
        cmocka_unit_test(netaddr_classify__metadata),
        cmocka_unit_test(netaddr_classify__ipv6_ranges),
        cmocka_unit_test(netaddr_cidr_parse__forms),
        cmocka_unit_test(netaddr_cidr_contains__bounds),
        cmocka_unit_test(netaddr_permitted__needs_an_explicit_range),
        cmocka_unit_test(netaddr_permitted__metadata_only_by_exact_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
