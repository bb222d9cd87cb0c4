/* ctest-labels: slow
 *
 * The simulator against the engine on this machine: a quick calibration,
 * one short `dcr bench` run (the embedded default, object store, 3%) and
 * its simulated twin. The tolerance is wider than the 25% target of the
 * full validation (dcr sim --validate): one short run on a shared CI
 * machine varies by +-15% between runs on its own. The reference and
 * payload checks below do fail when the simulator is wrong: with its link
 * bandwidths halved (sim/platform.c) this test predicted a 4.25 s
 * reference for a measured 2.33 s and failed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim/calibrate.h"
#include "sim/validate.h"

static void test_validate_default_bench(void **state)
{
    dcr_sim_cal_options_t opt = dcr_sim_cal_options_default();
    opt.quick = true;
    dcr_sim_calibration_t cal;
    assert_int_equal(dcr_sim_calibrate(&opt, &cal), DCR_OK);
    dcr_bench_config_t cfg;
    const char *name, *args;
    dcr_sim_validation_case(0, &cfg, &name, &args);
    dcr_sim_validation_row_t row;
    assert_int_equal(dcr_sim_validate_one(&cfg, &cal, &row), DCR_OK);
    printf("%s: measured %.3f s, predicted %.3f s (%+.1f%%); reference %.3f / %.3f s\n", name,
           row.measured_s, row.predicted_s, 100 * row.error, row.measured_ref_s,
           row.predicted_ref_s);
    /* The latency error is a benchmark figure (BENCHMARKS.md, `dcr sim
     * --validate`), not asserted: timing on a shared machine is no test. */
    assert_true(row.measured_s > 0 && row.predicted_s > 0);
    /* The reference is transport only: the simulation follows the links. It
     * is predicted within 2% on a quiet machine; a machine busy with other
     * jobs stretched the measured one by 31% once. The test allows 5% either
     * way, and a measurement up to 1 / 0.7 slower (CPU contention can delay
     * the emulated links, never speed them up). */
    assert_true(row.predicted_ref_s / row.measured_ref_s > 0.7 &&
                row.predicted_ref_s / row.measured_ref_s < 1.05);
    assert_true(fabs(row.predicted_payload / row.measured_payload - 1) < 0.25);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_default_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
