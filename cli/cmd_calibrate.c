/* dcr calibrate: the simulator's stage costs, measured on this machine. */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "scenario_args.h"
#include "dcr/outpath.h"
#include "sim/calibrate.h"
#include "sim/calibrate_device.h"
#include "sim/sim_report.h"

typedef struct calibrate_opts {
    const char *model, *out;
    const char *device; /* --device; NULL: cpu */
    int64_t scale, layers, seed;
    bool quick, json;
} calibrate_opts_t;

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
    if (st == DCR_OK && gpu) st = dcr_sim_calibrate_device(dev, o->quick, &cal);
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
        dcr_sim_calibration_print(&cal);
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
