/* dcr construct: one delta construction on a synthetic training step. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "workloads/harness/construct_bench.h"
#include "workloads/harness/construct_report.h"
#include "workloads/harness/workdir.h"

typedef struct construct_opts {
    dcr_cli_scenario_t sc;
    const char *mode, *keep, *changes, *init;
    double rate, chunk_mib, bucket_mib;
    int64_t level, seed, rounds;
    bool shuffle, no_shuffle, compare_shuffle, json;
    const char *device; /* --device; NULL: cpu */
} construct_opts_t;

/* The flags' rules (usage errors), and the modes to run: modes[0..*n_p). */
static dcr_status_t check_opts(const construct_opts_t *o, dcr_construct_mode_t *modes, int *n_p)
{
    if (strcmp(o->mode, "all")) {
        *n_p = 1;
        DCR_CHECK(dcr_construct_mode_parse(o->mode, &modes[0]));
    }
    if (o->shuffle && o->no_shuffle)
        return dcr_error_set(DCR_EINVAL, "--shuffle and --no-shuffle contradict each other");
    if (o->keep && (*n_p != 1 || o->rounds != 1 || o->compare_shuffle))
        return dcr_error_set(DCR_EINVAL,
                             "--keep-payloads needs one mode and one run (no --mode all, --rounds "
                             "or --compare-shuffle)");
    if (o->keep) DCR_CHECK(dcr_workdir_check("--keep-payloads", o->keep));
    /* --changes uniform (the --change-rate stress changes) or profile:FILE. */
    if (strncmp(o->changes, "profile:", 8) != 0 && strcmp(o->changes, "uniform") != 0)
        return dcr_error_set(DCR_EINVAL, "--changes %s is not uniform or profile:FILE", o->changes);
    return DCR_OK;
}

static int run(construct_opts_t *o)
{
    dcr_construct_mode_t modes[3] = {DCR_MODE_X, DCR_MODE_P, DCR_MODE_F};
    int nmodes = 3;
    dcr_scenario_spec_t spec;
    dcr_scenario_t *sc = NULL;
    dcr_status_t s;
    bool usage = true;
    dcr_dir_sink_t dir_sink;
    dcr_dir_sink_init(&dir_sink, o->keep, 1);
    DCR_CHECK_GOTO(check_opts(o, modes, &nmodes), s, fail);
    dcr_change_profile_t profile;
    bool replay = strncmp(o->changes, "profile:", 8) == 0;
    if (replay) DCR_CHECK_GOTO(dcr_change_profile_load(o->changes + 8, &profile), s, fail);
    DCR_CHECK_GOTO(dcr_cli_scenario_spec(&o->sc, &spec), s, fail);
    DCR_CHECK_GOTO(dcr_scenario_create(&spec, &sc), s, fail);
    /* Flags and layout are valid: what fails from here on is the run. */
    usage = false;
    dcr_workdir_t keep = {{0}, false};
    if (o->keep) DCR_CHECK_GOTO(dcr_workdir_open("--keep-payloads", o->keep, NULL, &keep), s, fail);
    dcr_construct_bench_t bench = {o->rate,
                                   (uint64_t)o->seed,
                                   dcr_construct_config_default(),
                                   o->keep ? &dir_sink.sink : NULL,
                                   (int)o->rounds,
                                   o->compare_shuffle,
                                   replay ? &profile : NULL,
                                   o->init};
    /* Both are at least 1/1024 MiB (the parser holds them to this command's bounds). */
    bench.cfg.chunk_bytes = (size_t)(o->chunk_mib * (1 << 20));
    bench.cfg.bucket_bytes = (size_t)(o->bucket_mib * (1 << 20));
    bench.cfg.zstd_level = (int)o->level;
    bench.cfg.shuffle = !o->no_shuffle;
    bench.cfg.device = o->device;
    dcr_construct_bench_result_t res[3];
    DCR_CHECK_GOTO(dcr_construct_bench_run(sc, &bench, modes, nmodes, res), s, fail);
    /* The kept payloads are written after the timed run, not inside it. */
    if (o->keep) DCR_CHECK_GOTO(dcr_dir_sink_flush(&dir_sink, NULL), s, fail);
    dcr_dir_sink_fini(&dir_sink);
    dcr_construct_bench_report(&bench, o->sc.model, o->changes, modes, nmodes, res, o->json);
    dcr_scenario_destroy(sc);
    return 0;
fail:
    dcr_dir_sink_fini(&dir_sink);
    dcr_scenario_destroy(sc);
    return usage ? dcr_cli_check("construct", s) : dcr_cli_fail("construct", s);
}

