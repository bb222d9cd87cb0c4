/* ctest-labels: unit */
/* engine/device without a GPU: the registry and the --device names, the
 * CPU harness of every kernel (engine/device/kernels-internal.h run over the CUDA launch
 * configuration, warp votes emulated) against the CPU path, and the
 * conformance suite against the "cpu" backend. The same suite runs against
 * "cuda" in test_device_gpu.c where a GPU is. */
#include "dcr/device.h"
#include "device_harness.h"
#include "device_suite.h"

/* ---- registry ---- */

static void test_registry(void **state)
{
    assert_true(dcr_device_backend_count() >= 1);
    assert_string_equal(dcr_device_backend_name(0), "cpu");
    assert_null(dcr_device_backend_name(dcr_device_backend_count()));
    assert_non_null(dcr_device_find("cpu"));
    assert_null(dcr_device_find("auto")); /* a choice, not a backend */
    assert_null(dcr_device_find(NULL));
    for (size_t i = 0; i < dcr_device_backend_count(); i++) {
        const dcr_device_ops_t *ops = dcr_device_find(dcr_device_backend_name(i));
        assert_int_equal(ops->hdr.version, DCR_DEVICE_OPS_VERSION);
        /* A place the host cannot address must be asynchronous-capable and
         * stage through page-locked memory; the host place needs neither. */
        if (!ops->props.host_addressable) assert_true(ops->props.pinned_staging);
    }
    assert_true(dcr_device_name_valid("cpu"));
    assert_true(dcr_device_name_valid("cuda"));
    assert_true(dcr_device_name_valid("auto"));
    assert_false(dcr_device_name_valid("gpu"));
    assert_false(dcr_device_name_valid(NULL));
}

static void test_open(void **state)
{
    dcr_device_t *d = NULL;
    assert_int_equal(dcr_device_create("cpu", &d), DCR_OK);
    assert_string_equal(dcr_device_backend(d)->hdr.name, "cpu");
    dcr_device_destroy(d);
    dcr_device_destroy(NULL);

    d = NULL;
    assert_int_equal(dcr_device_create("tpu", &d), DCR_ENOTFOUND);
    assert_null(d);
    assert_non_null(strstr(dcr_error_detail(), "expected cpu, cuda or auto"));

    /* "auto" takes a GPU exactly when the cuda backend is built and finds one. */
    const dcr_device_ops_t *cuda = dcr_device_find("cuda");
    bool gpu = cuda && cuda->count(cuda) > 0;
    assert_int_equal(dcr_device_create("auto", &d), DCR_OK);
    assert_string_equal(dcr_device_backend(d)->hdr.name, gpu ? "cuda" : "cpu");
    dcr_device_destroy(d);

    d = NULL;
    dcr_status_t st = dcr_device_create("cuda", &d);
    if (gpu) {
        assert_int_equal(st, DCR_OK);
        dcr_device_destroy(d);
    } else {
        /* One clear line: which flag, what is missing. */
        assert_int_equal(st, cuda ? DCR_ENOTFOUND : DCR_EUNSUPPORTED);
        assert_null(d);
        const char *line = dcr_error_line(st);
        assert_non_null(strstr(line, "--device cuda"));
        assert_null(strchr(line, '\n'));
        print_message("without a GPU: %s\n", line);
    }
}

/* ---- the CPU harness against the CPU path ---- */

/* NaN classification of the kernels equals the core's, over every 8- and
 * 16-bit pattern and FP32 patterns around the NaN/Inf boundaries; the
 * placeholder word is a quiet NaN with sign 0 (the canonical one). */
static void test_harness_nan_rules(void **state)
{
    for (size_t di = 0; di < SUITE_NDTYPES; di++) {
        dcr_dtype_t dt = suite_dtypes[di];
        size_t es = dcr_dtype_size(dt);
        assert_int_equal(dcr_dk_dtype_size((int)dt), es);
        uint32_t nan = dcr_dk_nan_word((int)dt);
        assert_true(dcr_dtype_bits_isnan(dt, nan));
        assert_int_equal(nan >> (8 * es - 1), 0);
        if (es <= 2) {
            for (uint32_t b = 0; b < (1u << (8 * es)); b++)
                assert_int_equal(dcr_dk_isnan((int)dt, b) != 0, dcr_dtype_bits_isnan(dt, b) != 0);
        } else {
            dcr_rng_t rng;
            dcr_rng_seed(&rng, g_seed ^ 0x3A);
            for (int k = 0; k < 200000; k++) {
                uint32_t b = (uint32_t)dcr_rng_u64(&rng);
                if (k % 2) b |= 0x7F800000u; /* half on the all-ones exponent */
                if (k % 4 == 1) b &= 0xFF800001u;
                assert_int_equal(dcr_dk_isnan((int)dt, b) != 0, dcr_dtype_bits_isnan(dt, b) != 0);
            }
        }
    }
}

