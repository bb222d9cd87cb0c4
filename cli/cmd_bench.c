/* dcr bench: end-to-end refits, the reference, speedup, bit-exactness. */
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
#include "dcr/trace.h"
#include "deploy/join_report.h"
#include "deploy/launch.h"
#include "deploy/restorer.h"
#include "deploy/testbed.h"
#include "reports/trace_io.h"
#include "scenario_args.h"
#include "workloads/change/change_profile.h"
#include "workloads/harness/bench.h"
#include "workloads/harness/bench_ab.h"
#include "workloads/harness/interrupt.h"
#include "workloads/harness/results.h"
#include "workloads/harness/results_json.h"

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
    const char *device;    /* --device: the receivers' and owners' place (not role processes') */
    const char *ab;        /* --ab SPEC: interleaved A/B (run_ab) */
    const char *ab_binary; /* --ab-binary OTHER_DCR: side B another build (run_ab_binary) */
    int64_t ab_worker;     /* --ab-worker FD: side B of a parent's --ab-binary (run_ab_worker) */
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

/* The flags' values into the run configuration (checked by fill_config). */
static void fill_values(const bench_opts_t *o, dcr_bench_config_t *c)
{
    c->run.adamw = !strcmp(o->changes, "adamw");
    c->run.lr = o->lr;
    c->run.serve.nodes = (int)o->nodes;
    c->run.serve.gpus_per_node = (int)o->per_node;
    c->run.serve.tp = (int)o->serve_tp;
    c->run.serve.ep = o->serve_ep;
    c->run.serve.fp32_norms = o->fp32_norms;
    c->run.serve.w2_transposed = o->w2_t;
    c->run.device = o->device;
    c->run.transport = o->transport;
    if (o->gbps >= 0) c->run.link.cross_gbps = o->gbps;
    if (o->flow_gbps >= 0) c->run.link.flow_gbps = o->flow_gbps;
    if (o->local_gbps >= 0) c->run.link.local_gbps = o->local_gbps;
    if (o->latency_ms >= 0) c->run.link.latency_ms = o->latency_ms;
    c->run.fanout = (int)o->fanout;
    c->run.change_rate = o->rate;
    c->run.init = o->init;
    c->warmup = (int)o->warmup;
    c->refits = (int)o->refits;
    c->verify = !o->no_verify;
    c->run.shuffle = !o->no_shuffle;
    c->run.chunk_bytes = (size_t)(o->chunk_mib * (1 << 20));
    c->run.bucket_bytes = (size_t)(o->bucket_mib * (1 << 20));
    c->run.workdir = o->keep ? o->keep : o->workdir;
    c->workdir_flag = o->keep ? "--keep-payloads" : "--workdir";
    c->keep_payloads = o->keep != NULL;
    c->workdir_in_memory = true; /* the closer model of a deployment (bench.h) */
    c->run.control_path = o->control;
    c->run.seed = (uint64_t)o->seed;
    c->readers = (int)o->readers;
    c->trace_overhead = o->trace_overhead;
    c->run.store = o->store;
    c->run.s3_endpoint = o->s3_endpoint;
    c->keep_trace = o->trace || o->out;
    c->run.anchor_every = (int)o->anchor_every;
}

/* Every flag, the layout and every path, before the run: what fails here
 * is a usage error (or an unwritable place) found in the first second. The
 * rules of the configuration itself are dcr_bench_config_check's. */
static dcr_status_t fill_config(bench_opts_t *o, dcr_bench_config_t *c)
{
    DCR_CHECK(check_store(o));
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &c->run.scenario));
    DCR_CHECK(dcr_construct_mode_parse(o->mode, &c->run.mode));
    DCR_CHECK(dcr_rl_mode_parse(o->rl, &c->run.rl));
    DCR_CHECK(dcr_cli_changes_check(o->args, o->nargs, o->changes, true));
    if (!strncmp(o->changes, "profile:", 8)) {
        DCR_CHECK(dcr_change_profile_load(o->changes + 8, &o->profile));
        c->run.profile = &o->profile;
    }
    /* The relay across processes connects owner ranks to the root node
     * process; owner threads of the launcher hold no part of that tree.
     * On --testbed the owners are an MPI job in the training hosts and each
     * node listens on its rollout host's address (dcr_testbed_place_roles). */
    if (!strcmp(o->transport, "relay") && o->processes && o->owner_threads)
        return dcr_error_set(DCR_EINVAL,
                             "--transport relay with --processes needs the owners as an MPI job "
                             "(not --owner-threads)");
    DCR_CHECK(
        dcr_cli_paths_check(o->out, o->trace, o->keep, o->role ? NULL : o->workdir, o->control));
    if (o->out) DCR_CHECK(dcr_results_check("--out", o->out));
    fill_values(o, c);
    /* A run's flags as its role processes and `dcr faults --processes`
     * parse them (o->role) are a --processes run's: the same default window,
     * or the faults launcher would retain nothing and every restore that
     * needs a retained version would fall back to a dense refit. */
    DCR_CHECK(dcr_cli_retain(o->args, o->nargs, o->retain, o->transport, o->processes || o->role,
                             &c->run.retain));
    DCR_CHECK(dcr_bench_config_check(c, o->processes || o->role));
    DCR_CHECK(dcr_cli_payload_key("bench", o->payload_key, &c->run.payload_key));
    if (o->control) DCR_CHECK(dcr_run_control_check("--control", o->control));
    /* The launching run only: role processes join the plane it bootstrapped. */
    if (o->control && !o->role) DCR_CHECK(dcr_run_control_fresh("--control", o->control));
    return dcr_cli_scenario_validate(&c->run.scenario, &c->run.serve);
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
    static const char *const valued[] = {
        "--out",           "--trace",         "--workdir",
        "--keep-payloads", "--sigkill-every", "--kill-coordinator-every",
        "--device",        "--testbed",       "--testbed-id",
        "--join-at",       "--ab-binary",     "--ab-worker"};
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
    dcr_status_t st = dcr_role_launcher_create(&c->run, fwd, n, out_p);
    free(fwd);
    return st;
}

