/* Shared by the files of engine/construct (construct.c, repair.c) and its
 * tests; not part of the public interface. */
#ifndef DCR_CONSTRUCT_INTERNAL_H
#define DCR_CONSTRUCT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

#endif
