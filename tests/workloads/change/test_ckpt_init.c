/* ctest-labels: unit */
/* --init CKPT: canonical tensors from a checkpoint's leading blocks. The
 * test writes the checkpoint itself (values = a function of the tensor and
 * its multi-index, computed here) and checks every element of the scaled,
 * truncated model against that function; then the commands run on it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli_run.h"
#include "workloads/change/ckpt_init.h"
#include "workloads/model/safetensors.h"
#include "workloads/tmp_dir.h"

static char ckpt_dir[512];

static const char *const config =
    "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 3, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
    "\"vocab_size\": 256, \"moe_intermediate_size\": 32, \"num_experts\": 4, "
    "\"num_experts_per_tok\": 2, \"tie_word_embeddings\": false}";

/* The stored bits of element (i0, i1, i2) of tensor number t: distinct per
 * tensor and position, never NaN in BF16 (exponent bits kept low). */
static uint16_t value_at(size_t t, int64_t i0, int64_t i1, int64_t i2)
{
    uint32_t h = (uint32_t)(t * 2654435761u) ^ (uint32_t)(i0 * 40503 + i1 * 977 + i2 * 31);
    return (uint16_t)(0x3c00 | (h & 0x03ff)) ^ (uint16_t)((h >> 16) & 0x8000);
}

static int64_t dim(const dcr_tensor_desc_t *d, int k)
{
    return k < d->ndim ? d->shape[k] : 1;
}

static dcr_scenario_t *scenario(int scale, int layers)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = ckpt_dir;
    spec.scale = scale;
    spec.layers = layers;
    dcr_scenario_t *sc = NULL;
    dcr_status_t st = dcr_scenario_create(&spec, &sc);
    if (st != DCR_OK) fail_msg("%s", dcr_error_line(st));
    return sc;
}

/* The full model's checkpoint, with config.json beside it. */
static void write_checkpoint(void)
{
    snprintf(ckpt_dir, sizeof(ckpt_dir), "%s/ckpt", tmp_dir);
    char cmd[700], path[700];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", ckpt_dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/config.json", ckpt_dir);
    FILE *f = fopen(path, "w");
    fputs(config, f);
    fclose(f);
    dcr_scenario_t *sc = scenario(1, 0);
    size_t n = dcr_inventory_count(sc->inventory);
    dcr_st_entry_t *e = calloc(n, sizeof(*e));
    uint16_t **data = calloc(n, sizeof(*data));
    for (size_t t = 0; t < n; t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, t);
        assert_int_equal(d->dtype, DCR_DTYPE_BF16);
        assert_true(d->ndim <= 3);
        data[t] = malloc(dcr_desc_bytes(d));
        size_t k = 0;
        for (int64_t a = 0; a < dim(d, 0); a++)
            for (int64_t b = 0; b < dim(d, 1); b++)
                for (int64_t c = 0; c < dim(d, 2); c++) data[t][k++] = value_at(t, a, b, c);
        e[t] = (dcr_st_entry_t){d, data[t]};
    }
    assert_int_equal(dcr_checkpoint_write(ckpt_dir, e, n, 0), DCR_OK);
    for (size_t t = 0; t < n; t++) free(data[t]);
    free(data);
    free(e);
    dcr_scenario_destroy(sc);
}

/* Scale 2 and the first 2 layers: every element is the checkpoint's at the
 * same multi-index (tensor numbers from the full inventory). */
static void test_leading_blocks(void **state)
{
    (void)state;
    dcr_scenario_t *full = scenario(1, 0), *sc = scenario(2, 2);
    dcr_storage_t **t = NULL;
    size_t n = dcr_inventory_count(sc->inventory);
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &t), DCR_OK);
    assert_int_equal(dcr_ckpt_init_canonical(sc, ckpt_dir, t), DCR_OK);
    int64_t checked = 0;
    for (size_t c = 0; c < n; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, c);
        int64_t src = dcr_inventory_find(full->inventory, d->name);
        assert_true(src >= 0);
        const dcr_tensor_desc_t *fd = dcr_inventory_at(full->inventory, (size_t)src);
        for (int k = 0; k < d->ndim; k++) assert_true(d->shape[k] <= fd->shape[k]);
        const uint16_t *v = t[c]->data;
        size_t k = 0;
        for (int64_t a = 0; a < dim(d, 0); a++)
            for (int64_t b = 0; b < dim(d, 1); b++)
                for (int64_t e = 0; e < dim(d, 2); e++, checked++)
                    if (v[k++] != value_at((size_t)src, a, b, e))
                        fail_msg("%s [%lld, %lld, %lld]", d->name, (long long)a, (long long)b,
                                 (long long)e);
    }
    print_message("  %lld elements of %zu tensors checked\n", (long long)checked, n);
    assert_int_equal(checked, dcr_inventory_params(sc->inventory));
    /* The scaled model is smaller than the checkpoint (the test means something). */
    assert_true(dcr_inventory_params(sc->inventory) < dcr_inventory_params(full->inventory) / 3);
    dcr_scenario_free_tensors(t, n);
    dcr_scenario_destroy(sc);
    dcr_scenario_destroy(full);
}

static void test_refusals(void **state)
{
    (void)state;
    /* A wider model than the checkpoint: the first tensor that does not fit is named. */
    char dir[600], path[700], cmd[800];
    snprintf(dir, sizeof(dir), "%s/wide", tmp_dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_hidden_layers\": 3, "
          "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, "
          "\"vocab_size\": 512, \"moe_intermediate_size\": 32, \"num_experts\": 4, "
          "\"num_experts_per_tok\": 2, \"tie_word_embeddings\": false}",
          f);
    fclose(f);
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = dir;
    dcr_scenario_t *sc = NULL;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    dcr_storage_t **t = NULL;
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &t), DCR_OK);
    dcr_status_t st = dcr_ckpt_init_canonical(sc, ckpt_dir, t);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(dcr_error_line(st), "\"model.embed_tokens.weight\" is BF16 [256, 64]"));
    dcr_scenario_free_tensors(t, dcr_inventory_count(sc->inventory));
    dcr_scenario_destroy(sc);

    char args[1024];
    snprintf(args, sizeof(args), "construct --model %s --scale 1 --layers 1 --init %s/nope",
             ckpt_dir, tmp_dir);
    expect_error(args, 1, "nope");
    snprintf(args, sizeof(args), "construct --model qwen2.5-0.5b --scale 16 --layers 1 --init %s",
             ckpt_dir);
    expect_error(args, 1, "does not hold the model's BF16 [9496, 56]");
}

/* The commands start from the checkpoint: construct reports changes, and
 * bench refits stay bit-exact on real values. */
static void test_commands(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof(args), "construct --model %s --scale 2 --layers 2 --init %s --json",
             ckpt_dir, ckpt_dir);
    json_t *j = run_json(args);
    assert_true(json_integer_value(json_object_get(j, "changed_elements")) > 0);
    json_decref(j);
    snprintf(args, sizeof(args),
             "bench --model %s --scale 1 --layers 3 --gpus-per-node 1 --tp 1 --rollout-nodes 1 "
             "--receivers-per-node 1 --serve-tp 1 --warmup 1 --refits 2 --init %s --json",
             ckpt_dir, ckpt_dir);
    j = run_json(args);
    json_t *refits = json_object_get(j, "refits");
    assert_true(json_array_size(refits) >= 2);
    json_decref(j);
}

static int setup(void **state)
{
    if (tmp_dir_setup(state) != 0) return -1;
    write_checkpoint();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leading_blocks),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_commands),
    };
    return cmocka_run_group_tests(tests, setup, tmp_dir_teardown);
}
