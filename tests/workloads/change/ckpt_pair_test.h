/* Test helpers shared by the dcr diff suites (test_ckpt_diff.c,
 * test_ckpt_diff_entropy.c): a tiny Qwen3 MoE config with every tensor
 * class, a checked shell call, and a writer of an OLD/NEW checkpoint pair
 * from the scenario's synthetic weights with changes the test places
 * itself. Included by one test file each, so everything is static. */
#ifndef DCR_TEST_CKPT_PAIR_TEST_H
#define DCR_TEST_CKPT_PAIR_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "workloads/change/scenario.h"
#include "workloads/model/safetensors.h"
#include "workloads/tmp_dir.h"

/* Qwen3 MoE cut to 2 layers of hidden 64: attention, experts, router,
 * norms, embeddings. Sizes are multiples of 8. */
static const char *const qwen_cfg =
    "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
    "\"vocab_size\": 256, \"moe_intermediate_size\": 32, \"num_experts\": 4, "
    "\"num_experts_per_tok\": 2, \"tie_word_embeddings\": false}";

/* Runs the shell command fmt with up to two string arguments; fails the
 * test unless it exits 0. Arguments are test-made paths under tmp_dir. */
static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), fmt, a, b);
    assert_int_equal(system(cmd), 0);
}

/* Changes the canonical tensors t of scenario sc between OLD and NEW. */
typedef void (*pair_change_fn)(const dcr_scenario_t *sc, dcr_storage_t **t, const void *ctx);

/* Writes <tmp>/<name>/{old,new} with config.json (cfg) in OLD: OLD one
 * file of the scenario's synthetic weights (seed), NEW the same after
 * change(ctx), sharded at new_shard_bytes (0: one file). Returns the
 * scenario of OLD's config (default spec; the caller destroys it). */
static dcr_scenario_t *pair_write(const char *name, const char *cfg, uint64_t seed,
                                  size_t new_shard_bytes, pair_change_fn change, const void *ctx,
                                  char *old_dir, char *new_dir, size_t len)
{
    snprintf(old_dir, len, "%s/%s/old", tmp_dir, name);
    snprintf(new_dir, len, "%s/%s/new", tmp_dir, name);
    sh("mkdir -p '%s' '%s'", old_dir, new_dir);
    char path[700];
    snprintf(path, sizeof(path), "%s/config.json", old_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(cfg, f);
    fclose(f);
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = old_dir;
    dcr_scenario_t *sc = NULL;
    dcr_status_t st = dcr_scenario_create(&spec, &sc);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    dcr_storage_t **t = NULL;
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &t), DCR_OK);
    dcr_scenario_init_weights(sc, seed, t);
    size_t n = dcr_inventory_count(sc->inventory);
    dcr_st_entry_t *e = calloc(n, sizeof(*e));
    for (size_t i = 0; i < n; i++)
        e[i] = (dcr_st_entry_t){dcr_inventory_at(sc->inventory, i), t[i]->data};
    assert_int_equal(dcr_checkpoint_write(old_dir, e, n, 0), DCR_OK);
    change(sc, t, ctx);
    assert_int_equal(dcr_checkpoint_write(new_dir, e, n, new_shard_bytes), DCR_OK);
    free(e);
    dcr_scenario_free_tensors(t, n);
    return sc;
}

/* The canonical index of tensor `name`; fails the test when there is none. */
static size_t pair_tensor(const dcr_scenario_t *sc, const char *name)
{
    int64_t c = dcr_inventory_find(sc->inventory, name);
    if (c < 0) fail_msg("no tensor %s", name);
    return (size_t)c;
}

#endif
