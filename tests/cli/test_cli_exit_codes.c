/* ctest-labels: integration
 *
 * The exit-code contract of docs/guides/conventions.md (issue 32, item 16):
 * what a user gets wrong is one line and exit 2, found before any setup;
 * flags that would be ignored are refused instead; every command holds a
 * flag to a range inside the one shared limit, and --help prints it;
 * `dcr --version` names the release of CMakeLists.txt and the revision
 * results files record. Every dcr runs under `timeout`, so a command that
 * would block fails the test instead of hanging it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_run.h"
#include "testfiles.h"

static char dir[256];
static char args[4096];
static char cli_under_timeout[2048];

static int setup(void **state)
{
    (void)state;
    if (!testfiles_tmpdir(dir, sizeof(dir), "exit-codes")) return -1;
    const char *cli = getenv("DCR_CLI");
    if (!cli) cli = DCR_CLI_PATH;
    snprintf(cli_under_timeout, sizeof(cli_under_timeout), "timeout -s KILL 60 %s", cli);
    if (setenv("DCR_CLI", cli_under_timeout, 1) != 0) return -1;
    return setenv("TMPDIR", dir, 1);
}

static int teardown(void **state)
{
    (void)state;
    return testfiles_rmtree(dir);
}

static const char *in_dir(const char *name)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (size_t i = 0; i < n; i++) fputc((int)(i * 7 + 1), f);
    fclose(f);
    chmod(path, 0600);
}

/* Each failed before with exit 1 (or ran on with exit 0); the line comes
 * before any setup, so it is the only line on stderr (expect_error). */
static void test_usage_errors_exit_2(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"bench --changes adamw --lr 1", "--lr must be in [1e-12, 0.1]"},
        {"faults train --changes adamw --lr 0.5", "--lr must be in [1e-12, 0.1]"},
        {"bench --model does-not-exist", "does-not-exist"},
        {"inventory --model does-not-exist", "does-not-exist"},
        {"inventory --model /nonexistent/config.json", "cannot open"},
        {"bench --store dir:", "--store dir:"},
        {"bench --sigkill-every 2", "--sigkill-every applies only with --processes"},
        {"bench --restart-nodes", "--restart-nodes applies only with --processes"},
        {"bench --owner-threads", "--owner-threads applies only with --processes"},
        {"bench --kill-coordinator-every 2",
         "--kill-coordinator-every applies only with --processes"},
        {"bench --fanout 3", "--fanout is the relay tree's"},
        {"bench --transport objstore --fanout 3", "--fanout"},
        {"construct --changes profile:/nonexistent.json", "cannot open"},
        /* dcr bench --ab: the specification and both sides' flags, before setup */
        {"bench --ab no_such_key=1", "unknown key 'no_such_key'"},
        {"bench --ab link_gbps", "expected KEY=VALUE"},
        {"bench --ab link_gbps=", "expected KEY=VALUE"},
        {"bench --ab link_gbps=fast", "--link-gbps expects a decimal number"},
        {"bench --ab link_gbps=-1", "--link-gbps must be in"},
        {"bench --ab link_gbps=0.1,link-gbps=0.2", "given twice"},
        {"bench --ab out=x.h5", "unknown key 'out'"},
        {"bench --ab mode=Q", "Q"},
        {"bench --ab same --processes", "--ab runs both sides in this process"},
        {"bench --ab same --readers 2", "--ab does not take --readers"},
        {"bench --ab same --trace-overhead", "--ab does not take --trace-overhead"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_error(cases[i][0], 2, cases[i][1]);
}

/* A payload key that is empty, a directory, or not 32 bytes: exit 2 with
 * one line naming the file. */
static void test_payload_key_files(void **state)
{
    (void)state;
    char empty[512], big[512], keydir[512];
    snprintf(empty, sizeof(empty), "%s", in_dir("empty.key"));
    snprintf(big, sizeof(big), "%s", in_dir("33.key"));
    snprintf(keydir, sizeof(keydir), "%s", in_dir("key.d"));
    write_bytes(empty, 0);
    write_bytes(big, 33);
    assert_int_equal(mkdir(keydir, 0700), 0);
    snprintf(args, sizeof(args), "bench --payload-key %s", empty);
    expect_error(args, 2, "0 bytes, expected exactly 32");
    snprintf(args, sizeof(args), "bench --payload-key %s", big);
    expect_error(args, 2, "33 bytes, expected exactly 32");
    snprintf(args, sizeof(args), "bench --payload-key %s", keydir);
    expect_error(args, 2, "a directory");
    snprintf(args, sizeof(args), "bench --payload-key %s", in_dir("absent.key"));
    expect_error(args, 2, "cannot open");
}

