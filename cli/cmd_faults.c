/* dcr faults train | campaign: refits under injected faults, with the
 * figures that show recovery (faults by kind, attempts, retries, commits,
 * restores, bit mismatches, versions lost). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "faults/faults_run.h"
#include "scenario_args.h"
#include "workloads/interrupt.h"

typedef struct faults_opts {
    dcr_cli_scenario_t sc;
    int64_t steps, kill_every, restart_after, faults_per_step, seeds, seed, nodes, per_node,
        serve_tp, attempts, readers;
    const char *transport, *rl, *changes, *control, *store, *s3_endpoint;
    double lr, rate;
    bool json;
} faults_opts_t;

static json_t *summary_json(const char *what, const dcr_faults_summary_t *s)
{
    json_t *kinds = json_object();
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++)
        json_object_set_new(kinds, dcr_fault_kind_name((dcr_fault_kind_t)k),
                            json_integer(s->faults_by_kind[k]));
    json_t *j =
        json_pack("{s:s,s:i,s:o,s:I,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:I}", "command",
                  what, "steps", s->steps, "faults_by_kind", kinds, "faults", (json_int_t)s->faults,
                  "attempts", s->attempts, "retries", s->retries, "commits", s->commits, "stops",
                  s->stops, "failovers", s->failovers, "kills", s->kills, "restores", s->restores,
                  "mismatches", s->mismatches, "baseline_mismatches", s->baseline_mismatches,
                  "lost", s->lost, "checks", s->checks, "version", (json_int_t)s->version);
    json_t *props = json_pack("{s:I,s:I,s:i,s:i,s:i}", "gate_reads", (json_int_t)s->gate_reads,
                              "gate_violations", (json_int_t)s->gate_violations, "commit_checks",
                              s->commit_checks, "commit_violations", s->commit_violations,
                              "membership_mismatches", s->membership_mismatches);
    json_object_update(j, props);
    json_decref(props);
    return j;
}

static void print_text(const char *what, const dcr_faults_summary_t *s)
{
    printf("dcr faults %s: %d steps, version %llu committed%s\n\nfaults injected by kind:\n", what,
           s->steps, (unsigned long long)s->version, strcmp(what, "campaign") ? "" : " (last run)");
    for (int k = 0; k < DCR_FAULT_KIND_COUNT; k++)
        printf("  %-16s %lld\n", dcr_fault_kind_name((dcr_fault_kind_t)k),
               (long long)s->faults_by_kind[k]);
    printf("  %-16s %lld\n\n", "total", (long long)s->faults);
    printf(
        "attempts %d, overwrite retries %d, commits %d, clean stops %d, coordinator failovers %d\n",
        s->attempts, s->retries, s->commits, s->stops, s->failovers);
    printf("receivers killed %d, restored by dense refit %d\n", s->kills, s->restores);
    printf("receiver checks %d, bit mismatches %d, baseline mismatches %d, versions lost %d\n",
           s->checks, s->mismatches, s->baseline_mismatches, s->lost);
    printf("requests through the gate %lld, saw a mixed state %lld\n", (long long)s->gate_reads,
           (long long)s->gate_violations);
    printf("receivers checked before a joint commit %d, not holding P^{v+1} %d\n", s->commit_checks,
           s->commit_violations);
    printf("membership differed after a failover %d\n", s->membership_mismatches);
}

/* Every flag and the layout, before the run (usage errors exit 2). */
static dcr_status_t fill(const faults_opts_t *o, const dcr_arg_t *args, int nargs,
                         dcr_faults_run_config_t *c)
{
    DCR_CHECK(dcr_cli_scenario_spec(&o->sc, &c->bench.scenario));
    DCR_CHECK(dcr_rl_mode_parse(o->rl, &c->bench.rl));
    if (!dcr_transport_find(o->transport))
        return dcr_error_set(DCR_EINVAL, "--transport %s: expected objstore or relay",
                             o->transport);
    DCR_CHECK(dcr_cli_changes_check(args, nargs, o->changes, false));
    if (dcr_args_seen(args, nargs, "--restart-after") && o->kill_every == 0)
        return dcr_error_set(DCR_EINVAL, "--restart-after applies only with --kill-every N > 0");
    c->bench.control_path = o->control;
    c->bench.store = o->store;
    c->bench.s3_endpoint = o->s3_endpoint;
    c->bench.transport = o->transport;
    c->bench.adamw = !strcmp(o->changes, "adamw");
    c->bench.lr = o->lr;
    c->bench.change_rate = o->rate;
    c->bench.seed = (uint64_t)o->seed;
    c->bench.serve.nodes = (int)o->nodes;
    c->bench.serve.gpus_per_node = (int)o->per_node;
    c->bench.serve.tp = (int)o->serve_tp;
    c->steps = (int)o->steps;
    c->kill_every = (int)o->kill_every;
    c->restart_after = (int)o->restart_after;
    c->faults_per_step = (int)o->faults_per_step;
    c->max_attempts = (int)o->attempts;
    c->readers = (int)o->readers;
    return dcr_cli_scenario_validate(&c->bench.scenario, &c->bench.serve);
}

