/* ctest-labels: unit
 *
 * Delta construction against the independent oracle: the decoded records of
 * a run must be exactly the bitwise difference between the full conversions
 * (Megatron export) of the committed and the candidate shards, for random
 * layouts, both mapping classes, modes X/P/F, several consecutive refits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <cmocka.h>

#include "dcr/device.h"
#include "construct/construct-internal.h"
#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/group.h"
#include "dcr/rng.h"
#include "testkit.h"
#include "keep_sink.h"

/* ---- the oracle: canonical v and v+1 by full conversion ------------------ */

typedef struct world {
    dcr_model_config_t m;
    dcr_train_config_t tc;
    dcr_inventory_t *inv;
    dcr_source_layout_t *layout;
    dcr_storage_t **canon_v, **canon_next, **applied;
    dcr_storage_t **shards_v, **shards_next;
    size_t nc, ns;
} world_t;

static void world_open(world_t *w, dcr_rng_t *rng, const char *model, int layers,
                       dcr_train_config_t tc, dcr_mapping_t mapping, int fp8_layers)
{
    testkit_load_model(model, 64, layers, &w->m);
    w->m.fp8_layers = fp8_layers;
    w->tc = tc;
    assert_int_equal(dcr_model_build_inventory(&w->m, &w->inv), DCR_OK);
    assert_int_equal(dcr_megatron_build(&w->m, w->inv, &w->tc, mapping, &w->layout), DCR_OK);
    w->nc = dcr_inventory_count(w->inv);
    w->ns = (size_t)w->layout->nshards;
    w->canon_v = testkit_alloc_canonical(w->inv);
    w->canon_next = testkit_alloc_canonical(w->inv);
    w->applied = testkit_alloc_canonical(w->inv);
    w->shards_v = testkit_alloc_shards(w->layout);
    w->shards_next = testkit_alloc_shards(w->layout);
    testkit_fill_random(rng, w->layout, w->canon_v);
    assert_int_equal(dcr_megatron_import(&w->m, &w->tc, w->layout, w->canon_v, w->shards_v),
                     DCR_OK);
    /* Canonical v is what the full conversion makes of the shards (FP8
     * exports quantize the imported BF16 again). */
    assert_int_equal(dcr_megatron_export(&w->m, &w->tc, w->layout, w->shards_v, w->canon_v),
                     DCR_OK);
}

static void world_close(world_t *w)
{
    testkit_free(w->canon_v, w->nc);
    testkit_free(w->canon_next, w->nc);
    testkit_free(w->applied, w->nc);
    testkit_free(w->shards_v, w->ns);
    testkit_free(w->shards_next, w->ns);
    dcr_source_layout_destroy(w->layout);
    dcr_inventory_destroy(w->inv);
}

/* A training step: changes random canonical elements (random new bits,
 * sign flips of zero, NaN payload changes on plain-copy paths) and imports
 * them, so replicas and padding stay consistent. */
static void world_step(world_t *w, dcr_rng_t *rng, double rate)
{
    char *cast = testkit_cast_tensors(w->layout);
    for (size_t c = 0; c < w->nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(w->inv, c);
        size_t es = dcr_dtype_size(d->dtype);
        unsigned char *p = w->canon_next[c]->data;
        memcpy(p, w->canon_v[c]->data, w->canon_v[c]->bytes);
        for (int64_t k = 0; k < dcr_desc_numel(d); k++) {
            if (dcr_rng_uniform(rng) >= rate) continue;
            unsigned char *e = p + (size_t)k * es;
            if (dcr_rng_below(rng, 8) == 0)
                e[es - 1] ^= 0x80; /* sign flip: -0.0 vs +0.0 and NaN sign count too */
            else
                e[dcr_rng_below(rng, es)] ^= (unsigned char)(1 + dcr_rng_below(rng, 255));
            if (cast[c]) testkit_make_finite(d->dtype, e);
        }
    }
    free(cast);
    assert_int_equal(dcr_megatron_import(&w->m, &w->tc, w->layout, w->canon_next, w->shards_next),
                     DCR_OK);
    assert_int_equal(dcr_megatron_export(&w->m, &w->tc, w->layout, w->shards_next, w->canon_next),
                     DCR_OK);
}

/* Applies every decoded record to `applied` (a copy of canonical v) and
 * counts records; fails on any record outside the changed set. */
