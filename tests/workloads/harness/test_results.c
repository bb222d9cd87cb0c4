/* ctest-labels: unit
 *
 * HDF5 results: appended runs read back with the HDF5 library directly
 * (an independent reader), attributes and columns intact; a non-results file
 * refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "workloads/harness/results.h"

static void read_attr(hid_t obj, const char *name, char *buf, size_t len)
{
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    assert_true(attr >= 0);
    hid_t type = H5Aget_type(attr);
    assert_true(H5Tget_size(type) <= len);
    assert_true(H5Aread(attr, type, buf) >= 0);
    H5Tclose(type);
    H5Aclose(attr);
}

static void test_append_and_read_back(void **state)
{
    char path[] = "/tmp/dcr-results-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    double lat[3] = {1.5, 2.25, 3.0}, bytes[3] = {100, 200, 300};
    dcr_results_column_t cols[2] = {{"latency_s", lat}, {"payload_bytes", bytes}};
    const int64_t iv[2][6] = {{100, 250, 1, 0, 0, 3}, {300, 900, 1, 5, 1, 2}};
    dcr_results_run_t run = {"bench", "{\"model\":\"x\"}", "{\"mean\":2.25}", 3, 2, cols, 2, iv,
                             NULL};
    char name[64];
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
    assert_string_equal(name, "/runs/000000");
    lat[0] = 9.0;
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
    assert_string_equal(name, "/runs/000001");

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t g = H5Gopen2(f, "/runs/000000", H5P_DEFAULT);
    char text[256];
    read_attr(g, "config", text, sizeof(text));
    assert_string_equal(text, "{\"model\":\"x\"}");
    read_attr(g, "command", text, sizeof(text));
    assert_string_equal(text, "bench");
    read_attr(g, "git_revision", text, sizeof(text));
    assert_true(strlen(text) > 0);
    double back[3];
    hid_t ds = H5Dopen2(g, "refits/latency_s", H5P_DEFAULT);
    assert_true(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    assert_true(back[0] == 1.5 && back[1] == 2.25 && back[2] == 3.0);
    H5Dclose(ds);
    /* The stage trace table reads back as written. */
    int64_t table[2][6];
    ds = H5Dopen2(g, "intervals", H5P_DEFAULT);
    assert_true(ds >= 0);
    assert_true(H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, table) >= 0);
    assert_memory_equal(table, iv, sizeof(table));
    H5Dclose(ds);
    H5Gclose(g);
    g = H5Gopen2(f, "/runs/000001", H5P_DEFAULT);
    ds = H5Dopen2(g, "refits/latency_s", H5P_DEFAULT);
    assert_true(H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    assert_true(back[0] == 9.0);
    H5Dclose(ds);
    H5Gclose(g);
    H5Fclose(f);
    unlink(path);
}

static void test_refuses_foreign_files(void **state)
{
    char path[] = "/tmp/dcr-results-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not hdf5", 8), 8);
    close(fd);
    double v = 1;
    dcr_results_column_t col = {"latency_s", &v};
    dcr_results_run_t run = {"bench", "{}", NULL, 1, 1, &col, 0, NULL, NULL};
    char name[64];
    assert_int_equal(dcr_results_check("--out", path), DCR_EINVAL);
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_EINVAL);
    char text[16] = {0};
    fd = open(path, O_RDONLY);
    assert_int_equal(read(fd, text, sizeof(text) - 1), 8);
    close(fd);
    assert_string_equal(text, "not hdf5"); /* refused and untouched */
    unlink(path);
    /* An HDF5 file that is not ours is refused too. */
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    assert_int_equal(dcr_results_check("--out", path), DCR_EINVAL);
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_EINVAL);
    unlink(path);
    /* A new name and a results file pass the check; the check writes nothing. */
    assert_int_equal(dcr_results_check("--out", path), DCR_OK);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(dcr_results_append(path, &run, name, sizeof(name)), DCR_OK);
    assert_int_equal(dcr_results_check("--out", path), DCR_OK);
    unlink(path);
    assert_int_equal(dcr_results_check("--out", "/nonexistent-dir/x.h5"), DCR_EIO);
    assert_int_equal(dcr_results_append("/nonexistent-dir/x.h5", &run, name, sizeof(name)),
                     DCR_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_read_back),
        cmocka_unit_test(test_refuses_foreign_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
