/* ctest-labels: unit */
/* Change profiles: the file schema (round trip, each violation one line),
 * and replay: changes drawn with a profile on a scaled Qwen3 MoE have the
 * profile's per-class rate, row share, run length and expert share within
 * sampling error. The measured figures are counted here, bit by bit, from
 * the canonical tensors before and after; the tolerances are five standard
 * deviations of the sampling model the profile describes (rows chosen
 * independently, runs within rows). */
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
#include "workloads/tmp_dir.h"

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void test_round_trip(void **state)
{
    (void)state;
    dcr_diff_result_t r;
    memset(&r, 0, sizeof(r));
    r.classes[DCR_CLASS_EXPERTS] = (dcr_diff_figures_t){.tensors = 12,
                                                        .elements = 1000,
                                                        .changed_elements = 30,
                                                        .rows = 100,
                                                        .changed_rows = 10,
                                                        .runs = 12,
                                                        .experts = 8,
                                                        .experts_touched = 2};
    r.classes[DCR_CLASS_NORMS] = (dcr_diff_figures_t){.tensors = 3, .elements = 64, .rows = 3};
    dcr_change_profile_t p, q;
    dcr_change_profile_from_diff(&r, "m", &p);
    char path[512];
    snprintf(path, sizeof(path), "%s/p.json", tmp_dir);
    assert_int_equal(dcr_change_profile_write(&p, path, "a", "b"), DCR_OK);
    assert_int_equal(dcr_change_profile_load(path, &q), DCR_OK);
    const dcr_class_profile_t *e = &q.classes[DCR_CLASS_EXPERTS];
    assert_true(e->present);
    assert_true(fabs(e->change_rate - 0.03) < 1e-12);
    assert_true(fabs(e->row_share - 0.1) < 1e-12);
    assert_true(fabs(e->mean_run - 2.5) < 1e-12);
    assert_true(fabs(e->expert_share - 0.25) < 1e-12);
    assert_int_equal(e->elements, 1000);
    assert_true(q.classes[DCR_CLASS_NORMS].present);
    assert_true(q.classes[DCR_CLASS_NORMS].change_rate == 0.0);
    assert_false(q.classes[DCR_CLASS_ATTENTION].present);
    assert_string_equal(q.model, "m");
}

static void expect_refused(const char *leaf, const char *text, const char *needle)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, leaf);
    write_text(path, text);
    dcr_change_profile_t p;
    dcr_status_t st = dcr_change_profile_load(path, &p);
    const char *line = dcr_error_line(st);
    print_message("  %s -> %s\n", leaf, line);
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(line, leaf));
    assert_non_null(strstr(line, needle));
    assert_null(strchr(line, '\n'));
}

#define HEAD "{\"format\": \"dcr-change-profile\", \"version\": 1, "

static void test_refusals(void **state)
{
    (void)state;
    expect_refused("fmt.json", "{\"format\": \"x\", \"version\": 1, \"classes\": {}}",
                   "\"format\"");
    expect_refused("ver.json", "{\"format\": \"dcr-change-profile\", \"classes\": {}}",
                   "\"version\"");
    expect_refused("cls.json", HEAD "\"classes\": {\"mlp\": {}}}", "unknown class \"mlp\"");
    expect_refused("rate.json",
                   HEAD "\"classes\": {\"norms\": {\"change_rate\": 1.5, \"changed_row_share\": 1, "
                        "\"mean_run_length\": 1}}}",
                   "classes.norms.change_rate");
    expect_refused("rows.json",
                   HEAD "\"classes\": {\"norms\": {\"change_rate\": 0.5, \"changed_row_share\": "
                        "0.1, \"mean_run_length\": 1}}}",
                   "classes.norms.changed_row_share");
    expect_refused("run.json",
                   HEAD "\"classes\": {\"norms\": {\"change_rate\": 0.1, \"changed_row_share\": "
                        "0.5, \"mean_run_length\": 0.5}}}",
                   "classes.norms.mean_run_length");
    expect_refused("experts.json",
                   HEAD "\"classes\": {\"experts\": {\"change_rate\": 0.01, \"changed_row_share\": "
                        "0.5, \"mean_run_length\": 1, \"expert_share\": 0.25}}}",
                   "exceeds expert_share");
}

