/* dcr faults train | campaign: refits under injected faults, with the
 * figures that show recovery (faults by kind, attempts, retries, commits,
 * restores, bit mismatches, versions lost). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/recovery.h"
#include "faults/faults_report.h"
#include "faults/faults_run.h"
#include "scenario_args.h"
#include "workloads/harness/interrupt.h"
#include "deploy/restorer.h"
#include "deploy/testbed.h"

typedef struct faults_opts {
    dcr_cli_scenario_t sc;
    int64_t steps, kill_every, restart_after, faults_per_step, seeds, seed, nodes, per_node,
        serve_tp, attempts, readers;
    const char *transport, *rl, *changes, *control, *store, *s3_endpoint;
    double lr, rate;
    bool json;
    bool processes, corrupt_digest; /* --processes (faults/faults_run.h) */
    int64_t coord_kill_every;       /* --processes: a coordinator kill every N transitions */
    const char *testbed;            /* --testbed netns: --processes across scripts/testbed.sh */
    int64_t testbed_id;
    int64_t join_at, anchor_every; /* --processes: an elastic join, anchors for it */
} faults_opts_t;

/* ---- --processes: every role a process, real kills ---- */

enum { NPROC = 7 };

static void processes_args(faults_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NPROC] = {
        {"--processes", DCR_ARG_FLAG, &o->processes, 0, 0,
         "every role a process of this host (owners: mpirun, as root with "
         "OMPI_ALLOW_RUN_AS_ROOT=1 set for it; coordinator, rollout "
         "nodes, verifier); --kill-every N: a SIGKILL to a rollout-node process "
         "every N steps, at delivery, apply or after the ack; --faults-per-step N: "
         "corrupt (objstore only), delay, control_busy acted out by this "
         "process; --transport objstore or relay (node 0's relay root keeps the "
         "retention window), sync RL; no --attempts, --readers, --restart-after",
         false},
        {"--corrupt-digest", DCR_ARG_FLAG, &o->corrupt_digest, 0, 0,
         "--processes, a test of the verifier: flip one bit of one receiver's "
         "digests before it runs (the run must then fail)",
         false},
        {"--kill-coordinator-every", DCR_ARG_INT, &o->coord_kill_every, 0, 100000,
         "--processes: SIGKILL the coordinator process in every N-th transition, a "
         "new one resumes it from the control plane (default: train 10, campaign 2; 0: "
         "never)",
         false},
        {"--testbed", DCR_ARG_STRING, &o->testbed, 0, 0,
         "netns: --processes across a network-namespace testbed of this machine "
         "(scripts/testbed.sh; root), as dcr bench --testbed; the faults drawn are "
         "delay and the network kinds link_down, net_loss, net_reorder, partition",
         false},
        {"--testbed-id", DCR_ARG_INT, &o->testbed_id, 0, 55,
         "--testbed: the testbed's id (namespaces dcrtb-<id>-*; default 0)", false},
        {"--join-at", DCR_ARG_INT, &o->join_at, 1, 100000,
         "--processes, an elastic join: the last rollout node's process starts "
         "before step STEP, not with the others; it restores (from an anchor plus "
         "replay with --anchor-every) and joins the attempts after it is ready",
         false},
        {"--anchor-every", DCR_ARG_INT, &o->anchor_every, 0, 1000000,
         "--processes: rollout node 0 writes an anchor (a dense snapshot) after "
         "every N-th commit, at most the retention window (8); a node with nothing "
         "to restore from joins from it plus replay (default 0: never)",
         false},
    };
    memcpy(a, own, sizeof own);
}

/* The run flags every role process parses (dcr bench's), from this
 * command's resolved options, so that every process rebuilds the same world;
 * static: the parsed configuration points into them. */
typedef struct role_args {
    char *argv[80];
    char num[40][40];
    int n, nnum;
} role_args_t;

static void ra_str(role_args_t *a, const char *flag, const char *value)
{
    a->argv[a->n++] = (char *)flag;
    a->argv[a->n++] = (char *)value;
}

static void ra_int(role_args_t *a, const char *flag, int64_t v)
{
    snprintf(a->num[a->nnum], sizeof(a->num[0]), "%lld", (long long)v);
    ra_str(a, flag, a->num[a->nnum++]);
}

