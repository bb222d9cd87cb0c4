/* ctest-labels: unit
 *
 * The seed's testbed sweep and the capacity planner: the checkpoints behind
 * the five sizes against the seed's published bytes and Table D.1 counts,
 * the fitted calibration file, and `dcr sim plan` sweeps whose rows follow
 * the seed's traffic formulas (V_cross = (1 + N_node) V_payload on object
 * storage, V_payload on the relay tree) and never slow down with faster
 * links. Expected values come from the seed or from first principles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"

#include "reports/gnuplot.h"
#include "reports/report.h"
#include "sim/calibrate.h"
#include "sim/paper.h"
#include "sim/plan.h"
#include "sim/description.h"
#include "sim/sim.h"
#include "workloads/model/model.h"
#include "sim_test_cal.h"

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

static dcr_inventory_t *inventory_of(const char *model)
{
    dcr_model_config_t cfg;
    assert_int_equal(dcr_model_load(model, &cfg), DCR_OK);
    dcr_inventory_t *inv = NULL;
    assert_int_equal(dcr_model_build_inventory(&cfg, &inv), DCR_OK);
    return inv;
}

/* Every size's checkpoint is within 0.5% of the bytes the seed publishes. */
static void test_sizes_match_published_bytes(void **state)
{
    for (int i = 0; i < DCR_SIM_PAPER_NSIZES; i++) {
        const dcr_sim_paper_size_t *z = dcr_sim_paper_size(i);
        dcr_inventory_t *inv = inventory_of(z->model);
        double bytes = (double)dcr_inventory_bytes(inv);
        print_message("%s %s: %.1f GB (seed %.1f GB)\n", z->label, z->model, bytes / 1e9,
                      z->published_bytes / 1e9);
        assert_true(fabs(bytes / z->published_bytes - 1) < 0.005);
        assert_ptr_equal(dcr_sim_paper_size_of(z->model), z);
        dcr_inventory_destroy(inv);
    }
    assert_null(dcr_sim_paper_size(DCR_SIM_PAPER_NSIZES));
    assert_null(dcr_sim_paper_size_of("qwen2.5-0.5b"));
}

/* The 550B stand-in has the seed's Table D.1 counts: 185 residual tensors
 * (Mamba in_proj and conv1d, attention q/k/v, embedding, head) and 50,176
 * routed expert up/down tensors; the 1T stand-in doubles its layers. */
static void test_ultra_stand_in_shape(void **state)
{
    dcr_inventory_t *inv = inventory_of("paper-550b-hybrid");
    size_t residual = 0, routed = 0;
    for (size_t i = 0; i < dcr_inventory_count(inv); i++) {
        const char *n = dcr_inventory_at(inv, i)->name;
        if (ends_with(n, "q_proj.weight") || ends_with(n, "k_proj.weight") ||
            ends_with(n, "v_proj.weight") || ends_with(n, "mixer.in_proj.weight") ||
            ends_with(n, "conv1d.weight") || ends_with(n, "conv1d.bias") ||
            !strcmp(n, "backbone.embeddings.weight") || !strcmp(n, "lm_head.weight"))
            residual++;
        if (strstr(n, ".experts.") && !strstr(n, "shared_experts")) routed++;
    }
    assert_int_equal(residual, 185);
    assert_int_equal(routed, 50176);
    dcr_model_config_t ultra, one_t;
    assert_int_equal(dcr_model_load("paper-550b-hybrid", &ultra), DCR_OK);
    assert_int_equal(dcr_model_load("paper-1t-hybrid", &one_t), DCR_OK);
    assert_int_equal(one_t.layers, 2 * ultra.layers);
    dcr_inventory_destroy(inv);
}

/* The fitted calibration loads and says where its figures come from; the
 * testbed's description holds the fitted cluster figures (the calibration
 * none: one place per figure), names an assumption for each, and its
 * effective per-node rate stays within the seed's "up to 5 Gbps". */