/* The replayed profile: attention clustered in runs of 3, sparse experts,
 * rare embedding rows, dense norms, an untouched router. */
static const char *const profile_text =
    HEAD "\"model\": \"test\", \"classes\": {"
         "\"attention\": {\"change_rate\": 0.02, \"changed_row_share\": 0.5, "
         "\"mean_run_length\": 3},"
         "\"experts\": {\"change_rate\": 0.01, \"changed_row_share\": 0.1, "
         "\"mean_run_length\": 2, \"expert_share\": 0.5},"
         "\"embeddings\": {\"change_rate\": 0.002, \"changed_row_share\": 0.05, "
         "\"mean_run_length\": 1},"
         "\"norms\": {\"change_rate\": 0.5, \"changed_row_share\": 1, \"mean_run_length\": 4},"
         "\"router\": {\"change_rate\": 0, \"changed_row_share\": 0, \"mean_run_length\": 1}}}";

/* What the test counts per class: elements, rows, changes, rows changed,
 * runs, experts and experts touched; and the sampling variance of the
 * changed count under the profile's model, summed per tensor: rows chosen
 * independently with probability s (R rows of c elements, fraction p of a
 * chosen row changed), elements of a row correlated over runs of mean m
 * (variance widened by 2m), and for experts the whole-expert draw. */
typedef struct counted {
    int64_t n, rows, changed, changed_rows, runs, experts, touched;
    double var, expert_mean; /* expert_mean: expected changes of the current expert if touched */
} counted_t;

static void count_tensor(const dcr_tensor_desc_t *d, const uint8_t *a, const uint8_t *b,
                         counted_t *c, bool *any_p)
{
    size_t es = dcr_dtype_size(d->dtype);
    int64_t n = dcr_desc_numel(d), cols = d->ndim >= 2 ? d->shape[d->ndim - 1] : n;
    c->n += n;
    c->rows += n / cols;
    for (int64_t r0 = 0; r0 < n; r0 += cols) {
        bool row = false, prev = false;
        for (int64_t i = r0; i < r0 + cols; i++) {
            bool diff = memcmp(a + i * (int64_t)es, b + i * (int64_t)es, es) != 0;
            if (diff) {
                c->changed++;
                row = true;
                if (!prev) c->runs++;
                *any_p = true;
            }
            prev = diff;
        }
        if (row) c->changed_rows++;
    }
}

/* Variance of one tensor's changed count given its rows are drawn (s, p, m). */
static double tensor_var(const dcr_tensor_desc_t *d, double s, double p, double m)
{
    double n = (double)dcr_desc_numel(d);
    double cols = d->ndim >= 2 ? (double)d->shape[d->ndim - 1] : n, rows = n / cols;
    return rows * s * (1 - s) * (cols * p) * (cols * p) + rows * s * cols * p * (1 - p) * 2 * m;
}

