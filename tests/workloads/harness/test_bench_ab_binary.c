/* ctest-labels: integration
 *
 * Another dcr binary as side B (workloads/harness/bench_ab.h,
 * dcr_bench_side_binary): with this build's dcr as the worker, the
 * interleaved run gives two bit-exact sides that made the same changes
 * (equal payload bytes and changed elements refit by refit, the same
 * seed-derived work) and the worker announces the configuration this
 * process would write for the same flags. A worker is hostile until
 * proven otherwise: shell scripts that are not dcr, end early, say
 * nothing, send garbage, a line too long, a row out of range, the wrong
 * refit, or die mid-run (also while a process they left holds the socket
 * open) each end the side with one line that names what
 * happened (and nothing is kept). The wire's rows round-trip and its
 * decoder refuses every missing, extra or mistyped field; the exec check
 * refuses what it must. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "workloads/harness/bench_ab.h"
#include "workloads/harness/bench_ab_wire.h"
#include "workloads/harness/results_json.h"

static char dir[128];

static const char *cli(void)
{
    const char *c = getenv("DCR_CLI");
    return c ? c : DCR_CLI_PATH;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/dcr-test-ab-binary-%d", (int)getpid());
    return mkdir(dir, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A script `name` in dir: answers --version like dcr, else runs body (its
 * socket is descriptor 3). Returns its path (static, one at a time). */
static const char *script(const char *name, const char *body)
{
    static char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "if [ \"$1\" = --version ]; then echo 'dcr 9.9.9 (git fake)'; exit 0; fi\n"
            "%s\n",
            body);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    return path;
}

static const char *small_args[] = {"--scale",  "64", "--layers", "2",
                                   "--warmup", "1",  "--refits", "4"};

static dcr_bench_binary_config_t binary_config(const char *exe)
{
    return (dcr_bench_binary_config_t){.exe = exe,
                                       .name = exe,
                                       .args = (char *const *)small_args,
                                       .nargs = 8,
                                       .warmup = 1,
                                       .refits = 4,
                                       .verify = true,
                                       .ready_timeout_ms = 60000,
                                       .reply_timeout_ms = 60000};
}

static dcr_bench_config_t small(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.run.scenario.scale = 64;
    c.run.scenario.layers = 2;
    c.warmup = 1;
    c.refits = 4;
    return c;
}

/* This build as side B: both sides bit-exact, the same work pair by pair,
 * and the worker's configuration is the one this process writes for the
 * same flags (the CLI's defaults equal dcr_bench_config_default's). */
static void test_same_binary(void **state)
{
    (void)state;
    char exe[4096];
    assert_int_equal(dcr_bench_exec_check("--ab-binary", cli(), exe, sizeof(exe)), DCR_OK);
    char version[256];
    assert_int_equal(dcr_bench_binary_version(exe, version, sizeof(version)), DCR_OK);
    assert_true(!strncmp(version, "dcr ", 4));
    dcr_bench_config_t a = small();
    a.workdir_in_memory = true;
    dcr_bench_binary_config_t bc = binary_config(exe);
    dcr_bench_side_t *side[2] = {NULL, NULL};
    if (dcr_bench_side_binary(&bc, &side[1]) != DCR_OK) fail_msg("%s", dcr_error_detail());
    if (dcr_bench_side_local(&a, &side[0]) != DCR_OK) fail_msg("%s", dcr_error_detail());
    dcr_bench_result_t r[2];
    if (dcr_bench_ab_alternate(side, a.warmup, a.refits, r) != DCR_OK)
        fail_msg("%s", dcr_error_detail());
    /* The CLI's run directory goes to memory where it can (dcr bench sets
     * workdir_in_memory); so did this side's, and the worker says where its
     * own went. */
    json_t *mine = dcr_bench_config_json(&a, "uniform", NULL);
    dcr_bench_config_set_run_directory(mine, r[0].workdir_in_memory);
    assert_true(json_equal(mine, (json_t *)dcr_bench_side_binary_config(side[1])));
    json_decref(mine);
    dcr_bench_side_destroy(side[0]);
    dcr_bench_side_destroy(side[1]);
    for (int s = 0; s < 2; s++) {
        assert_int_equal(r[s].ab_side, 'A' + s);
        assert_int_equal(r[s].nrefits, 4);
        assert_true(r[s].bit_exact);
        assert_true(r[s].checkpoint_bytes > 0 && r[s].receivers == 4);
    }
    for (int k = 0; k < 4; k++) {
        assert_true(r[0].refits[k].verified && r[1].refits[k].verified);
        assert_true(r[1].refits[k].latency_s > 0);
        assert_int_equal(r[0].refits[k].block, k);
        assert_int_equal(r[1].refits[k].block, k);
        assert_true(r[0].refits[k].payload_bytes > 0);
        assert_int_equal(r[0].refits[k].payload_bytes, r[1].refits[k].payload_bytes);
        assert_int_equal(r[0].refits[k].changed_elements, r[1].refits[k].changed_elements);
    }
    assert_int_equal(r[0].checkpoint_bytes, r[1].checkpoint_bytes);
    assert_true(r[1].mean_latency_s > 0);
    dcr_bench_result_free(&r[0]);
    dcr_bench_result_free(&r[1]);
}

