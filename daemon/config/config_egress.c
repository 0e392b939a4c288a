/* SPDX-License-Identifier: MIT */
/* The config's egress section (docs/EGRESS.md): its key tables, the syntax of each value
 * (hosts and ports, CIDRs, route names, path prefixes, upstreams, header names), profiles and
 * their routes as the walker fills them, and the rules a whole profile must keep, for parsed
 * and hand-made configs alike. */
#define LOG_MOD "config"
#include "config/config_impl.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "wire/egress_parse.h"
#include "wire/egress_path.h"
#include "wire/netaddr.h"
#include "lib/yamlnode.h"
#include "lib/util.h"

/* Egress value checks (defined with the egress walkers below). */
static int check_hostport(const char *s, const char **why);
static int check_cidr(const char *s, const char **why);
static int check_route_name(const char *s, const char **why);
static int check_path_prefix(const char *s, const char **why);
static int check_upstream(const char *s, const char **why);
static int check_header_name(const char *s, const char **why);

#define EGRESS_PROFILES_MAX 64
#define EGRESS_LIST_MAX 256
#define EGRESS_ROUTES_MAX 64

enum profile_mark {
    PFM_ROOT,
    PFM_ALLOW,
    PFM_ALLOW_ADDRESSES,
    PFM_ROUTES,
    PFM_READ_ONLY,
    PFM_MAX_REQUEST,
    PFM_MAX_TASK,
    PFM_MAX_CONN,
    PFM_COUNT
};

enum route_mark {
    RM_ROOT,
    RM_NAME,
    RM_METHODS,
    RM_PATH_PREFIX,
    RM_UPSTREAM,
    RM_CREDENTIAL,
    RM_HEADER,
    RM_COUNT
};

#define PROF(m) offsetof(struct egress_profile_config, m)
#define ROUTE(m) offsetof(struct egress_route_config, m)
/* T_STRLIST, T_ROUTES and T_PROFILES keep their count right after the array pointer. */
_Static_assert(PROF(n_allow) == PROF(allow) + sizeof(char **), "allow count");
_Static_assert(PROF(n_allow_addresses) == PROF(allow_addresses) + sizeof(char **),
               "allow_addresses count");
_Static_assert(PROF(n_routes) == PROF(routes) + sizeof(void *), "routes count");
_Static_assert(TOP(c.n_egress_profiles) == TOP(c.egress_profiles) + sizeof(void *),
               "profiles count");

static const struct field route_fields[] = {
    CHECKED("name", T_STR, RM_NAME, 0, ROUTE(name), check_route_name),
    FIELD("methods", T_METHODS, RM_METHODS, 0, ROUTE(methods)),
    CHECKED("path_prefix", T_STR, RM_PATH_PREFIX, 0, ROUTE(path_prefix), check_path_prefix),
    CHECKED("upstream", T_STR, RM_UPSTREAM, 0, ROUTE(upstream), check_upstream),
    CHECKED("credential_file", T_STR, RM_CREDENTIAL, F_NULLABLE, ROUTE(credential_file),
            config_egress_check_abs_path),
    CHECKED("header", T_STR, RM_HEADER, 0, ROUTE(header), check_header_name),
    END,
};

static const struct field profile_fields[] = {
    CHECKED("allow", T_STRLIST, PFM_ALLOW, 0, PROF(allow), check_hostport),
    CHECKED("allow_addresses", T_STRLIST, PFM_ALLOW_ADDRESSES, 0, PROF(allow_addresses),
            check_cidr),
    FIELD("routes", T_ROUTES, PFM_ROUTES, 0, PROF(routes)),
    FIELD("read_only", T_BOOL, PFM_READ_ONLY, 0, PROF(read_only)),
    RANGE("max_request_bytes", T_SIZE, PFM_MAX_REQUEST, PROF(max_request_bytes), KIB, UINT64_MAX),
    RANGE("max_task_bytes", T_SIZE, PFM_MAX_TASK, PROF(max_task_bytes), KIB, UINT64_MAX),
    RANGE("max_connections", T_U32, PFM_MAX_CONN, PROF(max_connections), 1, 1024),
    END,
};

