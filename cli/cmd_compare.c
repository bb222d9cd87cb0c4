/* dcr compare BASE.h5 NEW.h5: per-configuration regression check for CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "reports/compare.h"

static const char usage[] =
    "BASE.h5 NEW.h5 [--threshold PCT] [--confidence PCT] [--min-samples N]\n"
    "       [--match-ignore KEY,...] [--paired] [--strict] [--require-match] [--json]\n"
    "   or: AB.h5 [--threshold PCT] [--confidence PCT] [--min-samples N] [--strict] [--json]\n"
    "\n"
    "Matches the runs of two results files by command, machine and configuration\n"
    "(the config JSON less paths and the number of timed refits; verification and\n"
    "--trace-overhead count; runs with equal keys in one file are pooled) and judges\n"
    "every metric from its per-refit values: a percentile bootstrap interval (fixed\n"
    "seed, 4000 resamples) of median(NEW)/median(BASE) at the confidence level.\n"
    "Latency, bounds and bytes are lower-is-better: REGRESSED when the whole interval\n"
    "lies above 1 + PCT/100, 'inconclusive' when it straddles that line, 'improved'\n"
    "when it lies below 1 - PCT/100, 'same' otherwise. A side with fewer than N\n"
    "measured refits is 'too few' (not judged). The parts of a refit\n"
    "(construction_lb_s, transport_lb_s, finalization_s) that regressed or are\n"
    "inconclusive but moved by no more than PCT% of BASE's median latency are\n"
    "'minor'. A BASE median of 0 gives no ratio ('n/a'). bit_exact must stay 1: any\n"
    "0 in NEW is a regression. raw_changed_value_bytes and changed_elements describe\n"
    "the workload and are shown, not judged. Runs without a match are listed.\n"
    "--paired: the runs of each side are interleaved blocks (scripts/ab-bench.sh),\n"
    "paired by order; the interval is the Wilcoxon signed-rank interval of the\n"
    "per-block ratios median(NEW block)/median(BASE block), so drift of the machine\n"
    "shared by a pair cancels (at least 6 blocks at 95%). --match-ignore takes\n"
    "bench flag names too (link_gbps is the key cross_gbps).\n"
    "One file AB.h5 (dcr bench --ab --out AB.h5): side A is BASE, side B is NEW,\n"
    "the keys they differ in are left out of matching, and the comparison is\n"
    "paired refit pair by refit pair (the block column; as --paired, 6 pairs or more).\n"
    "Exit status: 0 no regression, 1 a regression (or, with --require-match, a NEW\n"
    "run without a match), 2 usage, 3 inconclusive or too few refits (with --strict\n"
    "only), 4 a file unreadable, missing, not dcr results or of another version.";

/* Configuration keys that dcr bench records under another name than its
 * flag's, so that --match-ignore accepts what the user typed. */
static const char *key_of_flag_name(const char *k)
{
    static const char *const alias[][2] = {{"link_gbps", "cross_gbps"},
                                           {"link-gbps", "cross_gbps"}};
    for (size_t i = 0; i < sizeof(alias) / sizeof(alias[0]); i++)
        if (!strcmp(k, alias[i][0])) return alias[i][1];
    return k;
}

/* Splits "a,b,c" into keys pointing into buf (a copy of the text). */
static int split_keys(const char *text, char *buf, size_t len, const char **keys, size_t max,
                      size_t *n_p)
{
    snprintf(buf, len, "%s", text);
    size_t n = 0;
    for (char *save = NULL, *k = strtok_r(buf, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            fprintf(stderr, "dcr compare: --match-ignore: at most %zu keys\n", max);
            return 2;
        }
        keys[n++] = key_of_flag_name(k);
    }
    if (!n || strlen(text) >= len) {
        fprintf(stderr, "dcr compare: --match-ignore: expected KEY[,KEY...]\n");
        return 2;
    }
    *n_p = n;
    return 0;
}

