/* SPDX-License-Identifier: MIT */
/* Capability tokens: encoding and hashing, the mount policy (sources and destinations),
 * verification and its denial reasons, uses, expiry and revocation reaching linked tasks,
 * persistence across a reopen, and the database holding hashes only. A fake wall clock
 * drives expiry; the store runs on a private libuv loop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "wire/ctl.h"
#include "lib/scrub.h"
#include "token/token.h"
#include "lib/util.h"

static uint64_t fake_now = 1700000000000ULL;

static uint64_t fake_clock(void)
{
    return fake_now;
}

/* A kill callback that records what it was told. */
struct kills {
    struct token_link *last;
    enum token_state why;
    int count;
};

static struct kills kills;
static int expired_count;

static void record_expired(const char *id, size_t killed, void *arg)
{
    (void)arg;
    assert_int_equal(strlen(id), TOKEN_ID_LEN);
    assert_int_equal(killed, 1);
    expired_count++;
}

static void record_kill(struct token_link *l, enum token_state why, void *arg)
{
    (void)arg;
    kills.last = l;
    kills.why = why;
    kills.count++;
    token_detach(l); /* as a task that finished at once would */
}

struct fixture {
    char dir[64];   /* state dir */
    char root[128]; /* mount root: root/data/hello.txt, root/escape -> outside */
    char outside[64];
    uv_loop_t loop;
    struct token_store *s;
    const char *roots[1];
    const char *forbidden[1];
    const char *profiles[1];
    struct token_policy pol;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int open_store(struct fixture *f)
{
    struct err e = ERR_INIT;
    struct token_hooks hooks = {.kill = record_kill, .expired = record_expired, .arg = NULL};
    int r = token_store_open(&f->loop, f->dir, &f->pol, &hooks, NULL, &f->s, &e);
    if (r < 0) {
        print_error("token_store_open: %s\n", err_msg(&e));
    }
    return r;
}

/* Shuts the store down, lets the loop finish its write-back, frees it. */
static void close_store(struct fixture *f)
{
    token_store_shutdown(f->s);
    (void)uv_run(&f->loop, UV_RUN_DEFAULT);
    f->s = token_store_free(f->s);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char path[PATH_MAX];
    fake_now = 1700000000000ULL;
    memset(&kills, 0, sizeof(kills));
    expired_count = 0;
    strcpy(f->dir, "/tmp/sbx-test-token-XXXXXX");
    strcpy(f->outside, "/tmp/sbx-test-out-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_non_null(mkdtemp(f->outside));
    (void)snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
    assert_int_equal(mkdir(f->root, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/data", f->root);
    assert_int_equal(mkdir(path, 0755), 0);
    (void)snprintf(path, sizeof(path), "%s/data/hello.txt", f->root);
    write_file(path, "hello\n");
    (void)snprintf(path, sizeof(path), "%s/escape", f->root);
    assert_int_equal(symlink(f->outside, path), 0);
    (void)snprintf(path, sizeof(path), "%s/state", f->root);
    assert_int_equal(mkdir(path, 0700), 0);
    f->roots[0] = f->root;
    /* The forbidden path lies inside the root, as a state dir below a mount root would. */
    f->forbidden[0] = strdup(path);
    f->profiles[0] = "web";
    f->pol = (struct token_policy){
        .mount_roots = f->roots,
        .n_mount_roots = 1,
        .forbidden = f->forbidden,
        .n_forbidden = 1,
        .net_profiles = f->profiles,
        .n_net_profiles = 1,
        .max_ttl_ns = 3600ULL * 1000000000ULL,
        .default_ttl_ns = 600ULL * 1000000000ULL,
        .max_tokens = 16,
        .now_ms = fake_clock,
    };
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(open_store(f), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->s) {
        close_store(f);
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    (void)nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    (void)nftw(f->outside, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free((void *)f->forbidden[0]);
    free(f);
    return 0;
}

/* Issues a token; returns it (and its id) or fails the test. */
static const struct token *issue(struct fixture *f, const struct token_request *rq,
                                 char token[TOKEN_STR_LEN + 1])
{
    struct err e = ERR_INIT;
    const struct token *t = NULL;
    int r = token_issue(f->s, rq, token, &t, &e);
    if (r < 0) {
        print_error("token_issue: %s\n", err_msg(&e));
    }
    assert_int_equal(r, 0);
    assert_non_null(t);
    return t;
}

/* The label of the last refusal authorize saw (sbx_denied_total's reason). */
static const char *last_why;

static int authorize(struct fixture *f, const char *token, const char *pool, struct err *e)
{
    const struct token *t = NULL;
    last_why = NULL;
    return token_authorize(f->s, token, strlen(token), pool, &last_why, &t, e);
}

/* ---- Encoding and hashing ---- */

static void token_secret_decode__accepts_what_issue_prints(void **state)
{
    struct fixture *f = *state;
    char token[TOKEN_STR_LEN + 1];
    struct token_request rq = {0};
    uint8_t secret[TOKEN_SECRET_BYTES];
    (void)issue(f, &rq, token);
    assert_int_equal(strlen(token), TOKEN_STR_LEN);
    assert_memory_equal(token, "sbx_", 4);
    for (size_t i = 4; i < TOKEN_STR_LEN; i++) {
        char c = token[i];
        assert_true((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_');
    }
    assert_int_equal(token_secret_decode(token, strlen(token), secret), 0);
}

static void token_secret_decode__rejects_malformed(void **state)
{
    (void)state;
    uint8_t secret[TOKEN_SECRET_BYTES];
    char good[TOKEN_STR_LEN + 1];
    memcpy(good, "sbx_", 4);
    memset(good + 4, 'A', TOKEN_STR_LEN - 4);
    good[TOKEN_STR_LEN] = '\0';
    assert_int_equal(token_secret_decode(good, strlen(good), secret), 0);
    char bad[TOKEN_STR_LEN + 2];
    memcpy(bad, good, sizeof(good));
    bad[0] = 'x'; /* prefix */
    assert_int_equal(token_secret_decode(bad, strlen(bad), secret), -EINVAL);
    assert_int_equal(token_secret_decode(good, strlen(good) - 1, secret), -EINVAL); /* length */
    memcpy(bad, good, sizeof(good));
    bad[10] = '+'; /* not base64url */
    assert_int_equal(token_secret_decode(bad, strlen(bad), secret), -EINVAL);
    memcpy(bad, good, sizeof(good));
    bad[TOKEN_STR_LEN - 1] = 'B'; /* non-canonical trailing bits: a second spelling */
    assert_int_equal(token_secret_decode(bad, strlen(bad), secret), -EINVAL);
    assert_int_equal(token_secret_decode("", 0, secret), -EINVAL);
}

static void token_secret_hash__is_deterministic_and_personalized(void **state)
{
    (void)state;
    uint8_t secret[TOKEN_SECRET_BYTES], h1[TOKEN_HASH_BYTES], h2[TOKEN_HASH_BYTES];
    uint8_t plain[TOKEN_HASH_BYTES];
    assert_true(sodium_init() >= 0);
    randombytes_buf(secret, sizeof(secret));
    token_secret_hash(secret, h1);
    token_secret_hash(secret, h2);
    assert_memory_equal(h1, h2, sizeof(h1));
    /* Not the bare BLAKE2b of the secret: a hash made for another purpose never matches. */
    crypto_generichash(plain, sizeof(plain), secret, sizeof(secret), NULL, 0);
    assert_memory_not_equal(h1, plain, sizeof(h1));
    secret[0] ^= 1;
    token_secret_hash(secret, h2);
    assert_memory_not_equal(h1, h2, sizeof(h1));
}

/* ---- Policy ---- */

static void token_policy_path_within__components_not_prefixes(void **state)
{
    (void)state;
    assert_true(token_policy_path_within("/srv/data", "/srv/data"));
    assert_true(token_policy_path_within("/srv/data/x", "/srv/data"));
    assert_false(token_policy_path_within("/srv/database", "/srv/data"));
    assert_false(token_policy_path_within("/srv", "/srv/data"));
    assert_true(token_policy_path_within("/anything", "/"));
}

static void token_policy_check_src__resolves_and_confines(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char src[PATH_MAX], *real = NULL;

    (void)snprintf(src, sizeof(src), "%s/data/./hello.txt", f->root);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), 0);
    char want[PATH_MAX];
    (void)snprintf(want, sizeof(want), "%s/data/hello.txt", f->root);
    assert_string_equal(real, want);
    free(real);
    real = NULL;
    /* A symlink out of the root, and "..": judged by the real path, refused. */
    (void)snprintf(src, sizeof(src), "%s/escape", f->root);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "not under an allowed mount root"));
    (void)snprintf(src, sizeof(src), "%s/data/../..", f->root);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), -EACCES);
    /* The forbidden path, what is below it, and what holds it. */
    (void)snprintf(src, sizeof(src), "%s/state", f->root);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "sbxd's state or sockets"));
    assert_int_equal(token_policy_check_src(&f->pol, f->root, &real, &e), -EACCES);
    /* Missing, relative, or neither a directory nor a regular file. */
    (void)snprintf(src, sizeof(src), "%s/missing", f->root);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), -EINVAL);
    assert_int_equal(token_policy_check_src(&f->pol, "data", &real, &e), -EINVAL);
    (void)snprintf(src, sizeof(src), "%s/data/fifo", f->root);
    assert_int_equal(mkfifo(src, 0600), 0);
    assert_int_equal(token_policy_check_src(&f->pol, src, &real, &e), -EACCES);
    assert_null(real);
    /* No roots: nothing at all. */
    struct token_policy none = f->pol;
    none.n_mount_roots = 0;
    (void)snprintf(src, sizeof(src), "%s/data", f->root);
    assert_int_equal(token_policy_check_src(&none, src, &real, &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "no mount roots"));
}

