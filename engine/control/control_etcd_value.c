/* The etcd backend's values: the commit record and attempts in their binary
 * encodings (little-endian, each starting with an 8-byte tag), decoded only
 * after every field is checked, and the sorted receiver lists they hold. */
#include "control-internal.h"
#include "etcd-internal.h"
#include "core/endian-internal.h"

#include <stdlib.h>
#include <string.h>

static const char dcr__et_tag_record[DCR__ET_TAG_BYTES] = "dcrrec1";
static const char dcr__et_tag_attempt[DCR__ET_TAG_BYTES] = "dcratt1";

/* ---- values ---------------------------------------------------------------------------- */

void dcr__et_encode_record(const dcr_commit_record_t *r, uint8_t out[DCR__ET_RECORD_BYTES])
{
    memcpy(out, dcr__et_tag_record, DCR__ET_TAG_BYTES);
    dcr__put_le(out + 8, r->version, 8);
    dcr__put_le(out + 16, r->attempt, 8);
    dcr__put_le(out + 24, (uint64_t)r->committed_ns, 8);
    memcpy(out + 32, r->baseline, DCR_CONTROL_BASELINE_BYTES);
}

dcr_status_t dcr__et_decode_record(dcr__et_t *e, const dcr__et_kv_t *kv, bool found,
                                   dcr_commit_record_t *r)
{
    if (!found) return dcr__et_malformed(e, "record", "its key, found none");
    const uint8_t *p = kv->value;
    if (kv->len != DCR__ET_RECORD_BYTES || memcmp(p, dcr__et_tag_record, DCR__ET_TAG_BYTES) != 0) {
        return dcr__et_malformed(e, kv->key, "a 64-byte commit record tagged dcrrec1");
    }
    r->version = dcr__le(p + 8, 8);
    r->attempt = dcr__le(p + 16, 8);
    r->committed_ns = (int64_t)dcr__le(p + 24, 8);
    memcpy(r->baseline, p + 32, DCR_CONTROL_BASELINE_BYTES);
    if (r->version > DCR_CONTROL_VALUE_MAX || r->attempt > DCR_CONTROL_VALUE_MAX ||
        r->committed_ns < 0) {
        return dcr__et_malformed(e, kv->key, "version, attempt and time in [0, 2^63)");
    }
    return DCR_OK;
}

uint8_t *dcr__et_encode_attempt(const dcr_control_attempt_t *a, const uint32_t *sorted,
                                size_t *len_p)
{
    size_t len = DCR__ET_ATTEMPT_FIXED + (size_t)a->n_required * 4;
    uint8_t *p = calloc(1, len);
    if (p == NULL) return NULL;
    memcpy(p, dcr__et_tag_attempt, DCR__ET_TAG_BYTES);
    dcr__put_le(p + 8, a->tau, 8);
    dcr__put_le(p + 16, a->from_version, 8);
    dcr__put_le(p + 24, (uint64_t)a->prepared_ns, 8);
    dcr__put_le(p + 32, (uint64_t)a->deadline_ns, 8);
    dcr__put_le(p + 40, a->n_required, 4);
    memcpy(p + 44, a->coordinator, strlen(a->coordinator));
    for (uint32_t i = 0; i < a->n_required; i++) {
        dcr__put_le(p + DCR__ET_ATTEMPT_FIXED + 4 * (size_t)i, sorted[i], 4);
    }
    *len_p = len;
    return p;
}

/* Sorted, distinct u32s at p: what every list value holds. */
bool dcr__et_sorted_u32(const uint8_t *p, size_t n, uint32_t *out)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = (uint32_t)dcr__le(p + 4 * i, 4);
        if (i > 0 && out[i] <= out[i - 1]) return false;
    }
    return true;
}

dcr_status_t dcr__et_decode_attempt(dcr__et_t *e, const dcr__et_kv_t *kv, dcr__et_attempt_t *a)
{
    const uint8_t *p = kv->value;
    memset(a, 0, sizeof *a);
    if (kv->len < DCR__ET_ATTEMPT_FIXED || memcmp(p, dcr__et_tag_attempt, DCR__ET_TAG_BYTES) != 0) {
        return dcr__et_malformed(e, kv->key, "an attempt tagged dcratt1");
    }
    dcr_control_attempt_t *i = &a->info;
    i->tau = dcr__le(p + 8, 8);
    i->from_version = dcr__le(p + 16, 8);
    i->prepared_ns = (int64_t)dcr__le(p + 24, 8);
    i->deadline_ns = (int64_t)dcr__le(p + 32, 8);
    i->n_required = (uint32_t)dcr__le(p + 40, 4);
    memcpy(i->coordinator, p + 44, DCR_CONTROL_ID_MAX);
    if (i->tau == 0 || i->tau > DCR_CONTROL_VALUE_MAX || i->from_version > DCR_CONTROL_VALUE_MAX ||
        i->prepared_ns < 0 || i->deadline_ns < i->prepared_ns || i->n_required == 0 ||
        i->n_required > DCR_CONTROL_RECEIVERS_MAX ||
        i->coordinator[DCR_CONTROL_ID_MAX - 1] != '\0' || !dcr__control_id_valid(i->coordinator) ||
        kv->len != DCR__ET_ATTEMPT_FIXED + (size_t)i->n_required * 4) {
        return dcr__et_malformed(e, kv->key,
                                 "tau > 0, a deadline after the prepare, 1..65536 receivers and a "
                                 "coordinator id of 1..63 printable characters");
    }
    a->required = malloc((size_t)i->n_required * sizeof *a->required);
    if (a->required == NULL) return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    if (!dcr__et_sorted_u32(p + DCR__ET_ATTEMPT_FIXED, i->n_required, a->required)) {
        free(a->required);
        a->required = NULL;
        return dcr__et_malformed(e, kv->key, "required receivers in ascending order");
    }
    return DCR_OK;
}

bool dcr__et_contains(const uint32_t *sorted, size_t n, uint32_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid] == x) return true;
        if (sorted[mid] < x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return false;
}

static int dcr__et_cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* A malloc'd ascending copy of list[0..n) (NULL when n is 0). */
dcr_status_t dcr__et_sorted_copy(dcr__et_t *e, const uint32_t *list, size_t n, uint32_t **out_p)
{
    *out_p = NULL;
    if (n == 0) return DCR_OK;
    uint32_t *s = malloc(n * sizeof *s);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "%s: allocation failed", e->where);
    memcpy(s, list, n * sizeof *s);
    qsort(s, n, sizeof *s, dcr__et_cmp_u32);
    *out_p = s;
    return DCR_OK;
}