static void harness_detect_case(dcr_rng_t *rng, dcr_dtype_t dt, size_t n, double rate)
{
    size_t es = dcr_dtype_size(dt);
    char *cand = malloc(n * es + 1), *tr = malloc(n * es + 1);
    uint32_t *want = malloc((n + 64) * sizeof(uint32_t)), *got = malloc((n + 1) * sizeof(uint32_t));
    suite_gen_pair(rng, dt, n, rate, cand, tr);
    size_t nwant = dcr_detect_changes(cand, tr, n, es, want);
    size_t ngot = harness_detect(cand, tr, n, (unsigned)es, got);
    if (ngot != nwant || (ngot && memcmp(got, want, ngot * sizeof(uint32_t))))
        fail_msg("seed %llu: harness detect %s n=%zu rate=%g: %zu changes (CPU path %zu), or the "
                 "indices differ",
                 (unsigned long long)g_seed, dcr_dtype_name(dt), n, rate, ngot, nwant);
    /* The gathered values are the candidate's words at the changed indices. */
    char *vals = malloc(ngot * es + 1);
    harness_gather(vals, cand, (unsigned)es, got, ngot);
    for (size_t k = 0; k < ngot; k++)
        assert_memory_equal(vals + k * es, cand + (size_t)got[k] * es, es);
    free(vals);
    /* The tracker update makes the tracker the candidate, bit for bit. */
    harness_track(tr, cand, (unsigned)es, got, ngot);
    if (n) assert_memory_equal(tr, cand, n * es);
    free(cand);
    free(tr);
    free(want);
    free(got);
}

static void test_harness_detect(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xDE);
    for (size_t di = 0; di < SUITE_NDTYPES; di++)
        for (size_t si = 0; si < SUITE_NSIZES; si++)
            for (size_t ri = 0; ri < SUITE_NRATES; ri++)
                harness_detect_case(&rng, suite_dtypes[di], suite_sizes[si], suite_rates[ri]);
}

/* More blocks than the scan block has threads, so every scan thread sums a
 * segment of several block counts (the segment logic of the scan). */
static void test_harness_detect_many_blocks(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xBB);
    size_t n = (size_t)DCR_DK_TILE * DCR_DK_SCAN_THREADS * 2 + 777;
    harness_detect_case(&rng, DCR_DTYPE_BF16, n, 0.002);
    harness_detect_case(&rng, DCR_DTYPE_FP32, n / 2, 0.05);
}

/* One bit flipped at every position of a tile in turn: each lane, warp and
 * round must land its index at the right place. */
static void test_harness_detect_each_position(void **state)
{
    size_t n = DCR_DK_TILE + 5;
    uint16_t *a = calloc(n, 2), *b = calloc(n, 2);
    uint32_t got[2];
    for (size_t i = 0; i < n; i++) {
        a[i] = 0x8000; /* -0.0 against +0.0: equal as floats, not as bits */
        assert_int_equal(harness_detect(a, b, n, 2, got), 1);
        assert_int_equal(got[0], i);
        a[i] = 0;
    }
    assert_int_equal(harness_detect(a, b, n, 2, got), 0);
    free(a);
    free(b);
}

