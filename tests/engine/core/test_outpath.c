/* ctest-labels: unit
 *
 * The output-path rule: device nodes (made with mknod inside a private
 * temporary folder, never under /dev), FIFOs, sockets, directories and
 * symbolic links are refused and left as they were; regular files are
 * replaced whole; folders are staged and moved in only when complete;
 * leftovers of dead writers are swept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dcr/outpath.h"
#include "testfiles.h"

static char root[256];

static int setup(void **state)
{
    return testfiles_tmpdir(root, sizeof(root), "outpath") ? 0 : -1;
}

static int teardown(void **state)
{
    return dcr_outpath_remove_tree(root);
}

static void path_of(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", root, name);
}

/* Entries in dir other than . and .. */
static int entries(const char *dir)
{
    return testfiles_count(dir, "");
}

static void expect_refused(const char *path, const char *kind)
{
    int before = entries(root);
    assert_int_equal(dcr_outpath_check("--out", path), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), kind));
    assert_non_null(strstr(dcr_error_detail(), path));
    assert_int_equal(dcr_outpath_write("--out", path, "x", 1), DCR_EINVAL);
    dcr_outfile_t *f = NULL;
    assert_int_equal(dcr_outfile_open("--out", path, DCR_OUTFILE_KEEP, &f), DCR_EINVAL);
    assert_null(f);
    /* No temporary file stays behind. */
    assert_int_equal(entries(root), before);
}

static void test_refuses_special_files(void **state)
{
    char dev[512], fifo[512], sock[512], dir[512];
    path_of(dev, sizeof(dev), "full");
    assert_int_equal(mknod(dev, S_IFCHR | 0666, makedev(1, 7)), 0);
    expect_refused(dev, "character device");
    struct stat st;
    assert_int_equal(lstat(dev, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(major(st.st_rdev), 1);
    assert_int_equal(minor(st.st_rdev), 7);

    path_of(fifo, sizeof(fifo), "fifo");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    expect_refused(fifo, "FIFO");
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));

    path_of(sock, sizeof(sock), "sock");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    expect_refused(sock, "socket");
    close(s);

    path_of(dir, sizeof(dir), "dir");
    assert_int_equal(mkdir(dir, 0755), 0);
    expect_refused(dir, "directory");
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    char slash[600];
    snprintf(slash, sizeof(slash), "%s/", dir);
    assert_int_equal(dcr_outpath_check("--out", slash), DCR_EINVAL);
}

static void test_never_follows_symlinks(void **state)
{
    char outside[512], link[512], dlink[512];
    path_of(outside, sizeof(outside), "outside.txt");
    testfiles_put(outside, "precious\n");
    path_of(link, sizeof(link), "link.json");
    assert_int_equal(symlink(outside, link), 0);
    expect_refused(link, "symbolic link");
    testfiles_assert_text(outside, "precious\n");
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    /* A dangling link is refused too: creating through it would write elsewhere. */
    path_of(dlink, sizeof(dlink), "dangling");
    char target[512];
    path_of(target, sizeof(target), "not-there");
    assert_int_equal(symlink(target, dlink), 0);
    expect_refused(dlink, "symbolic link");
    assert_int_equal(access(target, F_OK), -1);
}

