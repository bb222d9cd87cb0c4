/* Background retention of committed versions (dcr/recovery.h). */
#define _XOPEN_SOURCE 700
#include "dcr/recovery.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/objstore.h"

struct dcr_retainer {
    dcr_objstore_t *store;
    int keep;
    pthread_t thread;
    bool running;
    uint64_t tau, version;
    dcr_retain_stats_t stats;
    /* The version's repair set, stored after the copy (NULL: none). */
    dcr_repair_records_t *repair;
    dcr_construct_config_t repair_cfg;
    int owners;
    dcr_status_t st;
    char err[512]; /* the copy thread's error detail (error state is per thread) */
};

dcr_status_t dcr_retainer_create(const char *url, const char *s3_endpoint, int keep,
                                 dcr_retainer_t **out_p)
{
    if (!url || keep < 1 || !out_p)
        return dcr_error_set(DCR_EINVAL, "retainer: a store and keep >= 1 (got %d)", keep);
    dcr_retainer_t *t = calloc(1, sizeof(*t));
    if (!t) return dcr_error_set(DCR_ENOMEM, "retainer");
    t->keep = keep;
    dcr_objstore_config_t oc = {.url = url, .s3_endpoint = s3_endpoint};
    dcr_status_t st = dcr_objstore_create(&oc, &t->store);
    if (st == DCR_OK) st = dcr_retain_clear(t->store);
    if (st == DCR_OK) st = dcr_anchor_clear(t->store);
    if (st != DCR_OK) {
        dcr_retainer_destroy(t);
        return st;
    }
    *out_p = t;
    return DCR_OK;
}

void dcr_retainer_destroy(dcr_retainer_t *t)
{
    if (!t) return;
    if (t->running) pthread_join(t->thread, NULL);
    dcr_repair_records_destroy(t->repair);
    dcr_objstore_destroy(t->store);
    free(t);
}

static void *retain_main(void *arg)
{
    dcr_retainer_t *t = arg;
    t->st = dcr_retain_commit(t->store, t->tau, t->version, t->keep, &t->stats);
    if (t->st != DCR_OK) snprintf(t->err, sizeof t->err, "%s", dcr_error_detail());
    if (t->st == DCR_OK && t->repair) {
        dcr_retain_stats_t rs = {0};
        if (dcr_repair_store(t->store, t->repair, &t->repair_cfg, t->version, -1, t->owners, NULL,
                             &rs) == DCR_OK)
            DCR_LOG_INFO("repair set of version %llu: %llu bytes in %llu payloads",
                         (unsigned long long)t->version, (unsigned long long)rs.bytes,
                         (unsigned long long)rs.payloads);
        else
            DCR_LOG_WARN("no repair set for version %llu: %s", (unsigned long long)t->version,
                         dcr_error_detail());
    }
    dcr_repair_records_destroy(t->repair);
    t->repair = NULL;
    return NULL;
}

dcr_status_t dcr_retainer_join(dcr_retainer_t *t, dcr_retain_stats_t *stats_p, double *wait_s_p,
                               bool *ran_p)
{
    if (ran_p) *ran_p = t->running;
    if (!t->running) return DCR_OK;
    uint64_t t0 = dcr_clock_ns();
    pthread_join(t->thread, NULL);
    t->running = false;
    if (t->st != DCR_OK)
        return dcr_error_set(t->st, "retaining version %llu: %s", (unsigned long long)t->version,
                             t->err);
    double wait_s = (double)(dcr_clock_ns() - t0) * 1e-9;
    DCR_LOG_INFO("retained version %llu: %llu payloads, %llu bytes in %.3f s (%.3f s waited)",
                 (unsigned long long)t->version, (unsigned long long)t->stats.payloads,
                 (unsigned long long)t->stats.bytes, t->stats.seconds, wait_s);
    if (stats_p) *stats_p = t->stats;
    if (wait_s_p) *wait_s_p = wait_s;
    return DCR_OK;
}

dcr_status_t dcr_retainer_start(dcr_retainer_t *t, uint64_t tau, uint64_t version)
{
    return dcr_retainer_start_repair(t, tau, version, NULL, NULL, 0);
}

dcr_status_t dcr_retainer_start_repair(dcr_retainer_t *t, uint64_t tau, uint64_t version,
                                       dcr_repair_records_t *repair,
                                       const dcr_construct_config_t *cfg, int owners)
{
    dcr_status_t js = dcr_retainer_join(t, NULL, NULL, NULL);
    if (js != DCR_OK) {
        dcr_repair_records_destroy(repair);
        return js;
    }
    t->repair = repair && cfg && owners > 0 ? repair : NULL;
    if (!t->repair) dcr_repair_records_destroy(repair);
    if (cfg) t->repair_cfg = *cfg;
    t->owners = owners;
    t->tau = tau;
    t->version = version;
    t->st = DCR_OK;
    t->err[0] = '\0';
    if (pthread_create(&t->thread, NULL, retain_main, t) != 0) {
        dcr_repair_records_destroy(t->repair);
        t->repair = NULL;
        return dcr_error_set(DCR_ENOMEM, "retention thread for version %llu",
                             (unsigned long long)version);
    }
    t->running = true;
    return DCR_OK;
}
