/* dcr sim: a refit of a full-size model on a cluster, simulated with
 * SimGrid (sim/), and the simulator's validation against dcr bench. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "dcr/log.h"
#include "dcr/outpath.h"
#include "scenario_args.h"
#include "sim/calibrate.h"
#include "sim/description.h"
#include "sim/paper.h"
#include "sim/plan.h"
#include "sim/readfile.h"
#include "reports/gnuplot.h"
#include "reports/report.h"
#include "sim/platform.h"
#include "sim/sim.h"
#include "sim/sim_report.h"
#include "sim/sweep.h"
#include "sim/validate.h"
#include "workloads/change/change_profile.h"
#include "workloads/harness/interrupt.h"

enum { MAX_ROWS = 64 };

typedef struct sim_opts {
    dcr_cli_scenario_t sc;
    int64_t rollout_nodes, rollout_gpus, serve_tp, store_flows, fanout, queue, owner_queue,
        shared_cores;
    bool serve_ep, json, jsonl, validate, no_ack_rtt, full;
    const char *transport, *rates, *mode, *calibration, *platform, *write_platform, *testbed;
    const char *cluster; /* --cluster FILE|NAME */
    const char *changes; /* profile:FILE, or NULL */
    double cross, flow, local, fabric, latency, local_latency, store_gbps, store_latency,
        store_list, store_put, relay_gbps, startup_ms, get_rps, put_rps, export_gbps;
    int64_t store_prefixes;
    double ref_object_mib, chunk_mib, bucket_mib;
    /* --validate: which cases (engine, testbed; NULL both) and the testbed's id. */
    const char *validate_only;
    int64_t testbed_id;
    dcr_arg_t *args; /* to tell which flags were given */
    int nargs;
} sim_opts_t;

static bool seen(const sim_opts_t *o, const char *name)
{
    for (int i = 0; i < o->nargs; i++)
        if (!strcmp(o->args[i].name, name)) return o->args[i].seen;
    return false;
}

/* ---- configuration ------------------------------------------------------------ */

/* A flag given replaces field `field` of the description, and the echo says so. */
static void set_if(const sim_opts_t *o, const char *flag, double v, double *dst,
                   dcr_sim_description_t *d)
{
    if (!seen(o, flag)) return;
    *dst = v;
    dcr_sim_description_overridden(d, flag + 2);
}

static void set_int_if(const sim_opts_t *o, const char *flag, int64_t v, int *dst,
                       dcr_sim_description_t *d)
{
    if (!seen(o, flag)) return;
    *dst = (int)v;
    dcr_sim_description_overridden(d, flag + 2);
}

/* The description a run asks for: --cluster, else --testbed's preset,
 * else the seed's testbed (the one cluster every entry point defaults to). */
static const char *description_name(const sim_opts_t *o)
{
    if (o->cluster) return o->cluster;
    if (o->testbed && !strcmp(o->testbed, "nemo-rl")) return "nemo-rl";
    return "paper-testbed";
}

static void apply_link_flags(const sim_opts_t *o, dcr_sim_cluster_t *c, dcr_sim_description_t *d)
{
    /* A node rate carries its per-flow cap and relay-root ingress along
     * (dcr_sim_cluster_set_link_rate), as a plan's --gbps axis does. */
    if (seen(o, "--cross-gbps")) {
        dcr_sim_cluster_set_link_rate(c, o->cross);
        dcr_sim_description_overridden(d, "cross-gbps");
    }
    set_if(o, "--flow-gbps", o->flow, &c->flow_gbps, d);
    set_if(o, "--local-gbps", o->local, &c->local_gbps, d);
    set_if(o, "--fabric-gbps", o->fabric, &c->fabric_gbps, d);
    set_if(o, "--latency-ms", o->latency, &c->latency_ms, d);
    set_if(o, "--local-latency-ms", o->local_latency, &c->local_latency_ms, d);
    set_if(o, "--store-gbps", o->store_gbps, &c->store_gbps, d);
    set_if(o, "--store-latency-ms", o->store_latency, &c->store_latency_ms, d);
    set_if(o, "--store-list-ms", o->store_list, &c->store_list_ms, d);
    set_if(o, "--store-put-ms", o->store_put, &c->store_put_ms, d);
    set_if(o, "--store-get-rps", o->get_rps, &c->store_get_rps, d);
    set_if(o, "--store-put-rps", o->put_rps, &c->store_put_rps, d);
    set_if(o, "--relay-gbps", o->relay_gbps, &c->relay_gbps, d);
    set_if(o, "--startup-ms", o->startup_ms, &c->startup_ms, d);
    set_if(o, "--owner-export-gbps", o->export_gbps, &c->owner_export_gbps, d);
    set_if(o, "--ref-object-mib", o->ref_object_mib, &c->ref_object_mib, d);
}

/* The description, then a calibration's fitted cluster figures (if it
 * holds any), then the flags, each recorded in the echo. */
static dcr_status_t cluster_from(const sim_opts_t *o, const dcr_sim_calibration_t *cal,
                                 dcr_sim_description_t *d)
{
    if (o->testbed && strcmp(o->testbed, "paper") && strcmp(o->testbed, "nemo-rl"))
        return dcr_error_set(DCR_EINVAL, "--testbed %s: expected paper or nemo-rl", o->testbed);
    if (o->testbed && o->cluster)
        return dcr_error_set(DCR_EINVAL, "--testbed and --cluster: give one description");
    DCR_CHECK(dcr_sim_description_load(description_name(o), d));
    dcr_sim_cluster_t *c = &d->cluster;
    for (int i = 0; cal && i < cal->ncluster; i++) {
        DCR_CHECK(dcr_sim_cluster_set(c, cal->cluster[i].key, cal->cluster[i].value));
        char what[64];
        snprintf(what, sizeof(what), "%s (calibration)", cal->cluster[i].key);
        dcr_sim_description_overridden(d, what);
    }
    set_int_if(o, "--train-nodes", o->sc.nodes, &c->train_nodes, d);
    set_int_if(o, "--gpus-per-node", o->sc.gpus, &c->train_gpus, d);
    set_int_if(o, "--rollout-nodes", o->rollout_nodes, &c->rollout_nodes, d);
    set_int_if(o, "--rollout-gpus", o->rollout_gpus, &c->rollout_gpus, d);
    set_int_if(o, "--store-flows", o->store_flows, &c->store_flows, d);
    set_int_if(o, "--store-prefixes", o->store_prefixes, &c->store_prefixes, d);
    set_int_if(o, "--fanout", o->fanout, &c->fanout, d);
    set_int_if(o, "--queue", o->queue, &c->queue_payloads, d);
    set_int_if(o, "--owner-queue", o->owner_queue, &c->owner_queue, d);
    set_int_if(o, "--shared-cores", o->shared_cores, &c->shared_cores, d);
    apply_link_flags(o, c, d);
    if (o->no_ack_rtt) {
        c->ack_rtt = false;
        dcr_sim_description_overridden(d, "ack_rtt");
    }
    c->platform_xml = o->platform;
    DCR_CHECK(dcr_sim_cluster_validate(c));
    /* A user's platform: a regular file SimGrid can load, with links that
     * carry bytes, checked before any calibration (dcr_sim_platform_check). */
    if (o->platform) DCR_CHECK(dcr_sim_platform_check(c));
    return DCR_OK;
}