/* %.17g: the value every role parses back is this one, bit for bit. */
static void ra_real(role_args_t *a, const char *flag, double v)
{
    snprintf(a->num[a->nnum], sizeof(a->num[0]), "%.17g", v);
    ra_str(a, flag, a->num[a->nnum++]);
}

static void role_args(const faults_opts_t *o, const dcr_bench_config_t *run, role_args_t *a)
{
    a->n = a->nnum = 0;
    a->argv[a->n++] = "faults";
    const dcr_cli_scenario_t *sc = &o->sc;
    ra_str(a, "--model", sc->model);
    ra_str(a, "--mapping", sc->mapping);
    if (sc->max_memory) ra_str(a, "--max-memory", sc->max_memory);
    const char *ints[] = {"--scale", "--layers",    "--train-nodes", "--gpus-per-node",
                          "--tp",    "--etp",       "--ep",          "--pp",
                          "--dp",    "--fp8-layers"};
    const int64_t vals[] = {sc->scale, sc->layers, sc->nodes, sc->gpus, sc->tp,
                            sc->etp,   sc->ep,     sc->pp,    sc->dp,   sc->fp8_layers};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (vals[i] > 0) ra_int(a, ints[i], vals[i]);
    ra_int(a, "--rollout-nodes", o->nodes);
    ra_int(a, "--receivers-per-node", o->per_node);
    ra_int(a, "--serve-tp", o->serve_tp);
    ra_str(a, "--transport", o->transport);
    ra_str(a, "--rl", o->rl);
    ra_str(a, "--changes", o->changes);
    if (!strcmp(o->changes, "adamw"))
        ra_real(a, "--lr", o->lr);
    else
        ra_real(a, "--change-rate", o->rate);
    /* Unpaced links, as dcr faults runs them (faults, not pacing, are under test). */
    const char *links[] = {"--link-gbps", "--flow-gbps", "--local-gbps", "--latency-ms"};
    for (int i = 0; i < 4; i++) ra_str(a, links[i], "0");
    ra_int(a, "--seed", o->seed);
    if (o->control) ra_str(a, "--control", o->control);
    /* A join replays the retained versions after its anchor: the window
     * must exist (the launching process keeps it, dcr/recovery.h). */
    if (run->run.anchor_every > 0) {
        ra_int(a, "--anchor-every", run->run.anchor_every);
        ra_int(a, "--retain", run->run.retain);
    }
}

static int finish(const char *what, bool json, dcr_status_t st, const dcr_faults_summary_t *s,
                  const dcr_faults_processes_summary_t *p);

/* --testbed netns: the testbed up (one host per training and per rollout
 * node, links unshaped: faults, not pacing, are under test), this process
 * in its services host, and its store, S3 endpoint and control plane in
 * the role flags (a campaign gives each run its own store prefix). */
static dcr_status_t testbed_start(const faults_opts_t *o, role_args_t *ra, dcr_testbed_t **tb_p)
{
    dcr_testbed_config_t tc = {.id = (int)o->testbed_id,
                               .train_hosts = (int)o->sc.nodes,
                               .rollout_hosts = (int)o->nodes,
                               .upload_flows = (int)o->sc.gpus};
    DCR_CHECK(dcr_testbed_up(&tc, tb_p));
    DCR_CHECK(dcr_testbed_enter_services(*tb_p));
    ra_str(ra, "--store", "s3://dcr/faults");
    ra_str(ra, "--s3-endpoint", dcr_testbed_s3_endpoint(*tb_p));
    ra_str(ra, "--control", dcr_testbed_control(*tb_p));
    return DCR_OK;
}

/* Runs `what` (train, campaign) with --processes: the role flags parsed as
 * the role processes parse them become the run's configuration. */
