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
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "testfiles.h"

#include "dcr/codec.h"
#include "workloads/harness/construct_bench.h"

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
    spec.mapping = DCR_MAPPING_PAPER; /* overwrite records too: several payloads per owner */
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

/* Reads path whole into buf (cap bytes); the length, or -1 when absent. */
static long slurp(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return (long)n;
}

typedef struct submit_arg {
    dcr_dir_sink_t *d;
    int owner;
} submit_arg_t;

/* One owner's sender: three payloads whose bytes name owner and id. */
static void *submit_three(void *arg)
{
    submit_arg_t *a = arg;
    for (uint64_t id = 0; id < 3; id++) {
        uint8_t buf[5] = {'P', (uint8_t)a->owner, (uint8_t)id, 0xA5, 0x5A};
        if (a->d->sink.submit(a->d->sink.ctx, a->owner, id, buf, sizeof buf) != DCR_OK)
            return (void *)1;
    }
    return NULL;
}

/* The --keep-payloads sink touches no file while the senders run (the
 * timed window), then writes each payload, byte for byte, at flush. */
static void test_dir_sink_writes_after_flush(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "dir-sink"));
    dcr_dir_sink_t d;
    dcr_dir_sink_init(&d, dir, 9);
    pthread_t th[2];
    submit_arg_t args[2] = {{&d, 0}, {&d, 1}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, submit_three, &args[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        assert_null(rv);
    }
    char path[512];
    uint8_t got[64];
    snprintf(path, sizeof(path), "%s/tau9-owner1-2.dcrp", dir);
    assert_int_equal(slurp(path, got, sizeof got), -1); /* nothing written yet */
    size_t written = 0;
    assert_int_equal(dcr_dir_sink_flush(&d, &written), DCR_OK);
    assert_int_equal(written, 6);
    for (int owner = 0; owner < 2; owner++)
        for (int id = 0; id < 3; id++) {
            snprintf(path, sizeof(path), "%s/tau9-owner%d-%d.dcrp", dir, owner, id);
            const uint8_t want[5] = {'P', (uint8_t)owner, (uint8_t)id, 0xA5, 0x5A};
            assert_int_equal(slurp(path, got, sizeof got), 5);
            assert_memory_equal(got, want, 5);
            unlink(path);
        }
    /* Flushed payloads are forgotten: a second flush writes nothing. */
    assert_int_equal(dcr_dir_sink_flush(&d, &written), DCR_OK);
    assert_int_equal(written, 0);
    /* A folder that is gone fails the flush with its path. */
    assert_int_equal(rmdir(dir), 0);
    uint8_t one = 1;
    assert_int_equal(d.sink.submit(d.sink.ctx, 0, 7, &one, 1), DCR_OK);
    assert_int_not_equal(dcr_dir_sink_flush(&d, &written), DCR_OK);
    assert_non_null(strstr(dcr_error_detail(), "tau9-owner0-7.dcrp"));
    assert_int_equal(written, 0);
    dcr_dir_sink_fini(&d);
    dcr_dir_sink_fini(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_shuffle_rounds),
        cmocka_unit_test(test_dir_sink_writes_after_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
