/* ctest-labels: integration slow
 *
 * The figures of BENCHMARKS.md's restore table (issue 19): a receiver 1, 3
 * and 8 versions behind restores by replay of the retained versions, against
 * a dense refit of the same receivers. An in-process bench over the object
 * store commits LAST versions at the default change rate with --retain 8;
 * node 0's receivers, dense-loaded with version LAST - k by the role world
 * (the oracle, which shares nothing with the refit), replay k versions and
 * must then equal receivers dense-loaded with version LAST byte for byte.
 * Printed per k: payloads and bytes the replay downloaded (once per node)
 * against the checkpoint a dense refit moves, the replay's seconds, and the
 * seconds the native loader takes for the dense load of the same receivers
 * (weights already in memory: a dense refit's floor, before any transfer).
 * DCR_RESTORE_SCALE and DCR_RESTORE_LAYERS pick the model shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/clock.h"
#include "dcr/objstore.h"
#include "workloads/tmp_dir.h"
#include "restore_bench.h"
#include "workloads/harness/bench.h"
#include "deploy/restorer.h"
#include "deploy/roles.h"
#include "deploy/world.h"

#define LAST 9 /* versions committed by the bench: 8 behind is the oldest kept */

static dcr_bench_config_t g_cfg;
static char g_workdir[300];
static dcr_objstore_t *g_store;
static int g_per;

static int group_setup(void **state)
{
    if (tmp_dir_setup(state)) return -1;
    g_cfg = dcr_bench_config_default();
    g_cfg.run.scenario.scale = restore_env_int("DCR_RESTORE_SCALE", 64);
    g_cfg.run.scenario.layers = restore_env_int("DCR_RESTORE_LAYERS", 2);
    dcr_bench_result_t r;
    if (restore_bench_run(&g_cfg, LAST, 8, g_workdir, sizeof g_workdir, &r, &g_store)) return -1;
    dcr_bench_result_free(&r);
    g_per = g_cfg.run.serve.gpus_per_node;
    return 0;
}

static int group_teardown(void **state)
{
    dcr_objstore_destroy(g_store);
    return tmp_dir_teardown(state);
}

/* Node 0's receivers, dense-loaded by world w at version v; the seconds
 * the loader took (the world's weights of v computed before). */
static double dense_receivers(dcr_role_world_t *w, uint64_t v, dcr_receiver_t **r)
{
    assert_int_equal(dcr_role_world_advance(w, v), DCR_OK);
    double t0 = dcr_clock_s();
    for (int k = 0; k < g_per; k++) assert_int_equal(dcr_role_world_receiver(w, k, &r[k]), DCR_OK);
    return dcr_clock_s() - t0;
}

static void destroy_all(dcr_receiver_t **r)
{
    for (int k = 0; k < g_per; k++) {
        dcr_receiver_destroy(r[k]);
        r[k] = NULL;
    }
}

static void test_replay_table(void **state)
{
    (void)state;
    dcr_role_world_t *ow = NULL;
    assert_int_equal(dcr_role_world_create(&g_cfg.run, &ow), DCR_OK);
    dcr_receiver_t *want[8] = {0};
    assert_true(g_per <= 8);
    double dense_s = dense_receivers(ow, LAST, want);
    int64_t dense = dcr_inventory_bytes(ow->sc->inventory);
    print_message("model: scale %d, %d layers, checkpoint %lld bytes, %d receivers per node; "
                  "dense load of them %.3f s\n",
                  g_cfg.run.scenario.scale, g_cfg.run.scenario.layers, (long long)dense, g_per,
                  dense_s);
    static const int behind[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof behind / sizeof behind[0]; i++) {
        uint64_t from = LAST - (uint64_t)behind[i];
        dcr_role_world_t *w = NULL;
        assert_int_equal(dcr_role_world_create(&g_cfg.run, &w), DCR_OK);
        dcr_receiver_t *r[8] = {0};
        dense_receivers(w, from, r);
        dcr_replay_stats_t st;
        if (dcr_restore_replay(g_store, r, g_per, from, LAST, &st) != DCR_OK)
            fail_msg("replay %llu..%d: %s", (unsigned long long)from + 1, LAST, dcr_error_detail());
        for (int k = 0; k < g_per; k++) {
            const char *param = NULL;
            int64_t elem = 0;
            if (!dcr_receiver_equal(r[k], want[k], &param, &elem))
                fail_msg("%d behind: receiver %d differs from a dense refit at %s[%lld]", behind[i],
                         k, param, (long long)elem);
        }
        assert_int_equal(st.versions, (uint64_t)behind[i]);
        print_message("| %d behind | %llu payloads | %llu bytes | %.1f%% of dense | replay %.3f s "
                      "| dense load %.3f s |\n",
                      behind[i], (unsigned long long)st.payloads, (unsigned long long)st.bytes,
                      100.0 * (double)st.bytes / (double)dense, st.seconds, dense_s);
        destroy_all(r);
        dcr_role_world_destroy(w);
    }
    destroy_all(want);
    dcr_role_world_destroy(ow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_table)};
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
