/* dcr report RESULTS.h5 -o DIR [--trace TRACE.json]: figures and report.md. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/outpath.h"
#include "reports/report.h"

static const char usage[] =
    "RESULTS.h5 -o|--out DIR [--trace TRACE.json [--refit N]]\n"
    "\n"
    "Writes DIR/report.md and gnuplot figures as PNG and SVG: fig10_latency (refit\n"
    "latency and speedup vs checkpoint size, one line per transport and change),\n"
    "payload_vs_rate (payload bytes vs change rate per checkpoint) and, with --trace,\n"
    "timeline (stage intervals per owner, endpoint, node and receiver of one refit,\n"
    "both lower bounds and the start of finalization marked). Runs with the same\n"
    "configuration are pooled. The gnuplot scripts and data stay in DIR (redraw with\n"
    "`cd DIR && gnuplot NAME.gp`). Needs gnuplot on PATH (or $DCR_GNUPLOT).";

int dcr_cmd_report(int argc, char **argv)
{
    const char *out = NULL, *trace = NULL;
    int64_t refit = -1;
    dcr_arg_t args[] = {
        {"--out", DCR_ARG_STRING, &out, 0, 0,
         "output directory, also -o DIR (created when missing)", false},
        {"--trace", DCR_ARG_STRING, &trace, 0, 0,
         "trace of dcr bench --trace (or an nsys SQLite export): add a timeline", false},
        {"--refit", DCR_ARG_INT, &refit, 0, 4294967295.0,
         "refit of the trace to draw (default: the one of median latency)", false},
    };
    /* The shared parser knows long options only; -o is the short form users expect. */
    char *av[argc + 1];
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") ? argv[i] : (char *)"--out";
    av[argc] = NULL;
    const char *pos[1];
    int npos = 0;
    int rc = dcr_args_parse("report", usage, args, 3, argc, av, pos, 1, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 1 || !out) {
        fprintf(stderr, "dcr report: expected RESULTS.h5 and -o DIR\n");
        return 2;
    }
    if (args[2].seen && !trace) {
        fprintf(stderr, "dcr report: --refit needs --trace\n");
        return 2;
    }
    rc = dcr_cli_check("report", dcr_outdir_check("-o", out));
    if (rc) return rc;
    dcr_report_opts_t o = {
        .results_path = pos[0], .out_dir = out, .trace_path = trace, .refit = (long)refit};
    dcr_status_t st = dcr_report_write(&o);
    if (st != DCR_OK) return dcr_cli_fail("report", st);
    printf("wrote %s/report.md\n", out);
    return 0;
}