static int run_processes(const char *what, const faults_opts_t *o, dcr_faults_run_config_t *c,
                         int seeds)
{
    static role_args_t ra;
    role_args(o, &c->bench, &ra);
    char label[64];
    snprintf(label, sizeof(label), "faults %s", what);
    dcr_faults_processes_config_t pc;
    memset(&pc, 0, sizeof(pc));
    pc.run = *c;
    dcr_testbed_t *tb = NULL;
    if (o->testbed) {
        dcr_interrupt_install();
        dcr_status_t st = testbed_start(o, &ra, &tb);
        if (st != DCR_OK) {
            dcr_testbed_destroy(tb);
            return dcr_cli_fail(label, st);
        }
    }
    pc.testbed = tb;
    int rc = dcr_cli_bench_run_config(label, "", NULL, 0, ra.n, ra.argv, &pc.run.bench);
    if (rc) {
        dcr_testbed_destroy(tb);
        return 2;
    }
    pc.run_args = ra.argv + 1;
    pc.nargs = ra.n - 1;
    pc.corrupt_digest = o->corrupt_digest;
    pc.coordinator_every = (int)o->coord_kill_every;
    pc.join_at = (int)o->join_at;
    dcr_faults_processes_summary_t p;
    memset(&p, 0, sizeof(p));
    dcr_interrupt_install();
    dcr_status_t st = seeds > 0 ? dcr_faults_processes_campaign(&pc, seeds, (uint64_t)o->seed, &p)
                                : dcr_faults_processes_run(&pc, &p);
    dcr_testbed_destroy(tb);
    return finish(what, o->json, st, &p.s, &p);
}

/* Every flag and the layout, before the run (usage errors exit 2). */
static dcr_status_t fill(const faults_opts_t *o, const dcr_arg_t *args, int nargs,
                         dcr_faults_run_config_t *c)
{
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &c->bench.run.scenario));
    DCR_CHECK(dcr_rl_mode_parse(o->rl, &c->bench.run.rl));
    DCR_CHECK(dcr_cli_changes_check(args, nargs, o->changes, false));
    if (dcr_args_seen(args, nargs, "--restart-after") && o->kill_every == 0)
        return dcr_error_set(DCR_EINVAL, "--restart-after applies only with --kill-every N > 0");
    c->bench.run.control_path = o->control;
    c->bench.run.store = o->store;
    c->bench.run.s3_endpoint = o->s3_endpoint;
    c->bench.run.transport = o->transport;
    c->bench.run.adamw = !strcmp(o->changes, "adamw");
    c->bench.run.lr = o->lr;
    c->bench.run.change_rate = o->rate;
    c->bench.run.seed = (uint64_t)o->seed;
    c->bench.run.serve.nodes = (int)o->nodes;
    c->bench.run.serve.gpus_per_node = (int)o->per_node;
    c->bench.run.serve.tp = (int)o->serve_tp;
    c->steps = (int)o->steps;
    c->kill_every = (int)o->kill_every;
    c->restart_after = (int)o->restart_after;
    c->faults_per_step = (int)o->faults_per_step;
    c->max_attempts = (int)o->attempts;
    c->readers = (int)o->readers;
    /* --processes: the window every role keeps (a role's default), which
     * bounds --anchor-every. */
    c->bench.run.retain = o->processes ? DCR_RETAIN_DEFAULT : 0;
    c->bench.run.anchor_every = (int)o->anchor_every;
    DCR_CHECK(dcr_bench_config_check(&c->bench, o->processes));
    return dcr_cli_scenario_validate(&c->bench.run.scenario, &c->bench.run.serve);
}

/* A usage error (exit 2) before any work: --control must be an etcd URL,
 * since every run of a campaign needs a fresh control plane; --store and
 * --s3-endpoint as bench takes them (a campaign uses the store in its
 * objstore runs; train needs --transport objstore for it). */
static int check_control(const char *what, const faults_opts_t *o)
{
    dcr_status_t st = DCR_OK;
    if (o->control)
        st = dcr_run_control_is_etcd(o->control)
                 ? dcr_run_control_check("--control", o->control)
                 : dcr_error_set(DCR_EINVAL,
                                 "--control %s: expected etcd://HOST:PORT[/PREFIX] (every "
                                 "run makes its own SQLite file otherwise)",
                                 o->control);
    if (st == DCR_OK && o->store && !strcmp(what, "train") && strcmp(o->transport, "objstore"))
        st = dcr_error_set(DCR_EINVAL, "--store needs --transport objstore (not %s)", o->transport);
    if (st == DCR_OK) st = dcr_cli_store_check(o->store, o->s3_endpoint);
    if (st == DCR_OK) return 0;
    char label[64];
    snprintf(label, sizeof(label), "faults %s", what);
    return dcr_cli_usage(label, st);
}

/* Usage errors of --processes (exit 2): what it cannot run, and the flags
 * that only a run with processes reads or only a thread run reads. */
