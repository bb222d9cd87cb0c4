/* Per-parameter BLAKE2b digests of a receiver's resident storage, their wire
 * form and their comparison: how a receiver in one process proves its bits
 * to a verifier in another (DESIGN.md section 11). */
#include <blake2.h>
#include <stdlib.h>
#include <string.h>

#include "receiver-internal.h"

/* Wire form, little-endian: magic, u32 count, per parameter u16 name length,
 * the name and the digest, then a BLAKE2b-256 of everything before it. */
static const char digests_magic[8] = {'D', 'C', 'R', 'D', 'I', 'G', '1', '\0'};
#define DIGESTS_TRAILER  32
#define DIGESTS_NAME_MAX 65535u

void dcr_param_digests_free(dcr_param_digests_t *d)
{
    if (d == NULL) return;
    for (size_t i = 0; d->names && i < d->count; i++) free(d->names[i]);
    free(d->names);
    free(d->digests);
    memset(d, 0, sizeof(*d));
}

static dcr_status_t digests_alloc(size_t count, dcr_param_digests_t *d)
{
    memset(d, 0, sizeof(*d));
    d->names = calloc(count ? count : 1, sizeof(*d->names));
    d->digests = calloc(count ? count : 1, sizeof(*d->digests));
    if (d->names == NULL || d->digests == NULL) {
        dcr_param_digests_free(d);
        return dcr_error_set(DCR_ENOMEM, "digests of %zu parameters", count);
    }
    d->count = count;
    return DCR_OK;
}

static dcr_status_t name_copy(const char *name, size_t len, char **out_p)
{
    char *s = malloc(len + 1);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "a parameter name of %zu bytes", len);
    memcpy(s, name, len);
    s[len] = '\0';
    *out_p = s;
    return DCR_OK;
}

dcr_status_t dcr_receiver_digests(const dcr_receiver_t *r, dcr_param_digests_t *out_p)
{
    if (r == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "receiver_digests: NULL argument");
    size_t n = dcr_params_count(r->params);
    for (size_t i = 0; i < n; i++) {
        const dcr_param_t *p = dcr_params_at(r->params, i);
        /* No data, no bits to vouch for: a digest of nothing would pass. */
        if (p->storage->bytes > 0 && p->storage->data == NULL)
            return dcr_error_set(DCR_EINVAL,
                                 "receiver_digests: parameter %s has no data "
                                 "(a shape-only receiver)",
                                 p->name);
    }
    dcr_param_digests_t d;
    DCR_CHECK(digests_alloc(n, &d));
    for (size_t i = 0; i < n; i++) {
        const dcr_param_t *p = dcr_params_at(r->params, i);
        dcr_status_t st = name_copy(p->name, strlen(p->name), &d.names[i]);
        if (st != DCR_OK) {
            dcr_param_digests_free(&d);
            return st;
        }
        const void *bits;
        void *owned;
        if (st == DCR_OK) st = dcr__param_read(r, p, 0, p->storage->bytes, &bits, &owned);
        if (st != DCR_OK) {
            dcr_param_digests_free(&d);
            return st;
        }
        blake2b(d.digests[i], bits, NULL, DCR_PARAM_DIGEST_BYTES, p->storage->bytes, 0);
        free(owned);
    }
    *out_p = d;
    return DCR_OK;
}

dcr_status_t dcr_param_digests_encode(const dcr_param_digests_t *d, uint8_t **buf_p, size_t *len_p)
{
    if (d == NULL || buf_p == NULL || len_p == NULL)
        return dcr_error_set(DCR_EINVAL, "param_digests_encode: NULL argument");
    if (d->count > UINT32_MAX)
        return dcr_error_set(DCR_EINVAL, "param_digests_encode: %zu parameters", d->count);
    size_t len = sizeof(digests_magic) + 4 + DIGESTS_TRAILER;
    for (size_t i = 0; i < d->count; i++) {
        size_t nl = strlen(d->names[i]);
        if (nl > DIGESTS_NAME_MAX)
            return dcr_error_set(DCR_EINVAL, "param_digests_encode: a name of %zu bytes", nl);
        len += 2 + nl + DCR_PARAM_DIGEST_BYTES;
    }
    uint8_t *buf = malloc(len);
    if (buf == NULL) return dcr_error_set(DCR_ENOMEM, "digests of %zu bytes", len);
    uint8_t *p = buf;
    memcpy(p, digests_magic, sizeof(digests_magic));
    p += sizeof(digests_magic);
    dcr__put_le(p, d->count, 4);
    p += 4;
    for (size_t i = 0; i < d->count; i++) {
        size_t nl = strlen(d->names[i]);
        dcr__put_le(p, nl, 2);
        memcpy(p + 2, d->names[i], nl);
        memcpy(p + 2 + nl, d->digests[i], DCR_PARAM_DIGEST_BYTES);
        p += 2 + nl + DCR_PARAM_DIGEST_BYTES;
    }
    blake2b(p, buf, NULL, DIGESTS_TRAILER, (size_t)(p - buf), 0);
    *buf_p = buf;
    *len_p = len;
    return DCR_OK;
}

