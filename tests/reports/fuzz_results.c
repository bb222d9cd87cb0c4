/* libFuzzer target for the results reader (reports/results_read.c), which
 * reads files from users and CI artifacts: the bytes become a file (HDF5
 * reads files, not buffers), read through dcr_results_read as dcr compare
 * and dcr report read it, then grouped and summarised. The property fuzzed
 * is the user's: dcr never crashes, hangs or allocates beyond the reader's
 * caps (a small file declaring a huge column is refused before
 * allocation). libhdf5 1.10 itself crashes on some damaged structures
 * (symbol-table strdup overflows, huge metadata-cache allocations): the
 * reader's first parse runs in a child, so those end as one error line
 * here too; the child's own sanitizer reports still print, and our code is
 * fuzzed in this process on every input the library parses. Build with
 * -DDCR_FUZZ=ON and clang; seed it with a few results files
 * (dcr bench --refits 2 --out seed.h5). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reports/results_read.h"

static void exercise(const dcr_results_set_t *set)
{
    dcr_results_group_t *groups = NULL;
    size_t n = 0;
    if (dcr_results_group_runs(set, &groups, &n) != DCR_OK) return;
    for (size_t g = 0; g < n; g++) {
        double *v = NULL;
        size_t nv = 0;
        if (dcr_results_group_pool(set, &groups[g], "latency_s", &v, &nv) == DCR_OK) {
            dcr_results_stats(v, nv);
            free(v);
        }
        char label[256];
        dcr_results_config_label(set->runs[groups[g].run_index[0]].config, label, sizeof(label));
    }
    dcr_results_groups_free(groups, n);
}

/* One input file per fuzzing process, rewritten for every input and
 * removed when the process exits (libFuzzer's -max_total_time and -runs
 * end through exit): a file per input, unlinked after the read, was left
 * behind whenever a run stopped inside the read (a timeout, a crash). The
 * HDF5 library opens files by name, so the input needs one. */
static char input_path[] = "/tmp/dcr-fuzz-results-XXXXXX";

static void remove_input(void)
{
    unlink(input_path);
}

static const char *input_file(void)
{
    static int created;
    if (!created) {
        int fd = mkstemp(input_path);
        if (fd < 0) return NULL;
        close(fd);
        atexit(remove_input);
        created = 1;
    }
    return input_path;
}

static int write_input(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t done = fwrite(data, 1, size, f);
    return fclose(f) == 0 && done == size ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = input_file();
    if (!path || write_input(path, data, size) != 0) return 0;
    dcr_results_set_t *set = NULL;
    if (dcr_results_read(path, &set) == DCR_OK) {
        exercise(set);
        dcr_results_set_destroy(set);
    }
    return 0;
}
