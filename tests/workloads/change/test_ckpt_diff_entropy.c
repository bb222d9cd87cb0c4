/* ctest-labels: unit */
/* dcr diff's entropy bound and bit-exact NaNs. Checkpoints written by the
 * test with changes it places itself (which elements, which XOR masks), so
 * the bound's oracle is computed here from the placement: positions
 * n * H(c / n) per tensor, values -log2 of each mask's frequency among the
 * placed masks. The NaN test decodes the payloads `dcr diff
 * --keep-payloads` wrote and applies them to OLD read from its file: every
 * element must come out as NEW's bits, signalling NaNs in router tensors
 * included. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli_run.h"
#include "dcr/codec.h"
#include "workloads/change/ckpt_diff.h"
#include "ckpt_pair_test.h"

/* A placed change: element `index` of `tensor` gets NEW = OLD ^ mask, or,
 * with set, NEW = value (a chosen bit pattern such as a signalling NaN). */
typedef struct change {
    const char *tensor;
    int64_t index;
    uint32_t mask;
    bool set;
    uint32_t value;
} change_t;

static uint32_t load_word(const uint8_t *p, size_t es)
{
    uint32_t w = 0;
    memcpy(&w, p, es); /* little-endian host: the low bytes */
    return w;
}

static void store_word(uint8_t *p, size_t es, uint32_t w)
{
    memcpy(p, &w, es);
}

typedef struct placed {
    const change_t *ch;
    size_t n;
} placed_t;

static void place_changes(const dcr_scenario_t *sc, dcr_storage_t **t, const void *ctx)
{
    const placed_t *pl = ctx;
    for (size_t k = 0; k < pl->n; k++) {
        const change_t *ch = &pl->ch[k];
        size_t c = pair_tensor(sc, ch->tensor);
        size_t es = dcr_dtype_size(dcr_inventory_at(sc->inventory, c)->dtype);
        uint8_t *p = (uint8_t *)t[c]->data + (size_t)ch->index * es;
        uint32_t old = load_word(p, es);
        store_word(p, es, ch->set ? ch->value : old ^ ch->mask);
        if (load_word(p, es) == old) fail_msg("change %zu changes nothing", k);
    }
}

/* Writes <tmp>/<name>/{old,new}; returns the scenario (caller destroys). */
static dcr_scenario_t *write_pair(const char *name, const change_t *ch, size_t nch, char *old_dir,
                                  char *new_dir, size_t len)
{
    placed_t pl = {ch, nch};
    return pair_write(name, qwen_cfg, 7, 0, place_changes, &pl, old_dir, new_dir, len);
}

/* ---- the entropy bound, from first principles ---- */

/* Repeated masks: 0x1 three times, 0x3 twice, 0x7f once, spread over three
 * BF16 tensors of different sizes. */
static const change_t bound_changes[] = {
    {"model.layers.0.self_attn.q_proj.weight", 5, 0x1, false, 0},
    {"model.layers.0.self_attn.q_proj.weight", 900, 0x3, false, 0},
    {"model.layers.0.self_attn.q_proj.weight", 2001, 0x1, false, 0},
    {"model.layers.1.mlp.experts.2.down_proj.weight", 77, 0x7f, false, 0},
    {"model.layers.1.mlp.experts.2.down_proj.weight", 78, 0x1, false, 0},
    {"model.norm.weight", 3, 0x3, false, 0},
};

static double h2(double p)
{
    return p <= 0 || p >= 1 ? 0.0 : -p * log2(p) - (1 - p) * log2(1 - p);
}

static void test_entropy_bound(void **state)
{
    (void)state;
    char old_dir[512], new_dir[512], args[1200];
    size_t nch = sizeof(bound_changes) / sizeof(bound_changes[0]);
    dcr_scenario_t *sc = write_pair("bound", bound_changes, nch, old_dir, new_dir, sizeof(old_dir));
    /* Positions: q_proj 3 of 64*64, down_proj 2 of 64*32, norm 1 of 64. */
    double pos = 4096 * h2(3.0 / 4096) + 2048 * h2(2.0 / 2048) + 64 * h2(1.0 / 64);
    /* Values: 6 BF16 masks {0x1: 3, 0x3: 2, 0x7f: 1}. */
    double val = 3 * log2(6.0 / 3) + 2 * log2(6.0 / 2) + 1 * log2(6.0 / 1);
    dcr_diff_options_t opt = dcr_diff_options_default();
    opt.class_payloads = false;
    dcr_diff_result_t r;
    assert_int_equal(dcr_ckpt_diff(sc, old_dir, new_dir, &opt, &r), DCR_OK);
    dcr_scenario_destroy(sc);
    print_message("  bound: positions %.3f bits (want %.3f), values %.3f bits (want %.3f)\n",
                  r.entropy_position_bits, pos, r.entropy_value_bits, val);
    assert_true(fabs(r.entropy_position_bits - pos) < 1e-6 * pos);
    assert_true(fabs(r.entropy_value_bits - val) < 1e-9 + 1e-9 * val);
    assert_true(fabs(dcr_diff_entropy_bound_bytes(&r) - (pos + val) / 8) < 1e-6);

    snprintf(args, sizeof(args), "diff %s %s --json --no-class-payloads", old_dir, new_dir);
    json_t *j = run_json(args);
    double bound = json_real_value(json_object_get(j, "entropy_bound_bytes"));
    double ratio = json_real_value(json_object_get(j, "payload_to_bound_ratio"));
    json_int_t payload = json_integer_value(json_object_get(j, "payload_bytes"));
    assert_true(fabs(bound - (pos + val) / 8) < 1e-6);
    assert_true(payload > 0);
    assert_true(fabs(ratio - (double)payload / bound) < 1e-9 * ratio);
    json_decref(j);
}