const struct field egress_fields[] = {
    /* Unprivileged: init may hold no privilege over a recycled network namespace. */
    RANGE("port", T_U32, CM_EGRESS_PORT, TOP(c.egress_port), 1024, 65535),
    FIELD("profiles", T_PROFILES, CM_EGRESS_PROFILES, 0, TOP(c.egress_profiles)),
    END,
};

static bool is_token_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* A DNS name: labels of letters, digits, '-' and '_' (1-63 bytes, no '-' at either end),
 * at most 253 bytes, one trailing dot allowed. The last label must not be numeric, so a
 * name is never read as an address ("127.1", "0x7f.1"). */
static bool hostname_ok(const char *h, size_t n)
{
    if (n > 0 && h[n - 1] == '.') {
        n--;
    }
    if (n == 0 || n > 253) {
        return false;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && h[i] != '.') {
            char ch = h[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_')) {
                return false;
            }
            continue;
        }
        size_t len = i - start;
        if (len == 0 || len > 63 || h[start] == '-' || h[i - 1] == '-') {
            return false;
        }
        if (i == n) {
            bool numeric = true;
            for (size_t j = start; j < i; j++) {
                numeric = numeric && h[j] >= '0' && h[j] <= '9';
            }
            if (numeric || (len > 1 && h[start] == '0' && (h[start + 1] | 0x20) == 'x')) {
                return false;
            }
        }
        start = i + 1;
    }
    return true;
}

static bool port_ok(const char *s)
{
    uint64_t port = 0;
    return *s && strlen(s) <= 5 && parse_u64(s, &port) == 0 && port >= 1 && port <= 65535;
}

/* "[v6]", "a.b.c.d" or a DNS name (with "*." first when wildcard_ok), in n bytes. */
static bool host_ok(const char *h, size_t n, bool wildcard_ok)
{
    char buf[256];
    unsigned char addr[16];
    if (n == 0 || n >= sizeof(buf)) {
        return false;
    }
    if (h[0] == '[') {
        if (n < 3 || h[n - 1] != ']') {
            return false;
        }
        memcpy(buf, h + 1, n - 2);
        buf[n - 2] = '\0';
        return inet_pton(AF_INET6, buf, addr) == 1;
    }
    memcpy(buf, h, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, addr) == 1) {
        return true;
    }
    if (wildcard_ok && n > 2 && h[0] == '*' && h[1] == '.') {
        return hostname_ok(h + 2, n - 2);
    }
    return hostname_ok(h, n);
}

/* Splits "HOST:PORT" at the port's colon (after a bracketed IPv6 address). */
static const char *port_colon(const char *s)
{
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        return rb && rb[1] == ':' ? rb + 1 : NULL;
    }
    const char *c = strrchr(s, ':');
    return c && memchr(s, ':', (size_t)(c - s)) == NULL ? c : NULL;
}

static int check_hostport(const char *s, const char **why)
{
    const char *colon = port_colon(s);
    if (!colon || !port_ok(colon + 1)) {
        *why = "must be HOST:PORT with a port from 1 to 65535";
        return -EINVAL;
    }
    if (!host_ok(s, (size_t)(colon - s), true)) {
        *why = "the host must be a DNS name, '*.' and a DNS name, an IPv4 address or [IPv6]";
        return -EINVAL;
    }
    return 0;
}

static int check_cidr(const char *s, const char **why)
{
    struct netaddr_cidr c;
    *why = "must be an address or ADDRESS/PREFIX with zero host bits";
    return netaddr_cidr_parse(s, &c) < 0 ? -EINVAL : 0;
}

