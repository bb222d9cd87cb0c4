/* ctest-labels: unit
 *
 * scripts/ab-bench.sh, the interleaved A/B measurement, run against two
 * stub "dcr" binaries that log their arguments: the sides alternate in
 * ABBA order block by block, each block is one `bench --refits K` with the
 * common arguments and its own side's, appended to its side's file; a
 * third side runs ABC / CBA; --concurrent runs a round's blocks together,
 * never a block of the next round before the round is done; 6 rounds by
 * default (the fewest for dcr compare --paired at 95%); flags the script
 * sets itself and bad numbers are usage errors (exit 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[128], log_path[192], stub_a[192], stub_b[192], stub_c[192];

/* A stub that logs "SIDE args..." and creates the --out file. */
static void write_stub(const char *path, const char *side)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "echo \"%s $*\" >> '%s'\n"
            "while [ $# -gt 0 ]; do [ \"$1\" = --out ] && : > \"$2\"; shift; done\n",
            side, log_path);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/dcr-ab-%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(log_path, sizeof(log_path), "%s/log", dir);
    snprintf(stub_a, sizeof(stub_a), "%s/dcr-a", dir);
    snprintf(stub_b, sizeof(stub_b), "%s/dcr-b", dir);
    write_stub(stub_a, "A");
    write_stub(stub_b, "B");
    snprintf(stub_c, sizeof(stub_c), "%s/dcr-c", dir);
    write_stub(stub_c, "C");
    return 0;
}

static int teardown(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int run_script(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "bash %s/scripts/ab-bench.sh %s >/dev/null 2>&1", DCR_SOURCE_DIR,
             args);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_abba_order_and_arguments(void **state)
{
    unlink(log_path);
    char args[768];
    snprintf(args, sizeof(args),
             "--rounds 4 --block 7 %s/out %s %s --seed 3 --a-args --link-gbps 0.05 --b-args "
             "--link-gbps 0.04",
             dir, stub_a, stub_b);
    assert_int_equal(run_script(args), 0);
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[512];
    const char order[] = "ABBAABBA";
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        assert_true(n < 8);
        assert_int_equal(line[0], order[n]);
        const char *want = line[0] == 'A' ? "--link-gbps 0.05" : "--link-gbps 0.04";
        const char *other = line[0] == 'A' ? "--link-gbps 0.04" : "--link-gbps 0.05";
        if (!strstr(line, want) || strstr(line, other)) fail_msg("side arguments: %s", line);
        char out[256];
        snprintf(out, sizeof(out), "--refits 7 --out %s/out/%c.h5", dir, line[0]);
        if (!strstr(line, "bench --seed 3") || !strstr(line, out)) fail_msg("arguments: %s", line);
        n++;
    }
    fclose(f);
    assert_int_equal(n, 8);
}

/* The sides of the log's lines, in order, into sides (NUL-terminated). */
static void logged_sides(char *sides, size_t len)
{
    FILE *f = fopen(log_path, "r");
    assert_non_null(f);
    char line[512];
    size_t n = 0;
    while (fgets(line, sizeof(line), f) && n + 1 < len) sides[n++] = line[0];
    sides[n] = 0;
    fclose(f);
}

static void test_third_side_and_default_rounds(void **state)
{
    unlink(log_path);
    char args[768], sides[64];
    snprintf(args, sizeof(args), "%s/out %s %s --side-c %s --c-args --seed 9", dir, stub_a, stub_b,
             stub_c);
    assert_int_equal(run_script(args), 2); /* --side-c is an option: before OUTDIR */
    snprintf(args, sizeof(args), "--side-c %s %s/out %s %s --c-args --seed 9", stub_c, dir, stub_a,
             stub_b);
    assert_int_equal(run_script(args), 0);
    logged_sides(sides, sizeof(sides));
    assert_string_equal(sides, "ABCCBAABCCBAABCCBA"); /* 6 rounds by default */
    FILE *f = fopen(log_path, "r");
    char line[512];
    while (fgets(line, sizeof(line), f))
        if ((line[0] == 'C') != (strstr(line, "--seed 9") != NULL)) fail_msg("args: %s", line);
    fclose(f);
}

/* --concurrent: each round's three blocks (any order among them) before
 * any block of the next round. */
static void test_concurrent_rounds(void **state)
{
    unlink(log_path);
    char args[768], sides[64];
    snprintf(args, sizeof(args), "--rounds 4 --concurrent --side-c %s %s/out %s %s", stub_c, dir,
             stub_a, stub_b);
    assert_int_equal(run_script(args), 0);
    logged_sides(sides, sizeof(sides));
    assert_int_equal(strlen(sides), 12);
    for (int r = 0; r < 4; r++) {
        const char *round = sides + 3 * r;
        assert_true(memchr(round, 'A', 3) && memchr(round, 'B', 3) && memchr(round, 'C', 3));
    }
}

static void test_usage_errors(void **state)
{
    char args[512];
    snprintf(args, sizeof(args), "%s/out %s %s --refits 3", dir, stub_a, stub_b);
    assert_int_equal(run_script(args), 2); /* set by the script */
    snprintf(args, sizeof(args), "%s/out %s %s --out x.h5", dir, stub_a, stub_b);
    assert_int_equal(run_script(args), 2);
    snprintf(args, sizeof(args), "--rounds 0 %s/out %s %s", dir, stub_a, stub_b);
    assert_int_equal(run_script(args), 2);
    snprintf(args, sizeof(args), "--block x %s/out %s %s", dir, stub_a, stub_b);
    assert_int_equal(run_script(args), 2);
    snprintf(args, sizeof(args), "%s/out %s /nonexistent/dcr", dir, stub_a);
    assert_int_equal(run_script(args), 2);
    snprintf(args, sizeof(args), "%s/out", dir);
    assert_int_equal(run_script(args), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abba_order_and_arguments),
        cmocka_unit_test(test_third_side_and_default_rounds),
        cmocka_unit_test(test_concurrent_rounds),
        cmocka_unit_test(test_usage_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
