/* ctest-labels: unit
 *
 * The constructor's path for a device the host cannot address (cuda),
 * run here on host memory: a backend table with the "cpu" slots whose props
 * say host_addressable = false, so the constructor packs trackers through
 * staging and copies them up, copies each compared sub-run up, detects,
 * gathers the changed words of candidate and tracker and copies them down,
 * exactly as it does on a GPU. The oracle is the in-place path (device
 * "cpu"), which test_construct holds to the full conversion: over refits with
 * commits in between, both must emit the same payloads byte for byte and
 * count the same changes. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "construct/construct-internal.h"
#include "device/device-internal.h"
#include "testkit.h"
#include "../construct/keep_sink.h"

/* ---- a host-memory backend that says it is not ---- */

static dcr_device_ops_t g_staged;

/* The table it wraps is its header's parent. */
static dcr_status_t staged_create(const dcr_device_ops_t *self, int ordinal, dcr_device_t **out_p)
{
    const dcr_device_ops_t *parent = self->hdr.parent;
    DCR_CHECK(parent->create(parent, ordinal, out_p));
    (*out_p)->ops = &g_staged;
    return DCR_OK;
}

static void staged_init(void)
{
    g_staged = dcr__device_cpu_ops;
    g_staged.hdr.name = "cpu-staged";
    g_staged.hdr.parent = &dcr__device_cpu_ops;
    g_staged.props.host_addressable = false;
    g_staged.create = staged_create;
}

/* ---- the world: one model, a tensor-parallel layout, v and v+1 ---- */

typedef struct world {
    dcr_model_config_t m;
    dcr_train_config_t tc;
    dcr_inventory_t *inv;
    dcr_source_layout_t *layout;
    dcr_storage_t **canon, **shards_v, **shards_next;
    size_t nc, ns;
} world_t;

static void world_open(world_t *w, dcr_rng_t *rng, int fp8_layers)
{
    testkit_load_model("qwen2.5-0.5b", 64, 2, &w->m);
    w->m.fp8_layers = fp8_layers;
    w->tc = (dcr_train_config_t){1, 4, 2, 1, 1, 2, 0};
    assert_int_equal(dcr_model_build_inventory(&w->m, &w->inv), DCR_OK);
    assert_int_equal(dcr_megatron_build(&w->m, w->inv, &w->tc, DCR_MAPPING_PAPER, &w->layout),
                     DCR_OK);
    w->nc = dcr_inventory_count(w->inv);
    w->ns = (size_t)w->layout->nshards;
    w->canon = testkit_alloc_canonical(w->inv);
    w->shards_v = testkit_alloc_shards(w->layout);
    w->shards_next = testkit_alloc_shards(w->layout);
    testkit_fill_random(rng, w->layout, w->canon);
    assert_int_equal(dcr_megatron_import(&w->m, &w->tc, w->layout, w->canon, w->shards_v), DCR_OK);
}

/* shards_next = shards_v with random canonical changes at `rate`. */
static void world_step(world_t *w, dcr_rng_t *rng, double rate)
{
    char *cast = testkit_cast_tensors(w->layout);
    for (size_t c = 0; c < w->nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(w->inv, c);
        size_t es = dcr_dtype_size(d->dtype);
        unsigned char *p = w->canon[c]->data;
        for (int64_t k = 0; k < dcr_desc_numel(d); k++) {
            if (dcr_rng_uniform(rng) >= rate) continue;
            unsigned char *e = p + (size_t)k * es;
            e[dcr_rng_below(rng, es)] ^= (unsigned char)(1 + dcr_rng_below(rng, 255));
            if (cast[c]) testkit_make_finite(d->dtype, e);
        }
    }
    free(cast);
    assert_int_equal(dcr_megatron_import(&w->m, &w->tc, w->layout, w->canon, w->shards_next),
                     DCR_OK);
}

static void world_close(world_t *w)
{
    testkit_free(w->canon, w->nc);
    testkit_free(w->shards_v, w->ns);
    testkit_free(w->shards_next, w->ns);
    dcr_source_layout_destroy(w->layout);
    dcr_inventory_destroy(w->inv);
}