static int check_processes(const char *what, const faults_opts_t *o, const dcr_arg_t *args,
                           int nargs)
{
    dcr_status_t st = DCR_OK;
    if (o->testbed && strcmp(o->testbed, "netns"))
        st = dcr_error_set(DCR_EINVAL, "--testbed %s: expected netns", o->testbed);
    else if (!o->testbed && dcr_args_seen(args, nargs, "--testbed-id"))
        st = dcr_error_set(DCR_EINVAL, "--testbed-id needs --testbed netns");
    else if (o->testbed && o->control)
        st = dcr_error_set(DCR_EINVAL, "--testbed brings its own control plane (etcd on its "
                                       "services host): drop --control");
    else if (o->testbed && o->corrupt_digest)
        st = dcr_error_set(DCR_EINVAL, "--corrupt-digest does not apply with --testbed");
    else if (!o->processes && o->corrupt_digest)
        st = dcr_error_set(DCR_EINVAL, "--corrupt-digest applies only with --processes");
    else if (!o->processes && (dcr_args_seen(args, nargs, "--join-at") ||
                               dcr_args_seen(args, nargs, "--anchor-every")))
        st = dcr_error_set(DCR_EINVAL, "--join-at and --anchor-every apply only with --processes "
                                       "(and --transport objstore)");
    else if (o->processes && o->join_at > 0 && o->nodes < 2)
        st = dcr_error_set(DCR_EINVAL, "--join-at needs at least 2 rollout nodes (got %lld)",
                           (long long)o->nodes);
    else if (o->processes && o->join_at > 0 && o->join_at >= o->steps)
        st = dcr_error_set(DCR_EINVAL, "--join-at %lld: expected a step below --steps %lld",
                           (long long)o->join_at, (long long)o->steps);
    else if (!o->processes && dcr_args_seen(args, nargs, "--kill-coordinator-every"))
        st = dcr_error_set(DCR_EINVAL, "--kill-coordinator-every applies only with --processes");
    else if (o->processes && dcr_args_seen(args, nargs, "--attempts"))
        st = dcr_error_set(DCR_EINVAL, "--processes: --attempts does not apply (the coordinator "
                                       "process keeps its default attempts)");
    else if (o->processes && o->testbed && strcmp(o->transport, "objstore"))
        st = dcr_error_set(DCR_EINVAL, "--testbed needs --transport objstore (got %s)",
                           o->transport);
    else if (o->processes && strcmp(o->transport, "objstore") &&
             (dcr_args_seen(args, nargs, "--join-at") ||
              dcr_args_seen(args, nargs, "--anchor-every")))
        st = dcr_error_set(DCR_EINVAL,
                           "--join-at and --anchor-every need --transport objstore (got %s: a "
                           "relay tree has no place for a node that starts late)",
                           o->transport);
    else if (o->processes && (o->store || o->s3_endpoint))
        st = dcr_error_set(DCR_EINVAL,
                           "--processes: --store and --s3-endpoint do not apply yet (the node "
                           "processes use the run directory's store)");
    else if (o->processes && (dcr_args_seen(args, nargs, "--readers") ||
                              dcr_args_seen(args, nargs, "--restart-after")))
        st = dcr_error_set(DCR_EINVAL,
                           "--processes: --readers and --restart-after do not apply (no request "
                           "threads across processes; a killed node process restarts at once)");
    if (st == DCR_OK) return 0;
    char label[64];
    snprintf(label, sizeof(label), "faults %s", what);
    return dcr_cli_usage(label, st);
}

static int finish(const char *what, bool json, dcr_status_t st, const dcr_faults_summary_t *s,
                  const dcr_faults_processes_summary_t *p)
{
    if (st != DCR_OK) {
        char label[64];
        snprintf(label, sizeof(label), "faults %s", what);
        return dcr_cli_fail(label, st);
    }
    if (json) {
        json_t *j = dcr_faults_summary_json(what, s);
        if (p) {
            json_t *extra = dcr_faults_processes_json(p);
            json_object_update(j, extra);
            json_decref(extra);
        }
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        dcr_faults_summary_print(what, s);
        if (p) dcr_faults_processes_print(p);
    }
    return dcr_faults_summary_failed(what, s) ? 1 : 0;
}

enum { NOWN = 19 };