static void test_writes_and_replaces_regular_files(void **state)
{
    char path[512];
    path_of(path, sizeof(path), "out.json");
    assert_int_equal(dcr_outpath_check("--trace", path), DCR_OK);
    assert_int_equal(access(path, F_OK), -1); /* the check leaves nothing */
    assert_int_equal(dcr_outpath_write("--trace", path, "one\n", 4), DCR_OK);
    testfiles_assert_text(path, "one\n");
    assert_int_equal(dcr_outpath_write("--trace", path, "two\n", 4), DCR_OK);
    testfiles_assert_text(path, "two\n");
    /* Mode 0644 less the umask. */
    mode_t old = umask(077);
    assert_int_equal(dcr_outpath_write("--trace", path, "three\n", 6), DCR_OK);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* KEEP starts from the old content (append-style writers). */
    dcr_outfile_t *f = NULL;
    assert_int_equal(dcr_outfile_open("--out", path, DCR_OUTFILE_KEEP, &f), DCR_OK);
    assert_int_equal(write(dcr_outfile_fd(f), "four\n", 5), 5);
    testfiles_assert_text(path, "three\n"); /* untouched until commit */
    assert_int_equal(dcr_outfile_commit(f), DCR_OK);
    testfiles_assert_text(path, "three\nfour\n");
    /* Abort leaves the target and no temporary file. */
    int before = entries(root);
    assert_int_equal(dcr_outfile_open("--out", path, 0, &f), DCR_OK);
    assert_int_equal(entries(root), before + 1);
    assert_int_equal(write(dcr_outfile_fd(f), "five\n", 5), 5);
    dcr_outfile_abort(f);
    assert_int_equal(entries(root), before);
    testfiles_assert_text(path, "three\nfour\n");
    dcr_outfile_abort(NULL);
}

/* A FIFO planted after open but before commit is not replaced. */
static void test_commit_rechecks_the_target(void **state)
{
    char path[512];
    path_of(path, sizeof(path), "late");
    dcr_outfile_t *f = NULL;
    assert_int_equal(dcr_outfile_open("--out", path, 0, &f), DCR_OK);
    assert_int_equal(mkfifo(path, 0644), 0);
    int before = entries(root);
    assert_int_equal(dcr_outfile_commit(f), DCR_EINVAL);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(entries(root), before - 1); /* the temporary file is gone */
}

static void test_unwritable_folder_fails_at_check(void **state)
{
    char ro[512], path[600];
    path_of(ro, sizeof(ro), "ro");
    assert_int_equal(mkdir(ro, 0755), 0);
    /* Root ignores permission bits, so a read-only bind is not available
     * here; a missing folder and a file used as a folder stand in for it. */
    snprintf(path, sizeof(path), "%s/missing/x.h5", ro);
    assert_int_equal(dcr_outpath_check("--out", path), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "missing"));
    char file[512];
    path_of(file, sizeof(file), "plain");
    testfiles_put(file, "x");
    snprintf(path, sizeof(path), "%s/x.h5", file);
    assert_int_equal(dcr_outpath_check("--out", path), DCR_EIO);
    assert_int_equal(dcr_outpath_check("--out", ""), DCR_EINVAL);
}

static void test_outdir_stages_and_commits(void **state)
{
    char dir[512], fifo[600], file[700];
    path_of(dir, sizeof(dir), "report");
    dcr_outdir_t *d = NULL;
    assert_int_equal(dcr_outdir_open("-o", dir, &d), DCR_OK);
    snprintf(file, sizeof(file), "%s/data", dcr_outdir_stage(d));
    assert_int_equal(mkdir(file, 0755), 0);
    snprintf(file, sizeof(file), "%s/data/a.dat", dcr_outdir_stage(d));
    testfiles_put(file, "a\n");
    snprintf(file, sizeof(file), "%s/report.md", dcr_outdir_stage(d));
    testfiles_put(file, "r\n");
    assert_int_equal(dcr_outdir_commit(d), DCR_OK);
    snprintf(file, sizeof(file), "%s/data/a.dat", dir);
    testfiles_assert_text(file, "a\n");
    snprintf(file, sizeof(file), "%s/report.md", dir);
    testfiles_assert_text(file, "r\n");
    assert_int_equal(entries(dir), 2);

    /* A FIFO under one name: nothing is moved, the FIFO stays. */
    snprintf(fifo, sizeof(fifo), "%s/fig.svg", dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(dcr_outdir_open("-o", dir, &d), DCR_OK);
    snprintf(file, sizeof(file), "%s/report.md", dcr_outdir_stage(d));
    testfiles_put(file, "new\n");
    snprintf(file, sizeof(file), "%s/fig.svg", dcr_outdir_stage(d));
    testfiles_put(file, "svg\n");
    assert_int_equal(dcr_outdir_commit(d), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "fig.svg"));
    snprintf(file, sizeof(file), "%s/report.md", dir);
    testfiles_assert_text(file, "r\n");
    assert_int_equal(entries(dir), 3);

    /* Abort leaves nothing of the run. */
    assert_int_equal(dcr_outdir_open("-o", dir, &d), DCR_OK);
    snprintf(file, sizeof(file), "%s/partial.dat", dcr_outdir_stage(d));
    testfiles_put(file, "p\n");
    dcr_outdir_abort(d);
    assert_int_equal(entries(dir), 3);
    char plain[512];
    path_of(plain, sizeof(plain), "plainfile");
    testfiles_put(plain, "x");
    assert_int_equal(dcr_outdir_check("-o", plain), DCR_EINVAL);
}