/* The testbed's training layout (sim/paper.h) where no flag sets one. */
static void testbed_layout(const sim_opts_t *o, bool moe, dcr_scenario_spec_t *spec)
{
    /* The built-in descriptions are the seed's testbed and NeMo-RL's, whose
     * layout is the seed's; a user's description states no layout. */
    if (o->cluster) return;
    if (!seen(o, "--tp")) spec->train.tp = DCR_SIM_PAPER_TP;
    if (!moe) return; /* expert parallelism needs experts */
    if (!seen(o, "--ep")) spec->train.ep = DCR_SIM_PAPER_EP;
    if (!seen(o, "--etp")) spec->train.etp = DCR_SIM_PAPER_ETP;
}

static dcr_status_t spec_from(const sim_opts_t *o, dcr_sim_spec_t *s, dcr_sim_description_t *d)
{
    *s = dcr_sim_spec_default();
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &s->scenario));
    dcr_model_config_t model;
    DCR_CHECK(
        dcr_model_load(s->scenario.model, &model)); /* a wrong name fails before any measurement */
    testbed_layout(o, model.experts > 0, &s->scenario);
    DCR_CHECK(dcr_construct_mode_parse(o->mode, &s->mode));
    DCR_CHECK(cluster_from(o, NULL, d));
    s->cluster = d->cluster;
    s->full = o->full;
    s->serve_tp = (int)o->serve_tp;
    s->serve_ep = o->serve_ep;
    s->chunk_bytes = (size_t)(o->chunk_mib * 1048576.0);
    s->bucket_bytes = (size_t)(o->bucket_mib * 1048576.0);
    return DCR_OK;
}

static dcr_status_t parse_rates(const char *text, double *rates, int *n_p)
{
    return dcr_args_parse_list("--change-rate", text, 0, 1, false, rates, MAX_ROWS / 2, n_p);
}

static dcr_status_t parse_transports(const char *text, const char **t, int *n_p)
{
    if (!strcmp(text, "both")) {
        t[0] = "objstore";
        t[1] = "relay";
        *n_p = 2;
    } else if (!strcmp(text, "objstore") || !strcmp(text, "relay")) {
        t[0] = text;
        *n_p = 1;
    } else {
        return dcr_error_set(DCR_EINVAL, "--transport %s: expected objstore, relay or both", text);
    }
    return DCR_OK;
}

/* --calibration FILE or "local" (a quick measurement of this machine, only
 * when asked), else the calibration the description names. */
static dcr_status_t load_calibration(const sim_opts_t *o, const dcr_sim_description_t *d,
                                     dcr_sim_calibration_t *cal)
{
    const char *which = o->calibration ? o->calibration : d->calibration;
    if (!strcmp(which, "local")) {
        DCR_LOG_INFO("sim: --calibration local: measuring a quick one on this machine");
        dcr_sim_cal_options_t opt = dcr_sim_cal_options_default();
        opt.quick = true;
        return dcr_sim_calibrate(&opt, cal);
    }
    if (o->calibration) return dcr_sim_cal_load(o->calibration, cal);
    char path[4096];
    DCR_CHECK(dcr_sim_description_calibration_path(d, path, sizeof(path)));
    return dcr_sim_cal_load(path, cal);
}

/* ---- modes ------------------------------------------------------------------------ */

/* Every owner pair gets a route for residual parts, so any workload runs on
 * the written platform. */
static int write_platform(const sim_opts_t *o)
{
    dcr_sim_description_t d;
    dcr_status_t st = cluster_from(o, NULL, &d);
    dcr_sim_cluster_t c = d.cluster;
    if (st == DCR_OK) st = dcr_outpath_check("--write-platform", o->write_platform);
    if (st != DCR_OK) return dcr_cli_check("sim", st);
    size_t world = (size_t)c.train_nodes * (size_t)c.train_gpus;
    uint8_t *pairs = malloc(world * world + 1);
    if (!pairs) st = dcr_error_set(DCR_ENOMEM, "--write-platform: %zu owners", world);
    if (pairs) memset(pairs, 1, world * world + 1);
    /* The output-path rule (dcr/outpath.h): written beside, renamed over a
     * regular file or a new name only. */
    dcr_outfile_t *of = NULL;
    if (st == DCR_OK) st = dcr_outfile_open("--write-platform", o->write_platform, 0, &of);
    int fd = of ? dup(dcr_outfile_fd(of)) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (st == DCR_OK && !f) {
        st = dcr_error_set(DCR_EIO, "--write-platform %s: %s", o->write_platform, strerror(errno));
        if (fd >= 0) close(fd);
    }
    if (st == DCR_OK) st = dcr_sim_platform_write(&c, pairs, f);
    if (f && fclose(f) != 0 && st == DCR_OK)
        st = dcr_error_set(DCR_EIO, "--write-platform %s: %s", o->write_platform, strerror(errno));
    if (st == DCR_OK) {
        st = dcr_outfile_commit(of);
        of = NULL;
    }
    dcr_outfile_abort(of);
    free(pairs);
    if (st != DCR_OK) return dcr_cli_fail("sim", st);
    printf("platform written to %s\n", o->write_platform);
    return 0;
}

