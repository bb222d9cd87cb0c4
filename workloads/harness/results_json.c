/* A bench run's results as JSON, text and an HDF5 run (results_json.h). */
#include "workloads/harness/results_json.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "dcr/trace.h"
#include "workloads/harness/results.h"
#include "workloads/train/megatron.h"

json_t *dcr_bench_config_json(const dcr_bench_config_t *c, const char *changes, const char *store)
{
    const dcr_scenario_spec_t *s = &c->run.scenario;
    json_t *j = json_pack(
        "{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:b,s:s,s:s,s:f,s:f,s:f,s:f,s:f,s:I,"
        "s:f,s:s,s:s,"
        "s:I,s:I,s:b,s:I}",
        "model", s->model, "scale", (json_int_t)s->scale, "layers", (json_int_t)s->layers,
        "train_nodes", (json_int_t)s->train.nodes, "gpus_per_node",
        (json_int_t)s->train.gpus_per_node, "tp", (json_int_t)s->train.tp, "etp",
        (json_int_t)s->train.etp, "ep", (json_int_t)s->train.ep, "pp", (json_int_t)s->train.pp,
        "mapping", dcr_mapping_name(s->mapping), "rollout_nodes", (json_int_t)c->run.serve.nodes,
        "receivers_per_node", (json_int_t)c->run.serve.gpus_per_node, "serve_tp",
        (json_int_t)c->run.serve.tp, "serve_ep", c->run.serve.ep, "transport", c->run.transport,
        "changes", changes, "lr", c->run.lr, "cross_gbps", c->run.link.cross_gbps, "flow_gbps",
        c->run.link.flow_gbps, "local_gbps", c->run.link.local_gbps, "latency_ms",
        c->run.link.latency_ms, "fanout", (json_int_t)c->run.fanout, "change_rate",
        c->run.change_rate, "mode", dcr_construct_mode_name(c->run.mode), "rl",
        dcr_rl_mode_name(c->run.rl), "warmup", (json_int_t)c->warmup, "refits",
        (json_int_t)c->refits, "shuffle", c->run.shuffle, "seed", (json_int_t)c->run.seed);
    /* Whether payloads were signed; the key itself never leaves the process. */
    if (j) json_object_set_new(j, "payload_keyed", json_boolean(c->run.payload_key.set));
    /* The checkpoint the weights started from, or null for synthetic weights. */
    if (j) json_object_set_new(j, "init", c->run.init ? json_string(c->run.init) : json_null());
    if (j && store) json_object_set_new(j, "store", json_string(store));
    /* Output choices that change what is measured, so that dcr compare pairs
     * a verified run only with a verified one, and a run whose recorder was
     * off for half its refits only with another such run. */
    if (j) json_object_set_new(j, "verify", json_boolean(c->verify));
    if (j) json_object_set_new(j, "trace_overhead", json_boolean(c->trace_overhead));
    return j;
}