static int64_t apply_payloads(world_t *w, const keep_sink_t *k, uint64_t tau, int64_t *xor_items)
{
    for (size_t c = 0; c < w->nc; c++)
        memcpy(w->applied[c]->data, w->canon_v[c]->data, w->canon_v[c]->bytes);
    dcr_payload_t *p;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    int64_t records = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (dcr_payload_decode(p, k->items[i].data, k->items[i].len) != DCR_OK)
            fail_msg("%s", dcr_error_detail());
        assert_int_equal(dcr_payload_get_header(p)->tau, tau);
        for (size_t j = 0; j < dcr_payload_item_count(p); j++) {
            dcr_payload_item_t it;
            assert_int_equal(dcr_payload_item(p, j, &it), DCR_OK);
            int64_t c = dcr_inventory_find(w->inv, it.name);
            assert_true(c >= 0);
            size_t es = dcr_dtype_size(it.dtype);
            int64_t *idx = malloc(it.count * sizeof(int64_t));
            unsigned char *val = malloc(it.count * es);
            assert_int_equal(dcr_payload_item_indices(p, j, idx), DCR_OK);
            assert_int_equal(dcr_payload_item_values(p, j, val), DCR_OK);
            unsigned char *dst = w->applied[c]->data;
            const unsigned char *before = w->canon_v[c]->data, *after = w->canon_next[c]->data;
            for (size_t r = 0; r < it.count; r++) {
                unsigned char *e = dst + (size_t)idx[r] * es;
                if (!memcmp(before + (size_t)idx[r] * es, after + (size_t)idx[r] * es, es))
                    fail_msg("record for unchanged element %s[%lld]", it.name, (long long)idx[r]);
                for (size_t b = 0; b < es; b++)
                    e[b] = it.encoding == DCR_ENCODING_XOR ? (unsigned char)(e[b] ^ val[r * es + b])
                                                           : val[r * es + b];
            }
            records += (int64_t)it.count;
            if (it.encoding == DCR_ENCODING_XOR) (*xor_items)++;
            free(idx);
            free(val);
        }
    }
    dcr_payload_destroy(p);
    return records;
}

static int64_t changed_canonical(const world_t *w)
{
    int64_t n = 0;
    for (size_t c = 0; c < w->nc; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(w->inv, c);
        size_t es = dcr_dtype_size(d->dtype);
        for (int64_t k = 0; k < dcr_desc_numel(d); k++)
            n += memcmp((unsigned char *)w->canon_v[c]->data + k * es,
                        (unsigned char *)w->canon_next[c]->data + k * es, es) != 0;
    }
    return n;
}

/* One refit checked against the oracle; then commit and roll v forward. */
static void check_refit(world_t *w, dcr_constructor_t *con, uint64_t tau,
                        const uint8_t *xor_allowed, bool all_overwrite)
{
    keep_sink_t k = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
    dcr_payload_sink_t sink = {keep_submit, &k};
    dcr_construct_stats_t st;
    if (dcr_constructor_run(con, w->shards_next, tau, xor_allowed, all_overwrite, &sink, &st) !=
        DCR_OK)
        fail_msg("%s", dcr_error_detail());
    int64_t xor_items = 0, records = apply_payloads(w, &k, tau, &xor_items);
    /* Exactly the changed set: every changed element recorded once, nothing else. */
    assert_int_equal(records, changed_canonical(w));
    assert_int_equal(records, st.records);
    assert_int_equal(xor_items, st.xor_items);
    if (all_overwrite) assert_int_equal(xor_items, 0);
    for (size_t c = 0; c < w->nc; c++)
        if (memcmp(w->applied[c]->data, w->canon_next[c]->data, w->canon_next[c]->bytes))
            fail_msg("applied records differ from v+1 on %s", dcr_inventory_at(w->inv, c)->name);
    assert_int_equal((int64_t)k.n, st.payloads);
    keep_clear(&k);
}

/* After the commit of the run tau (records kept since run first): its
 * repair set, encoded, is the complete changed set in overwrite form (the
 * oracle: full conversions of v and v+1, as for the runs themselves), and
 * covers every run since first (all over the same candidate). */
