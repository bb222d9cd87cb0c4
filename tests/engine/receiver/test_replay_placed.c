/* ctest-labels: unit
 *
 * The sparse replay compiles each views-only plan's copies at prewarm; the
 * destinations must still be the parameters' bytes as they are when an item
 * is applied. A receiver prewarmed first and then attached to a resident
 * file (its parameters move into the mapping) applies a refit at 1% and 10%
 * that must equal a fresh dense load of the new version byte for byte (the
 * oracle), with every item replayed (none through the loader); the bytes
 * it left behind at the old addresses are gone, so a replay that wrote
 * there would leave the receiver at the old version. Receivers come from the
 * serving layout of a small scaled model (workloads/serve). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dcr/resident.h"
#include "deploy/world.h"
#include "receiver_test_util.h"

static char g_dir[64];
static dcr_role_world_t *g_world;

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/dcr_replay_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    dcr_run_config_t c = dcr_run_config_default();
    c.scenario.scale = 64;
    c.scenario.layers = 2;
    return dcr_role_world_create(&c, &g_world) == DCR_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    dcr_role_world_destroy(g_world);
    char path[128];
    snprintf(path, sizeof path, "%s/r0.dcrs", g_dir);
    unlink(path);
    return rmdir(g_dir) == 0 ? 0 : -1;
}

/* Per tensor: the encoding its path takes, -1 when skipped. */
static int *encodings(const dcr_receiver_t *r, const dcr_inventory_t *inv)
{
    size_t n = dcr_inventory_count(inv);
    int *enc = calloc(n + 1, sizeof(*enc));
    for (size_t t = 0; t < n; t++) {
        dcr_path_info_t pi;
        assert_int_equal(dcr_receiver_path(r, t, &pi), DCR_OK);
        enc[t] = pi.cls == DCR_PATH_SKIPPED ? -1
                 : pi.cls == DCR_PATH_XOR   ? DCR_ENCODING_XOR
                                            : DCR_ENCODING_OVERWRITE;
    }
    return enc;
}

static void test_replay_after_params_move(void **state)
{
    (void)state;
    const dcr_inventory_t *inv = g_world->sc->inventory;
    dcr_receiver_t *r = NULL;
    assert_int_equal(dcr_role_world_receiver(g_world, 0, &r), DCR_OK); /* prewarmed */
    char path[128];
    snprintf(path, sizeof path, "%s/r0.dcrs", g_dir);
    dcr_resident_t *f = NULL;
    assert_int_equal(dcr_resident_open(path, r, 0, &f), DCR_OK);
    const void *before = dcr_params_at(dcr_receiver_params(r), 0)->storage->data;
    assert_int_equal(dcr_resident_attach(f, r, false, NULL), DCR_OK);
    assert_ptr_not_equal(dcr_params_at(dcr_receiver_params(r), 0)->storage->data, before);

    int *enc = encodings(r, inv);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 31);
    dcr_storage_t **old = g_world->canonical, **held = NULL;
    const double rates[2] = {0.01, 0.10};
    for (int i = 0; i < 2; i++) {
        dcr_storage_t **next = rt_tensors(inv, NULL);
        for (size_t t = 0; t < dcr_inventory_count(inv); t++) {
            const dcr_tensor_desc_t *d = dcr_inventory_at(inv, t);
            /* Skipped tensors stay as they are (nothing carries them). */
            double rate = enc[t] < 0 ? 0 : rates[i];
            rt_mutate(&rng, d->dtype, old[t]->data, next[t]->data, dcr_desc_numel(d), rate);
        }
        rt_payloads_t ps = {0};
        uint64_t tau = (uint64_t)i + 1;
        assert_true(rt_encode_refit(inv, old, next, enc, tau, 2, 64, &rng, &ps) > 0);
        dcr_receiver_stats_t s0, s1;
        dcr_receiver_stats(r, &s0);
        assert_int_equal(dcr_receiver_begin_attempt(r, tau), DCR_OK);
        for (size_t k = 0; k < ps.n; k++)
            assert_int_equal(dcr_receiver_apply_payload(r, ps.buf[k], ps.len[k], NULL), DCR_OK);
        dcr_receiver_stats(r, &s1);
        assert_true(s1.items_sparse > s0.items_sparse);
        assert_int_equal(s1.items_full, s0.items_full);
        rt_payloads_free(&ps);

        dcr_receiver_t *fresh = NULL;
        assert_int_equal(
            dcr_serve_receiver_create(&g_world->sc->model, inv, &g_world->serve, 0, NULL, &fresh),
            DCR_OK);
        assert_int_equal(dcr_receiver_load_dense_all(fresh, next), DCR_OK);
        const char *param = NULL;
        int64_t elem = -1;
        if (!dcr_receiver_equal(r, fresh, &param, &elem))
            fail_msg("rate %g: %s[%lld] differs from the dense refit", rates[i],
                     param ? param : "?", (long long)elem);
        dcr_receiver_destroy(fresh);
        rt_tensors_free(held, inv);
        held = next;
        old = next;
    }
    rt_tensors_free(held, inv);
    free(enc);
    dcr_resident_detach(f, r);
    dcr_receiver_destroy(r);
    dcr_resident_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_after_params_move),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
