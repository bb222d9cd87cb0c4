/* dcr compare BASE.h5 NEW.h5: per-configuration regression check for CI. */
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "commands.h"
#include "reports/compare.h"

static const char usage[] =
    "BASE.h5 NEW.h5 [--threshold PCT] [--json] [--require-match]\n"
    "\n"
    "Matches the runs of two results files by configuration (the config JSON,\n"
    "less paths, output choices and the number of timed refits; runs with equal\n"
    "configurations in one file are pooled) and compares every metric over the\n"
    "refits: min, median, max on each side, NEW/BASE of the medians, mins and maxes.\n"
    "Latency, bounds and bytes are lower-is-better. A metric REGRESSED when\n"
    "median(NEW) > median(BASE) * (1 + PCT/100) and the change is beyond the noise:\n"
    "min(NEW) > max(BASE), or the medians differ by more than both spreads (max - min\n"
    "of each side). Beyond the threshold but within the noise is 'noise'. The parts\n"
    "of a refit (construction_lb_s, transport_lb_s, finalization_s) must also move by\n"
    "more than PCT% of BASE's median latency, else they are 'minor'. A BASE\n"
    "median of 0 gives no ratio ('n/a'). bit_exact must stay 1: any 0 in NEW is a\n"
    "regression regardless of the threshold. raw_changed_value_bytes and\n"
    "changed_elements describe the workload and are shown, not judged.\n"
    "Runs without a match are listed, not failures (unless --require-match).\n"
    "Exit status: 0 no regression, 1 a regression (or an unreadable file), 2 usage.";

int dcr_cmd_compare(int argc, char **argv)
{
    double threshold = 10;
    bool json = false, require = false;
    dcr_arg_t args[] = {
        {"--threshold", DCR_ARG_DOUBLE, &threshold, 0, 1e6,
         "allowed slowdown or growth in percent (default 10)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object instead of tables", false},
        {"--require-match", DCR_ARG_FLAG, &require, 0, 0,
         "also fail (exit 1) when a NEW run has no BASE match or nothing matched", false},
    };
    const char *pos[2];
    int npos = 0;
    int rc = dcr_args_parse("compare", usage, args, 3, argc, argv, pos, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 2) {
        fprintf(stderr, "dcr compare: expected BASE.h5 and NEW.h5\n");
        return 2;
    }
    dcr_compare_t *c = NULL;
    dcr_status_t st = dcr_compare_files(pos[0], pos[1], threshold, &c);
    if (st != DCR_OK) return dcr_cli_fail("compare", st);
    size_t unmatched_new = 0;
    for (size_t g = 0; g < c->nnew_groups; g++) unmatched_new += !c->new_matched[g];
    if (json) {
        char *text = dcr_compare_json(c);
        if (text) printf("%s\n", text);
        free(text);
    } else {
        dcr_compare_print(c, stdout);
    }
    rc = c->regressions ? 1 : 0;
    if (require && (!c->npairs || unmatched_new)) {
        fprintf(stderr,
                "dcr compare: --require-match: %zu NEW configuration%s without a BASE match\n",
                unmatched_new, unmatched_new == 1 ? "" : "s");
        rc = 1;
    }
    dcr_compare_destroy(c);
    return rc;
}
