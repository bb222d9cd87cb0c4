/* Small helpers shared by the encoder and the decoder. */
#include "codec-internal.h"

dcr_status_t dcr__buf_reserve(dcr__buf_t *b, size_t need)
{
    if (need <= b->cap) return DCR_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) cap = (cap > SIZE_MAX / 2) ? need : cap * 2;
    uint8_t *data = realloc(b->data, cap);
    if (data == NULL)
        return dcr_error_set(DCR_ENOMEM, "codec: cannot grow a buffer to %zu bytes", need);
    b->data = data;
    b->cap = cap;
    return DCR_OK;
}

void dcr__buf_free(dcr__buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int64_t dcr__numel_checked(int ndim, const int64_t *shape)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || shape[d] > DCR__NUMEL_MAX) return -1;
        /* A zero dim makes the product 0 whatever follows, but later dims
         * must still be range-checked, so keep looping. */
        if (shape[d] != 0 && numel > DCR__NUMEL_MAX / shape[d]) return -1;
        numel *= shape[d];
    }
    return numel;
}

const char *dcr_encoding_name(dcr_encoding_t encoding)
{
    switch (encoding) {
    case DCR_ENCODING_XOR:
        return "xor";
    case DCR_ENCODING_OVERWRITE:
        return "overwrite";
    case DCR_ENCODING_COUNT:
        break;
    }
    return "invalid";
}
