/* Internals of the loader module shared by its files. */
#ifndef DCR_LOADER_INTERNAL_H
#define DCR_LOADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/loader.h"

/* The loader wrapper brackets every backend call with these: begin resets the
 * per-call state and binds the input, end frees the temporaries (on a
 * device, after its work is done and the NaN watch's counters came down:
 * a device error of the call's ops is end's error). */
dcr_status_t dcr__load_ctx_begin(dcr_load_ctx_t *ctx, const dcr_params_t *params, const char *name,
                                 const dcr_view_t *tensor);
dcr_status_t dcr__load_ctx_end(dcr_load_ctx_t *ctx);

/* One element's bits as an unsigned word (little-endian host), and back. */
/* Whether the word encodes NaN in dtype. */

/* The dtype used for byte-per-element activity maps: FP8 words are single
 * bytes and same-dtype copies move bits unchanged. */
#define DCR__BYTE_DTYPE DCR_DTYPE_FP8_E4M3
#endif