static void check_repair_set(world_t *w, dcr_constructor_t *con, const dcr_construct_config_t *cfg,
                             uint64_t first, uint64_t tau)
{
    dcr_repair_records_t *set = NULL;
    dcr_constructor_take_repair(con, &set);
    assert_non_null(set);
    assert_int_equal(dcr_repair_records_tau(set), tau);
    assert_int_equal(dcr_repair_records_covers_from(set), first);
    keep_sink_t k = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
    dcr_payload_sink_t sink = {keep_submit, &k};
    dcr_construct_stats_t st;
    assert_int_equal(dcr_repair_records_encode(set, cfg, &sink, &st), DCR_OK);
    int64_t xor_items = 0, records = apply_payloads(w, &k, tau, &xor_items);
    assert_int_equal(xor_items, 0);
    assert_int_equal(records, changed_canonical(w));
    assert_int_equal(records, st.records);
    for (size_t c = 0; c < w->nc; c++)
        if (memcmp(w->applied[c]->data, w->canon_next[c]->data, w->canon_next[c]->bytes))
            fail_msg("repair set differs from v+1 on %s", dcr_inventory_at(w->inv, c)->name);
    keep_clear(&k);
    dcr_repair_records_destroy(set);
    dcr_constructor_take_repair(con, &set);
    assert_null(set); /* taken once */
}

static void roll_canonical(world_t *w)
{
    for (size_t c = 0; c < w->nc; c++)
        memcpy(w->canon_v[c]->data, w->canon_next[c]->data, w->canon_v[c]->bytes);
    for (size_t s = 0; s < w->ns; s++)
        memcpy(w->shards_v[s]->data, w->shards_next[s]->data, w->shards_v[s]->bytes);
}

static void roll_forward(world_t *w, dcr_constructor_t *con)
{
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    roll_canonical(w);
}

static void run_case(dcr_rng_t *rng, const char *model, int layers, dcr_train_config_t tc,
                     dcr_mapping_t mapping, dcr_construct_mode_t mode, size_t bucket_bytes,
                     int fp8_layers)
{
    world_t w = {0};
    world_open(&w, rng, model, layers, tc, mapping, fp8_layers);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.mode = mode;
    cfg.chunk_bytes = bucket_bytes / 4 + 1;
    cfg.bucket_bytes = bucket_bytes;
    cfg.shuffle = dcr_rng_below(rng, 2);
    dcr_constructor_t *con;
    assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
    uint8_t *xor_allowed = malloc(w.nc);
    for (size_t c = 0; c < w.nc; c++) xor_allowed[c] = (uint8_t)dcr_rng_below(rng, 4) != 0;
    /* Half the cases keep records (owners storing repair sets). */
    bool keep = dcr_rng_below(rng, 2);
    dcr_constructor_keep_records(con, keep);
    for (int step = 0; step < 3; step++) {
        world_step(&w, rng, step == 1 ? 0.0 : 0.02 + 0.05 * dcr_rng_uniform(rng));
        check_refit(&w, con, 10 * (uint64_t)step + 1, xor_allowed, false);
        check_refit(&w, con, 10 * (uint64_t)step + 2, xor_allowed,
                    true); /* a retry: all overwrite */
        if (!keep) {
            roll_forward(&w, con);
            continue;
        }
        assert_int_equal(dcr_constructor_commit(con), DCR_OK);
        check_repair_set(&w, con, &cfg, 10 * (uint64_t)step + 1, 10 * (uint64_t)step + 2);
        roll_canonical(&w);
    }
    free(xor_allowed);
    dcr_constructor_destroy(con);
    world_close(&w);
}

