/* dcr bounds TRACE: per-refit lower bounds, finalization and latency from a
 * saved Chrome trace or an Nsight Systems SQLite export. */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "dcr/trace.h"
#include "reports/bounds_report.h"
#include "reports/trace_io.h"

int dcr_cmd_bounds(int argc, char **argv)
{
    bool json = false, nsys = false, critical = false;
    dcr_arg_t args[] = {
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object: refits[] and means", false},
        {"--nsys", DCR_ARG_FLAG, &nsys, 0, 0,
         "TRACE is an `nsys export --type sqlite` file (detected by its magic otherwise)", false},
        {"--critical-path", DCR_ARG_FLAG, &critical, 0, 0,
         "also each refit's critical path: its window split into work and waits (hand-offs), "
         "summed by kind",
         false},
    };
    const char *pos[1];
    int npos = 0;
    int rc = dcr_args_parse("bounds", "TRACE [--json] [--nsys] [--critical-path]", args, 3, argc,
                            argv, pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1) {
        fprintf(stderr, "dcr bounds: expected one TRACE file (a dcr Chrome trace or an nsys SQLite "
                        "export)\n");
        return 2;
    }
    const char *path = pos[0];
    bool sqlite = nsys || dcr_trace_file_is_sqlite(path);
    dcr_trace_interval_t *iv = NULL;
    size_t n = 0;
    dcr_bounds_run_t r = {0};
    dcr_path_report_t p = {0};
    dcr_status_t s;
    if (sqlite)
        DCR_CHECK_GOTO(dcr_trace_read_nsys(path, &iv, &n), s, fail);
    else
        DCR_CHECK_GOTO(dcr_trace_read_chrome(path, &iv, &n), s, fail);
    DCR_CHECK_GOTO(dcr_bounds_run_compute(path, iv, n, &r), s, fail);
    if (critical) {
        DCR_CHECK_GOTO(dcr_path_report_compute(iv, n, &r, &p), s, fail);
        dcr_bounds_run_print_path(path, sqlite ? "nsys" : "chrome", &r, &p, json);
    } else {
        dcr_bounds_run_print(path, sqlite ? "nsys" : "chrome", &r, json);
    }
    rc = 0;
    goto done;
fail:
    dcr_cli_report("bounds", s);
    rc = 1;
done:
    free(iv);
    dcr_bounds_run_free(&r);
    dcr_path_report_free(&p);
    return rc;
}