int dcr_cmd_construct(int argc, char **argv)
{
    construct_opts_t o = {.mode = "X",
                          .rate = 0.03,
                          .chunk_mib = 64,
                          .bucket_mib = 512,
                          .level = 1,
                          .seed = 42,
                          .rounds = 1,
                          .changes = "uniform"};
    dcr_cli_scenario_init(&o.sc, DCR_MODEL_DEFAULT, 16, 8);
    dcr_arg_t args[DCR_CLI_SCENARIO_NARGS + 15] = {
        {"--change-rate", DCR_ARG_DOUBLE, &o.rate, 0, 1,
         "element change rate per owned shard (default 0.03)", false},
        {"--changes", DCR_ARG_STRING, &o.changes, 0, 0,
         "uniform (--change-rate) | profile:FILE (replay a dcr diff --profile)", false},
        {"--init", DCR_ARG_STRING, &o.init, 0, 0,
         "start from this safetensors checkpoint's values (leading blocks when scaled)", false},
        {"--mode", DCR_ARG_STRING, &o.mode, 0, 0, "X | P | F | all (default X)", false},
        {"--chunk-mib", DCR_ARG_DOUBLE, &o.chunk_mib, 1.0 / 1024, 1 << 20,
         "chunk target in MiB of source bytes (default 64)", false},
        {"--bucket-mib", DCR_ARG_DOUBLE, &o.bucket_mib, 1.0 / 1024, 1 << 20,
         "bucket target in MiB of chunk input (default 512)", false},
        {"--level", DCR_ARG_INT, &o.level, 0, 0, "zstd level (default 1)", false},
        {"--shuffle", DCR_ARG_FLAG, &o.shuffle, 0, 0,
         "byte-plane shuffle value and gap words before zstd (the default)", false},
        {"--no-shuffle", DCR_ARG_FLAG, &o.no_shuffle, 0, 0,
         "compress value and gap words as they are", false},
        {"--compare-shuffle", DCR_ARG_FLAG, &o.compare_shuffle, 0, 0,
         "also run every mode with the opposite shuffle setting, alternating", false},
        {"--rounds", DCR_ARG_INT, &o.rounds, 1, 100,
         "runs per configuration, round-robin; the fastest counts (default 1)", false},
        {"--seed", DCR_ARG_INT, &o.seed, 0, 1e15, "seed of weights and changes (default 42)",
         false},
        {"--keep-payloads", DCR_ARG_STRING, &o.keep, 0, 0,
         "write every payload into DIR (new, empty, or dcr's: docs/guides/conventions.md)", false},
        {"--json", DCR_ARG_FLAG, &o.json, 0, 0, "print one JSON object", false},
        dcr_cli_device_arg(&o.device),
    };
    dcr_cli_scenario_args(&o.sc, args + 15);
    int rc = dcr_args_parse("construct",
                            "[--model M --scale S --layers N] [layout flags] [--change-rate R] "
                            "[--mode X|P|F|all] [--no-shuffle] [--compare-shuffle] [--rounds N] "
                            "[--device cpu|cuda|auto] [--json]",
                            args, (int)(sizeof(args) / sizeof(args[0])), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    /* A device this build or machine lacks is a usage error, before the run. */
    dcr_device_t *dev = NULL;
    if ((rc = dcr_cli_device_open("construct", o.device ? o.device : "cpu", &dev))) return rc;
    dcr_device_destroy(dev);
    return run(&o);
}