/* One distinct mask carries no value information: the value bits are 0
 * and the bound is the positions alone. */
static void test_entropy_single_mask(void **state)
{
    (void)state;
    static const change_t same[] = {
        {"model.layers.0.self_attn.k_proj.weight", 1, 0x1, false, 0},
        {"model.layers.1.self_attn.k_proj.weight", 2, 0x1, false, 0},
    };
    char old_dir[512], new_dir[512];
    dcr_scenario_t *sc = write_pair("single", same, 2, old_dir, new_dir, sizeof(old_dir));
    dcr_diff_options_t opt = dcr_diff_options_default();
    opt.class_payloads = false;
    dcr_diff_result_t r;
    assert_int_equal(dcr_ckpt_diff(sc, old_dir, new_dir, &opt, &r), DCR_OK);
    dcr_scenario_destroy(sc);
    /* One symbol: no value information; k_proj is 32 x 64. */
    assert_true(r.entropy_value_bits == 0.0);
    double pos = 2 * 2048 * h2(1.0 / 2048);
    assert_true(fabs(r.entropy_position_bits - pos) < 1e-6 * pos);
}

/* ---- signalling NaNs through dcr diff payloads ---- */

/* BF16 signalling NaNs: exponent all ones, quiet bit (0x0040) clear,
 * payload nonzero. */
static const change_t nan_changes[] = {
    {"model.layers.0.mlp.gate.weight", 9, 0, true, 0x7f81},
    {"model.layers.1.mlp.gate.weight", 70, 0, true, 0xff95},
    {"model.layers.0.mlp.gate.weight", 10, 0, true, 0x7fc1}, /* quiet, nonzero payload */
    {"model.layers.0.self_attn.v_proj.weight", 33, 0, true, 0x7f82},
    {"model.embed_tokens.weight", 100, 0, true, 0x7f83},
    {"model.layers.1.mlp.experts.0.up_proj.weight", 4, 0x1, false, 0},
};

/* Applies every item of the payload at path to the OLD tensors it names. */
static size_t apply_payload(const char *path, dcr_checkpoint_t *old, uint8_t **applied,
                            const char *const *names, size_t nnames)
{
    static char buf[1 << 22];
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    dcr_payload_t *p = NULL;
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_status_t st = dcr_payload_decode(p, buf, len);
    if (st != DCR_OK) fail_msg("%s: %s", path, dcr_error_line(st));
    size_t records = 0;
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_payload_item_t it;
        assert_int_equal(dcr_payload_item(p, i, &it), DCR_OK);
        size_t t = 0;
        while (t < nnames && strcmp(names[t], it.name)) t++;
        if (t == nnames) fail_msg("payload item %s names no tensor of the checkpoint", it.name);
        const dcr_st_tensor_t *ot = dcr_checkpoint_find(old, it.name);
        size_t es = dcr_dtype_size(it.dtype);
        if (applied[t] == NULL) {
            applied[t] = malloc((size_t)(ot->end - ot->begin));
            memcpy(applied[t], ot->data, (size_t)(ot->end - ot->begin));
        }
        int64_t *idx = malloc(it.count * sizeof(*idx));
        uint8_t *vals = malloc(it.count * es);
        assert_int_equal(dcr_payload_item_indices(p, i, idx), DCR_OK);
        assert_int_equal(dcr_payload_item_values(p, i, vals), DCR_OK);
        for (size_t k = 0; k < it.count; k++) {
            uint8_t *dst = applied[t] + (size_t)idx[k] * es;
            uint32_t v = load_word(vals + k * es, es);
            store_word(dst, es, it.encoding == DCR_ENCODING_XOR ? load_word(dst, es) ^ v : v);
        }
        records += it.count;
        free(idx);
        free(vals);
    }
    dcr_payload_destroy(p);
    return records;
}

/* The same through `dcr payload inspect --json --records`: the records as
 * printed, applied to OLD, must give what the decoder's records gave. */
