/* ctest-labels: unit
 *
 * Scenarios and the uniform stress injection: exactly round(rate * n)
 * changed elements per task, every one with different bits, replicas and
 * padding consistent with the owners (checked through the full conversion). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "testkit.h"
#include "workloads/change/scenario.h"

typedef struct count_ctx {
    const unsigned char *a, *b;
    size_t es;
    int64_t diff;
} count_ctx_t;

static void count_run(int64_t src, int64_t dst, int64_t len, void *p)
{
    count_ctx_t *c = p;
    for (int64_t k = 0; k < len; k++)
        c->diff +=
            memcmp(c->a + (size_t)(src + k) * c->es, c->b + (size_t)(src + k) * c->es, c->es) != 0;
}

static void check_injection(const char *model, dcr_train_config_t tc, double rate)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = model;
    spec.scale = 64;
    spec.layers = strstr(model, "nemotron") ? 6 : 2;
    spec.train = tc;
    dcr_scenario_t *sc;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    size_t nc = dcr_inventory_count(sc->inventory), ns = (size_t)sc->layout->nshards;
    dcr_storage_t **canon, **before, **after, **exported;
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &canon), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &exported), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &before), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &after), DCR_OK);
    dcr_scenario_init_weights(sc, 42, canon);
    assert_int_equal(dcr_megatron_import(&sc->model, &sc->train, sc->layout, canon, before),
                     DCR_OK);
    for (size_t s = 0; s < ns; s++) memcpy(after[s]->data, before[s]->data, before[s]->bytes);
    int64_t changed = 0, expected = 0;
    assert_int_equal(dcr_scenario_inject_uniform(sc, rate, 7, after, canon, &changed), DCR_OK);
    for (int i = 0; i < sc->layout->ntasks; i++) {
        const dcr_task_t *t = &sc->layout->tasks[i];
        count_ctx_t c = {before[t->shard]->data, after[t->shard]->data,
                         dcr_dtype_size(sc->layout->shards[t->shard].desc.dtype), 0};
        for (int m = 0; m < t->nmaps; m++) dcr_box_map_foreach_run(&t->maps[m], count_run, &c);
        assert_int_equal(c.diff, llround(rate * (double)dcr_task_numel(t)));
        expected += c.diff;
    }
    assert_int_equal(changed, expected);
    /* Replicas and padding follow the owners: exporting reads every replica. */
    assert_int_equal(dcr_megatron_export(&sc->model, &sc->train, sc->layout, after, exported),
                     DCR_OK);
    for (size_t c = 0; c < nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        int cast = 0;
        for (int i = 0; i < sc->layout->ntasks; i++)
            cast |= sc->layout->tasks[i].canonical == (int)c &&
                    sc->layout->shards[sc->layout->tasks[i].shard].desc.dtype != d->dtype;
        if (!cast) assert_memory_equal(exported[c]->data, canon[c]->data, canon[c]->bytes);
    }
    dcr_scenario_free_tensors(canon, nc);
    dcr_scenario_free_tensors(exported, nc);
    dcr_scenario_free_tensors(before, ns);
    dcr_scenario_free_tensors(after, ns);
    dcr_scenario_destroy(sc);
}

static void test_uniform_injection(void **state)
{
    check_injection("qwen3-30b-a3b", (dcr_train_config_t){1, 8, 8, 2, 2, 1, 0}, 0.03);
    check_injection("qwen2.5-0.5b", (dcr_train_config_t){1, 4, 2, 1, 1, 2, 0}, 0.05);
    check_injection("nemotron-3-nano-30b-a3b", (dcr_train_config_t){1, 2, 2, 1, 1, 1, 0}, 0.01);
    check_injection("gemma-3-4b", (dcr_train_config_t){1, 1, 1, 1, 1, 1, 0}, 1.0);
}

static void test_scenario_errors(void **state)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    dcr_scenario_t *sc = NULL;
    spec.scale = 0;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_EINVAL);
    spec = dcr_scenario_spec_default();
    spec.train.tp = 3;
    spec.train.gpus_per_node = 3;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_ELAYOUT);
    assert_null(sc);
    spec = dcr_scenario_spec_default();
    spec.scale = 64;
    spec.layers = 1;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    dcr_storage_t **shards;
    assert_int_equal(dcr_scenario_alloc_shards(sc, &shards), DCR_OK);
    int64_t changed;
    assert_int_equal(dcr_scenario_inject_uniform(sc, 1.5, 1, shards, NULL, &changed), DCR_EINVAL);
    dcr_scenario_free_tensors(shards, (size_t)sc->layout->nshards);
    dcr_scenario_destroy(sc);
}

/* AdamW at lr 1e-6 on weights of about 0.02: a natural change rate of
 * roughly 1% (the seed's Figure 2: 0.6-1.2%), counted exactly, replicas
 * consistent, and the same seed giving the same trajectory. */
