/* ctest-labels: integration
 *
 * The verifier of cross-process bit-exactness: a role world built from the
 * run configuration alone (sharing nothing with the refit) replays the
 * seeded workload to the committed version and digests a dense refit of it;
 * after every timed refit of an in-process bench each receiver's digests
 * must equal those, and a flipped bit in any receiver must be named. */
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

#include "workloads/harness/bench.h"
#include "coord/parties-internal.h"
#include "deploy/roles.h"
#include "deploy/world.h"

typedef struct verify_ctx {
    const dcr_bench_config_t *cfg;
    dcr_role_world_t *world; /* the verifier's own world */
    int calls;
    uint64_t versions[8];
} verify_ctx_t;

static dcr_status_t check_digests(void *arg, uint64_t version, dcr_receiver_t *const *receivers,
                                  int n)
{
    verify_ctx_t *v = arg;
    v->versions[v->calls++ % 8] = version;
    for (int i = 0; i < n; i++) {
        dcr_param_digests_t want, got;
        assert_int_equal(dcr_role_world_expected_digests(v->world, version, i, &want), DCR_OK);
        assert_int_equal(dcr_receiver_digests(receivers[i], &got), DCR_OK);
        char who[32];
        snprintf(who, sizeof(who), "receiver %d", i);
        dcr_status_t st = dcr_param_digests_compare(&want, &got, who);
        if (st != DCR_OK)
            fail_msg("version %llu: %s", (unsigned long long)version, dcr_error_detail());
        dcr_param_digests_free(&got);
        /* A flipped bit in the last parameter of this receiver is named. */
        const dcr_params_t *ps = dcr_receiver_params(receivers[i]);
        const dcr_param_t *p = dcr_params_at(ps, dcr_params_count(ps) - 1);
        uint8_t *last = (uint8_t *)p->storage->data + p->storage->bytes - 1;
        *last ^= 0x01;
        assert_int_equal(dcr_receiver_digests(receivers[i], &got), DCR_OK);
        assert_int_equal(dcr_param_digests_compare(&want, &got, who), DCR_EMISMATCH);
        char expect[256];
        snprintf(expect, sizeof(expect), "%s: parameter %s differs", who, p->name);
        assert_non_null(strstr(dcr_error_detail(), expect));
        *last ^= 0x01;
        dcr_param_digests_free(&got);
        dcr_param_digests_free(&want);
    }
    return DCR_OK;
}

static void run_verified(dcr_bench_config_t *c)
{
    verify_ctx_t v = {c, NULL, 0, {0}};
    assert_int_equal(dcr_role_world_create(&c->run, &v.world), DCR_OK);
    c->after_refit = check_digests;
    c->after_refit_ctx = &v;
    dcr_bench_result_t r;
    if (dcr_bench_run(c, &r) != DCR_OK) fail_msg("%s", dcr_error_detail());
    assert_true(r.bit_exact);
    assert_int_equal(v.calls, c->refits);
    /* Version v is built by step v - 1: warm-ups commit the first ones. */
    for (int i = 0; i < c->refits; i++)
        assert_int_equal(v.versions[i], (uint64_t)(c->warmup + i + 1));
    dcr_bench_result_free(&r);
    dcr_role_world_destroy(v.world);
}

static dcr_bench_config_t small(void)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.run.scenario.scale = 64;
    c.run.scenario.layers = 2;
    c.warmup = 1;
    c.refits = 2;
    return c;
}

static void test_digests_after_uniform_refits(void **state)
{
    dcr_bench_config_t c = small();
    run_verified(&c);
}

static void test_digests_after_adamw_refits(void **state)
{
    dcr_bench_config_t c = small();
    c.run.adamw = true;
    c.run.transport = "relay";
    run_verified(&c);
}

/* The replay only goes forward, and version 0 is the initial export. */
static void test_world_versions(void **state)
{
    dcr_bench_config_t c = small();
    dcr_role_world_t *a = NULL, *b = NULL;
    assert_int_equal(dcr_role_world_create(&c.run, &a), DCR_OK);
    assert_int_equal(dcr_role_world_create(&c.run, &b), DCR_OK);
    dcr_param_digests_t d0, d2a, d2b;
    assert_int_equal(dcr_role_world_expected_digests(a, 0, 0, &d0), DCR_OK);
    assert_int_equal(dcr_role_world_expected_digests(a, 2, 0, &d2a), DCR_OK);
    /* Two worlds built from the same configuration agree; versions differ. */
    assert_int_equal(dcr_role_world_advance(b, 1), DCR_OK);
    assert_int_equal(dcr_role_world_expected_digests(b, 2, 0, &d2b), DCR_OK);
    assert_int_equal(dcr_param_digests_compare(&d2a, &d2b, "replay"), DCR_OK);
    assert_int_equal(dcr_param_digests_compare(&d0, &d2a, "version 0"), DCR_EMISMATCH);
    assert_int_equal(dcr_role_world_advance(a, 1), DCR_EINVAL);
    dcr_param_digests_free(&d0);
    dcr_param_digests_free(&d2a);
    dcr_param_digests_free(&d2b);
    dcr_role_world_destroy(a);
    dcr_role_world_destroy(b);
}