static int check_route_name(const char *s, const char **why)
{
    if (!hostname_ok(s, strlen(s)) || s[strlen(s) - 1] == '.') {
        *why = "must be a host name of letters, digits, '-' and '.' (the task asks for "
               "http://NAME/...)";
        return -EINVAL;
    }
    return 0;
}

/* A path of unreserved, percent-encoded and sub-delimiter characters, ':', '@' and '/',
 * with no "." or ".." segment (plain or encoded) and no empty segment. */
static bool url_path_ok(const char *p)
{
    if (p[0] != '/') {
        return false;
    }
    const char *seg = p + 1;
    for (const char *c = p + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            size_t n = (size_t)(c - seg);
            bool dot1 = n == 1 && seg[0] == '.';
            bool dot2 = n == 2 && seg[0] == '.' && seg[1] == '.';
            if (dot1 || dot2 || (n == 0 && *c == '/')) {
                return false;
            }
            if (*c == '\0') {
                return true;
            }
            seg = c + 1;
            continue;
        }
        char ch = *c;
        if (ch == '%') {
            /* Encoded dots, slashes and backslashes could hide a segment: refused. */
            if (!isxdigit((unsigned char)c[1]) || !isxdigit((unsigned char)c[2])) {
                return false;
            }
            char hex[3] = {c[1], c[2], '\0'};
            unsigned long v = strtoul(hex, NULL, 16);
            if (v == '.' || v == '/' || v == '\\' || v < 0x20) {
                return false;
            }
            c += 2;
            continue;
        }
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("-._~!$&'()*+,;=:@", ch) != NULL)) {
            return false;
        }
    }
}

static int check_path_prefix(const char *s, const char **why)
{
    /* The proxy refuses every request path that egress_path_normalize refuses, so a prefix
     * it refuses could never match: say so at load instead of leaving a dead route. */
    const char *pwhy;
    if (strcmp(s, "/") != 0 && egress_path_normalize(s, strlen(s), NULL, NULL, &pwhy) < 0) {
        *why = pwhy;
        return -EINVAL;
    }
    if (!url_path_ok(s) && strcmp(s, "/") != 0) {
        *why = "must be an absolute URL path without '.', '..' or empty segments, query or "
               "encoded '.', '/' or '\\\\'";
        return -EINVAL;
    }
    return 0;
}

static int check_upstream(const char *s, const char **why)
{
    if (strncasecmp(s, "http://", 7) != 0) {
        *why = "must start with http:// (sbxd does not originate TLS)";
        return -EINVAL;
    }
    const char *auth = s + 7;
    size_t alen = strcspn(auth, "/");
    const char *path = auth + alen;
    char host[300];
    if (alen == 0 || alen >= sizeof(host)) {
        *why = "must name a host: http://HOST[:PORT][/BASE]";
        return -EINVAL;
    }
    memcpy(host, auth, alen);
    host[alen] = '\0';
    if (strchr(host, '@') || strchr(host, '?') || strchr(host, '#')) {
        *why = "must be http://HOST[:PORT][/BASE] without user info, query or fragment";
        return -EINVAL;
    }
    const char *colon = port_colon(host);
    size_t hlen = colon ? (size_t)(colon - host) : alen;
    if ((colon && !port_ok(colon + 1)) || !host_ok(host, hlen, false)) {
        *why = "must be http://HOST[:PORT][/BASE] with a DNS name, an IPv4 address or [IPv6] "
               "and a port from 1 to 65535";
        return -EINVAL;
    }
    if (*path && strcmp(path, "/") != 0) {
        size_t plen = strlen(path);
        scoped_free char *p = xstrndup(path, path[plen - 1] == '/' ? plen - 1 : plen);
        if (!url_path_ok(p)) {
            *why = "the base path must be a plain URL path (no query, fragment, '.', '..' or "
                   "empty segments)";
            return -EINVAL;
        }
    }
    return 0;
}

