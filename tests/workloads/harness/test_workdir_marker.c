/* ctest-labels: unit
 *
 * Work-folder markers cannot be forged in the sense the conventions page
 * states (issue 32, item 15): a hand-written marker with a dead pid, a
 * marker copied from another folder, and a link to a dead run's folder are
 * never swept; a genuine dead run's temporary folder is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "testfiles.h"
#include "workloads/harness/workdir.h"

static char root[256];

static int setup(void **state)
{
    (void)state;
    if (!testfiles_tmpdir(root, sizeof(root), "marker")) return -1;
    return setenv("TMPDIR", root, 1);
}

static int teardown(void **state)
{
    (void)state;
    return dcr_outpath_remove_tree(root);
}

static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

/* A temporary folder TMPDIR/PREFIX-* made by a run (a child process) that
 * then died without removing it: what a killed dcr leaves. */
static void dead_run_folder(const char *prefix, char *out, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t p = fork();
    if (p == 0) {
        dcr_workdir_t w;
        if (dcr_workdir_open("--workdir", NULL, prefix, &w) != DCR_OK) _exit(1);
        ssize_t n = write(fds[1], w.path, strlen(w.path) + 1);
        _exit(n > 0 ? 0 : 1);
    }
    close(fds[1]);
    memset(out, 0, cap);
    ssize_t n = read(fds[0], out, cap - 1);
    close(fds[0]);
    int status = 0;
    waitpid(p, &status, 0);
    assert_true(n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void put_marker(const char *dir, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/" DCR_WORKDIR_MARKER, dir);
    testfiles_put(path, text);
}

static void test_forged_markers_not_swept(void **state)
{
    (void)state;
    char forged[300], text[128], copied[300], src[4200], dst[400], data[400];
    /* Well formed in the old format, with a dead pid: the repro. */
    snprintf(forged, sizeof forged, "%s/dcr-unit-forged", root);
    assert_int_equal(mkdir(forged, 0700), 0);
    snprintf(text, sizeof text, "dcr work folder pid %ld\n", dead_pid());
    put_marker(forged, text);
    snprintf(data, sizeof data, "%s/results.h5", forged);
    testfiles_put(data, "a user's results\n");
    /* A genuine marker of a dead run, copied into another folder. */
    char real[4096];
    dead_run_folder("dcr-src", real, sizeof real);
    snprintf(copied, sizeof copied, "%s/dcr-unit-copied", root);
    assert_int_equal(mkdir(copied, 0700), 0);
    snprintf(src, sizeof src, "%s/" DCR_WORKDIR_MARKER, real);
    snprintf(dst, sizeof dst, "%s/" DCR_WORKDIR_MARKER, copied);
    char buf[512];
    FILE *f = fopen(src, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    testfiles_put(dst, buf);
    /* A link named like a temporary folder, to a dead run's folder. */
    char target[4096], link[300];
    dead_run_folder("dcr-target", target, sizeof target);
    snprintf(link, sizeof link, "%s/dcr-unit-link", root);
    assert_int_equal(symlink(target, link), 0);

    assert_int_equal(dcr_workdir_sweep(root, "dcr-unit"), 0);
    testfiles_assert_text(data, "a user's results\n");
    assert_int_equal(access(dst, F_OK), 0);
    assert_int_equal(access(target, F_OK), 0);
    /* Named as a work folder, each is refused, not taken. */
    assert_int_equal(dcr_workdir_check("--workdir", forged), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "not a marker dcr wrote"));
    assert_int_equal(dcr_workdir_check("--workdir", copied), DCR_EINVAL);
    assert_int_equal(dcr_workdir_check("--workdir", link), DCR_EINVAL);
    /* The genuine ones are a dead run's: swept. */
    assert_int_equal(dcr_workdir_sweep(root, "dcr-src"), 1);
    assert_int_equal(access(real, F_OK), -1);
}

static void test_dead_runs_folders_still_swept_and_reused(void **state)
{
    (void)state;
    /* A live run's folder (this process's own) is kept; opening a
     * temporary folder sweeps first, so the dead run comes second. */
    dcr_workdir_t live;
    assert_int_equal(dcr_workdir_open("--workdir", NULL, "dcr-unit2", &live), DCR_OK);
    char dead[4096];
    dead_run_folder("dcr-unit2", dead, sizeof dead);
    assert_int_equal(dcr_workdir_sweep(root, "dcr-unit2"), 1);
    assert_int_equal(access(dead, F_OK), -1);
    assert_int_equal(access(live.path, F_OK), 0);
    dcr_workdir_close(&live);
    /* A user's folder left by a dead run is taken again and emptied. */
    char user[300], left[400];
    snprintf(user, sizeof user, "%s/mine", root);
    pid_t p = fork();
    if (p == 0) {
        dcr_workdir_t w;
        _exit(dcr_workdir_open("--workdir", user, "dcr-unit2", &w) == DCR_OK ? 0 : 1);
    }
    int status = 0;
    waitpid(p, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    snprintf(left, sizeof left, "%s/.tmp-payload-1", user);
    testfiles_put(left, "x");
    assert_int_equal(dcr_workdir_check("--workdir", user), DCR_OK);
    dcr_workdir_t w;
    assert_int_equal(dcr_workdir_open("--workdir", user, "dcr-unit2", &w), DCR_OK);
    assert_int_equal(access(left, F_OK), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forged_markers_not_swept),
        cmocka_unit_test(test_dead_runs_folders_still_swept_and_reused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