static void test_random_layouts_against_full_conversion(void **state)
{
    uint64_t seed = testkit_seed(0xc0457);
    print_message("seed 0x%llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    const char *const *names = dcr_model_builtin_names();
    int nmodels = 0;
    while (names[nmodels]) nmodels++;
    const int degrees[] = {1, 2, 4};
    int valid = 0;
    for (int tried = 0; valid < 3 * nmodels && tried < 4000; tried++) {
        const char *name = names[valid % nmodels];
        int layers = strstr(name, "nemotron") ? 6 : 1 + (int)dcr_rng_below(&rng, 2);
        dcr_model_config_t m;
        testkit_load_model(name, 64, layers, &m);
        dcr_train_config_t tc = {1 + (int)dcr_rng_below(&rng, 2),
                                 degrees[dcr_rng_below(&rng, 3)],
                                 degrees[dcr_rng_below(&rng, 3)],
                                 degrees[dcr_rng_below(&rng, 3)],
                                 degrees[dcr_rng_below(&rng, 3)],
                                 degrees[dcr_rng_below(&rng, 2)],
                                 0};
        if (dcr_train_config_validate(&m, &tc) != DCR_OK) continue;
        dcr_mapping_t mapping = dcr_rng_below(&rng, 2) ? DCR_MAPPING_EXTENDED : DCR_MAPPING_PAPER;
        dcr_construct_mode_t mode = (dcr_construct_mode_t)(valid / nmodels);
        size_t bucket = (size_t)1 << (12 + dcr_rng_below(&rng, 10));
        print_message("  %s layers %d %dx%d tp %d etp %d ep %d pp %d %s mode %s bucket %zu\n", name,
                      layers, tc.nodes, tc.gpus_per_node, tc.tp, tc.etp, tc.ep, tc.pp,
                      dcr_mapping_name(mapping), dcr_construct_mode_name(mode), bucket);
        run_case(&rng, name, layers, tc, mapping, mode, bucket,
                 (int)dcr_rng_below(&rng, 2) * layers);
        valid++;
    }
    assert_int_equal(valid, 3 * nmodels);
}

/* Commit only after a successful run; a failed sink fails the run, and its
 * detail, set on a sender thread, reaches the caller with the owner and the
 * payload it was sending. */
static dcr_status_t failing_submit(void *ctx, int owner, uint64_t id, const uint8_t *buf,
                                   size_t len)
{
    return dcr_error_set(DCR_ETRANSPORT, "sink refuses payload %llu of owner %d",
                         (unsigned long long)id, owner);
}

static void test_commit_needs_a_run_and_sink_errors_fail(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, 7);
    world_t w = {0};
    world_open(&w, &rng, "qwen2.5-0.5b", 1, (dcr_train_config_t){1, 2, 2, 1, 1, 1, 0},
               DCR_MAPPING_PAPER, 0);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    dcr_constructor_t *con;
    assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
    assert_int_equal(dcr_constructor_commit(con), DCR_EINVAL);
    world_step(&w, &rng, 0.05);
    dcr_payload_sink_t bad = {failing_submit, NULL};
    assert_int_equal(dcr_constructor_run(con, w.shards_next, 1, NULL, false, &bad, NULL),
                     DCR_ETRANSPORT);
    /* The sender's prefix and the sink's own message name the same payload. */
    int owner = -1, sink_owner = -2;
    unsigned long long id = 1, sink_id = 2;
    int end = 0;
    assert_int_equal(
        sscanf(dcr_error_detail(),
               "owner %d sending payload %llu: sink refuses payload %llu of owner %d%n", &owner,
               &id, &sink_id, &sink_owner, &end),
        4);
    assert_int_equal(dcr_error_detail()[end], '\0');
    assert_int_equal(owner, sink_owner);
    assert_int_equal(id, sink_id);
    assert_int_equal(dcr_constructor_commit(con), DCR_EINVAL);
    /* The baseline is untouched: a good run still yields exactly the v -> v+1 changes. */
    check_refit(&w, con, 2, NULL, false);
    dcr_constructor_destroy(con);
    world_close(&w);
}

/* Coverage of a repair set: a run failed by its sink emitted a prefix of
 * the committed run's records (covered); a run over another candidate (bits
 * flipped where v and v+1 agree) emitted positions the committed run does
 * not hold (not covered, nor any run before it). */