/* Leftovers of a writer that died are removed by the next writer; those of a
 * live one are not. */
static void test_sweeps_dead_writers(void **state)
{
    char dir[512], dead[700], live[700], path[700];
    path_of(dir, sizeof(dir), "sweep");
    assert_int_equal(mkdir(dir, 0755), 0);
    pid_t child = fork();
    if (child == 0) _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    snprintf(dead, sizeof(dead), "%s/.r.h5.dcr-tmp-%d-abcdef", dir, (int)child);
    testfiles_put(dead, "old");
    snprintf(live, sizeof(live), "%s/.r.h5.dcr-tmp-%d-abcdef", dir, (int)getpid());
    testfiles_put(live, "mine");
    snprintf(path, sizeof(path), "%s/.dcr-stage-%d-zzzzzz", dir, (int)child);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/.dcr-stage-%d-zzzzzz/x", dir, (int)child);
    testfiles_put(path, "x");
    snprintf(path, sizeof(path), "%s/r.h5", dir);
    assert_int_equal(dcr_outpath_write("--out", path, "r", 1), DCR_OK);
    assert_int_equal(access(dead, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    dcr_outdir_t *d = NULL;
    assert_int_equal(dcr_outdir_open("-o", dir, &d), DCR_OK);
    dcr_outdir_abort(d);
    snprintf(path, sizeof(path), "%s/.dcr-stage-%d-zzzzzz", dir, (int)child);
    assert_int_equal(access(path, F_OK), -1);
}

/* remove_tree removes a link, never what it points at. */
static void test_remove_tree_keeps_link_targets(void **state)
{
    char keep[512], keepfile[600], tree[512], p[700];
    path_of(keep, sizeof(keep), "keep");
    assert_int_equal(mkdir(keep, 0755), 0);
    snprintf(keepfile, sizeof(keepfile), "%s/precious", keep);
    testfiles_put(keepfile, "p");
    path_of(tree, sizeof(tree), "tree");
    assert_int_equal(mkdir(tree, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub", tree);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/sub/f", tree);
    testfiles_put(p, "f");
    snprintf(p, sizeof(p), "%s/sub/dirlink", tree);
    assert_int_equal(symlink(keep, p), 0);
    assert_int_equal(dcr_outpath_remove_tree(tree), 0);
    assert_int_equal(access(tree, F_OK), -1);
    testfiles_assert_text(keepfile, "p");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_special_files),
        cmocka_unit_test(test_never_follows_symlinks),
        cmocka_unit_test(test_writes_and_replaces_regular_files),
        cmocka_unit_test(test_commit_rechecks_the_target),
        cmocka_unit_test(test_unwritable_folder_fails_at_check),
        cmocka_unit_test(test_outdir_stages_and_commits),
        cmocka_unit_test(test_sweeps_dead_writers),
        cmocka_unit_test(test_remove_tree_keeps_link_targets),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