static void test_paper_calibration_file(void **state)
{
    char path[4096];
    assert_int_equal(dcr_sim_paper_calibration_path(path, sizeof(path)), DCR_OK);
    dcr_sim_calibration_t cal;
    assert_int_equal(dcr_sim_cal_load(path, &cal), DCR_OK);
    assert_true(cal.nprovenance >= 2);
    assert_int_equal(cal.ncluster, 0);
    dcr_sim_description_t d;
    assert_int_equal(dcr_sim_description_load("paper-testbed", &d), DCR_OK);
    assert_string_equal(d.calibration, "paper-testbed");
    assert_true(d.nnotes >= 15);
    dcr_sim_cluster_t c = d.cluster;
    assert_true(c.cross_gbps > 0 && c.cross_gbps <= 5);
    assert_true(c.flow_gbps > 0 && c.flow_gbps <= 5);
    char small[8];
    assert_int_equal(dcr_sim_paper_calibration_path(small, sizeof(small)), DCR_EINVAL);
}

/* NeMo-RL's published refits as its design document gives them, and the
 * preset's stated figures (32 producers, binary tree, 264 staged payloads,
 * 64 MiB parts, the 10 Gbps S3 target). */
static void test_nemo_rl_preset(void **state)
{
    assert_true(dcr_sim_nemo_rl_latency("objstore", 0.03) == 20.234);
    assert_true(dcr_sim_nemo_rl_latency("objstore", 0.05) == 25.790);
    assert_true(dcr_sim_nemo_rl_latency("relay", 0.03) == 24.095);
    assert_true(dcr_sim_nemo_rl_latency("relay", 0.05) == 33.776);
    assert_true(dcr_sim_nemo_rl_latency("relay", 0.01) == 0);
    assert_true(dcr_sim_nemo_rl_latency(NULL, 0.03) == 0);
    dcr_sim_description_t d;
    assert_int_equal(dcr_sim_description_load("nemo-rl", &d), DCR_OK);
    dcr_sim_cluster_t c = d.cluster;
    assert_int_equal(c.train_nodes * c.train_gpus, 32);
    assert_int_equal(c.fanout, 2);
    assert_int_equal(c.staging_payloads, 32 * 8 + 8);
    assert_true(c.ref_object_mib == 64 && c.cross_gbps == 10);
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_OK);
    /* The 247.2 GB checkpoint is the seed's 120B size. */
    assert_true(fabs(dcr_sim_paper_size_of(DCR_SIM_NEMO_RL_MODEL)->published_bytes - 247.2e9) < 1);
}

/* ---- dcr sim plan ---------------------------------------------------------------- */

static dcr_sim_spec_t plan_spec(void)
{
    dcr_sim_spec_t s = dcr_sim_spec_default();
    s.scenario.model = "qwen3-30b-a3b";
    s.scenario.scale = 16;
    s.scenario.layers = 2;
    s.scenario.train = (dcr_train_config_t){2, 2, 2, 2, 1, 1, 0};
    s.chunk_bytes = 256 << 10;
    s.bucket_bytes = 1 << 20;
    s.cluster.train_nodes = 2;
    s.cluster.train_gpus = 2;
    s.cluster.rollout_gpus = 2;
    return s;
}

static dcr_sim_plan_t small_plan(void)
{
    dcr_sim_plan_t p;
    memset(&p, 0, sizeof(p));
    p.nnodes = 3;
    p.rollout_nodes[0] = 1;
    p.rollout_nodes[1] = 2;
    p.rollout_nodes[2] = 4;
    p.ngbps = 2;
    p.gbps[0] = 0.25;
    p.gbps[1] = 0.5;
    p.nrates = 1;
    p.rates[0] = 0.03;
    p.ntransports = 2;
    p.transports[0] = "objstore";
    p.transports[1] = "relay";
    return p;
}

static const dcr_sim_plan_row_t *row_at(const dcr_sim_plan_t *p, const dcr_sim_plan_row_t *rows,
                                        int t, int g, int k)
{
    return &rows[((t * p->nrates) * p->ngbps + g) * p->nnodes + k];
}

