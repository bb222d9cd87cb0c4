/* ctest-labels: unit
 *
 * Rollout-side costs of GPU receivers from first principles (sim/calibrate.h,
 * "rollout_gpu"): each derived figure against the same arithmetic done by
 * hand on round numbers, measured figures ("rollout_measured") replacing
 * derived ones key by key, the JSON round trip, one-line errors for a
 * figure given twice or missing, and the paper testbed's file using the
 * derivation with no measured figure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/calibrate.h"
#include "sim/paper.h"
#include "sim_test_cal.h"

/* Round numbers: 2 GB/s zstd, 1 GB/s digest, expansion 3, 10 cores, 20 GB/s
 * H2D, 8 B per record, 2000 GB/s HBM, 100 B per record, 10 us per item,
 * 40 us per payload, 30 us per hop, 4 GB/s per hop. */
static dcr_sim_rollout_gpu_t round_gpu(void)
{
    return (dcr_sim_rollout_gpu_t){2, 1, 3, 10, 20, 8, 2000, 100, 10e-6, 40e-6, 30e-6, 4};
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-12 * fabs(b) + 1e-30;
}

static void test_derivation(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_rollout_gpu_t g = round_gpu();
    assert_int_equal(dcr_sim_rollout_gpu_costs(&g, &cal), DCR_OK);
    /* decode: (1 ns digest + 3 x 0.5 ns zstd) per byte over 10 cores = 0.25 ns */
    assert_true(near(cal.decode_s_per_byte, 0.25e-9));
    assert_true(near(cal.decode_s_per_payload, 40e-6));
    /* apply per record: 8 B / 20 GB/s = 0.4 ns, 100 B / 2000 GB/s = 0.05 ns */
    assert_true(near(cal.apply_s_per_record, 0.45e-9));
    assert_true(near(cal.apply_s_per_item, 10e-6));
    assert_true(near(cal.apply_s_per_full_byte, 1e-12)); /* 2 B / 2000 GB/s */
    assert_true(near(cal.relay_hop_s, 30e-6));
    assert_true(near(cal.relay_hop_s_per_byte, 0.25e-9));
    assert_true(cal.has_rollout_gpu);
    /* Owner-side figures are untouched. */
    assert_true(cal.project_s_per_record == test_cal().project_s_per_record);
    assert_int_equal(dcr_sim_cal_validate(&cal), DCR_OK);
    g.hbm_gbps = 0;
    assert_int_equal(dcr_sim_rollout_gpu_costs(&g, &cal), DCR_EINVAL);
}

/* A measured figure replaces the derived one; the others stay derived. */
static void test_measured_replaces(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    cal.rollout_measured = 1u << 0; /* decode_s_per_byte */
    cal.decode_s_per_byte = 7e-9;
    dcr_sim_rollout_gpu_t g = round_gpu();
    assert_int_equal(dcr_sim_rollout_gpu_costs(&g, &cal), DCR_OK);
    assert_true(cal.decode_s_per_byte == 7e-9);
    assert_true(near(cal.apply_s_per_record, 0.45e-9));
    assert_string_equal(dcr_sim_rollout_keys[0], "decode_s_per_byte");
}

/* to_json writes rollout_gpu and the measured figures, not the derived
 * ones; parsing it gives the same figures back. */
static void test_round_trip(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    cal.rollout_measured = 1u << 3; /* apply_s_per_item */
    cal.apply_s_per_item = 3e-6;
    dcr_sim_rollout_gpu_t g = round_gpu();
    assert_int_equal(dcr_sim_rollout_gpu_costs(&g, &cal), DCR_OK);
    char *text = dcr_sim_cal_to_json(&cal);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"rollout_gpu\""));
    assert_non_null(strstr(text, "\"rollout_measured\""));
    assert_null(strstr(text, "\"decode_s_per_byte\""));
    dcr_sim_calibration_t back;
    assert_int_equal(dcr_sim_cal_parse(text, "round trip", &back), DCR_OK);
    free(text);
    assert_true(near(back.decode_s_per_byte, 0.25e-9));
    assert_true(back.apply_s_per_item == 3e-6);
    assert_true(near(back.relay_hop_s_per_byte, 0.25e-9));
    assert_int_equal((int)back.rollout_measured, 1 << 3);
}

/* A derived figure given again at the top level, an unknown measured key
 * and a missing rollout_gpu key are each one clear error. */
static void test_parse_errors(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_rollout_gpu_t g = round_gpu();
    assert_int_equal(dcr_sim_rollout_gpu_costs(&g, &cal), DCR_OK);
    char *text = dcr_sim_cal_to_json(&cal);
    assert_non_null(text);
    char *brace = strrchr(text, '}');
    assert_non_null(brace);
    const char *cases[] = {",\"decode_s_per_byte\": 1e-9}",
                           ",\"rollout_measured\": {\"detect_s_per_byte\": 1}}"};
    for (int i = 0; i < 2; i++) {
        size_t at = (size_t)(brace - text);
        char *bad = malloc(at + strlen(cases[i]) + 1);
        memcpy(bad, text, at);
        strcpy(bad + at, cases[i]);
        dcr_sim_calibration_t out;
        assert_int_equal(dcr_sim_cal_parse(bad, "bad", &out), DCR_EPARSE);
        free(bad);
    }
    char *missing = strdup(text);
    char *key = strstr(missing, "\"hbm_gbps\"");
    assert_non_null(key);
    memcpy(key, "\"hbm_gbpz\"", 10);
    dcr_sim_calibration_t out;
    assert_int_equal(dcr_sim_cal_parse(missing, "typo", &out), DCR_EPARSE);
    free(missing);
    free(text);
}

/* The paper testbed's receivers come from rollout_gpu with nothing
 * measured, and the provenance names the slot measurements go to. */
static void test_paper_file_uses_derivation(void **state)
{
    char path[4096];
    assert_int_equal(dcr_sim_paper_calibration_path(path, sizeof(path)), DCR_OK);
    dcr_sim_calibration_t cal;
    assert_int_equal(dcr_sim_cal_load(path, &cal), DCR_OK);
    assert_true(cal.has_rollout_gpu);
    assert_int_equal((int)cal.rollout_measured, 0);
    bool slot = false;
    for (int i = 0; i < cal.nprovenance; i++)
        slot = slot || (strstr(cal.provenance[i], "rollout_measured") &&
                        strstr(cal.provenance[i], "--device cuda"));
    assert_true(slot);
    /* GPU receivers decode a payload byte faster than the VM's core does
     * (vm-2core.json: 6.3 ns) and apply a record in well under a ns. */
    assert_true(cal.decode_s_per_byte < 1e-9);
    assert_true(cal.apply_s_per_record < 1e-9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_derivation),
        cmocka_unit_test(test_measured_replaces),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_paper_file_uses_derivation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
