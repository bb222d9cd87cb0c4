/* ctest-labels: unit */
/* dcr diff: checkpoints written by the test (safetensors writer, synthetic
 * weights) with changes the test places itself, so the expected figures are
 * counted here from the placed changes: elements, rows, runs, experts, and
 * the constructor's records (one per changed canonical element whatever the
 * layout). Runs the library and the dcr binary. */
#include <math.h>
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
#include "workloads/change/change_profile.h"
#include "workloads/change/ckpt_diff.h"
#include "ckpt_pair_test.h"

/* A Nemotron-H hybrid beside ckpt_pair_test.h's Qwen3 MoE (Mamba with FP32
 * A_log, shared expert = dense MLP). Sizes are multiples of 8. */
static const char *const nemo_cfg =
    "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, \"num_hidden_layers\": 3, "
    "\"hybrid_override_pattern\": \"M*E\", \"num_attention_heads\": 4, "
    "\"num_key_value_heads\": 2, \"head_dim\": 16, \"mamba_num_heads\": 8, "
    "\"mamba_head_dim\": 8, \"n_groups\": 2, \"ssm_state_size\": 8, \"conv_kernel\": 4, "
    "\"moe_intermediate_size\": 32, \"moe_shared_expert_intermediate_size\": 64, "
    "\"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"vocab_size\": 256}";

/* A placed change: `count` consecutive elements from flat index `first`. */
typedef struct change {
    const char *tensor;
    const char *cls; /* the class the test expects, by name */
    int64_t first, count;
} change_t;

typedef struct placed {
    const change_t *ch;
    size_t n;
} placed_t;

static void flip_low_bits(const dcr_scenario_t *sc, dcr_storage_t **t, const void *ctx)
{
    const change_t *ch = ((const placed_t *)ctx)->ch;
    size_t nch = ((const placed_t *)ctx)->n;
    for (size_t k = 0; k < nch; k++) {
        size_t c = pair_tensor(sc, ch[k].tensor);
        size_t es = dcr_dtype_size(dcr_inventory_at(sc->inventory, c)->dtype);
        for (int64_t i = ch[k].first; i < ch[k].first + ch[k].count; i++)
            ((uint8_t *)t[c]->data)[(size_t)i * es] ^= 1; /* little-endian low bit */
    }
}

/* Writes <tmp>/<name>/{old,new}: OLD one file with config.json beside it,
 * NEW sharded, differing by the changes (low mantissa bit flipped). */
static dcr_scenario_t *write_pair(const char *name, const char *cfg, const change_t *ch, size_t nch,
                                  char *old_dir, char *new_dir, size_t len)
{
    placed_t pl = {ch, nch};
    return pair_write(name, cfg, 11, 4096, flip_low_bits, &pl, old_dir, new_dir, len);
}

static json_t *class_of(json_t *j, const char *cls)
{
    json_t *c = json_object_get(json_object_get(j, "classes"), cls);
    if (c == NULL) fail_msg("no class %s in the output", cls);
    return c;
}

static int64_t geti(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v)) fail_msg("key %s missing or not an integer", key);
    return json_integer_value(v);
}

/* Changed elements, rows and runs per class, counted from the placed
 * changes (each change is one run inside one row here), against the JSON. */
static void expect_changes(json_t *j, const change_t *ch, size_t nch)
{
    int64_t total = 0;
    for (size_t k = 0; k < nch; k++) {
        int64_t want = 0, runs = 0;
        for (size_t m = 0; m < nch; m++)
            if (!strcmp(ch[m].cls, ch[k].cls)) want += ch[m].count, runs++;
        json_t *c = class_of(j, ch[k].cls);
        assert_int_equal(geti(c, "changed_elements"), want);
        assert_int_equal(geti(c, "runs"), runs);
        assert_int_equal(geti(c, "changed_rows"), runs);
        /* Construction: one record per changed canonical element. */
        assert_int_equal(geti(c, "records"), want);
        assert_true(geti(c, "payload_bytes_x") > 0 && geti(c, "payload_bytes_p") > 0);
        total += ch[k].count;
    }
    assert_int_equal(geti(j, "changed_elements"), total);
    assert_int_equal(geti(j, "records"), total);
    assert_true(geti(j, "payload_bytes") > 0);
    json_t *classes = json_object_get(j, "classes");
    const char *key;
    json_t *value;
    json_object_foreach(classes, key, value)
    {
        bool placed = false;
        for (size_t k = 0; k < nch; k++) placed = placed || !strcmp(ch[k].cls, key);
        if (!placed) {
            assert_int_equal(geti(value, "changed_elements"), 0);
            assert_int_equal(geti(value, "payload_bytes"), 0);
        }
    }
}

