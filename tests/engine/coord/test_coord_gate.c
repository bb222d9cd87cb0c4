/* ctest-labels: unit
 *
 * The request gates on their own: a reader gets the bound receiver only
 * while its slot is open; closing waits for the readers inside; operations
 * of an attempt older than the latest announced one are ignored; a dirty
 * slot opens only when the opener vouches for it; a waiting reader wakes
 * when its gate opens; a dead slot waits for its readers, then stays closed
 * whatever is vouched until a receiver is bound again. The gate never dereferences receivers, so
 * tokens stand in for them. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "dcr/coord.h"

static int g_tokens[4];
#define RECEIVER(i) ((dcr_receiver_t *)&g_tokens[i])

static dcr_gate_t *gate_of(int slots)
{
    dcr_gate_t *g = NULL;
    assert_int_equal(dcr_gate_create(slots, &g), DCR_OK);
    for (int i = 0; i < slots; i++) dcr_gate_bind(g, i, RECEIVER(i));
    return g;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_enter_open_closed_and_bounds(void **state)
{
    (void)state;
    dcr_gate_t *none = NULL;
    assert_int_equal(dcr_gate_create(0, &none), DCR_EINVAL);
    assert_null(none);
    dcr_gate_destroy(NULL);
    dcr_gate_t *g = NULL;
    assert_int_equal(dcr_gate_create(2, &g), DCR_OK);
    assert_int_equal(dcr_gate_slots(g), 2);
    assert_null(dcr_gate_enter(g, 0, 0)); /* open, but nothing bound yet */
    dcr_gate_bind(g, 0, RECEIVER(0));
    assert_ptr_equal(dcr_gate_enter(g, 0, 0), RECEIVER(0));
    dcr_gate_leave(g, 0);
    assert_null(dcr_gate_enter(g, 2, 0));
    assert_null(dcr_gate_enter(g, -1, 0));
    assert_true(dcr_gate_close(g, 0, 1));
    assert_false(dcr_gate_is_open(g, 0));
    assert_null(dcr_gate_enter(g, 0, 0));
    assert_null(dcr_gate_enter(g, 0, 30)); /* stays closed for the whole wait */
    assert_true(dcr_gate_open(g, 0, 1, false));
    assert_ptr_equal(dcr_gate_enter(g, 0, 0), RECEIVER(0));
    dcr_gate_leave(g, 0);
    dcr_gate_destroy(g);
}

/* A replaced attempt's gate operations do nothing; tau 0 (membership
 * changes between attempts) always acts. */
static void test_operations_fenced_by_tau(void **state)
{
    (void)state;
    dcr_gate_t *g = gate_of(2);
    dcr_gate_announce(g, 7);
    dcr_gate_announce(g, 5); /* never lowers */
    assert_false(dcr_gate_close(g, 0, 6));
    assert_true(dcr_gate_is_open(g, 0));
    assert_true(dcr_gate_close(g, 0, 7));
    assert_false(dcr_gate_open(g, 0, 6, true));
    assert_false(dcr_gate_is_open(g, 0));
    assert_true(dcr_gate_open(g, 0, 8, true));
    assert_true(dcr_gate_close(g, 1, 0));
    assert_true(dcr_gate_open(g, 1, 0, false));
    dcr_gate_destroy(g);
}

/* A receiver holding writes of an uncommitted attempt serves nothing until
 * a commit or a restore vouches for it. */
static void test_dirty_slot_needs_a_voucher(void **state)
{
    (void)state;
    dcr_gate_t *g = gate_of(1);
    dcr_gate_announce(g, 3);
    assert_true(dcr_gate_close(g, 0, 3));
    dcr_gate_mark_dirty(g, 0);
    assert_true(dcr_gate_dirty(g, 0));
    assert_false(dcr_gate_open(g, 0, 3, false));
    assert_false(dcr_gate_is_open(g, 0));
    assert_false(dcr_gate_open(g, 0, 2, true)); /* a stale voucher counts for nothing */
    assert_true(dcr_gate_dirty(g, 0));
    assert_true(dcr_gate_open(g, 0, 3, true));
    assert_false(dcr_gate_dirty(g, 0));
    dcr_gate_destroy(g);
}

