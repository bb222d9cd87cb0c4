/* dcr bench: end-to-end refits, the reference, speedup, bit-exactness. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/log.h"
#include "scenario_args.h"
#include "workloads/harness/bench.h"
#include "workloads/change/change_profile.h"
#include "workloads/harness/interrupt.h"
#include "workloads/harness/results.h"
#include "deploy/launch.h"
#include "deploy/restorer.h"
#include "deploy/testbed.h"
#include "reports/trace_io.h"
#include "dcr/trace.h"

typedef struct bench_opts {
    dcr_cli_scenario_t sc;
    int64_t nodes, per_node, serve_tp, warmup, refits, fanout, seed, readers, sigkill_every,
        coord_kill_every;
    int64_t retain;       /* --retain K (dcr_cli_retain) */
    int64_t anchor_every; /* --anchor-every N (anchor_every_check) */
    int64_t join_at;      /* --join-at STEP (join_at_check) */
    /* --testbed netns [--testbed-id N]: the --processes roles across the
     * hosts of scripts/testbed.sh (deploy/testbed.h). */
    const char *testbed;
    int64_t testbed_id;
    bool serve_ep, no_verify, json, no_shuffle, fp32_norms, w2_t, trace_overhead, processes,
        restart_nodes, owner_threads;
    const char *transport, *mode, *rl, *changes, *keep, *out, *control, *workdir, *trace, *init;
    const char *payload_key, *store, *s3_endpoint;
    const char *device; /* --device: the receivers' and owners' place (not role processes') */
    double rate, gbps, flow_gbps, local_gbps, latency_ms, lr, chunk_mib, bucket_mib;
    /* The parsed flag table (their `seen`), for checks that depend on which
     * flags the user gave. */
    dcr_arg_t args[64];
    int nargs;
    dcr_change_profile_t profile; /* --changes profile:FILE, loaded */
    /* A role process of a --processes run: its --workdir is the launcher's
     * run folder (held by the launcher's marker), not a folder to claim. */
    bool role;
} bench_opts_t;

static json_t *config_json(const bench_opts_t *o, const dcr_bench_config_t *c)
{
    json_t *j = json_pack(
        "{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:b,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:I,"
        "s:f,s:s,s:s,"
        "s:I,s:I,s:b,s:I}",
        "model", o->sc.model, "scale", (json_int_t)o->sc.scale, "layers", (json_int_t)o->sc.layers,
        "train_nodes", (json_int_t)o->sc.nodes, "gpus_per_node", (json_int_t)o->sc.gpus, "tp",
        (json_int_t)o->sc.tp, "etp", (json_int_t)o->sc.etp, "ep", (json_int_t)o->sc.ep, "pp",
        (json_int_t)o->sc.pp, "mapping", o->sc.mapping, "rollout_nodes", (json_int_t)o->nodes,
        "receivers_per_node", (json_int_t)o->per_node, "serve_tp", (json_int_t)o->serve_tp,
        "serve_ep", o->serve_ep, "transport", o->transport, "changes", o->changes, "lr", o->lr,
        "cross_gbps", c->link.cross_gbps, "flow_gbps", c->link.flow_gbps, "local_gbps",
        c->link.local_gbps, "latency_ms", c->link.latency_ms, "fanout", (json_int_t)o->fanout,
        "change_rate", o->rate, "mode", o->mode, "rl", o->rl, "warmup", (json_int_t)o->warmup,
        "refits", (json_int_t)o->refits, "shuffle", !o->no_shuffle, "seed", (json_int_t)o->seed);
    /* Whether payloads were signed; the key itself never leaves the process. */
    if (j) json_object_set_new(j, "payload_keyed", json_boolean(c->payload_key.set));
    /* The checkpoint the weights started from, or null for synthetic weights. */
    if (j) json_object_set_new(j, "init", o->init ? json_string(o->init) : json_null());
    return j;
}

/* A figure from the trace: null for a refit that was not recorded. */
static json_t *traced_real(const dcr_bench_refit_t *f, double v)
{
    return f->traced ? json_real(v) : json_null();
}

/* The recorder's cost (--trace-overhead): the same-run latency ratio, and
 * the cost of the recorded spans as if every one sat on the critical path. */
static json_t *overhead_json(const dcr_bench_result_t *r)
{
    double on = r->overhead.latency_on_s, off = r->overhead.latency_off_s;
    double spans_s = r->overhead.intervals_per_refit * r->overhead.span_ns * 1e-9;
    return json_pack(
        "{s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f}", "refits_on", r->overhead.refits_on, "refits_off",
        r->overhead.refits_off, "mean_latency_on_s", on, "mean_latency_off_s", off, "latency_ratio",
        off > 0 ? on / off : 0.0, "span_ns", r->overhead.span_ns, "intervals_per_refit",
        r->overhead.intervals_per_refit, "span_cost_share_of_latency", on > 0 ? spans_s / on : 0.0);
}

static json_t *refit_json(const dcr_bench_refit_t *f)
{
    return json_pack(
        "{s:f,s:f,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:b,s:b,s:b,s:I,s:f,s:I}",
        "latency_s", f->latency_s, "construction_s", f->construction_s, "construction_lb_s",
        traced_real(f, f->construction_lb_s), "transport_lb_s", traced_real(f, f->transport_lb_s),
        "finalization_s", traced_real(f, f->bound_finalization_s), "remainder_s",
        traced_real(f, f->remainder_s), "payload_bytes", (json_int_t)f->payload_bytes,
        "cross_bytes", (json_int_t)f->cross_bytes, "raw_changed_value_bytes",
        (json_int_t)f->raw_changed_value_bytes, "changed_elements", (json_int_t)f->changed_elements,
        "records", (json_int_t)f->records, "payloads", (json_int_t)f->payloads, "attempts",
        f->attempts, "bit_exact", f->bit_exact, "verified", f->verified, "traced", f->traced,
        "intervals", (json_int_t)f->intervals, "wall_s", f->wall_s, "rss_bytes",
        (json_int_t)f->rss_bytes);
}

