/* A seeded, splittable random generator (xoshiro256** seeded by splitmix64).
 * Same seed, same sequence, on every machine. dcr_rng_split derives an
 * independent child stream from a parent and a key, so parallel workers get
 * reproducible streams regardless of scheduling. Not thread-safe: one
 * generator per thread. */
#ifndef DCR_RNG_H
#define DCR_RNG_H

#include <stdint.h>

/* Treat as opaque; initialize with dcr_rng_seed or dcr_rng_split. */
typedef struct dcr_rng {
    uint64_t s[4];
    double spare; /* second Box-Muller value, valid when has_spare */
    int has_spare;
} dcr_rng_t;

void dcr_rng_seed(dcr_rng_t *rng, uint64_t seed);
/* Child stream for `key` (e.g. owner id); does not advance the parent. */
dcr_rng_t dcr_rng_split(const dcr_rng_t *parent, uint64_t key);
uint64_t dcr_rng_u64(dcr_rng_t *rng);
/* Uniform in [0, bound) without modulo bias; bound > 0. */
uint64_t dcr_rng_below(dcr_rng_t *rng, uint64_t bound);
/* Uniform double in [0, 1). */
double dcr_rng_uniform(dcr_rng_t *rng);
/* Standard normal (Box-Muller, both values used: every second call returns
 * the cached partner). Uses libm's log/sin/cos, so unlike the integer
 * functions above its last bits may differ between C libraries. */
double dcr_rng_normal(dcr_rng_t *rng);

#endif
