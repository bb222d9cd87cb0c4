/* dcr diff: what changed between two safetensors checkpoints, per tensor
 * class, as construction on a training layout produces it. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "workloads/change/change_profile.h"
#include "workloads/harness/workdir.h"
#include "dcr/outpath.h"
#include "workloads/change/ckpt_diff.h"
#include "workloads/change/ckpt_diff_report.h"
#include "workloads/harness/construct_bench.h"

typedef struct diff_opts {
    dcr_cli_scenario_t sc;
    const char *paths[2], *keep, *profile, *init, *changes;
    double chunk_mib, bucket_mib, rate, lr;
    int64_t level, seed;
    bool json, no_class_payloads;
    char model_path[4096];
    char step_label[256]; /* NEW of a --init run */
} diff_opts_t;

/* Without --model: the config.json beside OLD (or the --init checkpoint):
 * in it when it is a directory, else in the directory of the file. */
static dcr_status_t default_model(diff_opts_t *o)
{
    const char *old = o->paths[0];
    struct stat sb;
    bool dir = stat(old, &sb) == 0 && S_ISDIR(sb.st_mode);
    const char *slash = strrchr(old, '/');
    int n = dir     ? snprintf(o->model_path, sizeof(o->model_path), "%s/config.json", old)
            : slash ? snprintf(o->model_path, sizeof(o->model_path), "%.*s/config.json",
                               (int)(slash - old), old)
                    : snprintf(o->model_path, sizeof(o->model_path), "./config.json");
    if (n < 0 || (size_t)n >= sizeof(o->model_path) || access(o->model_path, R_OK) != 0) {
        return dcr_error_set(DCR_EINVAL,
                             "no --model given and no readable config.json beside %s (expected "
                             "%s)",
                             old, o->model_path);
    }
    o->sc.model = o->model_path;
    return DCR_OK;
}

/* OLD and NEW (or --init's checkpoint) exist: a missing one is a usage
 * error found before the model is built. */
static dcr_status_t inputs_exist(const diff_opts_t *o)
{
    struct stat sb;
    for (int i = 0; i < (o->init ? 1 : 2); i++)
        if (stat(o->paths[i], &sb) != 0)
            return dcr_error_set(errno == ENOENT || errno == ENOTDIR ? DCR_ENOTFOUND : DCR_EIO,
                                 "checkpoint %s: %s", o->paths[i], strerror(errno));
    return DCR_OK;
}

/* --changes uniform | adamw | profile:FILE of a --init run. */
static dcr_status_t step_of(const diff_opts_t *o, dcr_diff_step_t *step,
                            dcr_change_profile_t *replay)
{
    *step = (dcr_diff_step_t){DCR_DIFF_STEP_UNIFORM, o->rate, o->lr, NULL, (uint64_t)o->seed};
    if (strncmp(o->changes, "profile:", 8) == 0) {
        DCR_CHECK(dcr_change_profile_load(o->changes + 8, replay));
        step->kind = DCR_DIFF_STEP_PROFILE;
        step->profile = replay;
    } else if (strcmp(o->changes, "adamw") == 0) {
        if (!(o->lr > 0)) return dcr_error_set(DCR_EINVAL, "--lr must be positive for adamw");
        step->kind = DCR_DIFF_STEP_ADAMW;
    } else if (strcmp(o->changes, "uniform") != 0) {
        return dcr_error_set(DCR_EINVAL, "--changes %s is not uniform, adamw or profile:FILE",
                             o->changes);
    }
    return DCR_OK;
}

static int run(diff_opts_t *o)
{
    dcr_scenario_t *sc = NULL;
    dcr_status_t s;
    bool usage = true; /* until the flags, the model and the step are found valid */
    dcr_dir_sink_t sink;
    dcr_dir_sink_init(&sink, o->keep, 1);
    if (o->keep) DCR_CHECK_GOTO(dcr_workdir_check("--keep-payloads", o->keep), s, fail);
    if (o->profile) DCR_CHECK_GOTO(dcr_outpath_check("--profile", o->profile), s, fail);
    DCR_CHECK_GOTO(inputs_exist(o), s, fail);
    if (!o->sc.model) DCR_CHECK_GOTO(default_model(o), s, fail);
    dcr_scenario_spec_t spec;
    DCR_CHECK_GOTO(dcr_cli_scenario_spec(&o->sc, &spec), s, fail);
    DCR_CHECK_GOTO(dcr_scenario_create(&spec, &sc), s, fail);
    dcr_diff_options_t opt = dcr_diff_options_default();
    opt.cfg.chunk_bytes = (size_t)(o->chunk_mib * (1 << 20));
    opt.cfg.bucket_bytes = (size_t)(o->bucket_mib * (1 << 20));
    opt.cfg.zstd_level = (int)o->level;
    opt.sink = o->keep ? &sink.sink : NULL;
    opt.class_payloads = !o->no_class_payloads;
    dcr_diff_result_t r;
    if (o->init) {
        dcr_diff_step_t step;
        dcr_change_profile_t replay;
        DCR_CHECK_GOTO(step_of(o, &step, &replay), s, fail);
        usage = false;
        DCR_CHECK_GOTO(dcr_ckpt_diff_step(sc, o->init, &step, &opt, &r), s, fail);
    } else {
        usage = false;
        DCR_CHECK_GOTO(dcr_ckpt_diff(sc, o->paths[0], o->paths[1], &opt, &r), s, fail);
    }
    /* The sink held the payloads through the timed construction. */
    if (o->keep) DCR_CHECK_GOTO(dcr_dir_sink_flush(&sink, NULL), s, fail);
    dcr_dir_sink_fini(&sink);
    if (o->profile) {
        dcr_change_profile_t prof;
        dcr_change_profile_from_diff(&r, sc->model.name, &prof);
        DCR_CHECK_GOTO(dcr_change_profile_write(&prof, o->profile, o->paths[0], o->paths[1]), s,
                       fail);
    }
    dcr_diff_result_print(sc, o->paths[0], o->paths[1], !o->no_class_payloads, &r, o->json);
    dcr_scenario_destroy(sc);
    return 0;
fail:
    dcr_dir_sink_fini(&sink);
    dcr_scenario_destroy(sc);
    /* Before the diff runs: a missing OLD, a missing or malformed model, a
     * bad step are usage errors (exit 2); what the diff finds fails (1). */
    return usage ? dcr_cli_check("diff", s) : dcr_cli_fail("diff", s);
}