static json_t *result_json(const dcr_bench_result_t *r, json_t *config)
{
    json_t *refits = json_array();
    for (int i = 0; i < r->nrefits; i++) {
        json_t *f = refit_json(&r->refits[i]);
        /* Retention of the version (--retain): copied after the commit. */
        if (f)
            json_object_set_new(
                f, "retain",
                json_pack("{s:I,s:f,s:f}", "bytes", (json_int_t)r->refits[i].retain_bytes, "s",
                          r->refits[i].retain_s, "wait_s", r->refits[i].retain_wait_s));
        json_array_append_new(refits, f);
    }
    json_t *j = json_pack(
        "{s:o,s:f,s:f,s:f,s:I,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b,s:I,s:I,s:I,s:I,s:o}",
        "config", config, "construction_lb_s_mean", r->construction_lb_mean_s,
        "transport_lb_s_mean", r->transport_lb_mean_s, "finalization_s_mean",
        r->finalization_mean_s, "checkpoint_bytes", (json_int_t)r->checkpoint_bytes, "owners",
        r->owners, "receivers", r->receivers, "mean_latency_s", r->mean_latency_s, "reference_s",
        r->reference_s, "relay_reference_s", r->relay_reference_s, "speedup", r->speedup,
        "payload_bytes_mean", r->payload_bytes_mean, "cross_bytes_mean", r->cross_bytes_mean,
        "raw_changed_value_bytes_mean", r->raw_changed_value_bytes_mean, "bit_exact", r->bit_exact,
        "xor_tensors", (json_int_t)r->xor_tensors, "overwrite_tensors",
        (json_int_t)r->overwrite_tensors, "requests", (json_int_t)r->requests, "request_mismatches",
        (json_int_t)r->request_mismatches, "refits", refits);
    json_object_set_new(j, "cpu_s_mean",
                        json_pack("{s:f,s:f,s:f}", "owners", r->cpu_mean_s[DCR_THREAD_OWNER],
                                  "nodes", r->cpu_mean_s[DCR_THREAD_NODE], "transport",
                                  r->cpu_mean_s[DCR_THREAD_TRANSPORT]));
    json_object_set_new(j, "memory_estimate_bytes", json_integer(r->memory_estimate_bytes));
    json_object_set_new(j, "peak_rss_bytes", json_integer(r->peak_rss_bytes));
    if (r->overhead.refits_off > 0) json_object_set_new(j, "trace_overhead", overhead_json(r));
    json_object_set_new(j, "payloads_rejected", json_integer(r->payloads_rejected));
    json_object_set_new(j, "payloads_unauthenticated", json_integer(r->payloads_unauthenticated));
    return j;
}

static void print_text(const dcr_bench_config_t *c, const dcr_bench_result_t *r)
{
    printf("links: cross %.3g Gbps per node, flow %.3g Gbps, local %.3g Gbps, latency %.3g ms\n",
           c->link.cross_gbps, c->link.flow_gbps, c->link.local_gbps, c->link.latency_ms);
    printf("checkpoint %lld bytes, %d owners, %d receivers, %zu XOR / %zu overwrite tensors\n\n",
           (long long)r->checkpoint_bytes, r->owners, r->receivers, r->xor_tensors,
           r->overwrite_tensors);
    printf("%-6s %10s %10s %10s %10s %12s %12s %14s %8s %10s\n", "refit", "latency_s", "constr_lb",
           "transp_lb", "final_s", "payload_B", "cross_B", "raw_values_B", "attempts", "bit_exact");
    for (int i = 0; i < r->nrefits; i++) {
        const dcr_bench_refit_t *f = &r->refits[i];
        char bounds[40] = "         -          -          -";
        if (f->traced)
            snprintf(bounds, sizeof(bounds), "%10.3f %10.3f %10.3f", f->construction_lb_s,
                     f->transport_lb_s, f->bound_finalization_s);
        printf("%-6d %10.3f %s %12lld %12lld %14lld %8d %10s\n", i + 1, f->latency_s, bounds,
               (long long)f->payload_bytes, (long long)f->cross_bytes,
               (long long)f->raw_changed_value_bytes, f->attempts,
               f->verified ? (f->bit_exact ? "yes" : "NO") : "-");
    }
    /* The bounds exist for the recorded refits only: compare them with those. */
    bool overhead = r->overhead.refits_off > 0;
    double latency = overhead ? r->overhead.latency_on_s : r->mean_latency_s;
    double bound = r->construction_lb_mean_s > r->transport_lb_mean_s ? r->construction_lb_mean_s
                                                                      : r->transport_lb_mean_s;
    printf("\nmeans%s: construction bound %.3f s, transport bound %.3f s, finalization %.3f s; "
           "latency / (max bound + finalization) %.2f\n",
           overhead ? " of the recorded refits" : "", r->construction_lb_mean_s,
           r->transport_lb_mean_s, r->finalization_mean_s,
           bound + r->finalization_mean_s > 0 ? latency / (bound + r->finalization_mean_s) : 0.0);
    printf("CPU per refit: owners %.3f s, rollout nodes %.3f s, transport %.3f s\n",
           r->cpu_mean_s[DCR_THREAD_OWNER], r->cpu_mean_s[DCR_THREAD_NODE],
           r->cpu_mean_s[DCR_THREAD_TRANSPORT]);
    if (overhead)
        printf("recorder: mean latency %.4f s recorded (%d refits), %.4f s not (%d), ratio %.4f; "
               "one span %.0f ns x %.0f intervals per refit = %.3f%% of the latency\n",
               r->overhead.latency_on_s, r->overhead.refits_on, r->overhead.latency_off_s,
               r->overhead.refits_off,
               r->overhead.latency_off_s > 0 ? r->overhead.latency_on_s / r->overhead.latency_off_s
                                             : 0.0,
               r->overhead.span_ns, r->overhead.intervals_per_refit,
               r->overhead.latency_on_s > 0
                   ? 100.0 * r->overhead.intervals_per_refit * r->overhead.span_ns * 1e-9 /
                         r->overhead.latency_on_s
                   : 0.0);
    printf("mean latency %.3f s, reference %.3f s", r->mean_latency_s, r->reference_s);
    if (r->relay_reference_s > 0) printf(", relay reference %.3f s", r->relay_reference_s);
    printf(", speedup %.2fx\npayload %.0f B, cross %.0f B, raw changed values %.0f B (payload/raw "
           "%.3f), bit-exact %s\n",
           r->speedup, r->payload_bytes_mean, r->cross_bytes_mean, r->raw_changed_value_bytes_mean,
           r->raw_changed_value_bytes_mean > 0
               ? r->payload_bytes_mean / r->raw_changed_value_bytes_mean
               : 0.0,
           r->bit_exact ? "yes" : "NO");
    if (r->requests)
        printf("requests during refits %lld, saw a mixed policy %lld\n", (long long)r->requests,
               (long long)r->request_mismatches);
    if (c->payload_key.set || r->payloads_rejected)
        printf("payloads %s; refused %lld, of which unauthenticated %lld\n",
               c->payload_key.set ? "signed with the payload key" : "unkeyed",
               (long long)r->payloads_rejected, (long long)r->payloads_unauthenticated);
}