/* One validation row: into arr with --json, else two lines of text. */
/* Why a testbed case is not held to the 25% target (docs/commands/sim.md,
 * BENCHMARKS.md "Simulator: predicted against measured"). */
static const char k_store_scope[] =
    "out of the model's scope: the store is one s3rver process on the cores every other process "
    "of the run shares; the model gives it its probed per-request costs and no CPU of its own "
    "(not held to 25%)";

static void print_validation_row(const sim_opts_t *o, json_t *arr, const char *name,
                                 const char *args, const dcr_sim_validation_row_t *row)
{
    if (o->json) {
        json_array_append_new(
            arr,
            json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                      "case", name, "bench_args", args, "measured_s", row->measured_s,
                      "predicted_s", row->predicted_s, "error", row->error, "measured_reference_s",
                      row->measured_ref_s, "predicted_reference_s", row->predicted_ref_s,
                      "measured_payload_bytes", row->measured_payload, "predicted_payload_bytes",
                      row->predicted_payload, "measured_construction_s", row->measured_construct_s,
                      "predicted_construction_end_s", row->predicted_construct_end_s,
                      "measured_construction_lb_s", row->measured_construction_lb_s,
                      "predicted_construction_lb_s", row->predicted_construction_lb_s,
                      "measured_transport_lb_s", row->measured_transport_lb_s,
                      "predicted_transport_lb_s", row->predicted_transport_lb_s,
                      "measured_finalization_s", row->measured_finalization_s,
                      "predicted_finalization_s", row->predicted_finalization_s));
        json_t *last = json_array_get(arr, json_array_size(arr) - 1);
        if (row->store_put_ms > 0)
            json_object_set_new(last, "store_ms",
                                json_pack("{s:f,s:f,s:f}", "put", row->store_put_ms, "get",
                                          row->store_get_ms, "list", row->store_list_ms));
        if (row->store_put_ms > 0) json_object_set_new(last, "scope", json_string(k_store_scope));
        if (row->store_life_s > 0)
            json_object_set_new(last, "store_process",
                                json_pack("{s:f,s:f,s:f}", "seconds", row->store_life_s,
                                          "cpu_share", row->store_cpu_share, "wait_share",
                                          row->store_wait_share));
        return;
    }
    printf("%-44s %10.3f %10.3f %+6.1f%% %9.3f %9.3f %11.0f %11.0f\n", name, row->measured_s,
           row->predicted_s, 100 * row->error, row->measured_ref_s, row->predicted_ref_s,
           row->measured_payload, row->predicted_payload);
    printf("    measured / predicted: construction LB %.3f / %.3f s, transport LB %.3f / %.3f "
           "s, finalization %.3f / %.3f s\n    dcr bench %s\n",
           row->measured_construction_lb_s, row->predicted_construction_lb_s,
           row->measured_transport_lb_s, row->predicted_transport_lb_s,
           row->measured_finalization_s, row->predicted_finalization_s, args);
    if (row->store_put_ms > 0)
        printf("    the store's probed costs per request (the simulation's): PUT %.1f ms, GET %.1f "
               "ms, LIST %.1f ms\n    %s\n",
               row->store_put_ms, row->store_get_ms, row->store_list_ms, k_store_scope);
    if (row->store_life_s > 0)
        printf("    the store process over its %.1f s in the run: on a CPU %.0f%% of the time, "
               "runnable and waiting for one %.0f%%\n",
               row->store_life_s, 100 * row->store_cpu_share, 100 * row->store_wait_share);
    fflush(stdout);
}

/* The testbed cases (sim/validate.h): run where a testbed can be built,
 * else each is reported skipped with the reason (never silently). */
static dcr_status_t validate_testbed(const sim_opts_t *o, const dcr_sim_calibration_t *cal,
                                     json_t *arr)
{
    char why[256], cli[4096];
    bool usable = dcr_sim_testbed_usable((int)o->testbed_id, why, sizeof(why));
    ssize_t n = readlink("/proc/self/exe", cli, sizeof(cli) - 1);
    if (usable && n <= 0)
        return dcr_error_set(DCR_EIO, "cannot find this executable (/proc/self/exe)");
    if (n > 0) cli[n] = '\0';
    for (int i = 0; i < DCR_SIM_TESTBED_CASES; i++) {
        dcr_bench_config_t cfg;
        const char *name;
        char args[DCR_SIM_BENCH_ARGS_MAX];
        dcr_sim_testbed_case(i, &cfg, &name);
        DCR_CHECK(dcr_sim_bench_args(&cfg, args, sizeof(args)));
        if (!usable) {
            if (o->json)
                json_array_append_new(arr, json_pack("{s:s,s:s,s:s}", "case", name, "bench_args",
                                                     args, "skipped", why));
            else
                printf("%-44s skipped: %s\n", name, why);
            continue;
        }
        dcr_sim_validation_row_t row;
        dcr_status_t st = dcr_sim_validate_testbed(cli, (int)o->testbed_id, &cfg, cal, &row);
        if (st != DCR_OK) {
            dcr_error_prefix("validation case '%s': ", name);
            return st;
        }
        char full[DCR_SIM_BENCH_ARGS_MAX + 64];
        snprintf(full, sizeof(full), "--testbed netns --testbed-id %lld %s",
                 (long long)o->testbed_id, args);
        print_validation_row(o, arr, name, full, &row);
    }
    return DCR_OK;
}