static const change_t qwen_changes[] = {
    {"model.layers.0.self_attn.q_proj.weight", "attention", 64 * 3 + 5, 3}, /* row 3 */
    {"model.layers.1.self_attn.o_proj.weight", "attention", 64 * 10, 1},
    {"model.layers.1.mlp.experts.2.down_proj.weight", "experts", 32 * 7 + 1, 6},
    {"model.layers.0.mlp.experts.0.up_proj.weight", "experts", 0, 2},
    {"model.layers.0.mlp.gate.weight", "router", 64 + 9, 1},
    {"model.norm.weight", "norms", 30, 2},
    {"model.layers.1.self_attn.k_norm.weight", "norms", 3, 1},
    {"model.embed_tokens.weight", "embeddings", 64 * 200 + 60, 4},
    {"lm_head.weight", "embeddings", 64 * 255, 3},
};

static void test_diff_qwen(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[2048];
    size_t nch = sizeof(qwen_changes) / sizeof(qwen_changes[0]);
    dcr_scenario_t *sc =
        write_pair("qwen", qwen_cfg, qwen_changes, nch, old_dir, new_dir, sizeof(old_dir));

    /* Library: the expert figures (2 layers x 4 experts, 2 touched). */
    dcr_diff_options_t opt = dcr_diff_options_default();
    dcr_diff_result_t r;
    assert_int_equal(dcr_ckpt_diff(sc, old_dir, new_dir, &opt, &r), DCR_OK);
    assert_int_equal(r.classes[DCR_CLASS_EXPERTS].experts, 8);
    assert_int_equal(r.classes[DCR_CLASS_EXPERTS].experts_touched, 2);
    assert_int_equal(r.total.tensors, (int64_t)dcr_inventory_count(sc->inventory));
    assert_int_equal(r.total.elements, dcr_inventory_params(sc->inventory));
    assert_int_equal(r.extra_tensors, 0);
    assert_int_equal(r.run_x.records, r.total.changed_elements);
    dcr_scenario_destroy(sc);

    /* --profile writes the measured per-class statistics of the same diff. */
    char prof[600];
    snprintf(prof, sizeof(prof), "%s/qwen/profile.json", tmp_dir);
    snprintf(args, sizeof(args), "diff %s %s --json --profile %s", old_dir, new_dir, prof);
    json_t *j0 = run_json(args);
    json_error_t jerr;
    json_t *pj = json_load_file(prof, 0, &jerr);
    assert_non_null(pj);
    assert_string_equal(json_string_value(json_object_get(pj, "format")), "dcr-change-profile");
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(j0, "classes"), key, value)
    {
        json_t *pc = json_object_get(json_object_get(pj, "classes"), key);
        assert_non_null(pc);
        /* The command's figures are the library's, checked above against the
         * placed changes; the profile's rate is their quotient. */
        int cls = 0;
        while (cls < DCR_CLASS_COUNT && strcmp(dcr_tensor_class_name(cls), key)) cls++;
        assert_true(cls < DCR_CLASS_COUNT);
        assert_int_equal(geti(value, "changed_elements"), r.classes[cls].changed_elements);
        assert_true(json_real_value(json_object_get(pc, "change_rate")) ==
                    (double)r.classes[cls].changed_elements / (double)r.classes[cls].elements);
        static const char *const same[] = {"change_rate", "changed_row_share"};
        for (int k = 0; k < 2; k++)
            assert_true(json_real_value(json_object_get(pc, same[k])) ==
                        json_real_value(json_object_get(value, same[k])));
        double runs = (double)geti(value, "runs");
        double want_run = runs > 0 ? (double)geti(value, "changed_elements") / runs : 1.0;
        assert_true(json_real_value(json_object_get(pc, "mean_run_length")) == want_run);
    }
    assert_true(
        json_real_value(json_object_get(json_object_get(json_object_get(pj, "classes"), "experts"),
                                        "expert_share")) == 2.0 / 8.0);
    dcr_change_profile_t loaded;
    assert_int_equal(dcr_change_profile_load(prof, &loaded), DCR_OK);
    json_decref(pj);
    json_decref(j0);

    /* The command, model from OLD's config.json, in two layouts and both mappings. */
    static const char *const layouts[] = {"", "--gpus-per-node 2 --tp 2 --mapping paper",
                                          "--gpus-per-node 4 --tp 2 --ep 2 --dp 2"};
    for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
        snprintf(args, sizeof(args), "diff %s %s %s --json", old_dir, new_dir, layouts[l]);
        json_t *j = run_json(args);
        print_message("  layout '%s': %lld changed, %lld payload bytes\n", layouts[l],
                      (long long)geti(j, "changed_elements"), (long long)geti(j, "payload_bytes"));
        expect_changes(j, qwen_changes, nch);
        assert_string_equal(json_string_value(json_object_get(j, "model")), "old");
        assert_int_equal(geti(class_of(j, "experts"), "experts_touched"), 2);
        static const char *const keys[] = {"elements", "change_rate", "raw_changed_value_bytes",
                                           "payload_to_raw_ratio"};
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            assert_non_null(json_object_get(j, keys[k]));
            assert_non_null(json_object_get(class_of(j, "router"), keys[k]));
        }
        json_decref(j);
    }
}

