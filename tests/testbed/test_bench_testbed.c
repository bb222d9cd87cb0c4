/* dcr bench --testbed netns (issue 16 item 2): one multi-process refit run
 * across a 2 + 2 namespace testbed (owners by mpirun into the training
 * hosts, rollout nodes in the rollout hosts, etcd and s3rver on the services
 * host), bit-exact by the verifier, the shaped links measured against their
 * settings, and nothing left behind, also when the launcher is SIGKILLed.
 *
 * Needs root and network namespaces: without them the test exits 77, which
 * CTest reports as SKIPPED with the reason printed (never as passed). With
 * them, a missing etcd, s3rver or mpirun is a failure.
 *
 * ctest-labels: slow
 */
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>

#include "testbed_test.h"

/* The run's link settings: the oracle of the rate check. */
#define LINK_MBIT  100.0
#define LOCAL_MBIT 200.0
#define RUN_FLAGS                                                                                  \
    "--scale 64 --layers 2 --seed 7 --train-nodes 2 --gpus-per-node 2 --rollout-nodes 2 "          \
    "--link-gbps 0.1 --local-gbps 0.2"

static int g_id;
static char g_cli[1024];
static char g_out[1 << 18];

/* Runs a shell command, stdout (and stderr when `merge`) into g_out; its exit status. */
#define sh_merge(merge, ...) testbed_sh(g_out, sizeof(g_out), merge, __VA_ARGS__)
#define sh(...)              sh_merge(true, __VA_ARGS__)

static bool leftovers(void)
{
    return testbed_test_leftovers(g_id);
}

static void teardown_now(void)
{
    testbed_test_down(g_id);
}

static void test_bad_input_is_one_line(void **state)
{
    (void)state;
    assert_int_equal(sh("%s bench --testbed vm " RUN_FLAGS, g_cli), 2);
    assert_non_null(strstr(g_out, "--testbed vm: expected netns"));
    assert_int_equal(testbed_count_lines(g_out), 1);
    assert_int_equal(sh("%s bench --testbed netns --store dir:/tmp/x " RUN_FLAGS, g_cli), 2);
    assert_non_null(strstr(g_out, "drop --store"));
    assert_int_equal(sh("%s bench --testbed netns --testbed-id 56 " RUN_FLAGS, g_cli), 2);
    assert_int_equal(sh("%s bench --testbed-id 3 " RUN_FLAGS, g_cli), 2);
    assert_non_null(strstr(g_out, "--testbed-id needs --testbed netns"));
    /* The relay needs its owners as the MPI job that the testbed places. */
    assert_int_equal(sh("%s bench --processes --owner-threads --transport relay " RUN_FLAGS, g_cli),
                     2);
    assert_non_null(strstr(g_out, "needs the owners as an MPI job (not --owner-threads)"));
    assert_int_equal(testbed_count_lines(g_out), 1);
    assert_false(leftovers());
}

/* Finds the measured link FROM -> TO in the "testbed" links. */
static const json_t *find_link(const json_t *links, const char *from, const char *to)
{
    size_t i;
    const json_t *l;
    json_array_foreach(links, i, l)
    {
        if (!strcmp(json_string_value(json_object_get(l, "from")), from) &&
            !strcmp(json_string_value(json_object_get(l, "to")), to))
            return l;
    }
    return NULL;
}

static void check_rate(const json_t *links, const char *from, const char *to, double mbit)
{
    const json_t *l = find_link(links, from, to);
    if (!l) fail_msg("no measured link %s -> %s", from, to);
    double m = json_number_value(json_object_get(l, "measured_mbit"));
    /* Goodput under a shaped rate (headers are shaped too): at most the
     * setting plus the burst's share, at least 85% of it. */
    if (!(m >= 0.85 * mbit && m <= 1.15 * mbit))
        fail_msg("%s -> %s measured %.1f Mbit/s, set %.1f", from, to, m, mbit);
}

/* The full-checkpoint reference ran over the shaped links: the speedup's
 * reference is its time, every host moved its share (each training host
 * half the checkpoint up, each rollout host all of it down), no host beat
 * its link's setting (the kernel's cap, plus the 15% that a burst and the
 * timing of a short transfer allow), each host's ok says whether it was
 * within 15%, and neither phase was faster than the slowest host's bytes
 * at the set rate allow. */
