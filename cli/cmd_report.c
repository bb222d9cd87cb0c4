/* dcr report RESULTS.h5 [MORE.h5 ...] -o DIR [--base BASE.h5] [--trace TRACE.json]:
 * figures and report.md. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/outpath.h"
#include "reports/report.h"
#include "reports/results_read.h"

enum { MAX_FILES = 64, MAX_IGNORED = 32 };

static const char usage[] =
    "RESULTS.h5 [MORE.h5 ...] -o|--out DIR [--base BASE.h5 [--threshold PCT]\n"
    "       [--match-ignore KEY,...]] [--trace TRACE.json [--refit N]]\n"
    "\n"
    "Writes DIR/report.md and gnuplot figures as PNG and SVG: fig10_latency (refit\n"
    "latency and speedup vs checkpoint size, one line per transport and change),\n"
    "payload_vs_rate (payload bytes vs change rate per checkpoint); with two or more\n"
    "runs (in one file or several), trend (per metric, each run's median with its 95%\n"
    "bootstrap interval as a band, runs in time order labelled by git revision, one\n"
    "line per configuration and machine); with --base, base_vs_new (NEW/BASE of the\n"
    "medians per matched configuration and metric of BASE.h5 against RESULTS.h5, with\n"
    "its interval and dcr compare's verdict); with --trace, timeline (stage intervals\n"
    "per owner, endpoint, node and receiver of one refit, both lower bounds and the\n"
    "start of finalization marked). Runs with the same configuration, command and\n"
    "machine are pooled. The gnuplot scripts and data stay in DIR (redraw with\n"
    "`cd DIR && gnuplot NAME.gp`). Needs gnuplot on PATH (or $DCR_GNUPLOT).\n"
    "Exit status: 0 written, 1 failed, 2 usage, 4 a results file unreadable.";

/* Splits "a,b" into keys pointing into buf. */
static int split_keys(const char *text, char *buf, size_t len, const char **keys, size_t *n_p)
{
    snprintf(buf, len, "%s", text);
    size_t n = 0;
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k && n < MAX_IGNORED;
         k = strtok_r(NULL, ",", &save))
        keys[n++] = k;
    if (!n || strlen(text) >= len) {
        fprintf(stderr, "dcr report: --match-ignore: expected KEY[,KEY...]\n");
        return 2;
    }
    *n_p = n;
    return 0;
}

/* Every results file readable, before anything is drawn: an unreadable,
 * foreign or damaged file is exit 4, as for dcr compare, so that a CI job
 * can tell a broken input from a failed report. */
static bool results_readable(const char *const *paths, int n, const char *base)
{
    for (int i = 0; i <= n; i++) {
        const char *path = i < n ? paths[i] : base;
        if (!path) continue;
        dcr_results_set_t *set = NULL;
        dcr_status_t st = dcr_results_read(path, &set);
        if (st != DCR_OK) {
            dcr_cli_fail("report", st);
            return false;
        }
        dcr_results_set_destroy(set);
    }
    return true;
}

int dcr_cmd_report(int argc, char **argv)
{
    const char *out = NULL, *trace = NULL, *base = NULL, *ignore_text = NULL;
    int64_t refit = -1;
    double threshold = 10;
    dcr_arg_t args[] = {
        {"--out", DCR_ARG_STRING, &out, 0, 0,
         "output directory, also -o DIR (created when missing)", false},
        {"--trace", DCR_ARG_STRING, &trace, 0, 0,
         "trace of dcr bench --trace (or an nsys SQLite export): add a timeline", false},
        {"--refit", DCR_ARG_INT, &refit, 0, 4294967295.0,
         "refit of the trace to draw (default: the one of median latency)", false},
        {"--base", DCR_ARG_STRING, &base, 0, 0,
         "results file to draw RESULTS.h5 against (base_vs_new figure)", false},
        {"--threshold", DCR_ARG_DOUBLE, &threshold, 0, 1e6,
         "--base: allowed slowdown in percent (default 10)", false},
        {"--match-ignore", DCR_ARG_STRING, &ignore_text, 0, 0,
         "--base: pair runs that differ only in these configuration keys", false},
    };
    /* The shared parser knows long options only; -o is the short form users expect. */
    char *av[argc + 1];
    for (int i = 0; i < argc; i++) av[i] = strcmp(argv[i], "-o") ? argv[i] : (char *)"--out";
    av[argc] = NULL;
    const char *pos[MAX_FILES];
    int npos = 0;
    int rc = dcr_args_parse("report", usage, args, 6, argc, av, pos, MAX_FILES, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos < 1 || !out) {
        fprintf(stderr, "dcr report: expected RESULTS.h5 [MORE.h5 ...] and -o DIR\n");
        return 2;
    }
    if (args[2].seen && !trace) {
        fprintf(stderr, "dcr report: --refit needs --trace\n");
        return 2;
    }
    if ((args[4].seen || args[5].seen) && !base) {
        fprintf(stderr, "dcr report: --threshold and --match-ignore need --base\n");
        return 2;
    }
    char keybuf[1024];
    const char *keys[MAX_IGNORED];
    size_t nkeys = 0;
    if (ignore_text && split_keys(ignore_text, keybuf, sizeof(keybuf), keys, &nkeys)) return 2;
    rc = dcr_cli_check("report", dcr_outdir_check("-o", out));
    if (rc) return rc;
    dcr_report_opts_t o = {.results_path = pos[0],
                           .more_paths = pos + 1,
                           .nmore = (size_t)npos - 1,
                           .base_path = base,
                           .threshold_pct = threshold,
                           .ignore = keys,
                           .nignore = nkeys,
                           .out_dir = out,
                           .trace_path = trace,
                           .refit = (long)refit};
    if (!results_readable(pos, npos, base)) return 4;
    dcr_status_t st = dcr_report_write(&o);
    if (st != DCR_OK) return dcr_cli_fail("report", st);
    printf("wrote %s/report.md\n", out);
    return 0;
}
