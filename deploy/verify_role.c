/* The verifier process: digests a dense refit of each committed version in
 * a world of its own and compares them with what the rollout-node
 * processes wrote. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "deploy/roles.h"
#include "deploy/world.h"
#include "workloads/serve/vllm_layout.h"

/* Reads a digests file once it exists (a node writes it by rename, whole),
 * waiting up to wait_ms. */
dcr_status_t dcr_role_read_digests(const char *path, int wait_ms, dcr_param_digests_t *out_p)
{
    double t0 = dcr_clock_s();
    FILE *f;
    while (!(f = fopen(path, "rb"))) {
        if (errno != ENOENT || (dcr_clock_s() - t0) * 1000.0 > wait_ms)
            return dcr_error_set(DCR_ENOTFOUND, "no digests in %s after %d ms (%s)", path, wait_ms,
                                 strerror(errno));
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    dcr_status_t st = DCR_OK;
    uint8_t *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || len > (1L << 30) || fseek(f, 0, SEEK_SET) != 0)
        st = dcr_error_set(DCR_EIO, "%s: unreadable or above 1 GiB", path);
    if (st == DCR_OK && !(buf = malloc(len > 0 ? (size_t)len : 1)))
        st = dcr_error_set(DCR_ENOMEM, "%s", path);
    if (st == DCR_OK && fread(buf, 1, (size_t)len, f) != (size_t)len)
        st = dcr_error_set(DCR_EIO, "%s: short read", path);
    fclose(f);
    if (st == DCR_OK) st = dcr_param_digests_decode(buf, (size_t)len, out_p);
    if (st != DCR_OK) dcr_error_prefix("%s: ", path);
    free(buf);
    return st;
}

/* The version rollout node `node` joined the run at (<workdir>/joined/n<node>,
 * written by the launcher of an elastic join), 0 when it ran from the start. */
static uint64_t joined_at(const char *workdir, int node)
{
    char path[4300];
    snprintf(path, sizeof(path), "%s/joined/n%d", workdir, node);
    FILE *f = fopen(path, "r");
    unsigned long long v = 0;
    if (f && fscanf(f, "%llu", &v) != 1) v = 0;
    if (f) fclose(f);
    return (uint64_t)v;
}

dcr_status_t dcr_role_verify_digests(const dcr_run_config_t *run, const char *workdir,
                                     uint64_t first, uint64_t last, int wait_ms, bool *ok)
{
    dcr_role_world_t *w = NULL;
    DCR_CHECK(dcr_role_world_create(run, &w));
    int nrecv = dcr_serve_receivers(&w->serve), tp = w->serve.tp;
    dcr_param_digests_t *want = calloc((size_t)tp, sizeof(*want));
    if (!want) {
        dcr_role_world_destroy(w);
        return dcr_error_set(DCR_ENOMEM, "expected digests");
    }
    dcr_status_t st = DCR_OK;
    for (uint64_t v = first; st == DCR_OK && v <= last; v++) {
        ok[v - first] = true;
        /* Receivers of one TP rank hold the same bits: one dense refit each. */
        for (int r = 0; st == DCR_OK && r < nrecv; r++) {
            /* A node added mid-run holds no version from before it joined. */
            int per = w->serve.gpus_per_node ? w->serve.gpus_per_node : tp;
            if (v < joined_at(workdir, r / per)) continue;
            int rank = dcr_serve_tp_rank(&w->serve, r);
            if (want[rank].count == 0) st = dcr_role_world_expected_digests(w, v, r, &want[rank]);
            if (st != DCR_OK) break;
            char path[4300], who[64];
            dcr_rundir_digest_path(workdir, v, r, path, sizeof(path));
            snprintf(who, sizeof(who), "version %llu, receiver %d", (unsigned long long)v, r);
            dcr_param_digests_t got;
            dcr_status_t cmp = dcr_role_read_digests(path, wait_ms, &got);
            if (cmp == DCR_OK) {
                cmp = dcr_param_digests_compare(&want[rank], &got, who);
                dcr_param_digests_free(&got);
            }
            if (cmp != DCR_OK) {
                DCR_LOG_ERROR("verifier: %s", dcr_error_detail());
                ok[v - first] = false;
            }
        }
        for (int k = 0; k < tp; k++) dcr_param_digests_free(&want[k]);
    }
    free(want);
    dcr_role_world_destroy(w);
    return st;
}
