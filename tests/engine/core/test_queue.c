/* ctest-labels: unit */
/* Bounded MPMC queue: FIFO order, timeouts, back-pressure, close semantics,
 * and exactly-once delivery with several producers and consumers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/queue.h"

#define ITEM(x) ((void *)(uintptr_t)(x))

static void test_create_invalid(void **state)
{
    (void)state;
    dcr_queue_t *q = (dcr_queue_t *)&q;
    assert_int_equal(dcr_queue_create(0, &q), DCR_EINVAL);
    assert_ptr_equal(q, (dcr_queue_t *)&q);
    assert_int_equal(dcr_queue_create(4, NULL), DCR_EINVAL);
    dcr_queue_destroy(NULL);
}

static void test_fifo_and_wraparound(void **state)
{
    (void)state;
    dcr_queue_t *q = NULL;
    assert_int_equal(dcr_queue_create(3, &q), DCR_OK);
    uintptr_t next_in = 1, next_out = 1;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 2; i++) assert_int_equal(dcr_queue_push(q, ITEM(next_in++), 0), DCR_OK);
        assert_int_equal(dcr_queue_size(q), 2);
        for (int i = 0; i < 2; i++) {
            void *it = NULL;
            assert_int_equal(dcr_queue_pop(q, 0, &it), DCR_OK);
            assert_ptr_equal(it, ITEM(next_out++));
        }
    }
    /* NULL is a valid item. */
    assert_int_equal(dcr_queue_push(q, NULL, 0), DCR_OK);
    void *it = ITEM(5);
    assert_int_equal(dcr_queue_pop(q, 0, &it), DCR_OK);
    assert_null(it);
    dcr_queue_destroy(q);
}

static void test_timeouts(void **state)
{
    (void)state;
    dcr_queue_t *q = NULL;
    assert_int_equal(dcr_queue_create(2, &q), DCR_OK);
    void *it = ITEM(77);
    assert_int_equal(dcr_queue_pop(q, 0, &it), DCR_ETIMEOUT);
    assert_ptr_equal(it, ITEM(77)); /* untouched on failure */

    uint64_t t0 = dcr_clock_ns();
    assert_int_equal(dcr_queue_pop(q, 50, &it), DCR_ETIMEOUT);
    uint64_t waited = dcr_clock_ns() - t0;
    assert_true(waited >= 49000000ull && waited < 2000000000ull);

    /* Back-pressure: a full queue makes push wait, then time out. */
    assert_int_equal(dcr_queue_push(q, ITEM(1), 0), DCR_OK);
    assert_int_equal(dcr_queue_push(q, ITEM(2), 0), DCR_OK);
    assert_int_equal(dcr_queue_push(q, ITEM(3), 0), DCR_ETIMEOUT);
    t0 = dcr_clock_ns();
    assert_int_equal(dcr_queue_push(q, ITEM(3), 50), DCR_ETIMEOUT);
    waited = dcr_clock_ns() - t0;
    assert_true(waited >= 49000000ull && waited < 2000000000ull);
    assert_int_equal(dcr_queue_size(q), 2);
    dcr_queue_destroy(q);
}

typedef struct {
    dcr_queue_t *q;
    int timeout_ms;
    dcr_status_t st;
    void *item;
} blocked_t;

static void *blocked_pop(void *arg)
{
    blocked_t *b = arg;
    b->st = dcr_queue_pop(b->q, b->timeout_ms, &b->item);
    return NULL;
}

static void *blocked_push(void *arg)
{
    blocked_t *b = arg;
    b->st = dcr_queue_push(b->q, b->item, b->timeout_ms);
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A producer blocked on a full queue proceeds as soon as a consumer pops. */
static void test_blocked_push_resumes(void **state)
{
    (void)state;
    dcr_queue_t *q = NULL;
    assert_int_equal(dcr_queue_create(1, &q), DCR_OK);
    assert_int_equal(dcr_queue_push(q, ITEM(1), -1), DCR_OK);
    blocked_t b = {q, -1, DCR_EFATAL, ITEM(2)};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocked_push, &b), 0);
    sleep_ms(20);
    void *it = NULL;
    assert_int_equal(dcr_queue_pop(q, -1, &it), DCR_OK);
    assert_ptr_equal(it, ITEM(1));
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(b.st, DCR_OK);
    assert_int_equal(dcr_queue_pop(q, -1, &it), DCR_OK);
    assert_ptr_equal(it, ITEM(2));
    dcr_queue_destroy(q);
}