static void token_policy_check_dsts__system_dirs_and_overlaps(void **state)
{
    (void)state;
    struct err e = ERR_INIT;
    static const char *const ok[] = {"/data",    "/mnt/x",          "/srv/a/b",    "/opt/tool",
                                     "/work/in", "/workdir",        "/home/agent", "/tmp/in",
                                     "/tmp/a/b", "/data with space"};
    static const char *const bad[] = {
        "/",       "/usr",   "/usr/lib/x", "/bin",    "/etc/x",   "/lib64", "/libexec",
        "/proc/1", "/dev/x", "/sys",       "/tmp",    "/work",    "/var/x", "/root",
        "data",    "/data/", "/data//x",   "/./data", "/data/..", "/a\nb",  ""};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct token_mount m = {NULL, (char *)ok[i]};
        assert_int_equal(token_policy_check_dsts(&m, 1, &e), 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct token_mount m = {NULL, (char *)bad[i]};
        if (token_policy_check_dsts(&m, 1, &e) != -EACCES) {
            fail_msg("destination '%s' was accepted", bad[i]);
        }
    }
    char longp[CTL_PATH_MAX + 8];
    longp[0] = '/';
    memset(longp + 1, 'a', sizeof(longp) - 2);
    longp[sizeof(longp) - 1] = '\0';
    struct token_mount lm = {NULL, longp};
    assert_int_equal(token_policy_check_dsts(&lm, 1, &e), -EACCES);
    struct token_mount two[] = {{NULL, "/data"}, {NULL, "/data/sub"}};
    assert_int_equal(token_policy_check_dsts(two, 2, &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "overlap"));
    struct token_mount same[] = {{NULL, "/data"}, {NULL, "/data"}};
    assert_int_equal(token_policy_check_dsts(same, 2, &e), -EACCES);
    struct token_mount apart[] = {{NULL, "/data"}, {NULL, "/database"}};
    assert_int_equal(token_policy_check_dsts(apart, 2, &e), 0);
}

