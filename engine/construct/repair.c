/* Repair records (dcr/construct.h, issue 19): the records each run keeps in
 * overwrite form, the repair set made of the committed run's at a commit,
 * its coverage of the earlier runs from the same baseline, and its encoding
 * into overwrite payloads. */
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/inventory.h"
#include "construct-internal.h"

struct dcr_repair_records {
    const dcr_inventory_t *inv;
    dcr_payload_key_t key;
    uint64_t tau;
    /* Computed at the first dcr_repair_records_covers_from, by whoever
     * stores the set, so that the commit only moves pointers. */
    uint64_t covers_from;
    bool covers_known;
    int n;             /* owners */
    int *ranks;        /* per owner */
    dcr__kept_t *kept; /* per owner: its runs since the baseline, the committed one last */
};

static void run_free(dcr__kept_run_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->items[i].indices);
        free(r->items[i].values);
    }
    free(r->items);
    memset(r, 0, sizeof(*r));
}

dcr_status_t dcr__kept_begin(dcr__kept_t *k, uint64_t tau)
{
    dcr__kept_run_t *runs = realloc(k->runs, (k->n + 1) * sizeof(*runs));
    if (!runs) return dcr_error_set(DCR_ENOMEM, "kept records: run %zu", k->n + 1);
    k->runs = runs;
    k->runs[k->n++] = (dcr__kept_run_t){.tau = tau};
    return DCR_OK;
}

dcr_status_t dcr__kept_add(dcr__kept_t *k, int canonical, size_t count, size_t value_size,
                           const int64_t *indices, const unsigned char *values)
{
    if (k->n == 0 || count == 0) return DCR_OK;
    dcr__kept_run_t *r = &k->runs[k->n - 1];
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        dcr__kept_item_t *items = realloc(r->items, cap * sizeof(*items));
        if (!items) return dcr_error_set(DCR_ENOMEM, "kept records: %zu items", cap);
        r->items = items;
        r->cap = cap;
    }
    dcr__kept_item_t it = {canonical, count, value_size, malloc(count * sizeof(int64_t)),
                           malloc(count * value_size)};
    if (!it.indices || !it.values) {
        free(it.indices);
        free(it.values);
        return dcr_error_set(DCR_ENOMEM, "kept records: an item of %zu records", count);
    }
    memcpy(it.indices, indices, count * sizeof(int64_t));
    memcpy(it.values, values, count * value_size);
    r->items[r->n++] = it;
    return DCR_OK;
}

void dcr__kept_clear(dcr__kept_t *k)
{
    for (size_t i = 0; i < k->n; i++) run_free(&k->runs[i]);
    free(k->runs);
    k->runs = NULL;
    k->n = 0;
}

/* Whether sorted a[0, na) is a subset of sorted b[0, nb). */
static bool subset(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    size_t j = 0;
    for (size_t i = 0; i < na; i++) {
        while (j < nb && b[j] < a[i]) j++;
        if (j == nb || b[j] != a[i]) return false;
    }
    return true;
}

/* Whether every record position of run r is one of run c's. Items are
 * compared in emission order, one against one (a run over the same
 * candidate and baseline emits the same items in the same order, a failed
 * one a prefix of them); any other shape counts as not covered, which can
 * only send a receiver to a dense refit, never repair it wrongly. */
static bool covered_by(const dcr__kept_run_t *r, const dcr__kept_run_t *c)
{
    if (r->n > c->n) return false;
    for (size_t i = 0; i < r->n; i++) {
        const dcr__kept_item_t *x = &r->items[i], *y = &c->items[i];
        if (x->canonical != y->canonical || !subset(x->indices, x->count, y->indices, y->count))
            return false;
    }
    return true;
}

/* The earliest tau from which every run of k up to its last is covered by
 * the last. */
static uint64_t covers_from(const dcr__kept_t *k)
{
    const dcr__kept_run_t *last = &k->runs[k->n - 1];
    uint64_t from = last->tau;
    for (size_t i = k->n - 1; i-- > 0;) {
        if (!covered_by(&k->runs[i], last)) break;
        from = k->runs[i].tau;
    }
    return from;
}

dcr_status_t dcr__repair_from_kept(const dcr_inventory_t *inv, const dcr_payload_key_t *key,
                                   dcr__kept_t *kept, const int *ranks, int n,
                                   dcr_repair_records_t **out_p)
{
    *out_p = NULL;
    int with = 0;
    for (int i = 0; i < n; i++) with += kept[i].n > 0;
    if (with == 0) return DCR_OK;
    dcr_repair_records_t *r = calloc(1, sizeof(*r));
    if (r) r->ranks = calloc((size_t)n, sizeof(int));
    if (r && r->ranks) r->kept = calloc((size_t)n, sizeof(*r->kept));
    if (!r || !r->ranks || !r->kept) {
        dcr_repair_records_destroy(r);
        for (int i = 0; i < n; i++) dcr__kept_clear(&kept[i]);
        return dcr_error_set(DCR_ENOMEM, "repair records of %d owners", n);
    }
    r->inv = inv;
    if (key) r->key = *key;
    for (int i = 0; i < n; i++) {
        r->ranks[i] = ranks[i];
        r->kept[i] = kept[i]; /* moved */
        kept[i] = (dcr__kept_t){0};
        if (r->kept[i].n > 0) r->tau = r->kept[i].runs[r->kept[i].n - 1].tau;
    }
    r->n = n;
    *out_p = r;
    return DCR_OK;
}

