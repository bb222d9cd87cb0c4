/* ctest-labels: unit
 *
 * The construction bench's shuffle comparison and rounds: every payload the
 * sink sees carries the shuffle flag its configuration asked for (read back
 * from the payload header, not from the bench's own bookkeeping), each
 * configuration ran once per round, and the shuffle changed no record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>

#include <cmocka.h>

#include "dcr/codec.h"
#include "workloads/construct_bench.h"

typedef struct flag_count {
    pthread_mutex_t lock;
    int64_t shuffled, plain;
} flag_count_t;

static dcr_status_t count_flags(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    flag_count_t *f = ctx;
    dcr_payload_header_t h;
    DCR_CHECK(dcr_payload_peek(buf, len, true, &h));
    pthread_mutex_lock(&f->lock);
    if (h.flags & DCR_CODEC_FLAG_SHUFFLE)
        f->shuffled++;
    else
        f->plain++;
    pthread_mutex_unlock(&f->lock);
    return DCR_OK;
}

static void test_compare_shuffle_rounds(void **state)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    spec.scale = 64;
    spec.layers = 2;
    dcr_scenario_t *sc;
    if (dcr_scenario_create(&spec, &sc) != DCR_OK) fail_msg("%s", dcr_error_detail());
    flag_count_t f = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    dcr_payload_sink_t sink = {count_flags, &f};
    for (int requested = 0; requested < 2; requested++) {
        f.shuffled = f.plain = 0;
        dcr_construct_bench_t b = {.change_rate = 0.05,
                                   .seed = 7,
                                   .cfg = dcr_construct_config_default(),
                                   .sink = &sink,
                                   .rounds = 3,
                                   .compare_shuffle = true};
        b.cfg.shuffle = requested;
        b.cfg.bucket_bytes = 1 << 16; /* several payloads per owner */
        const dcr_construct_mode_t modes[] = {DCR_MODE_X, DCR_MODE_F};
        dcr_construct_bench_result_t res[2];
        if (dcr_construct_bench_run(sc, &b, modes, 2, res) != DCR_OK)
            fail_msg("%s", dcr_error_detail());
        int64_t asked = 0, other = 0;
        for (int m = 0; m < 2; m++) {
            const dcr_construct_stats_t *s = &res[m].stats, *o = &res[m].stats_other;
            assert_true(s->payloads > 1);
            assert_int_equal(s->records, o->records);
            assert_int_equal(s->changed_elements, o->changed_elements);
            assert_int_equal(s->raw_changed_value_bytes, o->raw_changed_value_bytes);
            assert_int_equal(s->body_raw_bytes, o->body_raw_bytes);
            assert_int_equal(s->payloads, o->payloads);
            asked += s->payloads;
            other += o->payloads;
        }
        /* Three rounds: every configuration's payloads reached the sink three times. */
        assert_int_equal(requested ? f.shuffled : f.plain, 3 * asked);
        assert_int_equal(requested ? f.plain : f.shuffled, 3 * other);
    }
    dcr_scenario_destroy(sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_shuffle_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
