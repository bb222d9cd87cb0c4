/* ctest-labels: unit
 *
 * The state reports of rollout-node processes through a real (SQLite)
 * control plane: every field survives the round trip, a malformed or
 * missing report is refused, the coordinator's "opened" report, and node
 * counters totalled across restarts (expected sums worked out by hand).
 * The runtime's delivery and apply are exercised through the coordinator
 * (test_faults, test_bench) and as processes (test_cli_processes). */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"

#include "coord/parties-internal.h"
#include "dcr/parties.h"
#include "dcr/rollout_node.h"

typedef struct fixture {
    char dir[256], db[300];
    dcr_control_t *control;
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof(*f));
    if (!testfiles_tmpdir(f->dir, sizeof(f->dir), "rnode")) return -1;
    snprintf(f->db, sizeof(f->db), "%s/control.db", f->dir);
    dcr_control_config_t cc = {f->db, 0};
    if (dcr_control_create("sqlite", &cc, &f->control) != DCR_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    dcr_control_destroy(f->control);
    char path[400];
    const char *suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s%s", f->db, suffix[i]);
        unlink(path);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_report_round_trip(void **state)
{
    fixture_t *f = *state;
    dcr_node_report_t r, got;
    assert_int_equal(dcr_node_report_get(f->control, 3, &got), DCR_ENOTFOUND);
    memset(&r, 0, sizeof(r));
    r.node = 3;
    r.phase = DCR_NODE_DONE;
    r.tau = 0x0102030405060708ull;
    r.version = 41;
    r.pid = 12345;
    r.apply_end = 1234.5678;
    r.cross_bytes = -7; /* signed survives */
    r.cpu_s = 0.25;
    snprintf(r.why, sizeof(r.why), "%s", "why not");
    assert_int_equal(dcr_node_report_put(f->control, &r), DCR_OK);
    assert_int_equal(dcr_node_report_get(f->control, 3, &got), DCR_OK);
    assert_int_equal(got.node, 3);
    assert_int_equal(got.phase, DCR_NODE_DONE);
    assert_true(got.tau == r.tau && got.version == 41 && got.pid == 12345);
    assert_true(got.apply_end == 1234.5678 && got.cpu_s == 0.25 && got.cross_bytes == -7);
    assert_string_equal(got.why, "why not");
    /* Other nodes and receivers' own reports are untouched. */
    assert_int_equal(dcr_node_report_get(f->control, 2, &got), DCR_ENOTFOUND);
    void *data = NULL;
    size_t len = 0;
    assert_int_equal(dcr_control_report_get(f->control, 3, &data, &len), DCR_ENOTFOUND);
    /* A longest reason is cut, never overrun. */
    memset(r.why, 'x', sizeof(r.why) - 1);
    r.why[sizeof(r.why) - 1] = '\0';
    assert_int_equal(dcr_node_report_put(f->control, &r), DCR_OK);
    assert_int_equal(dcr_node_report_get(f->control, 3, &got), DCR_OK);
    assert_int_equal(strlen(got.why), sizeof(got.why) - 1);
}

static void test_malformed_reports_refused(void **state)
{
    fixture_t *f = *state;
    dcr_node_report_t got;
    const char junk[] = "not a report";
    assert_int_equal(dcr_control_report_put(f->control, DCR_NODE_REPORT_ID(5), junk, sizeof(junk)),
                     DCR_OK);
    assert_int_equal(dcr_node_report_get(f->control, 5, &got), DCR_ECONTROL);
    uint8_t wrong_magic[312] = {0};
    assert_int_equal(
        dcr_control_report_put(f->control, DCR_NODE_REPORT_ID(5), wrong_magic, sizeof(wrong_magic)),
        DCR_OK);
    assert_int_equal(dcr_node_report_get(f->control, 5, &got), DCR_ECONTROL);
    uint64_t tau = 0;
    assert_int_equal(dcr_coord_opened(f->control, &tau), DCR_ENOTFOUND);
    assert_int_equal(dcr_coord_report_opened(f->control, 77), DCR_OK);
    assert_int_equal(dcr_coord_opened(f->control, &tau), DCR_OK);
    assert_int_equal(tau, 77);
    assert_int_equal(dcr_control_report_put(f->control, DCR_COORD_REPORT_ID, junk, 3), DCR_OK);
    assert_int_equal(dcr_coord_opened(f->control, &tau), DCR_ECONTROL);
}

static dcr_node_report_t rep(int32_t pid, dcr_node_phase_t phase, int64_t bytes, double cpu)
{
    dcr_node_report_t r;
    memset(&r, 0, sizeof(r));
    r.pid = pid;
    r.phase = phase;
    r.cross_bytes = bytes;
    r.cpu_s = cpu;
    return r;
}

static void test_totals_across_restarts(void **state)
{
    dcr_node_totals_t t;
    memset(&t, 0, sizeof(t));
    dcr_node_report_t seq[] = {
        rep(10, DCR_NODE_READY, 0, 0.5),  rep(10, DCR_NODE_DONE, 100, 1.0),
        rep(10, DCR_NODE_DONE, 250, 1.5), rep(10, DCR_NODE_RESTARTING, 0, 0.0), /* for the dead */
        rep(11, DCR_NODE_READY, 0, 0.25), rep(11, DCR_NODE_DONE, 40, 0.75),
        rep(11, DCR_NODE_GONE, 0, 0.0),
    };
    int64_t bytes[] = {0, 100, 250, 250, 250, 290, 290};
    double cpu[] = {0.5, 1.0, 1.5, 1.5, 1.75, 2.25, 2.25};
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        dcr_node_totals_update(&t, &seq[i]);
        assert_int_equal(t.cross_base + t.cross_last, bytes[i]);
        assert_true(t.cpu_base + t.cpu_last == cpu[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_report_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_reports_refused, setup, teardown),
        cmocka_unit_test(test_totals_across_restarts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
