/* SPDX-License-Identifier: MIT */
/* Unit tests of scrub.c, linked alone: every secret shape is redacted wherever it sits in a
 * string, ordinary text passes through unchanged, and the registry redacts what is
 * registered. Two corpora (scrub_corpus/ordinary.txt and secrets.txt, read from
 * SBX_SCRUB_CORPUS or tests/unit/scrub_corpus) hold the commands agents run and the secrets
 * they carry; the last test prints the scrubber's cost per call over them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/scrub.h"
#include "lib/strv.h"
#include "lib/util.h"

static char *scrub(const struct scrub *s, const char *text)
{
    return scrub_dup(s, text, strlen(text), NULL, NULL);
}

/* Asserts that scrubbing `in` gives exactly `want`. */
static void expect(const struct scrub *s, const char *in, const char *want)
{
    scoped_free char *got = scrub(s, in);
    if (strcmp(got, want) != 0) {
        fail_msg("scrub(\"%s\")\n  got  \"%s\"\n  want \"%s\"", in, got, want);
    }
}

/* Asserts that the secret is gone from the scrubbed text and a mark is there. */
static void expect_gone(const struct scrub *s, const char *in, const char *secret)
{
    scoped_free char *got = scrub(s, in);
    if (strstr(got, secret) || !strstr(got, SCRUB_MARK)) {
        fail_msg("scrub(\"%s\") = \"%s\" still holds \"%s\"", in, got, secret);
    }
}

static void scrub_dup__plain_text_unchanged(void **state)
{
    (void)state;
    const char *plain[] = {
        "python3 -c print(1)",
        "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0",
        "/home/user/projects/MyProject2/src/components/ButtonGroupVertical.tsx",
        "123e4567-e89b-12d3-a456-426614174000",
        "ThisIsAVeryLongIdentifierName123",
        "ls -la /tmp && echo done; cat /etc/os-release",
        "python3-some-long-package-name_with_underscores_2024",
        "https://example.com/path?q=1&page=2",
        "PWD=/tmp",
        "sk-learn",
        "Token expired",
        "key",
        "",
    };
    for (size_t i = 0; i < ARRAY_SIZE(plain); i++) {
        expect(NULL, plain[i], plain[i]);
    }
}

static void scrub_dup__jwt_anywhere(void **state)
{
    (void)state;
    const char *jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
                      "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", jwt);
    expect(NULL, buf, SCRUB_MARK);
    snprintf(buf, sizeof(buf), "token=%s;", jwt);
    expect(NULL, buf, "token=" SCRUB_MARK ";");
    snprintf(buf, sizeof(buf), "curl -d '{\"t\":\"%s\"}' x", jwt);
    expect(NULL, buf, "curl -d '{\"t\":\"" SCRUB_MARK "\"}' x");
    /* alg none: empty signature */
    expect(NULL, "x eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0. y", "x " SCRUB_MARK " y");
}

static void scrub_dup__authorization_and_bearer(void **state)
{
    (void)state;
    expect(NULL, "Authorization: Bearer abc.def-123", "Authorization: Bearer " SCRUB_MARK);
    expect(NULL, "-H", "-H");
    expect(NULL, "authorization: Basic dXNlcjpwYXNzd29yZA==", "authorization: Basic " SCRUB_MARK);
    expect(NULL, "Authorization: token-without-scheme", "Authorization: " SCRUB_MARK);
    expect(NULL, "curl -H 'Authorization: Bearer xyz123' https://x",
           "curl -H 'Authorization: Bearer " SCRUB_MARK "' https://x");
    expect(NULL, "send it with bearer   q1w2e3r4", "send it with bearer   " SCRUB_MARK);
    expect(NULL, "Cookie: a=1; b=2\nnext", "Cookie: " SCRUB_MARK "\nnext");
    expect(NULL, "X-Api-Key: 1234", "X-Api-Key: " SCRUB_MARK);
}

static void scrub_dup__secret_names_in_assignments(void **state)
{
    (void)state;
    expect(NULL, "API_TOKEN=sk-abc", "API_TOKEN=" SCRUB_MARK);
    expect(NULL, "env DB_PASSWORD=hunter2 ./run", "env DB_PASSWORD=" SCRUB_MARK " ./run");
    expect(NULL, "--password=hunter2", "--password=" SCRUB_MARK);
    expect(NULL, "{\"password\": \"p\\\"w\"}", "{\"password\": \"" SCRUB_MARK "\"}");
    expect(NULL, "aws_secret_access_key = abc", "aws_secret_access_key = " SCRUB_MARK);
    expect(NULL, "https://h/x?access_token=abc&x=1", "https://h/x?access_token=" SCRUB_MARK "&x=1");
    expect(NULL, "export GITHUB_TOKEN=\"x y\"", "export GITHUB_TOKEN=\"" SCRUB_MARK "\"");
    expect(NULL, "color=red size=2", "color=red size=2");
}