static bool f_unverified; /* row_text: a row that says it was not verified */

/* A valid row as the worker sends it, with latency_s replaced. */
static char *row_text(double latency)
{
    dcr_bench_refit_t f;
    memset(&f, 0, sizeof(f));
    f.latency_s = 0.5;
    f.attempts = 1;
    f.bit_exact = true;
    f.verified = !f_unverified;
    json_t *row = dcr__ab_row_json(&f);
    json_object_set_new(row, "latency_s", json_real(latency));
    char *text = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    return text;
}

#define HELLO                                                                                      \
    "echo '{\"dcr_ab_worker\":1,\"warmup\":1,\"refits\":4,\"config\":{\"model\":\"x\"}}' >&3"

/* The side made from `body` fails at ready (timed false) or at refit 0,
 * with one line holding `needle`. */
static void expect_side_fails(const char *name, const char *body, bool at_ready, int ready_ms,
                              const char *needle)
{
    dcr_bench_binary_config_t bc = binary_config(script(name, body));
    bc.ready_timeout_ms = ready_ms;
    bc.reply_timeout_ms = 5000;
    dcr_bench_side_t *s = NULL;
    if (dcr_bench_side_binary(&bc, &s) != DCR_OK) fail_msg("%s", dcr_error_detail());
    dcr_status_t st = dcr_bench_side_ready(s);
    if (!at_ready) {
        assert_int_equal(st, DCR_OK);
        dcr_bench_refit_t row;
        st = dcr_bench_side_refit(s, 1, true, &row);
    }
    assert_int_not_equal(st, DCR_OK);
    const char *line = dcr_error_line(st);
    assert_null(strchr(line, '\n'));
    if (!strstr(line, needle) || !strstr(line, "--ab-binary"))
        fail_msg("%s: expected '%s' in '%s'", name, needle, line);
    dcr_bench_side_destroy(s);
}

static void test_hostile_workers(void **state)
{
    (void)state;
    expect_side_fails("early", "echo \"dcr bench: unknown flag '--ab-worker'\" >&2; exit 3", true,
                      20000,
                      "ended before its hello: it exited with status 3 (its last line: dcr bench: "
                      "unknown flag");
    /* Its end is seen although a process it left holds the socket. */
    expect_side_fails("leaves", "sleep 30 & exit 4", true, 20000,
                      "ended before its hello: it exited with status 4");
    expect_side_fails("silent", "sleep 30", true, 300, "sent no hello: nothing within 0.3 s");
    expect_side_fails("garbage", "echo 'hello there' >&3; sleep 30", true, 20000,
                      "malformed hello");
    expect_side_fails("long", "head -c 70000 /dev/zero | tr '\\0' x >&3; sleep 30", true, 20000,
                      "longer than 65536 bytes");
    expect_side_fails("wrongcount",
                      "echo '{\"dcr_ab_worker\":1,\"warmup\":1,\"refits\":9,\"config\":{}}' >&3; "
                      "sleep 30",
                      true, 20000, "does not announce --warmup 1 --refits 4");
    expect_side_fails(
        "badconfig",
        "echo '{\"dcr_ab_worker\":1,\"warmup\":1,\"refits\":4,\"config\":{\"a\":[1]}}' "
        ">&3; sleep 30",
        true, 20000, "not a short scalar");
    expect_side_fails("dies", HELLO "; read line <&3; exit 5", false, 20000,
                      "ended before its reply to refit 0: it exited with status 5");
    char body[4096], *row = row_text(-1);
    snprintf(body, sizeof(body),
             HELLO "; read line <&3; echo '{\"refit\":0,\"row\":%s}' >&3; sleep 30", row);
    expect_side_fails("negative", body, false, 20000,
                      "sent a malformed reply to refit 0: latency_s is -1, expected within [0,");
    free(row);
    row = row_text(0.5);
    snprintf(body, sizeof(body),
             HELLO "; read line <&3; echo '{\"refit\":1,\"row\":%s}' >&3; sleep 30", row);
    expect_side_fails("wrongrefit", body, false, 20000, "not the one of refit 0");
    free(row);
    f_unverified = true;
    row = row_text(0.5);
    f_unverified = false;
    snprintf(body, sizeof(body),
             HELLO "; read line <&3; echo '{\"refit\":0,\"row\":%s}' >&3; sleep 30", row);
    expect_side_fails("unverified", body, false, 20000, "says verified false");
    free(row);
    expect_side_fails("norow",
                      HELLO "; read line <&3; echo '{\"refit\":0,\"row\":{}}' >&3; sleep 30", false,
                      20000, "lacks latency_s");
}

