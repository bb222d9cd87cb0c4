/* The seed's Table 2: how much smaller XOR masks are than overwrite values
 * after zstd, on synthetic BF16 updates.
 *
 * n standard-normal values are drawn directly in BF16 (dcr_rng_t seeded 42,
 * each draw rounded to BF16). One FP32 Gaussian noise vector (a second
 * dcr_rng_t seeded 44) serves every noise scale a: each updated value is
 * bf16(input + noise * a), with the multiply and the add as two separate FP32
 * operations and round-to-nearest-even into BF16. The words whose bits
 * changed are kept in input order and form two streams, XOR masks
 * (old ^ new) and overwrite values (new); each stream alone, as
 * little-endian 16-bit words without locations or metadata, is compressed
 * with zstd. The same streams are also measured after a byte-plane shuffle
 * (dcr_codec_shuffle), the beyond-the-seed option of DESIGN.md section 6.
 *
 * The building blocks are public so that tests can check each step from
 * first principles. Buffers are caller-owned unless stated. */
#ifndef DCR_WORKLOADS_TABLE2_H
#define DCR_WORKLOADS_TABLE2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* The three noise scales of the seed, in row order. */
#define DCR_TABLE2_ROWS 3
extern const double dcr_table2_scales[DCR_TABLE2_ROWS];

/* Largest n accepted: 16 bytes of working memory per value. */
#define DCR_TABLE2_N_MAX 1000000000ull

typedef struct dcr_table2_params {
    uint64_t n;          /* values; the seed uses 20,000,000 */
    int level;           /* zstd level; the seed uses 1 */
    uint64_t input_seed; /* 42 in the seed */
    uint64_t noise_seed; /* 44 in the seed */
    bool progress;       /* log a line per stage at info level (long runs) */
} dcr_table2_params_t;

typedef struct dcr_table2_row {
    double a;                          /* noise scale */
    uint64_t changed;                  /* words whose bits changed */
    double changed_fraction;           /* changed / n */
    uint64_t raw_bytes;                /* 2 * changed: either stream uncompressed */
    uint64_t overwrite_bytes;          /* zstd(new words) */
    uint64_t xor_bytes;                /* zstd(old ^ new words) */
    double ratio;                      /* overwrite_bytes / xor_bytes */
    uint64_t overwrite_bytes_shuffled; /* zstd(shuffle(new words)) */
    uint64_t xor_bytes_shuffled;       /* zstd(shuffle(old ^ new words)) */
} dcr_table2_row_t;

typedef struct dcr_table2_result {
    uint64_t n;
    int level;
    dcr_table2_row_t rows[DCR_TABLE2_ROWS];
} dcr_table2_result_t;

/* The seed's settings: n = 20,000,000, level 1, seeds 42 and 44, no progress. */
void dcr_table2_params_default(dcr_table2_params_t *params);

/* Runs the whole measurement. DCR_EINVAL for n outside [1, DCR_TABLE2_N_MAX]
 * or a level zstd does not accept, DCR_ENOMEM, DCR_ECODEC. *out_p is written
 * only on success. */
dcr_status_t dcr_table2_run(const dcr_table2_params_t *params, dcr_table2_result_t *out_p);

/* What dcr table2 prints: the table with the seed's columns (and the
 * shuffled streams), or one JSON object with the rows; an error only when
 * the JSON cannot be built or written. */
dcr_status_t dcr_table2_print(const dcr_table2_result_t *res, bool json);

/* n BF16 words: bf16((float)normal) from a dcr_rng_t seeded with seed. */
void dcr_table2_inputs(uint64_t seed, uint16_t *input, size_t n);

/* n FP32 standard-normal values from a dcr_rng_t seeded with seed. */
void dcr_table2_noise(uint64_t seed, float *noise, size_t n);

/* updated[i] = bf16(f32(input[i]) + noise[i] * a), two separate FP32
 * operations, then round to nearest even. */
void dcr_table2_update(const uint16_t *input, const float *noise, float a, uint16_t *updated,
                       size_t n);

/* Writes the words whose bits differ, in input order: xor_words gets
 * input ^ updated and new_words gets updated (each with room for n).
 * Returns how many words changed. */
size_t dcr_table2_select(const uint16_t *input, const uint16_t *updated, size_t n,
                         uint16_t *xor_words, uint16_t *new_words);

/* Capacity dcr_table2_compress needs in dst for count words. */
size_t dcr_table2_compress_bound(size_t count);

/* Compresses count little-endian 16-bit words as one zstd frame at level,
 * byte-plane shuffled first when shuffle is set. *len_p gets the frame's
 * size. DCR_EINVAL for a bad level, DCR_ENOMEM, DCR_ECODEC. */
dcr_status_t dcr_table2_compress(const uint16_t *words, size_t count, int level, bool shuffle,
                                 void *dst, size_t cap, size_t *len_p);

#endif