/* Apply kernels under the harness against the receiver's semantics. */
static void test_harness_apply(void **state)
{
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xAA);
    for (size_t di = 0; di < SUITE_NDTYPES; di++)
        for (size_t si = 0; si < SUITE_NSIZES; si++)
            for (size_t ri = 0; ri < SUITE_NRATES; ri++) {
                dcr_dtype_t dt = suite_dtypes[di];
                size_t n = suite_sizes[si], es = dcr_dtype_size(dt), bytes = n * es;
                char *base = malloc(bytes + 1), *val = malloc(bytes + 1);
                char *want = malloc(bytes + 1), *got = malloc(bytes + 1);
                char *scratch = malloc(bytes + 1);
                int64_t *idx = malloc((n + 1) * sizeof(int64_t));
                suite_gen_pair(&rng, dt, n, 0, base, want);
                size_t count = suite_gen_records(&rng, dt, n, suite_rates[ri], true, idx, val);
                for (int xor_op = 0; xor_op < 2; xor_op++) {
                    /* sparse */
                    memcpy(want, base, bytes);
                    memcpy(got, base, bytes);
                    oracle_sparse(dt, want, idx, val, count, xor_op);
                    harness_scatter(got, (unsigned)es, idx, val, count, xor_op);
                    if (bytes) assert_memory_equal(got, want, bytes);
                    /* full pass through scratch */
                    uint32_t base_word = xor_op ? 0 : dcr_dk_nan_word((int)dt);
                    memcpy(want, base, bytes);
                    memcpy(got, base, bytes);
                    if (xor_op)
                        oracle_sparse(dt, want, idx, val, count, true);
                    else
                        oracle_placeholder(dt, want, n, idx, val, count);
                    harness_fill(scratch, (unsigned)es, base_word, n);
                    harness_scatter(scratch, (unsigned)es, idx, val, count, 0);
                    harness_combine(got, scratch, (int)dt, dcr_device_region_flat(n), NULL,
                                    xor_op ? DCR_DK_XOR : DCR_DK_OVERWRITE);
                    harness_reset(scratch, (unsigned)es, idx, count, base_word);
                    if (bytes && memcmp(got, want, bytes))
                        fail_msg("seed %llu: harness full %s %s n=%zu rate=%g differs",
                                 (unsigned long long)g_seed, xor_op ? "xor" : "overwrite",
                                 dcr_dtype_name(dt), n, suite_rates[ri]);
                    assert_true(suite_all_words(dt, scratch, n, base_word));
                    /* The placeholder rule: a NaN-valued record does not apply
                     * in the full overwrite pass (the receiver tracks those). */
                    for (size_t k = 0; !xor_op && k < count; k++)
                        if (dcr_dtype_bits_isnan(dt, dcr_dtype_load_bits(dt, val + k * es)))
                            assert_memory_equal(got + idx[k] * es, base + idx[k] * es, es);
                }
                free(base);
                free(val);
                free(want);
                free(got);
                free(scratch);
                free(idx);
            }
}

/* The combine kernel over strided regions under the harness. */
static void combine_on_harness(void *arg, dcr_dtype_t dt, char *dst, const char *src,
                               const suite_region_case_t *c, const uint8_t *act, int op)
{
    size_t es = dcr_dtype_size(dt);
    harness_combine(dst + c->origin * (int64_t)es, src, (int)dt, c->r, act, op);
}

static void test_harness_combine_regions(void **state)
{
    suite_combine_regions(0xC1, combine_on_harness, NULL);
}

/* ---- conformance, "cpu" backend ---- */

static int open_cpu(void **state)
{
    dcr_device_t *d = NULL;
    if (dcr_device_create("cpu", &d) != DCR_OK) return -1;
    *state = d;
    return 0;
}

static int close_dev(void **state)
{
    dcr_device_destroy(*state);
    return 0;
}

static void test_cpu_memory(void **state)
{
    conf_memory(*state);
}

static void test_cpu_detect(void **state)
{
    conf_detect(*state);
}

static void test_cpu_apply(void **state)
{
    conf_apply(*state);
}

static void test_cpu_combine_regions(void **state)
{
    conf_combine_regions(*state);
}

/* The convert kernel under the harness, every dtype pair. */
static void convert_on_harness(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                               const char *src, size_t elems, dcr_device_region_t r, int64_t origin,
                               uint32_t events[2])
{
    (void)arg;
    (void)elems;
    harness_convert(dst + origin * (int64_t)dcr_dtype_size(to), (int)to, src, (int)from, r, NULL,
                    DCR_DK_ASSIGN, DCR_DK_T_NONE, events);
}

static void test_harness_convert(void **state)
{
    suite_convert(0xC7, convert_on_harness, NULL);
}

/* The transforms of the closed set under the harness (the device's work) and
 * exp's arithmetic against the exact value: within 2 ulp where the result
 * is normal, within 2 units of the least subnormal below, exact specials
 * (overflow to inf, underflow to 0, exp(0) = 1, NaN kept with its payload,
 * quieted). */
