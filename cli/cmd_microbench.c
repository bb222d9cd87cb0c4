/* dcr microbench: same-run ratios of the engine's inner loops. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "workloads/microbench.h"

int dcr_cmd_microbench(int argc, char **argv)
{
    double mib = 256;
    int64_t repeats = 5;
    bool json = false;
    const char *pos[1];
    int npos = 0;
    dcr_arg_t args[] = {
        {"--mib", DCR_ARG_DOUBLE, &mib, 1, 8192, "buffer size in MiB (default 256)", false},
        {"--repeats", DCR_ARG_INT, &repeats, 1, 1000, "best of N (default 5)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object", false},
    };
    int rc = dcr_args_parse("microbench", "detect [--mib N] [--repeats N] [--json]", args, 3, argc,
                            argv, pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1 || strcmp(pos[0], "detect")) {
        fprintf(stderr, "dcr microbench: expected the benchmark name 'detect'\n");
        return 2;
    }
    const double rates[] = {0.0, 0.01, 0.03, 0.05};
    json_t *rows = json_array();
    if (!json)
        printf("%-8s %12s %12s %10s %12s\n", "rate", "read_s", "detect_s", "ratio", "read_GB/s");
    for (int i = 0; i < 4; i++) {
        dcr_detect_bench_t r;
        dcr_status_t st =
            dcr_microbench_detect((size_t)(mib * (1 << 20)), rates[i], (int)repeats, &r);
        if (st != DCR_OK) {
            dcr_cli_report("microbench", st);
            json_decref(rows);
            return 1;
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
        json_t *j = json_pack("{s:s,s:I,s:o}", "bench", "detect", "bytes",
                              (json_int_t)(mib * (1 << 20)), "rows", rows);
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(j);
    } else {
        json_decref(rows);
    }
    return 0;
}
