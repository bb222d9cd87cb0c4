/* ctest-labels: unit */
/* Engine threads: the name a thread gets, fn's return value, the CPU its
 * role is charged once it ends (and never the caller's), and a status
 * thread's result and detail at the join. */
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

typedef struct job {
    int fail; /* 0: succeed; otherwise the payload number to fail on */
    char name[16];
} job_t;

static dcr_status_t job_main(void *arg)
{
    job_t *j = arg;
    pthread_getname_np(pthread_self(), j->name, sizeof(j->name));
    if (j->fail) return dcr_error_set(DCR_EPAYLOAD, "payload %d: bad item", j->fail);
    dcr_error_set(DCR_ETIMEOUT, "a stale detail of a failure that was handled");
    return DCR_OK;
}

/* A status thread's result and detail reach the joiner; a success carries
 * no detail over (the worker's handled failure stays with it); joining
 * twice, or a thread never started, is DCR_OK. */
static void test_status_crosses_join(void **state)
{
    (void)state;
    job_t bad = {7, ""}, good = {0, ""};
    dcr_thread_t tb = {0}, tg = {0}, never = {0};
    assert_int_equal(dcr_thread_run(&tb, DCR_THREAD_NODE, job_main, &bad, "dcr-job-%d", 1), 0);
    assert_int_equal(dcr_thread_run(&tg, DCR_THREAD_NODE, job_main, &good, "dcr-job-%d", 2), 0);
    dcr_error_set(DCR_EINVAL, "joiner's own");
    assert_int_equal(dcr_thread_join(&tg), DCR_OK);
    assert_string_equal(dcr_error_detail(), "joiner's own");
    assert_int_equal(dcr_thread_join(&tb), DCR_EPAYLOAD);
    assert_string_equal(dcr_error_detail(), "payload 7: bad item");
    assert_string_equal(bad.name, "dcr-job-1");
    assert_string_equal(good.name, "dcr-job-2");
    assert_int_equal(dcr_thread_join(&tb), DCR_OK);
    assert_int_equal(dcr_thread_join(&never), DCR_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_and_cpu),
        cmocka_unit_test(test_caller_not_charged),
        cmocka_unit_test(test_status_crosses_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
