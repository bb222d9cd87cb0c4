/* ctest-labels: unit
 *
 * Megatron-like training layouts: item counts against the seed's published
 * figures, and property tests over random layouts in which the task box maps
 * are held to the independent full conversion (export/import by strided views). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/rng.h"
#include "dcr/source.h"
#include "workloads/model/model.h"
#include "workloads/train/megatron.h"
#include "testkit.h"

/* The seed (Table D.2 text): Qwen3-30B-A3B under its mapping classes has
 * 18,480t + 241 XOR (affine) items at TP = ETP = t, 146 residual tensors
 * (q/k/v, embedding, head) and a 96.3% affine share of weight bytes. */
static void test_qwen3_30b_paper_items(void **state)
{
    dcr_model_config_t m;
    dcr_inventory_t *inv;
    testkit_load_model("qwen3-30b-a3b", 1, 0, &m);
    assert_int_equal(dcr_model_build_inventory(&m, &inv), DCR_OK);
    const int degrees[] = {1, 4, 8};
    for (int i = 0; i < 3; i++) {
        int t = degrees[i];
        dcr_train_config_t tc = {1, t, t, t, 1, 1, 0};
        dcr_source_layout_t *layout;
        assert_int_equal(dcr_megatron_build(&m, inv, &tc, DCR_MAPPING_PAPER, &layout), DCR_OK);
        dcr_source_stats_t st;
        dcr_source_layout_stats(layout, &st);
        assert_int_equal(st.affine_items, 18480 * t + 241);
        assert_int_equal(st.residual_tensors, 146);
        assert_int_equal(st.residual_items, 146);
        assert_int_equal(st.affine_items + st.residual_items, 18480 * t + 241 + 146);
        assert_true(st.affine_byte_share > 0.962 && st.affine_byte_share < 0.964);
        dcr_source_layout_destroy(layout);
    }
    dcr_inventory_destroy(inv);
}

/* Extended mapping: q/k/v and padded vocab rows become affine, so nothing is
 * residual for a plain transformer. */
static void test_extended_has_no_residual(void **state)
{
    dcr_model_config_t m;
    dcr_inventory_t *inv;
    testkit_load_model("qwen2.5-0.5b", 1, 0, &m);
    assert_int_equal(dcr_model_build_inventory(&m, &inv), DCR_OK);
    dcr_train_config_t tc = {1, 2, 2, 1, 1, 1, 0};
    dcr_source_layout_t *layout;
    assert_int_equal(dcr_megatron_build(&m, inv, &tc, DCR_MAPPING_EXTENDED, &layout), DCR_OK);
    dcr_source_stats_t st;
    dcr_source_layout_stats(layout, &st);
    assert_int_equal(st.residual_tensors, 0);
    assert_true(st.affine_byte_share == 1.0);
    dcr_source_layout_destroy(layout);
    dcr_inventory_destroy(inv);
}

static void expect_layout_error(const char *model, dcr_train_config_t tc, const char *needle)
{
    dcr_model_config_t m;
    testkit_load_model(model, 16, 4, &m);
    dcr_status_t st = dcr_train_config_validate(&m, &tc);
    assert_int_equal(st, DCR_ELAYOUT);
    if (!strstr(dcr_error_detail(), needle))
        fail_msg("'%s' does not mention '%s'", dcr_error_detail(), needle);
}

static void test_invalid_layouts(void **state)
{
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){1, 3, 3, 1, 1, 1, 0}, "heads");
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){1, 6, 1, 1, 1, 4, 0}, "divide");
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){1, 3, 1, 1, 3, 1, 0}, "experts");
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){2, 4, 2, 1, 1, 1, 3}, "dp");
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){1, 3, 1, 1, 1, 3, 0}, "layers");
    expect_layout_error("qwen2.5-0.5b", (dcr_train_config_t){1, 4, 4, 1, 1, 1, 0}, "heads");
    expect_layout_error("llama-3.2-3b", (dcr_train_config_t){1, 2, 1, 1, 2, 1, 0}, "experts");
    expect_layout_error("qwen3-30b-a3b", (dcr_train_config_t){1, 4, 1, 4, 2, 1, 0}, "etp*ep");
}