static void print_result(const dcr_compare_t *c, bool json)
{
    if (!json) {
        dcr_compare_print(c, stdout);
        return;
    }
    char *text = dcr_compare_json(c);
    if (text) printf("%s\n", text);
    free(text);
}

static int exit_status(const dcr_compare_t *c, bool strict, bool require)
{
    size_t unmatched_new = 0;
    for (size_t g = 0; g < c->nnew_groups; g++) unmatched_new += !c->new_matched[g];
    if (c->regressions) return 1;
    if (require && (!c->npairs || unmatched_new)) {
        fprintf(stderr,
                "dcr compare: --require-match: %zu NEW configuration%s without a BASE match\n",
                unmatched_new, unmatched_new == 1 ? "" : "s");
        return 1;
    }
    if (strict && c->inconclusive) {
        fprintf(stderr, "dcr compare: --strict: %zu metric%s inconclusive or with too few refits\n",
                c->inconclusive, c->inconclusive == 1 ? "" : "s");
        return 3;
    }
    return 0;
}

int dcr_cmd_compare(int argc, char **argv)
{
    dcr_compare_opts_t opts = dcr_compare_opts_default();
    double confidence_pct = 100 * opts.confidence;
    int64_t min_samples = (int64_t)opts.min_samples;
    const char *ignore_text = NULL;
    bool json = false, require = false, strict = false;
    dcr_arg_t args[] = {
        {"--threshold", DCR_ARG_DOUBLE, &opts.threshold_pct, 0, 1e6,
         "allowed slowdown or growth in percent (default 10)", false},
        {"--confidence", DCR_ARG_DOUBLE, &confidence_pct, 50, 99.9,
         "two-sided confidence of the interval in percent (default 95)", false},
        {"--min-samples", DCR_ARG_INT, &min_samples, 3, 1000000,
         "measured refits per side needed for a verdict (default 10)", false},
        {"--match-ignore", DCR_ARG_STRING, &ignore_text, 0, 0,
         "pair runs that differ only in these configuration keys (or command, machine)", false},
        {"--paired", DCR_ARG_FLAG, &opts.paired, 0, 0,
         "judge interleaved blocks pair by pair (scripts/ab-bench.sh files)", false},
        {"--strict", DCR_ARG_FLAG, &strict, 0, 0,
         "exit 3 when a metric is inconclusive or has too few refits", false},
        {"--require-match", DCR_ARG_FLAG, &require, 0, 0,
         "also fail (exit 1) when a NEW run has no BASE match or nothing matched", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object instead of tables", false},
    };
    const char *pos[2];
    int npos = 0;
    int rc = dcr_args_parse("compare", usage, args, 8, argc, argv, pos, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos < 1) {
        fprintf(stderr, "dcr compare: expected BASE.h5 and NEW.h5, or one A/B file\n");
        return 2;
    }
    char keybuf[1024];
    const char *keys[32];
    if (ignore_text && split_keys(ignore_text, keybuf, sizeof(keybuf), keys, 32, &opts.nignore))
        return 2;
    opts.ignore = keys;
    opts.confidence = confidence_pct / 100;
    opts.min_samples = (size_t)min_samples;
    dcr_compare_t *c = NULL;
    dcr_status_t st = npos == 1 ? dcr_compare_ab_file(pos[0], &opts, &c)
                                : dcr_compare_files(pos[0], pos[1], &opts, &c);
    if (st == DCR_EINVAL) {
        dcr_cli_fail("compare", st);
        return 2; /* an ignored key no run has, --paired on files without blocks, or one
                     file without an A/B run */
    }
    if (st != DCR_OK) {
        dcr_cli_fail("compare", st);
        return 4; /* unreadable, missing, foreign or another schema version */
    }
    print_result(c, json);
    rc = exit_status(c, strict, require);
    dcr_compare_destroy(c);
    return rc;
}
