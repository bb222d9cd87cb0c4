/* dcr microbench: same-run ratios of the engine's inner loops. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/device.h"
#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "dcr/construct.h"
#include "workloads/change/budget.h"
#include "workloads/harness/microbench.h"
#include "workloads/harness/microbench_report.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/serve_bench.h"

/* Rates per run: the --rates list (dcr microbench apply) at most. */
enum { DCR__RATES_MAX = 16 };

/* --device D: the device module's detection on D against a device-to-device
 * copy of the same bytes, one row per rate. */
static int dcr__device_detect(const char *device, size_t bytes, const double *rates, int nrates,
                              int repeats, bool json)
{
    dcr_device_t *dev = NULL;
    int rc = dcr_cli_device_open("microbench", device, &dev);
    if (rc) return rc;
    dcr_device_detect_bench_t rows[DCR__RATES_MAX];
    for (int i = 0; i < nrates; i++) {
        dcr_status_t st = dcr_microbench_device_detect(dev, bytes, rates[i], repeats, &rows[i]);
        if (st != DCR_OK) {
            dcr_device_destroy(dev);
            return dcr_cli_fail("microbench", st);
        }
    }
    dcr_microbench_device_detect_report(dcr_device_backend(dev)->hdr.name, rows, nrates, bytes,
                                        json);
    dcr_device_destroy(dev);
    return 0;
}

/* --device D: records staged in D's host staging, copied up and scattered
 * (and the scratch path), against a dense host-to-device reload of `bytes`
 * (the model's canonical bytes as one BF16 tensor), one row per rate. */
static int dcr__device_apply(const char *device, size_t bytes, const double *rates, int nrates,
                             int repeats, bool json)
{
    dcr_device_t *dev = NULL;
    int rc = dcr_cli_device_open("microbench apply", device, &dev);
    if (rc) return rc;
    dcr_device_apply_bench_t rows[DCR__RATES_MAX];
    for (int i = 0; i < nrates; i++) {
        dcr_status_t st = dcr_microbench_device_apply(dev, bytes, rates[i], repeats, &rows[i]);
        if (st != DCR_OK) {
            dcr_device_destroy(dev);
            return dcr_cli_fail("microbench apply", st);
        }
    }
    dcr_microbench_device_apply_report(dcr_device_backend(dev)->hdr.name, rows, nrates, bytes,
                                       repeats, json);
    dcr_device_destroy(dev);
    return 0;
}

static int dcr__microbench_detect(int argc, char **argv)
{
    double mib = 256;
    int64_t repeats = 5;
    bool json = false;
    const char *pos[1], *max_memory = NULL, *device = "cpu";
    int npos = 0;
    dcr_arg_t args[] = {
        {"--mib", DCR_ARG_DOUBLE, &mib, 1, 8192, "buffer size in MiB (default 256)", false},
        {"--repeats", DCR_ARG_INT, &repeats, 1, 1000, "best of N (default 5)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object", false},
        {"--max-memory", DCR_ARG_STRING, &max_memory, 0, 0,
         "memory budget, e.g. 8G (default: 50% of physical memory)", false},
        {"--device", DCR_ARG_STRING, &device, 0, 0,
         "cpu | cuda | auto: time the device module's detect on it against a device-to-device "
         "copy (without the flag: the CPU kernel against a plain read)",
         false},
    };
    int rc =
        dcr_args_parse("microbench",
                       "detect [--mib N] [--repeats N] [--max-memory SIZE] [--device D] [--json]\n"
                       "       dcr microbench apply [options] (see dcr microbench apply --help)",
                       args, 5, argc, argv, pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1 || strcmp(pos[0], "detect")) {
        fprintf(stderr, "dcr microbench: expected the benchmark name 'detect' or 'apply'\n");
        return 2;
    }
    /* Two buffers of --mib and a 4-byte index per 2-byte element. */
    int64_t budget = 0;
    dcr_memory_estimate_t est = {0};
    est.checkpoint = (int64_t)(mib * (1 << 20));
    est.process = dcr_rss_bytes();
    est.transient = 4 * est.checkpoint;
    dcr_status_t bst = max_memory ? dcr_size_parse("--max-memory", max_memory, &budget) : DCR_OK;
    if (bst != DCR_OK) return dcr_cli_usage("microbench", bst);
    bst = dcr_memory_check("microbench detect", &est, budget);
    if (bst != DCR_OK) return dcr_cli_fail("microbench", bst);
    const double rates[] = {0.0, 0.01, 0.03, 0.05};
    if (dcr_args_seen(args, 5, "--device"))
        return dcr__device_detect(device, (size_t)(mib * (1 << 20)), rates, 4, (int)repeats, json);
    dcr_detect_bench_t rows[4];
    for (int i = 0; i < 4; i++) {
        dcr_status_t st =
            dcr_microbench_detect((size_t)(mib * (1 << 20)), rates[i], (int)repeats, &rows[i]);
        if (st != DCR_OK) return dcr_cli_fail("microbench", st);
    }
    dcr_microbench_detect_report(rows, 4, (size_t)(mib * (1 << 20)), json);
    return 0;
}

