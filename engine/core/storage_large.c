/* Large-page storage (see dcr/storage_large.h). It belongs to the storage
 * module: dcr_storage_destroy frees data with free(), which takes memory
 * from aligned_alloc of any alignment. */
#include "dcr/storage_large.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

dcr_status_t dcr_storage_create_large(size_t bytes, dcr_storage_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "storage_create_large: out_p is NULL");
    if (bytes < DCR_LARGE_PAGE) return dcr_storage_create(bytes, out_p);
    if (bytes > SIZE_MAX - DCR_LARGE_PAGE)
        return dcr_error_set(DCR_ENOMEM, "storage of %zu bytes is too large", bytes);
    size_t rounded = (bytes + DCR_LARGE_PAGE - 1) / DCR_LARGE_PAGE * DCR_LARGE_PAGE;
    dcr_storage_t *s = malloc(sizeof(*s));
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "storage handle allocation failed");
    s->data = aligned_alloc(DCR_LARGE_PAGE, rounded);
    if (s->data == NULL) {
        free(s);
        return dcr_error_set(DCR_ENOMEM, "storage of %zu bytes: allocation failed", bytes);
    }
#ifdef MADV_HUGEPAGE
    /* Before the first touch, so that the zeroing below faults in huge
     * pages; a refusal (no THP support) leaves ordinary pages. */
    (void)madvise(s->data, rounded, MADV_HUGEPAGE);
#endif
    memset(s->data, 0, rounded);
    s->bytes = bytes;
    *out_p = s;
    return DCR_OK;
}
