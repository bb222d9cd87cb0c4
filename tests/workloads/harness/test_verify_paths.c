/* ctest-labels: integration */
/* dcr verify-paths with FP8 block-quantized exports: constructed deltas
 * (residual FP8 conversion with its scale dependency, edge values, overwrite
 * retries) through the loaders' FP8 paths, every receiver compared with a
 * dense refit of the exported canonical tensors inside. Before receivers
 * started from the exported baseline, every FP8 trial mismatched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "testkit.h"
#include "workloads/harness/verify_paths.h"

static void run_fp8(const char *model, int scale, int layers, int tp, bool ep)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = model;
    spec.scale = scale;
    spec.layers = layers;
    spec.fp8_layers = layers;
    dcr_serve_config_t serve = dcr_serve_config_default();
    serve.tp = tp;
    serve.ep = ep;
    const int trials = 4;
    dcr_verify_result_t r;
    dcr_status_t st = dcr_verify_paths(&spec, &serve, trials, testkit_seed(99), &r);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    assert_int_equal(r.cases, trials * tp);
    assert_int_equal(r.mismatches, 0);
    assert_true(r.items_by_path[DCR_VERIFY_XOR] > 0);
    assert_true(r.items_by_path[DCR_VERIFY_OVERWRITE] > 0);
}

static void test_fp8_layers(void **state)
{
    (void)state;
    run_fp8("qwen3-30b-a3b", 32, 2, 1, false);
    run_fp8("qwen3-30b-a3b", 32, 2, 2, true);
    run_fp8("llama-3.2-3b", 64, 2, 1, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
