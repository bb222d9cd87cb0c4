/* ctest-labels: unit
 *
 * Work folders: dcr's only when absent, empty or marked by a run that is not
 * alive; temporary folders (in TMPDIR or a parent of the caller's) are
 * marked, removed on close, and swept by the next run when their run died;
 * the memory-backed parent is offered only when it has the room asked for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "testfiles.h"
#include "testmarker.h"
#include "workloads/harness/workdir.h"

static char root[256];

static int setup(void **state)
{
    if (!testfiles_tmpdir(root, sizeof(root), "workdir")) return -1;
    return setenv("TMPDIR", root, 1);
}

static int teardown(void **state)
{
    return dcr_outpath_remove_tree(root);
}

static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void marker(const char *dir, long pid)
{
    testmarker_put(dir, pid);
}

static void test_check_refuses_what_is_not_dcrs(void **state)
{
    char d[300], f[400];
    snprintf(d, sizeof(d), "%s/new", root);
    assert_int_equal(dcr_workdir_check("--workdir", d), DCR_OK);
    assert_int_equal(access(d, F_OK), -1); /* checking creates nothing */
    assert_int_equal(mkdir(d, 0755), 0);
    assert_int_equal(dcr_workdir_check("--workdir", d), DCR_OK); /* empty */
    snprintf(f, sizeof(f), "%s/user.txt", d);
    testfiles_put(f, "mine");
    assert_int_equal(dcr_workdir_check("--keep-payloads", d), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--keep-payloads"));
    /* A marker of a dead run makes the folder dcr's; of a live one, busy. */
    marker(d, dead_pid());
    assert_int_equal(dcr_workdir_check("--workdir", d), DCR_OK);
    marker(d, (long)getppid());
    assert_int_equal(dcr_workdir_check("--workdir", d), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "in use"));
    char m[400];
    snprintf(m, sizeof(m), "%s/" DCR_WORKDIR_MARKER, d);
    testfiles_put(m, "something else");
    assert_int_equal(dcr_workdir_check("--workdir", d), DCR_EINVAL);
    char link[300];
    snprintf(link, sizeof(link), "%s/link", root);
    assert_int_equal(symlink(d, link), 0);
    assert_int_equal(dcr_workdir_check("--workdir", link), DCR_EINVAL);
    assert_int_equal(dcr_workdir_check("--workdir", f), DCR_EINVAL);
    assert_int_equal(access(f, F_OK), 0);
}

static void test_open_marks_and_resets_dead_runs_folders(void **state)
{
    char d[300], f[400], m[400];
    snprintf(d, sizeof(d), "%s/work", root);
    dcr_workdir_t w;
    assert_int_equal(dcr_workdir_open("--workdir", d, "dcr-bench", &w), DCR_OK);
    assert_false(w.temp);
    snprintf(m, sizeof(m), "%s/" DCR_WORKDIR_MARKER, d);
    char buf[256] = {0}, want[64];
    FILE *mf = fopen(m, "r");
    assert_non_null(mf);
    assert_non_null(fgets(buf, sizeof(buf), mf));
    fclose(mf);
    snprintf(want, sizeof(want), "dcr work folder pid %ld start ", (long)getpid());
    assert_memory_equal(buf, want, strlen(want));
    dcr_workdir_close(&w);
    assert_int_equal(access(m, F_OK), 0); /* a user's folder stays, marker too */
    /* What a killed run left is removed by the next run. */
    marker(d, dead_pid());
    snprintf(f, sizeof(f), "%s/.tmp-payload-1", d);
    testfiles_put(f, "x");
    assert_int_equal(dcr_workdir_open("--workdir", d, "dcr-bench", &w), DCR_OK);
    assert_int_equal(access(f, F_OK), -1);
}

