/* dcr sim: a refit of a full-size model on a cluster, simulated with
 * SimGrid (sim/), and the simulator's validation against dcr bench. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/log.h"
#include "scenario_args.h"
#include "sim/calibrate.h"
#include "sim/platform.h"
#include "sim/sim.h"
#include "sim/validate.h"

enum { MAX_ROWS = 64 };

typedef struct sim_opts {
    dcr_cli_scenario_t sc;
    int64_t rollout_nodes, rollout_gpus, serve_tp, store_flows, fanout, queue, owner_queue,
        shared_cores;
    bool serve_ep, json, validate, no_ack_rtt;
    const char *transport, *rates, *mode, *calibration, *platform, *write_platform, *testbed;
    double cross, flow, local, fabric, latency, local_latency, store_gbps, store_latency,
        store_list, store_put;
    double ref_object_mib, chunk_mib, bucket_mib;
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

static void set_if(const sim_opts_t *o, const char *flag, double v, double *dst)
{
    if (seen(o, flag)) *dst = v;
}

static void set_int_if(const sim_opts_t *o, const char *flag, int64_t v, int *dst)
{
    if (seen(o, flag)) *dst = (int)v;
}

static dcr_status_t cluster_from(const sim_opts_t *o, dcr_sim_cluster_t *c)
{
    if (o->testbed && strcmp(o->testbed, "paper"))
        return dcr_error_set(DCR_EINVAL, "--testbed %s: the only testbed is 'paper'", o->testbed);
    *c = o->testbed ? dcr_sim_cluster_testbed() : dcr_sim_cluster_default();
    set_int_if(o, "--train-nodes", o->sc.nodes, &c->train_nodes);
    set_int_if(o, "--gpus-per-node", o->sc.gpus, &c->train_gpus);
    set_int_if(o, "--rollout-nodes", o->rollout_nodes, &c->rollout_nodes);
    set_int_if(o, "--rollout-gpus", o->rollout_gpus, &c->rollout_gpus);
    set_int_if(o, "--store-flows", o->store_flows, &c->store_flows);
    set_int_if(o, "--fanout", o->fanout, &c->fanout);
    set_int_if(o, "--queue", o->queue, &c->queue_payloads);
    set_int_if(o, "--owner-queue", o->owner_queue, &c->owner_queue);
    set_int_if(o, "--shared-cores", o->shared_cores, &c->shared_cores);
    set_if(o, "--cross-gbps", o->cross, &c->cross_gbps);
    set_if(o, "--flow-gbps", o->flow, &c->flow_gbps);
    set_if(o, "--local-gbps", o->local, &c->local_gbps);
    set_if(o, "--fabric-gbps", o->fabric, &c->fabric_gbps);
    set_if(o, "--latency-ms", o->latency, &c->latency_ms);
    set_if(o, "--local-latency-ms", o->local_latency, &c->local_latency_ms);
    set_if(o, "--store-gbps", o->store_gbps, &c->store_gbps);
    set_if(o, "--store-latency-ms", o->store_latency, &c->store_latency_ms);
    set_if(o, "--store-list-ms", o->store_list, &c->store_list_ms);
    set_if(o, "--store-put-ms", o->store_put, &c->store_put_ms);
    set_if(o, "--ref-object-mib", o->ref_object_mib, &c->ref_object_mib);
    if (o->no_ack_rtt) c->ack_rtt = false;
    c->platform_xml = o->platform;
    return dcr_sim_cluster_validate(c);
}

/* The testbed's training layout when none is given: TP 4 inside each
 * 4-GPU node and, for MoE models, experts spread by EP 8 with ETP 1. */
static void testbed_layout(const sim_opts_t *o, dcr_scenario_spec_t *spec)
{
    if (!o->testbed) return;
    if (!seen(o, "--tp")) spec->train.tp = 4;
    if (!seen(o, "--ep")) spec->train.ep = 8;
    if (!seen(o, "--etp")) spec->train.etp = 1;
}

