/* ctest-labels: unit */
/* Engine threads: the name a thread gets, fn's return value, and the CPU
 * its role is charged once it ends (and never the caller's). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "dcr/thread.h"

typedef struct spin {
    double seconds; /* CPU to burn */
    char name[16];  /* the name the thread saw for itself */
} spin_t;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *spin_main(void *arg)
{
    spin_t *s = arg;
    pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
    volatile uint64_t x = 0;
    while (thread_cpu_s() < s->seconds) x++;
    return arg;
}

static void test_name_and_cpu(void **state)
{
    (void)state;
    double before[DCR_THREAD_ROLES], after[DCR_THREAD_ROLES];
    dcr_thread_cpu(before);
    spin_t s = {0.05, ""};
    pthread_t t;
    assert_int_equal(dcr_thread_start(&t, DCR_THREAD_NODE, spin_main, &s, "dcr-test-%d", 1234567),
                     0);
    void *ret = NULL;
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_ptr_equal(ret, &s); /* fn's return value comes back */
    /* Cut to Linux's 15 characters. */
    assert_string_equal(s.name, "dcr-test-123456");
    dcr_thread_cpu(after);
    double node = after[DCR_THREAD_NODE] - before[DCR_THREAD_NODE];
    assert_true(node >= 0.05 && node < 1.0);
    assert_true(after[DCR_THREAD_OWNER] == before[DCR_THREAD_OWNER]);
    assert_true(after[DCR_THREAD_TRANSPORT] == before[DCR_THREAD_TRANSPORT]);
}

/* The caller's own CPU is never charged: only threads started here are. */
static void test_caller_not_charged(void **state)
{
    (void)state;
    double before[DCR_THREAD_ROLES], after[DCR_THREAD_ROLES];
    dcr_thread_cpu(before);
    spin_t s = {thread_cpu_s() + 0.02, ""};
    spin_main(&s);
    dcr_thread_cpu(after);
    for (int r = 0; r < DCR_THREAD_ROLES; r++) assert_true(after[r] == before[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_and_cpu),
        cmocka_unit_test(test_caller_not_charged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
