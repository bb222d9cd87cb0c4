/* ctest-labels: unit */
/* Status texts, the thread-local detail message, the one error line, the
 * debug trace of the forwarding macros and errors carried across a join. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testfiles.h"

#include "dcr/log.h"
#include "dcr/status.h"

static const dcr_status_t all_codes[] = {
    DCR_OK,       DCR_EINVAL,       DCR_ENOTFOUND, DCR_EPARSE,    DCR_ELAYOUT,   DCR_EIO,
    DCR_ENOMEM,   DCR_EUNSUPPORTED, DCR_EPAYLOAD,  DCR_EDIGEST,   DCR_ECODEC,    DCR_ETRANSPORT,
    DCR_ETIMEOUT, DCR_EAGAIN,       DCR_ECLOSED,   DCR_ERECEIVER, DCR_EMISMATCH, DCR_ECONFLICT,
    DCR_ECONTROL, DCR_EATTEMPT,     DCR_EFATAL,    DCR_EINTR,
};
#define N_CODES (sizeof all_codes / sizeof all_codes[0])

static void test_status_str_distinct(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CODES; i++) {
        const char *a = dcr_status_str(all_codes[i]);
        assert_non_null(a);
        assert_true(strlen(a) > 0);
        for (size_t j = 0; j < i; j++) assert_string_not_equal(a, dcr_status_str(all_codes[j]));
    }
    assert_non_null(dcr_status_str((dcr_status_t)-9999));
    assert_string_equal(dcr_status_str(DCR_OK), "ok");
}

static void test_error_set_and_line(void **state)
{
    (void)state;
    dcr_error_clear();
    assert_string_equal(dcr_error_detail(), "");
    assert_string_equal(dcr_error_line(DCR_EINVAL), dcr_status_str(DCR_EINVAL));

    dcr_status_t st = dcr_error_set(DCR_EPARSE, "model %s: field %d", "qwen", 7);
    assert_int_equal(st, DCR_EPARSE);
    assert_string_equal(dcr_error_detail(), "model qwen: field 7");

    char expect[256];
    snprintf(expect, sizeof expect, "%s: model qwen: field 7", dcr_status_str(DCR_EPARSE));
    assert_string_equal(dcr_error_line(DCR_EPARSE), expect);

    dcr_error_clear();
    assert_string_equal(dcr_error_detail(), "");
}

static void test_error_prefix(void **state)
{
    (void)state;
    dcr_error_set(DCR_EDIGEST, "digest mismatch");
    dcr_error_prefix("payload %d: ", 7);
    assert_string_equal(dcr_error_detail(), "payload 7: digest mismatch");
    dcr_error_prefix("owner %s: ", "r3");
    assert_string_equal(dcr_error_detail(), "owner r3: payload 7: digest mismatch");
}

/* A caller may quote the current detail in the new one. */
static void test_error_set_self_reference(void **state)
{
    (void)state;
    dcr_error_set(DCR_EIO, "open failed");
    dcr_error_set(DCR_EIO, "config: %s", dcr_error_detail());
    assert_string_equal(dcr_error_detail(), "config: open failed");
}

static void test_error_long_detail_truncated(void **state)
{
    (void)state;
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    dcr_error_set(DCR_EINVAL, "%s", big);
    size_t n = strlen(dcr_error_detail());
    assert_true(n > 100 && n < sizeof big - 1);
    dcr_error_prefix("%s", big);
    assert_true(strlen(dcr_error_detail()) <= n);
    const char *line = dcr_error_line(DCR_EINVAL);
    assert_true(strncmp(line, dcr_status_str(DCR_EINVAL), strlen(dcr_status_str(DCR_EINVAL))) == 0);
}

static void *other_thread(void *arg)
{
    (void)arg;
    int ok = strcmp(dcr_error_detail(), "") == 0;
    dcr_error_set(DCR_ETRANSPORT, "from the other thread");
    ok = ok && strcmp(dcr_error_detail(), "from the other thread") == 0;
    return ok ? (void *)1 : NULL;
}

static void test_error_thread_local(void **state)
{
    (void)state;
    dcr_error_set(DCR_EINVAL, "main thread detail");
    pthread_t t;
    void *ret = NULL;
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &ret), 0);
    assert_non_null(ret);
    assert_string_equal(dcr_error_detail(), "main thread detail");
}

static dcr_status_t fails(int *calls)
{
    (*calls)++;
    return dcr_error_set(DCR_ENOTFOUND, "missing");
}

static dcr_status_t use_check(int *calls)
{
    DCR_CHECK(fails(calls));
    return DCR_OK;
}

static dcr_status_t use_check_goto(int *calls, int *cleaned)
{
    dcr_status_t st = DCR_OK;
    DCR_CHECK_GOTO(fails(calls), st, cleanup);
    return DCR_OK;
cleanup:
    (*cleaned)++;
    return st;
}

static void test_check_macros(void **state)
{
    (void)state;
    int calls = 0, cleaned = 0;
    assert_int_equal(use_check(&calls), DCR_ENOTFOUND);
    assert_int_equal(calls, 1);
    assert_int_equal(use_check_goto(&calls, &cleaned), DCR_ENOTFOUND);
    assert_int_equal(calls, 2);
    assert_int_equal(cleaned, 1);
}