static void test_repair_set_coverage(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, testkit_seed(0x4e9a1));
    world_t w = {0};
    world_open(&w, &rng, "qwen2.5-0.5b", 1, (dcr_train_config_t){1, 2, 2, 1, 1, 1, 0},
               DCR_MAPPING_PAPER, 0);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.bucket_bytes = 4096; /* several payloads: the sink fails after the first */
    dcr_constructor_t *con;
    assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
    dcr_constructor_keep_records(con, true);
    world_step(&w, &rng, 0.05);
    dcr_payload_sink_t bad = {failing_submit, NULL};
    assert_int_equal(dcr_constructor_run(con, w.shards_next, 1, NULL, false, &bad, NULL),
                     DCR_ETRANSPORT);
    check_refit(&w, con, 2, NULL, false);
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    check_repair_set(&w, con, &cfg, 1, 2);
    roll_canonical(&w);

    world_step(&w, &rng, 0.05);
    unsigned char **saved = calloc(w.ns, sizeof(*saved));
    int flipped = 0;
    for (size_t sh = 0; sh < w.ns; sh++) {
        size_t es = dcr_dtype_size(w.layout->shards[sh].desc.dtype);
        unsigned char *a = w.shards_next[sh]->data, *b = w.shards_v[sh]->data;
        saved[sh] = malloc(w.shards_next[sh]->bytes + 1);
        memcpy(saved[sh], a, w.shards_next[sh]->bytes);
        for (size_t k = 0; (k + 1) * es <= w.shards_next[sh]->bytes; k += 37)
            if (!memcmp(a + k * es, b + k * es, es)) {
                a[k * es] ^= 1;
                flipped++;
            }
    }
    assert_true(flipped > 0);
    keep_sink_t k = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
    dcr_payload_sink_t sink = {keep_submit, &k};
    assert_int_equal(dcr_constructor_run(con, w.shards_next, 11, NULL, false, &sink, NULL), DCR_OK);
    keep_clear(&k);
    for (size_t sh = 0; sh < w.ns; sh++) { /* the true candidate again */
        memcpy(w.shards_next[sh]->data, saved[sh], w.shards_next[sh]->bytes);
        free(saved[sh]);
    }
    free(saved);
    check_refit(&w, con, 12, NULL, false);
    check_refit(&w, con, 13, NULL, true);
    assert_int_equal(dcr_constructor_commit(con), DCR_OK);
    check_repair_set(&w, con, &cfg, 12, 13);
    dcr_constructor_destroy(con);
    world_close(&w);
}

static void test_group_inproc_messages(void **state)
{
    dcr_group_t *g[3];
    int n = 0;
    assert_int_equal(dcr_group_create("inproc", 3, g, &n), DCR_OK);
    assert_int_equal(dcr_group_send(g[0], 2, 5, "ab", 2), DCR_OK);
    assert_int_equal(dcr_group_send(g[1], 2, 6, "xyz", 3), DCR_OK);
    assert_int_equal(dcr_group_send(g[0], 2, 5, "cd", 2), DCR_OK);
    dcr_group_msg_t m;
    assert_int_equal(dcr_group_recv(g[2], 6, 0, &m), DCR_OK);
    assert_int_equal(m.src, 1);
    assert_memory_equal(m.data, "xyz", 3);
    dcr_group_release(g[2], &m);
    assert_int_equal(dcr_group_recv(g[2], 5, 0, &m), DCR_OK);
    assert_memory_equal(m.data, "ab", 2); /* per-source order kept */
    dcr_group_release(g[2], &m);
    assert_int_equal(dcr_group_recv(g[2], 5, 0, &m), DCR_OK);
    assert_memory_equal(m.data, "cd", 2);
    dcr_group_release(g[2], &m);
    assert_int_equal(dcr_group_recv(g[2], 5, 10, &m), DCR_ETIMEOUT);
    assert_int_equal(dcr_group_send(g[0], 3, 5, "x", 1), DCR_EINVAL);
    for (int r = 0; r < 3; r++) dcr_group_destroy(g[r]);
}

/* The scale dependency of the FP8 export: one source change that moves a
 * block's largest magnitude changes the block's scale and with it many FP8
 * values; the records must still be exactly the canonical difference. */