static void own_args(faults_opts_t *o, dcr_arg_t *a)
{
    dcr_arg_t own[NOWN] = {
        {"--steps", DCR_ARG_INT, &o->steps, 1, 100000, "training steps (refits)", false},
        {"--kill-every", DCR_ARG_INT, &o->kill_every, 0, 100000,
         "kill a random receiver mid-refit every N steps (0: never)", false},
        {"--restart-after", DCR_ARG_INT, &o->restart_after, 1, 100000,
         "restart a killed receiver N steps later", false},
        {"--faults-per-step", DCR_ARG_INT, &o->faults_per_step, 0, 64,
         "random faults armed before each step", false},
        {"--attempts", DCR_ARG_INT, &o->attempts, 1, 100,
         "attempts per transition: first plus overwrite retries (default 4)", false},
        {"--control", DCR_ARG_STRING, &o->control, 0, 0,
         "etcd://HOST:PORT[/PREFIX]: run on an etcd cluster, each run under PREFIX/faults-<pid>-"
         "<seed>-<ns> (default: a SQLite file per run in its work dir)",
         false},
        {"--transport", DCR_ARG_STRING, &o->transport, 0, 0, "objstore | relay (default objstore)",
         false},
        {"--store", DCR_ARG_STRING, &o->store, 0, 0,
         "object store of the objstore runs: dir:PATH or s3://BUCKET/PREFIX, each run under "
         "PREFIX/faults-<pid>-<seed>-<ns> (default: a directory in the run's work dir)",
         false},
        {"--s3-endpoint", DCR_ARG_STRING, &o->s3_endpoint, 0, 0,
         "S3 service of an s3:// store, http[s]://HOST[:PORT]; credentials from AWS_ACCESS_KEY_ID, "
         "AWS_SECRET_ACCESS_KEY, AWS_REGION",
         false},
        {"--rl", DCR_ARG_STRING, &o->rl, 0, 0, "sync | async (default sync)", false},
        {"--changes", DCR_ARG_STRING, &o->changes, 0, 0, "adamw (default) | uniform", false},
        {"--lr", DCR_ARG_DOUBLE, &o->lr, 0, 0, "AdamW learning rate (default 1e-6)", false},
        {"--change-rate", DCR_ARG_DOUBLE, &o->rate, 0, 1, "uniform change rate (default 0.03)",
         false},
        {"--rollout-nodes", DCR_ARG_INT, &o->nodes, 1, 64, "rollout nodes (default 2)", false},
        {"--receivers-per-node", DCR_ARG_INT, &o->per_node, 1, 64,
         "receivers per rollout node (default 2)", false},
        {"--serve-tp", DCR_ARG_INT, &o->serve_tp, 1, 64,
         "serving tensor parallel degree (default 2)", false},
        {"--seed", DCR_ARG_INT, &o->seed, 0, 1e15,
         "seed of weights, changes and faults (campaign: the first)", false},
        {"--readers", DCR_ARG_INT, &o->readers, 0, 64,
         "request threads reading every receiver through its gate (default 1; 0: none)", false},
        {"--json", DCR_ARG_FLAG, &o->json, 0, 0, "print one JSON object", false},
    };
    memcpy(a, own, sizeof(own));
}

static void defaults(faults_opts_t *o, const dcr_faults_run_config_t *c)
{
    memset(o, 0, sizeof(*o));
    dcr_cli_scenario_init(&o->sc, c->bench.run.scenario.model, c->bench.run.scenario.scale,
                          c->bench.run.scenario.layers);
    o->sc.nodes = c->bench.run.scenario.train.nodes;
    o->sc.gpus = c->bench.run.scenario.train.gpus_per_node;
    o->sc.tp = c->bench.run.scenario.train.tp;
    o->sc.etp = 0;
    o->steps = c->steps;
    o->kill_every = c->kill_every;
    o->restart_after = c->restart_after;
    o->faults_per_step = c->faults_per_step;
    o->attempts = c->max_attempts;
    o->readers = c->readers;
    o->transport = c->bench.run.transport;
    o->rl = "sync";
    o->changes = "adamw";
    o->lr = c->bench.run.lr;
    o->rate = c->bench.run.change_rate;
    o->nodes = c->bench.run.serve.nodes;
    o->per_node = c->bench.run.serve.gpus_per_node;
    o->serve_tp = c->bench.run.serve.tp;
    o->seed = (int64_t)c->bench.run.seed;
    o->coord_kill_every = DCR_FAULTS_COORDINATOR_EVERY;
}