static dcr_status_t append_results(const char *path, const dcr_bench_result_t *r, json_t *config)
{
    size_t n = (size_t)r->nrefits;
    double *cols = calloc(DCR_RESULTS_NCOLUMNS * (n ? n : 1), sizeof(double));
    if (!cols) return dcr_error_set(DCR_ENOMEM, "results columns");
    for (size_t i = 0; i < n; i++) {
        const dcr_bench_refit_t *f = &r->refits[i];
        cols[DCR_RESULTS_LATENCY_S * n + i] = f->latency_s;
        cols[DCR_RESULTS_PAYLOAD_BYTES * n + i] = (double)f->payload_bytes;
        cols[DCR_RESULTS_CROSS_BYTES * n + i] = (double)f->cross_bytes;
        cols[DCR_RESULTS_RAW_CHANGED_VALUE_BYTES * n + i] = (double)f->raw_changed_value_bytes;
        cols[DCR_RESULTS_CHANGED_ELEMENTS * n + i] = (double)f->changed_elements;
        cols[DCR_RESULTS_BIT_EXACT * n + i] = f->bit_exact ? 1.0 : 0.0;
        /* NaN marks a bound that was not measured (--trace-overhead). */
        cols[DCR_RESULTS_CONSTRUCTION_LB_S * n + i] = f->traced ? f->construction_lb_s : NAN;
        cols[DCR_RESULTS_TRANSPORT_LB_S * n + i] = f->traced ? f->transport_lb_s : NAN;
        cols[DCR_RESULTS_FINALIZATION_S * n + i] = f->traced ? f->bound_finalization_s : NAN;
    }
    dcr_results_column_t columns[DCR_RESULTS_NCOLUMNS];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        columns[k] = (dcr_results_column_t){dcr_results_column_names[k], cols + (size_t)k * n};
    json_t *summary = result_json(r, json_incref(config));
    json_object_del(summary, "refits");
    json_object_del(summary, "config");
    char *config_text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS),
         *summary_text = json_dumps(summary, JSON_COMPACT);
    dcr_results_run_t run = {"bench", config_text, summary_text, n, DCR_RESULTS_NCOLUMNS,
                             columns, 0,           NULL};
    dcr_trace_interval_t *iv = NULL;
    size_t niv = 0;
    int64_t(*table)[6] = NULL;
    if (dcr_trace_snapshot(&iv, &niv) == DCR_OK && niv > 0 &&
        (table = malloc(niv * sizeof(*table)))) {
        for (size_t i = 0; i < niv; i++) {
            table[i][0] = (int64_t)iv[i].start_ns;
            table[i][1] = (int64_t)iv[i].end_ns;
            table[i][2] = iv[i].refit;
            table[i][3] = iv[i].stage;
            table[i][4] = iv[i].actor;
            table[i][5] = iv[i].id;
        }
        run.nintervals = niv;
        run.intervals = (const int64_t(*)[6])table;
    }
    free(iv);
    char name[64];
    dcr_status_t st = dcr_results_append(path, &run, name, sizeof(name));
    if (st == DCR_OK) DCR_LOG_INFO("bench: results appended to %s as %s", path, name);
    free(table);
    free(config_text);
    free(summary_text);
    json_decref(summary);
    free(cols);
    return st;
}

static dcr_status_t write_trace(const char *path)
{
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_trace_snapshot(&iv, &n));
    dcr_status_t st = dcr_trace_write_chrome(path, iv, n);
    if (st == DCR_OK) DCR_LOG_INFO("bench: %zu trace intervals written to %s", n, path);
    free(iv);
    return st;
}

/* --store and --s3-endpoint: usage errors, checked before anything runs. */
static dcr_status_t check_store(const bench_opts_t *o)
{
    if (o->store && strcmp(o->transport, "objstore"))
        return dcr_error_set(DCR_EINVAL, "--store needs --transport objstore (not %s)",
                             o->transport);
    if (o->store && o->keep)
        return dcr_error_set(DCR_EINVAL,
                             "--store and --keep-payloads both name the store; give one");
    return dcr_cli_store_check(o->store, o->s3_endpoint);
}

/* Every flag, the layout and every path, before the run: what fails here
 * is a usage error (or an unwritable place) found in the first second. */
/* --anchor-every N: rollout-node processes over the object store, within
 * the retention window (a join replays the versions after its anchor). */
static dcr_status_t anchor_every_check(const bench_opts_t *o, dcr_bench_config_t *c)
{
    if (!dcr_args_seen(o->args, o->nargs, "--anchor-every") || o->anchor_every == 0) return DCR_OK;
    if (!(o->processes || o->role) || strcmp(o->transport, "objstore"))
        return dcr_error_set(DCR_EINVAL,
                             "--anchor-every needs --processes and --transport objstore (got "
                             "%s%s)",
                             o->transport, o->processes || o->role ? "" : ", no --processes");
    if (c->retain > 0 && o->anchor_every > c->retain)
        return dcr_error_set(DCR_EINVAL,
                             "--anchor-every %lld is above the retention window (--retain %d): a "
                             "join could not replay from its anchor",
                             (long long)o->anchor_every, c->retain);
    c->anchor_every = (int)o->anchor_every;
    return DCR_OK;
}