static void token_issue__refuses_what_the_policy_refuses(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1];
    const struct token *t = NULL;
    char src[PATH_MAX];
    (void)snprintf(src, sizeof(src), "%s/escape", f->root);
    struct token_mount m = {src, "/data"};
    struct token_request rq = {.mounts = &m, .n_mounts = 1};
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), -EACCES);
    rq = (struct token_request){.ttl_ns = 2 * 3600ULL * 1000000000ULL};
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "max_ttl"));
    rq = (struct token_request){.net = "elsewhere"};
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), -EINVAL);
    rq = (struct token_request){.net = "web"};
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), 0);
    struct token_info ti;
    token_get_info(f->s, t, &ti);
    assert_string_equal(ti.net, "web");
    rq = (struct token_request){.net = "none"};
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), 0);
    token_get_info(f->s, t, &ti);
    assert_null(ti.net);
    assert_int_equal(ti.expires_ms - ti.created_ms, 600000); /* the default ttl */
    assert_int_equal(token_count(f->s), 2);
}

/* ---- Verification ---- */

static void token_authorize__reasons(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1], other[TOKEN_STR_LEN + 1];
    const char *pools[] = {"python"};
    struct token_request rq = {.pools = pools, .n_pools = 1, .ttl_ns = 60ULL * 1000000000ULL};
    const struct token *t = issue(f, &rq, token);
    assert_int_equal(authorize(f, token, "python", &e), 0);
    /* Pool not granted. */
    assert_int_equal(authorize(f, token, "heavy", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "does not grant pool 'heavy'"));
    assert_string_equal(last_why, "pool_not_allowed");
    /* Forged: well-formed, unknown. The reason never holds the token. */
    memcpy(other, token, sizeof(other));
    other[10] = other[10] == 'A' ? 'B' : 'A';
    assert_int_equal(authorize(f, other, "python", &e), -EACCES);
    assert_string_equal(err_msg(&e), "unknown token");
    assert_string_equal(last_why, "token_unknown");
    assert_int_equal(authorize(f, "sbx_nope", "python", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "malformed"));
    assert_string_equal(last_why, "token_malformed");
    assert_null(strstr(err_msg(&e), token));
    /* Expired: at the deadline already. */
    struct token_info ti;
    token_get_info(f->s, t, &ti);
    fake_now = ti.expires_ms;
    assert_int_equal(authorize(f, token, "python", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "has expired"));
    assert_non_null(strstr(err_msg(&e), ti.id));
    assert_string_equal(last_why, "token_expired");
}