static int validate(const sim_opts_t *o, const dcr_sim_calibration_t *cal)
{
    json_t *arr = json_array();
    if (!o->json)
        printf("%-44s %10s %10s %7s %9s %9s %11s %11s\n", "case (dcr bench flags below)",
               "measured_s", "predicted_s", "error", "ref_meas", "ref_pred", "payload_meas",
               "payload_pred");
    bool engine = !o->validate_only || !strcmp(o->validate_only, "engine");
    for (int i = 0; engine && i < DCR_SIM_VALIDATION_CASES; i++) {
        dcr_bench_config_t cfg;
        const char *name;
        char args[DCR_SIM_BENCH_ARGS_MAX];
        dcr_sim_validation_case(i, &cfg, &name);
        dcr_status_t st = dcr_sim_bench_args(&cfg, args, sizeof(args));
        dcr_sim_validation_row_t row;
        if (st == DCR_OK) st = dcr_sim_validate_one(&cfg, cal, &row);
        if (st != DCR_OK) {
            json_decref(arr);
            dcr_error_prefix("validation case '%s': ", name);
            return dcr_cli_fail("sim", st);
        }
        print_validation_row(o, arr, name, args, &row);
    }
    if (!o->validate_only || !strcmp(o->validate_only, "testbed")) {
        dcr_status_t st = validate_testbed(o, cal, arr);
        if (st != DCR_OK) {
            json_decref(arr);
            return dcr_cli_fail("sim", st);
        }
    }
    if (o->json) {
        json_t *j = json_pack("{s:o,s:s}", "validation", arr, "calibration", cal->machine);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        json_decref(arr);
    }
    return 0;
}

/* The models of one run: --model, or on the paper testbed without one every
 * size of the seed's sweep. */
static int models_of(const sim_opts_t *o, const dcr_sim_spec_t *spec, const char **models)
{
    if (!o->testbed || seen(o, "--model")) {
        models[0] = spec->scenario.model;
        return 1;
    }
    if (!strcmp(o->testbed, "nemo-rl")) {
        models[0] = DCR_SIM_NEMO_RL_MODEL;
        return 1;
    }
    for (int i = 0; i < DCR_SIM_PAPER_NSIZES; i++) models[i] = dcr_sim_paper_size(i)->model;
    return DCR_SIM_PAPER_NSIZES;
}

/* --changes profile:FILE: the profile's element-weighted rate on this model
 * (the simulator models one rate; the profile's clustering is not used). */
static dcr_status_t profile_rate(const sim_opts_t *o, const char *model, double *rate_p)
{
    if (strncmp(o->changes, "profile:", 8) != 0 || seen(o, "--change-rate"))
        return dcr_error_set(DCR_EINVAL, "--changes %s: expected profile:FILE and no --change-rate",
                             o->changes);
    dcr_change_profile_t p;
    dcr_model_config_t cfg;
    dcr_inventory_t *inv = NULL;
    DCR_CHECK(dcr_change_profile_load(o->changes + 8, &p));
    DCR_CHECK(dcr_model_load(model, &cfg));
    DCR_CHECK(dcr_model_build_inventory(&cfg, &inv));
    *rate_p = dcr_change_profile_rate(&p, inv);
    dcr_inventory_destroy(inv);
    return DCR_OK;
}

/* The sweep the flags ask for; rates and transports live in the caller's
 * arrays. The paper testbed sweeps the seed's rates and both transports
 * unless told otherwise; a change profile gives one rate per model. */
static dcr_status_t sweep_of(const sim_opts_t *o, const char *const *models, int nmodels,
                             const double *model_rates, double *rates, const char **transports,
                             dcr_sim_sweep_t *sw)
{
    const char *rate_text = o->testbed && !seen(o, "--change-rate") ? "0.03,0.05" : o->rates;
    const char *transport = o->testbed && !seen(o, "--transport") ? "both" : o->transport;
    *sw =
        (dcr_sim_sweep_t){.models = models,
                          .nmodels = nmodels,
                          .transports = transports,
                          .rates = rates,
                          .model_rates = o->changes ? model_rates : NULL,
                          /* NeMo-RL's figures are printed apart; the seed's are for its testbed. */
                          .seed_figures = !(o->testbed && !strcmp(o->testbed, "nemo-rl"))};
    DCR_CHECK(parse_rates(rate_text, rates, &sw->nrates));
    return parse_transports(transport, transports, &sw->ntransports);
}

/* Progress on stderr after every row; with --jsonl (ctx: a bool) the row
 * itself on stdout, flushed, so an interrupted sweep keeps what it
 * computed. */
static void sweep_on_row(void *ctx, const dcr_sim_row_t *row, int done, int total)
{
    fprintf(stderr, "sim: %d/%d %s %s %g%%: %.2f s\n", done, total, row->model, row->transport,
            100 * row->rate, row->r.latency_s);
    if (!*(const bool *)ctx) return;
    json_t *j = dcr_sim_report_row_json(row);
    json_dumpf(j, stdout, JSON_COMPACT);
    printf("\n");
    fflush(stdout);
    json_decref(j);
}

static int simulate(const sim_opts_t *o)
{
    dcr_sim_spec_t spec;
    dcr_sim_calibration_t cal;
    const char *models[DCR_SIM_PAPER_NSIZES];
    double model_rates[DCR_SIM_PAPER_NSIZES] = {0};
    dcr_sim_row_t rows[MAX_ROWS];
    dcr_sim_description_t desc;
    int n = 0;
    /* Every flag is checked before a calibration is measured or read. */
    dcr_status_t st = spec_from(o, &spec, &desc);
    int nmodels = st == DCR_OK ? models_of(o, &spec, models) : 0;
    for (int m = 0; st == DCR_OK && m < nmodels; m++) {
        /* Model, layers and layout, as sim/workload.c will build them. */
        dcr_scenario_spec_t one = spec.scenario;
        one.model = models[m];
        one.train.nodes = spec.cluster.train_nodes;
        one.train.gpus_per_node = spec.cluster.train_gpus;
        dcr_serve_config_t serve = dcr_serve_config_default();
        serve.nodes = spec.cluster.rollout_nodes;
        serve.gpus_per_node = spec.cluster.rollout_gpus;
        serve.tp = spec.serve_tp > 0 ? spec.serve_tp : spec.cluster.rollout_gpus;
        serve.ep = spec.serve_ep;
        st = dcr_cli_scenario_validate(&one, &serve);
        if (st == DCR_OK && o->changes) st = profile_rate(o, models[m], &model_rates[m]);
    }
    double rates[MAX_ROWS];
    const char *transports[2];
    int nrates, ntrans;
    if (st == DCR_OK) st = parse_rates(o->rates, rates, &nrates);
    if (st == DCR_OK) st = parse_transports(o->transport, transports, &ntrans);
    if (st != DCR_OK) return dcr_cli_check("sim", st);
    /* A bad calibration file is bad input (exit 2), like a bad flag. */
    st = load_calibration(o, &desc, &cal);
    if (st == DCR_OK) st = cluster_from(o, &cal, &desc);
    if (st != DCR_OK) return dcr_cli_check("sim", st);
    spec.cluster = desc.cluster;
    dcr_sim_sweep_t sw;
    double sweep_rates[MAX_ROWS];
    const char *sweep_transports[2];
    if (st == DCR_OK)
        st = sweep_of(o, models, nmodels, model_rates, sweep_rates, sweep_transports, &sw);
    bool jsonl = o->jsonl;
    sw.on_row = sweep_on_row;
    sw.ctx = &jsonl;
    if (st == DCR_OK) st = dcr_sim_sweep_run(&sw, &spec, &cal, rows, MAX_ROWS, &n);
    if (st != DCR_OK) return dcr_cli_fail("sim", st);
    if (o->jsonl) return 0;
    if (o->json)
        dcr_sim_report_json(&spec, rows, n, &cal, o->testbed && !strcmp(o->testbed, "nemo-rl"),
                            &desc);
    else
        dcr_sim_report_text(&spec, rows, n, &cal,
                            o->testbed != NULL && !strcmp(o->testbed, "paper"), &desc);
    if (!o->json && o->testbed && !strcmp(o->testbed, "nemo-rl")) dcr_sim_report_nemo_rl(rows, n);
    return 0;
}

