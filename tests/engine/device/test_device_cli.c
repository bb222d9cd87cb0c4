/* ctest-labels: unit
 *
 * --device on the commands that take it (bench, construct, microbench detect
 * and apply, calibrate): a name other than cpu, cuda or auto, and cuda
 * where this build or machine has no GPU, are one line and exit 2 (with a
 * GPU they run: scripts/device-check.sh). microbench --device cpu runs the device
 * module's stages and reports what it found: the count of changed words and
 * of records follows from the rate and the buffer size alone. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/cli_run.h"
#include "dcr/device.h"

static bool gpu_here(void)
{
    const dcr_device_ops_t *cuda = dcr_device_find("cuda");
    return cuda != NULL && cuda->count(cuda) > 0;
}

static const char *const commands[] = {
    "bench",
    "construct",
    "microbench detect --mib 1",
    "microbench apply --scale 64 --layers 1",
    "calibrate --quick",
};

static void test_unknown_device(void **state)
{
    (void)state;
    char args[256];
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        snprintf(args, sizeof(args), "%s --device tpu", commands[i]);
        expect_error(args, 2, "--device tpu: expected cpu, cuda or auto");
    }
}

static void test_cuda_refused(void **state)
{
    (void)state;
    char args[256];
    bool gpu = gpu_here();
    if (gpu) return; /* accepted there: device-check.sh runs them */
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        snprintf(args, sizeof(args), "%s --device cuda", commands[i]);
        expect_error(args, 2, "--device cuda");
    }
}

static void test_microbench_detect_cpu(void **state)
{
    (void)state;
    json_t *j = run_json("microbench detect --device cpu --mib 1 --repeats 1 --json");
    assert_string_equal(json_string_value(json_object_get(j, "device")), "cpu");
    size_t bytes = (size_t)json_integer_value(json_object_get(j, "bytes"));
    assert_int_equal(bytes, 1 << 20);
    json_t *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(rows), 4);
    const double rates[] = {0.0, 0.01, 0.03, 0.05};
    for (size_t i = 0; i < 4; i++) {
        json_t *r = json_array_get(rows, i);
        double rate = json_real_value(json_object_get(r, "change_rate"));
        assert_true(rate == rates[i]);
        /* round(rate * words), BF16 words of the 1 MiB buffer. */
        json_int_t want = (json_int_t)(rates[i] * (double)(bytes / 2) + 0.5);
        assert_int_equal(json_integer_value(json_object_get(r, "changed")), want);
        assert_true(json_real_value(json_object_get(r, "detect_s")) > 0);
        assert_true(json_real_value(json_object_get(r, "copy_s")) > 0);
    }
    json_decref(j);
}

static void test_microbench_apply_cpu(void **state)
{
    (void)state;
    json_t *j = run_json("microbench apply --device cpu --scale 64 --layers 1 --repeats 1 "
                         "--rates 0.01,0.05 --json");
    assert_string_equal(json_string_value(json_object_get(j, "device")), "cpu");
    size_t bytes = (size_t)json_integer_value(json_object_get(j, "resident_bytes"));
    assert_true(bytes > 0);
    /* The bench checks the applied tensor against the records itself (a
     * mismatch fails the command); here the record counts. */
    json_t *rows = json_object_get(j, "rows");
    assert_int_equal(json_array_size(rows), 2);
    const double rates[] = {0.01, 0.05};
    for (size_t i = 0; i < 2; i++) {
        json_t *r = json_array_get(rows, i);
        json_int_t words = (json_int_t)((bytes & ~(size_t)63) / 2);
        json_int_t want = (json_int_t)(rates[i] * (double)words + 0.5);
        assert_int_equal(json_integer_value(json_object_get(r, "records")), want);
        assert_true(json_real_value(json_object_get(r, "dense_s")) > 0);
    }
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_device),
        cmocka_unit_test(test_cuda_refused),
        cmocka_unit_test(test_microbench_detect_cpu),
        cmocka_unit_test(test_microbench_apply_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