static void check_plan_rows(const dcr_sim_plan_t *p, const dcr_sim_plan_row_t *rows)
{
    for (int t = 0; t < p->ntransports; t++)
        for (int k = 0; k < p->nnodes; k++) {
            const dcr_sim_plan_row_t *slow = row_at(p, rows, t, 0, k);
            const dcr_sim_plan_row_t *fast = row_at(p, rows, t, 1, k);
            for (int g = 0; g < 2; g++) {
                const dcr_sim_plan_row_t *r = g ? fast : slow;
                assert_string_equal(r->transport, p->transports[t]);
                assert_int_equal(r->rollout_nodes, p->rollout_nodes[k]);
                assert_true(r->gbps == p->gbps[g]);
                assert_true(r->r.latency_s >= r->r.construction_lb_s);
                assert_true(r->r.latency_s >= r->r.transport_lb_s);
                assert_true(r->r.receive_lb_s > 0 && r->r.latency_s >= r->r.receive_lb_s);
                /* The seed's V_cross: each node downloads every payload once
                 * after one upload, or the payloads cross once to the root. */
                int64_t expect =
                    t == 0 ? r->r.payload_bytes * (1 + r->rollout_nodes) : r->r.payload_bytes;
                assert_int_equal(r->r.cross_bytes, expect);
                assert_int_equal(r->r.receivers, r->rollout_nodes * 2);
            }
            /* Twice the link rate never slows the refit and speeds up the reference. */
            assert_true(fast->r.latency_s <= slow->r.latency_s * (1 + 1e-9));
            assert_true(fast->r.reference_s < slow->r.reference_s);
            assert_int_equal(fast->r.payload_bytes, slow->r.payload_bytes);
        }
}

static void test_plan_sweep(void **state)
{
    dcr_sim_spec_t spec = plan_spec();
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_plan_t plan = small_plan();
    int n = dcr_sim_plan_count(&plan);
    assert_int_equal(n, 12);
    dcr_sim_plan_row_t *rows = calloc((size_t)n, sizeof(*rows));
    assert_int_equal(dcr_sim_plan_run(&spec, &cal, &plan, rows), DCR_OK);
    check_plan_rows(&plan, rows);
    /* The reference downloads the whole checkpoint on every node in
     * parallel: with an unlimited store it does not depend on the count. */
    for (int t = 0; t < 2; t++)
        assert_true(fabs(row_at(&plan, rows, t, 0, 2)->r.reference_s /
                             row_at(&plan, rows, t, 0, 0)->r.reference_s -
                         1) < 1e-9);
    free(rows);
    plan.nnodes = 0;
    assert_int_equal(dcr_sim_plan_run(&spec, &cal, &plan, NULL), DCR_EINVAL);
}

/* Transport-bound settings (a slow link, fast test costs): halving the
 * node rate slows the refit by more than a third on both transports, as
 * the seed's traffic formulas imply when transfer time dominates, so the
 * sensitivities name cross_gbps; the owners' and the rollout side's speed
 * move it by less than 5% and are left out. The break-even change rates
 * are where latency meets each reload: 0 < rate, and the refit at the
 * plan's 3% is below the reference exactly when 3% is below its rate. */
static void test_plan_sensitivity(void **state)
{
    dcr_sim_spec_t spec = plan_spec();
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_plan_t plan = small_plan();
    plan.nnodes = 1;
    plan.rollout_nodes[0] = 2;
    plan.ngbps = 1;
    plan.gbps[0] = 0.02;
    dcr_sim_plan_row_t rows[2];
    assert_int_equal(dcr_sim_plan_run(&spec, &cal, &plan, rows), DCR_OK);
    for (int t = 0; t < 2; t++) {
        const dcr_sim_plan_row_t *r = &rows[dcr_sim_plan_answer_row(&plan, t)];
        dcr_sim_plan_answer_t a;
        assert_int_equal(dcr_sim_plan_answer(&spec, &cal, &plan, t, r, true, &a), DCR_OK);
        dcr_sim_shares_t sh = dcr_sim_result_shares(&r->r);
        print_message("%s: %.3f s, transport %.0f%%, %d sensitivities, break-even %.4f / %.4f\n",
                      r->transport, r->r.latency_s, 100 * sh.transport, a.nsens,
                      a.crossover_reference, a.crossover_line_rate);
        /* Transport-bound: the busiest rollout node receives most of the time. */
        assert_true(sh.receive > 0.5 && sh.receive <= 1);
        bool cross = false;
        for (int i = 0; i < a.nsens; i++) {
            print_message("  %s: %.3f / %.3f s\n", a.sens[i].field, a.sens[i].half_s,
                          a.sens[i].double_s);
            assert_true(strcmp(a.sens[i].field, "owner_speed") &&
                        strcmp(a.sens[i].field, "rollout_speed"));
            if (strcmp(a.sens[i].field, "cross_gbps")) continue;
            cross = true;
            assert_true(a.sens[i].half_s >= r->r.latency_s * 4 / 3);
        }
        assert_true(cross);
        assert_true(a.crossover_reference > 0);
        assert_true((r->r.latency_s < a.reference_s) == (0.03 < a.crossover_reference));
        assert_true(a.line_rate_s > 0);
    }
}