static int run(const sim_opts_t *o)
{
    if (!o->validate && (seen(o, "--validate-only") || seen(o, "--testbed-id"))) {
        fprintf(stderr, "dcr sim: --validate-only and --testbed-id need --validate\n");
        return 2;
    }
    if (o->validate_only && strcmp(o->validate_only, "engine") &&
        strcmp(o->validate_only, "testbed")) {
        fprintf(stderr, "dcr sim: --validate-only %s: expected engine or testbed\n",
                o->validate_only);
        return 2;
    }
    if (o->jsonl && (o->json || o->validate || o->write_platform)) {
        fprintf(stderr, "dcr sim: --jsonl streams a sweep's rows: not with --json, --validate or "
                        "--write-platform\n");
        return 2;
    }
    if (o->write_platform) return write_platform(o);
    if (!o->validate) return simulate(o);
    /* The engine cases run dcr bench on this machine (their own shared-core
     * clusters, sim/validate.h): asking for a validation is asking about this
     * machine, so its stage costs are measured unless a file is given. */
    dcr_sim_calibration_t cal;
    dcr_sim_description_t desc;
    dcr_status_t st = cluster_from(o, NULL, &desc);
    if (st != DCR_OK) return dcr_cli_check("sim", st);
    sim_opts_t local = *o;
    if (!local.calibration) local.calibration = "local";
    st = load_calibration(&local, &desc, &cal);
    if (st != DCR_OK) return dcr_cli_check("sim", st);
    return validate(o, &cal);
}

/* ---- dcr sim plan ------------------------------------------------------------------ */

typedef struct plan_opts {
    sim_opts_t sim; /* model, layout, calibration, the description and its overrides */
    const char *nodes, *gbps, *out;
    bool no_sensitivity, no_crossover, jsonl;
} plan_opts_t;

/* The axes; without --gbps the description's own node rate. */
static dcr_status_t plan_axes(const plan_opts_t *p, const dcr_sim_cluster_t *c,
                              dcr_sim_plan_t *plan)
{
    double v[DCR_SIM_PLAN_MAX];
    memset(plan, 0, sizeof(*plan));
    DCR_CHECK(dcr_args_parse_list("--rollout-nodes", p->nodes, 1, 4096, true, v, DCR_SIM_PLAN_MAX,
                                  &plan->nnodes));
    for (int i = 0; i < plan->nnodes; i++) plan->rollout_nodes[i] = (int)v[i];
    if (p->gbps) {
        DCR_CHECK(dcr_args_parse_list("--gbps", p->gbps, 1e-3, 1e6, false, plan->gbps,
                                      DCR_SIM_PLAN_MAX, &plan->ngbps));
    } else {
        if (!(c->cross_gbps > 0))
            return dcr_error_set(DCR_EINVAL, "sim plan: the description's cross_gbps is "
                                             "unlimited; give --gbps");
        plan->gbps[0] = c->cross_gbps;
        plan->ngbps = 1;
    }
    DCR_CHECK(dcr_args_parse_list("--change-rate", p->sim.rates, 0, 1, false, plan->rates,
                                  DCR_SIM_PLAN_MAX, &plan->nrates));
    return parse_transports(p->sim.transport, plan->transports, &plan->ntransports);
}

/* The figure: data and body from sim/plan.c, the PNG/SVG driver and the
 * gnuplot run from reports/gnuplot.h. */
static dcr_status_t plan_figure(const char *dir, const char *model, const dcr_sim_plan_t *plan,
                                const dcr_sim_plan_row_t *rows,
                                const dcr_sim_plan_answer_t *answers)
{
    char gnuplot[4096];
    DCR_CHECK(dcr_report_find_gnuplot(NULL, gnuplot, sizeof(gnuplot)));
    /* Staged and moved in whole (dcr/outpath.h): a failed plan leaves no
     * partial figure or .dat file in DIR. */
    dcr_outdir_t *out = NULL;
    DCR_CHECK(dcr_outdir_open("-o", dir, &out));
    const char *stage = dcr_outdir_stage(out);
    dcr_interrupt_cleanup_add(stage);
    dcr_status_t st = dcr_sim_plan_write_figure(stage, model, plan, rows, answers);
    if (st == DCR_OK) st = dcr_gnuplot_write_driver(stage, "plan", 1400, 560);
    if (st == DCR_OK) st = dcr_gnuplot_run(gnuplot, stage, "plan.gp");
    dcr_interrupt_cleanup_remove(stage);
    if (st != DCR_OK) {
        st = dcr_gnuplot_keep_log(st, stage, dir);
        dcr_outdir_abort(out);
        return st;
    }
    dcr_gnuplot_drop_log(stage);
    return dcr_outdir_commit(out);
}

/* Progress on stderr after every row; with --jsonl the row itself on
 * stdout, flushed, so an interrupted sweep keeps what it computed. */
typedef struct plan_progress {
    const char *model;
    bool jsonl;
} plan_progress_t;