static dcr_status_t fill_config(bench_opts_t *o, dcr_bench_config_t *c)
{
    DCR_CHECK(check_store(o));
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &c->scenario));
    DCR_CHECK(dcr_construct_mode_parse(o->mode, &c->mode));
    DCR_CHECK(dcr_rl_mode_parse(o->rl, &c->rl));
    if (!dcr_transport_find(o->transport))
        return dcr_error_set(DCR_EINVAL, "--transport %s: expected objstore or relay",
                             o->transport);
    DCR_CHECK(dcr_cli_changes_check(o->args, o->nargs, o->changes, true));
    c->adamw = !strcmp(o->changes, "adamw");
    if (!strncmp(o->changes, "profile:", 8)) {
        DCR_CHECK(dcr_change_profile_load(o->changes + 8, &o->profile));
        c->profile = &o->profile;
    }
    c->lr = o->lr;
    if (c->adamw && !(o->lr > 0))
        return dcr_error_set(DCR_EINVAL, "--lr must be positive for --changes adamw");
    if (o->processes && (strcmp(o->rl, "sync") || o->readers))
        return dcr_error_set(
            DCR_EINVAL, "--processes needs --rl sync, without --readers (got %s, %lld readers)",
            o->rl, (long long)o->readers);
    /* The relay across processes connects owner ranks to the root node
     * process; owner threads of the launcher hold no part of that tree.
     * On --testbed the owners are an MPI job in the training hosts and each
     * node listens on its rollout host's address (dcr_testbed_place_roles). */
    if (!strcmp(o->transport, "relay") && o->processes && o->owner_threads)
        return dcr_error_set(DCR_EINVAL,
                             "--transport relay with --processes needs the owners as an MPI job "
                             "(not --owner-threads)");
    if (o->keep && strcmp(o->transport, "objstore"))
        return dcr_error_set(
            DCR_EINVAL, "--keep-payloads needs --transport objstore (the relay keeps nothing)");
    if (o->trace_overhead && o->refits < 4)
        return dcr_error_set(DCR_EINVAL,
                             "--trace-overhead needs at least 4 timed refits (--refits), got %lld",
                             (long long)o->refits);
    DCR_CHECK(
        dcr_cli_paths_check(o->out, o->trace, o->keep, o->role ? NULL : o->workdir, o->control));
    if (o->out) DCR_CHECK(dcr_results_check("--out", o->out));
    c->serve.nodes = (int)o->nodes;
    c->serve.gpus_per_node = (int)o->per_node;
    c->serve.tp = (int)o->serve_tp;
    c->serve.ep = o->serve_ep;
    c->serve.fp32_norms = o->fp32_norms;
    c->serve.w2_transposed = o->w2_t;
    c->device = o->device;
    c->transport = o->transport;
    if (o->gbps >= 0) c->link.cross_gbps = o->gbps;
    if (o->flow_gbps >= 0) c->link.flow_gbps = o->flow_gbps;
    if (o->local_gbps >= 0) c->link.local_gbps = o->local_gbps;
    if (o->latency_ms >= 0) c->link.latency_ms = o->latency_ms;
    c->fanout = (int)o->fanout;
    c->change_rate = o->rate;
    c->init = o->init;
    c->warmup = (int)o->warmup;
    c->refits = (int)o->refits;
    c->verify = !o->no_verify;
    c->shuffle = !o->no_shuffle;
    c->chunk_bytes = (size_t)(o->chunk_mib * (1 << 20));
    c->bucket_bytes = (size_t)(o->bucket_mib * (1 << 20));
    c->workdir = o->keep ? o->keep : o->workdir;
    c->workdir_flag = o->keep ? "--keep-payloads" : "--workdir";
    c->keep_payloads = o->keep != NULL;
    c->control_path = o->control;
    c->seed = (uint64_t)o->seed;
    c->readers = (int)o->readers;
    c->trace_overhead = o->trace_overhead;
    c->store = o->store;
    c->s3_endpoint = o->s3_endpoint;
    c->keep_trace = o->trace || o->out;
    /* A run's flags as its role processes and `dcr faults --processes`
     * parse them (o->role) are a --processes run's: the same default window,
     * or the faults launcher would retain nothing and every restore that
     * needs a retained version would fall back to a dense refit. */
    DCR_CHECK(dcr_cli_retain(o->args, o->nargs, o->retain, o->transport, o->processes || o->role,
                             &c->retain));
    DCR_CHECK(anchor_every_check(o, c));
    DCR_CHECK(dcr_cli_payload_key("bench", o->payload_key, &c->payload_key));
    if (o->control) DCR_CHECK(dcr_bench_control_check("--control", o->control));
    /* The launching run only: role processes join the plane it bootstrapped. */
    if (o->control && !o->role) DCR_CHECK(dcr_bench_control_fresh("--control", o->control));
    return dcr_cli_scenario_validate(&c->scenario, &c->serve);
}

/* Whether arg is one of the valued flags names[0..n), as `--flag VALUE`
 * (*takes_value: the value is the next argument) or `--flag=VALUE`. */
static bool valued_flag(const char *arg, const char *const *names, size_t n, bool *takes_value)
{
    *takes_value = false;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (!strncmp(arg, names[i], len) && (arg[len] == '\0' || arg[len] == '=')) {
            *takes_value = arg[len] == '\0';
            return true;
        }
    }
    return false;
}

/* Flags only the launcher of --processes reads; every other flag is the run
 * configuration each role process gets. */
static bool launcher_only(const char *arg, bool *takes_value)
{
    static const char *const flags[] = {"--processes", "--json", "--trace-overhead",
                                        "--restart-nodes", "--owner-threads"};
    /* --device: checked here; role processes' receivers take the default. */
    static const char *const valued[] = {"--out",           "--trace",
                                         "--workdir",       "--keep-payloads",
                                         "--sigkill-every", "--kill-coordinator-every",
                                         "--device",        "--testbed",
                                         "--testbed-id",    "--join-at"};
    *takes_value = false;
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (!strcmp(arg, flags[i])) return true;
    return valued_flag(arg, valued, sizeof(valued) / sizeof(valued[0]), takes_value);
}

/* With --testbed the links are the kernel's: the role processes get these
 * flags as 0 (no in-process pacing) instead of the user's. */
static bool testbed_replaced(const char *arg, bool *takes_value)
{
    static const char *const valued[] = {"--link-gbps", "--flow-gbps", "--local-gbps",
                                         "--latency-ms"};
    return valued_flag(arg, valued, sizeof(valued) / sizeof(valued[0]), takes_value);
}

/* --processes: the roles as processes of this host (deploy/). */
static dcr_status_t make_launcher(int argc, char **argv, const dcr_bench_config_t *c,
                                  char *const *extra, int nextra, dcr_role_launcher_t **out_p)
{
    char **fwd = calloc((size_t)argc + (size_t)nextra + 1, sizeof(char *));
    if (!fwd) return dcr_error_set(DCR_ENOMEM, "role arguments");
    int n = 0;
    for (int i = 1; i < argc; i++) {
        bool value;
        if (launcher_only(argv[i], &value) || (nextra > 0 && testbed_replaced(argv[i], &value)))
            i += value;
        else
            fwd[n++] = argv[i];
    }
    for (int i = 0; i < nextra; i++) fwd[n++] = extra[i];
    dcr_status_t st = dcr_role_launcher_create(c, fwd, n, out_p);
    free(fwd);
    return st;
}

static json_t *processes_json_base(const dcr_bench_result_t *r, int owner_procs, int restarts,
                                   int sigkills);

static json_t *processes_json(const dcr_bench_result_t *r, int owner_procs, int restarts,
                              int sigkills, int coord_kills, int coord_restarts)
{
    json_t *j = processes_json_base(r, owner_procs, restarts, sigkills);
    json_object_set_new(j, "coordinator_process", json_boolean(owner_procs > 0));
    json_object_set_new(j, "coordinator_kills", json_integer(coord_kills));
    json_object_set_new(j, "coordinator_restarts", json_integer(coord_restarts));
    return j;
}