static int cmd_train(int argc, char **argv)
{
    dcr_faults_run_config_t c = dcr_faults_run_config_default();
    faults_opts_t o;
    defaults(&o, &c);
    dcr_arg_t args[NOWN + DCR_CLI_SCENARIO_NARGS + NPROC];
    own_args(&o, args);
    dcr_cli_scenario_args(&o.sc, args + NOWN);
    processes_args(&o, args + NOWN + DCR_CLI_SCENARIO_NARGS);
    int rc = dcr_args_parse("faults train",
                            "[--steps 50] [--kill-every 5] [--restart-after 5] [--transport "
                            "objstore|relay] [--store s3://BUCKET/PREFIX --s3-endpoint URL] "
                            "[--control etcd://HOST:PORT] [--processes] [--testbed netns "
                            "[--testbed-id N]] [--json]",
                            args, NOWN + DCR_CLI_SCENARIO_NARGS + NPROC, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    o.processes = o.processes || o.testbed; /* --testbed implies --processes */
    if (check_control("train", &o)) return 2;
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    rc = dcr_cli_check("faults train", fill(&o, args, NOWN + DCR_CLI_SCENARIO_NARGS, &c));
    if (rc == 0) rc = check_processes("train", &o, args, NOWN + DCR_CLI_SCENARIO_NARGS + NPROC);
    if (rc) return rc;
    if (o.processes) return run_processes("train", &o, &c, 0);
    dcr_interrupt_install();
    dcr_status_t st = dcr_faults_run(&c, &s);
    return finish("train", o.json, st, &s, NULL);
}

static int cmd_campaign(int argc, char **argv)
{
    dcr_faults_campaign_config_t cc = dcr_faults_campaign_config_default();
    faults_opts_t o;
    defaults(&o, &cc.run);
    o.seed = (int64_t)cc.base_seed;
    o.seeds = cc.seeds;
    /* Two coordinator kills in each run of the default 4 steps. */
    o.coord_kill_every = DCR_FAULTS_CAMPAIGN_COORDINATOR_EVERY;
    dcr_arg_t args[NOWN + 1 + DCR_CLI_SCENARIO_NARGS + NPROC];
    own_args(&o, args);
    args[NOWN] = (dcr_arg_t){"--seeds", DCR_ARG_INT, &o.seeds,
                             1,         100000,      "runs, each with its own seed (default 20)",
                             false};
    dcr_cli_scenario_args(&o.sc, args + NOWN + 1);
    processes_args(&o, args + NOWN + 1 + DCR_CLI_SCENARIO_NARGS);
    int rc =
        dcr_args_parse("faults campaign",
                       "[--seeds 20] [--steps 4] [--faults-per-step 2] [--store "
                       "s3://BUCKET/PREFIX --s3-endpoint URL] [--control etcd://HOST:PORT] "
                       "[--processes] [--testbed netns [--testbed-id N]] [--json]",
                       args, NOWN + 1 + DCR_CLI_SCENARIO_NARGS + NPROC, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    o.processes = o.processes || o.testbed; /* --testbed implies --processes */
    if (check_control("campaign", &o)) return 2;
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    rc = dcr_cli_check("faults campaign",
                       fill(&o, args, NOWN + 1 + DCR_CLI_SCENARIO_NARGS, &cc.run));
    if (rc == 0)
        rc = check_processes("campaign", &o, args, NOWN + 1 + DCR_CLI_SCENARIO_NARGS + NPROC);
    if (rc) return rc;
    cc.seeds = (int)o.seeds;
    cc.base_seed = (uint64_t)o.seed;
    if (o.processes) return run_processes("campaign", &o, &cc.run, cc.seeds);
    dcr_interrupt_install();
    dcr_status_t st = dcr_faults_campaign(&cc, &s);
    return finish("campaign", o.json, st, &s, NULL);
}

int dcr_cmd_faults(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "train")) return cmd_train(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "campaign")) return cmd_campaign(argc - 1, argv + 1);
    bool help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    fprintf(help ? stdout : stderr,
            "usage: dcr faults train [--steps 50] [--kill-every 5] [--restart-after 5] "
            "[--transport ...] [--json]\n"
            "       dcr faults campaign [--seeds 20] [--json]\n"
            "       dcr faults train|campaign --processes [--kill-coordinator-every N] "
            "[--corrupt-digest]: every role a process, real SIGKILLs\n"
            "       dcr faults train|campaign --testbed netns [--testbed-id N]: the same across "
            "a namespace testbed (root), with network faults\n"
            "(dcr faults train --help, dcr faults campaign --help for every option)\n");
    return help ? 0 : 2;
}