static int g_calls, g_cleaned;
static int g_check_line, g_goto_line; /* the lines of the macros below */

static dcr_status_t traced_check(void)
{
    g_check_line = __LINE__ + 1;
    DCR_CHECK(fails(&g_calls));
    return DCR_OK;
}

static dcr_status_t traced_goto(void)
{
    dcr_status_t st = DCR_OK;
    g_goto_line = __LINE__ + 1;
    DCR_CHECK_GOTO(fails(&g_calls), st, cleanup);
    return DCR_OK;
cleanup:
    g_cleaned++;
    return st;
}

static void run_traced(void)
{
    assert_int_equal(traced_check(), DCR_ENOTFOUND);
    assert_int_equal(traced_goto(), DCR_ENOTFOUND);
}

/* At debug level each forwarding macro leaves one line with its file, line,
 * expression, status and detail; above it, nothing. */
static void test_check_traces_at_debug(void **state)
{
    (void)state;
    dcr_log_level_t was = dcr_log_get_level();
    dcr_log_set_level(DCR_LOG_DEBUG);
    char *text = testfiles_capture_stderr(run_traced);
    char want[256];
    snprintf(want, sizeof want, "%s:%d: fails(&g_calls) failed: not found: missing", __FILE__,
             g_check_line);
    if (!strstr(text, want)) fail_msg("'%s' lacks '%s'", text, want);
    snprintf(want, sizeof want, "%s:%d: fails(&g_calls) failed: not found: missing", __FILE__,
             g_goto_line);
    if (!strstr(text, want)) fail_msg("'%s' lacks '%s'", text, want);
    free(text);
    dcr_log_set_level(DCR_LOG_INFO);
    text = testfiles_capture_stderr(run_traced);
    assert_string_equal(text, "");
    free(text);
    dcr_log_set_level(was);
    assert_int_equal(g_calls, 4);
    assert_int_equal(g_cleaned, 2);
}

typedef struct carried {
    dcr_error_t err;
} carried_t;

static void *failing_thread(void *arg)
{
    carried_t *c = arg;
    dcr_error_save(&c->err, dcr_error_set(DCR_EDIGEST, "payload %d: digest", 3));
    return NULL;
}

/* A detail set on one thread reaches the joiner through a saved error, and
 * a saved success leaves the joiner's own detail alone. */
static void test_error_save_restore_across_join(void **state)
{
    (void)state;
    dcr_error_clear();
    carried_t c;
    memset(&c, 0xA5, sizeof c); /* save must not rely on a cleared slot */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, failing_thread, &c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(dcr_error_detail(), ""); /* details are thread-local */
    assert_int_equal(dcr_error_restore(&c.err), DCR_EDIGEST);
    assert_string_equal(dcr_error_detail(), "payload 3: digest");

    dcr_error_t ok;
    assert_int_equal(dcr_error_save(&ok, DCR_OK), DCR_OK);
    assert_string_equal(ok.detail, ""); /* the stale detail above is not a failure's */
    dcr_error_set(DCR_EINVAL, "mine");
    assert_int_equal(dcr_error_restore(&ok), DCR_OK);
    assert_string_equal(dcr_error_detail(), "mine");

    /* A detail of the full length survives, cut to fit, still terminated. */
    char big[DCR_ERROR_DETAIL_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    dcr_error_set(DCR_EIO, "%s", big);
    dcr_error_t e;
    dcr_error_save(&e, DCR_EIO);
    assert_int_equal(strlen(e.detail), DCR_ERROR_DETAIL_MAX - 1);
}

/* Untrusted names print as one harmless line: control characters, DEL and
 * bytes >= 0x80 become \xNN; truncation never splits an escape. */
static void test_escape(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(dcr_escape(buf, sizeof buf, "layers.0.q_proj"), "layers.0.q_proj");
    assert_string_equal(dcr_escape(buf, sizeof buf, "a\nb\x1b[2Jc\x7f\xc3\xa9"),
                        "a\\x0ab\\x1b[2Jc\\x7f\\xc3\\xa9");
    assert_string_equal(dcr_escape(buf, 6, "ab\ncd"), "ab");
    assert_string_equal(dcr_escape(buf, sizeof buf, NULL), "");
    dcr_error_set(DCR_EPARSE, "tensor 'x\ry'");
    assert_string_equal(dcr_error_line(DCR_EPARSE), "parse error: tensor 'x\\x0dy'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_str_distinct),
        cmocka_unit_test(test_error_set_and_line),
        cmocka_unit_test(test_error_prefix),
        cmocka_unit_test(test_error_set_self_reference),
        cmocka_unit_test(test_error_long_detail_truncated),
        cmocka_unit_test(test_error_thread_local),
        cmocka_unit_test(test_check_macros),
        cmocka_unit_test(test_check_traces_at_debug),
        cmocka_unit_test(test_error_save_restore_across_join),
        cmocka_unit_test(test_escape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