/* The coordinator process's answer line carries every figure exactly
 * (doubles as hex floats), and an error answer comes back as its status
 * with its line. Expected values are the ones written. */
static void test_refit_result_line(void **state)
{
    (void)state;
    dcr_refit_result_t r;
    memset(&r, 0, sizeof(r));
    r.version = 7;
    r.tau = 12;
    r.attempts = 2;
    r.t0 = 1234.000000123;
    r.t1 = 1234.1 + 1e-9;
    r.latency_s = r.t1 - r.t0;
    r.construction_end = 1234.05;
    r.delivery_end = 1234.07;
    r.apply_end = 1234.08;
    r.commit_end = 1234.09;
    r.finalization_s = 0.02;
    r.payload_bytes = 61087;
    r.cross_bytes = 3 * 61087;
    r.duplicates = 1;
    r.stale = 2;
    r.receivers_died = 0;
    r.construct.construction_s = 0.0985;
    r.construct.compared_elements = 1 << 20;
    r.construct.changed_elements = 31000;
    r.construct.records = 18155;
    r.construct.raw_changed_value_bytes = 36310;
    r.construct.payload_bytes = 61087;
    r.construct.body_raw_bytes = 90000;
    r.construct.value_bytes = 36310;
    r.construct.payloads = 40;
    r.construct.xor_items = 30;
    r.construct.overwrite_items = 10;
    r.construct.residual_tensors = 3;
    char line[2048];
    assert_true(dcr_role_refit_result_format(&r, line, sizeof(line)) > 0);
    dcr_refit_result_t got;
    assert_int_equal(dcr_role_refit_result_parse(line, &got), DCR_OK);
    assert_memory_equal(&got.construct, &r.construct, sizeof(r.construct));
    assert_true(got.t0 == r.t0 && got.t1 == r.t1 && got.latency_s == r.latency_s);
    assert_true(got.construction_end == r.construction_end && got.apply_end == r.apply_end);
    assert_true(got.finalization_s == r.finalization_s && got.commit_end == r.commit_end);
    assert_int_equal(got.version, 7);
    assert_int_equal(got.tau, 12);
    assert_int_equal(got.attempts, 2);
    assert_int_equal(got.cross_bytes, 3 * 61087);
    assert_int_equal(got.stale, 2);
    assert_int_equal(dcr_role_refit_result_parse("error 13 rollout node 1 is gone\n", &got), 13);
    assert_non_null(strstr(dcr_error_detail(), "rollout node 1 is gone"));
    assert_int_equal(dcr_role_refit_result_parse("ok 1 2\n", &got), DCR_EIO);
}

/* The owners' report survives the control plane exactly (SQLite here),
 * why included; a malformed one is refused. */
static void test_owners_report(void **state)
{
    (void)state;
    char dir[256], db[320];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "roles"));
    snprintf(db, sizeof(db), "%s/control.db", dir);
    dcr_control_t *c = NULL;
    assert_int_equal(dcr_run_control_open(NULL, db, NULL, &c), DCR_OK);
    dcr_owners_report_t r, got;
    assert_int_equal(dcr_owners_report_get(c, &got), DCR_ENOTFOUND);
    memset(&r, 0, sizeof(r));
    r.phase = DCR_OWNERS_FAILED;
    r.tau = 9;
    r.t0 = 10.25;
    r.construction_end = 10.5 + 1e-7;
    r.t1 = 11.0;
    r.cpu_s = 3.75 + 1e-9;
    r.construct.payloads = 44;
    r.construct.records = 123456789012345;
    snprintf(r.why, sizeof(r.why), "owner 2: transport closed");
    assert_int_equal(dcr_owners_report_put(c, &r), DCR_OK);
    assert_int_equal(dcr_owners_report_get(c, &got), DCR_OK);
    assert_int_equal(got.phase, DCR_OWNERS_FAILED);
    assert_int_equal(got.tau, 9);
    assert_true(got.t0 == r.t0 && got.construction_end == r.construction_end && got.t1 == r.t1);
    assert_true(got.cpu_s == r.cpu_s);
    assert_memory_equal(&got.construct, &r.construct, sizeof(r.construct));
    assert_string_equal(got.why, r.why);
    assert_int_equal(dcr_control_report_put(c, DCR_OWNERS_REPORT_ID, "dcr-owners 1 7", 14), DCR_OK);
    assert_int_equal(dcr_owners_report_get(c, &got), DCR_ECONTROL);
    dcr_control_destroy(c);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf -- %s", dir); /* the database and its journal */
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refit_result_line),
        cmocka_unit_test(test_owners_report),
        cmocka_unit_test(test_world_versions),
        cmocka_unit_test(test_digests_after_uniform_refits),
        cmocka_unit_test(test_digests_after_adamw_refits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