void dcr_bench_config_set_run_directory(json_t *config, bool in_memory)
{
    if (config)
        json_object_set_new(config, "run_directory", json_string(in_memory ? "memory" : "disk"));
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

/* The store's CPU per refit against the mean latency. */
static double store_busy_share(const dcr_bench_result_t *r)
{
    return r->mean_latency_s > 0 ? r->store_cpu_mean_s / r->mean_latency_s : 0.0;
}

static json_t *refit_json(const dcr_bench_refit_t *f, bool store_cpu)
{
    json_t *j = json_pack(
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
    /* Retention of the version (--retain): copied after the commit. */
    if (j)
        json_object_set_new(j, "retain",
                            json_pack("{s:I,s:f,s:f}", "bytes", (json_int_t)f->retain_bytes, "s",
                                      f->retain_s, "wait_s", f->retain_wait_s));
    if (j && store_cpu) json_object_set_new(j, "store_cpu_s", json_real(f->store_cpu_s));
    return j;
}

json_t *dcr_bench_result_json(const dcr_bench_result_t *r, json_t *config)
{
    json_t *refits = json_array();
    for (int i = 0; i < r->nrefits; i++)
        json_array_append_new(refits, refit_json(&r->refits[i], r->store_cpu_measured));
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
    if (r->store_cpu_measured) {
        json_object_set_new(j, "store_cpu_s_mean", json_real(r->store_cpu_mean_s));
        json_object_set_new(j, "store_cpu_share_of_latency", json_real(store_busy_share(r)));
    }
    json_object_set_new(j, "memory_estimate_bytes", json_integer(r->memory_estimate_bytes));
    json_object_set_new(j, "peak_rss_bytes", json_integer(r->peak_rss_bytes));
    if (r->overhead.refits_off > 0) json_object_set_new(j, "trace_overhead", overhead_json(r));
    json_object_set_new(j, "payloads_rejected", json_integer(r->payloads_rejected));
    json_object_set_new(j, "payloads_unauthenticated", json_integer(r->payloads_unauthenticated));
    /* One side of an interleaved run (dcr bench --ab): dcr compare AB.h5
     * finds the two sides by it. */
    if (r->ab_side) json_object_set_new(j, DCR_RESULTS_AB_SIDE, json_stringn(&r->ab_side, 1));
    return j;
}

/* The table of timed refits: the seed's bounds where recorded. */
static void print_refits(const dcr_bench_result_t *r)
{
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
}

/* The means against the bounds (of the recorded refits only), CPU, and the
 * recorder's cost with --trace-overhead. */
static void print_means(const dcr_bench_result_t *r)
{
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
    if (r->store_cpu_measured)
        printf("store CPU per refit: %.3f s, %.2f of the mean latency (a one-threaded store at "
               "1.00 is saturated: its CPU is then the refit's floor)\n",
               r->store_cpu_mean_s, store_busy_share(r));
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
}

void dcr_bench_result_print(const dcr_bench_config_t *c, const dcr_bench_result_t *r)
{
    printf("links: cross %.3g Gbps per node, flow %.3g Gbps, local %.3g Gbps, latency %.3g ms\n",
           c->run.link.cross_gbps, c->run.link.flow_gbps, c->run.link.local_gbps,
           c->run.link.latency_ms);
    printf("run directory %s\n", r->workdir_in_memory ? "in memory" : "on disk");
    printf("checkpoint %lld bytes, %d owners, %d receivers, %zu XOR / %zu overwrite tensors\n\n",
           (long long)r->checkpoint_bytes, r->owners, r->receivers, r->xor_tensors,
           r->overwrite_tensors);
    print_refits(r);
    print_means(r);
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
    if (c->run.payload_key.set || r->payloads_rejected)
        printf("payloads %s; refused %lld, of which unauthenticated %lld\n",
               c->run.payload_key.set ? "signed with the payload key" : "unkeyed",
               (long long)r->payloads_rejected, (long long)r->payloads_unauthenticated);
}

/* The per-refit columns of the HDF5 run, column k at cols + k * n; NaN
 * marks a bound that was not measured (--trace-overhead). malloc'd. */
static double *result_columns(const dcr_bench_result_t *r)
{
    size_t n = (size_t)r->nrefits;
    double *cols = calloc((DCR_RESULTS_NCOLUMNS + 1) * (n ? n : 1), sizeof(double));
    for (size_t i = 0; cols && i < n; i++) {
        const dcr_bench_refit_t *f = &r->refits[i];
        cols[DCR_RESULTS_LATENCY_S * n + i] = f->latency_s;
        cols[DCR_RESULTS_PAYLOAD_BYTES * n + i] = (double)f->payload_bytes;
        cols[DCR_RESULTS_CROSS_BYTES * n + i] = (double)f->cross_bytes;
        cols[DCR_RESULTS_RAW_CHANGED_VALUE_BYTES * n + i] = (double)f->raw_changed_value_bytes;
        cols[DCR_RESULTS_CHANGED_ELEMENTS * n + i] = (double)f->changed_elements;
        cols[DCR_RESULTS_BIT_EXACT * n + i] = f->bit_exact ? 1.0 : 0.0;
        cols[DCR_RESULTS_CONSTRUCTION_LB_S * n + i] = f->traced ? f->construction_lb_s : NAN;
        cols[DCR_RESULTS_TRANSPORT_LB_S * n + i] = f->traced ? f->transport_lb_s : NAN;
        cols[DCR_RESULTS_FINALIZATION_S * n + i] = f->traced ? f->bound_finalization_s : NAN;
        cols[DCR_RESULTS_NCOLUMNS * n + i] = f->block; /* written only for --ab runs */
    }
    return cols;
}

/* The recorded intervals as the run's [n][6] table (start_ns, end_ns,
 * refit, stage, actor, id); NULL with *n_p 0 when there are none. */
static int64_t (*interval_table(size_t *n_p))[6]
{
    dcr_trace_interval_t *iv = NULL;
    size_t niv = 0;
    int64_t(*table)[6] = NULL;
    *n_p = 0;
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
        *n_p = niv;
    }
    free(iv);
    return table;
}

/* The revision in a run's "dcr_version" (a --version line, "dcr V (git REV)",
 * checked when it was read; --ab-binary records each side's), so that side
 * B's run names the build that made it; NULL when the config has none. */
static const char *version_revision(json_t *config, char *rev, size_t cap)
{
    const char *v = json_string_value(json_object_get(config, "dcr_version"));
    const char *at = v ? strstr(v, "(git ") : NULL;
    if (!at) return NULL;
    at += 5;
    size_t n = strcspn(at, ")\n");
    if (n == 0 || n >= cap || at[n] != ')') return NULL;
    memcpy(rev, at, n);
    rev[n] = '\0';
    return rev;
}

dcr_status_t dcr_bench_results_append(const char *path, const dcr_bench_result_t *r, json_t *config)
{
    size_t n = (size_t)r->nrefits;
    double *cols = result_columns(r);
    if (!cols) return dcr_error_set(DCR_ENOMEM, "results columns");
    dcr_results_column_t columns[DCR_RESULTS_NCOLUMNS + 1];
    for (int k = 0; k < DCR_RESULTS_NCOLUMNS; k++)
        columns[k] = (dcr_results_column_t){dcr_results_column_names[k], cols + (size_t)k * n};
    columns[DCR_RESULTS_NCOLUMNS] =
        (dcr_results_column_t){DCR_RESULTS_BLOCK, cols + (size_t)DCR_RESULTS_NCOLUMNS * n};
    size_t ncolumns = DCR_RESULTS_NCOLUMNS + (r->ab_side ? 1 : 0);
    json_t *summary = dcr_bench_result_json(r, json_incref(config));
    json_object_del(summary, "refits");
    json_object_del(summary, "config");
    char *config_text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS),
         *summary_text = json_dumps(summary, JSON_COMPACT);
    char rev[128];
    dcr_results_run_t run = {"bench", config_text, summary_text,
                             n,       ncolumns,    columns,
                             0,       NULL,        version_revision(config, rev, sizeof(rev))};
    int64_t(*table)[6] = interval_table(&run.nintervals);
    run.intervals = (const int64_t(*)[6])table;
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

json_t *dcr_bench_processes_json(const dcr_bench_result_t *r, const dcr_bench_process_counts_t *p)
{
    /* owners: processes (an MPI job), or 1 when they are threads of the
     * launching process, which always holds the coordinator. */
    int owners = p->owner_processes;
    json_t *j = json_pack(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}", "owners", owners ? owners : 1, "owner_threads",
        owners ? 0 : r->owners, "rollout_nodes", r->node_processes, "coordinator", 1, "verifier", 1,
        "node_restarts", p->node_restarts, "sigkills", p->sigkills, "shared",
        owners ? "nothing: owners (mpirun), coordinator, nodes and verifier are processes"
               : "owners and coordinator in the launching process");
    json_object_set_new(j, "coordinator_process", json_boolean(owners > 0));
    json_object_set_new(j, "coordinator_kills", json_integer(p->coordinator_kills));
    json_object_set_new(j, "coordinator_restarts", json_integer(p->coordinator_restarts));
    return j;
}

