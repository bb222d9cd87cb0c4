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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/dcr-fuzz-results-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    close(fd);
    dcr_results_set_t *set = NULL;
    if (done == size && dcr_results_read(path, &set) == DCR_OK) {
        exercise(set);
        dcr_results_set_destroy(set);
    }
    unlink(path);
    return 0;
}
