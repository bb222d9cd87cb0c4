/* The committed run the restore suites replay from (test_restore,
 * test_restore_table, test_relay_replay): one bench in tmp_dir/run whose
 * retained versions stay in its object store. Include after tmp_dir.h. */
#ifndef DCR_TESTS_RESTORE_BENCH_H
#define DCR_TESTS_RESTORE_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include "dcr/objstore.h"
#include "workloads/harness/bench.h"
#include "deploy/roles.h"

/* The positive integer in environment variable name, else dflt. */
static inline int restore_env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

/* Runs cfg (its model and layout as the caller set them) for `refits`
 * refits without warm-up or in-run verification (the suites check every
 * replay against the oracle), keeping `keep` versions, in tmp_dir/run
 * (workdir, cap bytes); *r holds the result (the caller frees it) and
 * *store_p the run's object store. 0, or -1 after a line on stderr. */
static inline int restore_bench_run(dcr_bench_config_t *cfg, int refits, int keep, char *workdir,
                                    size_t cap, dcr_bench_result_t *r, dcr_objstore_t **store_p)
{
    cfg->warmup = 0;
    cfg->refits = refits;
    cfg->verify = false;
    cfg->run.retain = keep;
    snprintf(workdir, cap, "%s/run", tmp_dir);
    cfg->run.workdir = workdir;
    if (dcr_bench_run(cfg, r) != DCR_OK) {
        fprintf(stderr, "bench: %s\n", dcr_error_detail());
        return -1;
    }
    char dir[400];
    dcr_rundir_objstore_dir(workdir, dir, sizeof dir);
    dcr_objstore_config_t oc = {.url = dir};
    if (dcr_objstore_create(&oc, store_p) != DCR_OK) {
        fprintf(stderr, "store %s: %s\n", dir, dcr_error_detail());
        dcr_bench_result_free(r);
        return -1;
    }
    return 0;
}

#endif
