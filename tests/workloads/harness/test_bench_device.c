/* ctest-labels: integration
 *
 * dcr bench with its receivers and owners on a device the host cannot
 * address (dcr_bench_config_t.device): the far test device
 * (tests/engine/device/far_device.h, host memory at non-canonical addresses,
 * so any host access of resident storage, scratch, trackers or loader
 * temporaries faults) stands in for cuda. The default bench workload, the
 * FP32-norms serving variant (whose loader casts on the device) and
 * Nemotron-H (casts and -exp maps on the device) must be bit-exact against
 * the CPU path: every receiver equals its dense refit
 * on the CPU path after every timed refit (the bench's own verification),
 * and every receiver's per-parameter digests after every timed refit equal
 * those of the same run (same seed) with device cpu. Requests through the
 * gate read device-resident receivers and must see P^v or P^{v+1}. A device
 * the build or machine lacks fails the run with one line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/device/far_device.h"
#include "dcr/receiver.h"
#include "workloads/harness/bench.h"

#define MAX_REFITS    4
#define MAX_RECEIVERS 8

/* Every receiver's digests after every timed refit. */
typedef struct seen {
    int refits, receivers;
    uint64_t version[MAX_REFITS];
    dcr_param_digests_t d[MAX_REFITS][MAX_RECEIVERS];
} seen_t;

static dcr_status_t keep_digests(void *ctx, uint64_t version, dcr_receiver_t *const *receivers,
                                 int n)
{
    seen_t *s = ctx;
    if (s->refits >= MAX_REFITS || n > MAX_RECEIVERS)
        return dcr_error_set(DCR_EINVAL, "test: more refits or receivers than kept");
    for (int i = 0; i < n; i++) DCR_CHECK(dcr_receiver_digests(receivers[i], &s->d[s->refits][i]));
    s->version[s->refits++] = version;
    s->receivers = n;
    return DCR_OK;
}

static void seen_free(seen_t *s)
{
    for (int k = 0; k < s->refits; k++)
        for (int i = 0; i < s->receivers; i++) dcr_param_digests_free(&s->d[k][i]);
}

static void run_on(dcr_bench_config_t c, const char *device, seen_t *s)
{
    c.run.device = device;
    c.after_refit = keep_digests;
    c.after_refit_ctx = s;
    dcr_bench_result_t r;
    if (dcr_bench_run(&c, &r) != DCR_OK) fail_msg("bench on %s: %s", device, dcr_error_detail());
    assert_int_equal(r.nrefits, c.refits);
    assert_true(r.bit_exact);
    for (int i = 0; i < r.nrefits; i++) {
        assert_true(r.refits[i].verified && r.refits[i].bit_exact);
        assert_int_equal(r.refits[i].attempts, 1);
    }
    /* Readers' digests go through device-to-host copies; a request counts
     * only when it completes within a refit, which the small models'
     * runs make sure of (a 44 MB digest outlasts a refit under ASan). */
    if (c.readers > 0) assert_true(r.requests > 0);
    assert_int_equal(r.request_mismatches, 0);
    dcr_bench_result_free(&r);
    assert_int_equal(s->refits, c.refits);
}

/* The run on the far device against the same run on the CPU path. */
static void far_against_cpu(const dcr_bench_config_t *c)
{
    seen_t far = {0}, cpu = {0};
    run_on(*c, FAR_NAME, &far);
    run_on(*c, "cpu", &cpu);
    assert_int_equal(far.receivers, cpu.receivers);
    for (int k = 0; k < far.refits; k++) {
        assert_int_equal(far.version[k], cpu.version[k]);
        char who[64];
        for (int i = 0; i < far.receivers; i++) {
            snprintf(who, sizeof(who), "refit %d receiver %d on %s", k, i, FAR_NAME);
            dcr_status_t st = dcr_param_digests_compare(&cpu.d[k][i], &far.d[k][i], who);
            if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
        }
    }
    seen_free(&far);
    seen_free(&cpu);
}

/* Four timed refits with one reader (the default workload drops it): a
 * request counts only when it completes within a refit, and the small
 * models' refits are short; with two, a fresh-clone run saw none complete
 * once (test_nemotron_maps), so the reader gets more windows to land in. */
static dcr_bench_config_t short_run(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.warmup = 1;
    c.refits = 4;
    c.readers = 1;
    return c;
}

static void test_default_workload(void **state)
{
    (void)state;
    dcr_bench_config_t c = short_run();
    c.readers = 0;
    far_against_cpu(&c);
}

/* --fp32-norms: the norms' bf16 -> fp32 cast runs on the device, at dense
 * load and in every overwrite pass (placeholder and NaN watch). */
static void test_fp32_norms_casts(void **state)
{
    (void)state;
    dcr_bench_config_t c = short_run();
    c.run.serve.fp32_norms = true;
    c.run.scenario.scale = 64;
    c.run.scenario.layers = 2;
    far_against_cpu(&c);
}

/* Nemotron-H: its Mamba A = -exp(A_log) (map of the closed set) and FP32
 * router casts run on the device. */
static void test_nemotron_maps(void **state)
{
    (void)state;
    dcr_bench_config_t c = short_run();
    c.run.scenario.model = "nemotron-3-nano-30b-a3b";
    c.run.scenario.scale = 64;
    c.run.scenario.layers = 6;
    far_against_cpu(&c);
}

static void test_missing_device(void **state)
{
    (void)state;
    const dcr_device_ops_t *cuda = dcr_device_find("cuda");
    if (cuda && cuda->count(cuda) > 0) skip(); /* a GPU here: cuda runs */
    dcr_bench_config_t c = short_run();
    c.run.device = "cuda";
    dcr_bench_result_t r;
    dcr_status_t st = dcr_bench_run(&c, &r);
    assert_true(st == DCR_ENOTFOUND || st == DCR_EUNSUPPORTED);
    const char *line = dcr_error_line(st);
    assert_non_null(strstr(line, "--device cuda"));
    assert_null(strchr(line, '\n'));
}

int main(void)
{
    far_device_register();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_workload),
        cmocka_unit_test(test_fp32_norms_casts),
        cmocka_unit_test(test_nemotron_maps),
        cmocka_unit_test(test_missing_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
