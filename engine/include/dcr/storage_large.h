/* Storage for large, long-lived buffers: a receiver's resident parameters and
 * its scratch. GPU allocators back weights with large pages; on the host the
 * same effect comes from transparent huge pages, without which a sparse
 * apply spends most of its time in page walks (one TLB miss per touched
 * 4 KiB page). */
#ifndef DCR_STORAGE_LARGE_H
#define DCR_STORAGE_LARGE_H

#include <stddef.h>

#include "dcr/status.h"
#include "dcr/tensor.h"

/* The page size large storage is aligned to and rounded up to. */
#define DCR_LARGE_PAGE ((size_t)2 << 20)

/* Like dcr_storage_create (zeroed, freed with dcr_storage_destroy), but a
 * buffer of at least DCR_LARGE_PAGE bytes is aligned to DCR_LARGE_PAGE, its
 * allocation rounded up to a whole number of them, and advised for huge
 * pages where the system offers them (advice only: without them it is plain
 * memory). Smaller buffers are plain dcr_storage_create storage. */
dcr_status_t dcr_storage_create_large(size_t bytes, dcr_storage_t **out_p);

#endif
