/* dcr table2: the seed's Table 2, XOR vs overwrite value streams after zstd. */
#include <jansson.h>
#include <stdio.h>

#include "args.h"
#include "commands.h"
#include "workloads/harness/table2.h"

static void print_table(const dcr_table2_result_t *res)
{
    printf(
        "Table 2: %llu BF16 values, zstd level %d, changed words in input order, no locations\n\n",
        (unsigned long long)res->n, res->level);
    printf("%8s %10s %12s %12s %12s %7s %14s %14s %9s\n", "a", "changed", "raw bytes", "overwrite",
           "xor", "ratio", "overwrite shuf", "xor shuf", "ratio shuf");
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        const dcr_table2_row_t *row = &res->rows[r];
        double ratio_shuf = row->xor_bytes_shuffled ? (double)row->overwrite_bytes_shuffled /
                                                          (double)row->xor_bytes_shuffled
                                                    : 0.0;
        printf("%8.0e %9.4f%% %12llu %12llu %12llu %6.3fx %14llu %14llu %8.3fx\n", row->a,
               100.0 * row->changed_fraction, (unsigned long long)row->raw_bytes,
               (unsigned long long)row->overwrite_bytes, (unsigned long long)row->xor_bytes,
               row->ratio, (unsigned long long)row->overwrite_bytes_shuffled,
               (unsigned long long)row->xor_bytes_shuffled, ratio_shuf);
    }
    printf("\nratio = overwrite bytes / xor bytes; \"shuf\" columns byte-plane shuffle each stream "
           "before zstd.\n");
}

static int print_json(const dcr_table2_result_t *res)
{
    json_t *rows = json_array();
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        const dcr_table2_row_t *row = &res->rows[r];
        json_array_append_new(
            rows, json_pack("{s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:I, s:I}", "a", row->a,
                            "changed_fraction", row->changed_fraction, "changed",
                            (json_int_t)row->changed, "raw_bytes", (json_int_t)row->raw_bytes,
                            "overwrite_bytes", (json_int_t)row->overwrite_bytes, "xor_bytes",
                            (json_int_t)row->xor_bytes, "ratio", row->ratio,
                            "overwrite_bytes_shuffled", (json_int_t)row->overwrite_bytes_shuffled,
                            "xor_bytes_shuffled", (json_int_t)row->xor_bytes_shuffled));
    }
    json_t *root =
        json_pack("{s:I, s:i, s:o}", "n", (json_int_t)res->n, "level", res->level, "rows", rows);
    if (root == NULL) {
        fprintf(stderr, "dcr table2: cannot build the JSON output\n");
        return 1;
    }
    int rc = json_dumpf(root, stdout, JSON_INDENT(2)) == 0 ? 0 : 1;
    printf("\n");
    json_decref(root);
    return rc;
}

int dcr_cmd_table2(int argc, char **argv)
{
    dcr_table2_params_t params;
    dcr_table2_params_default(&params);
    int64_t n = (int64_t)params.n, level = params.level;
    bool json = false;
    dcr_arg_t args[] = {
        {"--n", DCR_ARG_INT, &n, 1, (double)DCR_TABLE2_N_MAX, "values to draw (default 20000000)",
         false},
        {"--level", DCR_ARG_INT, &level, -7, 22, "zstd level (default 1)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "print one JSON object instead of the table", false},
    };
    int rc = dcr_args_parse("table2", "[--n N] [--level L] [--json]", args,
                            (int)(sizeof args / sizeof args[0]), argc, argv, NULL, 0, NULL);
    if (rc == 1) return 0;
    if (rc != 0) return 2;
    params.n = (uint64_t)n;
    params.level = (int)level;
    params.progress = true;
    dcr_table2_result_t res;
    dcr_status_t st = dcr_table2_run(&params, &res);
    if (st != DCR_OK) return dcr_cli_fail("table2", st);
    if (json) return print_json(&res);
    print_table(&res);
    return 0;
}