static int count_lines_with(const char *path, const char *what)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, what)) n++;
    fclose(f);
    return n;
}

/* The figure's data has one gnuplot block per series and one point per
 * node count; the body plots every block in both panels; gnuplot, when
 * installed, draws it as PNG and SVG. */
static void test_plan_figure(void **state)
{
    dcr_sim_plan_t plan = small_plan();
    int n = dcr_sim_plan_count(&plan);
    dcr_sim_plan_row_t *rows = calloc((size_t)n, sizeof(*rows));
    const char *tr[] = {"objstore", "relay"};
    for (int i = 0; i < n; i++) {
        int k = i % plan.nnodes, g = (i / plan.nnodes) % plan.ngbps, t = i / (plan.nnodes * 2);
        memset(&rows[i], 0, sizeof(rows[i]));
        rows[i].rollout_nodes = plan.rollout_nodes[k];
        rows[i].gbps = plan.gbps[g];
        rows[i].rate = 0.03;
        rows[i].transport = tr[t];
        rows[i].r.latency_s = 1 + i;
        rows[i].r.speedup = 10 + i;
    }
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "plan"));
    assert_int_equal(dcr_sim_plan_write_figure(dir, "qwen3-30b-a3b", &plan, rows, NULL), DCR_OK);
    char dat[4200], body[4200];
    snprintf(dat, sizeof(dat), "%s/plan.dat", dir);
    snprintf(body, sizeof(body), "%s/plan.body.gp", dir);
    assert_int_equal(count_lines_with(dat, "# rollout_nodes"), 4);
    assert_int_equal(count_lines_with(body, "index "), 8);
    assert_int_equal(count_lines_with(body, "qwen3-30b-a3b"), 1);
    char gnuplot[4096];
    if (dcr_report_find_gnuplot(NULL, gnuplot, sizeof(gnuplot)) == DCR_OK) {
        assert_int_equal(dcr_gnuplot_write_driver(dir, "plan", 1400, 560), DCR_OK);
        assert_int_equal(dcr_gnuplot_run(gnuplot, dir, "plan.gp"), DCR_OK);
        const char *made[] = {"plan.png", "plan.svg"};
        for (int i = 0; i < 2; i++) {
            char p[4200];
            struct stat st;
            snprintf(p, sizeof(p), "%s/%s", dir, made[i]);
            assert_int_equal(stat(p, &st), 0);
            assert_true(st.st_size > 1000);
            unlink(p);
        }
        const char *more[] = {"plan.gp", "gnuplot.log"};
        for (int i = 0; i < 2; i++) {
            char p[4200];
            snprintf(p, sizeof(p), "%s/%s", dir, more[i]);
            unlink(p);
        }
    }
    unlink(dat);
    unlink(body);
    rmdir(dir);
    free(rows);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_match_published_bytes),
        cmocka_unit_test(test_ultra_stand_in_shape),
        cmocka_unit_test(test_paper_calibration_file),
        cmocka_unit_test(test_nemo_rl_preset),
        cmocka_unit_test(test_plan_sweep),
        cmocka_unit_test(test_plan_sensitivity),
        cmocka_unit_test(test_plan_figure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