/* ---- property tests: random layouts against the full conversion ---------- */

typedef struct covered_ctx {
    const unsigned char *imported, *gathered;
    size_t es;
    int64_t first_diff;
} covered_ctx_t;

static void compare_covered(int64_t src, int64_t dst, void *p)
{
    covered_ctx_t *c = p;
    if (c->first_diff < 0 &&
        memcmp(c->imported + (size_t)src * c->es, c->gathered + (size_t)src * c->es, c->es))
        c->first_diff = src;
}

static void check_layout(dcr_rng_t *rng, const dcr_model_config_t *m, const dcr_train_config_t *tc,
                         dcr_mapping_t mapping)
{
    dcr_inventory_t *inv;
    dcr_source_layout_t *layout;
    assert_int_equal(dcr_model_build_inventory(m, &inv), DCR_OK);
    assert_int_equal(dcr_megatron_build(m, inv, tc, mapping, &layout), DCR_OK);
    if (dcr_source_layout_check_coverage(layout) != DCR_OK) fail_msg("%s", dcr_error_detail());
    int nc = (int)dcr_inventory_count(inv), ns = layout->nshards;
    dcr_storage_t **canon = testkit_alloc_canonical(inv);
    dcr_storage_t **back = testkit_alloc_canonical(inv);
    dcr_storage_t **shards = testkit_alloc_shards(layout);
    dcr_storage_t **gathered = testkit_alloc_shards(layout);
    testkit_fill_random(rng, layout, canon);

    /* Import then export reproduces every canonical tensor bit for bit. */
    assert_int_equal(dcr_megatron_import(m, tc, layout, canon, shards), DCR_OK);
    assert_int_equal(dcr_megatron_export(m, tc, layout, shards, back), DCR_OK);
    for (int c = 0; c < nc; c++)
        if (memcmp(canon[c]->data, back[c]->data, canon[c]->bytes))
            fail_msg("export(import) differs on %s", dcr_inventory_at(inv, (size_t)c)->name);

    /* The tasks' box maps agree with the full conversion in both directions. */
    for (int c = 0; c < nc; c++) memset(back[c]->data, 0xA5, back[c]->bytes);
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        dcr_task_scatter(layout, t, shards[t->shard]->data, back[t->canonical]->data);
        dcr_task_gather(layout, t, canon[t->canonical]->data, gathered[t->shard]->data);
    }
    for (int c = 0; c < nc; c++)
        if (memcmp(canon[c]->data, back[c]->data, canon[c]->bytes))
            fail_msg("task scatter differs on %s", dcr_inventory_at(inv, (size_t)c)->name);
    /* Gathered shards equal imported ones on every element a task covers;
     * the rest (padding rows, replicated k/v groups) import fills and tasks
     * skip. */
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        covered_ctx_t cc = {shards[t->shard]->data, gathered[t->shard]->data,
                            dcr_dtype_size(layout->shards[t->shard].desc.dtype), -1};
        for (int k = 0; k < t->nmaps; k++) dcr_box_map_foreach(&t->maps[k], compare_covered, &cc);
        if (cc.first_diff >= 0)
            fail_msg("task %s gathers element %lld differently from the import", t->name,
                     (long long)cc.first_diff);
    }

    /* Every owner holds its shard; owners are stable. */
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        const dcr_source_shard_t *s = &layout->shards[t->shard];
        int held = 0;
        for (int h = 0; h < s->nholders; h++) held |= s->holders[h] == t->owner;
        assert_true(held);
        assert_int_equal(t->owner, dcr_source_pick_owner(t->name, s->nholders, s->holders));
    }
    testkit_free(canon, (size_t)nc);
    testkit_free(back, (size_t)nc);
    testkit_free(shards, (size_t)ns);
    testkit_free(gathered, (size_t)ns);
    dcr_source_layout_destroy(layout);
    dcr_inventory_destroy(inv);
}

