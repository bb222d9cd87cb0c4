/* ctest-labels: unit */
/* The registry of backend ops tables that every backend family shares:
 * built-in tables first in their order, registered ones appended in
 * registration order, a table again is a no-op, a taken name or a full
 * registry refused, lookups by name, concurrent registration. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/core-internal.h"

/* An ops table of some family: the common header first (dcr/ops.h), where
 * the registry reads the name. */
typedef struct toy_ops {
    dcr_ops_header_t hdr;
    int slot;
} toy_ops_t;

static const toy_ops_t builtin_a = {{1, "a", NULL}, 0}, builtin_b = {{1, "b", NULL}, 0};
static const void *const builtin[] = {&builtin_a, &builtin_b};

static void test_order_find_and_duplicates(void **state)
{
    (void)state;
    static dcr__registry_t r = DCR__REGISTRY_INIT("toy backend", builtin, 2);
    assert_int_equal(dcr__registry_count(&r), 2);
    assert_ptr_equal(dcr__registry_at(&r, 0), &builtin_a);
    assert_ptr_equal(dcr__registry_at(&r, 1), &builtin_b);
    assert_null(dcr__registry_at(&r, 2));
    static const toy_ops_t c = {{1, "c", NULL}, 0}, other_a = {{1, "a", NULL}, 0},
                           c_again = {{2, "c", NULL}, 0};
    assert_int_equal(dcr__registry_add(&r, &c), DCR_OK);
    assert_int_equal(dcr__registry_add(&r, &c), DCR_OK); /* the same table: no-op */
    assert_int_equal(dcr__registry_count(&r), 3);
    assert_int_equal(dcr__registry_add(&r, &other_a), DCR_EINVAL); /* built-in name */
    assert_string_equal(dcr_error_detail(), "toy backend a is already registered");
    assert_int_equal(dcr__registry_add(&r, &c_again), DCR_EINVAL); /* registered name */
    assert_int_equal(dcr__registry_count(&r), 3);
    assert_ptr_equal(dcr__registry_at(&r, 2), &c);
    assert_ptr_equal(dcr__registry_find(&r, "b"), &builtin_b);
    assert_ptr_equal(dcr__registry_find(&r, "c"), &c);
    assert_null(dcr__registry_find(&r, "d"));
    assert_null(dcr__registry_find(&r, NULL));
    assert_int_equal(dcr__registry_not_found(&r, "d"), DCR_ENOTFOUND);
    assert_string_equal(dcr_error_detail(), "toy backend 'd' does not exist (known: a, b, c)");
}

static void test_full(void **state)
{
    (void)state;
    static dcr__registry_t r = DCR__REGISTRY_INIT("toy backend", NULL, 0);
    static toy_ops_t t[DCR__REGISTRY_MAX + 1];
    static char names[DCR__REGISTRY_MAX + 1][16];
    for (int i = 0; i <= DCR__REGISTRY_MAX; i++) {
        snprintf(names[i], sizeof names[i], "t%d", i);
        t[i] = (toy_ops_t){{1, names[i], NULL}, 0};
    }
    for (int i = 0; i < DCR__REGISTRY_MAX; i++)
        assert_int_equal(dcr__registry_add(&r, &t[i]), DCR_OK);
    assert_int_equal(dcr__registry_add(&r, &t[DCR__REGISTRY_MAX]), DCR_EINVAL);
    assert_string_equal(dcr_error_detail(), "toy backend t64: registry full (64 backends)");
    assert_int_equal(dcr__registry_add(&r, &t[3]), DCR_OK); /* still a no-op when full */
    assert_int_equal(dcr__registry_count(&r), DCR__REGISTRY_MAX);
    assert_ptr_equal(dcr__registry_find(&r, "t63"), &t[63]);
}

/* Threads registering the same names at once: each name lands once, and
 * exactly one thread's table per name wins. */
#define THREADS 8
#define NAMES   6
static dcr__registry_t g_race = DCR__REGISTRY_INIT("toy backend", NULL, 0);
static toy_ops_t g_tables[THREADS][NAMES];
static const char *const g_names[NAMES] = {"n0", "n1", "n2", "n3", "n4", "n5"};
static int g_ok[THREADS];

static void *race_main(void *arg)
{
    int k = (int)(intptr_t)arg;
    for (int i = 0; i < NAMES; i++) {
        g_tables[k][i] = (toy_ops_t){{1, g_names[i], NULL}, 0};
        g_ok[k] += dcr__registry_add(&g_race, &g_tables[k][i]) == DCR_OK;
    }
    return NULL;
}

static void test_concurrent_register(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (int k = 0; k < THREADS; k++) pthread_create(&th[k], NULL, race_main, (void *)(intptr_t)k);
    for (int k = 0; k < THREADS; k++) pthread_join(th[k], NULL);
    int ok = 0;
    for (int k = 0; k < THREADS; k++) ok += g_ok[k];
    assert_int_equal(ok, NAMES);
    assert_int_equal(dcr__registry_count(&g_race), NAMES);
    for (int i = 0; i < NAMES; i++) assert_non_null(dcr__registry_find(&g_race, g_names[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_find_and_duplicates),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_concurrent_register),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