static void map_on_harness(void *arg, dcr_dtype_t to, dcr_dtype_t from, int transform, char *dst,
                           const char *src, size_t elems, uint32_t events[2])
{
    (void)arg;
    harness_convert(dst, (int)to, src, (int)from, dcr_device_region_flat(elems), NULL,
                    DCR_DK_ASSIGN, transform, events);
}

static void overwrite_on_harness(void *arg, dcr_dtype_t to, dcr_dtype_t from, char *dst,
                                 const char *src, size_t n, const uint8_t *active)
{
    (void)arg;
    harness_convert(dst, (int)to, src, (int)from, dcr_device_region_flat(n), active,
                    DCR_DK_OVERWRITE, DCR_DK_T_NONE, NULL);
}

static void test_harness_map(void **state)
{
    suite_convert_overwrite(0xC9, overwrite_on_harness, NULL);
    suite_map(0xC8, map_on_harness, NULL);
    dcr_rng_t rng;
    dcr_rng_seed(&rng, g_seed ^ 0xE8);
    for (int k = 0; k < 2000000; k++) {
        float x = (float)(dcr_rng_uniform(&rng) * 220.0 - 110.0);
        if (k < 256) x = (float)(k - 128) * 0.8125f;
        double want = exp((double)x);
        float got = dcr_dk_f32(dcr_dk_exp_bits(dcr_dk_bits(x)));
        if (want > 3.4028234663852886e38) {
            assert_true(isinf(got) && got > 0);
            continue;
        }
        double ulp = want >= 1.1754943508222875e-38 ? ldexp(1.0, ilogb(want) - 23) : 0x1p-149;
        if (fabs((double)got - want) > 2 * ulp)
            fail_msg("exp(%.9g) = %.9g, exact %.17g (%.2f ulp)", (double)x, (double)got, want,
                     fabs((double)got - want) / ulp);
    }
    assert_int_equal(dcr_dk_exp_bits(0), 0x3F800000u);                  /* exp(0) = 1 */
    assert_int_equal(dcr_dk_exp_bits(0x80000000u), 0x3F800000u);        /* exp(-0) = 1 */
    assert_int_equal(dcr_dk_exp_bits(0x7F800000u), 0x7F800000u);        /* exp(inf) */
    assert_int_equal(dcr_dk_exp_bits(0xFF800000u), 0u);                 /* exp(-inf) */
    assert_int_equal(dcr_dk_exp_bits(dcr_dk_bits(89.0f)), 0x7F800000u); /* overflow */
    assert_int_equal(dcr_dk_exp_bits(dcr_dk_bits(-105.0f)), 0u);        /* underflow */
    assert_int_equal(dcr_dk_exp_bits(0x7F800123u), 0x7FC00123u);        /* NaN, quieted */
    assert_int_equal(dcr_dk_transform(DCR_DK_T_NEG_EXP, 0), 0xBF800000u);
    assert_int_equal(dcr_dk_transform(DCR_DK_T_NEG, 0x7FC00001u), 0xFFC00001u);
}

static void test_cpu_convert(void **state)
{
    conf_convert(*state);
}

static void test_cpu_errors(void **state)
{
    conf_errors(*state);
}

int main(void)
{
    g_seed = testkit_seed(0xDE71CE);
    printf("# seed %llu (DCR_TEST_SEED replays)\n", (unsigned long long)g_seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_harness_nan_rules),
        cmocka_unit_test(test_harness_detect),
        cmocka_unit_test(test_harness_detect_many_blocks),
        cmocka_unit_test(test_harness_detect_each_position),
        cmocka_unit_test(test_harness_apply),
        cmocka_unit_test(test_harness_combine_regions),
        cmocka_unit_test(test_harness_convert),
        cmocka_unit_test(test_harness_map),
        cmocka_unit_test_setup_teardown(test_cpu_memory, open_cpu, close_dev),
        cmocka_unit_test_setup_teardown(test_cpu_detect, open_cpu, close_dev),
        cmocka_unit_test_setup_teardown(test_cpu_apply, open_cpu, close_dev),
        cmocka_unit_test_setup_teardown(test_cpu_combine_regions, open_cpu, close_dev),
        cmocka_unit_test_setup_teardown(test_cpu_convert, open_cpu, close_dev),
        cmocka_unit_test_setup_teardown(test_cpu_errors, open_cpu, close_dev),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
