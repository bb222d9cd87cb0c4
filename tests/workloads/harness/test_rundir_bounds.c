/* ctest-labels: unit
 *
 * The run directory's interval files are read within bounds: a FIFO does
 * not block the import, a link is not followed, an oversized or ragged file
 * is skipped, and intervals with an unknown stage or actor are dropped. The
 * kill-points folder is never a link. alarm() is the time limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "dcr/trace.h"
#include "testfiles.h"
#include "workloads/harness/rundir.h"

static char root[256];

static int setup(void **state)
{
    (void)state;
    return testfiles_tmpdir(root, sizeof(root), "rundir") ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return dcr_outpath_remove_tree(root);
}

static void write_intervals(const char *path, const dcr_trace_interval_t *iv, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(iv, sizeof *iv, n, f), n);
    fclose(f);
}

static size_t recorded(void)
{
    dcr_trace_interval_t *v = NULL;
    size_t n = 0;
    assert_int_equal(dcr_trace_snapshot(&v, &n), DCR_OK);
    free(v);
    return n;
}

static void test_trace_import_bounded(void **state)
{
    (void)state;
    alarm(30); /* a FIFO read would block forever */
    char trace[400], path[4300], outside[400];
    snprintf(trace, sizeof trace, "%s/trace", root);
    assert_int_equal(mkdir(trace, 0755), 0);
    dcr_trace_enable(true);
    dcr_trace_reset();
    dcr_trace_interval_t good[3] = {
        {1000, 2000, 1, DCR_STAGE_COMPARE, DCR_ACTOR_RECEIVER, 0},
        {1500, 2500, 1, DCR_STAGE_COMPARE, DCR_ACTOR_RECEIVER, 1},
        {1500, 2500, 1, DCR_STAGE_COUNT + 7, DCR_ACTOR_COUNT + 3, 1}, /* malformed */
    };
    /* Node 0: two good intervals and one malformed. */
    dcr_rundir_trace_path(root, 0, 1, path, sizeof path);
    write_intervals(path, good, 3);
    /* Node 1: a FIFO. */
    dcr_rundir_trace_path(root, 1, 1, path, sizeof path);
    assert_int_equal(mkfifo(path, 0600), 0);
    /* Node 2: a link to a good file elsewhere. */
    snprintf(outside, sizeof outside, "%s/outside.bin", root);
    write_intervals(outside, good, 2);
    dcr_rundir_trace_path(root, 2, 1, path, sizeof path);
    assert_int_equal(symlink(outside, path), 0);
    /* Node 3: ragged (not whole intervals). */
    dcr_rundir_trace_path(root, 3, 1, path, sizeof path);
    testfiles_put(path, "abc");
    /* Node 4: larger than the bound (sparse). */
    dcr_rundir_trace_path(root, 4, 1, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    assert_true(fd >= 0);
    off_t big = (off_t)DCR_RUNDIR_TRACE_MAX + (off_t)sizeof(dcr_trace_interval_t) * 16;
    assert_int_equal(ftruncate(fd, big), 0);
    close(fd);
    assert_int_equal(dcr_rundir_trace_import(root, 5, 1), DCR_OK);
    assert_int_equal(recorded(), 2); /* node 0's good intervals only */
    dcr_trace_enable(false);
    alarm(0);
}

static void test_kill_points_never_a_link(void **state)
{
    (void)state;
    char work[300], elsewhere[300], link[4300];
    snprintf(work, sizeof work, "%s/work", root);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", root);
    assert_int_equal(mkdir(work, 0755), 0);
    assert_int_equal(mkdir(elsewhere, 0755), 0);
    dcr_rundir_kill_points_dir(work, link, sizeof link);
    assert_int_equal(symlink(elsewhere, link), 0);
    assert_int_equal(dcr_rundir_kill_points_create(work), DCR_EINVAL);
    unlink(link);
    assert_int_equal(dcr_rundir_kill_points_create(work), DCR_OK);
    assert_int_equal(dcr_rundir_kill_points_create(work), DCR_OK); /* existing: fine */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_import_bounded),
        cmocka_unit_test(test_kill_points_never_a_link),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