typedef struct holder {
    dcr_gate_t *g;
    dcr_receiver_t *got;
    atomic_int inside, left;
} holder_t;

/* A request in flight: enters, holds the gate a while, leaves. (No cmocka
 * assertion off the main thread.) */
static void *hold(void *arg)
{
    holder_t *h = arg;
    h->got = dcr_gate_enter(h->g, 0, -1);
    atomic_store(&h->inside, 1);
    sleep_ms(100);
    atomic_store(&h->left, 1);
    if (h->got) dcr_gate_leave(h->g, 0);
    return NULL;
}

static void test_close_waits_for_readers(void **state)
{
    (void)state;
    holder_t h = {gate_of(1), NULL, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold, &h), 0);
    while (!atomic_load(&h.inside)) sleep_ms(1);
    assert_ptr_equal(h.got, RECEIVER(0));
    assert_true(dcr_gate_close(h.g, 0, 1));
    assert_int_equal(atomic_load(&h.left), 1); /* nothing is written under a reader */
    pthread_join(t, NULL);
    dcr_gate_destroy(h.g);
}

typedef struct waiter {
    dcr_gate_t *g;
    dcr_receiver_t *got;
} waiter_t;

static void *wait_for_gate(void *arg)
{
    waiter_t *w = arg;
    w->got = dcr_gate_enter(w->g, 0, -1);
    if (w->got) dcr_gate_leave(w->g, 0);
    return NULL;
}

static void test_waiting_reader_wakes_on_open(void **state)
{
    (void)state;
    waiter_t w = {gate_of(1), NULL};
    assert_true(dcr_gate_close(w.g, 0, 1));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_gate, &w), 0);
    sleep_ms(50);
    dcr_gate_bind(w.g, 0, RECEIVER(3)); /* a restart rebinds while closed */
    assert_true(dcr_gate_open(w.g, 0, 1, true));
    pthread_join(t, NULL);
    assert_ptr_equal(w.got, RECEIVER(3));
    dcr_gate_destroy(w.g);
}

/* A receiver dies while a request reads it: the kill waits for the reader,
 * and no open, vouched or of a newer attempt, serves the dead receiver; a
 * restored receiver bound to the slot serves again. */
static void test_dead_slot_stays_closed_until_rebound(void **state)
{
    (void)state;
    holder_t h = {gate_of(2), NULL, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold, &h), 0);
    while (!atomic_load(&h.inside)) sleep_ms(1);
    assert_false(dcr_gate_dead(h.g, 0));
    dcr_gate_kill(h.g, 0);
    assert_int_equal(atomic_load(&h.left), 1);
    pthread_join(t, NULL);
    assert_true(dcr_gate_dead(h.g, 0));
    assert_false(dcr_gate_dead(h.g, 1)); /* one slot's death is its own */
    assert_false(dcr_gate_is_open(h.g, 0));
    dcr_gate_announce(h.g, 5);
    assert_false(dcr_gate_open(h.g, 0, 5, true));
    assert_false(dcr_gate_open(h.g, 0, 0, true));
    assert_null(dcr_gate_enter(h.g, 0, 0));
    assert_true(dcr_gate_is_open(h.g, 1));
    dcr_gate_bind(h.g, 0, RECEIVER(0)); /* a new coordinator over the same receivers */
    assert_true(dcr_gate_dead(h.g, 0));
    dcr_gate_bind(h.g, 0, RECEIVER(2)); /* the restore */
    assert_false(dcr_gate_dead(h.g, 0));
    assert_true(dcr_gate_open(h.g, 0, 0, true));
    assert_ptr_equal(dcr_gate_enter(h.g, 0, 0), RECEIVER(2));
    dcr_gate_leave(h.g, 0);
    assert_false(dcr_gate_dead(h.g, -1)); /* out of range: nothing, no crash */
    dcr_gate_kill(h.g, 7);
    dcr_gate_destroy(h.g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enter_open_closed_and_bounds),
        cmocka_unit_test(test_operations_fenced_by_tau),
        cmocka_unit_test(test_dirty_slot_needs_a_voucher),
        cmocka_unit_test(test_close_waits_for_readers),
        cmocka_unit_test(test_waiting_reader_wakes_on_open),
        cmocka_unit_test(test_dead_slot_stays_closed_until_rebound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