static json_t *processes_json_base(const dcr_bench_result_t *r, int owner_procs, int restarts,
                                   int sigkills)
{
    /* owners: processes (an MPI job), or 1 when they are threads of the
     * launching process, which always holds the coordinator. */
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}", "owners", owner_procs ? owner_procs : 1,
                     "owner_threads", owner_procs ? 0 : r->owners, "rollout_nodes",
                     r->node_processes, "coordinator", 1, "verifier", 1, "node_restarts", restarts,
                     "sigkills", sigkills, "shared",
                     owner_procs ? "nothing: owners (mpirun), coordinator, nodes and verifier are "
                                   "processes"
                                 : "owners and coordinator in the launching process");
}

/* Receiver restores by kind (deploy/restorer.h), with the bytes
 * each kind moved and what dense refits of the same receivers move. */
static json_t *restores_json(const dcr_bench_result_t *r)
{
    return dcr_cli_restores_json(r->restores_by_kind, r->restore_bytes, r->restore_dense_bytes,
                                 r->restore_s);
}

/* --join-at STEP: usage errors, before anything runs (after testbed_check,
 * which may imply --processes). */
static dcr_status_t join_at_check(const bench_opts_t *o)
{
    if (!dcr_args_seen(o->args, o->nargs, "--join-at")) return DCR_OK;
    int64_t versions = o->warmup + o->refits;
    if (!o->processes)
        return dcr_error_set(DCR_EINVAL, "--join-at needs --processes (a rollout-node process "
                                         "that starts late)");
    if (o->testbed) return dcr_error_set(DCR_EINVAL, "--join-at does not apply with --testbed");
    if (strcmp(o->transport, "objstore"))
        return dcr_error_set(DCR_EINVAL,
                             "--join-at needs --transport objstore (got %s: a relay tree has no "
                             "place for a node that starts late)",
                             o->transport);
    if (o->nodes < 2)
        return dcr_error_set(DCR_EINVAL, "--join-at needs at least 2 rollout nodes (got %lld)",
                             (long long)o->nodes);
    if (o->sigkill_every > 0)
        return dcr_error_set(DCR_EINVAL, "--join-at does not combine with --sigkill-every (its "
                                         "kills in turn would aim at a node not started)");
    if (o->join_at >= versions)
        return dcr_error_set(DCR_EINVAL,
                             "--join-at %lld: expected a version below the last one, %lld "
                             "(--warmup %lld plus --refits %lld)",
                             (long long)o->join_at, (long long)versions, (long long)o->warmup,
                             (long long)o->refits);
    return DCR_OK;
}

/* --testbed netns: usage errors, before anything runs. It implies
 * --processes. */
static dcr_status_t testbed_check(bench_opts_t *o)
{
    if (!o->testbed) {
        if (dcr_args_seen(o->args, o->nargs, "--testbed-id"))
            return dcr_error_set(DCR_EINVAL, "--testbed-id needs --testbed netns");
        return DCR_OK;
    }
    if (strcmp(o->testbed, "netns"))
        return dcr_error_set(DCR_EINVAL, "--testbed %s: expected netns", o->testbed);
#ifndef DCR_HAVE_MPI
    return dcr_error_set(DCR_EINVAL, "--testbed needs a build with MPI (the owners are an MPI job "
                                     "across the training hosts)");
#endif
    if (o->store || o->s3_endpoint || o->control || o->keep || o->owner_threads)
        return dcr_error_set(DCR_EINVAL,
                             "--testbed brings its own store and control plane (s3rver and etcd on "
                             "its services host) and runs the owners by mpirun: drop --store, "
                             "--s3-endpoint, --control, --keep-payloads and --owner-threads");
    if (o->sc.nodes > 64 || o->nodes > 64)
        return dcr_error_set(DCR_EINVAL,
                             "--testbed: one host per node, at most 64 training and 64 rollout "
                             "hosts (got --train-nodes %lld, --rollout-nodes %lld)",
                             (long long)o->sc.nodes, (long long)o->nodes);
    o->processes = true;
    return DCR_OK;
}

/* --testbed netns: one testbed host per training node (its GPUs are the MPI
 * slots) and per rollout node, shaped as the bench's links; measured; this
 * process moves to the services host, and the run's store and control
 * plane are the testbed's. The per-flow cap and the latency need netem and
 * fq in the kernel: unless given, they are 0 here. The full-checkpoint
 * reference runs over the same shaped links (dcr_testbed_reference). */
static dcr_status_t testbed_start(const bench_opts_t *o, dcr_bench_config_t *c,
                                  dcr_testbed_t **tb_p, json_t **links_p)
{
    if (!dcr_args_seen(o->args, o->nargs, "--flow-gbps")) c->link.flow_gbps = 0;
    if (!dcr_args_seen(o->args, o->nargs, "--latency-ms")) c->link.latency_ms = 0;
    dcr_testbed_config_t tc = {.id = (int)o->testbed_id,
                               .train_hosts = (int)o->sc.nodes,
                               .rollout_hosts = (int)o->nodes,
                               .link_gbps = c->link.cross_gbps,
                               .local_gbps = c->link.local_gbps,
                               .flow_gbps = c->link.flow_gbps,
                               .latency_ms = c->link.latency_ms,
                               .upload_flows = (int)o->sc.gpus};
    DCR_CHECK(dcr_testbed_up(&tc, tb_p));
    DCR_CHECK(dcr_testbed_measure(*tb_p, links_p));
    DCR_CHECK(dcr_testbed_enter_services(*tb_p));
    DCR_CHECK(dcr_testbed_probe_store(*tb_p));
    c->store = dcr_testbed_store(*tb_p);
    c->s3_endpoint = dcr_testbed_s3_endpoint(*tb_p);
    c->control_path = dcr_testbed_control(*tb_p);
    /* The full-checkpoint reference over the same shaped links. */
    c->reference = dcr_testbed_reference;
    c->reference_ctx = *tb_p;
    return DCR_OK;
}

/* The elastic join's figures (the run has ended, its node processes have
 * stopped). Without its restore records (a warning said why) it still
 * says where the node joined; version 0: it had not joined by the end
 * (possible only with --no-verify: the verification waits for it). */
static void join_result(const bench_opts_t *o, dcr_role_launcher_t *l, dcr_role_join_t *out)
{
    uint64_t version = 0;
    double seconds = 0;
    if (!dcr_role_launcher_join_result(l, out)) {
        dcr_role_launcher_joined(l, 0, &version, &seconds);
        *out = (dcr_role_join_t){.node = (int)o->nodes - 1, .version = version, .seconds = seconds};
    }
    out->at_step = (int)o->join_at;
}