static void test_fp8_scale_dependency(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, testkit_seed(0xf8));
    world_t w = {0};
    world_open(&w, &rng, "qwen2.5-7b", 1, (dcr_train_config_t){1, 2, 2, 1, 1, 1, 0},
               DCR_MAPPING_PAPER, 1);
    int64_t o = dcr_inventory_find(w.inv, "model.layers.0.self_attn.o_proj.weight");
    int64_t sc = dcr_inventory_find(w.inv, "model.layers.0.self_attn.o_proj.weight_scale_inv");
    assert_true(o >= 0 && sc >= 0);
    assert_int_equal(dcr_inventory_at(w.inv, (size_t)o)->dtype, DCR_DTYPE_FP8_E4M3);
    assert_true(w.layout->residual_owner[o] >= 0 &&
                w.layout->residual_owner[sc] == w.layout->residual_owner[o]);
    /* Weight-like values (random bits would make scales meaningless). */
    for (size_t s = 0; s < w.ns; s++) {
        const dcr_tensor_desc_t *d = &w.layout->shards[s].desc;
        for (int64_t k = 0; k < dcr_desc_numel(d); k++) {
            float v = (float)(0.02 * dcr_rng_normal(&rng));
            dcr_convert((unsigned char *)w.shards_v[s]->data + (size_t)k * dcr_dtype_size(d->dtype),
                        d->dtype, &v, DCR_DTYPE_FP32, 1);
        }
    }
    assert_int_equal(dcr_megatron_export(&w.m, &w.tc, w.layout, w.shards_v, w.canon_v), DCR_OK);
    assert_int_equal(dcr_megatron_import(&w.m, &w.tc, w.layout, w.canon_v, w.shards_v), DCR_OK);
    assert_int_equal(dcr_megatron_export(&w.m, &w.tc, w.layout, w.shards_v, w.canon_v), DCR_OK);
    dcr_construct_config_t cfg = dcr_construct_config_default();
    dcr_constructor_t *con;
    assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
    /* Double the largest BF16 element of the first shard of o_proj: its block's amax moves. */
    for (size_t s = 0; s < w.ns; s++)
        memcpy(w.shards_next[s]->data, w.shards_v[s]->data, w.shards_v[s]->bytes);
    int shard = -1;
    for (int i = 0; i < w.layout->ntasks; i++)
        if (w.layout->tasks[i].canonical == o) shard = w.layout->tasks[i].shard;
    uint16_t *x = w.shards_next[shard]->data;
    int64_t n = dcr_desc_numel(&w.layout->shards[shard].desc), best = 0;
    for (int64_t k = 0; k < n; k++)
        if (fabsf(dcr_bf16_to_f32(x[k])) > fabsf(dcr_bf16_to_f32(x[best]))) best = k;
    x[best] = dcr_f32_to_bf16(2.0f * dcr_bf16_to_f32(x[best]));
    assert_int_equal(dcr_megatron_export(&w.m, &w.tc, w.layout, w.shards_next, w.canon_next),
                     DCR_OK);
    int64_t changed = changed_canonical(&w);
    assert_true(changed > 2); /* one source change, many canonical changes */
    check_refit(&w, con, 1, NULL, false);
    dcr_constructor_destroy(con);
    world_close(&w);
}

/* ---- in-place baseline update: trackers against a dense oracle ------------ */

/* Every tracker against the dense packing of its task from shards (the
 * committed shards after a commit); with fresh_only, only the trackers the
 * last run updated in place, against the candidate. Returns how many
 * trackers were compared. */
static int check_trackers(const world_t *w, const dcr_constructor_t *con,
                          dcr_storage_t *const *shards, bool fresh_only)
{
    int checked = 0;
    for (int i = 0; i < w->layout->ntasks; i++) {
        const dcr_task_t *t = &w->layout->tasks[i];
        bool fresh = false;
        const void *tracker = dcr__constructor_tracker(con, i, &fresh);
        if (!tracker || (fresh_only && !fresh)) continue;
        size_t bytes =
            (size_t)dcr_task_numel(t) * dcr_dtype_size(w->layout->shards[t->shard].desc.dtype);
        unsigned char *dense = malloc(bytes + 1);
        dcr_task_pack(w->layout, t, shards[t->shard]->data, dense);
        if (memcmp(dense, tracker, bytes))
            fail_msg("tracker of task %d (%s) differs from the dense packing", i,
                     w->layout->shards[t->shard].desc.name);
        free(dense);
        checked++;
    }
    return checked;
}

static int count_fresh(const world_t *w, const dcr_constructor_t *con, int *tracked_p)
{
    int fresh_n = 0, tracked = 0;
    for (int i = 0; i < w->layout->ntasks; i++) {
        bool fresh = false;
        if (!dcr__constructor_tracker(con, i, &fresh)) continue;
        tracked++;
        fresh_n += fresh;
    }
    *tracked_p = tracked;
    return fresh_n;
}

/* A sink that takes `left` payloads, then refuses: an attempt cut short. */
typedef struct cut_sink {
    pthread_mutex_t lock;
    int left;
} cut_sink_t;

static dcr_status_t cut_submit(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    cut_sink_t *s = ctx;
    pthread_mutex_lock(&s->lock);
    bool refuse = s->left-- <= 0;
    pthread_mutex_unlock(&s->lock);
    return refuse ? dcr_error_set(DCR_ETRANSPORT, "cut after its payloads") : DCR_OK;
}