static void check_reference(const json_t *j)
{
    const json_t *ref = json_object_get(json_object_get(j, "testbed"), "reference");
    if (!ref) fail_msg("no testbed.reference in the JSON output");
    double secs = json_number_value(json_object_get(ref, "seconds"));
    assert_true(secs > 0);
    assert_true(fabs(json_number_value(json_object_get(j, "reference_s")) - secs) < 1e-9);
    double lat = json_number_value(json_object_get(j, "mean_latency_s"));
    assert_true(fabs(json_number_value(json_object_get(j, "speedup")) - secs / lat) < 1e-6);
    json_int_t total = json_integer_value(json_object_get(ref, "checkpoint_bytes"));
    assert_int_equal(total, json_integer_value(json_object_get(j, "checkpoint_bytes")));
    const json_t *hosts = json_object_get(ref, "hosts");
    assert_int_equal(json_array_size(hosts), 4);
    static const char *const names[] = {"t0", "t1", "r0", "r1"};
    for (size_t i = 0; i < 4; i++) {
        const json_t *h = json_array_get(hosts, i);
        bool up = i < 2;
        assert_string_equal(json_string_value(json_object_get(h, "host")), names[i]);
        assert_string_equal(json_string_value(json_object_get(h, "direction")),
                            up ? "upload" : "download");
        json_int_t bytes = json_integer_value(json_object_get(h, "bytes"));
        assert_int_equal(bytes, up ? total / 2 + (i == 0 ? total % 2 : 0) : total);
        double m = json_number_value(json_object_get(h, "measured_mbit"));
        assert_true(fabs(json_number_value(json_object_get(h, "configured_mbit")) - LINK_MBIT) <
                    1e-9);
        if (m > 1.15 * LINK_MBIT)
            fail_msg("%s moved %.1f Mbit/s over a %.0f link", names[i], m, LINK_MBIT);
        assert_int_equal(json_is_true(json_object_get(h, "ok")), m >= 0.85 * LINK_MBIT);
        double floor_s = (double)bytes * 8 / (1.15 * LINK_MBIT * 1e6);
        assert_true(json_number_value(json_object_get(ref, up ? "upload_s" : "download_s")) >=
                    floor_s);
    }
}

/* One 2-refit `dcr bench --testbed netns` run with `extra` flags: its JSON
 * (the caller frees it); its stderr's tail is shown when it fails. */
static json_t *run_bench(const char *extra, const char *tag)
{
    char err[256];
    snprintf(err, sizeof(err), "/tmp/dcr-bench-testbed-%s-%d.err", tag, (int)getpid());
    int rc = sh_merge(false,
                      "%s bench --testbed netns --testbed-id %d %s " RUN_FLAGS
                      " --warmup 0 --refits 2 --json 2>%s",
                      g_cli, g_id, extra, err);
    if (rc != 0) {
        sh("tail -30 %s", err);
        fprintf(stderr, "%s", g_out);
    }
    assert_int_equal(rc, 0);
    json_error_t je;
    json_t *j = json_loads(g_out, 0, &je);
    if (!j) fail_msg("bench --json output is not JSON: %s", je.text);
    unlink(err);
    return j;
}

/* What the services spent on the refits ("services_after_reference"):
 * s3rver's process is Node; its CPU seconds are positive (the refits used
 * the store) and at most its wall time on every core of this machine. */
static void check_services(const json_t *tb)
{
    const json_t *sv = json_object_get(tb, "services_after_reference");
    if (!json_is_object(sv)) fail_msg("no testbed.services_after_reference");
    assert_string_equal(json_string_value(json_object_get(sv, "s3rver_process")), "node");
    double cpu = json_number_value(json_object_get(sv, "s3rver_cpu_s")),
           wall = json_number_value(json_object_get(sv, "wall_s"));
    assert_true(cpu > 0 && wall > 0);
    assert_true(cpu <= wall * (double)sysconf(_SC_NPROCESSORS_ONLN) + 0.05);
    assert_true(json_number_value(json_object_get(sv, "etcd_cpu_s")) >= 0);
}

/* The store's CPU across each refit ("refits"[].store_cpu_s, sampled from
 * s3rver's /proc stat around each refit): the refits used the store, and
 * together they used at most what the services' span after the reference
 * (which holds them, plus the verifier's reads) measured, give or take a
 * clock tick per sample; the mean and its share of the latency agree. */