int config_egress_check_abs_path(const char *s, const char **why)
{
    if (s[0] != '/') {
        *why = "must be an absolute path";
        return -EINVAL;
    }
    return 0;
}

static int check_header_name(const char *s, const char **why)
{
    /* Framing and hop-by-hop headers are the proxy's own business. */
    static const char *const reserved[] = {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
    };
    size_t n = strlen(s);
    *why = "must be an HTTP header name (letters, digits, '-'; at most 64 bytes)";
    if (n == 0 || n > 64) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_token_char(s[i])) {
            return -EINVAL;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
        if (strcasecmp(s, reserved[i]) == 0) {
            *why = "names a header that the proxy controls itself";
            return -EINVAL;
        }
    }
    return 0;
}

int config_walk_fields_check(const struct field *fields, const char *parent, const char *target,
                             const char *file, const struct mark *marks, struct err *e);

static void route_clear(struct egress_route_config *r)
{
    free(r->name);
    free(r->path_prefix);
    free(r->upstream);
    free(r->credential_file);
    free(r->header);
    memset(r, 0, sizeof(*r));
}

static void route_defaults(struct egress_route_config *r)
{
    *r = (struct egress_route_config){
        .name = NULL,
        .methods = 0, /* set from the profile's read_only when the profile is complete */
        .path_prefix = xstrdup("/"),
        .upstream = NULL,
        .credential_file = NULL,
        .header = xstrdup("Authorization"),
    };
}

void config_egress_strlist_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

void config_egress_profile_clear(struct egress_profile_config *p)
{
    free(p->name);
    config_egress_strlist_free(p->allow, p->n_allow);
    config_egress_strlist_free(p->allow_addresses, p->n_allow_addresses);
    for (size_t i = 0; i < p->n_routes; i++) {
        route_clear(&p->routes[i]);
    }
    free(p->routes);
    memset(p, 0, sizeof(*p));
}

static void profile_defaults(struct egress_profile_config *p, const char *name)
{
    *p = (struct egress_profile_config){
        .name = xstrdup(name),
        .read_only = false,
        .max_request_bytes = 8 * MIB,
        .max_task_bytes = 64 * MIB,
        .max_connections = 16,
    };
}

/* The start of a list field's value (T_STRLIST and T_ROUTES: a sequence; T_PROFILES: a
 * mapping): null leaves the list as it is (returns 1), a node of another kind fails. */
static int walk_list_start(struct walk *w, const struct field *f, const char *path,
                           const yaml_node_t *v, yaml_node_type_t kind, struct err *e)
{
    if (yamlnode_is_null(v)) {
        return 1;
    }
    if (v->type != kind) {
        struct mark m = config_walk_node_mark(v);
        return fail(e, w->file, &m, "'%s' must be %s, not %s", path, config_walk_type_desc(f->type),
                    yamlnode_kind(v));
    }
    return 0;
}

/* Walks the mapping v into one entry of a list (target, its defaults set) through fields,
 * with marks of its own (n slots, slot 0 the entry's root at root). */
static int walk_entry(struct walk *w, yaml_node_t *v, const struct field *fields, const char *path,
                      char *target, struct mark *marks, size_t n, struct mark root, struct err *e)
{
    memset(marks, 0, n * sizeof(*marks));
    marks[0] = root;
    struct walk ew = {w->file, w->doc, marks, target};
    return config_walk_map(&ew, v, fields, path, e);
}

/* Appends the entry at elem (size bytes) to arr, an array of *n, which takes it over.
 * Returns the array, moved maybe. */
static void *list_push(void *arr, size_t *n, const void *elem, size_t size)
{
    char *a = xrealloc(arr, (*n + 1) * size);
    memcpy(a + *n * size, elem, size);
    (*n)++;
    return a;
}