uint64_t dcr_repair_records_tau(const dcr_repair_records_t *r)
{
    return r ? r->tau : 0;
}

uint64_t dcr_repair_records_covers_from(dcr_repair_records_t *r)
{
    if (!r) return 0;
    if (!r->covers_known) {
        /* Every owner ran the same attempts: the set covers from the latest
         * owner's bound. */
        r->covers_from = 0;
        for (int o = 0; o < r->n; o++) {
            uint64_t from = r->kept[o].n > 0 ? covers_from(&r->kept[o]) : 0;
            if (from > r->covers_from) r->covers_from = from;
        }
        r->covers_known = true;
    }
    return r->covers_from;
}

/* Owner o's committed run (empty when it kept none). */
static const dcr__kept_run_t *committed(const dcr_repair_records_t *r, int o)
{
    static const dcr__kept_run_t none = {0};
    return r->kept[o].n > 0 ? &r->kept[o].runs[r->kept[o].n - 1] : &none;
}

void dcr_repair_records_size(const dcr_repair_records_t *r, int64_t *records_p,
                             int64_t *value_bytes_p)
{
    int64_t records = 0, bytes = 0;
    for (int o = 0; r && o < r->n; o++)
        for (size_t i = 0; i < committed(r, o)->n; i++) {
            const dcr__kept_item_t *it = &committed(r, o)->items[i];
            records += (int64_t)it->count;
            bytes += (int64_t)(it->count * it->value_size);
        }
    if (records_p) *records_p = records;
    if (value_bytes_p) *value_bytes_p = bytes;
}

/* Serializes what enc holds as payload *id of owner rank and hands it on. */
static dcr_status_t flush(const dcr_repair_records_t *r, dcr_encoder_t *enc, int rank, uint64_t *id,
                          const dcr_construct_config_t *cfg, const dcr_payload_sink_t *sink,
                          dcr_construct_stats_t *st)
{
    if (dcr_encoder_item_count(enc) == 0) return DCR_OK;
    size_t raw = dcr_encoder_raw_len(enc);
    dcr_encode_params_t params = {r->tau, (uint32_t)rank, *id, cfg->zstd_level, cfg->shuffle};
    const uint8_t *buf;
    size_t len;
    DCR_CHECK(dcr_encoder_finish(enc, &params, &buf, &len));
    if (sink && sink->submit) DCR_CHECK(sink->submit(sink->ctx, rank, *id, buf, len));
    (*id)++;
    st->payloads++;
    st->payload_bytes += (int64_t)len;
    st->body_raw_bytes += (int64_t)raw;
    return DCR_OK;
}

static dcr_status_t encode_owner(const dcr_repair_records_t *r, int o, dcr_encoder_t *enc,
                                 const dcr_construct_config_t *cfg, const dcr_payload_sink_t *sink,
                                 dcr_construct_stats_t *st)
{
    uint64_t id = 0;
    const dcr__kept_run_t *run = committed(r, o);
    for (size_t i = 0; i < run->n; i++) {
        const dcr__kept_item_t *it = &run->items[i];
        const dcr_tensor_desc_t *d = dcr_inventory_at(r->inv, (size_t)it->canonical);
        dcr_codec_item_t item = {
            d->name,   d->ndim,     d->shape, d->dtype,  DCR_ENCODING_OVERWRITE,
            it->count, it->indices, 0,        it->values};
        DCR_CHECK(dcr_encoder_add(enc, &item));
        st->records += (int64_t)it->count;
        st->raw_changed_value_bytes += (int64_t)(it->count * it->value_size);
        st->value_bytes += (int64_t)(it->count * it->value_size);
        st->overwrite_items++;
        if (dcr_encoder_raw_len(enc) >= cfg->bucket_bytes)
            DCR_CHECK(flush(r, enc, r->ranks[o], &id, cfg, sink, st));
    }
    return flush(r, enc, r->ranks[o], &id, cfg, sink, st);
}

dcr_status_t dcr_repair_records_encode(const dcr_repair_records_t *r,
                                       const dcr_construct_config_t *cfg,
                                       const dcr_payload_sink_t *sink,
                                       dcr_construct_stats_t *stats_p)
{
    if (!r || !cfg || cfg->bucket_bytes == 0)
        return dcr_error_set(DCR_EINVAL, "repair records: NULL set or configuration");
    double t0 = dcr_clock_s();
    dcr_encoder_t *enc = NULL;
    DCR_CHECK(dcr_encoder_create(&enc));
    dcr_encoder_set_key(enc, &r->key);
    dcr_construct_stats_t st = {0};
    dcr_status_t s = DCR_OK;
    for (int o = 0; o < r->n && s == DCR_OK; o++) s = encode_owner(r, o, enc, cfg, sink, &st);
    dcr_encoder_destroy(enc);
    st.construction_s = dcr_clock_s() - t0;
    if (s == DCR_OK && stats_p) *stats_p = st;
    return s;
}

void dcr_repair_records_destroy(dcr_repair_records_t *r)
{
    if (!r) return;
    for (int o = 0; r->kept && o < r->n; o++) dcr__kept_clear(&r->kept[o]);
    free(r->kept);
    free(r->ranks);
    free(r);
}
