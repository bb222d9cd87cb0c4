/* Byte-plane shuffle of fixed-width words, the transform blosc applies before
 * its compressors: grouping byte b of every word into one plane puts the
 * slowly varying sign/exponent bytes of float words next to each other, where
 * zstd finds long matches, and leaves the noisy mantissa bytes to themselves. */
#include "codec-internal.h"

/* The common widths get their own loops so the compiler sees a constant
 * stride; the generic loop handles any other width. */
#define DCR__SHUFFLE_LOOP(W)                                                                       \
    for (size_t i = 0; i < nwords; i++)                                                            \
        for (size_t b = 0; b < (W); b++) d[b * nwords + i] = s[i * (W) + b];

#define DCR__UNSHUFFLE_LOOP(W)                                                                     \
    for (size_t i = 0; i < nwords; i++)                                                            \
        for (size_t b = 0; b < (W); b++) d[i * (W) + b] = s[b * nwords + i];

void dcr_codec_shuffle(void *dst, const void *src, size_t nwords, size_t width)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    switch (width) {
    case 0:
        return;
    case 1:
        memcpy(d, s, nwords);
        return;
    case 2:
        DCR__SHUFFLE_LOOP(2);
        return;
    case 4:
        DCR__SHUFFLE_LOOP(4);
        return;
    case 8:
        DCR__SHUFFLE_LOOP(8);
        return;
    default:
        DCR__SHUFFLE_LOOP(width);
        return;
    }
}

void dcr_codec_unshuffle(void *dst, const void *src, size_t nwords, size_t width)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    switch (width) {
    case 0:
        return;
    case 1:
        memcpy(d, s, nwords);
        return;
    case 2:
        DCR__UNSHUFFLE_LOOP(2);
        return;
    case 4:
        DCR__UNSHUFFLE_LOOP(4);
        return;
    case 8:
        DCR__UNSHUFFLE_LOOP(8);
        return;
    default:
        DCR__UNSHUFFLE_LOOP(width);
        return;
    }
}