static void scrub_dup__aws_keys(void **state)
{
    (void)state;
    expect(NULL, "id AKIAIOSFODNN7EXAMPLE end", "id " SCRUB_MARK " end");
    expect(NULL, "ASIAY34FZKBOKMUTVV7A", SCRUB_MARK);
    /* 40-character secret access key, with '/' inside */
    expect_gone(NULL, "s3 wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY x", "K7MDENG");
    /* not a key id: too long */
    expect(NULL, "AKIAIOSFODNN7EXAMPLEXX", "AKIAIOSFODNN7EXAMPLEXX");
}

static void scrub_dup__known_prefixes_and_entropy(void **state)
{
    (void)state;
    expect_gone(NULL, "key sk-live-4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc");
    expect_gone(NULL, "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "aBcDeFgHiJk");
    expect_gone(NULL, "xoxb-1234567890-abcdefghij", "1234567890");
    /* long hex and base64 tokens */
    expect_gone(NULL, "--sig 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "9f86d081");
    expect_gone(NULL, "x=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MEFCQ0RFRkdISUpL", "Zm9vYmFy");
    expect_gone(NULL, "/v1/keys/q8Zr4PL2mXn7Tb0Vc5Wd9Ye3Ua1Sf6Rg", "q8Zr4PL2mXn7");
}

/* Random base64 tokens of 32+ characters are caught almost always. */
static void scrub_dup__random_tokens_detected(void **state)
{
    (void)state;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned seed = 12345;
    int missed = 0;
    for (int n = 0; n < 1000; n++) {
        char tok[41];
        size_t len = 32 + (size_t)(n % 9);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            tok[i] = b64[(seed >> 16) % 64];
        }
        tok[len] = '\0';
        if (tok[0] == '/') {
            tok[0] = 'Q';
        }
        scoped_free char *got = scrub(NULL, tok);
        missed += strstr(got, SCRUB_MARK) == NULL;
    }
    assert_true(missed <= 10);
}

/* Each built-in token prefix, followed by enough token characters, goes whole; followed by
 * too few, or glued to a word before it, it stays. The list is scrub.c's builtin_prefixes
 * (whose first characters C_PFX must hold). */
static void scrub_dup__every_builtin_prefix(void **state)
{
    (void)state;
    static const char *const prefixes[] = {
        "sk-",   "sk_live_", "sk_test_", "rk_live_", "rk_test_",    "whsec_", "ghp_",
        "gho_",  "ghu_",     "ghs_",     "ghr_",     "github_pat_", "glpat-", "xoxb-",
        "xoxp-", "xoxa-",    "xoxr-",    "xoxs-",    "xapp-",       "AIza",   "ya29.",
        "npm_",  "pypi-",    "hf_",      "dop_v1_",
    };
    char in[128];
    for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
        (void)snprintf(in, sizeof(in), "use %s%s now", prefixes[i],
                       "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0");
        expect(NULL, in, "use " SCRUB_MARK " now");
        (void)snprintf(in, sizeof(in), "%sab", prefixes[i]);
        expect(NULL, in, in);
        (void)snprintf(in, sizeof(in), "x9%sabcdefghijklmnopqrstuvwxyzabcdef", prefixes[i]);
        expect(NULL, in, in);
    }
}

/* Random texts made of the characters the matchers look for (and any byte) never make
 * scrub_dup read out of bounds (run under SAN=1), count every mark it writes, and never let
 * a registered secret through, wherever it sits. */
