/* BLAKE2b written from RFC 7693 (sections 2 and 3, appendix C's structure)
 * for the codec tests: an oracle for the payload digest that shares no code
 * with libb2, which the codec uses. Checked in test_codec_key.c against
 * RFC 7693 appendix A and the keyed entries of the BLAKE2 reference KAT
 * (blake2b-kat.txt). Slow and simple on purpose. */
#ifndef DCR_TEST_BLAKE2B_REF_H
#define DCR_TEST_BLAKE2B_REF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct t_b2 {
    uint64_t h[8];
    uint64_t t; /* bytes compressed so far (messages here stay below 2^64) */
    uint8_t buf[128];
    size_t n; /* bytes waiting in buf */
    size_t outlen;
} t_b2_t;

static const uint64_t t_b2_iv[8] = {
    0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull, 0x3C6EF372FE94F82Bull, 0xA54FF53A5F1D36F1ull,
    0x510E527FADE682D1ull, 0x9B05688C2B3E6C1Full, 0x1F83D9ABFB41BD6Bull, 0x5BE0CD19137E2179ull};

static const uint8_t t_b2_sigma[10][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
};

static inline uint64_t t_b2_rotr(uint64_t x, int n)
{
    return (x >> n) | (x << (64 - n));
}

/* RFC 7693 section 3.1, function G. */
static inline void t_b2_g(uint64_t *v, int a, int b, int c, int d, uint64_t x, uint64_t y)
{
    v[a] = v[a] + v[b] + x;
    v[d] = t_b2_rotr(v[d] ^ v[a], 32);
    v[c] = v[c] + v[d];
    v[b] = t_b2_rotr(v[b] ^ v[c], 24);
    v[a] = v[a] + v[b] + y;
    v[d] = t_b2_rotr(v[d] ^ v[a], 16);
    v[c] = v[c] + v[d];
    v[b] = t_b2_rotr(v[b] ^ v[c], 63);
}

/* RFC 7693 section 3.2, function F: 12 rounds over one 128-byte block. */
static inline void t_b2_compress(t_b2_t *s, const uint8_t *block, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) {
        m[i] = 0;
        for (int k = 0; k < 8; k++) m[i] |= (uint64_t)block[8 * i + k] << (8 * k);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = t_b2_iv[i];
    }
    v[12] ^= s->t; /* low word of the counter; the high word stays 0 */
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t *z = t_b2_sigma[r % 10];
        t_b2_g(v, 0, 4, 8, 12, m[z[0]], m[z[1]]);
        t_b2_g(v, 1, 5, 9, 13, m[z[2]], m[z[3]]);
        t_b2_g(v, 2, 6, 10, 14, m[z[4]], m[z[5]]);
        t_b2_g(v, 3, 7, 11, 15, m[z[6]], m[z[7]]);
        t_b2_g(v, 0, 5, 10, 15, m[z[8]], m[z[9]]);
        t_b2_g(v, 1, 6, 11, 12, m[z[10]], m[z[11]]);
        t_b2_g(v, 2, 7, 8, 13, m[z[12]], m[z[13]]);
        t_b2_g(v, 3, 4, 9, 14, m[z[14]], m[z[15]]);
    }
    for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

static inline void t_b2_update(t_b2_t *s, const void *in, size_t len)
{
    const uint8_t *p = in;
    for (size_t i = 0; i < len; i++) {
        /* A full buffer is compressed only once more input arrives: the last
         * block must be compressed with the final flag. */
        if (s->n == 128) {
            s->t += 128;
            t_b2_compress(s, s->buf, 0);
            s->n = 0;
        }
        s->buf[s->n++] = p[i];
    }
}

/* Parameter block word 0 (RFC 7693 section 2.5): digest length, key length,
 * fanout 1, depth 1; a key is padded to a whole block and hashed first. */
static inline void t_b2_init(t_b2_t *s, size_t outlen, const void *key, size_t keylen)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 8; i++) s->h[i] = t_b2_iv[i];
    s->h[0] ^= 0x01010000ull ^ ((uint64_t)keylen << 8) ^ (uint64_t)outlen;
    s->outlen = outlen;
    if (keylen > 0) {
        uint8_t block[128] = {0};
        memcpy(block, key, keylen);
        t_b2_update(s, block, 128);
    }
}

static inline void t_b2_final(t_b2_t *s, uint8_t *out)
{
    s->t += s->n;
    memset(s->buf + s->n, 0, 128 - s->n);
    t_b2_compress(s, s->buf, 1);
    for (size_t i = 0; i < s->outlen; i++) out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
}

static inline void t_b2(uint8_t *out, size_t outlen, const void *key, size_t keylen, const void *in,
                        size_t len)
{
    t_b2_t s;
    t_b2_init(&s, outlen, key, keylen);
    t_b2_update(&s, in, len);
    t_b2_final(&s, out);
}

#endif
