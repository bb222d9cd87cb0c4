/* Internals of the loader module shared by its files. */
#ifndef DCR_LOADER_INTERNAL_H
#define DCR_LOADER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/loader.h"

/* Open-addressing map from a 64-bit key to an index, grown at half load.
 * Keys are hashes (names) or pointers (storages); callers confirm matches. */
typedef struct dcr__imap {
    uint64_t *keys;
    int64_t *vals; /* -1: empty slot */
    size_t cap;
    size_t len;
} dcr__imap_t;

void dcr__imap_free(dcr__imap_t *m);
dcr_status_t dcr__imap_put(dcr__imap_t *m, uint64_t key, int64_t val);
/* Calls match(val, arg) for every entry with this key until one returns
 * nonzero; returns that entry's value or -1. */
int64_t dcr__imap_get(const dcr__imap_t *m, uint64_t key, int (*match)(int64_t, const void *),
                      const void *arg);

/* The loader wrapper brackets every backend call with these: begin resets the
 * per-call state and binds the input, end frees the temporaries. */
dcr_status_t dcr__load_ctx_begin(dcr_load_ctx_t *ctx, const dcr_params_t *params, const char *name,
                                 const dcr_view_t *tensor);
void dcr__load_ctx_end(dcr_load_ctx_t *ctx);

/* One element's bits as an unsigned word (little-endian host), and back. */
/* Whether the word encodes NaN in dtype. */

/* The dtype used for byte-per-element activity maps: FP8 words are single
 * bytes and same-dtype copies move bits unchanged. */
#define DCR__BYTE_DTYPE DCR_DTYPE_FP8_E4M3
#endif