static void scrub_dup__random_texts(void **state)
{
    (void)state;
    static const char *const bits[] = {
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END ",
        "--password",
        " ",
        "=",
        ":",
        ": ",
        "://",
        "@",
        "\"",
        "'",
        "$",
        "{{",
        "/",
        ".",
        "sha256:",
        "sha512-",
        "eyJ",
        "Bearer ",
        "token",
        "AKIA",
        "ghp_",
        "sbx_",
        "a1B2c3D4e5F6g7H8",
        "\n",
        "::",
        "==",
        "x",
        "9",
        "\xff",
        "secret-one-42",
    };
    struct scrub *s = scrub_new();
    assert_int_equal(scrub_register(s, "secret-one-42", 13), 0);
    assert_int_equal(scrub_register_prefix(s, "sbx_"), 0);
    /* A registered secret inside what a pattern passes over (a key's name) still goes. */
    expect(s, "xsecret-one-42_token=abc", "x" SCRUB_MARK "_token=abc");
    unsigned seed = 4242;
    char text[512];
    for (int n = 0; n < 20000; n++) {
        size_t len = 0;
        seed = seed * 1103515245u + 12345u;
        size_t parts = (seed >> 16) % 24;
        for (size_t k = 0; k < parts; k++) {
            seed = seed * 1103515245u + 12345u;
            const char *b = bits[(seed >> 16) % ARRAY_SIZE(bits)];
            size_t m = strlen(b);
            if (len + m >= sizeof(text)) {
                break;
            }
            memcpy(text + len, b, m);
            len += m;
        }
        size_t out_len = 0, count = 0;
        scoped_free char *got = scrub_dup(s, text, len, &out_len, &count);
        size_t marks = 0;
        for (const char *m = got;
             (m = memmem(m, out_len - (size_t)(m - got), SCRUB_MARK, sizeof(SCRUB_MARK) - 1));
             m++) {
            marks++;
        }
        assert_true(marks >= count);
        assert_null(memmem(got, out_len, "secret-one-42", 13));
    }
    s = scrub_free(s);
}

static void scrub_dup__userinfo(void **state)
{
    (void)state;
    expect(NULL, "postgres://app:s3cr3t@db:5432/x", "postgres://app:" SCRUB_MARK "@db:5432/x");
    expect(NULL, "https://user@host/", "https://user@host/");
}

static void scrub_register__redacts_and_forgets(void **state)
{
    (void)state;
    struct scrub *s = scrub_new();
    assert_int_equal(scrub_register(s, "short", 5), -EINVAL);
    assert_int_equal(scrub_register(s, "plainword1", 10), 0);
    assert_int_equal(scrub_register(s, "plainword1", 10), -EEXIST);
    expect(s, "say plainword1 twice plainword1", "say " SCRUB_MARK " twice " SCRUB_MARK);
    /* many secrets: the table grows and still finds each */
    char buf[32];
    for (int i = 0; i < 500; i++) {
        snprintf(buf, sizeof(buf), "secretnr%04d", i);
        assert_int_equal(scrub_register(s, buf, strlen(buf)), 0);
    }
    expect(s, "a secretnr0042 b secretnr0499", "a " SCRUB_MARK " b " SCRUB_MARK);
    assert_int_equal(scrub_unregister(s, "plainword1", 10), 0);
    assert_int_equal(scrub_unregister(s, "plainword1", 10), -ENOENT);
    expect(s, "say plainword1", "say plainword1");
    assert_int_equal(scrub_register_prefix(s, "sbxt_"), 0);
    assert_int_equal(scrub_register_prefix(s, "sbxt_"), -EEXIST);
    expect(s, "use sbxt_abcdefgh12 now", "use " SCRUB_MARK " now");
    expect(s, "sbxt_short", "sbxt_short");
    /* A name made of words after the prefix is not a token: sbx's own metric names. */
    assert_int_equal(scrub_register_prefix(s, "sbx_"), 0);
    expect(s, "query=rate(sbx_tasks_total[5m]) sbx_exec_duration_seconds_bucket",
           "query=rate(sbx_tasks_total[5m]) sbx_exec_duration_seconds_bucket");
    expect(s, "sbx_Xk3q_Zp0vLmNoPqRsTuVwXyZ0123456789abcdEF", SCRUB_MARK);
    s = scrub_free(s);
    assert_null(s);
}

static void scrub_name_is_secret__names(void **state)
{
    (void)state;
    const char *yes[] = {"API_TOKEN",
                         "token",
                         "AWS_SECRET_ACCESS_KEY",
                         "DB_PASSWORD",
                         "passwd",
                         "GPG_PASSPHRASE",
                         "GOOGLE_APPLICATION_CREDENTIALS",
                         "Authorization",
                         "x-api-key",
                         "SESSION_ID",
                         "cookie",
                         "SSH_KEY",
                         "PRIVATE_KEY_PATH",
                         "APIKEY",
                         "stripe_key",
                         "DB_PASS",
                         "MYSQL_PWD",
                         "--password",
                         "signingkey",
                         "accessToken",
                         "_authToken",
                         "postgresPassword",
                         "CLIENTSECRET",
                         "X-Amz-Signature",
                         "sig",
                         "SECRET_KEY_BASE",
                         "cookie_id",
                         "AUTH_HEADER"};
    /* Words, not substrings; and a last word saying what the value is about. */
    const char *no[] = {"PATH",
                        "HOME",
                        "PWD",
                        "OLDPWD",
                        "LANG",
                        "TMPDIR",
                        "PYTHONPATH",
                        "KEYBOARD",
                        "USER",
                        "COLOR",
                        "TERM",
                        "pool",
                        "--author",
                        "authority",
                        "TOKENIZERS_PARALLELISM",
                        "--tokenizer",
                        "--secret-id",
                        "key_id",
                        "TOKEN_TTL",
                        "token_type",
                        "password_stdin",
                        "--token-file",
                        "credential.helper",
                        "auth.enabled",
                        "SESSION_TIMEOUT",
                        "--sig-proxy",
                        "private",
                        "--cookie-jar",
                        "JWT_ALGORITHM"};
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        if (!scrub_name_is_secret(yes[i], strlen(yes[i]))) {
            fail_msg("'%s' should look secret", yes[i]);
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
        if (scrub_name_is_secret(no[i], strlen(no[i]))) {
            fail_msg("'%s' should not look secret", no[i]);
        }
    }
}

