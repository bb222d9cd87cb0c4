/* dcr calibrate: the simulator's stage costs, measured on this machine. */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "workloads/harness/microbench.h"
#include "dcr/outpath.h"
#include "sim/calibrate.h"

typedef struct calibrate_opts {
    const char *model, *out;
    const char *device; /* --device; NULL: cpu */
    int64_t scale, layers, seed;
    bool quick, json;
} calibrate_opts_t;

static void print_text(const dcr_sim_calibration_t *c)
{
    printf("machine %s\n\n%-8s %12s %12s %12s %12s %10s %10s\n", c->machine, "rate", "detect_ns/B",
           "encode_ns/r", "xor_value_B", "ovw_value_B", "gap8_B", "gap16_B");
    for (int i = 0; i < c->npoints; i++) {
        const dcr_sim_cal_point_t *p = &c->points[i];
        printf("%-8g %12.4f %12.2f %12.3f %12.3f %10.3f %10.3f\n", p->rate,
               p->detect_s_per_byte * 1e9, p->encode_s_per_record * 1e9, p->xor_value_bytes,
               p->overwrite_value_bytes, p->gap8_bytes, p->gap16_bytes);
    }
    printf("\npayload size factors:");
    for (int i = 0; i < c->nsizes; i++)
        printf(" %.0f B x%.3f", c->sizes[i].bytes, c->sizes[i].factor);
    printf("\nconstruction: project %.2f ns/record, %.2f us per item, residual %.4f ns/B, copy "
           "%.4f ns/B, "
           "item metadata %.1f B\n",
           c->project_s_per_record * 1e9, c->construct_s_per_item * 1e6,
           c->residual_s_per_byte * 1e9, c->copy_s_per_byte * 1e9, c->bytes_per_item);
    printf("receiver: decode %.2f us per payload + %.4f ns/B, apply %.2f ns/record and %.2f us per "
           "item, full pass %.4f "
           "ns/B\n",
           c->decode_s_per_payload * 1e6, c->decode_s_per_byte * 1e9, c->apply_s_per_record * 1e9,
           c->apply_s_per_item * 1e6, c->apply_s_per_full_byte * 1e9);
    printf("control plane: ack %.3f ms, commit %.3f ms; directory object store PUT %.3f ms; relay "
           "hop %.3f ms + "
           "%.3f ns/B\n",
           c->ack_s * 1e3, c->commit_s * 1e3, c->store_put_s * 1e3, c->relay_hop_s * 1e3,
           c->relay_hop_s_per_byte * 1e9);
}

/* GPU-side costs (a device the host cannot address): the owners'
 * detection per source byte at each point's rate, and the receivers'
 * record application, per record and per byte of a full scratch pass, all
 * measured on the device replace the host figures (bench sizes: a 256 MiB
 * BF16 chunk, 64 MiB with --quick). */
static dcr_status_t calibrate_device(dcr_device_t *dev, bool quick, dcr_sim_calibration_t *cal)
{
    size_t bytes = (size_t)(quick ? 64 : 256) << 20;
    int repeats = quick ? 3 : 7;
    for (int i = 0; i < cal->npoints; i++) {
        dcr_device_detect_bench_t d;
        DCR_CHECK(dcr_microbench_device_detect(dev, bytes, cal->points[i].rate, repeats, &d));
        cal->points[i].detect_s_per_byte = d.detect_s / (double)d.bytes;
    }
    dcr_device_apply_bench_t a;
    DCR_CHECK(dcr_microbench_device_apply(dev, bytes, 0.01, repeats, &a));
    cal->apply_s_per_record = a.sparse_s / (double)(a.records ? a.records : 1);
    cal->apply_s_per_full_byte = a.full_s / (double)a.bytes;
    return DCR_OK;
}

static int run(const calibrate_opts_t *o)
{
    /* An unwritable --out fails now, not after minutes of measuring. */
    if (o->out) {
        int rc = dcr_cli_check("calibrate", dcr_outpath_check("--out", o->out));
        if (rc) return rc;
    }
    /* So does a device this machine lacks. */
    dcr_device_t *dev = NULL;
    int drc = dcr_cli_device_open("calibrate", o->device ? o->device : "cpu", &dev);
    if (drc) return drc;
    bool gpu = !dcr_device_backend(dev)->props.host_addressable;
    dcr_sim_cal_options_t opt = dcr_sim_cal_options_default();
    opt.model = o->model;
    opt.scale = (int)o->scale;
    opt.layers = (int)o->layers;
    opt.quick = o->quick;
    opt.seed = (uint64_t)o->seed;
    dcr_sim_calibration_t cal;
    dcr_status_t st = dcr_sim_calibrate(&opt, &cal);
    if (st == DCR_OK && gpu) st = calibrate_device(dev, o->quick, &cal);
    const char *place = dcr_device_backend(dev)->hdr.name;
    dcr_device_destroy(dev);
    if (st == DCR_OK && o->out) st = dcr_sim_cal_save(&cal, o->out);
    if (st != DCR_OK) return dcr_cli_fail("calibrate", st);
    if (o->json) {
        char *text = dcr_sim_cal_to_json(&cal);
        if (!text) {
            fprintf(stderr, "dcr calibrate: out of memory\n");
            return 1;
        }
        printf("%s\n", text);
        free(text);
    } else {
        if (gpu) printf("device %s: detection and record application measured on the GPU\n", place);
        print_text(&cal);
        if (o->out) printf("\nwritten to %s\n", o->out);
    }
    return 0;
}

int dcr_cmd_calibrate(int argc, char **argv)
{
    dcr_sim_cal_options_t d = dcr_sim_cal_options_default();
    calibrate_opts_t o = {d.model, NULL, NULL, d.scale, d.layers, (int64_t)d.seed, false, false};
    dcr_arg_t args[] = {
        {"--out", DCR_ARG_STRING, &o.out, 0, 0, "write the calibration JSON to this file", false},
        {"--model", DCR_ARG_STRING, &o.model, 0, 0,
         "model of the construction and apply runs (default qwen3-30b-a3b)", false},
        {"--scale", DCR_ARG_INT, &o.scale, 1, 1024, "divide the model's sizes by S (default 16)",
         false},
        {"--layers", DCR_ARG_INT, &o.layers, 0, 100000,
         "keep the first N layers (default 8; 0: all)", false},
        {"--quick", DCR_ARG_FLAG, &o.quick, 0, 0,
         "fewer rates and repetitions (a rough calibration)", false},
        {"--seed", DCR_ARG_INT, &o.seed, 0, 1e15, "seed of the synthetic weights (default 42)",
         false},
        {"--json", DCR_ARG_FLAG, &o.json, 0, 0, "print the calibration JSON", false},
        dcr_cli_device_arg(&o.device),
    };
    int rc = dcr_args_parse("calibrate",
                            "[--out FILE] [--json] [--quick] [--model M --scale S --layers N] "
                            "[--device cpu|cuda|auto]",
                            args, (int)(sizeof(args) / sizeof(args[0])), argc, argv, NULL, 0, NULL);
    if (rc) return rc == 1 ? 0 : 2;
    return run(&o);
}
