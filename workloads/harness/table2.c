/* The seed's Table 2 measurement (see table2.h for the procedure). */
#include "workloads/harness/table2.h"

#include <jansson.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "dcr/codec.h"
#include "dcr/dtype.h"
#include "dcr/log.h"
#include "dcr/rng.h"

const double dcr_table2_scales[DCR_TABLE2_ROWS] = {1e-4, 1e-3, 1e-2};

void dcr_table2_params_default(dcr_table2_params_t *params)
{
    params->n = 20000000;
    params->level = 1;
    params->input_seed = 42;
    params->noise_seed = 44;
    params->progress = false;
}

void dcr_table2_inputs(uint64_t seed, uint16_t *input, size_t n)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    /* Drawn in FP32 and rounded to BF16, as torch.randn(dtype=bfloat16) does. */
    for (size_t i = 0; i < n; i++) input[i] = dcr_f32_to_bf16((float)dcr_rng_normal(&rng));
}

void dcr_table2_noise(uint64_t seed, float *noise, size_t n)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) noise[i] = (float)dcr_rng_normal(&rng);
}

void dcr_table2_update(const uint16_t *input, const float *noise, float a, uint16_t *updated,
                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* Two statements, each rounded to FP32: the seed scales and adds as
         * separate operations, and ISO C (-std=c11) does not contract
         * across statements into a fused multiply-add. */
        float scaled = noise[i] * a;
        float sum = dcr_bf16_to_f32(input[i]) + scaled;
        updated[i] = dcr_f32_to_bf16(sum);
    }
}

size_t dcr_table2_select(const uint16_t *input, const uint16_t *updated, size_t n,
                         uint16_t *xor_words, uint16_t *new_words)
{
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t mask = (uint16_t)(input[i] ^ updated[i]);
        if (mask == 0) continue;
        xor_words[changed] = mask;
        new_words[changed] = updated[i];
        changed++;
    }
    return changed;
}

size_t dcr_table2_compress_bound(size_t count)
{
    return ZSTD_compressBound(count * sizeof(uint16_t));
}

dcr_status_t dcr_table2_compress(const uint16_t *words, size_t count, int level, bool shuffle,
                                 void *dst, size_t cap, size_t *len_p)
{
    if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
        return dcr_error_set(DCR_EINVAL, "table2: zstd level %d outside [%d, %d]", level,
                             ZSTD_minCLevel(), ZSTD_maxCLevel());
    size_t bytes = count * sizeof(uint16_t);
    const void *src = words;
    uint8_t *planes = NULL;
    if (shuffle) {
        planes = malloc(bytes ? bytes : 1);
        if (planes == NULL)
            return dcr_error_set(DCR_ENOMEM, "table2: cannot allocate %zu bytes to shuffle", bytes);
        dcr_codec_shuffle(planes, words, count, sizeof(uint16_t));
        src = planes;
    }
    /* The host is little-endian (the codec checks at build time), so the
     * words' memory is already the little-endian stream the seed describes. */
    size_t len = ZSTD_compress(dst, cap, src, bytes, level);
    free(planes);
    if (ZSTD_isError(len))
        return dcr_error_set(DCR_ECODEC, "table2: zstd failed: %s", ZSTD_getErrorName(len));
    *len_p = len;
    return DCR_OK;
}

/* Working memory of one run; freed in reverse order of allocation. */
typedef struct dcr__t2_bufs {
    uint16_t *input, *updated, *xor_words, *new_words;
    float *noise;
    uint8_t *frame;
    size_t frame_cap;
} dcr__t2_bufs_t;

static void dcr__t2_free(dcr__t2_bufs_t *b)
{
    free(b->frame);
    free(b->new_words);
    free(b->xor_words);
    free(b->updated);
    free(b->noise);
    free(b->input);
}

static dcr_status_t dcr__t2_alloc(dcr__t2_bufs_t *b, size_t n)
{
    memset(b, 0, sizeof *b);
    b->frame_cap = dcr_table2_compress_bound(n);
    b->input = malloc(n * sizeof *b->input);
    b->noise = malloc(n * sizeof *b->noise);
    b->updated = malloc(n * sizeof *b->updated);
    b->xor_words = malloc(n * sizeof *b->xor_words);
    b->new_words = malloc(n * sizeof *b->new_words);
    b->frame = malloc(b->frame_cap);
    if (b->input && b->noise && b->updated && b->xor_words && b->new_words && b->frame)
        return DCR_OK;
    dcr__t2_free(b);
    return dcr_error_set(DCR_ENOMEM, "table2: cannot allocate working memory for n = %zu", n);
}

static dcr_status_t dcr__t2_sizes(dcr__t2_bufs_t *b, size_t changed, int level,
                                  dcr_table2_row_t *row)
{
    size_t len;
    DCR_CHECK(
        dcr_table2_compress(b->new_words, changed, level, false, b->frame, b->frame_cap, &len));
    row->overwrite_bytes = len;
    DCR_CHECK(
        dcr_table2_compress(b->xor_words, changed, level, false, b->frame, b->frame_cap, &len));
    row->xor_bytes = len;
    DCR_CHECK(
        dcr_table2_compress(b->new_words, changed, level, true, b->frame, b->frame_cap, &len));
    row->overwrite_bytes_shuffled = len;
    DCR_CHECK(
        dcr_table2_compress(b->xor_words, changed, level, true, b->frame, b->frame_cap, &len));
    row->xor_bytes_shuffled = len;
    return DCR_OK;
}