static int dcr__microbench_apply(int argc, char **argv)
{
    const char *model = DCR_MODEL_DEFAULT, *rates_text = "0.01,0.03,0.05", *max_memory = NULL,
               *device = "cpu";
    int64_t scale = 4, layers = 4, serve_tp = 1, repeats = 3, seed = 42;
    bool json = false;
    dcr_arg_t args[] = {
        {"--model", DCR_ARG_STRING, &model, 0, 0, "built-in model name or config path", false},
        {"--scale", DCR_ARG_INT, &scale, 1, 4096, "divide hidden sizes by S (default 4)", false},
        {"--layers", DCR_ARG_INT, &layers, 1, 100000, "keep the first N layers (default 4)", false},
        {"--serve-tp", DCR_ARG_INT, &serve_tp, 1, 64, "serving TP degree; receiver 0 (default 1)",
         false},
        {"--rates", DCR_ARG_STRING, &rates_text, 0, 0,
         "change rates, comma separated (default 0.01,0.03,0.05)", false},
        {"--repeats", DCR_ARG_INT, &repeats, 1, 1000, "best of N (default 3)", false},
        {"--seed", DCR_ARG_INT, &seed, 0, 1e15, "seed (default 42)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object", false},
        {"--max-memory", DCR_ARG_STRING, &max_memory, 0, 0,
         "memory budget, e.g. 8G (default: 50% of physical memory)", false},
        {"--device", DCR_ARG_STRING, &device, 0, 0,
         "cpu | cuda | auto: time the device module's record application on it against a dense "
         "host-to-device reload (without the flag: a receiver's apply)",
         false},
    };
    int nargs = (int)(sizeof(args) / sizeof(args[0]));
    int rc = dcr_args_parse("microbench apply",
                            "[--model M] [--scale S] [--layers N] [--serve-tp T] [--rates R,R,..] "
                            "[--repeats K] [--device D] [--json]",
                            args, nargs, argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    double rates[DCR__RATES_MAX];
    int nrates = 0;
    int st_rates =
        dcr_args_parse_list("--rates", rates_text, 1e-6, 1, false, rates, DCR__RATES_MAX, &nrates);
    if (st_rates != DCR_OK) return dcr_cli_usage("microbench apply", st_rates);
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.model = model;
    spec.scale = (int)scale;
    spec.layers = (int)layers;
    spec.align_extra = (int)serve_tp;
    if (max_memory && dcr_size_parse("--max-memory", max_memory, &spec.max_memory) != DCR_OK)
        return dcr_cli_usage("microbench apply", DCR_EINVAL);
    dcr_serve_config_t serve = dcr_serve_config_default();
    serve.tp = (int)serve_tp;
    dcr_serve_bench_options_t opt = {0, false, true, (int)repeats, (uint64_t)seed, true};
    dcr_serve_bench_result_t res[DCR__RATES_MAX];
    dcr_scenario_t *sc = NULL;
    size_t bytes = 0;
    dcr_status_t st = dcr_microbench_apply_scenario(&spec, &serve, &sc, &bytes);
    if (st != DCR_OK) return dcr_cli_check("microbench apply", st); /* model, layers, layout */
    if (dcr_args_seen(args, nargs, "--device")) {
        dcr_scenario_destroy(sc);
        return dcr__device_apply(device, bytes, rates, nrates, (int)repeats, json);
    }
    st = dcr_serve_bench_run(&sc->model, &serve, &opt, rates, nrates, res);
    dcr_scenario_destroy(sc);
    if (st != DCR_OK) return dcr_cli_fail("microbench apply", st);
    dcr_microbench_apply_report(res, nrates, (int)repeats, json);
    return 0;
}

int dcr_cmd_microbench(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "apply")) return dcr__microbench_apply(argc - 1, argv + 1);
    return dcr__microbench_detect(argc, argv);
}
