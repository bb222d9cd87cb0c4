/* ctest-labels: unit */
/* The Table 2 measurement, checked from first principles at small n: the
 * update and the changed set are recomputed here along an independent path
 * (double arithmetic rounded to FP32, which is exact for one FP32 multiply
 * or add, and a hand-written BF16 rounding), and the compressed streams are
 * decompressed with zstd directly and must reproduce the new words. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "dcr/rng.h"
#include "workloads/harness/table2.h"

#define N 200000

/* Round-to-nearest-even of finite FP32 bits to BF16 bits. */
static uint16_t t_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint32_t lsb = (bits >> 16) & 1;
    return (uint16_t)((bits + 0x7FFFu + lsb) >> 16);
}

static float t_f32(uint16_t bf)
{
    uint32_t bits = (uint32_t)bf << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

typedef struct t_ref {
    uint16_t *input;
    float *noise;
    uint16_t *updated[DCR_TABLE2_ROWS];
    size_t changed[DCR_TABLE2_ROWS];
} t_ref_t;

/* The seed's procedure, written out here without the workload's code. */
static void t_ref_build(t_ref_t *ref, size_t n)
{
    dcr_rng_t in_rng, noise_rng;
    dcr_rng_seed(&in_rng, 42);
    dcr_rng_seed(&noise_rng, 44);
    ref->input = malloc(n * sizeof *ref->input);
    ref->noise = malloc(n * sizeof *ref->noise);
    for (size_t i = 0; i < n; i++) ref->input[i] = t_bf16((float)dcr_rng_normal(&in_rng));
    for (size_t i = 0; i < n; i++) ref->noise[i] = (float)dcr_rng_normal(&noise_rng);
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        float a = (float)dcr_table2_scales[r];
        ref->updated[r] = malloc(n * sizeof(uint16_t));
        ref->changed[r] = 0;
        for (size_t i = 0; i < n; i++) {
            float scaled = (float)((double)ref->noise[i] * (double)a);
            float sum = (float)((double)t_f32(ref->input[i]) + (double)scaled);
            ref->updated[r][i] = t_bf16(sum);
            if (ref->updated[r][i] != ref->input[i]) ref->changed[r]++;
        }
    }
}

static void t_ref_free(t_ref_t *ref)
{
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) free(ref->updated[r]);
    free(ref->noise);
    free(ref->input);
}

static void test_scales_are_the_seeds(void **state)
{
    (void)state;
    assert_true(dcr_table2_scales[0] == 1e-4);
    assert_true(dcr_table2_scales[1] == 1e-3);
    assert_true(dcr_table2_scales[2] == 1e-2);
    dcr_table2_params_t p;
    dcr_table2_params_default(&p);
    assert_int_equal(p.n, 20000000);
    assert_int_equal(p.level, 1);
    assert_int_equal(p.input_seed, 42);
    assert_int_equal(p.noise_seed, 44);
}

static void test_building_blocks_match_reference(void **state)
{
    (void)state;
    t_ref_t ref;
    t_ref_build(&ref, N);
    uint16_t *input = malloc(N * sizeof *input), *updated = malloc(N * sizeof *updated);
    float *noise = malloc(N * sizeof *noise);
    dcr_table2_inputs(42, input, N);
    dcr_table2_noise(44, noise, N);
    assert_memory_equal(input, ref.input, N * sizeof *input);
    assert_memory_equal(noise, ref.noise, N * sizeof *noise);
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        dcr_table2_update(input, noise, (float)dcr_table2_scales[r], updated, N);
        assert_memory_equal(updated, ref.updated[r], N * sizeof *updated);
    }
    free(noise);
    free(updated);
    free(input);
    t_ref_free(&ref);
}

/* Decompresses a frame of count 16-bit words, undoing the shuffle by hand. */
static uint16_t *t_inflate(const void *frame, size_t len, size_t count, bool shuffled)
{
    uint8_t *bytes = malloc(2 * count + 1);
    size_t got = ZSTD_decompress(bytes, 2 * count + 1, frame, len);
    assert_false(ZSTD_isError(got));
    assert_int_equal(got, 2 * count);
    uint16_t *words = malloc(2 * count + 1);
    for (size_t i = 0; i < count; i++) {
        uint8_t lo = shuffled ? bytes[i] : bytes[2 * i];
        uint8_t hi = shuffled ? bytes[count + i] : bytes[2 * i + 1];
        words[i] = (uint16_t)(lo | (hi << 8)); /* little-endian words */
    }
    free(bytes);
    return words;
}