static void test_close_semantics(void **state)
{
    (void)state;
    dcr_queue_t *q = NULL;
    assert_int_equal(dcr_queue_create(4, &q), DCR_OK);

    /* Close wakes a consumer waiting forever on an empty queue. */
    blocked_t pop = {q, -1, DCR_EFATAL, NULL};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocked_pop, &pop), 0);
    sleep_ms(20);
    dcr_queue_close(q);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(pop.st, DCR_ECLOSED);
    assert_int_equal(dcr_queue_push(q, ITEM(1), -1), DCR_ECLOSED);
    dcr_queue_destroy(q);

    /* Close wakes a producer waiting on a full queue; pops then drain what
     * was queued, in order, before reporting closed. */
    assert_int_equal(dcr_queue_create(2, &q), DCR_OK);
    assert_int_equal(dcr_queue_push(q, ITEM(1), -1), DCR_OK);
    assert_int_equal(dcr_queue_push(q, ITEM(2), -1), DCR_OK);
    blocked_t push = {q, -1, DCR_EFATAL, ITEM(3)};
    assert_int_equal(pthread_create(&t, NULL, blocked_push, &push), 0);
    sleep_ms(20);
    dcr_queue_close(q);
    dcr_queue_close(q); /* idempotent */
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(push.st, DCR_ECLOSED);
    void *it = NULL;
    assert_int_equal(dcr_queue_pop(q, -1, &it), DCR_OK);
    assert_ptr_equal(it, ITEM(1));
    assert_int_equal(dcr_queue_pop(q, 0, &it), DCR_OK);
    assert_ptr_equal(it, ITEM(2));
    assert_int_equal(dcr_queue_pop(q, -1, &it), DCR_ECLOSED);
    assert_int_equal(dcr_queue_pop(q, 10, &it), DCR_ECLOSED);
    assert_ptr_equal(it, ITEM(2));
    dcr_queue_destroy(q);
}

enum { PRODUCERS = 4, CONSUMERS = 4, PER_PRODUCER = 20000, CAPACITY = 8 };

typedef struct {
    dcr_queue_t *q;
    int id;
    atomic_int *seen; /* delivery count per item */
    atomic_int *max_size;
    int order_ok;
    long taken;
} worker_t;

static void *producer(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        uintptr_t item = (uintptr_t)w->id * PER_PRODUCER + (uintptr_t)i + 1;
        if (dcr_queue_push(w->q, ITEM(item), -1) != DCR_OK) w->order_ok = 0;
    }
    return NULL;
}

static void *consumer(void *arg)
{
    worker_t *w = arg;
    long last[PRODUCERS];
    for (int p = 0; p < PRODUCERS; p++) last[p] = -1;
    for (;;) {
        void *it = NULL;
        dcr_status_t st = dcr_queue_pop(w->q, -1, &it);
        if (st == DCR_ECLOSED) break;
        if (st != DCR_OK) {
            w->order_ok = 0;
            break;
        }
        int size = (int)dcr_queue_size(w->q);
        int prev = atomic_load(w->max_size);
        while (size > prev && !atomic_compare_exchange_weak(w->max_size, &prev, size)) {
        }
        long v = (long)(uintptr_t)it - 1;
        int p = (int)(v / PER_PRODUCER);
        long seq = v % PER_PRODUCER;
        /* FIFO: one consumer sees each producer's items in increasing order. */
        if (p < 0 || p >= PRODUCERS || seq <= last[p])
            w->order_ok = 0;
        else
            last[p] = seq;
        atomic_fetch_add(&w->seen[v], 1);
        w->taken++;
    }
    return NULL;
}

static void test_mpmc_exactly_once(void **state)
{
    (void)state;
    dcr_queue_t *q = NULL;
    assert_int_equal(dcr_queue_create(CAPACITY, &q), DCR_OK);
    atomic_int *seen = calloc(PRODUCERS * PER_PRODUCER, sizeof *seen);
    atomic_int max_size = 0;
    worker_t prod[PRODUCERS], cons[CONSUMERS];
    pthread_t pt[PRODUCERS], ct[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) {
        cons[i] = (worker_t){q, i, seen, &max_size, 1, 0};
        assert_int_equal(pthread_create(&ct[i], NULL, consumer, &cons[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        prod[i] = (worker_t){q, i, seen, &max_size, 1, 0};
        assert_int_equal(pthread_create(&pt[i], NULL, producer, &prod[i]), 0);
    }
    for (int i = 0; i < PRODUCERS; i++) assert_int_equal(pthread_join(pt[i], NULL), 0);
    dcr_queue_close(q);
    long total = 0;
    for (int i = 0; i < CONSUMERS; i++) {
        assert_int_equal(pthread_join(ct[i], NULL), 0);
        assert_true(cons[i].order_ok);
        total += cons[i].taken;
    }
    for (int i = 0; i < PRODUCERS; i++) assert_true(prod[i].order_ok);
    assert_int_equal(total, PRODUCERS * PER_PRODUCER);
    for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++) assert_int_equal(atomic_load(&seen[i]), 1);
    assert_true(atomic_load(&max_size) <= CAPACITY);
    assert_int_equal(dcr_queue_size(q), 0);
    free(seen);
    dcr_queue_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_invalid),  cmocka_unit_test(test_fifo_and_wraparound),
        cmocka_unit_test(test_timeouts),        cmocka_unit_test(test_blocked_push_resumes),
        cmocka_unit_test(test_close_semantics), cmocka_unit_test(test_mpmc_exactly_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