/* One measured rate: "  A B  M Mbit/s  configured C" (and a flag past 15%). */
static void print_rate(const char *a, const char *b, const json_t *l)
{
    const json_t *conf = json_object_get(l, "configured_mbit");
    char setting[48] = "unlimited";
    if (json_is_number(conf))
        snprintf(setting, sizeof(setting), "configured %.1f", json_number_value(conf));
    printf("  %-4s %-8s %10.1f Mbit/s  %s%s\n", a, b,
           json_number_value(json_object_get(l, "measured_mbit")), setting,
           json_is_true(json_object_get(l, "ok")) ? "" : "  OFF by more than 15%");
}

/* The testbed's endpoints, each shaped link's measured rate and the
 * reference's per host (the "testbed" object of the JSON output). */
static void print_testbed(const json_t *tb)
{
    printf("testbed %lld: control %s, s3 %s; measured links (timed TCP transfer):\n",
           (long long)json_integer_value(json_object_get(tb, "id")),
           json_string_value(json_object_get(tb, "control")),
           json_string_value(json_object_get(tb, "s3")));
    size_t i;
    const json_t *l;
    json_array_foreach(json_object_get(tb, "links"), i, l)
    {
        char to[16];
        snprintf(to, sizeof(to), "-> %s", json_string_value(json_object_get(l, "to")));
        print_rate(json_string_value(json_object_get(l, "from")), to, l);
    }
    const json_t *ref = json_object_get(tb, "reference");
    if (!ref) return;
    printf("reference over the testbed: %.3f s (up %.3f s, down %.3f s); per host:\n",
           json_number_value(json_object_get(ref, "seconds")),
           json_number_value(json_object_get(ref, "upload_s")),
           json_number_value(json_object_get(ref, "download_s")));
    json_array_foreach(json_object_get(ref, "hosts"), i, l)
        print_rate(json_string_value(json_object_get(l, "host")),
                   json_string_value(json_object_get(l, "direction")), l);
}

static int run(bench_opts_t *o, int argc, char **argv)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    dcr_bench_result_t r;
    int rc = dcr_cli_check("bench", testbed_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", join_at_check(o));
    if (rc) return rc;
    rc = dcr_cli_check("bench", fill_config(o, &c));
    if (rc) return rc;
    dcr_role_launcher_t *launcher = NULL;
    dcr_testbed_t *tb = NULL;
    json_t *tb_links = NULL;
    dcr_status_t st = DCR_OK;
    if (o->testbed) {
        dcr_interrupt_install();
        st = testbed_start(o, &c, &tb, &tb_links);
    }
    char *tb_args[] = {"--store",       (char *)c.store,
                       "--s3-endpoint", (char *)c.s3_endpoint,
                       "--control",     (char *)c.control_path,
                       "--link-gbps",   "0",
                       "--flow-gbps",   "0",
                       "--local-gbps",  "0",
                       "--latency-ms",  "0"};
    /* The relay moves payloads over the testbed's TCP links, not through
     * its store: the roles get no --store (they refuse it with relay). */
    int tb_skip = strcmp(o->transport, "relay") ? 0 : 4;
    if (st == DCR_OK && o->processes)
        st = make_launcher(argc, argv, &c, tb_args + tb_skip,
                           tb ? (int)(sizeof(tb_args) / sizeof(*tb_args)) - tb_skip : 0, &launcher);
    if (st == DCR_OK && tb) st = dcr_testbed_place_roles(tb, launcher, (int)o->sc.gpus);
    if (launcher) {
        c.processes = dcr_role_launcher_hooks(launcher);
        dcr_role_launcher_set_restart(launcher, o->restart_nodes);
        dcr_role_launcher_set_kills(launcher, (int)o->sigkill_every);
#ifdef DCR_HAVE_MPI
        dcr_role_launcher_set_owners(launcher, !o->owner_threads);
#endif
        dcr_role_launcher_set_coordinator_kills(launcher, (int)o->coord_kill_every);
        if (o->join_at > 0)
            dcr_role_launcher_set_join_at(launcher, (int)o->nodes - 1, (uint64_t)o->join_at);
    }
    int owner_procs = launcher ? dcr_role_launcher_owner_processes(launcher) : 0;
    dcr_interrupt_install();
    if (st == DCR_OK) st = dcr_bench_run(&c, &r);
    int restarts = launcher ? dcr_role_launcher_restarts(launcher) : 0;
    int sigkills = launcher ? dcr_role_launcher_sigkills(launcher) : 0;
    int coord_kills = launcher ? dcr_role_launcher_coordinator_kills(launcher) : 0;
    int coord_restarts = launcher ? dcr_role_launcher_coordinator_restarts(launcher) : 0;
    dcr_role_join_t join = {0};
    if (st == DCR_OK && o->join_at > 0) join_result(o, launcher, &join);
    dcr_role_launcher_destroy(launcher);
    json_t *tb_json = tb && tb_links ? dcr_testbed_json(tb) : NULL;
    if (tb_json) json_object_set(tb_json, "links", tb_links);
    json_decref(tb_links);
    dcr_testbed_destroy(tb);
    if (st != DCR_OK) {
        json_decref(tb_json);
        return dcr_cli_fail("bench", st);
    }
    json_t *config = config_json(o, &c);
    if (o->store) json_object_set_new(config, "store", json_string(o->store));
    if (o->trace) st = write_trace(o->trace);
    if (o->out && st == DCR_OK) st = append_results(o->out, &r, config);
    if (o->json) {
        json_t *j = result_json(&r, json_incref(config));
        if (r.node_processes)
            json_object_set_new(
                j, "processes",
                processes_json(&r, owner_procs, restarts, sigkills, coord_kills, coord_restarts));
        if (r.node_processes) json_object_set_new(j, "restores_by_kind", restores_json(&r));
        if (o->join_at > 0) json_object_set_new(j, "join", dcr_cli_join_json(&join));
        if (tb_json) json_object_set(j, "testbed", tb_json);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        print_text(&c, &r);
        if (r.node_processes && owner_procs)
            printf("processes: %d owner processes (mpirun), %d rollout-node processes (%d "
                   "SIGKILLs, %d restarts), a coordinator process (%d SIGKILLs, %d resumed by a "
                   "new process), a verifier process\n",
                   owner_procs, r.node_processes, sigkills, restarts, coord_kills, coord_restarts);
        else if (r.node_processes)
            printf("processes: %d rollout-node processes (%d SIGKILLs, %d restarts), a verifier "
                   "process; owners (%d threads) and the coordinator in this process\n",
                   r.node_processes, sigkills, restarts, r.owners);
        if (r.node_processes) {
            uint64_t bytes = 0, dense = 0;
            for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
                bytes += r.restore_bytes[k];
                dense += r.restore_dense_bytes[k];
            }
            printf("restores: ");
            dcr_cli_restores_print(r.restores_by_kind, bytes, dense);
        }
        char when[64];
        snprintf(when, sizeof when, "once version %lld was committed", (long long)o->join_at);
        dcr_cli_join_print(&join, when);
        if (tb_json) print_testbed(tb_json);
    }
    json_decref(tb_json);
    json_decref(config);
    rc = 0;
    if (st != DCR_OK) {
        rc = dcr_cli_fail("bench", st);
    } else if (!r.bit_exact) {
        fprintf(stderr, "dcr bench: a receiver differs from its dense refit\n");
        rc = 1;
    } else if (r.request_mismatches) {
        fprintf(stderr, "dcr bench: a request saw neither P^v nor P^{v+1}\n");
        rc = 1;
    }
    dcr_bench_result_free(&r);
    return rc;
}