static dcr_status_t spec_from(const sim_opts_t *o, dcr_sim_spec_t *s)
{
    *s = dcr_sim_spec_default();
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &s->scenario));
    dcr_model_config_t model;
    DCR_CHECK(
        dcr_model_load(s->scenario.model, &model)); /* a wrong name fails before any measurement */
    testbed_layout(o, &s->scenario);
    DCR_CHECK(dcr_construct_mode_parse(o->mode, &s->mode));
    DCR_CHECK(cluster_from(o, &s->cluster));
    s->serve_tp = (int)o->serve_tp;
    s->serve_ep = o->serve_ep;
    s->chunk_bytes = (size_t)(o->chunk_mib * 1048576.0);
    s->bucket_bytes = (size_t)(o->bucket_mib * 1048576.0);
    return DCR_OK;
}

/* --change-rate takes a comma-separated list. */
static dcr_status_t parse_rates(const char *text, double *rates, int *n_p)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        double r = strtod(p, &end);
        if (end == p || !(r >= 0 && r <= 1) || (*end && *end != ','))
            return dcr_error_set(
                DCR_EINVAL, "--change-rate '%s': expected rates in [0, 1], comma separated", text);
        if (n == MAX_ROWS / 2)
            return dcr_error_set(DCR_EINVAL, "--change-rate: at most %d rates", MAX_ROWS / 2);
        rates[n++] = r;
        p = *end ? end + 1 : end;
    }
    if (n == 0) return dcr_error_set(DCR_EINVAL, "--change-rate: no rate given");
    *n_p = n;
    return DCR_OK;
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

static dcr_status_t load_calibration(const sim_opts_t *o, dcr_sim_calibration_t *cal)
{
    if (o->calibration) return dcr_sim_cal_load(o->calibration, cal);
    DCR_LOG_INFO(
        "sim: no --calibration file; measuring a quick one on this machine (dcr calibrate)");
    dcr_sim_cal_options_t opt = dcr_sim_cal_options_default();
    opt.quick = true;
    return dcr_sim_calibrate(&opt, cal);
}

/* ---- output ---------------------------------------------------------------------- */

typedef struct row {
    const char *transport;
    double rate;
    dcr_sim_result_t r;
} row_t;

static json_t *row_json(const char *model, const row_t *w)
{
    const dcr_sim_result_t *r = &w->r;
    return json_pack(
        "{s:s,s:I,s:s,s:f,s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:i,s:i}", "model",
        model, "checkpoint_bytes", (json_int_t)r->checkpoint_bytes, "transport", w->transport,
        "change_rate", w->rate, "latency_s", r->latency_s, "reference_s", r->reference_s, "speedup",
        r->speedup, "payload_bytes", (json_int_t)r->payload_bytes, "cross_bytes",
        (json_int_t)r->cross_bytes, "construction_lb_s", r->construction_lb_s, "transport_lb_s",
        r->transport_lb_s, "finalization_s", r->finalization_s, "construction_end_s",
        r->construction_end_s, "apply_end_s", r->apply_end_s, "raw_value_bytes",
        (json_int_t)r->raw_value_bytes, "records", (json_int_t)r->records, "payloads",
        (json_int_t)r->payloads, "owners", r->owners, "receivers", r->receivers);
}

static json_t *cluster_json(const dcr_sim_cluster_t *c)
{
    return json_pack(
        "{s:i,s:i,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:i,s:i,s:i,s:b,s:s?}", "train_nodes",
        c->train_nodes, "train_gpus", c->train_gpus, "rollout_nodes", c->rollout_nodes,
        "rollout_gpus", c->rollout_gpus, "cross_gbps", c->cross_gbps, "flow_gbps", c->flow_gbps,
        "local_gbps", c->local_gbps, "latency_ms", c->latency_ms, "store_gbps", c->store_gbps,
        "store_latency_ms", c->store_latency_ms, "store_list_ms", c->store_list_ms,
        "ref_object_mib", c->ref_object_mib, "store_flows", c->store_flows, "fanout", c->fanout,
        "shared_cores", c->shared_cores, "ack_rtt", c->ack_rtt, "platform", c->platform_xml);
}

static void print_json(const dcr_sim_spec_t *s, const row_t *rows, int n,
                       const dcr_sim_calibration_t *cal)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, row_json(s->scenario.model, &rows[i]));
    json_t *j = json_pack("{s:o,s:o,s:s,s:s}", "rows", arr, "cluster", cluster_json(&s->cluster),
                          "calibration", cal->machine, "mode", dcr_construct_mode_name(s->mode));
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

