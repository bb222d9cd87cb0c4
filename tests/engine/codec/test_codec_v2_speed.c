/* ctest-labels: slow */
/* Encode and decode throughput of format version 2 against version 1 on
 * changes shaped like a real training step's (about 0.7% of a tensor's
 * elements, geometric gaps, skewed XOR masks: 0x1, 0x3, 0x7, ... as small
 * AdamW updates flip the low mantissa bits), one run, both versions side by
 * side. Prints records per second and body bytes; checks that both versions
 * round-trip and that version 2's payload is the smaller. Records and
 * repeats: DCR_CODEC_SPEED_RECORDS (default 2,000,000), best of 3. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <time.h>

#include "codec_test_util.h"
#include "dcr/codec.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

typedef struct timing {
    double enc_s, dec_s;
    size_t bytes, raw;
} timing_t;

static void measure(unsigned version, const dcr_codec_item_t *items, size_t nitems, size_t records,
                    timing_t *t)
{
    dcr_encoder_t *enc;
    dcr_payload_t *p;
    assert_int_equal(dcr_encoder_create(&enc), DCR_OK);
    assert_int_equal(dcr_encoder_set_max_version(enc, version), DCR_OK);
    assert_int_equal(dcr_payload_create(&p), DCR_OK);
    dcr_encode_params_t par = {.tau = 1, .payload_id = 1, .level = 1, .shuffle = true};
    t->enc_s = t->dec_s = INFINITY;
    for (int r = 0; r < 3; r++) {
        const uint8_t *buf;
        size_t len;
        double t0 = now_s();
        for (size_t i = 0; i < nitems; i++) assert_int_equal(dcr_encoder_add(enc, &items[i]), 0);
        assert_int_equal(dcr_encoder_finish(enc, &par, &buf, &len), DCR_OK);
        double t1 = now_s();
        assert_int_equal(dcr_payload_decode(p, buf, len), DCR_OK);
        double t2 = now_s();
        assert_int_equal(dcr_payload_get_header(p)->version, version);
        t->enc_s = fmin(t->enc_s, t1 - t0);
        t->dec_s = fmin(t->dec_s, t2 - t1);
        t->bytes = len;
        t->raw = (size_t)dcr_payload_get_header(p)->raw_len;
    }
    /* Every record back, bit for bit. */
    for (size_t i = 0; i < nitems; i++) {
        dcr_payload_item_t it;
        assert_int_equal(dcr_payload_item(p, i, &it), DCR_OK);
        int64_t *idx = malloc(it.count * sizeof *idx);
        uint16_t *v = malloc(it.count * 2);
        assert_int_equal(dcr_payload_item_indices(p, i, idx), DCR_OK);
        assert_int_equal(dcr_payload_item_values(p, i, v), DCR_OK);
        assert_memory_equal(idx, items[i].indices, it.count * sizeof *idx);
        assert_memory_equal(v, items[i].values, it.count * 2);
        free(idx);
        free(v);
    }
    print_message("  version %u: %zu records, body %zu B raw, payload %zu B; encode %.1f M "
                  "records/s, decode %.1f M records/s\n",
                  version, records, t->raw, t->bytes, 1e-6 * (double)records / t->enc_s,
                  1e-6 * (double)records / t->dec_s);
    dcr_payload_destroy(p);
    dcr_encoder_destroy(enc);
}

static void test_speed(void **state)
{
    (void)state;
    const char *env = getenv("DCR_CODEC_SPEED_RECORDS");
    size_t records = env ? (size_t)strtoull(env, NULL, 10) : 2000000;
    if (records < 1000) records = 1000;
    /* Tensors of 2^20 elements at 0.7%: about 7,300 records each. */
    enum { NUMEL = 1 << 20 };
    size_t per = 7300, nitems = (records + per - 1) / per;
    int64_t shape[2] = {1024, 1024};
    dcr_codec_item_t *items = calloc(nitems, sizeof *items);
    char(*names)[32] = calloc(nitems, sizeof *names);
    size_t total = 0;
    for (size_t i = 0; i < nitems; i++) {
        int64_t *idx = malloc(per * sizeof *idx);
        uint16_t *v = malloc(per * 2);
        size_t c = 0;
        int64_t at = 0;
        /* Geometric gaps of mean 1/0.007: a Bernoulli(0.007) walk. */
        while (c < per) {
            double u = ((double)(rng() >> 11) + 0.5) / 9007199254740992.0;
            at += 1 + (int64_t)floor(log(u) / log(1 - 0.007));
            if (at >= NUMEL) break;
            idx[c] = at;
            unsigned k = 1;
            while (k < 12 && (rng() & 1)) k++;
            v[c++] = (uint16_t)((1u << k) - 1);
        }
        snprintf(names[i], sizeof names[i], "layers.%zu.w", i);
        items[i] =
            (dcr_codec_item_t){names[i], 2, shape, DCR_DTYPE_BF16, DCR_ENCODING_XOR, c, idx, 0, v};
        total += c;
    }
    timing_t v1, v2;
    measure(DCR_CODEC_VERSION_1, items, nitems, total, &v1);
    measure(DCR_CODEC_VERSION_2, items, nitems, total, &v2);
    print_message("  version 2 / version 1: payload %.3f, encode time %.2f, decode time %.2f\n",
                  (double)v2.bytes / (double)v1.bytes, v2.enc_s / v1.enc_s, v2.dec_s / v1.dec_s);
    assert_true(v2.bytes < v1.bytes);
    for (size_t i = 0; i < nitems; i++) {
        free((void *)items[i].indices);
        free((void *)items[i].values);
    }
    free(items);
    free(names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_speed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
