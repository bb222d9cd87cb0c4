/* ctest-labels: unit
 *
 * Stop signals: the first sets the flag and wakes the pipe, and the run's
 * check turns it into DCR_EINTR naming the signal; a second removes the
 * registered paths and exits 128 + the signal at once. Each case runs in a
 * child process, since a handler, once installed, stays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "testfiles.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "workloads/harness/interrupt.h"

/* Runs fn in a child; returns its wait status. */
static int in_child(int (*fn)(void *), void *arg)
{
    pid_t p = fork();
    if (p == 0) _exit(fn(arg));
    int status = 0;
    assert_int_equal(waitpid(p, &status, 0), p);
    return status;
}

/* Exit codes say which expectation failed (0: all held). */
static int first_signal(void *arg)
{
    dcr_interrupt_install();
    if (dcr_interrupted() || dcr_interrupt_check("unit") != DCR_OK) return 10;
    raise(SIGTERM);
    if (!dcr_interrupted() || dcr_interrupt_signal() != SIGTERM) return 11;
    if (dcr_interrupt_check("unit") != DCR_EINTR) return 12;
    if (!strstr(dcr_error_detail(), "SIGTERM") || !strstr(dcr_error_detail(), "unit")) return 13;
    struct pollfd pf = {dcr_interrupt_fd(), POLLIN, 0};
    if (poll(&pf, 1, 0) != 1) return 14;
    if (dcr_interrupt_exit_status(SIGTERM) != 128 + SIGTERM) return 15;
    return 0;
}

static void test_first_signal_sets_the_flag(void **state)
{
    int status = in_child(first_signal, NULL);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static int second_signal(void *arg)
{
    const char *dir = arg;
    dcr_interrupt_install();
    dcr_interrupt_cleanup_add("/nonexistent/unregistered-later");
    dcr_interrupt_cleanup_remove("/nonexistent/unregistered-later");
    dcr_interrupt_cleanup_add(dir);
    raise(SIGINT);
    raise(SIGINT); /* does not return */
    return 20;
}

static void test_second_signal_cleans_and_exits(void **state)
{
    char dir[256], file[300];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "interrupt"));
    snprintf(file, sizeof(file), "%s/sub", dir);
    assert_int_equal(mkdir(file, 0755), 0);
    snprintf(file, sizeof(file), "%s/sub/data", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    int status = in_child(second_signal, dir);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGINT);
    int gone = access(dir, F_OK) != 0;
    if (!gone) dcr_outpath_remove_tree(dir);
    assert_true(gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_signal_sets_the_flag),
        cmocka_unit_test(test_second_signal_cleans_and_exits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
