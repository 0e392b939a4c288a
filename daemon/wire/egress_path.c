/* SPDX-License-Identifier: MIT */
/* Request paths of the egress proxy's plain-HTTP routes: one normal form, refusal of what an
 * upstream could resolve to another path than the proxy matched, and prefixes matched by whole
 * segments. It reads only the bytes it is given and decides nothing about routes. */
#include "wire/egress_path.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/util.h"

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
        return (c | 0x20) - 'a' + 10;
    }
    return -1;
}

static bool is_unreserved(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* RFC 3986's pchar but '%': unreserved, sub-delims, ':' and '@'. */
static bool is_pchar(int c)
{
    return is_unreserved(c) || (c > 0 && c < 0x80 && strchr("!$&'()*+,;=:@", c) != NULL);
}

/* The byte of the escape "%XX" at p[i], or -1 when there is none or it is malformed. */
static int escape_at(const char *p, size_t len, size_t i)
{
    if (i >= len || p[i] != '%' || len - i < 3) {
        return -1;
    }
    int hi = hex_value((unsigned char)p[i + 1]);
    int lo = hex_value((unsigned char)p[i + 2]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* The character at p[i] as a decoder reads it: an escape's byte (*ret_n 3) or the byte
 * itself (*ret_n 1); -1 for a malformed escape. */
static int char_at(const char *p, size_t len, size_t i, size_t *ret_n)
{
    if (p[i] == '%') {
        *ret_n = 3;
        return escape_at(p, len, i);
    }
    *ret_n = 1;
    return (unsigned char)p[i];
}

/* Characters whose compatibility form (NFKC) has '.', '/' or '\' (the whole list, from
 * Unicode's data): a server that folds them could find a dot segment or a separator. */
static const uint32_t folds_to_separator[] = {
    0x2024, 0x2025, 0x2026, 0x2100, 0x2101, 0x2105, 0x2106,
    0xfe19, 0xfe30, 0xfe52, 0xfe68, 0xff0e, 0xff0f, 0xff3c,
};

/* The length of the character escaped at p[i] (a run of escapes of one shortest-form UTF-8
 * sequence) and its code point, or 0 when the bytes are not that. */
static size_t utf8_escapes(const char *p, size_t len, size_t i, uint32_t *ret_cp)
{
    int b0 = escape_at(p, len, i);
    size_t n;
    uint32_t cp;
    uint32_t min;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        n = 2, cp = (uint32_t)b0 & 0x1f, min = 0x80;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        n = 3, cp = (uint32_t)b0 & 0x0f, min = 0x800;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        n = 4, cp = (uint32_t)b0 & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t k = 1; k < n; k++) {
        int b = escape_at(p, len, i + 3 * k);
        if (b < 0x80 || b > 0xbf) {
            return 0;
        }
        cp = cp << 6 | ((uint32_t)b & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    *ret_cp = cp;
    return 3 * n;
}

static void put(char *out, size_t *o, char c)
{
    if (out) {
        out[*o] = c;
    }
    (*o)++;
}

static void put_escape(char *out, size_t *o, int b)
{
    static const char hex[] = "0123456789ABCDEF";
    put(out, o, '%');
    put(out, o, hex[(b >> 4) & 0xf]);
    put(out, o, hex[b & 0xf]);
}

/* One part of a segment (the name before the first ';', or a parameter after one). */
struct part {
    size_t n;    /* characters */
    size_t dots; /* of them '.' */
    bool other;  /* a character other than '.' and ' ' */
};

static bool part_is_dots(const struct part *pt)
{
    return pt->dots > 0 && !pt->other;
}

static int refuse(const char **why, const char *phrase)
{
    *why = phrase;
    return -EINVAL;
}

#define WHY_DOTS "the path has a '.' or '..' segment (in some spelling: '..;', '%2e', ...)"

int egress_path_normalize(const char *path, size_t len, char *out, size_t *ret_len,
                          const char **why)
{
    if (len == 0 || path[0] != '/') {
        return refuse(why, "the path must start with '/'");
    }
    size_t o = 0;
    put(out, &o, '/');
    size_t seg_n = 0; /* characters of the current segment */
    bool in_name = true;
    struct part pt = {0};
    size_t i = 1;
    for (;;) {
        if (i == len || path[i] == '/') {
            /* SECURITY: "..;x" is ".." to Tomcat, Jetty and Spring, which strip parameters
             * before resolving dots; "..%20" and "..." are ".." to servers that trim. */
            if (part_is_dots(&pt)) {
                return refuse(why, WHY_DOTS);
            }
            if (i == len) {
                break;
            }
            if (seg_n == 0) {
                return refuse(why, "the path has an empty segment");
            }
            put(out, &o, '/');
            i++;
            seg_n = 0;
            in_name = true;
            pt = (struct part){0};
            continue;
        }
        size_t n = 0;
        int c = char_at(path, len, i, &n);
        if (c < 0) {
            return refuse(why, "the path has a malformed percent-encoding");
        }
        if (n == 1) {
            if (c == '\\') {
                return refuse(why, "the path has a '\\'");
            }
            if (!is_pchar(c)) {
                return refuse(why, "the path has a character that is not allowed in a URL path");
            }
            put(out, &o, (char)c);
        } else if (is_unreserved(c)) {
            put(out, &o, (char)c);
        } else if (c == '/' || c == '\\') {
            return refuse(why, "the path has an encoded '/' or '\\'");
        } else if (c < 0x20 || c == 0x7f) {
            return refuse(why, "the path has an encoded control character or NUL");
        } else if (c == '%') {
            /* SECURITY: an upstream that decodes twice reads "%252e" as '.', and
             * "%25%32%65" too: the digits after "%25" count as a decoder reads them. */
            size_t n1 = 0;
            size_t n2 = 0;
            int d1 = i + 3 < len ? char_at(path, len, i + 3, &n1) : -1;
            int d2 = d1 >= 0 && i + 3 + n1 < len ? char_at(path, len, i + 3 + n1, &n2) : -1;
            if (hex_value(d1) >= 0 && hex_value(d2) >= 0) {
                return refuse(why, "the path is encoded twice ('%25' before hex digits)");
            }
            put_escape(out, &o, c);
        } else if (c >= 0x80) {
            uint32_t cp = 0;
            size_t m = utf8_escapes(path, len, i, &cp);
            if (m == 0) {
                return refuse(why, "the path has encoded bytes that are not UTF-8");
            }
            for (size_t k = 0; k < ARRAY_SIZE(folds_to_separator); k++) {
                if (folds_to_separator[k] == cp) {
                    return refuse(why, "the path has a character that folds to '.', '/' or '\\'");
                }
            }
            for (size_t k = 0; k < m; k += 3) {
                put_escape(out, &o, escape_at(path, len, i + k));
            }
            seg_n++;
            pt.n++;
            pt.other = true;
            i += m;
            continue;
        } else {
            put_escape(out, &o, c);
        }
        seg_n++;
        /* An encoded ';' ends a part too: a server may decode before it strips parameters. */
        if (c == ';') {
            if (part_is_dots(&pt)) {
                return refuse(why, WHY_DOTS);
            }
            if (in_name && pt.n == 0) {
                return refuse(why, "the path has an empty segment");
            }
            in_name = false;
            pt = (struct part){0};
        } else {
            pt.n++;
            if (c == '.') {
                pt.dots++;
            } else if (c != ' ') {
                pt.other = true;
            }
        }
        i += n;
    }
    if (ret_len) {
        *ret_len = o;
    }
    return 0;
}

bool egress_path_safe(const char *path, size_t len)
{
    const char *why = NULL;
    return egress_path_normalize(path, len, NULL, NULL, &why) == 0;
}

bool egress_path_under(const char *path, size_t len, const char *prefix)
{
    size_t plen = strlen(prefix);
    if (plen == 0 || (plen == 1 && prefix[0] == '/')) {
        return len > 0 && path[0] == '/';
    }
    /* The prefix as egress_path_normalize writes it, compared unit by unit. */
    size_t j = 0;
    char last = '\0';
    for (size_t i = 0; i < plen;) {
        char unit[3];
        size_t un = 1;
        int b = escape_at(prefix, plen, i);
        if (b >= 0 && is_unreserved(b)) {
            unit[0] = (char)b;
            i += 3;
        } else if (b >= 0) {
            size_t k = 0;
            put_escape(unit, &k, b);
            un = 3;
            i += 3;
        } else {
            unit[0] = prefix[i++];
        }
        if (len - j < un || memcmp(path + j, unit, un) != 0) {
            return false;
        }
        j += un;
        last = unit[un - 1];
    }
    return j == len || last == '/' || path[j] == '/';
}
