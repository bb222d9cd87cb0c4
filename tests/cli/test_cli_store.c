/* ctest-labels: integration
 *
 * `dcr bench --store URL --s3-endpoint URL` as a user meets it: usage
 * errors are one line and exit 2, failures to reach the store one line and
 * exit 1, and a run over a real S3 server (s3rver, started here on a
 * loopback port it picks) is bit-exact. s3rver does not verify signatures,
 * so this says nothing about SigV4 signing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli_run.h"
#include "engine/transport/s3rver_fixture.h"

static s3rver_fixture_t g_s3;

static void test_store_usage_errors(void **state)
{
    (void)state;
    expect_error("bench --s3-endpoint http://127.0.0.1:9", 2,
                 "--s3-endpoint needs --store s3://BUCKET/PREFIX");
    expect_error("bench --store s3://dcr/p", 2, "needs --s3-endpoint http[s]://HOST[:PORT]");
    expect_error("bench --store ftp://x/y", 2, "unknown scheme");
    expect_error("bench --store s3://dcr/p --s3-endpoint ftp://h", 2,
                 "expected http://HOST[:PORT] or https://HOST[:PORT]");
    expect_error("bench --store s3://dcr/p --s3-endpoint http://h --transport relay", 2,
                 "--store needs --transport objstore");
    expect_error("bench --store dir:/tmp/x --s3-endpoint http://h", 2,
                 "--s3-endpoint is for s3:// stores");
    expect_error("bench --store s3://dcr/p --s3-endpoint http://h --keep-payloads /tmp/k", 2,
                 "give one");
    static result_t r;
    run(&r, "bench --help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--store"));
    assert_non_null(strstr(r.out, "--s3-endpoint"));
}

/* A folder of the user's (files, no store marker) is refused as usage
 * before any setup, and nothing in it is touched. */
static void test_store_dir_not_ours(void **state)
{
    (void)state;
    char dir[] = "/tmp/dcr-store-test-XXXXXX", file[64], args[160];
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/notes.txt", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("the user's\n", f);
    fclose(f);
    snprintf(args, sizeof(args), "bench --store dir:%s", dir);
    expect_error(args, 2, "holds files and no .dcr-store marker");
    /* The fault campaign takes --store too: the same rule, the same line. */
    snprintf(args, sizeof(args), "faults campaign --store dir:%s", dir);
    expect_error(args, 2, "holds files and no .dcr-store marker");
    assert_int_equal(access(file, F_OK), 0);
    assert_int_equal(unlink(file), 0);
    /* Emptied, it is a store dcr may use: no usage error any more. */
    snprintf(args, sizeof(args), "bench --layers 1 --warmup 0 --refits 1 --store dir:%s", dir);
    static result_t r;
    run(&r, args);
    if (r.rc != 0) fail_msg("dcr %s: exit %d (%s)", args, r.rc, r.err);
    char rm[96];
    snprintf(rm, sizeof(rm), "rm -rf %s", dir); /* our own mkdtemp name, no user text */
    assert_int_equal(system(rm), 0);
}

static void test_store_unreachable(void **state)
{
    (void)state;
    const char *small = "bench --layers 1 --warmup 0 --refits 1 --store s3://dcr/p";
    char cmd[512];
    setenv("DCR_LOG", "warn", 1); /* stderr: the error line only, no progress lines */
    /* Nothing listens on port 1 of loopback. */
    snprintf(cmd, sizeof cmd, "%s --s3-endpoint http://127.0.0.1:1", small);
    expect_error(cmd, 1, "http://127.0.0.1:1");
    /* A missing credential variable is named. */
    char *region = strdup(getenv("AWS_REGION"));
    unsetenv("AWS_REGION");
    snprintf(cmd, sizeof cmd, "%s --s3-endpoint %s", small, g_s3.endpoint);
    expect_error(cmd, 1, "AWS_REGION is not set");
    setenv("AWS_REGION", region, 1);
    free(region);
    /* The bucket must exist. */
    snprintf(cmd, sizeof cmd,
             "bench --layers 1 --warmup 0 --refits 1 --store s3://no-such-bucket/p "
             "--s3-endpoint %s",
             g_s3.endpoint);
    expect_error(cmd, 1, "bucket no-such-bucket does not exist");
    unsetenv("DCR_LOG");
}

static void test_bench_over_s3(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "bench --layers 2 --warmup 1 --refits 2 --store s3://%s/bench --s3-endpoint %s "
             "--json",
             g_s3.bucket, g_s3.endpoint);
    json_t *j = run_json(cmd);
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    assert_true(json_real_value(json_object_get(j, "speedup")) > 0);
    assert_true(json_real_value(json_object_get(j, "reference_s")) > 0);
    json_t *cfg = json_object_get(j, "config");
    if (cfg != NULL && json_object_get(cfg, "store") != NULL)
        assert_non_null(strstr(json_string_value(json_object_get(cfg, "store")), "s3://"));
    json_decref(j);
}

int main(void)
{
    s3rver_env();
    s3rver_start(&g_s3, "dcr-cli");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_usage_errors),
        cmocka_unit_test(test_store_dir_not_ours),
        cmocka_unit_test(test_store_unreachable),
        cmocka_unit_test(test_bench_over_s3),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    s3rver_stop(&g_s3);
    return failed;
}
