/* ctest-labels: unit
 *
 * Trace plausibility: a recording keeps every stage inside its refit
 * window; a stage far outside every window, a window stretched past its
 * last stage (the 2^63-1 ns end of issue 15), or an interval ending before
 * it starts is refused; up to the tolerance is accepted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "reports/trace_check.h"

#define S 1000000000ull /* one second in ns */
#define T DCR_TRACE_WINDOW_TOLERANCE_NS

static dcr_trace_interval_t at(uint64_t start, uint64_t end, uint32_t refit, dcr_stage_t stage)
{
    return (dcr_trace_interval_t){start, end, refit, (uint16_t)stage, DCR_ACTOR_OWNER, 0};
}

/* Two refits of 2 s, stages inside each. */
static size_t recording(dcr_trace_interval_t *iv)
{
    size_t n = 0;
    iv[n++] = at(10 * S, 12 * S, 1, DCR_STAGE_REFIT);
    iv[n++] = at(10 * S, 11 * S, 1, DCR_STAGE_COMPARE);
    iv[n++] = at(11 * S, 12 * S, 1, DCR_STAGE_BASELINE);
    iv[n++] = at(20 * S, 22 * S, 2, DCR_STAGE_REFIT);
    iv[n++] = at(20 * S, 21 * S, 2, DCR_STAGE_SEND);
    iv[n++] = at(21 * S, 22 * S, 2, DCR_STAGE_COMMIT);
    return n;
}

static void test_recording_passes(void **state)
{
    dcr_trace_interval_t iv[16];
    size_t n = recording(iv);
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_OK);
    assert_int_equal(dcr_trace_check_windows(NULL, 0, T), DCR_OK);
    /* No window: nothing to bound, nothing to refuse. */
    iv[0] = at(1, 2, 0, DCR_STAGE_APPLY);
    assert_int_equal(dcr_trace_check_windows(iv, 1, T), DCR_OK);
}

static void test_within_tolerance_passes(void **state)
{
    dcr_trace_interval_t iv[16];
    size_t n = recording(iv);
    iv[n++] = at(12 * S + T / 2, 12 * S + T - 1, 1, DCR_STAGE_CHECK); /* just after refit 1 */
    iv[n++] = at(20 * S - T, 20 * S, 2, DCR_STAGE_ZSTD);              /* just before refit 2 */
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_OK);
}

static void test_stage_outside_every_window_refused(void **state)
{
    dcr_trace_interval_t iv[16];
    size_t n = recording(iv);
    iv[n++] = at(15 * S, 16 * S, 1, DCR_STAGE_APPLY); /* between the refits, 3 s away */
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "outside every refit window"));
    n = recording(iv);
    iv[n++] = at(11 * S, INT64_MAX, 1, DCR_STAGE_APPLY); /* ends at 2^63-1 ns */
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
    n = recording(iv);
    iv[n++] = at(UINT64_MAX - 5, UINT64_MAX, 1, DCR_STAGE_APPLY); /* no overflow in the check */
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
}

static void test_stretched_window_refused(void **state)
{
    dcr_trace_interval_t iv[16];
    size_t n = recording(iv);
    iv[0].end_ns = INT64_MAX; /* refit 1's window stretched to the end of time */
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "refit window ends"));
    /* An empty window longer than the tolerance is no refit either. */
    n = 0;
    iv[n++] = at(0, INT64_MAX, 1, DCR_STAGE_REFIT);
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
}

static void test_backwards_interval_refused(void **state)
{
    dcr_trace_interval_t iv[16];
    size_t n = recording(iv);
    iv[n++] = at(11 * S, 10 * S, 1, DCR_STAGE_APPLY);
    assert_int_equal(dcr_trace_check_windows(iv, n, T), DCR_EPARSE);
    assert_non_null(strstr(dcr_error_detail(), "ends before it starts"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recording_passes),
        cmocka_unit_test(test_within_tolerance_passes),
        cmocka_unit_test(test_stage_outside_every_window_refused),
        cmocka_unit_test(test_stretched_window_refused),
        cmocka_unit_test(test_backwards_interval_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
