/* xoshiro256** (Blackman and Vigna), seeded and split through splitmix64 so
 * that nearby seeds and keys still give unrelated states. */
#include "dcr/rng.h"

#include <math.h>

#include "dcr/hash.h"

#define DCR__GOLDEN 0x9e3779b97f4a7c15ull

/* Domain separation for split keys, so that split(p, k) never reproduces
 * what seeding with k would give. */
#define DCR__SPLIT_SALT 0x6a09e667f3bcc909ull

static uint64_t dcr__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro must never hold the all-zero state; splitmix64 outputs make it
 * astronomically unlikely, but the fix costs nothing. */
static void dcr__rng_fix_zero(dcr_rng_t *rng)
{
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0) rng->s[0] = DCR__GOLDEN;
}

void dcr_rng_seed(dcr_rng_t *rng, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) {
        x += DCR__GOLDEN;
        rng->s[i] = dcr_hash64_mix(x);
    }
    dcr__rng_fix_zero(rng);
    rng->spare = 0.0;
    rng->has_spare = 0;
}

dcr_rng_t dcr_rng_split(const dcr_rng_t *parent, uint64_t key)
{
    /* Each child word is a bijective mix of one parent word and the key, so
     * different keys give different children and the parent is only read. */
    uint64_t k = dcr_hash64_mix(key ^ DCR__SPLIT_SALT);
    dcr_rng_t child;
    for (int i = 0; i < 4; i++) {
        child.s[i] = dcr_hash64_mix(parent->s[i] + k + (uint64_t)(i + 1) * DCR__GOLDEN);
    }
    dcr__rng_fix_zero(&child);
    child.spare = 0.0;
    child.has_spare = 0;
    return child;
}

uint64_t dcr_rng_u64(dcr_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = dcr__rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = dcr__rotl(s[3], 45);
    return result;
}

uint64_t dcr_rng_below(dcr_rng_t *rng, uint64_t bound)
{
    if (bound == 0) return 0;
#ifdef __SIZEOF_INT128__
    /* Lemire's multiply-and-reject: the high word of x * bound is uniform once
     * the low word falls outside the 2^64 mod bound biased values. */
    unsigned __int128 m = (unsigned __int128)dcr_rng_u64(rng) * bound;
    uint64_t low = (uint64_t)m;
    if (low < bound) {
        uint64_t threshold = (0 - bound) % bound;
        while (low < threshold) {
            m = (unsigned __int128)dcr_rng_u64(rng) * bound;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
#else
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t x = dcr_rng_u64(rng);
        if (x >= threshold) return x % bound;
    }
#endif
}

double dcr_rng_uniform(dcr_rng_t *rng)
{
    return (double)(dcr_rng_u64(rng) >> 11) * 0x1.0p-53;
}

double dcr_rng_normal(dcr_rng_t *rng)
{
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare;
    }
    /* 1 - uniform lies in (0, 1], so the logarithm is finite. */
    double u1 = 1.0 - dcr_rng_uniform(rng);
    double u2 = dcr_rng_uniform(rng);
    double r = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586476925286766559 * u2; /* 2 pi */
    rng->spare = r * sin(a);
    rng->has_spare = 1;
    return r * cos(a);
}