static void check_store_cpu(const json_t *j)
{
    const json_t *refits = json_object_get(j, "refits");
    double sum = 0;
    for (size_t i = 0; i < json_array_size(refits); i++) {
        const json_t *v = json_object_get(json_array_get(refits, i), "store_cpu_s");
        if (!json_is_number(v)) fail_msg("refit %zu has no store_cpu_s", i);
        assert_true(json_number_value(v) >= 0);
        sum += json_number_value(v);
    }
    assert_true(sum > 0);
    double total = json_number_value(
        json_object_get(json_object_get(json_object_get(j, "testbed"), "services_after_reference"),
                        "s3rver_cpu_s"));
    double tick = 1.0 / (double)sysconf(_SC_CLK_TCK);
    assert_true(sum <= total + 2 * tick * (double)json_array_size(refits));
    double mean = json_number_value(json_object_get(j, "store_cpu_s_mean"));
    assert_true(fabs(mean - sum / (double)json_array_size(refits)) < 1e-9);
    double latency = json_number_value(json_object_get(j, "mean_latency_s"));
    assert_true(fabs(json_number_value(json_object_get(j, "store_cpu_share_of_latency")) -
                     mean / latency) < 1e-9);
}

static void test_refit_across_testbed_is_bit_exact(void **state)
{
    (void)state;
    double t0 = (double)time(NULL);
    json_t *j = run_bench("", "objstore");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    const json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), 2);
    for (size_t i = 0; i < 2; i++) {
        assert_true(json_is_true(json_object_get(json_array_get(refits, i), "verified")));
        assert_true(json_is_true(json_object_get(json_array_get(refits, i), "bit_exact")));
        assert_true(
            json_integer_value(json_object_get(json_array_get(refits, i), "payload_bytes")) > 0);
    }
    /* 2 training nodes x 2 GPUs: 4 owner ranks; 2 rollout-node processes. */
    const json_t *p = json_object_get(j, "processes");
    assert_int_equal(json_integer_value(json_object_get(p, "owners")), 4);
    assert_int_equal(json_integer_value(json_object_get(p, "rollout_nodes")), 2);
    const json_t *tb = json_object_get(j, "testbed");
    assert_non_null(tb);
    char control[64];
    snprintf(control, sizeof(control), "etcd://10.%d.0.2:2379", 200 + g_id);
    assert_non_null(strstr(json_string_value(json_object_get(tb, "control")), control));
    /* Every host's link both ways against the services host, and one pair
     * inside each cluster: 2 x (2 + 2) + 2. */
    const json_t *links = json_object_get(tb, "links");
    assert_int_equal(json_array_size(links), 10);
    const char *hosts[] = {"t0", "t1", "r0", "r1"};
    for (int i = 0; i < 4; i++) {
        check_rate(links, hosts[i], "svc", LINK_MBIT);
        check_rate(links, "svc", hosts[i], LINK_MBIT);
    }
    check_rate(links, "t0", "t1", LOCAL_MBIT);
    check_rate(links, "r0", "r1", LOCAL_MBIT);
    check_reference(j);
    /* The store's probed per-request costs (what dcr sim --validate takes). */
    const json_t *store = json_object_get(tb, "store");
    assert_true(json_number_value(json_object_get(store, "put_ms")) > 0);
    assert_true(json_number_value(json_object_get(store, "get_ms")) > 0);
    assert_true(json_number_value(json_object_get(store, "list_ms")) > 0);
    check_services(tb);
    check_store_cpu(j);
    json_decref(j);
    assert_false(leftovers());
    fprintf(stderr, "bench --testbed run: %.0f s\n", (double)time(NULL) - t0);
}

/* One host's counter in "traffic_after_reference". */
static json_int_t host_traffic(const json_t *traffic, const char *host, const char *key)
{
    size_t i;
    const json_t *h;
    json_array_foreach(traffic, i, h)
    {
        if (!strcmp(json_string_value(json_object_get(h, "host")), host))
            return json_integer_value(json_object_get(h, key));
    }
    fail_msg("no traffic_after_reference entry for %s", host);
    return -1;
}

/* --transport relay over the testbed: bit-exact, and the payloads crossed
 * the shaped links. With 2 nodes at fan-out 2, r0 is the root and r1 its
 * child, so by the relay's own routing (no store: the roles get none) every
 * payload byte leaves the training hosts, and r0 forwards each one over its
 * link to r1, which receives it: the kernel's counters since the reference
 * ended must each hold at least the refits' payload bytes. */