static int pick(dcr_rng_t *rng, const int *options, int n)
{
    return options[dcr_rng_below(rng, (uint64_t)n)];
}

static void test_random_layouts_match_full_conversion(void **state)
{
    uint64_t seed = testkit_seed(0x5eed0001);
    print_message("seed 0x%llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    const char *const *names = dcr_model_builtin_names();
    int nmodels = 0;
    while (names[nmodels]) nmodels++;
    const int degrees[] = {1, 2, 4, 8};
    int tried = 0, valid = 0;
    while (valid < 32 && tried < 4000) {
        tried++;
        dcr_model_config_t m;
        const char *name = names[valid % nmodels]; /* every model, in turn */
        int layers = 1 + (int)dcr_rng_below(&rng, 4);
        if (!strcmp(name, "nemotron-3-nano-30b-a3b"))
            layers = 6 + (int)dcr_rng_below(&rng, 3); /* reach M, E and * */
        testkit_load_model(name, 64, layers, &m);
        dcr_train_config_t tc = {1 + (int)dcr_rng_below(&rng, 2),
                                 pick(&rng, degrees, 4),
                                 pick(&rng, degrees, 4),
                                 pick(&rng, degrees, 4),
                                 pick(&rng, degrees, 3),
                                 pick(&rng, degrees, 2),
                                 0};
        if (dcr_train_config_validate(&m, &tc) != DCR_OK) continue;
        dcr_mapping_t mapping = dcr_rng_below(&rng, 2) ? DCR_MAPPING_EXTENDED : DCR_MAPPING_PAPER;
        print_message("  %s layers %d nodes %d x %d tp %d etp %d ep %d pp %d dp %d %s\n", name,
                      layers, tc.nodes, tc.gpus_per_node, tc.tp, tc.etp, tc.ep, tc.pp, tc.dp,
                      dcr_mapping_name(mapping));
        check_layout(&rng, &m, &tc, mapping);
        valid++;
    }
    assert_int_equal(valid, 32);
}

/* Tied embeddings under pipeline parallelism: the last stage's output layer
 * is one more holder of the embedding shard, never a second owner. */
static void test_tied_embedding_holders(void **state)
{
    dcr_model_config_t m;
    dcr_inventory_t *inv;
    dcr_source_layout_t *layout;
    testkit_load_model("qwen2.5-0.5b", 16, 4, &m);
    assert_int_equal(dcr_model_build_inventory(&m, &inv), DCR_OK);
    dcr_train_config_t tc = {1, 4, 2, 1, 1, 2, 0};
    assert_int_equal(dcr_megatron_build(&m, inv, &tc, DCR_MAPPING_PAPER, &layout), DCR_OK);
    int found = 0;
    for (int s = 0; s < layout->nshards; s++) {
        const dcr_source_shard_t *sh = &layout->shards[s];
        if (strncmp(sh->desc.name, "embedding.word_embeddings.weight@tp", 35)) continue;
        found++;
        assert_int_equal(sh->nholders, 2); /* dp 1: one rank on the first stage, one on the last */
        assert_true(sh->holders[0] < 2 && sh->holders[1] >= 2);
    }
    assert_int_equal(found, 2);
    assert_int_equal(dcr_inventory_find(inv, "lm_head.weight"), -1);
    dcr_source_layout_destroy(layout);
    dcr_inventory_destroy(inv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_30b_paper_items),
        cmocka_unit_test(test_extended_has_no_residual),
        cmocka_unit_test(test_invalid_layouts),
        cmocka_unit_test(test_tied_embedding_holders),
        cmocka_unit_test(test_random_layouts_match_full_conversion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
