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
#include "workloads/change/scenario.h"
#include "workloads/serve/serve_bench.h"

/* --device D: the device module's detection on D against a device-to-device
 * copy of the same bytes, one row per rate. */
static int dcr__device_detect(const char *device, size_t bytes, const double *rates, int nrates,
                              int repeats, bool json)
{
    dcr_device_t *dev = NULL;
    int rc = dcr_cli_device_open("microbench", device, &dev);
    if (rc) return rc;
    const char *place = dcr_device_backend(dev)->hdr.name;
    json_t *rows = json_array();
    if (!json)
        printf("device: %s\n%-8s %12s %12s %10s %12s\n", place, "rate", "d2d_copy_s", "detect_s",
               "ratio", "copy_GB/s");
    for (int i = 0; i < nrates; i++) {
        dcr_device_detect_bench_t r;
        dcr_status_t st = dcr_microbench_device_detect(dev, bytes, rates[i], repeats, &r);
        if (st != DCR_OK) {
            json_decref(rows);
            dcr_device_destroy(dev);
            return dcr_cli_fail("microbench", st);
        }
        if (!json)
            printf("%-8.2f %12.6f %12.6f %10.3f %12.2f\n", r.change_rate, r.copy_s, r.detect_s,
                   r.ratio, r.copy_gbps);
        json_array_append_new(rows, json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "change_rate",
                                              r.change_rate, "copy_s", r.copy_s, "detect_s",
                                              r.detect_s, "ratio", r.ratio, "copy_gbps",
                                              r.copy_gbps, "changed", (json_int_t)r.changed));
    }
    dcr_device_destroy(dev);
    if (json) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:o}", "bench", "detect", "device", place, "bytes",
                              (json_int_t)bytes, "rows", rows);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        json_decref(rows);
        printf("baseline: a device-to-device copy of one buffer (reads and writes the bytes "
               "detection reads)\n");
    }
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
    const char *place = dcr_device_backend(dev)->hdr.name;
    json_t *rows = json_array();
    if (!json)
        printf("device: %s, %.1f MB resident, best of %d\n%-6s %10s %10s %10s %8s %10s %10s\n",
               place, (double)bytes / 1e6, repeats, "rate", "records", "dense_s", "apply_s",
               "ratio", "full_s", "full_ratio");
    for (int i = 0; i < nrates; i++) {
        dcr_device_apply_bench_t r;
        dcr_status_t st = dcr_microbench_device_apply(dev, bytes, rates[i], repeats, &r);
        if (st != DCR_OK) {
            json_decref(rows);
            dcr_device_destroy(dev);
            return dcr_cli_fail("microbench apply", st);
        }
        if (!json)
            printf("%-6.3f %10zu %10.6f %10.6f %8.4f %10.6f %10.4f\n", r.rate, r.records, r.dense_s,
                   r.sparse_s, r.ratio, r.full_s, r.full_ratio);
        json_array_append_new(rows, json_pack("{s:f,s:I,s:f,s:f,s:f,s:f,s:f}", "rate", r.rate,
                                              "records", (json_int_t)r.records, "dense_s",
                                              r.dense_s, "apply_s", r.sparse_s, "ratio", r.ratio,
                                              "full_s", r.full_s, "full_ratio", r.full_ratio));
    }
    dcr_device_destroy(dev);
    if (json) {
        json_t *j =
            json_pack("{s:s,s:s,s:I,s:I,s:o}", "bench", "apply", "device", place, "resident_bytes",
                      (json_int_t)bytes, "repeats", (json_int_t)repeats, "rows", rows);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        json_decref(rows);
        printf("baseline: a dense host-to-device reload of the same bytes from staging\n");
    }
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
    json_t *rows = json_array();
    if (!json) {
        printf("kernel: %s\n", dcr_detect_kernel());
        printf("%-8s %12s %12s %10s %12s\n", "rate", "read_s", "detect_s", "ratio", "read_GB/s");
    }
    for (int i = 0; i < 4; i++) {
        dcr_detect_bench_t r;
        dcr_status_t st =
            dcr_microbench_detect((size_t)(mib * (1 << 20)), rates[i], (int)repeats, &r);
        if (st != DCR_OK) {
            json_decref(rows);
            return dcr_cli_fail("microbench", st);
        }
        if (!json)
            printf("%-8.2f %12.5f %12.5f %10.3f %12.2f\n", r.change_rate, r.read_s, r.detect_s,
                   r.ratio, r.read_gbps);
        json_array_append_new(rows, json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "change_rate",
                                              r.change_rate, "read_s", r.read_s, "detect_s",
                                              r.detect_s, "ratio", r.ratio, "read_gbps",
                                              r.read_gbps, "changed", (json_int_t)r.changed));
    }
    if (json) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:o}", "bench", "detect", "kernel", dcr_detect_kernel(),
                              "bytes", (json_int_t)(mib * (1 << 20)), "rows", rows);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        json_decref(rows);
    }
    return 0;
}