static void plan_on_row(void *ctx, const dcr_sim_plan_row_t *row, int done, int total)
{
    const plan_progress_t *pp = ctx;
    fprintf(stderr, "sim plan: %d/%d %s %d nodes %g Gbps %g%%: %.2f s\n", done, total,
            row->transport, row->rollout_nodes, row->gbps, 100 * row->rate, row->r.latency_s);
    if (!pp->jsonl) return;
    json_t *j = dcr_sim_plan_row_json(pp->model, row);
    json_dumpf(j, stdout, JSON_COMPACT);
    printf("\n");
    fflush(stdout);
    json_decref(j);
}

static dcr_status_t plan_answers(const plan_opts_t *p, const dcr_sim_spec_t *spec,
                                 const dcr_sim_calibration_t *cal, const dcr_sim_plan_t *plan,
                                 const dcr_sim_plan_row_t *rows, dcr_sim_plan_answer_t *answers)
{
    for (int t = 0; t < plan->ntransports; t++) {
        fprintf(stderr, "sim plan: %s: break-even change rates%s\n", plan->transports[t],
                p->no_sensitivity ? "" : " and sensitivities");
        DCR_CHECK(dcr_sim_plan_answer(spec, cal, plan, t, &rows[dcr_sim_plan_answer_row(plan, t)],
                                      !p->no_sensitivity, &answers[t]));
    }
    return DCR_OK;
}

static int plan_run(plan_opts_t *p)
{
    sim_opts_t *o = &p->sim;
    dcr_sim_plan_t plan;
    dcr_sim_spec_t spec;
    dcr_sim_calibration_t cal;
    dcr_sim_description_t desc;
    dcr_sim_plan_answer_t answers[2];
    dcr_sim_plan_row_t *rows = NULL;
    char gnuplot[4096];
    memset(answers, 0, sizeof(answers));
    /* The description's node count is the axis' first (the grid sets each). */
    double first[DCR_SIM_PLAN_MAX];
    int nfirst = 0;
    dcr_status_t st = dcr_args_parse_list("--rollout-nodes", p->nodes, 1, 4096, true, first,
                                          DCR_SIM_PLAN_MAX, &nfirst);
    o->rollout_nodes = st == DCR_OK ? (int64_t)first[0] : 1;
    if (st == DCR_OK) st = spec_from(o, &spec, &desc);
    if (st == DCR_OK) st = plan_axes(p, &spec.cluster, &plan);
    if (st == DCR_OK && p->out) st = dcr_outdir_check("-o", p->out);
    if (st == DCR_OK && p->jsonl && o->json)
        st = dcr_error_set(DCR_EINVAL, "sim plan: --json and --jsonl: give one");
    if (st != DCR_OK) return dcr_cli_check("sim plan", st);
    if (p->out) st = dcr_report_find_gnuplot(NULL, gnuplot, sizeof(gnuplot));
    if (st == DCR_OK) st = load_calibration(o, &desc, &cal);
    if (st == DCR_OK) st = cluster_from(o, &cal, &desc);
    if (st != DCR_OK) return dcr_cli_check("sim plan", st);
    /* The echo shows the grid's first point and names what the grid sweeps. */
    if (plan.nnodes > 1) dcr_sim_description_overridden(&desc, "rollout_nodes (swept)");
    if (p->gbps) {
        dcr_sim_cluster_set_link_rate(&desc.cluster, plan.gbps[0]);
        dcr_sim_description_overridden(&desc, plan.ngbps > 1 ? "cross_gbps (swept; flow and "
                                                               "relay rates keep their ratio)"
                                                             : "cross_gbps (--gbps; flow and "
                                                               "relay rates keep their ratio)");
    }
    spec.cluster = desc.cluster;
    if (st == DCR_OK) {
        rows = calloc((size_t)dcr_sim_plan_count(&plan), sizeof(*rows));
        if (!rows) st = dcr_error_set(DCR_ENOMEM, "sim plan: rows");
    }
    plan_progress_t pp = {spec.scenario.model, p->jsonl};
    plan.on_row = plan_on_row;
    plan.ctx = &pp;
    if (st == DCR_OK) st = dcr_sim_plan_run(&spec, &cal, &plan, rows);
    int nanswers = p->no_crossover ? 0 : plan.ntransports;
    if (st == DCR_OK && nanswers) st = plan_answers(p, &spec, &cal, &plan, rows, answers);
    if (st == DCR_OK && p->out)
        st = plan_figure(p->out, spec.scenario.model, &plan, rows, nanswers ? answers : NULL);
    int n = dcr_sim_plan_count(&plan);
    if (st == DCR_OK && o->json)
        dcr_sim_plan_report_json(&spec, &cal, rows, n, p->out, answers, nanswers, &desc);
    else if (st == DCR_OK && !p->jsonl)
        dcr_sim_plan_report_text(&spec, &cal, rows, n, answers, nanswers, &desc);
    if (st == DCR_OK && p->out && !o->json && !p->jsonl)
        printf("\nfigure: %s/plan.png and %s/plan.svg (redraw: cd %s && gnuplot plan.gp)\n", p->out,
               p->out, p->out);
    free(rows);
    if (st != DCR_OK) return dcr_cli_fail("sim plan", st);
    return 0;
}

static void model_args(sim_opts_t *o, dcr_arg_t *a);
enum { NPLAN_ARGS = 14, NMODEL_ARGS = 26 };