int config_egress_walk_strlist(struct walk *w, const struct field *f, const char *path,
                               yaml_node_t *v, struct err *e)
{
    struct mark m = config_walk_node_mark(v);
    char ***list = (char ***)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(char **));
    int r = walk_list_start(w, f, path, v, YAML_SEQUENCE_NODE, e);
    if (r != 0) {
        return r < 0 ? r : 0;
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!item) {
            return fail(e, w->file, &m, "malformed sequence");
        }
        struct mark im = config_walk_node_mark(item);
        const char *s = (const char *)item->data.scalar.value;
        if (item->type != YAML_SCALAR_NODE || yamlnode_is_null(item) || *s == '\0' ||
            strlen(s) != item->data.scalar.length) {
            return fail(e, w->file, &im, "'%s' entries must be non-empty strings", path);
        }
        const char *why = NULL;
        if (f->check && f->check(s, &why) < 0) {
            return fail(e, w->file, &im, "'%s' entry '%.80s': %s", path, s, why);
        }
        if (*n >= EGRESS_LIST_MAX) {
            return fail(e, w->file, &im, "'%s' has more than %d entries", path, EGRESS_LIST_MAX);
        }
        char *copy = xstrdup(s);
        *list = list_push(*list, n, &copy, sizeof(copy));
    }
    return 0;
}

int config_egress_walk_methods(struct walk *w, const struct field *f, const char *path,
                               yaml_node_t *v, struct err *e)
{
    struct mark m = config_walk_node_mark(v);
    uint32_t bits = 0;
    if (v->type != YAML_SEQUENCE_NODE ||
        v->data.sequence.items.start == v->data.sequence.items.top) {
        return fail(e, w->file, &m, "'%s' must be %s", path, config_walk_type_desc(f->type));
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        struct mark im = item ? config_walk_node_mark(item) : m;
        uint32_t bit = 0;
        if (item && item->type == YAML_SCALAR_NODE) {
            const char *name = (const char *)item->data.scalar.value;
            bit = egress_parse_method_bit(name, strlen(name));
        }
        if (bit == 0) {
            return fail(e, w->file, &im,
                        "'%s' entries must be GET, HEAD, POST, PUT, PATCH, "
                        "DELETE or OPTIONS (in capitals)",
                        path);
        }
        bits |= bit;
    }
    *(uint32_t *)(w->target + f->off) = bits;
    return 0;
}

int config_egress_walk_routes(struct walk *w, const struct field *f, const char *path,
                              yaml_node_t *v, struct err *e)
{
    struct mark m = config_walk_node_mark(v);
    struct egress_route_config **routes = (struct egress_route_config **)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(void *));
    int ret = walk_list_start(w, f, path, v, YAML_SEQUENCE_NODE, e);
    if (ret != 0) {
        return ret < 0 ? ret : 0;
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!item) {
            return fail(e, w->file, &m, "malformed sequence");
        }
        struct mark im = config_walk_node_mark(item);
        char rpath[128];
        (void)snprintf(rpath, sizeof(rpath), "%s[%zu]", path, *n);
        if (item->type != YAML_MAPPING_NODE) {
            return fail(e, w->file, &im, "'%s' must be a mapping, not %s", rpath,
                        yamlnode_kind(item));
        }
        if (*n >= EGRESS_ROUTES_MAX) {
            return fail(e, w->file, &im, "'%s' has more than %d routes", path, EGRESS_ROUTES_MAX);
        }
        scoped(route_clear) struct egress_route_config r;
        struct mark rm[RM_COUNT];
        route_defaults(&r);
        ret = walk_entry(w, item, route_fields, rpath, (char *)&r, rm, RM_COUNT, im, e);
        if (ret < 0) {
            return ret;
        }
        if (!r.name) {
            return fail(e, w->file, &im, "'%s': missing required key 'name'", rpath);
        }
        if (!r.upstream) {
            return fail(e, w->file, &im, "'%s': missing required key 'upstream'", rpath);
        }
        ret = config_walk_fields_check(route_fields, rpath, (const char *)&r, w->file, rm, e);
        if (ret < 0) {
            return ret;
        }
        *routes = list_push(*routes, n, &r, sizeof(r));
        memset(&r, 0, sizeof(r));
    }
    return 0;
}