static dcr_status_t dcr__t2_row(dcr__t2_bufs_t *b, size_t n, double a, int level, bool progress,
                                dcr_table2_row_t *row)
{
    if (progress) DCR_LOG_INFO("table2: a = %g: updating and selecting changed words", a);
    dcr_table2_update(b->input, b->noise, (float)a, b->updated, n);
    size_t changed = dcr_table2_select(b->input, b->updated, n, b->xor_words, b->new_words);
    memset(row, 0, sizeof *row);
    row->a = a;
    row->changed = changed;
    row->changed_fraction = (double)changed / (double)n;
    row->raw_bytes = (uint64_t)changed * sizeof(uint16_t);
    if (progress) DCR_LOG_INFO("table2: a = %g: compressing %zu changed words", a, changed);
    DCR_CHECK(dcr__t2_sizes(b, changed, level, row));
    row->ratio = row->xor_bytes ? (double)row->overwrite_bytes / (double)row->xor_bytes : 0.0;
    return DCR_OK;
}

dcr_status_t dcr_table2_run(const dcr_table2_params_t *params, dcr_table2_result_t *out_p)
{
    if (params == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "table2: NULL argument");
    if (params->n < 1 || params->n > DCR_TABLE2_N_MAX)
        return dcr_error_set(DCR_EINVAL, "table2: n = %llu outside [1, %llu]",
                             (unsigned long long)params->n, DCR_TABLE2_N_MAX);
    if (params->level < ZSTD_minCLevel() || params->level > ZSTD_maxCLevel())
        return dcr_error_set(DCR_EINVAL, "table2: zstd level %d outside [%d, %d]", params->level,
                             ZSTD_minCLevel(), ZSTD_maxCLevel());
    size_t n = (size_t)params->n;
    dcr__t2_bufs_t b;
    DCR_CHECK(dcr__t2_alloc(&b, n));
    if (params->progress) DCR_LOG_INFO("table2: drawing %zu BF16 inputs and FP32 noise", n);
    dcr_table2_inputs(params->input_seed, b.input, n);
    dcr_table2_noise(params->noise_seed, b.noise, n);
    dcr_table2_result_t res;
    memset(&res, 0, sizeof res);
    res.n = params->n;
    res.level = params->level;
    dcr_status_t st = DCR_OK;
    for (int r = 0; r < DCR_TABLE2_ROWS && st == DCR_OK; r++)
        st =
            dcr__t2_row(&b, n, dcr_table2_scales[r], params->level, params->progress, &res.rows[r]);
    dcr__t2_free(&b);
    if (st == DCR_OK) *out_p = res;
    return st;
}

static void print_table(const dcr_table2_result_t *res)
{
    printf(
        "Table 2: %llu BF16 values, zstd level %d, changed words in input order, no locations\n\n",
        (unsigned long long)res->n, res->level);
    printf("%8s %10s %12s %12s %12s %7s %14s %14s %9s\n", "a", "changed", "raw bytes", "overwrite",
           "xor", "ratio", "overwrite shuf", "xor shuf", "ratio shuf");
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        const dcr_table2_row_t *row = &res->rows[r];
        double ratio_shuf = row->xor_bytes_shuffled ? (double)row->overwrite_bytes_shuffled /
                                                          (double)row->xor_bytes_shuffled
                                                    : 0.0;
        printf("%8.0e %9.4f%% %12llu %12llu %12llu %6.3fx %14llu %14llu %8.3fx\n", row->a,
               100.0 * row->changed_fraction, (unsigned long long)row->raw_bytes,
               (unsigned long long)row->overwrite_bytes, (unsigned long long)row->xor_bytes,
               row->ratio, (unsigned long long)row->overwrite_bytes_shuffled,
               (unsigned long long)row->xor_bytes_shuffled, ratio_shuf);
    }
    printf("\nratio = overwrite bytes / xor bytes; \"shuf\" columns byte-plane shuffle each stream "
           "before zstd.\n");
}

static dcr_status_t print_json(const dcr_table2_result_t *res)
{
    json_t *rows = json_array();
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        const dcr_table2_row_t *row = &res->rows[r];
        json_array_append_new(
            rows, json_pack("{s:f, s:f, s:I, s:I, s:I, s:I, s:f, s:I, s:I}", "a", row->a,
                            "changed_fraction", row->changed_fraction, "changed",
                            (json_int_t)row->changed, "raw_bytes", (json_int_t)row->raw_bytes,
                            "overwrite_bytes", (json_int_t)row->overwrite_bytes, "xor_bytes",
                            (json_int_t)row->xor_bytes, "ratio", row->ratio,
                            "overwrite_bytes_shuffled", (json_int_t)row->overwrite_bytes_shuffled,
                            "xor_bytes_shuffled", (json_int_t)row->xor_bytes_shuffled));
    }
    json_t *root =
        json_pack("{s:I, s:i, s:o}", "n", (json_int_t)res->n, "level", res->level, "rows", rows);
    if (root == NULL) return dcr_error_set(DCR_ENOMEM, "cannot build the JSON output");
    int rc = json_dumpf(root, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(root);
    return rc == 0 ? DCR_OK : dcr_error_set(DCR_EIO, "cannot write the JSON output");
}

dcr_status_t dcr_table2_print(const dcr_table2_result_t *res, bool json)
{
    if (json) return print_json(res);
    print_table(res);
    return DCR_OK;
}