dcr_status_t dcr_param_digests_decode(const uint8_t *buf, size_t len, dcr_param_digests_t *out_p)
{
    if (buf == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "param_digests_decode: NULL argument");
    size_t head = sizeof(digests_magic) + 4;
    if (len < head + DIGESTS_TRAILER || memcmp(buf, digests_magic, sizeof(digests_magic)))
        return dcr_error_set(DCR_EPAYLOAD,
                             "parameter digests: %zu bytes without the DCRDIG1 "
                             "header",
                             len);
    uint8_t sum[DIGESTS_TRAILER];
    blake2b(sum, buf, NULL, DIGESTS_TRAILER, len - DIGESTS_TRAILER, 0);
    if (memcmp(sum, buf + len - DIGESTS_TRAILER, DIGESTS_TRAILER))
        return dcr_error_set(DCR_EDIGEST,
                             "parameter digests: the trailing checksum of %zu bytes "
                             "does not match",
                             len);
    uint64_t count;
    dcr__get_le(buf + sizeof(digests_magic), &count, 4);
    size_t end = len - DIGESTS_TRAILER, at = head;
    /* Each entry takes at least 2 + digest bytes: bound count before allocating. */
    if (count > (end - head) / (2 + DCR_PARAM_DIGEST_BYTES))
        return dcr_error_set(DCR_EPAYLOAD, "parameter digests: %llu entries in %zu bytes",
                             (unsigned long long)count, len);
    dcr_param_digests_t d;
    DCR_CHECK(digests_alloc((size_t)count, &d));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < d.count && st == DCR_OK; i++) {
        uint64_t v = SIZE_MAX;
        if (at + 2 <= end) dcr__get_le(buf + at, &v, 2);
        size_t nl = (size_t)v;
        if (nl == SIZE_MAX || at + 2 + nl + DCR_PARAM_DIGEST_BYTES > end) {
            st = dcr_error_set(DCR_EPAYLOAD, "parameter digests: entry %zu runs past the end", i);
            break;
        }
        st = name_copy((const char *)buf + at + 2, nl, &d.names[i]);
        if (st == DCR_OK) memcpy(d.digests[i], buf + at + 2 + nl, DCR_PARAM_DIGEST_BYTES);
        at += 2 + nl + DCR_PARAM_DIGEST_BYTES;
    }
    if (st == DCR_OK && at != end)
        st = dcr_error_set(DCR_EPAYLOAD, "parameter digests: %zu bytes after the last entry",
                           end - at);
    if (st != DCR_OK) {
        dcr_param_digests_free(&d);
        return st;
    }
    *out_p = d;
    return DCR_OK;
}

dcr_status_t dcr_param_digests_compare(const dcr_param_digests_t *expected,
                                       const dcr_param_digests_t *actual, const char *who)
{
    if (expected == NULL || actual == NULL)
        return dcr_error_set(DCR_EINVAL, "param_digests_compare: NULL argument");
    who = who ? who : "receiver";
    size_t n = expected->count < actual->count ? expected->count : actual->count;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(expected->names[i], actual->names[i]))
            return dcr_error_set(DCR_EMISMATCH,
                                 "%s: parameter %zu is %s, expected %s (another loader or "
                                 "rank)",
                                 who, i, actual->names[i], expected->names[i]);
        if (memcmp(expected->digests[i], actual->digests[i], DCR_PARAM_DIGEST_BYTES))
            return dcr_error_set(DCR_EMISMATCH,
                                 "%s: parameter %s differs from the dense refit of the "
                                 "committed version",
                                 who, expected->names[i]);
    }
    if (expected->count != actual->count)
        return dcr_error_set(DCR_EMISMATCH, "%s: %zu parameters, expected %zu", who, actual->count,
                             expected->count);
    return DCR_OK;
}
