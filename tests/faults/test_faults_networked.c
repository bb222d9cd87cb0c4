/* ctest-labels: integration
 *
 * Faults over the networked backends: the object store on S3 (s3rver) and
 * the control plane on etcd, both started here on loopback ports they pick
 * (a server that cannot start fails the test). The stored-object faults act
 * through the faulty object store that wraps the S3 one, the control faults
 * through the faulty control plane that wraps etcd; every run ends with
 * every live receiver equal to a dense refit of the committed version and
 * no version lost. And `dcr faults campaign --store s3://... --control
 * etcd://...` end to end, with its usage errors. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/cli_run.h"
#include "dcr/log.h"
#include "dcr/objstore.h"
#include "engine/control/etcd_server.h"
#include "engine/transport/s3rver_fixture.h"
#include "faults/faults_run.h"

static etcd_server_t g_etcd;
static s3rver_fixture_t g_s3;
static char g_control[128]; /* etcd://127.0.0.1:PORT/PREFIX */

/* One fault of `kind` armed before step 1 of a 3-step objstore run on S3
 * and etcd. */
static void run_one(dcr_fault_kind_t kind, const char *prefix)
{
    dcr_faults_run_config_t c = dcr_faults_run_config_default();
    c.steps = 3;
    c.kill_every = 0;
    c.bench.run.transport = "objstore";
    char store[160];
    snprintf(store, sizeof(store), "s3://%s/%s", g_s3.bucket, prefix);
    c.bench.run.store = store;
    c.bench.run.s3_endpoint = g_s3.endpoint;
    c.bench.run.control_path = g_control;
    dcr_faults_planned_t plan = {1, {kind, 0, 0, 60, 2, DCR_COORD_STEP_PREPARE}};
    if (kind == DCR_FAULT_CONTROL_DOWN || kind == DCR_FAULT_COMMIT_REPLY) plan.fault.target = -1;
    c.plan = &plan;
    c.nplan = 1;
    dcr_faults_summary_t s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(dcr_faults_run(&c, &s), DCR_OK);
    print_message("  %-16s s3+etcd fired %lld, attempts %d, retries %d, commits %d, stops %d\n",
                  dcr_fault_kind_name(kind), (long long)s.faults_by_kind[kind], s.attempts,
                  s.retries, s.commits, s.stops);
    assert_int_equal(s.faults_by_kind[kind], 1);
    assert_int_equal(s.faults, 1);
    assert_int_equal(s.mismatches, 0);
    assert_int_equal(s.baseline_mismatches, 0);
    assert_int_equal(s.lost, 0);
    assert_true(s.checks > 0);
    assert_int_equal(s.commits, 3);
    assert_int_equal((int)s.version, 3);
    /* A damaged stored payload or a refused call costs a retry; a lost
     * commit reply does not (the record says it committed). */
    if (kind == DCR_FAULT_COMMIT_REPLY)
        assert_int_equal(s.retries, 0);
    else
        assert_true(s.retries >= 1);
}

static void test_object_faults_on_s3(void **state)
{
    (void)state;
    run_one(DCR_FAULT_TRUNCATE_OBJECT, "truncate");
    run_one(DCR_FAULT_REMOVE_OBJECT, "remove");
}

static void test_control_faults_on_etcd(void **state)
{
    (void)state;
    run_one(DCR_FAULT_CONTROL_DOWN, "down");
    run_one(DCR_FAULT_COMMIT_REPLY, "reply");
}

/* Each run keeps its objects under its own prefix and removes them at the
 * end: the bucket is empty after the runs above. */
static void test_runs_leave_no_objects(void **state)
{
    (void)state;
    char url[160];
    snprintf(url, sizeof(url), "s3://%s", g_s3.bucket);
    dcr_objstore_config_t oc = {.url = url, .s3_endpoint = g_s3.endpoint};
    dcr_objstore_t *s = NULL;
    assert_int_equal(dcr_objstore_create(&oc, &s), DCR_OK);
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    assert_int_equal(dcr_objstore_list_all(s, "", &e, &n), DCR_OK);
    for (size_t i = 0; i < n && i < 5; i++) print_message("  left: %s\n", e[i].key);
    assert_int_equal(n, 0);
    free(e);
    dcr_objstore_destroy(s);
}

static json_int_t jint(json_t *j, const char *key)
{
    json_t *v = json_object_get(j, key);
    if (!json_is_integer(v)) fail_msg("campaign JSON: no integer %s", key);
    return json_integer_value(v);
}

static void test_cli_campaign(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof(args),
             "faults campaign --seeds 2 --steps 3 --faults-per-step 2 --store s3://%s/campaign/ "
             "--s3-endpoint %s --control %s --json",
             g_s3.bucket, g_s3.endpoint, g_control);
    json_t *j = run_json(args);
    print_message("  campaign on s3+etcd: %lld faults, %lld attempts, %lld commits, %lld stops\n",
                  (long long)jint(j, "faults"), (long long)jint(j, "attempts"),
                  (long long)jint(j, "commits"), (long long)jint(j, "stops"));
    assert_int_equal(jint(j, "mismatches"), 0);
    assert_int_equal(jint(j, "baseline_mismatches"), 0);
    assert_int_equal(jint(j, "lost"), 0);
    assert_int_equal(jint(j, "gate_violations"), 0);
    assert_int_equal(jint(j, "commit_violations"), 0);
    assert_int_equal(jint(j, "membership_mismatches"), 0);
    assert_int_equal(jint(j, "steps"), 6);
    assert_int_equal(jint(j, "commits") + jint(j, "stops"), 6);
    assert_true(jint(j, "checks") > 0);
    assert_true(jint(j, "faults") > 0);
    json_decref(j);
}

static void test_cli_usage_errors(void **state)
{
    (void)state;
    expect_error("faults train --transport relay --store s3://b/p --s3-endpoint http://h:1", 2,
                 "--store needs --transport objstore");
    expect_error("faults campaign --s3-endpoint http://h:1", 2, "--s3-endpoint needs --store");
    expect_error("faults campaign --store s3://b/p", 2, "needs --s3-endpoint");
    expect_error("faults train --store s3://b/p --s3-endpoint ftp://h", 2, "expected http://");
    expect_error("faults train --store /tmp/x --s3-endpoint http://h:1", 2,
                 "--s3-endpoint is for s3:// stores");
}

int main(void)
{
    if (!getenv("DCR_LOG")) dcr_log_set_level(DCR_LOG_ERROR);
    const struct CMUnitTest usage[] = {
        cmocka_unit_test(test_cli_usage_errors),
    };
    const struct CMUnitTest networked[] = {
        cmocka_unit_test(test_object_faults_on_s3),
        cmocka_unit_test(test_control_faults_on_etcd),
        cmocka_unit_test(test_runs_leave_no_objects),
        cmocka_unit_test(test_cli_campaign),
    };
    int failed = cmocka_run_group_tests_name("faults usage", usage, NULL, NULL);
    if (!etcd_server_start(&g_etcd)) {
        fprintf(stderr, "FAILED: cannot start etcd for the networked faults tests\n");
        return 1;
    }
    snprintf(g_control, sizeof(g_control), "etcd://%s/faultstest", g_etcd.hostport);
    s3rver_env();
    s3rver_start(&g_s3, "dcr-faults");
    failed += cmocka_run_group_tests_name("faults on s3 and etcd", networked, NULL, NULL);
    s3rver_stop(&g_s3);
    etcd_server_stop(&g_etcd);
    return failed;
}