static void token_attach__uses_run_out(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1];
    struct token_request rq = {.uses = 2};
    const struct token *t = issue(f, &rq, token);
    struct token_link l1 = {0}, l2 = {0};
    assert_int_equal(authorize(f, token, "p", &e), 0);
    token_attach(f->s, t, &l1);
    assert_int_equal(authorize(f, token, "p", &e), 0);
    token_attach(f->s, t, &l2);
    assert_int_equal(authorize(f, token, "p", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "used up (2 uses)"));
    assert_string_equal(last_why, "token_used_up");
    struct token_info ti;
    token_get_info(f->s, t, &ti);
    assert_int_equal(ti.state, TOKEN_USED_UP);
    assert_int_equal(ti.running, 2);
    token_detach(&l1);
    token_detach(&l2);
    token_detach(&l2); /* harmless */
    token_get_info(f->s, t, &ti);
    assert_int_equal(ti.running, 0);
    assert_int_equal(ti.uses_left, 0);
}

static void token_revoke__kills_linked_tasks_and_denies(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1];
    struct token_request rq = {0};
    const struct token *t = issue(f, &rq, token);
    struct token_info ti;
    token_get_info(f->s, t, &ti);
    struct token_link l = {0};
    token_attach(f->s, t, &l);
    const struct token *rt = NULL;
    size_t killed = 0;
    assert_int_equal(token_revoke(f->s, ti.id, strlen(ti.id), &rt, &killed, &e), 0);
    assert_ptr_equal(rt, t);
    assert_int_equal(killed, 1);
    assert_int_equal(kills.count, 1);
    assert_ptr_equal(kills.last, &l);
    assert_int_equal(kills.why, TOKEN_REVOKED);
    assert_null(l.tok);
    assert_int_equal(authorize(f, token, "p", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "was revoked"));
    assert_string_equal(last_why, "token_revoked");
    /* By the token string, again: no error, nobody left to kill. */
    assert_int_equal(token_revoke(f->s, token, strlen(token), &rt, &killed, &e), 0);
    assert_int_equal(killed, 0);
    assert_int_equal(token_revoke(f->s, "0123456789abcdef", 16, &rt, &killed, &e), -ENOENT);
}