static void test_adamw_trajectory(void **state)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.scale = 32;
    spec.layers = 2;
    spec.train = (dcr_train_config_t){1, 4, 2, 2, 1, 1, 0};
    dcr_scenario_t *sc;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    size_t nc = dcr_inventory_count(sc->inventory), ns = (size_t)sc->layout->nshards;
    dcr_storage_t **canon, **a, **b, **exported;
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &canon), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &exported), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &a), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &b), DCR_OK);
    dcr_scenario_init_weights(sc, 3, canon);
    assert_int_equal(dcr_megatron_import(&sc->model, &sc->train, sc->layout, canon, a), DCR_OK);
    for (size_t s = 0; s < ns; s++) memcpy(b[s]->data, a[s]->data, a[s]->bytes);
    dcr_adamw_t *oa, *ob;
    assert_int_equal(dcr_adamw_create(sc, a, 1e-6, 9, &oa), DCR_OK);
    assert_int_equal(dcr_adamw_create(sc, b, 1e-6, 9, &ob), DCR_OK);
    int64_t owned = 0;
    for (int i = 0; i < sc->layout->ntasks; i++) owned += dcr_task_numel(&sc->layout->tasks[i]);
    for (int step = 0; step < 3; step++) {
        int64_t ca = 0, cb = 0;
        assert_int_equal(dcr_adamw_step(oa, a, canon, &ca), DCR_OK);
        assert_int_equal(dcr_adamw_step(ob, b, canon, &cb), DCR_OK);
        assert_int_equal(ca, cb);
        double rate = (double)ca / (double)owned;
        print_message("  step %d: %.3f%% of %lld owned elements changed\n", step + 1, 100 * rate,
                      (long long)owned);
        assert_true(rate > 0.002 && rate < 0.05);
        for (size_t s = 0; s < ns; s++) assert_memory_equal(a[s]->data, b[s]->data, a[s]->bytes);
    }
    /* Replicas and padding follow the owners. */
    assert_int_equal(dcr_megatron_export(&sc->model, &sc->train, sc->layout, a, exported), DCR_OK);
    dcr_adamw_destroy(ob);
    assert_int_equal(dcr_adamw_create(sc, a, 0.0, 1, &ob), DCR_EINVAL);
    dcr_adamw_destroy(oa);
    dcr_scenario_free_tensors(canon, nc);
    dcr_scenario_free_tensors(exported, nc);
    dcr_scenario_free_tensors(a, ns);
    dcr_scenario_free_tensors(b, ns);
    dcr_scenario_destroy(sc);
}

/* dcr_scenario_step takes the same changes as the call it chooses: uniform
 * without AdamW or profile, AdamW whenever a state is given. */
static void test_scenario_step_choice(void **state)
{
    (void)state;
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.scale = 64;
    spec.layers = 2;
    dcr_scenario_t *sc;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    size_t nc = dcr_inventory_count(sc->inventory), ns = (size_t)sc->layout->nshards;
    dcr_storage_t **canon, **a, **b;
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &canon), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &a), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &b), DCR_OK);
    dcr_scenario_init_weights(sc, 5, canon);
    assert_int_equal(dcr_megatron_import(&sc->model, &sc->train, sc->layout, canon, a), DCR_OK);
    for (size_t s = 0; s < ns; s++) memcpy(b[s]->data, a[s]->data, a[s]->bytes);
    int64_t ca = 0, cb = 0;
    uint64_t seed = dcr_scenario_step_seed(42, 5);
    assert_int_equal(seed, 42 + 1000 + 5);
    assert_int_equal(dcr_scenario_step(sc, NULL, NULL, 0.02, seed, a, canon, &ca), DCR_OK);
    assert_int_equal(dcr_scenario_inject_uniform(sc, 0.02, seed, b, canon, &cb), DCR_OK);
    assert_true(ca > 0);
    assert_int_equal(ca, cb);
    for (size_t s = 0; s < ns; s++) assert_memory_equal(a[s]->data, b[s]->data, a[s]->bytes);
    dcr_adamw_t *oa, *ob;
    assert_int_equal(dcr_adamw_create(sc, a, 1e-6, 9, &oa), DCR_OK);
    assert_int_equal(dcr_adamw_create(sc, b, 1e-6, 9, &ob), DCR_OK);
    /* AdamW wins over the rate (and over a profile: the same branch order). */
    assert_int_equal(dcr_scenario_step(sc, oa, NULL, 0.5, seed, a, canon, &ca), DCR_OK);
    assert_int_equal(dcr_adamw_step(ob, b, canon, &cb), DCR_OK);
    assert_int_equal(ca, cb);
    for (size_t s = 0; s < ns; s++) assert_memory_equal(a[s]->data, b[s]->data, a[s]->bytes);
    dcr_adamw_destroy(oa);
    dcr_adamw_destroy(ob);
    dcr_scenario_free_tensors(canon, nc);
    dcr_scenario_free_tensors(a, ns);
    dcr_scenario_free_tensors(b, ns);
    dcr_scenario_destroy(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_injection),
        cmocka_unit_test(test_scenario_errors),
        cmocka_unit_test(test_adamw_trajectory),
        cmocka_unit_test(test_scenario_step_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