static int dcr_cmd_sim_plan(int argc, char **argv)
{
    plan_opts_t p;
    memset(&p, 0, sizeof(p));
    sim_opts_t *o = &p.sim;
    o->transport = "both";
    o->rates = "0.03,0.05";
    o->mode = "X";
    p.nodes = "2,4,8,16,32";
    dcr_cli_scenario_init(&o->sc, "nemotron-3-nano-30b-a3b", 1, 0);
    const dcr_arg_t own[NPLAN_ARGS] = {
        {"--cluster", DCR_ARG_STRING, &o->cluster, 0, 0,
         "cluster description: a preset name (sim/clusters/NAME.json) or a JSON file (default "
         "paper-testbed)",
         false},
        {"--rollout-nodes", DCR_ARG_STRING, &p.nodes, 0, 0,
         "rollout node counts, comma separated (default 2,4,8,16,32)", false},
        {"--rollout-gpus", DCR_ARG_INT, &o->rollout_gpus, 1, 64,
         "receivers (GPUs) per rollout node (default: the description's)", false},
        {"--gbps", DCR_ARG_STRING, &p.gbps, 0, 0,
         "cross-cluster Gbps per node, comma separated (default: the description's cross_gbps)",
         false},
        {"--change-rate", DCR_ARG_STRING, &o->rates, 0, 0,
         "element change rates, comma separated (default 0.03,0.05)", false},
        {"--transport", DCR_ARG_STRING, &o->transport, 0, 0,
         "objstore | relay | both (default both)", false},
        {"--calibration", DCR_ARG_STRING, &o->calibration, 0, 0,
         "stage costs: a calibration JSON, or local (measure this machine now); default: the "
         "description's",
         false},
        {"--platform", DCR_ARG_STRING, &o->platform, 0, 0,
         "a SimGrid platform XML instead of the generated one", false},
        {"--mode", DCR_ARG_STRING, &o->mode, 0, 0, "X | P | F construction mode (default X)",
         false},
        {"--out", DCR_ARG_STRING, &p.out, 0, 0,
         "also -o DIR: write plan.png, plan.svg (gnuplot) and their data there", false},
        {"--jsonl", DCR_ARG_FLAG, &p.jsonl, 0, 0,
         "stream each finished row as one JSON line (no summary)", false},
        {"--no-sensitivity", DCR_ARG_FLAG, &p.no_sensitivity, 0, 0,
         "skip the sensitivities (two refits per description field)", false},
        {"--no-crossover", DCR_ARG_FLAG, &p.no_crossover, 0, 0,
         "skip the break-even change rates and sensitivities", false},
        {"--full", DCR_ARG_FLAG, &o->full, 0, 0,
         "simulate every rollout node (no fast path; slow at hundreds of nodes)", false},
    };
    dcr_arg_t args[NPLAN_ARGS + NMODEL_ARGS + DCR_CLI_SCENARIO_NARGS];
    memcpy(args, own, sizeof own);
    model_args(o, args + NPLAN_ARGS);
    dcr_cli_scenario_args(&o->sc, args + NPLAN_ARGS + NMODEL_ARGS);
    o->args = args;
    o->nargs = (int)(sizeof(args) / sizeof(args[0]));
    /* The shared parser knows long options only; -o is the short form users expect. */
    char *av[argc + 1];
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") ? argv[i] : (char *)"--out";
    av[argc] = NULL;
    int rc = dcr_args_parse(
        "sim plan",
        "[--cluster NAME|FILE] [--model M] [--rollout-nodes N,...] [--gbps G,...] "
        "[--change-rate R,...] [--transport objstore|relay|both] [--calibration FILE|local] "
        "[-o DIR] [--json|--jsonl] [any field flag of dcr sim]\n"
        "A capacity-planning sweep of one cluster description (default the seed's testbed, "
        "sim/clusters/paper-testbed.json) over rollout nodes, link rates, change rates and "
        "transports, with the break-even change rates and the sensitivities of the largest node "
        "count (default model nemotron-3-nano-30b-a3b)",
        args, o->nargs, argc, av, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    dcr_interrupt_install();
    return plan_run(&p);
}

enum { NRUN_ARGS = 18 };

/* The cluster, the workload and what to run (validation, the paper's
 * testbed): NRUN_ARGS entries. */
static void run_args(sim_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NRUN_ARGS] = {
        {"--rollout-nodes", DCR_ARG_INT, &o->rollout_nodes, 1, 4096,
         "rollout nodes (default: the description's)", false},
        {"--rollout-gpus", DCR_ARG_INT, &o->rollout_gpus, 1, 64,
         "receivers (GPUs) per rollout node (default: the description's)", false},
        {"--serve-tp", DCR_ARG_INT, &o->serve_tp, 1, 64,
         "serving TP degree (default: rollout GPUs)", false},
        {"--serve-ep", DCR_ARG_FLAG, &o->serve_ep, 0, 0, "expert parallel inside serving instances",
         false},
        {"--transport", DCR_ARG_STRING, &o->transport, 0, 0,
         "objstore | relay | both (default objstore)", false},
        {"--change-rate", DCR_ARG_STRING, &o->rates, 0, 0,
         "element change rates, comma separated (default 0.03)", false},
        {"--changes", DCR_ARG_STRING, &o->changes, 0, 0,
         "profile:FILE: the model's overall rate of a dcr diff --profile (not --change-rate)",
         false},
        {"--mode", DCR_ARG_STRING, &o->mode, 0, 0, "X | P | F construction mode (default X)",
         false},
        {"--calibration", DCR_ARG_STRING, &o->calibration, 0, 0,
         "stage costs: a calibration JSON, or local (measure this machine now); default: the "
         "description's",
         false},
        {"--cluster", DCR_ARG_STRING, &o->cluster, 0, 0,
         "cluster description: a preset name (sim/clusters/NAME.json) or a JSON file (default "
         "paper-testbed)",
         false},
        {"--full", DCR_ARG_FLAG, &o->full, 0, 0,
         "simulate every rollout node (no fast path; slow at hundreds of nodes)", false},
        {"--platform", DCR_ARG_STRING, &o->platform, 0, 0,
         "a SimGrid platform XML instead of the generated one", false},
        {"--write-platform", DCR_ARG_STRING, &o->write_platform, 0, 0,
         "write the generated platform XML and exit", false},
        {"--testbed", DCR_ARG_STRING, &o->testbed, 0, 0,
         "paper: the seed's testbed with its fitted calibration; without --model its five sizes x "
         "3%,5% x both transports beside the seed's figures; nemo-rl: NeMo-RL's published "
         "cluster (guesses stated) beside its 247.2 GB refits",
         false},
        {"--validate", DCR_ARG_FLAG, &o->validate, 0, 0,
         "run the built-in dcr bench cases and compare (minutes); the testbed cases where root "
         "can build one (else reported skipped)",
         false},
        {"--validate-only", DCR_ARG_STRING, &o->validate_only, 0, 0,
         "engine | testbed: only those --validate cases", false},
        {"--testbed-id", DCR_ARG_INT, &o->testbed_id, 0, 55,
         "--validate: the netns testbed's id (scripts/testbed.sh; default 0)", false},
        {"--jsonl", DCR_ARG_FLAG, &o->jsonl, 0, 0,
         "stream each finished row as one JSON line (no summary)", false},
    };
    memcpy(a, own, sizeof own);
}

