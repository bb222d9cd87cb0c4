/* Background storage of an owner's repair sets (dcr/recovery.h). */
#define _XOPEN_SOURCE 700
#include "dcr/recovery.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/log.h"

/* The encoded payloads of one set, in owner order. */
typedef struct encoded {
    uint8_t **bufs;
    size_t *lens;
    int *owners;
    size_t n, cap;
} encoded_t;

struct dcr_repair_upload {
    dcr_objstore_t *store;
    dcr_construct_config_t cfg;
    int owner, owners;
    bool running;
    pthread_t thread;
    dcr_repair_records_t *records;
    uint64_t version;
};

static dcr_status_t keep_payload(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    (void)id;
    encoded_t *e = ctx;
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 8;
        uint8_t **b = realloc(e->bufs, cap * sizeof(*b));
        if (b) e->bufs = b;
        size_t *l = realloc(e->lens, cap * sizeof(*l));
        if (l) e->lens = l;
        int *o = realloc(e->owners, cap * sizeof(*o));
        if (o) e->owners = o;
        if (!b || !l || !o) return dcr_error_set(DCR_ENOMEM, "repair set: %zu payloads", cap);
        e->cap = cap;
    }
    e->owners[e->n] = owner;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return dcr_error_set(DCR_ENOMEM, "repair payload of %zu bytes", len);
    memcpy(copy, buf, len);
    e->bufs[e->n] = copy;
    e->lens[e->n++] = len;
    return DCR_OK;
}

static void encoded_free(encoded_t *e)
{
    for (size_t i = 0; i < e->n; i++) free(e->bufs[i]);
    free(e->bufs);
    free(e->lens);
    free(e->owners);
}

/* Stores owner o's part: its payloads, which encoding emitted in owner
 * order, are a run of e. */
static dcr_status_t store_part(dcr_objstore_t *s, dcr_repair_records_t *r, uint64_t version, int o,
                               int owners, const encoded_t *e, dcr_retain_stats_t *sum)
{
    size_t first = 0, n = 0;
    while (first < e->n && e->owners[first] != o) first++;
    while (first + n < e->n && e->owners[first + n] == o) n++;
    dcr_retain_stats_t rs = {0};
    DCR_CHECK(dcr_retain_repair_put(s, version, dcr_repair_records_tau(r),
                                    dcr_repair_records_covers_from(r), o, owners, n,
                                    (const uint8_t *const *)e->bufs + first, e->lens + first, &rs));
    sum->payloads += rs.payloads;
    sum->bytes += rs.bytes;
    sum->seconds += rs.seconds;
    return DCR_OK;
}

dcr_status_t dcr_repair_store(dcr_objstore_t *s, dcr_repair_records_t *r,
                              const dcr_construct_config_t *cfg, uint64_t version, int owner,
                              int owners, dcr_construct_stats_t *encode_p,
                              dcr_retain_stats_t *store_p)
{
    if (!s || !r || !cfg || owner < -1 || owner >= owners)
        return dcr_error_set(DCR_EINVAL, "repair store: bad arguments (owner %d of %d)", owner,
                             owners);
    encoded_t e = {0};
    dcr_construct_stats_t cs = {0};
    dcr_retain_stats_t rs = {0};
    dcr_payload_sink_t sink = {keep_payload, &e};
    dcr_status_t st = dcr_repair_records_encode(r, cfg, &sink, &cs);
    for (int o = owner < 0 ? 0 : owner; st == DCR_OK && o < (owner < 0 ? owners : owner + 1); o++)
        st = store_part(s, r, version, o, owners, &e, &rs);
    encoded_free(&e);
    if (st == DCR_OK && encode_p) *encode_p = cs;
    if (st == DCR_OK && store_p) *store_p = rs;
    return st;
}

static void *upload_main(void *arg)
{
    dcr_repair_upload_t *u = arg;
    dcr_construct_stats_t cs = {0};
    dcr_retain_stats_t rs = {0};
    dcr_status_t st =
        dcr_repair_store(u->store, u->records, &u->cfg, u->version, u->owner, u->owners, &cs, &rs);
    double encode_s = cs.construction_s;
    if (st == DCR_OK)
        DCR_LOG_INFO("owner %d: repair set of version %" PRIu64 " (attempt %" PRIu64
                     ", covers from %" PRIu64 "): %" PRId64 " records, %" PRIu64
                     " bytes in %" PRIu64 " payloads; encode %.3f s, store %.3f s",
                     u->owner, u->version, dcr_repair_records_tau(u->records),
                     dcr_repair_records_covers_from(u->records), cs.records, rs.bytes, rs.payloads,
                     encode_s, rs.seconds);
    else
        DCR_LOG_WARN("owner %d: no repair set for version %" PRIu64
                     " (its interrupted receivers will be refitted densely): %s",
                     u->owner, u->version, dcr_error_detail());
    dcr_repair_records_destroy(u->records);
    u->records = NULL;
    return NULL;
}

dcr_status_t dcr_repair_upload_create(dcr_objstore_t *s, const dcr_construct_config_t *cfg,
                                      int owner, int owners, dcr_repair_upload_t **out_p)
{
    if (!s || !cfg || owner < 0 || owner >= owners || !out_p)
        return dcr_error_set(DCR_EINVAL, "repair upload: bad arguments (owner %d of %d)", owner,
                             owners);
    dcr_repair_upload_t *u = calloc(1, sizeof(*u));
    if (!u) return dcr_error_set(DCR_ENOMEM, "repair upload");
    u->store = s;
    u->cfg = *cfg;
    u->owner = owner;
    u->owners = owners;
    *out_p = u;
    return DCR_OK;
}

void dcr_repair_upload_join(dcr_repair_upload_t *u, double *wait_s_p)
{
    if (wait_s_p) *wait_s_p = 0;
    if (!u || !u->running) return;
    uint64_t t0 = dcr_clock_ns();
    pthread_join(u->thread, NULL);
    u->running = false;
    if (wait_s_p) *wait_s_p = (double)(dcr_clock_ns() - t0) * 1e-9;
}

void dcr_repair_upload_destroy(dcr_repair_upload_t *u)
{
    if (!u) return;
    dcr_repair_upload_join(u, NULL);
    free(u);
}

dcr_status_t dcr_repair_upload_start(dcr_repair_upload_t *u, dcr_repair_records_t *records,
                                     uint64_t version)
{
    double wait_s = 0;
    dcr_repair_upload_join(u, &wait_s);
    if (!records) return DCR_OK;
    u->records = records;
    u->version = version;
    if (pthread_create(&u->thread, NULL, upload_main, u) != 0) {
        dcr_repair_records_destroy(records);
        u->records = NULL;
        return dcr_error_set(DCR_ENOMEM, "repair upload thread for version %" PRIu64, version);
    }
    u->running = true;
    return DCR_OK;
}