/* Against itself: nothing changed, nothing constructed. */
static void test_diff_self(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[2048];
    dcr_scenario_t *sc = write_pair("self", qwen_cfg, NULL, 0, old_dir, new_dir, sizeof(old_dir));
    dcr_scenario_destroy(sc);
    snprintf(args, sizeof(args), "diff %s %s --json", old_dir, new_dir); /* sharded copy */
    json_t *j = run_json(args);
    assert_int_equal(geti(j, "changed_elements"), 0);
    assert_int_equal(geti(j, "records"), 0);
    assert_int_equal(geti(j, "payload_bytes"), 0);
    assert_int_equal(geti(j, "changed_rows"), 0);
    assert_true(geti(j, "elements") > 0);
    json_decref(j);
}

/* --init: the checkpoint against one synthetic step on it. The uniform step
 * changes round(R n) elements of every task, and the tasks partition the
 * canonical elements at TP 1, so the total is within half an element per
 * task of R x elements. */
static void test_diff_init(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[2048];
    dcr_scenario_t *sc = write_pair("init", qwen_cfg, NULL, 0, old_dir, new_dir, sizeof(old_dir));
    double rate = 0.01, n = (double)dcr_inventory_params(sc->inventory);
    int ntasks = sc->layout->ntasks;
    dcr_scenario_destroy(sc);
    snprintf(args, sizeof(args), "diff --init %s --change-rate 0.01 --json", old_dir);
    json_t *j = run_json(args);
    int64_t changed = geti(j, "changed_elements");
    print_message("  uniform step: %lld changed, %d tasks, want %.1f\n", (long long)changed, ntasks,
                  rate * n);
    assert_true(fabs((double)changed - rate * n) <= 0.5 * ntasks);
    assert_int_equal(geti(j, "records"), changed);
    assert_string_equal(json_string_value(json_object_get(j, "new")), "uniform step");
    json_decref(j);
    snprintf(args, sizeof(args), "diff --init %s --change-rate 0 --json", old_dir);
    j = run_json(args);
    assert_int_equal(geti(j, "changed_elements"), 0);
    assert_int_equal(geti(j, "payload_bytes"), 0);
    json_decref(j);
    snprintf(args, sizeof(args), "diff --init %s --changes adamw --lr 1e-6 --json", old_dir);
    j = run_json(args);
    assert_true(geti(j, "changed_elements") > 0);
    assert_int_equal(geti(j, "records"), geti(j, "changed_elements"));
    json_decref(j);
    snprintf(args, sizeof(args), "diff %s %s --lr 1e-3", old_dir, new_dir);
    expect_error(args, 2, "--lr needs --init");
    snprintf(args, sizeof(args), "diff --init %s --changes sgd", old_dir);
    expect_error(args, 2, "--changes sgd");
}

static const change_t nemo_changes[] = {
    {"backbone.layers.0.mixer.in_proj.weight", "mamba", 64 * 40, 5},
    {"backbone.layers.0.mixer.A_log", "mamba", 2, 2}, /* FP32 */
    {"backbone.layers.1.mixer.v_proj.weight", "attention", 64 * 3 + 1, 2},
    {"backbone.layers.2.mixer.shared_experts.up_proj.weight", "dense_mlp", 64 * 9, 7},
    {"backbone.layers.2.mixer.experts.1.down_proj.weight", "experts", 32 * 2, 1},
    {"backbone.layers.2.mixer.gate.e_score_correction_bias", "router", 0, 1}, /* FP32 */
    {"backbone.norm_f.weight", "norms", 63, 1},
};

/* The hybrid: Mamba and the FP32 tensors, the --keep-payloads files, and
 * the text table. */
