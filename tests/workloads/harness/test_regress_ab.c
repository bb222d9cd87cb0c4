/* ctest-labels: unit
 *
 * scripts/regress-ab.sh, the tally behind BENCHMARKS.md's false-alarm and
 * detection figures, run against a stub "dcr" that logs its arguments and
 * answers `compare` with a known verdict per file: each round runs the A/A
 * job (`bench --ab same`) and then the A/B job (the --ab-args), each with
 * --refits and its own --out, and the tally counts exactly the regression
 * verdicts on latency_s the stub gave; usage errors exit 2. */
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

static char dir[128], log_path[192], stub[192], out_path[192];

/* The stub: bench logs its arguments; compare FILE prints the JSON of a
 * verdict chosen by the file's name (ab-2: inconclusive, other ab-*:
 * regressed, aa-*: same) and exits as dcr compare would. */
static void write_stub(void)
{
    FILE *f = fopen(stub, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "if [ \"$1\" = bench ]; then echo \"$*\" >> '%s'; exit 0; fi\n"
            "case \"$2\" in\n"
            "  */ab-2.h5) v=inconclusive rc=0 ;;\n"
            "  */ab-*.h5) v=regressed rc=1 ;;\n"
            "  *) v=same rc=0 ;;\n"
            "esac\n"
            "printf '{\"matched\":[{\"metrics\":[{\"name\":\"latency_s\",\"verdict\":\"%%s\","
            "\"ratio\":1.2,\"interval\":[1.1,1.3],\"blocks\":10}]}]}\\n' $v\n"
            "exit $rc\n",
            log_path);
    fclose(f);
    assert_int_equal(chmod(stub, 0755), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/dcr-regress-ab-%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(log_path, sizeof(log_path), "%s/log", dir);
    snprintf(stub, sizeof(stub), "%s/dcr", dir);
    snprintf(out_path, sizeof(out_path), "%s/out", dir);
    write_stub();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *read_all(const char *path)
{
    static char buf[16384];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int run_script(const char *args, const char *stdout_path)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "bash %s/scripts/regress-ab.sh %s >%s 2>&1", DCR_SOURCE_DIR, args,
             stdout_path);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_rounds_and_tally(void **state)
{
    (void)state;
    char args[512], tally[256];
    snprintf(tally, sizeof(tally), "%s/tally", dir);
    snprintf(args, sizeof(args), "%s %s 3 --refits 14", stub, out_path);
    assert_int_equal(run_script(args, tally), 0);
    /* Six bench jobs, A/A then A/B in each round. */
    char want[6][256];
    for (int i = 0; i < 3; i++) {
        snprintf(want[2 * i], sizeof(want[0]), "bench --ab same --refits 14 --out %s/aa-%d.h5",
                 out_path, i + 1);
        snprintf(want[2 * i + 1], sizeof(want[0]),
                 "bench --link-gbps 0.0122 --ab link_gbps=0.01 --refits 14 --out %s/ab-%d.h5",
                 out_path, i + 1);
    }
    char *log = read_all(log_path);
    char *line = log;
    for (int k = 0; k < 6; k++) {
        char *end = strchr(line, '\n');
        assert_non_null(end);
        *end = '\0';
        assert_string_equal(line, want[k]);
        line = end + 1;
    }
    assert_string_equal(line, "");
    const char *text = read_all(tally);
    if (!strstr(text, "A/A (no regression expected): 3 pairs") ||
        !strstr(text, "A/B (regression expected): 3 pairs") ||
        !strstr(text, "regression verdicts on latency_s: 0 of 3") ||
        !strstr(text, "regression verdicts on latency_s: 2 of 3") ||
        !strstr(text, "ab-2: latency_s inconclusive"))
        fail_msg("unexpected tally:\n%s", text);
    /* --tally-only reads the same outputs again. */
    snprintf(args, sizeof(args), "--tally-only %s", out_path);
    assert_int_equal(run_script(args, tally), 0);
    text = read_all(tally);
    assert_non_null(strstr(text, "regression verdicts on latency_s: 2 of 3"));
}

static void test_usage(void **state)
{
    (void)state;
    char args[512], sink[256];
    snprintf(sink, sizeof(sink), "%s/usage", dir);
    snprintf(args, sizeof(args), "%s %s 0", stub, out_path);
    assert_int_equal(run_script(args, sink), 2);
    snprintf(args, sizeof(args), "%s %s 2 --refits x", stub, out_path);
    assert_int_equal(run_script(args, sink), 2);
    snprintf(args, sizeof(args), "%s %s 2 --ab-args '--link-gbps 0.01'", stub, out_path);
    assert_int_equal(run_script(args, sink), 2);
    assert_non_null(strstr(read_all(sink), "must hold --ab"));
    snprintf(args, sizeof(args), "%s %s 2 --bogus", stub, out_path);
    assert_int_equal(run_script(args, sink), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds_and_tally),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