enum { NOWN = 12, NSTEP = 5 };

/* The command's own flags (NOWN entries; the last NSTEP, of the synthetic
 * step, are refused without --init). */
static void own_args(diff_opts_t *o, dcr_arg_t *a)
{
    const dcr_arg_t own[NOWN] = {
        {"--chunk-mib", DCR_ARG_DOUBLE, &o->chunk_mib, 1.0 / 1024, 1 << 20,
         "chunk target in MiB of source bytes (default 64)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o->bucket_mib, 1.0 / 1024, 1 << 20,
         "bucket target in MiB of chunk input (default 512)", false},
        {"--level", DCR_ARG_INT, &o->level, 0, 0, "zstd level (default 1)", false},
        {"--keep-payloads", DCR_ARG_STRING, &o->keep, 0, 0,
         "write the payloads of the whole-checkpoint mode X run into this existing directory",
         false},
        {"--no-class-payloads", DCR_ARG_FLAG, &o->no_class_payloads, 0, 0,
         "construct the whole checkpoint only, not every changed class alone", false},
        {"--json", DCR_ARG_FLAG, &o->json, 0, 0, "print one JSON object", false},
        {"--profile", DCR_ARG_STRING, &o->profile, 0, 0,
         "write the measured change profile (per class rate and clustering) to this file", false},
        /* The synthetic step of --init; the last NSTEP entries, refused without --init. */
        {"--init", DCR_ARG_STRING, &o->init, 0, 0,
         "instead of OLD NEW: this checkpoint against one synthetic step on it", false},
        {"--changes", DCR_ARG_STRING, &o->changes, 0, 0,
         "step of --init: uniform (default) | adamw | profile:FILE", false},
        {"--change-rate", DCR_ARG_DOUBLE, &o->rate, 0, 1,
         "uniform step of --init: change rate per owned shard (default 0.03)", false},
        {"--lr", DCR_ARG_DOUBLE, &o->lr, 0, 1, "adamw step of --init: learning rate (default 1e-6)",
         false},
        {"--seed", DCR_ARG_INT, &o->seed, 0, 1e15, "seed of the --init step (default 42)", false},
    };
    memcpy(a, own, sizeof own);
}

/* OLD NEW, or --init CKPT with its step's flags: usage errors exit 2. */
static int check_inputs(diff_opts_t *o, const dcr_arg_t *args, int npos)
{
    if (o->init && npos != 0) {
        fprintf(stderr, "dcr diff: --init CKPT takes no OLD NEW (got %d paths)\n", npos);
        return 2;
    }
    if (!o->init && npos != 2) {
        fprintf(stderr,
                "dcr diff: expected two checkpoints OLD NEW (got %d; see dcr diff --help)\n", npos);
        return 2;
    }
    if (o->init) {
        /* OLD is the checkpoint, NEW its synthetic step (named in the output). */
        snprintf(o->step_label, sizeof(o->step_label), "%s step", o->changes);
        o->paths[0] = o->init;
        o->paths[1] = o->step_label;
    }
    for (int i = NOWN - NSTEP + 1; !o->init && i < NOWN; i++) {
        if (args[i].seen) {
            fprintf(stderr, "dcr diff: %s needs --init CKPT\n", args[i].name);
            return 2;
        }
    }
    return 0;
}

int dcr_cmd_diff(int argc, char **argv)
{
    diff_opts_t o = {.chunk_mib = 64,
                     .bucket_mib = 512,
                     .level = 1,
                     .changes = "uniform",
                     .rate = 0.03,
                     .lr = 1e-6,
                     .seed = 42};
    dcr_cli_scenario_init(&o.sc, NULL, 1, 0);
    dcr_arg_t args[DCR_CLI_SCENARIO_NARGS + NOWN];
    own_args(&o, args);
    dcr_cli_scenario_args(&o.sc, args + NOWN);
    int npos = 0;
    int rc =
        dcr_args_parse("diff",
                       "OLD NEW | --init CKPT [--changes uniform|adamw|profile:FILE] "
                       "[--model M (default: the config.json beside OLD)] [layout flags] "
                       "[--keep-payloads DIR] [--profile OUT.json] [--json]",
                       args, (int)(sizeof(args) / sizeof(args[0])), argc, argv, o.paths, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if ((rc = check_inputs(&o, args, npos))) return rc;
    return run(&o);
}