enum { DCR__APPLY_RATES_MAX = 16 };

static void dcr__apply_print(const dcr_serve_bench_result_t *res, int n, int64_t repeats, bool json)
{
    if (!json) {
        printf("receiver: %.1f MB resident, best of %lld\n", (double)res[0].resident_bytes / 1e6,
               (long long)repeats);
        printf("%-6s %10s %10s %10s %8s %10s %10s %10s %8s %10s %11s\n", "rate", "records",
               "dense_s", "apply_s", "ratio", "ingest_s", "full_s", "full_ratio", "sparse",
               "floor_s", "floor_ratio");
        for (int i = 0; i < n; i++)
            printf("%-6.3f %10lld %10.5f %10.5f %8.3f %10.5f %10.5f %10.3f %8lld %10.5f %11.3f\n",
                   res[i].rate, (long long)res[i].records, res[i].dense_s, res[i].apply_s,
                   res[i].ratio, res[i].ingest_s, res[i].full_apply_s, res[i].full_ratio,
                   (long long)res[i].items_sparse, res[i].floor_s, res[i].floor_ratio);
        printf("floor: the same records by a bare prefetching loop into huge-page memory of the "
               "same bytes (no decode, loader or checks)\n");
        return;
    }
    json_t *rows = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(
            rows, json_pack("{s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:f,s:f}", "rate",
                            res[i].rate, "records", (json_int_t)res[i].records, "payload_bytes",
                            (json_int_t)res[i].payload_bytes, "dense_s", res[i].dense_s, "apply_s",
                            res[i].apply_s, "ratio", res[i].ratio, "ingest_s", res[i].ingest_s,
                            "full_apply_s", res[i].full_apply_s, "full_ratio", res[i].full_ratio,
                            "items_sparse", (json_int_t)res[i].items_sparse, "items_full",
                            (json_int_t)res[i].items_full, "floor_s", res[i].floor_s, "floor_ratio",
                            res[i].floor_ratio));
    json_t *j =
        json_pack("{s:s,s:I,s:I,s:o}", "bench", "apply", "resident_bytes",
                  (json_int_t)res[0].resident_bytes, "repeats", (json_int_t)repeats, "rows", rows);
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
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
    double rates[DCR__APPLY_RATES_MAX];
    int nrates = 0;
    int st_rates = dcr_args_parse_list("--rates", rates_text, 1e-6, 1, false, rates,
                                       DCR__APPLY_RATES_MAX, &nrates);
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
    dcr_serve_bench_options_t opt = {0, false, true, (int)repeats, (uint64_t)seed};
    dcr_serve_bench_result_t res[DCR__APPLY_RATES_MAX];
    dcr_scenario_t *sc = NULL;
    dcr_status_t st = dcr_scenario_create(&spec, &sc);
    if (st == DCR_OK) st = dcr_serve_config_validate(&sc->model, &serve);
    /* The bench holds the old and new canonical tensors and the floor's flat
     * copy, receiver 0 and the dense reload's receiver. */
    if (st == DCR_OK)
        st = dcr_scenario_check_memory(sc, "microbench apply",
                                       &(dcr_run_shape_t){.canonical_copies = 3,
                                                          .receivers = 1,
                                                          .serve_tp = (int)serve_tp,
                                                          .verifiers = 1,
                                                          .transient = true});
    if (st != DCR_OK) {
        dcr_scenario_destroy(sc);
        return dcr_cli_check("microbench apply", st); /* model, layers, serving layout */
    }
    if (dcr_args_seen(args, nargs, "--device")) {
        size_t bytes = 0;
        for (size_t i = 0; i < dcr_inventory_count(sc->inventory); i++)
            bytes += dcr_desc_bytes(dcr_inventory_at(sc->inventory, i));
        dcr_scenario_destroy(sc);
        return dcr__device_apply(device, bytes, rates, nrates, (int)repeats, json);
    }
    st = dcr_serve_bench_run(&sc->model, &serve, &opt, rates, nrates, res);
    dcr_scenario_destroy(sc);
    if (st != DCR_OK) return dcr_cli_fail("microbench apply", st);
    dcr__apply_print(res, nrates, repeats, json);
    return 0;
}

int dcr_cmd_microbench(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "apply")) return dcr__microbench_apply(argc - 1, argv + 1);
    return dcr__microbench_detect(argc, argv);
}