static void test_replay(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof(path), "%s/replay.json", tmp_dir);
    write_text(path, profile_text);
    dcr_change_profile_t p;
    assert_int_equal(dcr_change_profile_load(path, &p), DCR_OK);
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = "qwen3-30b-a3b";
    spec.scale = 16;
    spec.layers = 2;
    dcr_scenario_t *sc = NULL;
    assert_int_equal(dcr_scenario_create(&spec, &sc), DCR_OK);
    dcr_storage_t **before = NULL, **after = NULL, **shards = NULL;
    size_t nc = dcr_inventory_count(sc->inventory);
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &before), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_canonical(sc, &after), DCR_OK);
    assert_int_equal(dcr_scenario_alloc_shards(sc, &shards), DCR_OK);
    dcr_scenario_init_weights(sc, 5, before);
    assert_int_equal(dcr_megatron_import(&sc->model, &sc->train, sc->layout, before, shards),
                     DCR_OK);
    int64_t injected = 0;
    const char *env = getenv("DCR_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : 99;
    print_message("  seed %llu (DCR_TEST_SEED replays)\n", (unsigned long long)seed);
    assert_int_equal(dcr_change_profile_inject(sc, &p, seed, shards, after, &injected), DCR_OK);

    counted_t c[DCR_CLASS_COUNT];
    memset(c, 0, sizeof(c));
    const dcr_class_profile_t *ep = &p.classes[DCR_CLASS_EXPERTS];
    double e = ep->expert_share, es = ep->row_share / e, eq = ep->change_rate / ep->row_share;
    const char *group = NULL;
    size_t group_len = 0;
    bool touched = false;
    int64_t total = 0;
    for (size_t t = 0; t < nc; t++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(sc->inventory, t);
        dcr_tensor_class_t k = dcr_tensor_class_of(d->name);
        counted_t *m = &c[k];
        const dcr_class_profile_t *cp = &p.classes[k];
        if (k == DCR_CLASS_EXPERTS) {
            size_t len = dcr_tensor_expert_key(d->name);
            if (group == NULL || len != group_len || strncmp(group, d->name, len)) {
                if (group != NULL) {
                    m->touched += touched;
                    m->var += e * (1 - e) * m->expert_mean * m->expert_mean;
                }
                m->experts++;
                m->expert_mean = 0;
                group = d->name;
                group_len = len;
                touched = false;
            }
            m->expert_mean += (double)dcr_desc_numel(d) * es * eq;
            m->var += e * tensor_var(d, es, eq, cp->mean_run);
        } else if (cp->present && cp->change_rate > 0) {
            m->var += tensor_var(d, cp->row_share, cp->change_rate / cp->row_share, cp->mean_run);
        }
        bool any = false;
        count_tensor(d, before[t]->data, after[t]->data, m, &any);
        if (k == DCR_CLASS_EXPERTS) touched = touched || any;
    }
    c[DCR_CLASS_EXPERTS].touched += touched;
    c[DCR_CLASS_EXPERTS].var +=
        e * (1 - e) * c[DCR_CLASS_EXPERTS].expert_mean * c[DCR_CLASS_EXPERTS].expert_mean;
    for (int k = 0; k < DCR_CLASS_COUNT; k++) total += c[k].changed;
    assert_int_equal(injected, total);

    assert_int_equal(c[DCR_CLASS_ROUTER].changed, 0);
    assert_int_equal(c[DCR_CLASS_DENSE_MLP].n, 0);
    double want_all = 0, var_all = 0;
    for (int k = 0; k < DCR_CLASS_COUNT; k++) {
        const dcr_class_profile_t *cp = &p.classes[k];
        if (!cp->present || cp->change_rate == 0) continue;
        const counted_t *m = &c[k];
        double share = k == DCR_CLASS_EXPERTS ? e : 1.0;
        double want = cp->change_rate * (double)m->n, sd = sqrt(m->var);
        want_all += want;
        var_all += m->var;
        if (k == DCR_CLASS_EXPERTS) {
            double esd = sqrt((double)m->experts * e * (1 - e));
            print_message("  experts touched %lld of %lld (want %.1f +- %.1f)\n",
                          (long long)m->touched, (long long)m->experts, e * (double)m->experts,
                          5 * esd);
            assert_true(fabs((double)m->touched - e * (double)m->experts) <= 5 * esd);
        }
        double run = m->runs ? (double)m->changed / (double)m->runs : 0;
        double rows_want = cp->row_share * (double)m->rows;
        /* Rows: binomial over rows, plus the expert draw moving whole experts' rows. */
        double rows_sd =
            sqrt((double)m->rows * cp->row_share * (1 - cp->row_share / share) +
                 (k == DCR_CLASS_EXPERTS ? (double)m->experts * e * (1 - e) *
                                               pow((double)m->rows / (double)m->experts * es, 2)
                                         : 0.0));
        print_message("  %-10s changed %lld of %lld (want %.1f +- %.1f), rows %lld of %lld "
                      "(want %.1f +- %.1f), mean run %.2f (want %.2f)\n",
                      dcr_tensor_class_name(k), (long long)m->changed, (long long)m->n, want,
                      5 * sd, (long long)m->changed_rows, (long long)m->rows, rows_want,
                      5 * rows_sd, run, cp->mean_run);
        assert_true(fabs((double)m->changed - want) <= 5 * sd);
        assert_true(fabs((double)m->changed_rows - rows_want) <= 5 * rows_sd + 1);
        /* Run lengths are geometric (variance m(m - 1)); rows cut the runs
         * at their ends, which shortens the mean by a little more. */
        double run_se = sqrt(cp->mean_run * (cp->mean_run - 1) / (double)(m->runs ? m->runs : 1));
        assert_true(fabs(run - cp->mean_run) <= 5 * run_se + 0.1 * cp->mean_run);
    }

    /* The command replays the same profile: the changes it reports are the
     * rate of the profile over the same model (source = canonical at tp 1). */
    char args[1024];
    snprintf(args, sizeof(args),
             "construct --model qwen3-30b-a3b --scale 16 --layers 2 --changes profile:%s --json",
             path);
    json_t *j = run_json(args);
    int64_t reported = json_integer_value(json_object_get(j, "changed_elements"));
    print_message("  construct replay: %lld changed (this draw %lld)\n", (long long)reported,
                  (long long)total);
    assert_int_equal(json_integer_value(json_object_get(j, "injected_elements")), reported);
    assert_true(fabs((double)reported - want_all) <= 5 * sqrt(var_all));
    json_decref(j);
    /* dcr bench replays it too, every timed refit bit-exact, each refit's
     * changes within the same sampling error (one training rank: source =
     * canonical). */
    snprintf(args, sizeof(args),
             "bench --model qwen3-30b-a3b --scale 16 --layers 2 --train-nodes 1 --gpus-per-node 1 "
             "--tp 1 --rollout-nodes 1 --receivers-per-node 1 --serve-tp 1 --warmup 0 --refits 2 "
             "--changes profile:%s --json",
             path);
    j = run_json(args);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    json_t *refit;
    size_t ri;
    json_array_foreach(json_object_get(j, "refits"), ri, refit)
    {
        int64_t changed = json_integer_value(json_object_get(refit, "changed_elements"));
        print_message("  bench replay, refit %zu: %lld changed\n", ri, (long long)changed);
        assert_true(fabs((double)changed - want_all) <= 5 * sqrt(var_all));
    }
    assert_int_equal(json_array_size(json_object_get(j, "refits")), 2);
    json_decref(j);
    snprintf(args, sizeof(args), "bench --changes profile:%s --change-rate 0.1", path);
    expect_error(args, 2, "--change-rate applies to --changes uniform only");
    expect_error("construct --changes profile:/nonexistent.json", 2, "nonexistent.json");
    expect_error("construct --changes sparse", 2, "--changes sparse");

    dcr_scenario_free_tensors(before, nc);
    dcr_scenario_free_tensors(after, nc);
    dcr_scenario_free_tensors(shards, (size_t)sc->layout->nshards);
    dcr_scenario_destroy(sc);
}