static void scrub_arg_takes_secret__options(void **state)
{
    (void)state;
    assert_true(scrub_arg_takes_secret("--token", 7));
    assert_true(scrub_arg_takes_secret("--api-key", 9));
    assert_true(scrub_arg_takes_secret("-password", 9));
    assert_false(scrub_arg_takes_secret("--token=x", 9));
    assert_false(scrub_arg_takes_secret("--verbose", 9));
    assert_false(scrub_arg_takes_secret("token", 5));
    assert_true(scrub_arg_takes_secret("--sig", 5));
    assert_true(scrub_arg_takes_secret("--with-token", 12));
    assert_false(scrub_arg_takes_secret("--password-stdin", 16));
    assert_false(scrub_arg_takes_secret("--no-auth", 9));
    assert_false(scrub_arg_takes_secret("--author", 8));
    assert_false(scrub_arg_takes_secret("--secret-id", 11));
    assert_false(scrub_arg_takes_secret("-----BEGIN RSA PRIVATE KEY-----", 31));
}

static void scrub_copy__truncates_and_counts(void **state)
{
    (void)state;
    char buf[16];
    assert_string_equal(scrub_copy(NULL, "API_TOKEN=abcdef", 16, buf, sizeof(buf)),
                        "API_TOKEN=[REDA");
    size_t n = 0, count = 0;
    scoped_free char *d = scrub_dup(NULL, "a\0b", 3, &n, &count);
    assert_int_equal(n, 3);
    assert_int_equal(count, 0);
    assert_memory_equal(d, "a\0b", 3);
    scoped_free char *d2 = scrub_dup(NULL, "PASSWORD=1 TOKEN=2", 18, &n, &count);
    assert_int_equal(count, 2);
}

/* ---- the corpora ---- */

static const char *corpus_dir(void)
{
    const char *d = getenv("SBX_SCRUB_CORPUS");
    return d && *d ? d : "tests/unit/scrub_corpus";
}

/* The corpus file's lines, comments ("# ...") and empty lines left out. A missing file
 * fails the test: a corpus that is not read must not pass. */
static void corpus_read(const char *name, struct strv *ret)
{
    char path[512];
    (void)snprintf(path, sizeof(path), "%s/%s", corpus_dir(), name);
    FILE *f = fopen(path, "re");
    if (!f) {
        fail_msg("%s: %s (run from the top of the tree or set SBX_SCRUB_CORPUS)", path,
                 strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') {
            line[--n] = '\0';
        }
        if (n == 0 || strncmp(line, "# ", 2) == 0) {
            continue;
        }
        strv_pushn(ret, line, (size_t)n);
    }
    free(line);
    (void)fclose(f);
}

/* A line of secrets.txt into the text to scrub (braces dropped, <NL> a newline) and what
 * must come out (each {{...}} one SCRUB_MARK). */
static void secret_case(const char *line, struct buf *in, struct buf *want)
{
    bool inside = false;
    for (const char *p = line; *p;) {
        if (strncmp(p, "{{", 2) == 0 && !inside) {
            inside = true;
            (void)buf_puts(want, SCRUB_MARK);
            p += 2;
        } else if (strncmp(p, "}}", 2) == 0 && inside) {
            inside = false;
            p += 2;
        } else if (strncmp(p, "<NL>", 4) == 0) {
            (void)buf_puts(in, "\n");
            if (!inside) {
                (void)buf_puts(want, "\n");
            }
            p += 4;
        } else {
            (void)buf_append(in, p, 1);
            if (!inside) {
                (void)buf_append(want, p, 1);
            }
            p++;
        }
    }
    if (inside) {
        fail_msg("secrets.txt: unclosed {{ in \"%s\"", line);
    }
}

