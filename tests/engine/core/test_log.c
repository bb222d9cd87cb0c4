/* ctest-labels: unit */
/* Log levels, the DCR_LOG variable and the line format on stderr. */
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

static void test_log_level_parse(void **state)
{
    (void)state;
    const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        dcr_log_level_t level = DCR_LOG_ERROR;
        assert_int_equal(dcr_log_level_parse(names[i], &level), 0);
        assert_int_equal((int)level, i);
    }
    dcr_log_level_t keep = DCR_LOG_WARN;
    assert_int_equal(dcr_log_level_parse("verbose", &keep), -1);
    assert_int_equal(dcr_log_level_parse(NULL, &keep), -1);
    assert_int_equal(keep, DCR_LOG_WARN);
}

/* DCR_LOG is read on first use; main() sets it to "warn" before anything logs. */
static void test_log_env_level(void **state)
{
    (void)state;
    assert_int_equal(dcr_log_get_level(), DCR_LOG_WARN);
    dcr_log_set_level(DCR_LOG_DEBUG);
    assert_int_equal(dcr_log_get_level(), DCR_LOG_DEBUG);
}

static void log_some(void)
{
    dcr_log_set_level(DCR_LOG_INFO);
    DCR_LOG_INFO("refit %d done", 3);
    DCR_LOG_DEBUG("hidden %d", 1);
    DCR_LOG_WARN("already terminated\n");
    DCR_LOG_ERROR("bad");
    /* A name from a file cannot forge a line or reach the terminal raw. */
    DCR_LOG_WARN("tensor %s", "x\ndcr: error: forged\x1b[2J");
}

static void test_log_format_and_filter(void **state)
{
    (void)state;
    char *text = testfiles_capture_stderr(log_some);
    assert_string_equal(text, "dcr: info: refit 3 done\n"
                              "dcr: warn: already terminated\n"
                              "dcr: error: bad\n"
                              "dcr: warn: tensor x\\x0adcr: error: forged\\x1b[2J\n");
    free(text);
}

enum { LOG_THREADS = 4, LOG_LINES = 200 };

static void *log_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < LOG_LINES; i++) DCR_LOG_INFO("thread %d line %d abcdefghijklmnop", id, i);
    return NULL;
}

static void log_threads(void)
{
    dcr_log_set_level(DCR_LOG_INFO);
    pthread_t t[LOG_THREADS];
    for (int i = 0; i < LOG_THREADS; i++)
        pthread_create(&t[i], NULL, log_thread, (void *)(intptr_t)i);
    for (int i = 0; i < LOG_THREADS; i++) pthread_join(t[i], NULL);
}

/* Lines from concurrent threads must come out whole. */
static void test_log_threads_whole_lines(void **state)
{
    (void)state;
    char *text = testfiles_capture_stderr(log_threads);
    int lines = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        int id = -1, n = -1;
        char tail[32] = "";
        assert_int_equal(sscanf(line, "dcr: info: thread %d line %d %31s", &id, &n, tail), 3);
        assert_string_equal(tail, "abcdefghijklmnop");
        lines++;
    }
    assert_int_equal(lines, LOG_THREADS * LOG_LINES);
    free(text);
}

int main(void)
{
    setenv("DCR_LOG", "warn", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_level_parse),
        cmocka_unit_test(test_log_env_level),
        cmocka_unit_test(test_log_format_and_filter),
        cmocka_unit_test(test_log_threads_whole_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