/* Not dcr at all: its --version says something else, or fails. */
static void test_not_dcr(void **state)
{
    (void)state;
    char path[256], v[256];
    snprintf(path, sizeof(path), "%s/notdcr", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\necho hello\n");
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    assert_int_equal(dcr_bench_binary_version(path, v, sizeof(v)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "is not a dcr binary"));
    assert_int_equal(dcr_bench_binary_version("/bin/false", v, sizeof(v)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "exited with status 1"));
}

static void test_exec_check(void **state)
{
    (void)state;
    char out[4096], plain[256];
    assert_int_equal(dcr_bench_exec_check("--ab-binary", "", out, sizeof(out)), DCR_EINVAL);
    assert_int_equal(dcr_bench_exec_check("--ab-binary", "/nonexistent/dcr", out, sizeof(out)),
                     DCR_ENOTFOUND);
    assert_int_equal(dcr_bench_exec_check("--ab-binary", dir, out, sizeof(out)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not a regular file"));
    snprintf(plain, sizeof(plain), "%s/plain", dir);
    FILE *f = fopen(plain, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(plain, 0644), 0);
    /* No execute bit: refused, for root too (access(X_OK) wants one x bit). */
    assert_int_equal(dcr_bench_exec_check("--ab-binary", plain, out, sizeof(out)), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not executable"));
    assert_int_equal(dcr_bench_exec_check("--ab-binary", "/bin/tr\x1b[2J", out, sizeof(out)),
                     DCR_EINVAL);
    assert_int_equal(dcr_bench_exec_check("--ab-binary", "/bin/sh", out, sizeof(out)), DCR_OK);
    assert_true(out[0] == '/');
}

/* Rows round-trip; every missing, extra or mistyped field is refused. */
static void test_wire_rows(void **state)
{
    (void)state;
    dcr_bench_refit_t f, g;
    memset(&f, 0, sizeof(f));
    f.latency_s = 1.25;
    f.payload_bytes = 123456789;
    f.attempts = 2;
    f.traced = f.verified = f.bit_exact = true;
    f.cpu_s[DCR_THREAD_NODE] = 0.5;
    f.remainder_s = -0.01;
    json_t *j = dcr__ab_row_json(&f);
    assert_int_equal(dcr__ab_row_parse(j, &g), DCR_OK);
    assert_true(g.latency_s == 1.25 && g.payload_bytes == 123456789 && g.attempts == 2);
    assert_true(g.traced && g.verified && g.bit_exact && g.cpu_s[DCR_THREAD_NODE] == 0.5);
    assert_true(g.remainder_s == -0.01);
    json_t *bad = json_deep_copy(j);
    json_object_del(bad, "wall_s");
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_EPARSE);
    json_object_set_new(bad, "wall_s", json_string("1"));
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_EPARSE);
    json_object_set_new(bad, "wall_s", json_real(1));
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_OK);
    json_object_set_new(bad, "extra", json_true());
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "unknown field extra"));
    json_decref(bad);
    bad = json_deep_copy(j);
    json_object_set_new(bad, "payload_bytes", json_real(3.5));
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_EPARSE);
    json_object_set_new(bad, "payload_bytes", json_integer(-1));
    assert_int_equal(dcr__ab_row_parse(bad, &g), DCR_EPARSE);
    json_decref(bad);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_rows),   cmocka_unit_test(test_exec_check),
        cmocka_unit_test(test_not_dcr),     cmocka_unit_test(test_hostile_workers),
        cmocka_unit_test(test_same_binary),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