static void token_timer__expiry_kills_linked_tasks(void **state)
{
    struct fixture *f = *state;
    char token[TOKEN_STR_LEN + 1];
    struct token_request rq = {.ttl_ns = 1000000000ULL};
    const struct token *t = issue(f, &rq, token);
    struct token_link l = {0};
    token_attach(f->s, t, &l);
    (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(kills.count, 0);
    fake_now += 1500;
    token_store_set_clock(f->s, fake_clock); /* re-arms the timer against the new time */
    for (int i = 0; i < 50 && kills.count == 0; i++) {
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(kills.count, 1);
    assert_int_equal(kills.why, TOKEN_EXPIRED);
    assert_ptr_equal(kills.last, &l);
    assert_int_equal(expired_count, 1);
    /* Long after: forgotten. */
    fake_now += TOKEN_KEEP_MS + 1000;
    token_store_set_clock(f->s, fake_clock);
    for (int i = 0; i < 50 && token_count(f->s) > 0; i++) {
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    }
    assert_int_equal(token_count(f->s), 0);
    assert_int_equal(kills.count, 1);
}

static void token_issue__full_store_evicts_ended_tokens_only(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1];
    struct token_request rq = {0};
    const struct token *first = NULL;
    for (int i = 0; i < 16; i++) {
        const struct token *t = issue(f, &rq, token);
        first = first ? first : t;
    }
    const struct token *t = NULL;
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), -ENOSPC);
    struct token_info ti;
    token_get_info(f->s, first, &ti);
    size_t killed;
    assert_int_equal(token_revoke(f->s, ti.id, strlen(ti.id), &t, &killed, &e), 0);
    assert_int_equal(token_issue(f->s, &rq, token, &t, &e), 0);
    assert_int_equal(token_count(f->s), 16);
}

/* ---- Persistence ---- */

static bool file_contains(const char *path, const void *needle, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    ssize_t got = read(fd, buf, (size_t)st.st_size);
    close(fd);
    bool found = got > 0 && memmem(buf, (size_t)got, needle, n) != NULL;
    free(buf);
    return found;
}

static void token_store_open__tokens_survive_and_only_hashes_are_stored(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char keep[TOKEN_STR_LEN + 1], gone[TOKEN_STR_LEN + 1], src[PATH_MAX];
    (void)snprintf(src, sizeof(src), "%s/data", f->root);
    struct token_mount m = {src, "/data"};
    const char *pools[] = {"python", "heavy"};
    struct token_request rq = {.mounts = &m,
                               .n_mounts = 1,
                               .pools = pools,
                               .n_pools = 2,
                               .net = "web",
                               .uses = 3,
                               .ttl_ns = 120ULL * 1000000000ULL};
    const struct token *t = issue(f, &rq, keep);
    struct token_link l = {0};
    token_attach(f->s, t, &l);
    token_detach(&l);
    struct token_request rq2 = {0};
    const struct token *g = issue(f, &rq2, gone);
    struct token_info ti;
    token_get_info(f->s, g, &ti);
    size_t killed;
    assert_int_equal(token_revoke(f->s, gone, strlen(gone), &g, &killed, &e), 0);
    close_store(f);

    /* Raw bytes of the database and its journal: no token, nor its encoded secret. */
    static const char *const files[] = {"tokens.db", "tokens.db-wal", "tokens.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[PATH_MAX];
        (void)snprintf(p, sizeof(p), "%s/%s", f->dir, files[i]);
        assert_false(file_contains(p, keep, TOKEN_STR_LEN));
        assert_false(file_contains(p, keep + 4, TOKEN_STR_LEN - 4));
        assert_false(file_contains(p, gone + 4, TOKEN_STR_LEN - 4));
    }
    char p[PATH_MAX];
    struct stat st;
    (void)snprintf(p, sizeof(p), "%s/tokens.db", f->dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    assert_int_equal(open_store(f), 0);
    assert_int_equal(token_count(f->s), 2);
    const struct token *t2 = NULL;
    const char *why = NULL;
    assert_int_equal(token_authorize(f->s, keep, strlen(keep), "heavy", &why, &t2, &e), 0);
    token_get_info(f->s, t2, &ti);
    assert_int_equal(ti.uses, 3);
    assert_int_equal(ti.uses_left, 2);
    assert_string_equal(ti.net, "web");
    assert_int_equal(ti.n_mounts, 1);
    assert_string_equal(ti.mounts[0].src, src);
    assert_string_equal(ti.mounts[0].dst, "/data");
    assert_int_equal(ti.n_pools, 2);
    assert_int_equal(authorize(f, gone, "python", &e), -EACCES);
    assert_non_null(strstr(err_msg(&e), "was revoked"));
    /* Long after expiry a reopen forgets them. */
    close_store(f);
    fake_now += 600000 + TOKEN_KEEP_MS + 1; /* past both: the default ttl is 600 s */
    assert_int_equal(open_store(f), 0);
    assert_int_equal(token_count(f->s), 0);
}

static void token_store_open__teaches_the_scrubber_the_prefix(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1], text[128];
    struct token_request rq = {0};
    (void)issue(f, &rq, token);
    close_store(f);
    struct scrub *sc = scrub_new();
    struct token_hooks hooks = {.kill = record_kill};
    assert_int_equal(token_store_open(&f->loop, f->dir, &f->pol, &hooks, sc, &f->s, &e), 0);
    /* A token issued before this start: sbxd never had its string, the prefix catches it. */
    (void)snprintf(text, sizeof(text), "curl -H 'X: %s' --data %s", token, token);
    char *out = scrub_dup(sc, text, strlen(text), NULL, NULL);
    assert_null(strstr(out, token));
    assert_null(strstr(out, token + 4));
    free(out);
    scrub_free(sc);
}