/* Every ordinary command comes out byte for byte as it went in; all failures are listed. */
static void scrub_dup__ordinary_corpus_unchanged(void **state)
{
    (void)state;
    scoped_strv struct strv lines = STRV_INIT;
    corpus_read("ordinary.txt", &lines);
    assert_true(lines.n >= 200);
    size_t bad = 0;
    for (size_t i = 0; i < lines.n; i++) {
        size_t count = 0;
        scoped_free char *got = scrub_dup(NULL, lines.v[i], strlen(lines.v[i]), NULL, &count);
        if (strcmp(got, lines.v[i]) != 0 || count != 0) {
            print_message("changed: %s\n     got: %s\n", lines.v[i], got);
            bad++;
        }
    }
    if (bad) {
        fail_msg("%zu of %zu ordinary commands were changed", bad, lines.n);
    }
}

/* Every secret goes, and what surrounds it stays as it was. */
static void scrub_dup__secret_corpus_redacted(void **state)
{
    (void)state;
    scoped_strv struct strv lines = STRV_INIT;
    corpus_read("secrets.txt", &lines);
    assert_true(lines.n >= 50);
    size_t bad = 0;
    for (size_t i = 0; i < lines.n; i++) {
        struct buf in = BUF_INIT, want = BUF_INIT;
        secret_case(lines.v[i], &in, &want);
        scoped_free char *got = scrub_dup(NULL, in.p, in.len, NULL, NULL);
        if (strcmp(got, want.p) != 0) {
            print_message("  input: %s\n    got: %s\n   want: %s\n", in.p, got, want.p);
            bad++;
        }
        buf_free(&in);
        buf_free(&want);
    }
    if (bad) {
        fail_msg("%zu of %zu secret lines were not scrubbed as expected", bad, lines.n);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A measurement, not an assertion: the cost of one scrub_dup over each corpus, with a
 * scrubber that knows the token prefix and a few registered secrets as sbxd's does. The
 * machine is shared, so the best of ten trials is printed. */
static void scrub_dup__cost_per_call(void **state)
{
    (void)state;
    static const char *const names[] = {"ordinary.txt", "secrets.txt"};
    struct scrub *s = scrub_new();
    (void)scrub_register_prefix(s, "sbx_");
    (void)scrub_register(s, "route-credential-1", 18);
    (void)scrub_register(s, "Basic cm91dGU6Y3JlZA==", 22);
    for (size_t k = 0; k < ARRAY_SIZE(names); k++) {
        scoped_strv struct strv lines = STRV_INIT;
        corpus_read(names[k], &lines);
        size_t bytes = 0;
        for (size_t i = 0; i < lines.n; i++) {
            bytes += strlen(lines.v[i]);
        }
        uint64_t best = UINT64_MAX;
        for (int trial = 0; trial < 10; trial++) {
            uint64_t t0 = now_ns();
            for (int round = 0; round < 20; round++) {
                for (size_t i = 0; i < lines.n; i++) {
                    free(scrub_dup(s, lines.v[i], strlen(lines.v[i]), NULL, NULL));
                }
            }
            uint64_t dt = (now_ns() - t0) / 20;
            best = dt < best ? dt : best;
        }
        print_message("scrub_dup over %s (%zu lines, %zu bytes): %.0f ns/call, %.1f ns/byte\n",
                      names[k], lines.n, bytes, (double)best / (double)lines.n,
                      (double)best / (double)bytes);
    }
    s = scrub_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(scrub_dup__plain_text_unchanged),
        cmocka_unit_test(scrub_dup__jwt_anywhere),
        cmocka_unit_test(scrub_dup__authorization_and_bearer),
        cmocka_unit_test(scrub_dup__secret_names_in_assignments),
        cmocka_unit_test(scrub_dup__aws_keys),
        cmocka_unit_test(scrub_dup__known_prefixes_and_entropy),
        cmocka_unit_test(scrub_dup__random_tokens_detected),
        cmocka_unit_test(scrub_dup__every_builtin_prefix),
        cmocka_unit_test(scrub_dup__random_texts),
        cmocka_unit_test(scrub_dup__userinfo),
        cmocka_unit_test(scrub_register__redacts_and_forgets),
        cmocka_unit_test(scrub_name_is_secret__names),
        cmocka_unit_test(scrub_arg_takes_secret__options),
        cmocka_unit_test(scrub_copy__truncates_and_counts),
        cmocka_unit_test(scrub_dup__ordinary_corpus_unchanged),
        cmocka_unit_test(scrub_dup__secret_corpus_redacted),
        cmocka_unit_test(scrub_dup__cost_per_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