static void print_text(const dcr_sim_spec_t *s, const row_t *rows, int n,
                       const dcr_sim_calibration_t *cal)
{
    const dcr_sim_cluster_t *c = &s->cluster;
    printf("cluster: %d x %d training, %d x %d rollout; cross %.3g Gbps per node, %.3g per flow, "
           "latency %.3g ms; "
           "store %s, %.3g ms per request\ncalibration: %s\n",
           c->train_nodes, c->train_gpus, c->rollout_nodes, c->rollout_gpus, c->cross_gbps,
           c->flow_gbps, c->latency_ms, c->store_gbps > 0 ? "limited" : "unlimited",
           c->store_latency_ms, cal->machine);
    if (n > 0)
        printf("model %s, checkpoint %lld bytes, %d owners, %d receivers, mode %s\n\n",
               s->scenario.model, (long long)rows[0].r.checkpoint_bytes, rows[0].r.owners,
               rows[0].r.receivers, dcr_construct_mode_name(s->mode));
    printf("%-9s %6s %10s %10s %10s %9s %14s %14s %11s %8s %8s\n", "transport", "rate", "latency_s",
           "constr_lb", "transp_lb", "final_s", "payload_B", "cross_B", "reference_s", "speedup",
           "payloads");
    for (int i = 0; i < n; i++) {
        const dcr_sim_result_t *r = &rows[i].r;
        printf("%-9s %6.3g %10.3f %10.3f %10.3f %9.3f %14lld %14lld %11.2f %7.1fx %8lld\n",
               rows[i].transport, rows[i].rate, r->latency_s, r->construction_lb_s,
               r->transport_lb_s, r->finalization_s, (long long)r->payload_bytes,
               (long long)r->cross_bytes, r->reference_s, r->speedup, (long long)r->payloads);
    }
}

/* ---- modes ------------------------------------------------------------------------ */

/* Every owner pair gets a route for residual parts, so any workload runs on
 * the written platform. */
static int write_platform(const sim_opts_t *o)
{
    dcr_sim_cluster_t c;
    dcr_status_t st = cluster_from(o, &c);
    size_t world = st == DCR_OK ? (size_t)c.train_nodes * (size_t)c.train_gpus : 0;
    uint8_t *pairs = st == DCR_OK ? malloc(world * world + 1) : NULL;
    if (st == DCR_OK && !pairs)
        st = dcr_error_set(DCR_ENOMEM, "--write-platform: %zu owners", world);
    if (pairs) memset(pairs, 1, world * world + 1);
    FILE *f = st == DCR_OK ? fopen(o->write_platform, "w") : NULL;
    if (st == DCR_OK && !f)
        st = dcr_error_set(DCR_EIO, "--write-platform %s: cannot create it", o->write_platform);
    if (st == DCR_OK) st = dcr_sim_platform_write(&c, pairs, f);
    if (f && fclose(f) != 0 && st == DCR_OK)
        st = dcr_error_set(DCR_EIO, "--write-platform %s", o->write_platform);
    free(pairs);
    if (st != DCR_OK) {
        dcr_cli_report("sim", st);
        return 1;
    }
    printf("platform written to %s\n", o->write_platform);
    return 0;
}