/* A usage error (exit 2) before any work: --control must be an etcd URL,
 * since every run of a campaign needs a fresh control plane; --store and
 * --s3-endpoint as bench takes them (a campaign uses the store in its
 * objstore runs; train needs --transport objstore for it). */
static int check_control(const char *what, const faults_opts_t *o)
{
    dcr_status_t st = DCR_OK;
    if (o->control)
        st = dcr_bench_control_is_etcd(o->control)
                 ? dcr_bench_control_check("--control", o->control)
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

static int finish(const char *what, bool json, dcr_status_t st, const dcr_faults_summary_t *s)
{
    if (st != DCR_OK) {
        char label[64];
        snprintf(label, sizeof(label), "faults %s", what);
        return dcr_cli_fail(label, st);
    }
    if (json) {
        json_t *j = summary_json(what, s);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        print_text(what, s);
    }
    if (s->mismatches || s->baseline_mismatches || s->lost || s->gate_violations ||
        s->commit_violations || s->membership_mismatches) {
        fprintf(stderr,
                "dcr faults %s: %d bit mismatches, %d baseline mismatches, %d versions lost, %lld "
                "mixed reads through the gate, %d premature commit checks, %d membership "
                "mismatches\n",
                what, s->mismatches, s->baseline_mismatches, s->lost, (long long)s->gate_violations,
                s->commit_violations, s->membership_mismatches);
        return 1;
    }
    return 0;
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
        {"--lr", DCR_ARG_DOUBLE, &o->lr, 1e-12, 1, "AdamW learning rate (default 1e-6)", false},
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
    dcr_cli_scenario_init(&o->sc, c->bench.scenario.model, c->bench.scenario.scale,
                          c->bench.scenario.layers);
    o->sc.nodes = c->bench.scenario.train.nodes;
    o->sc.gpus = c->bench.scenario.train.gpus_per_node;
    o->sc.tp = c->bench.scenario.train.tp;
    o->sc.etp = 0;
    o->steps = c->steps;
    o->kill_every = c->kill_every;
    o->restart_after = c->restart_after;
    o->faults_per_step = c->faults_per_step;
    o->attempts = c->max_attempts;
    o->readers = c->readers;
    o->transport = c->bench.transport;
    o->rl = "sync";
    o->changes = "adamw";
    o->lr = c->bench.lr;
    o->rate = c->bench.change_rate;
    o->nodes = c->bench.serve.nodes;
    o->per_node = c->bench.serve.gpus_per_node;
    o->serve_tp = c->bench.serve.tp;
    o->seed = (int64_t)c->bench.seed;
}

static int cmd_train(int argc, char **argv)
{
    dcr_faults_run_config_t c = dcr_faults_run_config_default();
    faults_opts_t o;
    defaults(&o, &c);
    dcr_arg_t args[NOWN + DCR_CLI_SCENARIO_NARGS];
    own_args(&o, args);
    dcr_cli_scenario_args(&o.sc, args + NOWN);
    int rc = dcr_args_parse(
        "faults train",
        "[--steps 50] [--kill-every 5] [--restart-after 5] [--transport objstore|relay] "
        "[--store s3://BUCKET/PREFIX --s3-endpoint URL] [--control etcd://HOST:PORT] [--json]",
        args, NOWN + DCR_CLI_SCENARIO_NARGS, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    if (check_control("train", &o)) return 2;
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    rc = dcr_cli_check("faults train", fill(&o, args, NOWN + DCR_CLI_SCENARIO_NARGS, &c));
    if (rc) return rc;
    dcr_interrupt_install();
    dcr_status_t st = dcr_faults_run(&c, &s);
    return finish("train", o.json, st, &s);
}

static int cmd_campaign(int argc, char **argv)
{
    dcr_faults_campaign_config_t cc = dcr_faults_campaign_config_default();
    faults_opts_t o;
    defaults(&o, &cc.run);
    o.seed = (int64_t)cc.base_seed;
    o.seeds = cc.seeds;
    dcr_arg_t args[NOWN + 1 + DCR_CLI_SCENARIO_NARGS];
    own_args(&o, args);
    args[NOWN] = (dcr_arg_t){"--seeds", DCR_ARG_INT, &o.seeds,
                             1,         100000,      "runs, each with its own seed (default 20)",
                             false};
    dcr_cli_scenario_args(&o.sc, args + NOWN + 1);
    int rc =
        dcr_args_parse("faults campaign",
                       "[--seeds 20] [--steps 4] [--faults-per-step 2] [--store s3://BUCKET/PREFIX "
                       "--s3-endpoint URL] [--control etcd://HOST:PORT] [--json]",
                       args, NOWN + 1 + DCR_CLI_SCENARIO_NARGS, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    if (check_control("campaign", &o)) return 2;
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    rc = dcr_cli_check("faults campaign",
                       fill(&o, args, NOWN + 1 + DCR_CLI_SCENARIO_NARGS, &cc.run));
    if (rc) return rc;
    cc.seeds = (int)o.seeds;
    cc.base_seed = (uint64_t)o.seed;
    dcr_interrupt_install();
    dcr_status_t st = dcr_faults_campaign(&cc, &s);
    return finish("campaign", o.json, st, &s);
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
            "(dcr faults train --help, dcr faults campaign --help for every option)\n");
    return help ? 0 : 2;
}