static void apply_printed(const char *path, dcr_checkpoint_t *old, uint8_t **applied,
                          const char *const *names, size_t nnames)
{
    char args[1300];
    snprintf(args, sizeof(args), "payload inspect %s --json --records", path);
    json_t *j = run_json(args);
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(j, "items"), i, it)
    {
        const char *name = json_string_value(json_object_get(it, "name"));
        size_t t = 0;
        while (t < nnames && strcmp(names[t], name)) t++;
        assert_true(t < nnames);
        const dcr_st_tensor_t *ot = dcr_checkpoint_find(old, name);
        size_t es = ot->elem_size, bytes = (size_t)(ot->end - ot->begin);
        if (applied[t] == NULL) {
            applied[t] = malloc(bytes);
            memcpy(applied[t], ot->data, bytes);
        }
        bool xor = !strcmp(json_string_value(json_object_get(it, "encoding")), "xor");
        json_t *idx = json_object_get(it, "indices"), *val = json_object_get(it, "values");
        assert_int_equal(json_array_size(idx), json_integer_value(json_object_get(it, "count")));
        for (size_t k = 0; k < json_array_size(idx); k++) {
            uint8_t *dst = applied[t] + (size_t)json_integer_value(json_array_get(idx, k)) * es;
            uint32_t v = (uint32_t)json_integer_value(json_array_get(val, k));
            store_word(dst, es, xor? load_word(dst, es) ^ v : v);
        }
    }
    json_decref(j);
}

static void check_nan_roundtrip(const char *layout)
{
    char old_dir[512], new_dir[512], keep[600], args[2048];
    size_t nch = sizeof(nan_changes) / sizeof(nan_changes[0]);
    dcr_scenario_t *sc = write_pair("nan", nan_changes, nch, old_dir, new_dir, sizeof(old_dir));
    snprintf(keep, sizeof(keep), "%s/nan/payloads%s", tmp_dir,
             strstr(layout, "paper") ? "-paper" : "");
    sh("rm -rf '%s'%s", keep, "");
    sh("mkdir -p '%s'%s", keep, "");
    snprintf(args, sizeof(args), "diff %s %s --json --no-class-payloads --keep-payloads %s %s",
             old_dir, new_dir, keep, layout);
    json_t *j = run_json(args);
    json_decref(j);

    size_t n = dcr_inventory_count(sc->inventory);
    const char **names = calloc(n, sizeof(*names));
    uint8_t **applied = calloc(n, sizeof(*applied));
    for (size_t i = 0; i < n; i++) names[i] = dcr_inventory_at(sc->inventory, i)->name;
    dcr_checkpoint_t *old = NULL, *nw = NULL;
    assert_int_equal(dcr_checkpoint_open(old_dir, &old), DCR_OK);
    assert_int_equal(dcr_checkpoint_open(new_dir, &nw), DCR_OK);
    DIR *d = opendir(keep);
    assert_non_null(d);
    struct dirent *de;
    size_t records = 0;
    char path[1200];
    uint8_t **printed = calloc(n, sizeof(*printed));
    while ((de = readdir(d)) != NULL) {
        if (!strstr(de->d_name, ".dcrp")) continue;
        snprintf(path, sizeof(path), "%s/%s", keep, de->d_name);
        records += apply_payload(path, old, applied, names, n);
        apply_printed(path, old, printed, names, n);
    }
    closedir(d);
    assert_true(records >= nch);
    for (size_t i = 0; i < n; i++) {
        assert_true((applied[i] == NULL) == (printed[i] == NULL));
        const dcr_st_tensor_t *w = dcr_checkpoint_find(nw, names[i]);
        if (printed[i]) assert_memory_equal(printed[i], applied[i], (size_t)(w->end - w->begin));
        free(printed[i]);
    }
    free(printed);
    /* Every tensor, every bit: OLD with the payloads applied is NEW. */
    for (size_t i = 0; i < n; i++) {
        const dcr_st_tensor_t *o = dcr_checkpoint_find(old, names[i]);
        const dcr_st_tensor_t *w = dcr_checkpoint_find(nw, names[i]);
        const uint8_t *got = applied[i] ? applied[i] : o->data;
        if (memcmp(got, w->data, (size_t)(w->end - w->begin)) != 0) {
            size_t es = dcr_dtype_size(w->dtype), k = 0;
            while (memcmp(got + k * es, w->data + k * es, es) == 0) k++;
            fail_msg("%s (%s): element %zu is 0x%04x after the payloads, NEW holds 0x%04x",
                     names[i], layout, k, load_word(got + k * es, es),
                     load_word(w->data + k * es, es));
        }
        free(applied[i]);
    }
    dcr_checkpoint_close(old);
    dcr_checkpoint_close(nw);
    free(names);
    free(applied);
    dcr_scenario_destroy(sc);
}

static void test_router_snan_roundtrip(void **state)
{
    (void)state;
    check_nan_roundtrip(""); /* the default, extended mapping */
    check_nan_roundtrip("--mapping paper");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entropy_bound),
        cmocka_unit_test(test_entropy_single_mask),
        cmocka_unit_test(test_router_snan_roundtrip),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