/* Flags that only mean something with --processes, or with the relay
 * tree, are refused elsewhere instead of being silently ignored (after
 * testbed_check, which may imply --processes). */
static dcr_status_t applies_check(const bench_opts_t *o)
{
    static const char *const processes_only[] = {"--sigkill-every", "--restart-nodes",
                                                 "--owner-threads", "--kill-coordinator-every"};
    for (size_t i = 0; i < sizeof(processes_only) / sizeof(processes_only[0]); i++)
        if (!o->processes && !o->role && dcr_args_seen(o->args, o->nargs, processes_only[i]))
            return dcr_error_set(DCR_EINVAL, "%s applies only with --processes", processes_only[i]);
    if (strcmp(o->transport, "relay") && dcr_args_seen(o->args, o->nargs, "--fanout"))
        return dcr_error_set(
            DCR_EINVAL, "--fanout is the relay tree's (--transport relay), not %s's", o->transport);
    return DCR_OK;
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
    if (!dcr_args_seen(o->args, o->nargs, "--flow-gbps")) c->run.link.flow_gbps = 0;
    if (!dcr_args_seen(o->args, o->nargs, "--latency-ms")) c->run.link.latency_ms = 0;
    dcr_testbed_config_t tc = {.id = (int)o->testbed_id,
                               .train_hosts = (int)o->sc.nodes,
                               .rollout_hosts = (int)o->nodes,
                               .link_gbps = c->run.link.cross_gbps,
                               .local_gbps = c->run.link.local_gbps,
                               .flow_gbps = c->run.link.flow_gbps,
                               .latency_ms = c->run.link.latency_ms,
                               .upload_flows = (int)o->sc.gpus};
    DCR_CHECK(dcr_testbed_up(&tc, tb_p));
    DCR_CHECK(dcr_testbed_measure(*tb_p, links_p));
    DCR_CHECK(dcr_testbed_enter_services(*tb_p));
    DCR_CHECK(dcr_testbed_probe_store(*tb_p));
    c->run.store = dcr_testbed_store(*tb_p);
    c->run.s3_endpoint = dcr_testbed_s3_endpoint(*tb_p);
    c->run.control_path = dcr_testbed_control(*tb_p);
    /* The full-checkpoint reference over the same shaped links. */
    c->reference = dcr_testbed_reference;
    c->reference_ctx = *tb_p;
    /* s3rver is one Node thread: its CPU per refit is a floor under the
     * object store's latency (meaningless for the relay, which skips it). */
    if (strcmp(o->transport, "relay")) {
        c->store_cpu_s = dcr_testbed_store_cpu_s;
        c->store_cpu_ctx = *tb_p;
    }
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

/* The launcher's settings from the flags (--restart-nodes, --sigkill-every,
 * owners by mpirun, coordinator kills, the elastic join). */
static void launcher_settings(const bench_opts_t *o, dcr_role_launcher_t *l)
{
    dcr_role_launcher_set_restart(l, o->restart_nodes);
    dcr_role_launcher_set_kills(l, (int)o->sigkill_every);
#ifdef DCR_HAVE_MPI
    dcr_role_launcher_set_owners(l, !o->owner_threads);
#endif
    dcr_role_launcher_set_coordinator_kills(l, (int)o->coord_kill_every);
    if (o->join_at > 0) dcr_role_launcher_set_join_at(l, (int)o->nodes - 1, (uint64_t)o->join_at);
}

/* The run's places: the testbed (--testbed), the role launcher
 * (--processes) with the testbed's store, control plane and unpaced links
 * in the role flags; c->processes gets the launcher's hooks. */
static dcr_status_t start_roles(const bench_opts_t *o, int argc, char **argv, dcr_bench_config_t *c,
                                dcr_role_launcher_t **launcher_p, dcr_testbed_t **tb_p,
                                json_t **links_p)
{
    if (o->testbed) {
        dcr_interrupt_install();
        DCR_CHECK(testbed_start(o, c, tb_p, links_p));
    }
    char *tb_args[] = {"--store",       (char *)c->run.store,
                       "--s3-endpoint", (char *)c->run.s3_endpoint,
                       "--control",     (char *)c->run.control_path,
                       "--link-gbps",   "0",
                       "--flow-gbps",   "0",
                       "--local-gbps",  "0",
                       "--latency-ms",  "0"};
    /* The relay moves payloads over the testbed's TCP links, not through
     * its store: the roles get no --store (they refuse it with relay). */
    int tb_skip = strcmp(o->transport, "relay") ? 0 : 4;
    if (o->processes)
        DCR_CHECK(make_launcher(argc, argv, c, tb_args + tb_skip,
                                *tb_p ? (int)(sizeof(tb_args) / sizeof(*tb_args)) - tb_skip : 0,
                                launcher_p));
    if (*tb_p) DCR_CHECK(dcr_testbed_place_roles(*tb_p, *launcher_p, (int)o->sc.gpus));
    if (*launcher_p) {
        c->processes = dcr_role_launcher_hooks(*launcher_p);
        launcher_settings(o, *launcher_p);
    }
    return DCR_OK;
}

/* What the launcher counted (all 0 without one). */
static dcr_bench_process_counts_t launcher_counts(dcr_role_launcher_t *l)
{
    if (!l) return (dcr_bench_process_counts_t){0};
    return (dcr_bench_process_counts_t){
        dcr_role_launcher_owner_processes(l), dcr_role_launcher_restarts(l),
        dcr_role_launcher_sigkills(l), dcr_role_launcher_coordinator_kills(l),
        dcr_role_launcher_coordinator_restarts(l)};
}

/* What a run left besides its result: the launcher's counts, the elastic
 * join, and the testbed's endpoints and measured links. */
typedef struct run_extras {
    dcr_bench_process_counts_t counts;
    dcr_role_join_t join;
    json_t *testbed;
    json_t *memory; /* memory per role (processes and testbed runs) */
} run_extras_t;

/* --json: one object, the result with its configuration and the extras. */
static void print_json(const bench_opts_t *o, const dcr_bench_result_t *r, json_t *config,
                       const run_extras_t *x)
{
    json_t *j = dcr_bench_result_json(r, json_incref(config));
    if (r->node_processes)
        json_object_set_new(j, "processes", dcr_bench_processes_json(r, &x->counts));
    if (r->node_processes)
        json_object_set_new(j, "restores_by_kind",
                            dcr_bench_restores_json(r->restores_by_kind, r->restore_bytes,
                                                    r->restore_dense_bytes, r->restore_s));
    if (o->join_at > 0) json_object_set_new(j, "join", dcr_role_join_json(&x->join));
    if (x->testbed) json_object_set(j, "testbed", x->testbed);
    if (x->memory) json_object_set(j, "memory_per_role", x->memory);
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

static void print_report(const bench_opts_t *o, const dcr_bench_config_t *c,
                         const dcr_bench_result_t *r, const run_extras_t *x)
{
    dcr_bench_result_print(c, r);
    dcr_bench_processes_print(r, &x->counts);
    char when[64];
    snprintf(when, sizeof when, "once version %lld was committed", (long long)o->join_at);
    dcr_role_join_print(&x->join, when);
    if (x->testbed) print_testbed(x->testbed);
}

/* The outputs of a run that ended (--trace, --out, then stdout) and the
 * exit status: 1 for a receiver that differs or a mixed request. */
static int finish(const bench_opts_t *o, const dcr_bench_config_t *c, dcr_bench_result_t *r,
                  const run_extras_t *x)
{
    json_t *config = dcr_bench_config_json(c, o->changes, o->store);
    dcr_bench_config_set_run_directory(config, r->workdir_in_memory);
    dcr_status_t st = DCR_OK;
    if (o->trace) st = write_trace(o->trace);
    if (o->out && st == DCR_OK) st = dcr_bench_results_append(o->out, r, config);
    if (o->json)
        print_json(o, r, config, x);
    else
        print_report(o, c, r, x);
    json_decref(config);
    int rc = 0;
    if (st != DCR_OK) {
        rc = dcr_cli_fail("bench", st);
    } else if (!r->bit_exact) {
        fprintf(stderr, "dcr bench: a receiver differs from its dense refit\n");
        rc = 1;
    } else if (r->request_mismatches) {
        fprintf(stderr, "dcr bench: a request saw neither P^v nor P^{v+1}\n");
        rc = 1;
    }
    dcr_bench_result_free(r);
    return rc;
}

static int run(bench_opts_t *o, int argc, char **argv)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    dcr_bench_result_t r;
    int rc = dcr_cli_check("bench", testbed_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", applies_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", join_at_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", fill_config(o, &c));
    if (rc) return rc;
    dcr_role_launcher_t *launcher = NULL;
    dcr_testbed_t *tb = NULL;
    json_t *tb_links = NULL;
    dcr_status_t st = start_roles(o, argc, argv, &c, &launcher, &tb, &tb_links);
    dcr_interrupt_install();
    if (st == DCR_OK) st = dcr_bench_run(&c, &r);
    run_extras_t x = {.counts = launcher_counts(launcher)};
    if (st == DCR_OK && o->join_at > 0) join_result(o, launcher, &x.join);
    x.memory = launcher ? dcr_role_launcher_memory_json(launcher) : NULL;
    dcr_role_launcher_destroy(launcher);
    x.testbed = tb && tb_links ? dcr_testbed_json(tb) : NULL;
    if (x.testbed) json_object_set(x.testbed, "links", tb_links);
    json_decref(tb_links);
    dcr_testbed_destroy(tb);
    rc = st == DCR_OK ? finish(o, &c, &r, &x) : dcr_cli_fail("bench", st);
    json_decref(x.testbed);
    json_decref(x.memory);
    return rc;
}

/* The defaults of the run flags: dcr_bench_config_default's layout. */
static void opts_default(bench_opts_t *o)
{
    *o = (bench_opts_t){.nodes = 2,
                        .per_node = 2,
                        .serve_tp = 2,
                        .warmup = 2,
                        .refits = DCR_BENCH_DEFAULT_REFITS,
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
}

enum { NSERVE_ARGS = 12, NRUN_ARGS = 26 };

/* The rollout layout, the transport and the links: NSERVE_ARGS entries. */
static void serve_args(bench_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NSERVE_ARGS] = {
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
        {"--link-gbps", DCR_ARG_DOUBLE, &o->gbps, 0, 0,
         "cross-cluster Gbps per node (0: unlimited)", false},
        {"--flow-gbps", DCR_ARG_DOUBLE, &o->flow_gbps, 0, 0, "cross-cluster Gbps per flow", false},
        {"--local-gbps", DCR_ARG_DOUBLE, &o->local_gbps, 0, 0, "rollout-local Gbps per node",
         false},
        {"--latency-ms", DCR_ARG_DOUBLE, &o->latency_ms, 0, 0, "one-way cross-cluster latency",
         false},
    };
    memcpy(a, own, sizeof own);
}

/* The changes, the refits, the places and the outputs: NRUN_ARGS entries. */
static void run_args(bench_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NRUN_ARGS] = {
        {"--change-rate", DCR_ARG_DOUBLE, &o->rate, 0, 1,
         "uniform change rate per owned shard (default 0.03)", false},
        {"--init", DCR_ARG_STRING, &o->init, 0, 0,
         "start from this safetensors checkpoint's values (leading blocks when scaled)", false},
        {"--changes", DCR_ARG_STRING, &o->changes, 0, 0,
         "uniform (default) | adamw (AdamW trajectories) | profile:FILE (a measured change "
         "profile of dcr diff --profile, replayed)",
         false},
        {"--lr", DCR_ARG_DOUBLE, &o->lr, 0, 0, "learning rate of --changes adamw (default 1e-6)",
         false},
        {"--mode", DCR_ARG_STRING, &o->mode, 0, 0, "X | P | F construction mode (default X)",
         false},
        {"--rl", DCR_ARG_STRING, &o->rl, 0, 0, "sync | async (default sync)", false},
        {"--warmup", DCR_ARG_INT, &o->warmup, 0, 1000, "warm-up refits (default 2)", false},
        {"--refits", DCR_ARG_INT, &o->refits, 1, 100000,
         "timed refits (default 20; 40 a side in an A/B run)", false},
        {"--no-shuffle", DCR_ARG_FLAG, &o->no_shuffle, 0, 0,
         "payloads without the byte-plane shuffle (on by default)", false},
        {"--chunk-mib", DCR_ARG_DOUBLE, &o->chunk_mib, 0, 1 << 20,
         "chunk target in MiB (default: scaled, see docs/commands/bench.md)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o->bucket_mib, 0, 1 << 20,
         "bucket target in MiB (default: scaled, see docs/commands/bench.md)", false},
        {"--no-verify", DCR_ARG_FLAG, &o->no_verify, 0, 0,
         "skip the dense-refit comparison after timed refits", false},
        {"--keep-payloads", DCR_ARG_STRING, &o->keep, 0, 0,
         "keep the object store in DIR: the last attempt's payloads and manifest stay there",
         false},
        {"--workdir", DCR_ARG_STRING, &o->workdir, 0, 0,
         "run directory: object store, traces, digests, and the control plane unless --control "
         "(default: a temporary one in memory, /dev/shm, with the control plane in TMPDIR)",
         false},
        {"--store", DCR_ARG_STRING, &o->store, 0, 0,
         "object store: dir:PATH or s3://BUCKET/PREFIX (default: a directory in the work dir)",
         false},
        {"--s3-endpoint", DCR_ARG_STRING, &o->s3_endpoint, 0, 0,
         "S3 service of an s3:// store, http[s]://HOST[:PORT]; credentials from AWS_ACCESS_KEY_ID, "
         "AWS_SECRET_ACCESS_KEY, AWS_REGION",
         false},
        {"--control", DCR_ARG_STRING, &o->control, 0, 0,
         "SQLite control-plane FILE, or etcd://HOST:PORT[/PREFIX] for an etcd cluster (each run "
         "under PREFIX/bench-<pid>-<ns>; default: a file in TMPDIR, or in --workdir DIR)",
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
    memcpy(a, own, sizeof own);
}

/* Parses the run flags (and `extra`, a role's own) into *o; returns like
 * dcr_args_parse. The command's own flags come first, the shared ones
 * follow them in args. */
static int parse_opts(bench_opts_t *o, const char *command, const char *usage, dcr_arg_t *extra,
                      int nextra, int argc, char **argv)
{
    opts_default(o);
    enum { NOWN = NSERVE_ARGS + NRUN_ARGS };
    _Static_assert(NOWN + DCR_CLI_SCENARIO_NARGS + 12 <= sizeof(o->args) / sizeof(o->args[0]),
                   "bench_opts_t.args too small");
    serve_args(o, o->args);
    run_args(o, o->args + NSERVE_ARGS);
    int n = NOWN;
    dcr_cli_scenario_args(&o->sc, o->args + n);
    n += DCR_CLI_SCENARIO_NARGS;
    for (int i = 0; i < nextra && n < (int)(sizeof(o->args) / sizeof(o->args[0])); i++)
        o->args[n++] = extra[i];
    o->nargs = n;
    return dcr_args_parse(command, usage, o->args, n, argc, argv, NULL, 0, NULL);
}

int dcr_cli_bench_run_config(const char *command, const char *usage, dcr_arg_t *extra, int nextra,
                             int argc, char **argv, dcr_bench_config_t *cfg)
{
    static bench_opts_t o; /* flags point into it; one parse per process */
    int rc = parse_opts(&o, command, usage, extra, nextra, argc, argv);
    if (rc) return rc;
    o.role = true;
    *cfg = dcr_bench_config_default();
    return dcr_cli_check(command, fill_config(&o, cfg));
}

int dcr_cli_run_config(const char *command, const char *usage, dcr_arg_t *extra, int nextra,
                       int argc, char **argv, dcr_run_config_t *cfg)
{
    dcr_bench_config_t b;
    int rc = dcr_cli_bench_run_config(command, usage, extra, nextra, argc, argv, &b);
    if (rc == 0) *cfg = b.run;
    return rc;
}

/* The launcher's flags (--processes, --testbed and theirs) and --device:
 * NLAUNCHER_ARGS entries. */
enum { NLAUNCHER_ARGS = 12 };

static void launcher_args(bench_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NLAUNCHER_ARGS] = {
        {"--processes", DCR_ARG_FLAG, &o->processes, 0, 0,
         "every role as processes of this host (sync RL; objstore, or relay over "
         "TCP between the processes): the owners "
         "as an MPI job (mpirun -np <training ranks> dcr owner; as root with "
         "OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 set for "
         "the job), a coordinator process, one process per rollout node, a "
         "verifier",
         false},
        {"--restart-nodes", DCR_ARG_FLAG, &o->restart_nodes, 0, 0,
         "--processes: restart a rollout-node process that dies (it restores the "
         "committed version, by replay of retained versions where it can, before "
         "it joins)",
         false},
        {"--sigkill-every", DCR_ARG_INT, &o->sigkill_every, 0, 1000000,
         "--processes: SIGKILL a rollout-node process after every N-th commit, "
         "nodes and points (joined, done) in turn; implies --restart-nodes",
         false},
        {"--owner-threads", DCR_ARG_FLAG, &o->owner_threads, 0, 0,
         "--processes: the owners as threads of this process instead of an "
         "MPI job (the only way in a build without MPI)",
         false},
        {"--kill-coordinator-every", DCR_ARG_INT, &o->coord_kill_every, 0, 1000000,
         "--processes: SIGKILL the coordinator process in every N-th "
         "transition (after it opened the attempt, or once the owners sent, "
         "in turn); a new coordinator process resumes it",
         false},
        dcr_cli_device_arg(&o->device),
        {"--testbed", DCR_ARG_STRING, &o->testbed, 0, 0,
         "netns: --processes across a network-namespace testbed of this machine "
         "(scripts/testbed.sh; root): one host per training node (owners by "
         "mpirun) and per rollout node, the kernel shaping --link-gbps and "
         "--local-gbps, etcd and s3rver on its services host",
         false},
        {"--testbed-id", DCR_ARG_INT, &o->testbed_id, 0, 55,
         "--testbed: the testbed's id (namespaces dcrtb-<id>-*, subnet "
         "10.(200+id).0.0/16; default 0)",
         false},
        {"--join-at", DCR_ARG_INT, &o->join_at, 1, 1000000,
         "--processes, an elastic join: the last rollout node's process starts "
         "once version STEP is committed (warm-up refits count), not with the "
         "others; it restores (from an anchor plus replay with --anchor-every N, "
         "else densely) and joins the attempts prepared after it is ready; the "
         "results say how (\"join\": its restores by kind, bytes against dense "
         "refits); objstore, 2 or more rollout nodes",
         false},
        {"--ab", DCR_ARG_STRING, &o->ab, 0, 0,
         "KEY=VALUE[,KEY=VALUE...] or same: an interleaved A/B run in one process, side A this "
         "configuration, side B the same with the named flags changed (link_gbps=0.025), "
         "refits alternated in ABBA order; --out gets both sides (compare with dcr compare "
         "OUT.h5)",
         false},
        {"--ab-binary", DCR_ARG_STRING, &o->ab_binary, 0, 0,
         "OTHER_DCR: an interleaved A/B run of two builds, side A this binary, side B OTHER_DCR "
         "running the same configuration as a worker process (--ab-worker), one timed refit "
         "each in ABBA order; --out gets both sides and both --version lines (compare with dcr "
         "compare OUT.h5)",
         false},
        {"--ab-worker", DCR_ARG_INT, &o->ab_worker, 0, 1023,
         "FD: run as side B of another dcr's --ab-binary, answering on the socket FD (started "
         "by --ab-binary, not by hand)",
         false},
    };
    memcpy(a, own, sizeof own);
}

/* --device: cuda without a GPU is one line and exit 2 before any work; the
 * --processes roles keep their receivers on cpu. */
static int device_check(const bench_opts_t *o)
{
    dcr_device_t *dev = NULL;
    int rc = dcr_cli_device_open("bench", o->device ? o->device : "cpu", &dev);
    if (rc) return rc;
    bool host = dcr_device_backend(dev)->props.host_addressable;
    dcr_device_destroy(dev);
    if (!host && (o->processes || o->testbed))
        return dcr_cli_usage("bench", dcr_error_set(DCR_EINVAL,
                                                    "--device %s: the --processes roles keep "
                                                    "their receivers on cpu (no --device there)",
                                                    o->device));
    return 0;
}

/* ---- dcr bench --ab ------------------------------------------------------------ */

/* The flags --ab may change (as keys: link_gbps is --link-gbps): valued
 * configuration flags that change the work of a refit. Paths, outputs and
 * the refit counts stay the same on both sides. */
static const char *const ab_flags[] = {"--link-gbps",  "--flow-gbps",     "--local-gbps",
                                       "--latency-ms", "--change-rate",   "--changes",
                                       "--lr",         "--mode",          "--transport",
                                       "--fanout",     "--chunk-mib",     "--bucket-mib",
                                       "--seed",       "--model",         "--scale",
                                       "--layers",     "--rollout-nodes", "--receivers-per-node",
                                       "--serve-tp",   "--fp8-layers",    "--init",
                                       "--rl"};

/* The bench usage line (dcr_cmd_bench's). */
static const char bench_usage[] =
    "[model and layout flags] [rollout flags] [--transport objstore|relay] "
    "[--store s3://BUCKET/PREFIX --s3-endpoint URL] [--change-rate R] "
    "[--mode X|P|F] [--rl sync|async] [--processes | --testbed netns] [--device cpu|cuda|auto] "
    "[--ab KEY=VALUE[,...]|same | --ab-binary OTHER_DCR] [--json]";

#define AB_MAX_KEYS 8

typedef struct ab_spec {
    char text[512];                /* a copy of the spec, split in place */
    const char *flag[AB_MAX_KEYS]; /* "--link-gbps" (from ab_flags) */
    const char *value[AB_MAX_KEYS];
    int n;
} ab_spec_t;

/* The flag of an --ab key: "link_gbps" (or "link-gbps") is "--link-gbps"
 * when that is one of ab_flags; NULL otherwise. */
static const char *ab_flag_of(const char *key)
{
    char flag[64];
    if (strlen(key) + 3 > sizeof(flag)) return NULL;
    snprintf(flag, sizeof(flag), "--%s", key);
    for (char *c = flag + 2; *c; c++)
        if (*c == '_') *c = '-';
    for (size_t i = 0; i < sizeof(ab_flags) / sizeof(ab_flags[0]); i++)
        if (!strcmp(flag, ab_flags[i])) return ab_flags[i];
    return NULL;
}

/* Parses "same" or KEY=VALUE[,KEY=VALUE...]: known keys, each once, values
 * not empty (their checks are the flags' own, when B's flags are parsed). */
static dcr_status_t ab_parse(const char *text, ab_spec_t *spec)
{
    memset(spec, 0, sizeof(*spec));
    if (strlen(text) >= sizeof(spec->text))
        return dcr_error_set(DCR_EINVAL, "--ab: the specification is too long");
    if (!strcmp(text, "same")) return DCR_OK;
    snprintf(spec->text, sizeof(spec->text), "%s", text);
    char *save = NULL;
    for (char *kv = strtok_r(spec->text, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || eq[1] == '\0')
            return dcr_error_set(DCR_EINVAL, "--ab %s: expected KEY=VALUE[,KEY=VALUE...] or same",
                                 text);
        *eq = '\0';
        const char *flag = ab_flag_of(kv);
        if (!flag)
            return dcr_error_set(
                DCR_EINVAL,
                "--ab: unknown key '%s' (link_gbps, flow_gbps, local_gbps, "
                "latency_ms, change_rate, changes, lr, mode, transport, fanout, "
                "chunk_mib, bucket_mib, seed, model, scale, layers, rollout_nodes, "
                "receivers_per_node, serve_tp, fp8_layers, init, rl)",
                kv);
        for (int i = 0; i < spec->n; i++)
            if (spec->flag[i] == flag)
                return dcr_error_set(DCR_EINVAL, "--ab: key '%s' given twice", kv);
        if (spec->n == AB_MAX_KEYS)
            return dcr_error_set(DCR_EINVAL, "--ab: at most %d keys", AB_MAX_KEYS);
        spec->flag[spec->n] = flag;
        spec->value[spec->n++] = eq + 1;
    }
    if (spec->n == 0)
        return dcr_error_set(DCR_EINVAL, "--ab %s: expected KEY=VALUE[,KEY=VALUE...] or same",
                             text);
    return DCR_OK;
}

/* Whether argv[i] is --ab or a flag the spec changes (then B drops it). */
static bool ab_dropped(const ab_spec_t *spec, const char *arg, bool *takes_value)
{
    static const char *const ab[] = {"--ab"};
    if (valued_flag(arg, ab, 1, takes_value)) return true;
    for (int k = 0; k < spec->n; k++)
        if (valued_flag(arg, &spec->flag[k], 1, takes_value)) return true;
    return false;
}

/* An A/B run's timed refits a side when --refits is not given (both sides
 * and a worker apply the same rule, so their counts agree). */
static void ab_default_refits(bench_opts_t *o)
{
    if (!dcr_args_seen(o->args, o->nargs, "--refits")) o->refits = DCR_BENCH_AB_DEFAULT_REFITS;
}

/* Side B's flags: A's without --ab and without the flags the spec changes,
 * then the spec's flags with their values; parsed and checked exactly as
 * A's were. Returns like dcr_args_parse (0, or the exit status). */
static int ab_side_b(const ab_spec_t *spec, int argc, char **argv, bench_opts_t *ob,
                     dcr_bench_config_t *cb)
{
    char **bv = calloc((size_t)argc + 2 * AB_MAX_KEYS + 1, sizeof(char *));
    if (!bv) return dcr_cli_fail("bench", dcr_error_set(DCR_ENOMEM, "--ab arguments"));
    int n = 0;
    bv[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        bool value;
        if (ab_dropped(spec, argv[i], &value))
            i += value;
        else
            bv[n++] = argv[i];
    }
    for (int k = 0; k < spec->n; k++) {
        bv[n++] = (char *)spec->flag[k];
        bv[n++] = (char *)spec->value[k];
    }
    dcr_arg_t own[NLAUNCHER_ARGS];
    launcher_args(ob, own);
    int rc = parse_opts(ob, "bench --ab (side B)", bench_usage, own, NLAUNCHER_ARGS, n, bv);
    free(bv);
    if (rc) return 2; /* a value the flag refuses: one line from the parser */
    ab_default_refits(ob);
    *cb = dcr_bench_config_default();
    rc = dcr_cli_check("bench", applies_check(ob));
    if (rc == 0) rc = dcr_cli_check("bench", fill_config(ob, cb));
    return rc;
}

static int cmp_ratio(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median over pairs of latency(B) / latency(A): the run's own summary
 * of the slowdown (dcr compare gives the interval). NAN without pairs. */
static double ab_pair_ratio(const dcr_bench_result_t r[2])
{
    int n = r[0].nrefits < r[1].nrefits ? r[0].nrefits : r[1].nrefits;
    double *ratio = calloc((size_t)(n ? n : 1), sizeof(double));
    if (!ratio || n == 0) {
        free(ratio);
        return NAN;
    }
    for (int k = 0; k < n; k++)
        ratio[k] =
            r[0].refits[k].latency_s > 0 ? r[1].refits[k].latency_s / r[0].refits[k].latency_s : 0;
    qsort(ratio, (size_t)n, sizeof(double), cmp_ratio);
    double m = n % 2 ? ratio[n / 2] : (ratio[n / 2 - 1] + ratio[n / 2]) / 2;
    free(ratio);
    return m;
}

/* label[s]: what side s is ("" for none). */
static void ab_print(const char *const label[2], const dcr_bench_result_t r[2])
{
    for (int s = 0; s < 2; s++)
        printf("side %c%s%s: %d timed refits, mean latency %.4f s, payload %.0f bytes, %s\n",
               'A' + s, label[s][0] ? " " : "", label[s], r[s].nrefits, r[s].mean_latency_s,
               r[s].payload_bytes_mean, r[s].bit_exact ? "bit-exact" : "NOT bit-exact");
    printf("B/A latency, median of the %d pairs' ratios: %.3f (interval and verdict: dcr "
           "compare on the --out file)\n",
           r[0].nrefits, ab_pair_ratio(r));
}

/* Both sides to --out (A, then B) and stdout, each with its config (the
 * references are taken); `head`: the JSON output's first keys (taken);
 * label: what each side is, for the text. Exit 1 when a side was not
 * bit-exact. */
static int ab_finish(const bench_opts_t *o, json_t *config[2], json_t *head,
                     const char *const label[2], dcr_bench_result_t r[2])
{
    dcr_status_t st = DCR_OK;
    for (int s = 0; o->out && st == DCR_OK && s < 2; s++)
        st = dcr_bench_results_append(o->out, &r[s], config[s]);
    if (o->json) {
        json_object_set_new(head, "order", json_string("ABBA"));
        json_object_set_new(head, "A", dcr_bench_result_json(&r[0], json_incref(config[0])));
        json_object_set_new(head, "B", dcr_bench_result_json(&r[1], json_incref(config[1])));
        json_dumpf(head, stdout, JSON_INDENT(2));
        printf("\n");
    } else {
        ab_print(label, r);
    }
    json_decref(head);
    int rc = st != DCR_OK ? dcr_cli_fail("bench", st) : 0;
    if (rc == 0 && !(r[0].bit_exact && r[1].bit_exact)) {
        fprintf(stderr, "dcr bench: a receiver differs from its dense refit\n");
        rc = 1;
    }
    for (int s = 0; s < 2; s++) {
        json_decref(config[s]);
        dcr_bench_result_free(&r[s]);
    }
    return rc;
}

/* --ab: usage errors first (the spec, both sides' flags and rules), then
 * both sides in one process (dcr_bench_run_ab). */
static int run_ab(bench_opts_t *o, int argc, char **argv)
{
    static bench_opts_t ob; /* B's flags point into it */
    ab_spec_t spec;
    dcr_bench_config_t c[2] = {dcr_bench_config_default(), dcr_bench_config_default()};
    int rc = dcr_cli_check("bench", ab_parse(o->ab, &spec));
    if (rc == 0 && (o->processes || o->testbed))
        rc = dcr_cli_usage("bench", dcr_error_set(DCR_EINVAL, "--ab runs both sides in this "
                                                              "process: not with --processes or "
                                                              "--testbed"));
    if (rc == 0 && o->trace)
        rc = dcr_cli_usage("bench",
                           dcr_error_set(DCR_EINVAL, "--ab keeps no stage trace (drop --trace)"));
    ab_default_refits(o);
    if (rc == 0) rc = dcr_cli_check("bench", applies_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", fill_config(o, &c[0]));
    if (rc == 0) rc = ab_side_b(&spec, argc, argv, &ob, &c[1]);
    if (rc) return rc;
    /* The refits' intervals are dropped as each refit's bounds are taken. */
    c[0].keep_trace = c[1].keep_trace = false;
    if ((rc = dcr_cli_check("bench", dcr_bench_ab_check(&c[0], &c[1])))) return rc;
    dcr_interrupt_install();
    dcr_bench_result_t r[2];
    dcr_status_t st = dcr_bench_run_ab(&c[0], &c[1], r);
    if (st != DCR_OK) return dcr_cli_fail("bench", st);
    const bench_opts_t *opts[2] = {o, &ob};
    json_t *config[2];
    for (int s = 0; s < 2; s++) {
        config[s] = dcr_bench_config_json(&c[s], opts[s]->changes, opts[s]->store);
        dcr_bench_config_set_run_directory(config[s], r[s].workdir_in_memory);
        json_object_set_new(config[s], "ab", json_string(o->ab));
    }
    const char *label[2] = {"", o->ab};
    return ab_finish(o, config, json_pack("{s:s}", "ab", o->ab), label, r);
}

/* ---- dcr bench --ab-binary and its worker --------------------------------- */

/* Flags of the parent only: the worker gets every other flag as given. */
static bool ab_parent_only(const char *arg, bool *takes_value)
{
    static const char *const flags[] = {"--json"};
    static const char *const valued[] = {"--ab-binary", "--out"};
    *takes_value = false;
    if (!strcmp(arg, flags[0])) return true;
    return valued_flag(arg, valued, sizeof(valued) / sizeof(valued[0]), takes_value);
}

/* Usage errors of --ab-binary and --ab-worker that the flags alone show. */
static dcr_status_t ab_binary_check(const bench_opts_t *o, bool worker)
{
    const char *flag = worker ? "--ab-worker" : "--ab-binary";
    if (o->ab)
        return dcr_error_set(DCR_EINVAL, "%s: not with --ab (give one kind of A/B run)", flag);
    if (worker && o->ab_binary)
        return dcr_error_set(DCR_EINVAL, "--ab-worker: not with --ab-binary");
    if (o->processes || o->testbed)
        return dcr_error_set(DCR_EINVAL,
                             "%s runs each side as one process: not with --processes or "
                             "--testbed",
                             flag);
    if (o->trace) return dcr_error_set(DCR_EINVAL, "%s keeps no stage trace (drop --trace)", flag);
    if (worker && (o->out || o->json))
        return dcr_error_set(DCR_EINVAL, "--ab-worker answers its parent only: not with --out "
                                         "or --json");
    return DCR_OK;
}

/* The flags, the configuration and the A/B rules, as both processes check them. */
static int ab_binary_config(bench_opts_t *o, bool worker, dcr_bench_config_t *c)
{
    *c = dcr_bench_config_default();
    ab_default_refits(o);
    int rc = dcr_cli_check("bench", ab_binary_check(o, worker));
    if (rc == 0) rc = dcr_cli_check("bench", applies_check(o));
    if (rc == 0) rc = dcr_cli_check("bench", fill_config(o, c));
    if (rc) return rc;
    c->keep_trace = false; /* each refit's intervals go once its bounds are taken */
    return dcr_cli_check("bench",
                         dcr_bench_ab_check_as(worker ? "--ab-worker" : "--ab-binary", c, c));
}

/* --ab-worker FD: side B of a parent's --ab-binary (bench_ab.h). */
static int run_ab_worker(bench_opts_t *o)
{
    dcr_bench_config_t c;
    int rc = ab_binary_config(o, true, &c);
    if (rc) return rc;
    struct stat st;
    if (fstat((int)o->ab_worker, &st) != 0 || !S_ISSOCK(st.st_mode))
        return dcr_cli_usage("bench", dcr_error_set(DCR_EINVAL,
                                                    "--ab-worker %lld: not an open socket (dcr "
                                                    "bench --ab-binary starts the worker)",
                                                    (long long)o->ab_worker));
    json_t *config = dcr_bench_config_json(&c, o->changes, o->store);
    dcr_interrupt_install();
    dcr_trace_reset();
    dcr_trace_enable(true);
    dcr_status_t ws = dcr_bench_ab_worker_run(&c, (int)o->ab_worker, config);
    json_decref(config);
    return ws == DCR_OK ? 0 : dcr_cli_fail("bench", ws);
}

/* A side's configuration in the results: its own, the A/B keys both sides
 * share, and its binary's --version line. */
static json_t *ab_binary_side_config(json_t *config, const char *other, const char *version)
{
    json_object_set_new(config, "ab", json_string("binary"));
    json_object_set_new(config, "ab_binary", json_string(other));
    json_object_set_new(config, "dcr_version", json_string(version));
    return config;
}

/* Both binaries' --version lines: side A's (this executable), side B's. */
static dcr_status_t ab_binary_versions(const char *other, char version[2][256])
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return dcr_error_set(DCR_EIO, "cannot find this executable (/proc/self/exe)");
    self[n] = '\0';
    DCR_CHECK(dcr_bench_binary_version(self, version[0], sizeof(version[0])));
    return dcr_bench_binary_version(other, version[1], sizeof(version[1]));
}

/* Side B started first, so that its setup runs while side A's does; then
 * the ABBA schedule (dcr_bench_ab_alternate). */
static dcr_status_t ab_binary_sides(const dcr_bench_config_t *c,
                                    const dcr_bench_binary_config_t *bc, dcr_bench_result_t r[2],
                                    json_t **b_config_p)
{
    dcr_bench_side_t *side[2] = {NULL, NULL};
    dcr_status_t st = dcr_bench_side_binary(bc, &side[1]);
    if (st == DCR_OK) {
        DCR_LOG_INFO("bench --ab-binary: setting up side A while %s sets up side B", bc->name);
        st = dcr_bench_side_local(c, &side[0]);
    }
    if (st == DCR_OK) st = dcr_bench_ab_alternate(side, c->warmup, c->refits, r);
    if (st == DCR_OK) *b_config_p = json_deep_copy(dcr_bench_side_binary_config(side[1]));
    dcr_bench_side_destroy(side[0]);
    dcr_bench_side_destroy(side[1]);
    return st;
}

/* --ab-binary OTHER_DCR: usage errors first (the flags, the rules, the
 * binary), then both --version lines, then the run. */
static int run_ab_binary(bench_opts_t *o, int argc, char **argv)
{
    dcr_bench_config_t c;
    int rc = ab_binary_config(o, false, &c);
    char exe[4096], version[2][256];
    if (rc == 0)
        rc = dcr_cli_check("bench",
                           dcr_bench_exec_check("--ab-binary", o->ab_binary, exe, sizeof(exe)));
    if (rc) return rc;
    dcr_status_t st = ab_binary_versions(exe, version);
    if (st != DCR_OK) return dcr_cli_fail("bench", st);
    char **fwd = calloc((size_t)argc, sizeof(char *));
    if (!fwd) return dcr_cli_fail("bench", dcr_error_set(DCR_ENOMEM, "worker arguments"));
    int n = 0;
    for (int i = 1; i < argc; i++) {
        bool value;
        if (ab_parent_only(argv[i], &value))
            i += value;
        else
            fwd[n++] = argv[i];
    }
    dcr_bench_binary_config_t bc = {.exe = exe,
                                    .name = o->ab_binary,
                                    .args = fwd,
                                    .nargs = n,
                                    .warmup = c.warmup,
                                    .refits = c.refits,
                                    .verify = c.verify};
    dcr_interrupt_install();
    dcr_trace_reset();
    dcr_trace_enable(true);
    dcr_bench_result_t r[2];
    json_t *b_config = NULL;
    st = ab_binary_sides(&c, &bc, r, &b_config);
    free(fwd);
    if (st == DCR_OK && !b_config) {
        dcr_bench_result_free(&r[0]);
        dcr_bench_result_free(&r[1]);
        st = dcr_error_set(DCR_ENOMEM, "side B's configuration");
    }
    if (st != DCR_OK) return dcr_cli_fail("bench", st);
    json_t *config_a = dcr_bench_config_json(&c, o->changes, o->store);
    dcr_bench_config_set_run_directory(config_a, r[0].workdir_in_memory);
    json_t *config[2] = {ab_binary_side_config(config_a, o->ab_binary, version[0]),
                         ab_binary_side_config(b_config, o->ab_binary, version[1])};
    char label_a[300], label_b[4400];
    snprintf(label_a, sizeof(label_a), "this binary (%s)", version[0]);
    snprintf(label_b, sizeof(label_b), "%s (%s)", o->ab_binary, version[1]);
    const char *label[2] = {label_a, label_b};
    json_t *head = json_pack("{s:s,s:s,s:[s,s]}", "ab", "binary", "ab_binary", o->ab_binary,
                             "versions", version[0], version[1]);
    return ab_finish(o, config, head, label, r);
}

int dcr_cmd_bench(int argc, char **argv)
{
    bench_opts_t o;
    dcr_arg_t own[NLAUNCHER_ARGS];
    launcher_args(&o, own);
    int rc = parse_opts(&o, "bench", bench_usage, own, NLAUNCHER_ARGS, argc, argv);
    if (rc) return rc == 1 ? 0 : 2;
    if ((rc = device_check(&o))) return rc;
    if (dcr_args_seen(o.args, o.nargs, "--ab-worker")) return run_ab_worker(&o);
    if (o.ab_binary) return run_ab_binary(&o, argc, argv);
    if (o.ab) return run_ab(&o, argc, argv);
    return run(&o, argc, argv);
}