/* Parses the run flags (and `extra`, a role's own) into *o; returns like
 * dcr_args_parse. */
static int parse_opts(bench_opts_t *o, const char *command, const char *usage, dcr_arg_t *extra,
                      int nextra, int argc, char **argv)
{
    *o = (bench_opts_t){.nodes = 2,
                        .per_node = 2,
                        .serve_tp = 2,
                        .warmup = 2,
                        .refits = 5,
                        .fanout = 2,
                        .seed = 42,
                        .transport = "objstore",
                        .mode = "X",
                        .rl = "sync",
                        .changes = "uniform",
                        .rate = 0.03,
                        .gbps = -1,
                        .flow_gbps = -1,
                        .local_gbps = -1,
                        .latency_ms = -1,
                        .lr = 1e-6};
    dcr_cli_scenario_init(&o->sc, DCR_MODEL_DEFAULT, 16, 8);
    o->sc.nodes = 2;
    o->sc.gpus = 2;
    o->sc.tp = 2;
    o->sc.etp = 0; /* auto: TP for models with experts, 1 otherwise */
    /* The command's own flags; the shared ones follow them in args. */
    const dcr_arg_t own[] = {
        {"--rollout-nodes", DCR_ARG_INT, &o->nodes, 1, 1024, "rollout nodes (default 2)", false},
        {"--receivers-per-node", DCR_ARG_INT, &o->per_node, 1, 64,
         "receivers (GPUs) per rollout node (default 2)", false},
        {"--serve-tp", DCR_ARG_INT, &o->serve_tp, 1, 64,
         "serving tensor parallel degree (default 2)", false},
        {"--serve-ep", DCR_ARG_FLAG, &o->serve_ep, 0, 0, "expert parallel inside serving instances",
         false},
        {"--fp32-norms", DCR_ARG_FLAG, &o->fp32_norms, 0, 0,
         "serving variant: norms kept in FP32 (cast path)", false},
        {"--w2-transposed", DCR_ARG_FLAG, &o->w2_t, 0, 0, "serving variant: transposed FusedMoE w2",
         false},
        {"--transport", DCR_ARG_STRING, &o->transport, 0, 0, "objstore | relay (default objstore)",
         false},
        {"--fanout", DCR_ARG_INT, &o->fanout, 1, 64, "relay tree fan-out (default 2)", false},
        {"--link-gbps", DCR_ARG_DOUBLE, &o->gbps, 0, 1e4,
         "cross-cluster Gbps per node (0: unlimited)", false},
        {"--flow-gbps", DCR_ARG_DOUBLE, &o->flow_gbps, 0, 1e4, "cross-cluster Gbps per flow",
         false},
        {"--local-gbps", DCR_ARG_DOUBLE, &o->local_gbps, 0, 1e4, "rollout-local Gbps per node",
         false},
        {"--latency-ms", DCR_ARG_DOUBLE, &o->latency_ms, 0, 1e4, "one-way cross-cluster latency",
         false},
        {"--change-rate", DCR_ARG_DOUBLE, &o->rate, 0, 1,
         "uniform change rate per owned shard (default 0.03)", false},
        {"--init", DCR_ARG_STRING, &o->init, 0, 0,
         "start from this safetensors checkpoint's values (leading blocks when scaled)", false},
        {"--changes", DCR_ARG_STRING, &o->changes, 0, 0,
         "uniform (default) | adamw (AdamW trajectories) | profile:FILE (a measured change "
         "profile of dcr diff --profile, replayed)",
         false},
        {"--lr", DCR_ARG_DOUBLE, &o->lr, 0, 1, "learning rate of --changes adamw (default 1e-6)",
         false},
        {"--mode", DCR_ARG_STRING, &o->mode, 0, 0, "X | P | F construction mode (default X)",
         false},
        {"--rl", DCR_ARG_STRING, &o->rl, 0, 0, "sync | async (default sync)", false},
        {"--warmup", DCR_ARG_INT, &o->warmup, 0, 1000, "warm-up refits (default 2)", false},
        {"--refits", DCR_ARG_INT, &o->refits, 1, 100000, "timed refits (default 5)", false},
        {"--no-shuffle", DCR_ARG_FLAG, &o->no_shuffle, 0, 0,
         "payloads without the byte-plane shuffle (on by default)", false},
        {"--chunk-mib", DCR_ARG_DOUBLE, &o->chunk_mib, 0, 1 << 20,
         "chunk target in MiB (default: scaled, see README)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o->bucket_mib, 0, 1 << 20,
         "bucket target in MiB (default: scaled, see README)", false},
        {"--no-verify", DCR_ARG_FLAG, &o->no_verify, 0, 0,
         "skip the dense-refit comparison after timed refits", false},
        {"--keep-payloads", DCR_ARG_STRING, &o->keep, 0, 0,
         "keep the object store in DIR: the last attempt's payloads and manifest stay there",
         false},
        {"--workdir", DCR_ARG_STRING, &o->workdir, 0, 0,
         "directory for object store and control plane (default: temp)", false},
        {"--store", DCR_ARG_STRING, &o->store, 0, 0,
         "object store: dir:PATH or s3://BUCKET/PREFIX (default: a directory in the work dir)",
         false},
        {"--s3-endpoint", DCR_ARG_STRING, &o->s3_endpoint, 0, 0,
         "S3 service of an s3:// store, http[s]://HOST[:PORT]; credentials from AWS_ACCESS_KEY_ID, "
         "AWS_SECRET_ACCESS_KEY, AWS_REGION",
         false},
        {"--control", DCR_ARG_STRING, &o->control, 0, 0,
         "SQLite control-plane FILE, or etcd://HOST:PORT[/PREFIX] for an etcd cluster (each run "
         "under PREFIX/bench-<pid>-<ns>; default: a file in the work dir)",
         false},
        {"--trace", DCR_ARG_STRING, &o->trace, 0, 0,
         "write the stage trace as Chrome trace JSON (opens in Perfetto)", false},
        {"--trace-overhead", DCR_ARG_FLAG, &o->trace_overhead, 0, 0,
         "alternate timed refits with the recorder on and off; report its cost", false},
        {"--out", DCR_ARG_STRING, &o->out, 0, 0, "append the run to this HDF5 results file", false},
        {"--readers", DCR_ARG_INT, &o->readers, 0, 64,
         "request emulation: threads reading a receiver through the gate", false},
        {"--seed", DCR_ARG_INT, &o->seed, 0, 1e15, "seed of weights and changes (default 42)",
         false},
        {"--json", DCR_ARG_FLAG, &o->json, 0, 0, "print one JSON object", false},
        {"--payload-key", DCR_ARG_STRING, &o->payload_key, 0, 0,
         "sign and verify payloads with the 32-byte key in FILE (keyed BLAKE2b-128)", false},
        {"--anchor-every", DCR_ARG_INT, &o->anchor_every, 0, 1000000,
         "--processes: node 0 writes an anchor (a dense snapshot) after every N-th commit, "
         "from which a node added mid-run joins plus replay (default 0: never)",
         false},
        {"--retain", DCR_ARG_INT, &o->retain, 1, 1000000,
         "keep the payloads of the last K committed versions for replay (default 8 with "
         "--processes, else none)",
         false},
    };
    enum { NOWN = sizeof own / sizeof own[0] };
    _Static_assert(NOWN + DCR_CLI_SCENARIO_NARGS + 9 <= sizeof(o->args) / sizeof(o->args[0]),
                   "bench_opts_t.args too small");
    memcpy(o->args, own, sizeof own);
    int n = NOWN;
    dcr_cli_scenario_args(&o->sc, o->args + n);
    n += DCR_CLI_SCENARIO_NARGS;
    for (int i = 0; i < nextra && n < (int)(sizeof(o->args) / sizeof(o->args[0])); i++)
        o->args[n++] = extra[i];
    o->nargs = n;
    return dcr_args_parse(command, usage, o->args, n, argc, argv, NULL, 0, NULL);
}