void dcr_bench_processes_print(const dcr_bench_result_t *r, const dcr_bench_process_counts_t *p)
{
    if (!r->node_processes) return;
    if (p->owner_processes)
        printf("processes: %d owner processes (mpirun), %d rollout-node processes (%d "
               "SIGKILLs, %d restarts), a coordinator process (%d SIGKILLs, %d resumed by a "
               "new process), a verifier process\n",
               p->owner_processes, r->node_processes, p->sigkills, p->node_restarts,
               p->coordinator_kills, p->coordinator_restarts);
    else
        printf("processes: %d rollout-node processes (%d SIGKILLs, %d restarts), a verifier "
               "process; owners (%d threads) and the coordinator in this process\n",
               r->node_processes, p->sigkills, p->node_restarts, r->owners);
    uint64_t bytes = 0, dense = 0;
    for (int k = 0; k < DCR_RESTORE_KINDS; k++) {
        bytes += r->restore_bytes[k];
        dense += r->restore_dense_bytes[k];
    }
    printf("restores: ");
    dcr_bench_restores_print(r->restores_by_kind, bytes, dense);
}

json_t *dcr_bench_restores_json(const uint64_t count[DCR_RESTORE_KINDS],
                                const uint64_t bytes[DCR_RESTORE_KINDS],
                                const uint64_t dense_bytes[DCR_RESTORE_KINDS],
                                const double seconds[DCR_RESTORE_KINDS])
{
    json_t *j = json_object();
    for (int k = 0; j && k < DCR_RESTORE_KINDS; k++)
        json_object_set_new(j, dcr_restore_kind_name((dcr_restore_kind_t)k),
                            json_pack("{s:I,s:I,s:I,s:f}", "count", (json_int_t)count[k], "bytes",
                                      (json_int_t)bytes[k], "dense_bytes",
                                      (json_int_t)dense_bytes[k], "seconds", seconds[k]));
    return j;
}

void dcr_bench_restores_print(const uint64_t counts[DCR_RESTORE_KINDS], uint64_t bytes,
                              uint64_t dense_bytes)
{
    for (int k = 0; k < DCR_RESTORE_KINDS; k++)
        printf("%s%s %llu", k ? ", " : "", dcr_restore_kind_name((dcr_restore_kind_t)k),
               (unsigned long long)counts[k]);
    printf("; bytes moved %llu (dense refits of the same receivers: %llu)\n",
           (unsigned long long)bytes, (unsigned long long)dense_bytes);
}