/* dcr sim takes the profile's overall rate on its model: for Qwen3-30B-A3B
 * an experts-only profile at rate r gives r x expert parameters / all
 * parameters (48 x 128 x 3 x 768 x 2048 of 30,532,122,624, models.md), and a
 * profile with every class at r gives r. */
static void test_sim_rate(void **state)
{
    (void)state;
    char path[512], args[1024];
    snprintf(path, sizeof(path), "%s/sim.json", tmp_dir);
    write_text(path, HEAD "\"classes\": {\"experts\": {\"change_rate\": 0.04, "
                          "\"changed_row_share\": 0.3, \"mean_run_length\": 1.5, "
                          "\"expert_share\": 0.5}}}");
    snprintf(args, sizeof(args),
             "sim --model qwen3-30b-a3b --testbed paper --transport objstore --changes "
             "profile:%s --json",
             path);
    json_t *j = run_json(args);
    json_t *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(rows), 1);
    double got = json_real_value(json_object_get(json_array_get(rows, 0), "change_rate"));
    double want = 0.04 * (48.0 * 128 * 3 * 768 * 2048) / 30532122624.0;
    print_message("  sim rate %.15g, want %.15g\n", got, want);
    assert_true(fabs(got - want) < 1e-12);
    json_decref(j);

    dcr_change_profile_t p;
    memset(&p, 0, sizeof(p));
    for (int k = 0; k < DCR_CLASS_COUNT; k++)
        p.classes[k] = (dcr_class_profile_t){true, 0.025, 0.5, 1, 1, 0};
    dcr_model_config_t cfg;
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_load("nemotron-3-nano-30b-a3b", &cfg), DCR_OK);
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
    assert_true(fabs(dcr_change_profile_rate(&p, inv) - 0.025) < 1e-12);
    dcr_inventory_destroy(inv);
    snprintf(args, sizeof(args), "sim --model qwen3-30b-a3b --changes %s", path);
    expect_error(args, 2, "expected profile:FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_sim_rate),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