/* The model's links, store, relay and queues: NMODEL_ARGS entries. */
static void model_args(sim_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NMODEL_ARGS] = {
        {"--cross-gbps", DCR_ARG_DOUBLE, &o->cross, 0, 1e6,
         "cross-cluster Gbps per node and direction (0: unlimited)", false},
        {"--flow-gbps", DCR_ARG_DOUBLE, &o->flow, 0, 1e6, "cross-cluster Gbps per flow (0: no cap)",
         false},
        {"--local-gbps", DCR_ARG_DOUBLE, &o->local, 0, 1e6,
         "rollout-local Gbps per node (relay hops)", false},
        {"--fabric-gbps", DCR_ARG_DOUBLE, &o->fabric, 0, 1e6,
         "training fabric Gbps per node (residual parts)", false},
        {"--latency-ms", DCR_ARG_DOUBLE, &o->latency, 0, 1e5,
         "one-way cross-cluster latency per transfer", false},
        {"--local-latency-ms", DCR_ARG_DOUBLE, &o->local_latency, 0, 1e5,
         "one-way latency of a relay hop", false},
        {"--store-gbps", DCR_ARG_DOUBLE, &o->store_gbps, 0, 1e6,
         "object store Gbps, all flows (0: unlimited)", false},
        {"--store-latency-ms", DCR_ARG_DOUBLE, &o->store_latency, 0, 1e5,
         "object store latency per request", false},
        {"--store-list-ms", DCR_ARG_DOUBLE, &o->store_list, 0, 1e5,
         "delay before a listing sees a new object", false},
        {"--store-put-ms", DCR_ARG_DOUBLE, &o->store_put, 0, 1e5,
         "owner-side cost of one PUT after its bytes", false},
        {"--relay-gbps", DCR_ARG_DOUBLE, &o->relay_gbps, 0, 1e6,
         "relay root's ingress over all owners' streams (0: only its node link)", false},
        {"--startup-ms", DCR_ARG_DOUBLE, &o->startup_ms, 0, 1e7,
         "time from t0 until senders can submit (default 0)", false},
        {"--store-flows", DCR_ARG_INT, &o->store_flows, 1, 64,
         "concurrent downloads per rollout node", false},
        {"--store-get-rps", DCR_ARG_DOUBLE, &o->get_rps, 0, 1e7,
         "object store GET requests per second per prefix (0: unlimited)", false},
        {"--store-put-rps", DCR_ARG_DOUBLE, &o->put_rps, 0, 1e7,
         "object store PUT requests per second per prefix (0: unlimited)", false},
        {"--store-prefixes", DCR_ARG_INT, &o->store_prefixes, 1, 1 << 20,
         "key prefixes the request-rate limits apply to each", false},
        {"--owner-export-gbps", DCR_ARG_DOUBLE, &o->export_gbps, 0, 1e6,
         "each owner exports its full shard at this rate before constructing (0: no export)",
         false},
        {"--fanout", DCR_ARG_INT, &o->fanout, 1, 64, "relay tree fan-out", false},
        {"--queue", DCR_ARG_INT, &o->queue, 1, 1 << 20,
         "relay hop queue and store prefetch, payloads", false},
        {"--owner-queue", DCR_ARG_INT, &o->owner_queue, 1, 1 << 20,
         "finished payloads per owner waiting to send", false},
        {"--shared-cores", DCR_ARG_INT, &o->shared_cores, 0, 4096,
         "in-process engine on one machine of N cores (default 0: a cluster)", false},
        {"--no-ack-rtt", DCR_ARG_FLAG, &o->no_ack_rtt, 0, 0,
         "queueing acknowledgments cost no latency", false},
        {"--ref-object-mib", DCR_ARG_DOUBLE, &o->ref_object_mib, 1.0 / 1024, 1 << 20,
         "reference checkpoint object size", false},
        {"--chunk-mib", DCR_ARG_DOUBLE, &o->chunk_mib, 0, 1 << 20,
         "chunk target (default: 64 objstore, 256 relay)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o->bucket_mib, 0, 1 << 20, "bucket target (default 512)",
         false},
        {"--json", DCR_ARG_FLAG, &o->json, 0, 0, "print one JSON object with rows", false},
    };
    memcpy(a, own, sizeof own);
}

int dcr_cmd_sim(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "plan")) return dcr_cmd_sim_plan(argc - 1, argv + 1);
    sim_opts_t o;
    memset(&o, 0, sizeof(o));
    o.transport = "objstore";
    o.rates = "0.03";
    o.mode = "X";
    dcr_cli_scenario_init(&o.sc, DCR_MODEL_DEFAULT, 1, 0);
    enum { NOWN = NRUN_ARGS + NMODEL_ARGS };
    dcr_arg_t args[NOWN + DCR_CLI_SCENARIO_NARGS];
    run_args(&o, args);
    model_args(&o, args + NRUN_ARGS);
    dcr_cli_scenario_args(&o.sc, args + NOWN);
    o.args = args;
    o.nargs = (int)(sizeof(args) / sizeof(args[0]));
    int rc = dcr_args_parse(
        "sim",
        "[--model M] [--train-nodes N --gpus-per-node G --tp ...] [--rollout-nodes R "
        "--rollout-gpus G] "
        "[--transport objstore|relay|both] [--change-rate R,...] [--cluster NAME|FILE] "
        "[--cross-gbps B ...] [--calibration FILE|local] [--platform XML] "
        "[--testbed paper|nemo-rl] [--validate [--validate-only engine|testbed] [--testbed-id N]] "
        "[--json|--jsonl]\n"
        "       Every field of the cluster description (default sim/clusters/paper-testbed.json) "
        "has a flag that overrides it\n"
        "       dcr sim plan --help   (a capacity-planning sweep drawn with gnuplot)",
        args, o.nargs, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    dcr_interrupt_install();
    return run(&o);
}