/* The help's range of a flag ("[lo, hi]" at the end of its line), or NULL. */
static const char *help_range(const char *help, const char *flag, char *buf, size_t cap)
{
    size_t len = strlen(flag);
    for (const char *p = strstr(help, flag); p; p = strstr(p + 1, flag)) {
        if (!(p[-1] == ' ' && p[len] == ' ')) continue;
        const char *eol = strchr(p, '\n');
        if (!eol) return NULL;
        const char *open = eol;
        while (open > p && *open != '[') open--;
        if (*open != '[' || eol[-1] != ']') return NULL;
        snprintf(buf, cap, "%.*s", (int)(eol - open), open);
        return buf;
    }
    return NULL;
}

/* A flag's range inside the shared limit, the same in the commands that
 * have no reason to narrow it: the rates and latencies of bench and sim
 * (bench stopped at 1e4 while the README said 1e6), --level of construct
 * and table2 (1..19 against -7..22), --lr of bench and faults, --serve-tp
 * of every command. */
static void test_one_range_where_commands_agree(void **state)
{
    (void)state;
    static result_t a, b;
    const char *same[][3] = {
        {"bench", "sim", "--flow-gbps"},         {"bench", "sim", "--local-gbps"},
        {"bench", "sim", "--latency-ms"},        {"construct", "table2", "--level"},
        {"bench", "faults train", "--lr"},       {"inventory", "bench", "--serve-tp"},
        {"verify-paths", "bench", "--serve-tp"},
    };
    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        char ra[64], rb[64];
        snprintf(args, sizeof(args), "%s --help", same[i][0]);
        run(&a, args);
        snprintf(args, sizeof(args), "%s --help", same[i][1]);
        run(&b, args);
        assert_int_equal(a.rc, 0);
        assert_int_equal(b.rc, 0);
        const char *x = help_range(a.out, same[i][2], ra, sizeof(ra));
        const char *y = help_range(b.out, same[i][2], rb, sizeof(rb));
        if (!x || !y || strcmp(x, y))
            fail_msg("%s: %s in %s, %s in %s", same[i][2], x ? x : "none", same[i][0],
                     y ? y : "none", same[i][1]);
    }
    /* bench's cross-cluster rate takes what the README states, 1e6. */
    char r[64];
    run(&a, "bench --help");
    assert_string_equal(help_range(a.out, "--link-gbps", r, sizeof(r)), "[0, 1e+06]");
    /* And the parser holds the flag to what the help prints. */
    expect_error("construct --level 23", 2, "--level must be in [-7, 22], got 23");
}

/* "dcr X.Y.Z (git REV)": X.Y.Z is project(dcr VERSION X.Y.Z) of
 * CMakeLists.txt, REV a 12-digit abbreviated commit (with -dirty for a
 * changed tree) or "unknown" outside git. */
static void test_version(void **state)
{
    (void)state;
    char cmake[1 << 14];
    slurp(DCR_SOURCE_DIR "/CMakeLists.txt", cmake, sizeof(cmake));
    const char *v = strstr(cmake, "project(dcr VERSION ");
    assert_non_null(v);
    v += strlen("project(dcr VERSION ");
    char want[64];
    size_t n = strspn(v, "0123456789.");
    snprintf(want, sizeof(want), "dcr %.*s (git ", (int)n, v);
    static result_t r;
    run(&r, "--version");
    assert_int_equal(r.rc, 0);
    if (strncmp(r.out, want, strlen(want)) != 0) fail_msg("'%s' lacks '%s'", r.out, want);
    const char *rev = r.out + strlen(want);
    size_t hex = strspn(rev, "0123456789abcdef");
    bool ok = (hex == 12 && (!strcmp(rev + 12, ")\n") || !strcmp(rev + 12, "-dirty)\n"))) ||
              !strcmp(rev, "unknown)\n");
    if (!ok) fail_msg("revision in '%s'", r.out);
    expect_error("--version extra", 2, "--version takes no arguments");
}

/* A DCR_LOG that is not a level is reported with its control characters
 * escaped: no raw ESC reaches the terminal. */
static void test_log_env_escaped(void **state)
{
    (void)state;
    static result_t r;
    setenv("DCR_LOG", "\x1b[31mred\nline", 1);
    run(&r, "inventory --model qwen2.5-0.5b --scale 16 --layers 1");
    unsetenv("DCR_LOG");
    assert_int_equal(r.rc, 0);
    assert_null(strchr(r.err, '\x1b'));
    assert_non_null(strstr(r.err, "DCR_LOG=\\x1b[31mred\\x0aline is not one of"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_payload_key_files),
        cmocka_unit_test(test_one_range_where_commands_agree),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_log_env_escaped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