static void test_streams_reproduce_new_words(void **state)
{
    (void)state;
    t_ref_t ref;
    t_ref_build(&ref, N);
    dcr_table2_params_t params;
    dcr_table2_params_default(&params);
    params.n = N;
    dcr_table2_result_t res;
    assert_int_equal(dcr_table2_run(&params, &res), DCR_OK);
    assert_int_equal(res.n, N);

    uint16_t *xw = malloc(N * sizeof *xw), *nw = malloc(N * sizeof *nw);
    size_t cap = dcr_table2_compress_bound(N);
    uint8_t *frame = malloc(cap);
    for (int r = 0; r < DCR_TABLE2_ROWS; r++) {
        const dcr_table2_row_t *row = &res.rows[r];
        assert_true(row->a == dcr_table2_scales[r]);
        assert_int_equal(row->changed, ref.changed[r]);
        assert_true(row->changed_fraction == (double)ref.changed[r] / N);
        assert_int_equal(row->raw_bytes, 2 * ref.changed[r]);
        assert_true(row->ratio == (double)row->overwrite_bytes / (double)row->xor_bytes);
        print_message("a=%g changed %.4f%% overwrite %llu xor %llu ratio %.3f\n", row->a,
                      100 * row->changed_fraction, (unsigned long long)row->overwrite_bytes,
                      (unsigned long long)row->xor_bytes, row->ratio);

        size_t changed = dcr_table2_select(ref.input, ref.updated[r], N, xw, nw);
        assert_int_equal(changed, ref.changed[r]);
        for (int sh = 0; sh < 2; sh++) {
            size_t ow_len, xor_len;
            assert_int_equal(dcr_table2_compress(nw, changed, 1, sh, frame, cap, &ow_len), DCR_OK);
            uint16_t *ow = t_inflate(frame, ow_len, changed, sh);
            assert_int_equal(dcr_table2_compress(xw, changed, 1, sh, frame, cap, &xor_len), DCR_OK);
            uint16_t *xm = t_inflate(frame, xor_len, changed, sh);
            /* Walk the changed positions in input order: the overwrite stream
             * holds the new words, and old ^ mask gives them too. */
            size_t k = 0;
            for (size_t i = 0; i < N; i++) {
                if (ref.updated[r][i] == ref.input[i]) continue;
                assert_int_equal(ow[k], ref.updated[r][i]);
                assert_int_not_equal(xm[k], 0);
                assert_int_equal((uint16_t)(ref.input[i] ^ xm[k]), ref.updated[r][i]);
                k++;
            }
            assert_int_equal(k, changed);
            assert_int_equal(ow_len, sh ? row->overwrite_bytes_shuffled : row->overwrite_bytes);
            assert_int_equal(xor_len, sh ? row->xor_bytes_shuffled : row->xor_bytes);
            free(xm);
            free(ow);
        }
    }
    free(frame);
    free(nw);
    free(xw);
    t_ref_free(&ref);
}

static void test_bad_params(void **state)
{
    (void)state;
    dcr_table2_params_t params;
    dcr_table2_result_t res;
    memset(&res, 0x5A, sizeof res);
    dcr_table2_result_t before = res;
    dcr_table2_params_default(&params);
    params.n = 0;
    assert_int_equal(dcr_table2_run(&params, &res), DCR_EINVAL);
    params.n = DCR_TABLE2_N_MAX + 1;
    assert_int_equal(dcr_table2_run(&params, &res), DCR_EINVAL);
    params.n = 100;
    params.level = 1000;
    assert_int_equal(dcr_table2_run(&params, &res), DCR_EINVAL);
    assert_memory_equal(&res, &before, sizeof res); /* untouched on failure */
    uint16_t w[4] = {1, 2, 3, 4};
    uint8_t frame[64];
    size_t len;
    assert_int_equal(dcr_table2_compress(w, 4, 1000, false, frame, sizeof frame, &len), DCR_EINVAL);
}

/* The command's JSON carries the documented keys and the same figures. */
static void test_cli_json(void **state)
{
    (void)state;
    const char *cli = getenv("DCR_CLI");
    if (cli == NULL) cli = DCR_CLI_PATH;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s table2 --n 50000 --json 2>/dev/null", cli);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    json_error_t err;
    json_t *root = json_loadf(f, 0, &err);
    assert_int_equal(pclose(f), 0);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "n")), 50000);
    json_t *rows = json_object_get(root, "rows");
    assert_int_equal(json_array_size(rows), DCR_TABLE2_ROWS);
    dcr_table2_params_t params;
    dcr_table2_params_default(&params);
    params.n = 50000;
    dcr_table2_result_t res;
    assert_int_equal(dcr_table2_run(&params, &res), DCR_OK);
    const char *keys[] = {"a",     "changed_fraction",         "overwrite_bytes",   "xor_bytes",
                          "ratio", "overwrite_bytes_shuffled", "xor_bytes_shuffled"};
    for (size_t r = 0; r < DCR_TABLE2_ROWS; r++) {
        json_t *row = json_array_get(rows, r);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            assert_non_null(json_object_get(row, keys[k]));
        assert_int_equal(json_integer_value(json_object_get(row, "xor_bytes")),
                         res.rows[r].xor_bytes);
        assert_int_equal(json_integer_value(json_object_get(row, "overwrite_bytes")),
                         res.rows[r].overwrite_bytes);
    }
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scales_are_the_seeds),
        cmocka_unit_test(test_building_blocks_match_reference),
        cmocka_unit_test(test_streams_reproduce_new_words),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_cli_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
