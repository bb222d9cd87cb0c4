/* Change detection of one tensor for owners outside a constructor: the
 * constructor's detector over two versions, with its records. */
#include <stdlib.h>
#include <string.h>

#include "dcr/construct.h"
#include "dcr/device.h"
#include "dcr/dtype.h"
#include "construct-internal.h"

static dcr_status_t diff_check(int64_t numel, dcr_dtype_t dtype, dcr_encoding_t encoding,
                               int64_t from, size_t cap)
{
    if ((int)dtype < 0 || dtype >= DCR_DTYPE_COUNT)
        return dcr_error_set(DCR_EINVAL, "diff: unknown dtype %d", (int)dtype);
    if (encoding != DCR_ENCODING_XOR && encoding != DCR_ENCODING_OVERWRITE)
        return dcr_error_set(DCR_EINVAL, "diff: unknown encoding %d", (int)encoding);
    if (numel < 0 || from < 0 || from > numel)
        return dcr_error_set(DCR_EINVAL, "diff: start %lld outside [0, %lld]", (long long)from,
                             (long long)numel);
    if (cap == 0 && from < numel) return dcr_error_set(DCR_EINVAL, "diff: no room for records");
    return DCR_OK;
}

/* Appends the records of one compared sub-run starting at element `at`. */
static void diff_records(const unsigned char *before, const unsigned char *now, size_t es,
                         int64_t at, const uint32_t *changed, size_t nchanged, bool xor_mode,
                         int64_t *indices, unsigned char *values)
{
    for (size_t i = 0; i < nchanged; i++) {
        size_t k = (size_t)at + changed[i];
        indices[i] = (int64_t)k;
        for (size_t j = 0; j < es; j++) {
            unsigned char w = now[k * es + j];
            values[i * es + j] = xor_mode ? (unsigned char)(w ^ before[k * es + j]) : w;
        }
    }
}

dcr_status_t dcr_construct_diff(const void *before, const void *now, int64_t numel,
                                dcr_dtype_t dtype, dcr_encoding_t encoding, int64_t *from_p,
                                int64_t *indices, void *values, size_t cap, size_t *count_p)
{
    *count_p = 0;
    DCR_CHECK(diff_check(numel, dtype, encoding, *from_p, cap));
    int64_t from = *from_p;
    if (from == numel) return DCR_OK;
    size_t es = dcr_dtype_size(dtype);
    int64_t first = numel - from < DCR__SUBRUN_MAX ? numel - from : DCR__SUBRUN_MAX;
    if ((size_t)first > cap) first = (int64_t)cap;
    uint32_t *changed = malloc((size_t)first * sizeof(*changed));
    if (!changed) return dcr_error_set(DCR_ENOMEM, "diff: detection buffer");
    size_t count = 0;
    bool xor_mode = encoding == DCR_ENCODING_XOR;
    while (from < numel) {
        int64_t len = numel - from < DCR__SUBRUN_MAX ? numel - from : DCR__SUBRUN_MAX;
        if ((size_t)len > cap - count) {
            if (count > 0) break; /* might not fit: the next call's */
            len = (int64_t)cap;   /* never longer than first */
        }
        size_t n = dcr_detect_changes((const unsigned char *)now + (size_t)from * es,
                                      (const unsigned char *)before + (size_t)from * es,
                                      (size_t)len, es, changed);
        diff_records(before, now, es, from, changed, n, xor_mode, indices + count,
                     (unsigned char *)values + count * es);
        count += n;
        from += len;
    }
    free(changed);
    *from_p = from;
    *count_p = count;
    return DCR_OK;
}