static void test_diff_nemotron(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[2048], keep[600];
    size_t nch = sizeof(nemo_changes) / sizeof(nemo_changes[0]);
    dcr_scenario_t *sc =
        write_pair("nemo", nemo_cfg, nemo_changes, nch, old_dir, new_dir, sizeof(old_dir));
    dcr_scenario_destroy(sc);
    snprintf(keep, sizeof(keep), "%s/nemo/payloads", tmp_dir);
    sh("mkdir -p '%s'%s", keep, "");
    snprintf(args, sizeof(args), "diff %s %s --json --keep-payloads %s", old_dir, new_dir, keep);
    json_t *j = run_json(args);
    expect_changes(j, nemo_changes, nch);
    assert_int_equal(geti(class_of(j, "experts"), "experts"), 4);
    assert_int_equal(geti(class_of(j, "experts"), "experts_touched"), 1);
    int64_t payloads = geti(j, "payloads_x");
    json_decref(j);
    char cmd[700], out[64];
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '\\.dcrp$'", keep);
    FILE *p = popen(cmd, "r");
    assert_non_null(fgets(out, sizeof(out), p));
    pclose(p);
    assert_int_equal(atoll(out), payloads);

    static result_t r;
    snprintf(args, sizeof(args), "diff %s %s", old_dir, new_dir);
    run(&r, args);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "mamba"));
    assert_non_null(strstr(r.out, "total"));
}

static void test_diff_errors(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[2048];
    dcr_scenario_t *sc = write_pair("err", qwen_cfg, NULL, 0, old_dir, new_dir, sizeof(old_dir));
    dcr_scenario_destroy(sc);
    snprintf(args, sizeof(args), "diff %s", old_dir);
    expect_error(args, 2, "expected two checkpoints");
    /* NEW has no config.json beside it. */
    snprintf(args, sizeof(args), "diff %s %s", new_dir, old_dir);
    expect_error(args, 2, "config.json");
    /* Another model than the checkpoints hold. */
    snprintf(args, sizeof(args), "diff %s %s --model qwen2.5-0.5b", old_dir, new_dir);
    expect_error(args, 1, "model.embed_tokens.weight");
    /* --scale changes the shapes: named with the tensor. */
    snprintf(args, sizeof(args), "diff %s %s --scale 2", old_dir, new_dir);
    expect_error(args, 1, "the model expects");
}

static void test_classes(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        dcr_tensor_class_t cls;
    } cases[] = {
        {"model.layers.0.self_attn.q_proj.bias", DCR_CLASS_ATTENTION},
        {"model.layers.0.self_attn.o_proj.weight_scale_inv", DCR_CLASS_ATTENTION},
        {"model.layers.0.mlp.gate_proj.weight", DCR_CLASS_DENSE_MLP},
        {"model.layers.0.mlp.gate.weight", DCR_CLASS_ROUTER},
        {"model.layers.3.mlp.experts.17.gate_proj.weight", DCR_CLASS_EXPERTS},
        {"language_model.model.layers.0.pre_feedforward_layernorm.weight", DCR_CLASS_NORMS},
        {"model.layers.0.self_attn.q_norm.weight", DCR_CLASS_NORMS},
        {"language_model.model.embed_tokens.weight", DCR_CLASS_EMBEDDINGS},
        {"backbone.embeddings.weight", DCR_CLASS_EMBEDDINGS},
        {"backbone.layers.0.mixer.norm.weight", DCR_CLASS_MAMBA},
        {"backbone.layers.0.mixer.D", DCR_CLASS_MAMBA},
        {"backbone.layers.0.mixer.conv1d.bias", DCR_CLASS_MAMBA},
        {"backbone.layers.0.norm.weight", DCR_CLASS_NORMS},
        {"backbone.layers.1.mixer.shared_experts.down_proj.weight", DCR_CLASS_DENSE_MLP},
        {"backbone.layers.1.mixer.o_proj.weight", DCR_CLASS_ATTENTION},
        {"vision_tower.patch_embed.proj", DCR_CLASS_OTHER},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (dcr_tensor_class_of(cases[i].name) != cases[i].cls)
            fail_msg("%s: class %s", cases[i].name,
                     dcr_tensor_class_name(dcr_tensor_class_of(cases[i].name)));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classes),     cmocka_unit_test(test_diff_qwen),
        cmocka_unit_test(test_diff_self),   cmocka_unit_test(test_diff_nemotron),
        cmocka_unit_test(test_diff_errors), cmocka_unit_test(test_diff_init),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
