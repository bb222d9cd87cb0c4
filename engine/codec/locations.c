/* Location coding: a contiguous run is stored as its start alone, anything
 * else as the first index plus gaps in the narrowest word that holds the
 * item's largest gap (FORMAT.md section 4). Changed sets of real updates are
 * dense enough that most gaps fit one or two bytes. */
#include "codec-internal.h"

unsigned dcr__gap_bytes_for(uint64_t max_gap)
{
    if (max_gap <= UINT8_MAX) return 1;
    if (max_gap <= UINT16_MAX) return 2;
    if (max_gap <= UINT32_MAX) return 4;
    return 8;
}

dcr_status_t dcr__loc_plan(const int64_t *indices, size_t count, int64_t numel,
                           dcr__loc_plan_t *plan)
{
    uint64_t max_gap = 0;
    if (count == 0 || indices[0] < 0 || indices[0] >= numel) {
        plan->bad_pos = 0;
        return DCR_EINVAL;
    }
    for (size_t k = 1; k < count; k++) {
        if (indices[k] <= indices[k - 1] || indices[k] >= numel) {
            plan->bad_pos = k;
            return DCR_EINVAL;
        }
        uint64_t gap = (uint64_t)(indices[k] - indices[k - 1]);
        if (gap > max_gap) max_gap = gap;
    }
    plan->first = indices[0];
    /* Strictly increasing indices span exactly count - 1 only when contiguous. */
    if ((uint64_t)(indices[count - 1] - indices[0]) == (uint64_t)(count - 1)) {
        plan->type = DCR_LOCATION_RUN;
        plan->gap_bytes = 0;
    } else {
        plan->type = DCR_LOCATION_GAPS;
        plan->gap_bytes = dcr__gap_bytes_for(max_gap);
    }
    return DCR_OK;
}

void dcr__gaps_store(uint8_t *dst, const int64_t *indices, size_t count, unsigned gap_bytes)
{
    for (size_t k = 1; k < count; k++) {
        uint64_t gap = (uint64_t)(indices[k] - indices[k - 1]);
        uint8_t *p = dst + (k - 1) * gap_bytes;
        switch (gap_bytes) {
        case 1:
            *p = (uint8_t)gap;
            break;
        case 2:
            dcr__st16(p, (uint16_t)gap);
            break;
        case 4:
            dcr__st32(p, (uint32_t)gap);
            break;
        default:
            dcr__st64(p, gap);
            break;
        }
    }
}

bool dcr__gaps_check(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, int64_t first,
                     int64_t numel, int64_t *last_p, size_t *bad_pos_p)
{
    /* first < numel <= 2^62 was checked by the caller, and each step keeps
     * idx < numel before adding the next gap, so comparing the gap with the
     * remaining room never overflows. */
    uint64_t idx = (uint64_t)first;
    for (size_t k = 0; k < ngaps; k++) {
        uint64_t gap = dcr__gap_load(gaps, k, gap_bytes);
        if (gap == 0 || gap >= (uint64_t)numel - idx) {
            *bad_pos_p = k;
            return false;
        }
        idx += gap;
    }
    *last_p = (int64_t)idx;
    return true;
}

void dcr__gaps_expand(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, int64_t first,
                      int64_t *dst)
{
    int64_t idx = first;
    dst[0] = idx;
    for (size_t k = 0; k < ngaps; k++) {
        idx += (int64_t)dcr__gap_load(gaps, k, gap_bytes);
        dst[k + 1] = idx;
    }
}