/* Rules of one profile beyond its fields' syntax; also completes route defaults that depend
 * on the profile. pm: the profile's marks, or NULL. */
static int profile_finish(struct egress_profile_config *p, const char *file, const struct mark *pm,
                          struct err *e)
{
    if (p->read_only && p->n_allow > 0) {
        return fail(e, file, config_walk_mark_pick(pm, PFM_ALLOW, PFM_READ_ONLY),
                    "egress profile '%s': a read_only profile cannot allow CONNECT destinations "
                    "(the method inside TLS cannot be checked)",
                    p->name);
    }
    for (size_t i = 0; i < p->n_routes; i++) {
        struct egress_route_config *r = &p->routes[i];
        if (r->methods == 0) {
            r->methods = p->read_only ? EGRESS_METHODS_READ_ONLY : EGRESS_METHODS_ALL;
        }
        if (p->read_only && (r->methods & ~(uint32_t)EGRESS_METHODS_READ_ONLY)) {
            return fail(e, file, config_walk_mark_pick(pm, PFM_ROUTES, PFM_READ_ONLY),
                        "egress profile '%s': route '%s' allows methods beyond GET, HEAD and "
                        "OPTIONS in a read_only profile",
                        p->name, r->name);
        }
    }
    return 0;
}

int config_egress_walk_profiles(struct walk *w, const struct field *f, const char *path,
                                yaml_node_t *v, struct err *e)
{
    struct mark m = config_walk_node_mark(v);
    struct egress_profile_config **list = (struct egress_profile_config **)(w->target + f->off);
    size_t *n = (size_t *)(w->target + f->off + sizeof(void *));
    int start = walk_list_start(w, f, path, v, YAML_MAPPING_NODE, e);
    if (start != 0) {
        return start < 0 ? start : 0;
    }
    for (yaml_node_pair_t *pair = v->data.mapping.pairs.start; pair < v->data.mapping.pairs.top;
         pair++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, pair->key);
        yaml_node_t *val = yaml_document_get_node(w->doc, pair->value);
        if (!k || !val) {
            return fail(e, w->file, &m, "malformed mapping");
        }
        struct mark km = config_walk_node_mark(k);
        const char *name = (const char *)k->data.scalar.value;
        if (k->type != YAML_SCALAR_NODE || !config_walk_name_ok(name)) {
            return fail(e, w->file, &km, "egress profile names must match [a-z0-9_-]{1,32}");
        }
        if (strcmp(name, "none") == 0) {
            return fail(e, w->file, &km, "egress profile name 'none' is reserved (loopback only)");
        }
        for (size_t i = 0; i < *n; i++) {
            if (strcmp((*list)[i].name, name) == 0) {
                return fail(e, w->file, &km, "duplicate egress profile '%s'", name);
            }
        }
        if (*n >= EGRESS_PROFILES_MAX) {
            return fail(e, w->file, &km, "more than %d egress profiles", EGRESS_PROFILES_MAX);
        }
        char ppath[160];
        (void)snprintf(ppath, sizeof(ppath), "%.64s.%.32s", path, name);
        scoped(config_egress_profile_clear) struct egress_profile_config p;
        struct mark pm[PFM_COUNT];
        struct mark vm = config_walk_node_mark(val);
        profile_defaults(&p, name);
        memset(pm, 0, sizeof(pm));
        pm[PFM_ROOT] = vm;
        if (!yamlnode_is_null(val) && val->type != YAML_MAPPING_NODE) {
            return fail(e, w->file, &vm, "'%s' must be a mapping, not %s", ppath,
                        yamlnode_kind(val));
        }
        int r = yamlnode_is_null(val)
                    ? 0
                    : walk_entry(w, val, profile_fields, ppath, (char *)&p, pm, PFM_COUNT, vm, e);
        if (r < 0) {
            return r;
        }
        r = config_walk_fields_check(profile_fields, ppath, (const char *)&p, w->file, pm, e);
        if (r < 0) {
            return r;
        }
        r = profile_finish(&p, w->file, pm, e);
        if (r < 0) {
            return r;
        }
        *list = list_push(*list, n, &p, sizeof(p));
        memset(&p, 0, sizeof(p));
    }
    return 0;
}