/* An attempt that is not committed: cut short by its sink, or a complete
 * run over another candidate (v+1 with bits flipped where v and v+1 agree). */
static void abandoned_attempt(world_t *w, dcr_rng_t *rng, dcr_constructor_t *con, uint64_t tau,
                              const uint8_t *xor_allowed)
{
    if (dcr_rng_below(rng, 2)) {
        cut_sink_t cut = {PTHREAD_MUTEX_INITIALIZER, (int)dcr_rng_below(rng, 4)};
        dcr_payload_sink_t sink = {cut_submit, &cut};
        dcr_status_t st = dcr_constructor_run(con, w->shards_next, tau, xor_allowed,
                                              dcr_rng_below(rng, 2), &sink, NULL);
        assert_true(st == DCR_OK || st == DCR_ETRANSPORT);
        return;
    }
    dcr_storage_t **other = testkit_alloc_shards(w->layout);
    for (size_t sh = 0; sh < w->ns; sh++) {
        size_t es = dcr_dtype_size(w->layout->shards[sh].desc.dtype);
        unsigned char *a = other[sh]->data;
        const unsigned char *b = w->shards_v[sh]->data;
        memcpy(a, w->shards_next[sh]->data, w->shards_next[sh]->bytes);
        for (size_t k = dcr_rng_below(rng, 7); (k + 1) * es <= other[sh]->bytes; k += 7)
            if (!memcmp(a + k * es, b + k * es, es)) a[k * es] ^= 1;
    }
    keep_sink_t k = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
    dcr_payload_sink_t sink = {keep_submit, &k};
    assert_int_equal(dcr_constructor_run(con, other, tau, xor_allowed, false, &sink, NULL), DCR_OK);
    keep_clear(&k);
    testkit_free(other, w->ns);
}

/* Random sequences of refits, attempts cut short or over another candidate,
 * all-overwrite retries and commits, with the undo log's limit none, a few
 * entries, the default share or unbounded: every run emits exactly the
 * v -> v+1 changes (the full-conversion oracle), every tracker the last
 * run updated in place holds the candidate, and after every commit every
 * tracker is the dense packing of the committed shards. */
static void test_inplace_baseline_update(void **state)
{
    uint64_t seed = testkit_seed(0x1f9ace);
    print_message("seed 0x%llx (set DCR_TEST_SEED to replay)\n", (unsigned long long)seed);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    const char *models[] = {"qwen2.5-0.5b", "qwen3-30b-a3b", "qwen2.5-7b"};
    const dcr_train_config_t tcs[] = {
        {1, 2, 2, 1, 1, 1, 0}, {1, 4, 2, 2, 2, 1, 0}, {1, 2, 1, 1, 1, 2, 0}};
    const size_t limits[] = {0, 200, 4096, SIZE_MAX / 4};
    int cases = 0, all_fresh_seen = 0;
    for (int m = 0; m < 3; m++) {
        for (int li = 0; li < 5; li++) { /* li == 4: the default share */
            world_t w = {0};
            dcr_train_config_t tc = tcs[m];
            dcr_model_config_t mc;
            testkit_load_model(models[m], 64, 2, &mc);
            if (dcr_train_config_validate(&mc, &tc) != DCR_OK) tc = tcs[0];
            world_open(&w, &rng, models[m], 2, tc, DCR_MAPPING_EXTENDED,
                       (int)dcr_rng_below(&rng, 2));
            dcr_construct_config_t cfg = dcr_construct_config_default();
            cfg.mode = dcr_rng_below(&rng, 2) ? DCR_MODE_X : DCR_MODE_P;
            cfg.bucket_bytes = (size_t)1 << (12 + dcr_rng_below(&rng, 6));
            cfg.chunk_bytes = cfg.bucket_bytes / 4 + 1;
            dcr_constructor_t *con;
            assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
            if (li < 4) dcr__constructor_set_undo_limit(con, limits[li]);
            bool keep = dcr_rng_below(&rng, 2);
            dcr_constructor_keep_records(con, keep);
            uint8_t *xor_allowed = malloc(w.nc);
            for (size_t c = 0; c < w.nc; c++) xor_allowed[c] = dcr_rng_below(&rng, 3) != 0;
            const double rates[] = {0.0, 0.004, 0.03, 0.12, 0.5};
            uint64_t tau = 1;
            for (int step = 0; step < 6; step++) {
                world_step(&w, &rng, rates[dcr_rng_below(&rng, 5)]);
                for (int a = (int)dcr_rng_below(&rng, 3); a > 0; a--)
                    abandoned_attempt(&w, &rng, con, tau++, xor_allowed);
                check_refit(&w, con, tau++, xor_allowed, false);
                if (dcr_rng_below(&rng, 2)) check_refit(&w, con, tau++, xor_allowed, true);
                check_trackers(&w, con, w.shards_next, true);
                int tracked = 0, fresh = count_fresh(&w, con, &tracked);
                assert_true(tracked > 0);
                /* No log: nothing written, so a task counts as updated only
                 * where nothing changed (it equals v and v+1 alike). */
                if (li == 0) check_trackers(&w, con, w.shards_v, true);
                if (li == 3) assert_int_equal(fresh, tracked); /* unbounded: all in place */
                all_fresh_seen += fresh == tracked;
                if (dcr_rng_below(&rng, 4) == 0) continue; /* abandoned: v stays */
                assert_int_equal(dcr_constructor_commit(con), DCR_OK);
                roll_canonical(&w);
                assert_int_equal(check_trackers(&w, con, w.shards_v, false), tracked);
                if (keep) {
                    dcr_repair_records_t *set = NULL;
                    dcr_constructor_take_repair(con, &set);
                    dcr_repair_records_destroy(set);
                }
            }
            free(xor_allowed);
            dcr_constructor_destroy(con);
            world_close(&w);
            cases++;
        }
    }
    assert_int_equal(cases, 15);
    assert_true(all_fresh_seen > 0);
}