static void test_temp_folders_marked_removed_and_swept(void **state)
{
    dcr_workdir_t w;
    assert_int_equal(dcr_workdir_open("--workdir", NULL, "dcr-unit", &w), DCR_OK);
    assert_true(w.temp);
    assert_non_null(strstr(w.path, "/dcr-unit-"));
    char m[4200];
    snprintf(m, sizeof(m), "%s/" DCR_WORKDIR_MARKER, w.path);
    assert_int_equal(access(m, F_OK), 0);
    char kept[4200];
    snprintf(kept, sizeof(kept), "%s", w.path);
    dcr_workdir_close(&w);
    assert_int_equal(access(kept, F_OK), -1);

    char dead[300], live[300], plain[300];
    snprintf(dead, sizeof(dead), "%s/dcr-unit-dead00", root);
    snprintf(live, sizeof(live), "%s/dcr-unit-live00", root);
    snprintf(plain, sizeof(plain), "%s/dcr-unit-plain0", root);
    assert_int_equal(mkdir(dead, 0700), 0);
    assert_int_equal(mkdir(live, 0700), 0);
    assert_int_equal(mkdir(plain, 0700), 0);
    marker(dead, dead_pid());
    marker(live, (long)getpid());
    assert_int_equal(dcr_workdir_sweep(root, "dcr-unit"), 1);
    assert_int_equal(access(dead, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(plain, F_OK), 0); /* no marker: not dcr's */
}

/* A temporary folder in a parent of the caller's: made there with the
 * marker, after that parent's dead runs' folders of the prefix went. */
static void test_temp_folder_in_a_given_parent(void **state)
{
    char parent[300], dead[400];
    snprintf(parent, sizeof(parent), "%s/memory", root);
    assert_int_equal(mkdir(parent, 0700), 0);
    snprintf(dead, sizeof(dead), "%s/dcr-unit-dead01", parent);
    assert_int_equal(mkdir(dead, 0700), 0);
    marker(dead, dead_pid());
    dcr_workdir_t w;
    assert_int_equal(dcr_workdir_open_temp(parent, "dcr-unit", &w), DCR_OK);
    assert_true(w.temp);
    assert_int_equal(strncmp(w.path, parent, strlen(parent)), 0);
    assert_int_equal(access(dead, F_OK), -1);
    char m[4200];
    snprintf(m, sizeof(m), "%s/" DCR_WORKDIR_MARKER, w.path);
    assert_int_equal(access(m, F_OK), 0);
    dcr_workdir_close(&w);
    assert_int_equal(access(w.path, F_OK), -1);
    assert_int_equal(rmdir(parent), 0); /* nothing else was left there */
}

/* The memory-backed parent: /dev/shm when it is a tmpfs with the room
 * asked for (statfs here is the oracle), never for more than it has. */
static void test_memory_parent_needs_tmpfs_and_room(void **state)
{
    bool tmpfs = testfiles_shm_is_memory();
    assert_int_equal(dcr_workdir_is_memory("/dev/shm"), tmpfs);
    struct statfs fs;
    assert_int_equal(statfs(root, &fs), 0);
    assert_int_equal(dcr_workdir_is_memory(root), fs.f_type == TMPFS_MAGIC);
    assert_false(dcr_workdir_is_memory("/nonexistent/dcr"));
    if (!tmpfs) {
        assert_null(dcr_workdir_memory_parent(0));
        return;
    }
    assert_int_equal(statfs("/dev/shm", &fs), 0);
    const char *p = dcr_workdir_memory_parent(1 << 20);
    if (access("/dev/shm", W_OK) == 0 && (uint64_t)fs.f_bavail * fs.f_bsize >= (1 << 20))
        assert_string_equal(p, "/dev/shm");
    uint64_t size = (uint64_t)fs.f_blocks * fs.f_bsize;
    assert_null(dcr_workdir_memory_parent(size + 1)); /* more than the whole file system */
    assert_null(dcr_workdir_memory_parent(UINT64_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_refuses_what_is_not_dcrs),
        cmocka_unit_test(test_open_marks_and_resets_dead_runs_folders),
        cmocka_unit_test(test_temp_folders_marked_removed_and_swept),
        cmocka_unit_test(test_temp_folder_in_a_given_parent),
        cmocka_unit_test(test_memory_parent_needs_tmpfs_and_room),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