static void run_one(dcr_constructor_t *con, world_t *w, uint64_t tau, const uint8_t *xor_ok,
                    keep_sink_t *k, dcr_construct_stats_t *st)
{
    dcr_payload_sink_t sink = {keep_submit, k};
    dcr_status_t s = dcr_constructor_run(con, w->shards_next, tau, xor_ok, false, &sink, st);
    if (s != DCR_OK) fail_msg("run tau %llu: %s", (unsigned long long)tau, dcr_error_line(s));
}

static void staged_matches_in_place(int fp8_layers, dcr_construct_mode_t mode)
{
    staged_init();
    dcr_rng_t rng;
    dcr_rng_seed(&rng, testkit_seed(0xC0DE) + (uint64_t)fp8_layers);
    world_t w = {0};
    world_open(&w, &rng, fp8_layers);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.mode = mode;
    cfg.chunk_bytes = 1 << 14; /* many payloads */
    cfg.bucket_bytes = 1 << 16;
    dcr_constructor_t *a = NULL, *b = NULL;
    assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &a), DCR_OK);
    assert_int_equal(dcr__constructor_create_on(&g_staged, w.layout, &cfg, w.shards_v, &b), DCR_OK);
    assert_int_equal(dcr_constructor_baseline_bytes(a), dcr_constructor_baseline_bytes(b));
    uint8_t *xor_ok = malloc(w.nc);
    memset(xor_ok, 1, w.nc); /* XOR records read the tracker words too */
    const double rates[] = {0.01, 0.2, 0.0, 0.05};
    for (uint64_t tau = 1; tau <= 4; tau++) {
        world_step(&w, &rng, rates[tau - 1]);
        keep_sink_t ka = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
        keep_sink_t kb = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
        dcr_construct_stats_t sa, sb;
        run_one(a, &w, tau, tau % 2 ? xor_ok : NULL, &ka, &sa);
        run_one(b, &w, tau, tau % 2 ? xor_ok : NULL, &kb, &sb);
        assert_int_equal(sa.compared_elements, sb.compared_elements);
        assert_int_equal(sa.changed_elements, sb.changed_elements);
        assert_int_equal(sa.records, sb.records);
        if (rates[tau - 1] > 0) assert_true(sa.records > 0);
        assert_int_equal(ka.n, kb.n);
        for (size_t i = 0; i < ka.n; i++) {
            const kept_t *x = &ka.items[i], *y = keep_find(&kb, x->owner, x->id);
            if (y == NULL)
                fail_msg("tau %llu: owner %d payload %llu missing on the staged path",
                         (unsigned long long)tau, x->owner, (unsigned long long)x->id);
            assert_int_equal(x->len, y->len);
            assert_memory_equal(x->data, y->data, x->len);
        }
        keep_clear(&ka);
        keep_clear(&kb);
        /* The joint commit: both baselines move to v+1. */
        assert_int_equal(dcr_constructor_commit(a), DCR_OK);
        assert_int_equal(dcr_constructor_commit(b), DCR_OK);
        dcr_storage_t **t = w.shards_v;
        w.shards_v = w.shards_next;
        w.shards_next = t;
    }
    free(xor_ok);
    dcr_constructor_destroy(a);
    dcr_constructor_destroy(b);
    world_close(&w);
}

static void test_staged_direct(void **state)
{
    (void)state;
    staged_matches_in_place(0, DCR_MODE_X);
}

/* FP8 exports: residual tasks whose change counts (count_run) decide which
 * tensors are rebuilt. */
static void test_staged_residual(void **state)
{
    (void)state;
    staged_matches_in_place(1, DCR_MODE_X);
}

static void test_staged_overwrite_only(void **state)
{
    (void)state;
    staged_matches_in_place(1, DCR_MODE_P);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staged_direct),
        cmocka_unit_test(test_staged_residual),
        cmocka_unit_test(test_staged_overwrite_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