static void test_relay_across_testbed_is_bit_exact(void **state)
{
    (void)state;
    double t0 = (double)time(NULL);
    json_t *j = run_bench("--transport relay", "relay");
    assert_true(json_is_true(json_object_get(j, "bit_exact")));
    /* No store on the relay's path: no store CPU figure. */
    assert_null(json_object_get(j, "store_cpu_s_mean"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "config"), "transport")), "relay");
    const json_t *refits = json_object_get(j, "refits");
    assert_int_equal(json_array_size(refits), 2);
    json_int_t payload = 0;
    for (size_t i = 0; i < 2; i++) {
        const json_t *r = json_array_get(refits, i);
        assert_true(json_is_true(json_object_get(r, "verified")));
        assert_true(json_is_true(json_object_get(r, "bit_exact")));
        /* The relay: each payload crosses the cluster boundary once. */
        assert_int_equal(json_integer_value(json_object_get(r, "cross_bytes")),
                         json_integer_value(json_object_get(r, "payload_bytes")));
        payload += json_integer_value(json_object_get(r, "payload_bytes"));
    }
    assert_true(payload > 0);
    const json_t *traffic =
        json_object_get(json_object_get(j, "testbed"), "traffic_after_reference");
    if (!json_is_array(traffic)) fail_msg("no testbed.traffic_after_reference");
    json_int_t train_tx =
        host_traffic(traffic, "t0", "tx_bytes") + host_traffic(traffic, "t1", "tx_bytes");
    if (train_tx < payload)
        fail_msg("training hosts sent %lld bytes, payloads %lld", (long long)train_tx,
                 (long long)payload);
    if (host_traffic(traffic, "r0", "tx_bytes") < payload)
        fail_msg("root r0 forwarded %lld bytes, payloads %lld",
                 (long long)host_traffic(traffic, "r0", "tx_bytes"), (long long)payload);
    if (host_traffic(traffic, "r1", "rx_bytes") < payload)
        fail_msg("r1 received %lld bytes, payloads %lld",
                 (long long)host_traffic(traffic, "r1", "rx_bytes"), (long long)payload);
    json_decref(j);
    assert_false(leftovers());
    fprintf(stderr, "bench --testbed --transport relay run: %.0f s\n", (double)time(NULL) - t0);
}

/* SIGKILL to the launcher mid-run: its watcher brings the testbed down. */
static void test_sigkill_leaves_nothing(void **state)
{
    (void)state;
    char err[128];
    snprintf(err, sizeof(err), "/tmp/dcr-bench-testbed-kill-%d.err", (int)getpid());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen(err, "w", stderr);
        char id[16];
        snprintf(id, sizeof(id), "%d", g_id);
        execl(g_cli, g_cli, "bench", "--testbed", "netns", "--testbed-id", id, "--scale", "64",
              "--layers", "2", "--seed", "7", "--train-nodes", "2", "--gpus-per-node", "2",
              "--rollout-nodes", "2", "--link-gbps", "0.1", "--local-gbps", "0.2", "--warmup", "0",
              "--refits", "1000", (char *)NULL);
        _exit(127);
    }
    bool refitting = false;
    for (int i = 0; i < 900 && !refitting; i++) {
        sh("grep -c 'timed refit 1:' %s; true", err);
        refitting = atoi(g_out) > 0;
        if (!refitting) usleep(100000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (!refitting) {
        sh("tail -20 %s", err);
        fail_msg("no timed refit within 90 s: %s", g_out);
    }
    bool gone = false;
    for (int i = 0; i < 300 && !gone; i++) {
        gone = !leftovers();
        if (!gone) usleep(100000);
    }
    unlink(err);
    assert_true(gone);
    /* No role process of this run outlives it. */
    sh("pgrep -f -- '[-]-s3-endpoint http://10.%d.0.2:' | wc -l", 200 + g_id);
    assert_int_equal(atoi(g_out), 0);
}

int main(void)
{
    g_id = testbed_test_id(0, 52 + (int)(getpid() % 4)); /* test_testbed uses 20..51 */
    const char *cli = getenv("DCR_CLI");
    snprintf(g_cli, sizeof(g_cli), "%s", cli && *cli ? cli : DCR_CLI_PATH);
    if (!testbed_test_can_run(g_id, "dcr bench --testbed")) return TESTBED_SKIP_CODE;
    teardown_now(); /* what an earlier crashed run under this id left */
    atexit(teardown_now);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input_is_one_line),
        cmocka_unit_test(test_refit_across_testbed_is_bit_exact),
        cmocka_unit_test(test_relay_across_testbed_is_bit_exact),
        cmocka_unit_test(test_sigkill_leaves_nothing),
    };
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
