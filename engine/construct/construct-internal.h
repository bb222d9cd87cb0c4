/* Shared by the files of engine/construct (construct.c, repair.c) and its
 * tests; not part of the public interface. */
#ifndef DCR_CONSTRUCT_INTERNAL_H
#define DCR_CONSTRUCT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dcr/construct.h"
#include "dcr/device.h"

/* Detection works on sub-runs of at most this many elements, which bounds the
 * per-owner index buffer and keeps indices in 32 bits (construct.c, diff.c). */
#define DCR__SUBRUN_MAX ((int64_t)1 << 20)

/* dcr_constructor_create on device 0 of the given backend instead of
 * cfg->device: lets tests run the path of a device the host cannot address
 * (staging, copies up, gathers down) on a host-memory table whose props say
 * so. NULL ops: cfg->device, as dcr_constructor_create. */
dcr_status_t dcr__constructor_create_on(const dcr_device_ops_t *ops,
                                        const dcr_source_layout_t *layout,
                                        const dcr_construct_config_t *cfg,
                                        dcr_storage_t *const *baseline, dcr_constructor_t **out_p);

/* ---- in-place baseline update (inplace.c) -------------------------------
 * On a device the host addresses, owners write each compared sub-run's
 * changed words into the tracker during the comparison, logging the words
 * they overwrite, so that the commit (on every refit's path, before t1)
 * copies only what the log could not hold, and an attempt that is not
 * committed is put back before the next run compares. */

/* The share of an owner's tracker bytes its log may hold
 * (DCR_CONSTRUCT_UNDO_SHARE, dcr/construct.h): 1/12 covers 4% changed
 * 16-bit words (about 4 bytes a changed word); beyond it the remaining
 * tasks are copied whole at the commit, as without the log. The log grows
 * as needed, so a run with fewer changes holds less. */

typedef struct dcr__undo_log {
    unsigned char *buf;
    size_t len, cap;
    size_t last;  /* where the last segment starts (when len > 0) */
    size_t limit; /* bytes the log may hold; 0: nothing is updated in place */
    bool full;    /* an update did not fit: nothing more goes in place until emptied */
} dcr__undo_log_t;

/* Copies the n changed words cand[idx[i]] (es bytes each; idx ascending,
 * every index below 2^32) into tracker, logging the words they replace.
 * All or nothing: false, with nothing written, when the log is full or the
 * entries would pass its limit (it is then full until emptied). */
bool dcr__undo_update(dcr__undo_log_t *log, unsigned char *tracker, const unsigned char *cand,
                      const uint32_t *idx, size_t n, size_t es);
/* Writes every logged word back and empties the log. */
void dcr__undo_apply(dcr__undo_log_t *log);
/* Empties the log, keeping the updates (they were committed). */
void dcr__undo_forget(dcr__undo_log_t *log);
/* Frees the log's memory; the log is empty with limit 0. */
void dcr__undo_free(dcr__undo_log_t *log);

/* Sets every owner's log limit to bytes (tests: the path where the log
 * fills mid-run). Call between runs, with no attempt pending. */
void dcr__constructor_set_undo_limit(dcr_constructor_t *c, size_t bytes);

/* Tests: the tracker of layout task `task` (NULL when it has none, or it is
 * not host memory), and in *fresh_p whether the last run updated it in
 * place (the commit then leaves it alone). */
const void *dcr__constructor_tracker(const dcr_constructor_t *c, int task, bool *fresh_p);

/* ---- kept records (repair.c) --------------------------------------------- */

/* One item's records in overwrite form: sorted canonical indices, new values. */
typedef struct dcr__kept_item {
    int canonical;
    size_t count, value_size;
    int64_t *indices;
    unsigned char *values;
} dcr__kept_item_t;

/* One owner's items of one run, in emission order. */
typedef struct dcr__kept_run {
    uint64_t tau;
    dcr__kept_item_t *items;
    size_t n, cap;
} dcr__kept_run_t;

/* One owner's runs since its baseline (creation or the last commit). */
typedef struct dcr__kept {
    dcr__kept_run_t *runs;
    size_t n;
} dcr__kept_t;

/* Opens run tau. */
dcr_status_t dcr__kept_begin(dcr__kept_t *k, uint64_t tau);
/* Copies one item into the open run. */
dcr_status_t dcr__kept_add(dcr__kept_t *k, int canonical, size_t count, size_t value_size,
                           const int64_t *indices, const unsigned char *values);
/* Frees every run; k is empty again. */
void dcr__kept_clear(dcr__kept_t *k);

/* At a commit: the runs of kept[0, n) (owner ranks[i]) move into a repair
 * set, the last of each its records, the earlier ones its coverage; kept is
 * left empty. *out_p NULL when no owner kept a run. */
dcr_status_t dcr__repair_from_kept(const dcr_inventory_t *inv, const dcr_payload_key_t *key,
                                   dcr__kept_t *kept, const int *ranks, int n,
                                   dcr_repair_records_t **out_p);

/* One word of es bytes; the common sizes compile to a single move (the
 * projection's value words and the in-place update's logged words). */
static inline void dcr__word_copy(unsigned char *dst, const unsigned char *src, size_t es)
{
    switch (es) {
    case 1:
        *dst = *src;
        break;
    case 2:
        memcpy(dst, src, 2);
        break;
    case 4:
        memcpy(dst, src, 4);
        break;
    case 8:
        memcpy(dst, src, 8);
        break;
    default:
        memcpy(dst, src, es);
    }
}

#endif
