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
#include <string.h>

#include <cmocka.h>

#include "workloads/bench.h"
#include "workloads/roles/world.h"

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
    assert_int_equal(dcr_role_world_create(c, &v.world), DCR_OK);
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
    c.scenario.scale = 64;
    c.scenario.layers = 2;
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
    c.adamw = true;
    c.transport = "relay";
    run_verified(&c);
}

/* The replay only goes forward, and version 0 is the initial export. */
static void test_world_versions(void **state)
{
    dcr_bench_config_t c = small();
    dcr_role_world_t *a = NULL, *b = NULL;
    assert_int_equal(dcr_role_world_create(&c, &a), DCR_OK);
    assert_int_equal(dcr_role_world_create(&c, &b), DCR_OK);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world_versions),
        cmocka_unit_test(test_digests_after_uniform_refits),
        cmocka_unit_test(test_digests_after_adamw_refits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