/* The first payload of each owner's run is cut at first_bucket_bytes, the
 * rest at bucket_bytes: with one task per chunk, a one-byte first bucket
 * holds exactly the first item and a bucket larger than the shard holds
 * all the others, so every owner sends two payloads, the first of one item
 * (first_bucket_bytes == bucket_bytes: one payload, the earlier cut). */
static void test_first_bucket(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, testkit_seed(0xf1b));
    world_t w = {0};
    world_open(&w, &rng, "qwen2.5-0.5b", 1, (dcr_train_config_t){1, 2, 2, 1, 1, 1, 0},
               DCR_MAPPING_PAPER, 0);
    world_step(&w, &rng, 0.05);
    for (int same = 0; same < 2; same++) {
        dcr_construct_config_t cfg = dcr_construct_config_default();
        cfg.chunk_bytes = 1;
        cfg.bucket_bytes = (size_t)1 << 30;
        cfg.first_bucket_bytes = same ? cfg.bucket_bytes : 1;
        dcr_constructor_t *con;
        assert_int_equal(dcr_constructor_create(w.layout, &cfg, w.shards_v, &con), DCR_OK);
        keep_sink_t k = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
        dcr_payload_sink_t sink = {keep_submit, &k};
        dcr_construct_stats_t st;
        assert_int_equal(dcr_constructor_run(con, w.shards_next, 1, NULL, false, &sink, &st),
                         DCR_OK);
        int owners = w.layout->world;
        assert_int_equal(st.payloads, (int64_t)owners * (same ? 1 : 2));
        dcr_payload_t *p;
        assert_int_equal(dcr_payload_create(&p), DCR_OK);
        for (int r = 0; r < owners; r++) {
            const kept_t *first = keep_find(&k, r, 0);
            assert_non_null(first);
            assert_int_equal(dcr_payload_decode(p, first->data, first->len), DCR_OK);
            if (!same) assert_int_equal(dcr_payload_item_count(p), 1);
            if (!same) assert_non_null(keep_find(&k, r, 1));
        }
        dcr_payload_destroy(p);
        keep_clear(&k);
        dcr_constructor_destroy(con);
    }
    world_close(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_inproc_messages),
        cmocka_unit_test(test_commit_needs_a_run_and_sink_errors_fail),
        cmocka_unit_test(test_repair_set_coverage),
        cmocka_unit_test(test_random_layouts_against_full_conversion),
        cmocka_unit_test(test_fp8_scale_dependency),
        cmocka_unit_test(test_inplace_baseline_update),
        cmocka_unit_test(test_first_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