static int validate(const sim_opts_t *o, const dcr_sim_calibration_t *cal)
{
    json_t *arr = json_array();
    if (!o->json)
        printf("%-44s %10s %10s %7s %9s %9s %11s %11s\n", "case (dcr bench flags below)",
               "measured_s", "predicted_s", "error", "ref_meas", "ref_pred", "payload_meas",
               "payload_pred");
    for (int i = 0; i < DCR_SIM_VALIDATION_CASES; i++) {
        dcr_bench_config_t cfg;
        const char *name, *args;
        dcr_sim_validation_case(i, &cfg, &name, &args);
        dcr_sim_validation_row_t row;
        dcr_status_t st = dcr_sim_validate_one(&cfg, cal, &row);
        if (st != DCR_OK) {
            json_decref(arr);
            dcr_error_prefix("validation case '%s': ", name);
            dcr_cli_report("sim", st);
            return 1;
        }
        if (o->json) {
            json_array_append_new(
                arr, json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "case", name,
                               "bench_args", args, "measured_s", row.measured_s, "predicted_s",
                               row.predicted_s, "error", row.error, "measured_reference_s",
                               row.measured_ref_s, "predicted_reference_s", row.predicted_ref_s,
                               "measured_payload_bytes", row.measured_payload,
                               "predicted_payload_bytes", row.predicted_payload,
                               "measured_construction_s", row.measured_construct_s,
                               "predicted_construction_end_s", row.predicted_construct_end_s));
            continue;
        }
        printf("%-44s %10.3f %10.3f %+6.1f%% %9.3f %9.3f %11.0f %11.0f\n    dcr bench %s\n", name,
               row.measured_s, row.predicted_s, 100 * row.error, row.measured_ref_s,
               row.predicted_ref_s, row.measured_payload, row.predicted_payload, args);
        fflush(stdout);
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

static int simulate(const sim_opts_t *o)
{
    dcr_sim_spec_t spec;
    dcr_sim_calibration_t cal;
    double rates[MAX_ROWS];
    const char *transports[2];
    int nrates = 0, ntrans = 0, n = 0;
    row_t rows[MAX_ROWS];
    /* Every flag is checked before a calibration is measured or read. */
    dcr_status_t st = spec_from(o, &spec);
    if (st == DCR_OK) st = parse_rates(o->rates, rates, &nrates);
    if (st == DCR_OK) st = parse_transports(o->transport, transports, &ntrans);
    if (st == DCR_OK) st = load_calibration(o, &cal);
    for (int t = 0; st == DCR_OK && t < ntrans; t++)
        for (int i = 0; st == DCR_OK && i < nrates; i++) {
            spec.transport = transports[t];
            spec.change_rate = rates[i];
            memset(&rows[n], 0, sizeof(rows[n]));
            rows[n].transport = transports[t];
            rows[n].rate = rates[i];
            st = dcr_sim_run(&spec, &cal, &rows[n].r);
            n++;
        }
    if (st != DCR_OK) {
        dcr_cli_report("sim", st);
        return 1;
    }
    if (o->json)
        print_json(&spec, rows, n, &cal);
    else
        print_text(&spec, rows, n, &cal);
    return 0;
}

static int run(const sim_opts_t *o)
{
    if (o->write_platform) return write_platform(o);
    if (!o->validate) return simulate(o);
    dcr_sim_calibration_t cal;
    dcr_status_t st = load_calibration(o, &cal);
    if (st != DCR_OK) {
        dcr_cli_report("sim", st);
        return 1;
    }
    return validate(o, &cal);
}

int dcr_cmd_sim(int argc, char **argv)
{
    sim_opts_t o;
    memset(&o, 0, sizeof(o));
    o.transport = "objstore";
    o.rates = "0.03";
    o.mode = "X";
    dcr_cli_scenario_init(&o.sc, DCR_MODEL_DEFAULT, 1, 0);
    enum { NOWN = 32 };
    dcr_arg_t args[NOWN + DCR_CLI_SCENARIO_NARGS] = {
        {"--rollout-nodes", DCR_ARG_INT, &o.rollout_nodes, 1, 4096,
         "rollout nodes (default 1; testbed 8)", false},
        {"--rollout-gpus", DCR_ARG_INT, &o.rollout_gpus, 1, 64,
         "receivers (GPUs) per rollout node (default 1; testbed 8)", false},
        {"--serve-tp", DCR_ARG_INT, &o.serve_tp, 1, 64, "serving TP degree (default: rollout GPUs)",
         false},
        {"--serve-ep", DCR_ARG_FLAG, &o.serve_ep, 0, 0, "expert parallel inside serving instances",
         false},
        {"--transport", DCR_ARG_STRING, &o.transport, 0, 0,
         "objstore | relay | both (default objstore)", false},
        {"--change-rate", DCR_ARG_STRING, &o.rates, 0, 0,
         "element change rates, comma separated (default 0.03)", false},
        {"--mode", DCR_ARG_STRING, &o.mode, 0, 0, "X | P | F construction mode (default X)", false},
        {"--calibration", DCR_ARG_STRING, &o.calibration, 0, 0,
         "calibration JSON (default: a quick one measured now)", false},
        {"--platform", DCR_ARG_STRING, &o.platform, 0, 0,
         "a SimGrid platform XML instead of the generated one", false},
        {"--write-platform", DCR_ARG_STRING, &o.write_platform, 0, 0,
         "write the generated platform XML and exit", false},
        {"--testbed", DCR_ARG_STRING, &o.testbed, 0, 0,
         "paper: the seed's latency testbed as the cluster", false},
        {"--validate", DCR_ARG_FLAG, &o.validate, 0, 0,
         "run the built-in dcr bench cases and compare (minutes)", false},
        {"--cross-gbps", DCR_ARG_DOUBLE, &o.cross, 0, 1e6,
         "cross-cluster Gbps per node and direction (0: unlimited)", false},
        {"--flow-gbps", DCR_ARG_DOUBLE, &o.flow, 0, 1e6, "cross-cluster Gbps per flow (0: no cap)",
         false},
        {"--local-gbps", DCR_ARG_DOUBLE, &o.local, 0, 1e6,
         "rollout-local Gbps per node (relay hops)", false},
        {"--fabric-gbps", DCR_ARG_DOUBLE, &o.fabric, 0, 1e6,
         "training fabric Gbps per node (residual parts)", false},
        {"--latency-ms", DCR_ARG_DOUBLE, &o.latency, 0, 1e5,
         "one-way cross-cluster latency per transfer", false},
        {"--local-latency-ms", DCR_ARG_DOUBLE, &o.local_latency, 0, 1e5,
         "one-way latency of a relay hop", false},
        {"--store-gbps", DCR_ARG_DOUBLE, &o.store_gbps, 0, 1e6,
         "object store Gbps, all flows (0: unlimited)", false},
        {"--store-latency-ms", DCR_ARG_DOUBLE, &o.store_latency, 0, 1e5,
         "object store latency per request", false},
        {"--store-list-ms", DCR_ARG_DOUBLE, &o.store_list, 0, 1e5,
         "delay before a listing sees a new object", false},
        {"--store-put-ms", DCR_ARG_DOUBLE, &o.store_put, 0, 1e5,
         "owner-side cost of one PUT after its bytes", false},
        {"--store-flows", DCR_ARG_INT, &o.store_flows, 1, 64,
         "concurrent downloads per rollout node (default 2)", false},
        {"--fanout", DCR_ARG_INT, &o.fanout, 1, 64, "relay tree fan-out (default 2)", false},
        {"--queue", DCR_ARG_INT, &o.queue, 1, 1 << 20,
         "relay hop queue and store prefetch, payloads (default 8)", false},
        {"--owner-queue", DCR_ARG_INT, &o.owner_queue, 1, 1 << 20,
         "finished payloads per owner waiting to send (default 2)", false},
        {"--shared-cores", DCR_ARG_INT, &o.shared_cores, 0, 4096,
         "in-process engine on one machine of N cores (default 0: a cluster)", false},
        {"--no-ack-rtt", DCR_ARG_FLAG, &o.no_ack_rtt, 0, 0,
         "queueing acknowledgments cost no latency", false},
        {"--ref-object-mib", DCR_ARG_DOUBLE, &o.ref_object_mib, 1.0 / 1024, 1 << 20,
         "reference checkpoint object size", false},
        {"--chunk-mib", DCR_ARG_DOUBLE, &o.chunk_mib, 0, 1 << 20,
         "chunk target (default: 64 objstore, 256 relay)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o.bucket_mib, 0, 1 << 20, "bucket target (default 512)",
         false},
        {"--json", DCR_ARG_FLAG, &o.json, 0, 0, "print one JSON object with rows", false},
    };
    dcr_cli_scenario_args(&o.sc, args + NOWN);
    o.args = args;
    o.nargs = (int)(sizeof(args) / sizeof(args[0]));
    int rc = dcr_args_parse(
        "sim",
        "[--model M] [--train-nodes N --gpus-per-node G --tp ...] [--rollout-nodes R "
        "--rollout-gpus G] "
        "[--transport objstore|relay|both] [--change-rate R,...] [--cross-gbps B ...] "
        "[--calibration FILE] [--platform XML] [--testbed paper] [--validate] [--json]",
        args, o.nargs, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    return run(&o);
}