int dcr_cli_run_config(const char *command, const char *usage, dcr_arg_t *extra, int nextra,
                       int argc, char **argv, dcr_bench_config_t *cfg)
{
    static bench_opts_t o; /* flags point into it; one parse per process */
    int rc = parse_opts(&o, command, usage, extra, nextra, argc, argv);
    if (rc) return rc;
    o.role = true;
    *cfg = dcr_bench_config_default();
    return dcr_cli_check(command, fill_config(&o, cfg));
}

int dcr_cmd_bench(int argc, char **argv)
{
    bench_opts_t o;
    dcr_arg_t processes = {"--processes",
                           DCR_ARG_FLAG,
                           &o.processes,
                           0,
                           0,
                           "every role as processes of this host (sync RL; objstore, or relay over "
                           "TCP between the processes): the owners "
                           "as an MPI job (mpirun -np <training ranks> dcr owner; as root with "
                           "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 set for "
                           "the job), a coordinator process, one process per rollout node, a "
                           "verifier",
                           false};
    dcr_arg_t coord_kills = {"--kill-coordinator-every",
                             DCR_ARG_INT,
                             &o.coord_kill_every,
                             0,
                             1000000,
                             "--processes: SIGKILL the coordinator process in every N-th "
                             "transition (after it opened the attempt, or once the owners sent, "
                             "in turn); a new coordinator process resumes it",
                             false};
    dcr_arg_t owner_threads = {"--owner-threads",
                               DCR_ARG_FLAG,
                               &o.owner_threads,
                               0,
                               0,
                               "--processes: the owners as threads of this process instead of an "
                               "MPI job (the only way in a build without MPI)",
                               false};
    dcr_arg_t restart = {"--restart-nodes",
                         DCR_ARG_FLAG,
                         &o.restart_nodes,
                         0,
                         0,
                         "--processes: restart a rollout-node process that dies (it restores the "
                         "committed version, by replay of retained versions where it can, before "
                         "it joins)",
                         false};
    dcr_arg_t kills = {"--sigkill-every",
                       DCR_ARG_INT,
                       &o.sigkill_every,
                       0,
                       1000000,
                       "--processes: SIGKILL a rollout-node process after every N-th commit, "
                       "nodes and points (joined, done) in turn; implies --restart-nodes",
                       false};
    dcr_arg_t testbed = {"--testbed",
                         DCR_ARG_STRING,
                         &o.testbed,
                         0,
                         0,
                         "netns: --processes across a network-namespace testbed of this machine "
                         "(scripts/testbed.sh; root): one host per training node (owners by "
                         "mpirun) and per rollout node, the kernel shaping --link-gbps and "
                         "--local-gbps, etcd and s3rver on its services host",
                         false};
    dcr_arg_t testbed_id = {"--testbed-id",
                            DCR_ARG_INT,
                            &o.testbed_id,
                            0,
                            55,
                            "--testbed: the testbed's id (namespaces dcrtb-<id>-*, subnet "
                            "10.(200+id).0.0/16; default 0)",
                            false};
    dcr_arg_t join_at = {"--join-at",
                         DCR_ARG_INT,
                         &o.join_at,
                         1,
                         1000000,
                         "--processes, an elastic join: the last rollout node's process starts "
                         "once version STEP is committed (warm-up refits count), not with the "
                         "others; it restores (from an anchor plus replay with --anchor-every N, "
                         "else densely) and joins the attempts prepared after it is ready; the "
                         "results say how (\"join\": its restores by kind, bytes against dense "
                         "refits); objstore, 2 or more rollout nodes",
                         false};
    dcr_arg_t own[9] = {processes,     restart,     kills,
                        owner_threads, coord_kills, dcr_cli_device_arg(&o.device),
                        testbed,       testbed_id,  join_at};
    int rc = parse_opts(
        &o, "bench",
        "[model and layout flags] [rollout flags] [--transport objstore|relay] "
        "[--store s3://BUCKET/PREFIX --s3-endpoint URL] [--change-rate R] "
        "[--mode X|P|F] [--rl sync|async] [--processes | --testbed netns] [--device cpu|cuda|auto] "
        "[--json]",
        own, 9, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    dcr_device_t *dev = NULL; /* cuda without a GPU: one line, exit 2, before any work */
    if ((rc = dcr_cli_device_open("bench", o.device ? o.device : "cpu", &dev))) return rc;
    bool host = dcr_device_backend(dev)->props.host_addressable;
    dcr_device_destroy(dev);
    if (!host && (o.processes || o.testbed))
        return dcr_cli_usage("bench", dcr_error_set(DCR_EINVAL,
                                                    "--device %s: the --processes roles keep "
                                                    "their receivers on cpu (no --device there)",
                                                    o.device));
    return run(&o, argc, argv);
}