/* Checks egress profiles of a hand-made or parsed config: every value's syntax and the
 * profile rules. m: the config's marks, or NULL. */
int config_egress_check(const struct config *c, const struct mark *m, struct err *e)
{
    const char *f = c->source;
    const struct mark *pm = config_walk_mark_pick(m, CM_EGRESS_PROFILES, CM_EGRESS);
    const char *why = NULL;
    if (c->egress_port < 1024 || c->egress_port > 65535) {
        return fail(e, f, config_walk_mark_pick(m, CM_EGRESS_PORT, CM_EGRESS),
                    "'egress.port' must be between 1024 and 65535");
    }
    for (size_t i = 0; i < c->n_egress_profiles; i++) {
        const struct egress_profile_config *p = &c->egress_profiles[i];
        if (!config_walk_name_ok(p->name) || strcmp(p->name, "none") == 0) {
            return fail(e, f, pm,
                        "egress profile names must match [a-z0-9_-]{1,32} and not be "
                        "'none'");
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->egress_profiles[j].name, p->name) == 0) {
                return fail(e, f, pm, "duplicate egress profile '%s'", p->name);
            }
        }
        for (size_t j = 0; j < p->n_allow; j++) {
            if (check_hostport(p->allow[j], &why) < 0) {
                return fail(e, f, pm, "egress profile '%s': allow '%.80s': %s", p->name,
                            p->allow[j], why);
            }
        }
        for (size_t j = 0; j < p->n_allow_addresses; j++) {
            if (check_cidr(p->allow_addresses[j], &why) < 0) {
                return fail(e, f, pm, "egress profile '%s': allow_addresses '%.80s': %s", p->name,
                            p->allow_addresses[j], why);
            }
        }
        if (p->max_request_bytes < KIB || p->max_task_bytes < KIB || p->max_connections < 1 ||
            p->max_connections > 1024) {
            return fail(e, f, pm,
                        "egress profile '%s': byte limits must be at least 1KiB and "
                        "max_connections between 1 and 1024",
                        p->name);
        }
        for (size_t j = 0; j < p->n_routes; j++) {
            const struct egress_route_config *r = &p->routes[j];
            if (!r->name || check_route_name(r->name, &why) < 0 || !r->upstream ||
                check_upstream(r->upstream, &why) < 0 || !r->path_prefix ||
                check_path_prefix(r->path_prefix, &why) < 0 || !r->header ||
                check_header_name(r->header, &why) < 0 ||
                (r->credential_file &&
                 config_egress_check_abs_path(r->credential_file, &why) < 0) ||
                r->methods == 0 || (r->methods & ~(uint32_t)EGRESS_METHODS_ALL)) {
                return fail(e, f, pm, "egress profile '%s': route %zu is incomplete or invalid%s%s",
                            p->name, j, why ? ": " : "", why ? why : "");
            }
            if (p->read_only && (r->methods & ~(uint32_t)EGRESS_METHODS_READ_ONLY)) {
                return fail(e, f, pm,
                            "egress profile '%s': route '%s' allows methods beyond "
                            "GET, HEAD and OPTIONS in a read_only profile",
                            p->name, r->name);
            }
        }
        if (p->read_only && p->n_allow > 0) {
            return fail(e, f, pm,
                        "egress profile '%s': a read_only profile cannot allow CONNECT "
                        "destinations",
                        p->name);
        }
    }
    return 0;
}