/* ---- Mounts ---- */

static void token_open_mounts__detached_read_only_trees(void **state)
{
    struct fixture *f = *state;
    struct err e = ERR_INIT;
    char token[TOKEN_STR_LEN + 1], dir[PATH_MAX], file[PATH_MAX];
    (void)snprintf(dir, sizeof(dir), "%s/data", f->root);
    (void)snprintf(file, sizeof(file), "%s/data/hello.txt", f->root);
    struct token_mount m[] = {{dir, "/data"}, {file, "/tmp/hello"}};
    struct token_request rq = {.mounts = m, .n_mounts = 2};
    const struct token *t = issue(f, &rq, token);
    int fds[TOKEN_MAX_MOUNTS];
    uint32_t files = 0;
    int n = token_open_mounts(f->s, t, fds, &files, &e);
    if (n == -EPERM || n == -ENOSYS) {
        skip(); /* not root, or no new mount API: nothing to test here */
    }
    assert_int_equal(n, 2);
    assert_int_equal(files, 2u);
    for (int i = 0; i < n; i++) {
        struct statvfs sv;
        assert_int_equal(fstatvfs(fds[i], &sv), 0);
        assert_true(sv.f_flag & ST_RDONLY);
        assert_true(sv.f_flag & ST_NOSUID);
        assert_true(sv.f_flag & ST_NODEV);
        close(fds[i]);
    }
    /* The source swapped for a symlink after the issue: refused when opened. */
    char moved[PATH_MAX];
    (void)snprintf(moved, sizeof(moved), "%s/data-old", f->root);
    assert_int_equal(rename(dir, moved), 0);
    assert_int_equal(symlink(f->outside, dir), 0);
    assert_true(token_open_mounts(f->s, t, fds, &files, &e) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(token_secret_decode__accepts_what_issue_prints, setup,
                                        teardown),
        cmocka_unit_test(token_secret_decode__rejects_malformed),
        cmocka_unit_test(token_secret_hash__is_deterministic_and_personalized),
        cmocka_unit_test(token_policy_path_within__components_not_prefixes),
        cmocka_unit_test_setup_teardown(token_policy_check_src__resolves_and_confines, setup,
                                        teardown),
        cmocka_unit_test(token_policy_check_dsts__system_dirs_and_overlaps),
        cmocka_unit_test_setup_teardown(token_issue__refuses_what_the_policy_refuses, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(token_authorize__reasons, setup, teardown),
        cmocka_unit_test_setup_teardown(token_attach__uses_run_out, setup, teardown),
        cmocka_unit_test_setup_teardown(token_revoke__kills_linked_tasks_and_denies, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(token_timer__expiry_kills_linked_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(token_issue__full_store_evicts_ended_tokens_only, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(token_store_open__tokens_survive_and_only_hashes_are_stored,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(token_store_open__teaches_the_scrubber_the_prefix, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(token_open_mounts__detached_read_only_trees, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
