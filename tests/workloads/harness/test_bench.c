/* ctest-labels: integration
 *
 * End-to-end refits through both transports, sync and async RL, several
 * rollout nodes and receivers per node, more owners than receivers and the
 * reverse, several model families: every receiver must equal its dense refit
 * after every refit, requests through the gate must see P^v or P^{v+1} only,
 * and cross-cluster bytes must follow the transport's rule (object store:
 * one upload plus one download per rollout node; relay: once across). Every
 * recorded refit's lower bounds lie within its latency, as the seed's
 * definitions require. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "testfiles.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "dcr/control.h"
#include "workloads/harness/bench.h"

static dcr_bench_config_t small(const char *model, int layers)
{
    dcr_bench_config_t c = dcr_bench_config_default();
    c.run.scenario.model = model;
    c.run.scenario.scale = 64;
    c.run.scenario.layers = layers;
    c.warmup = 1;
    c.refits = 2;
    c.readers = 1;
    return c;
}

/* The window's ends go through nanosecond integers for the trace: allow that rounding. */
#define WINDOW_ROUNDING_S 1e-6

static void assert_bounds_within_latency(const dcr_bench_refit_t *f)
{
    if (!f->traced) return;
    assert_true(f->intervals > 0);
    assert_true(f->transport_lb_s > 0 && f->construction_lb_s > 0);
    assert_true(f->construction_lb_s <= f->latency_s + WINDOW_ROUNDING_S);
    assert_true(f->transport_lb_s <= f->latency_s + WINDOW_ROUNDING_S);
    assert_true(f->bound_finalization_s >= 0 &&
                f->bound_finalization_s <= f->latency_s + WINDOW_ROUNDING_S);
}

/* Every refit compares on its owners and applies on its nodes, whose
 * threads start and end inside the refit: they spent CPU, and no more
 * than the machine's cores had during the latency. */
static void assert_cpu_within_latency(const dcr_bench_refit_t *f)
{
    double cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    double inside = f->cpu_s[DCR_THREAD_OWNER] + f->cpu_s[DCR_THREAD_NODE];
    assert_true(f->cpu_s[DCR_THREAD_OWNER] > 0 && f->cpu_s[DCR_THREAD_NODE] > 0);
    if (inside > cores * f->latency_s + 0.005)
        fail_msg("owners and nodes spent %.4f s of CPU in a %.4f s refit on %.0f cores", inside,
                 f->latency_s, cores);
}

static void run_ok(const dcr_bench_config_t *c, dcr_bench_result_t *r)
{
    if (dcr_bench_run(c, r) != DCR_OK) fail_msg("%s", dcr_error_detail());
    assert_int_equal(r->nrefits, c->refits);
    assert_true(r->bit_exact);
    for (int i = 0; i < r->nrefits; i++) {
        assert_true(r->refits[i].verified && r->refits[i].bit_exact);
        assert_true(r->refits[i].payload_bytes > 0);
        assert_int_equal(r->refits[i].attempts, 1);
        assert_bounds_within_latency(&r->refits[i]);
        assert_cpu_within_latency(&r->refits[i]);
    }
    assert_int_equal(r->request_mismatches, 0);
    assert_true(r->reference_s > 0 && r->mean_latency_s > 0);
}

/* Object store: every payload is uploaded once and downloaded by every node. */
static void test_objstore_sync_cross_bytes(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 2);
    c.run.serve.nodes = 3;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    for (int i = 0; i < r.nrefits; i++) {
        int64_t pay = r.refits[i].payload_bytes, cross = r.refits[i].cross_bytes;
        assert_true(cross >= pay * 4 && cross <= pay * 4 + pay / 5 + 65536); /* manifests on top */
    }
    dcr_bench_result_free(&r);
}

/* Relay tree: each payload crosses the cluster boundary once. */
static void test_relay_async_cross_once(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 2);
    c.run.transport = "relay";
    c.run.rl = DCR_RL_ASYNC;
    c.run.serve.nodes = 3;
    c.run.fanout = 2;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    assert_true(r.relay_reference_s > 0);
    for (int i = 0; i < r.nrefits; i++) {
        int64_t pay = r.refits[i].payload_bytes, cross = r.refits[i].cross_bytes;
        assert_true(cross >= pay && cross <= pay + pay / 5 + 65536);
    }
    dcr_bench_result_free(&r);
}

/* 8 owners, one receiver. */
static void test_more_owners_than_receivers(void **state)
{
    dcr_bench_config_t c = small("qwen2.5-0.5b", 2);
    c.run.scenario.train = (dcr_train_config_t){2, 4, 2, 1, 1, 1, 0};
    c.run.serve.nodes = 1;
    c.run.serve.gpus_per_node = 1;
    c.run.serve.tp = 1;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    assert_int_equal(r.owners, 8);
    assert_int_equal(r.receivers, 1);
    dcr_bench_result_free(&r);
}

/* One owner, eight receivers with expert parallelism, relay, sync. */
static void test_more_receivers_than_owners(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 1);
    c.run.scenario.train = (dcr_train_config_t){1, 1, 1, 1, 1, 1, 0};
    c.run.serve.nodes = 2;
    c.run.serve.gpus_per_node = 4;
    c.run.serve.tp = 4;
    c.run.serve.ep = true;
    c.run.transport = "relay";
    dcr_bench_result_t r;
    run_ok(&c, &r);
    assert_int_equal(r.owners, 1);
    assert_int_equal(r.receivers, 8);
    dcr_bench_result_free(&r);
}

/* Hybrid, tied and four-norm families; modes P and F; the extended mapping. */
static void test_families_and_modes(void **state)
{
    struct {
        const char *model;
        int layers;
        dcr_construct_mode_t mode;
        dcr_mapping_t mapping;
    } cases[] = {
        {"nemotron-3-nano-30b-a3b", 6, DCR_MODE_X, DCR_MAPPING_PAPER},
        {"llama-3.2-3b", 2, DCR_MODE_P, DCR_MAPPING_EXTENDED},
        {"gemma-3-4b", 2, DCR_MODE_F, DCR_MAPPING_PAPER},
        {"qwen2.5-1.5b", 2, DCR_MODE_X, DCR_MAPPING_EXTENDED},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dcr_bench_config_t c = small(cases[i].model, cases[i].layers);
        c.run.mode = cases[i].mode;
        c.run.scenario.mapping = cases[i].mapping;
        c.refits = 1;
        dcr_bench_result_t r;
        print_message("  %s mode %s\n", cases[i].model, dcr_construct_mode_name(cases[i].mode));
        run_ok(&c, &r);
        dcr_bench_result_free(&r);
    }
}

/* AdamW trajectories through the whole refit path. */
static void test_adamw_changes(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 2);
    c.run.adamw = true;
    c.run.lr = 1e-6;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    for (int i = 0; i < r.nrefits; i++) assert_true(r.refits[i].changed_elements > 0);
    dcr_bench_result_free(&r);
}

/* An FP8 block-quantized o_proj export (a scale dependency: one source change
 * can move a whole block) refits bit-exactly through the serving loaders. */
static void test_fp8_export(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 2);
    c.run.scenario.scale = 16; /* o_proj spans whole 128 x 128 blocks */
    c.run.scenario.fp8_layers = 1;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    dcr_bench_result_free(&r);
}

/* --trace-overhead: the recorder is on for timed refits 1 and 4, off for 2
 * and 3; bounds and intervals exist for the recorded ones only, and the two
 * mean latencies are those of the refits each side holds. */
static void test_trace_overhead_alternates(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 1);
    c.refits = 4;
    c.trace_overhead = true;
    dcr_bench_result_t r;
    run_ok(&c, &r);
    const bool want[4] = {true, false, false, true};
    double on = 0, off = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r.refits[i].traced, want[i]);
        if (!want[i]) assert_true(r.refits[i].intervals == 0 && r.refits[i].transport_lb_s == 0);
        *(want[i] ? &on : &off) += r.refits[i].latency_s / 2;
    }
    assert_int_equal(r.overhead.refits_on, 2);
    assert_int_equal(r.overhead.refits_off, 2);
    assert_true(fabs(r.overhead.latency_on_s - on) < 1e-12);
    assert_true(fabs(r.overhead.latency_off_s - off) < 1e-12);
    assert_true(r.overhead.span_ns > 0 && r.overhead.intervals_per_refit > 0);
    dcr_bench_result_free(&r);
    c.refits = 3;
    assert_int_equal(dcr_bench_run(&c, &r), DCR_EINVAL);
}

static void test_bad_configs_fail_cleanly(void **state)
{
    dcr_bench_config_t c = small("qwen3-30b-a3b", 1);
    c.run.transport = "carrier-pigeon";
    dcr_bench_result_t r;
    assert_int_equal(dcr_bench_run(&c, &r), DCR_EINVAL);
    c = small("qwen3-30b-a3b", 1);
    c.run.serve.tp = 3;
    c.run.serve.gpus_per_node = 3;
    assert_int_not_equal(dcr_bench_run(&c, &r), DCR_OK);
    c = small("qwen3-30b-a3b", 1);
    c.refits = 0;
    assert_int_equal(dcr_bench_run(&c, &r), DCR_EINVAL);
}

/* A --control FILE is fresh while absent or holding only the empty
 * initial record; once any record is bound (here version 3 of attempt 9,
 * written through the control API, not by a bench) it is refused with one
 * line naming the flag, the file and the version. */
static void test_control_fresh(void **state)
{
    (void)state;
    char dir[256];
    assert_true(testfiles_tmpdir(dir, sizeof(dir), "control-fresh"));
    char path[128];
    snprintf(path, sizeof path, "%s/control.db", dir);
    assert_int_equal(dcr_run_control_fresh("--control", path), DCR_OK); /* absent */
    dcr_control_config_t cfg = {path, 0};
    dcr_control_t *c = NULL;
    assert_int_equal(dcr_control_create("sqlite", &cfg, &c), DCR_OK);
    assert_int_equal(dcr_run_control_fresh("--control", path), DCR_OK); /* empty */
    dcr_commit_record_t empty, rec;
    memset(&empty, 0, sizeof empty);
    memset(&rec, 0, sizeof rec);
    rec.version = 3;
    rec.attempt = 9;
    rec.committed_ns = 1;
    assert_int_equal(dcr_control_cas(c, &empty, &rec), DCR_OK);
    dcr_control_destroy(c);
    assert_int_equal(dcr_run_control_fresh("--control", path), DCR_EINVAL);
    const char *d = dcr_error_detail();
    assert_non_null(strstr(d, "--control"));
    assert_non_null(strstr(d, path));
    assert_non_null(strstr(d, "version 3, attempt 9"));
    assert_null(strchr(d, '\n'));
    /* An etcd URL names a fresh namespace per run: nothing to refuse. */
    assert_int_equal(dcr_run_control_fresh("--control", "etcd://127.0.0.1:1/x"), DCR_OK);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* One rule for --anchor-every, against the configured retention window
 * (dcr_bench_config_check; dcr bench and dcr faults once wrote it twice, and
 * faults compared with the default window): a join replays the retained
 * versions after its anchor, so anchors need rollout-node processes over
 * the object store and at most cfg.retain versions between them. */
static void test_config_check_anchor_every(void **state)
{
    (void)state;
    dcr_bench_config_t c = small("qwen3-30b-a3b", 1);
    c.readers = 0;
    c.run.anchor_every = 10;
    c.run.retain = 12; /* a window larger than the default: anchors up to it */
    assert_int_equal(dcr_bench_config_check(&c, true), DCR_OK);
    c.run.retain = 4; /* smaller: refused, naming both */
    assert_int_equal(dcr_bench_config_check(&c, true), DCR_EINVAL);
    const char *d = dcr_error_detail();
    assert_non_null(strstr(d, "--anchor-every 10"));
    assert_non_null(strstr(d, "retention window (4 versions"));
    assert_null(strchr(d, '\n'));
    c.run.retain = 0; /* no window at all: nothing to replay from an anchor */
    assert_int_equal(dcr_bench_config_check(&c, true), DCR_EINVAL);
    c.run.retain = 12;
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_EINVAL); /* threads */
    assert_non_null(strstr(dcr_error_detail(), "--processes"));
    c.run.transport = "relay";
    assert_int_equal(dcr_bench_config_check(&c, true), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "objstore"));
    c.run.transport = "objstore";
    c.run.anchor_every = 0; /* never: no window needed */
    c.run.retain = 0;
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_OK);
}

/* The other rules of a run configuration, each one line naming its flag. */
static void test_config_check_rules(void **state)
{
    (void)state;
    dcr_bench_config_t c = small("qwen3-30b-a3b", 1);
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_OK);
    c.run.transport = "carrier-pigeon";
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--transport carrier-pigeon"));
    c = small("qwen3-30b-a3b", 1);
    c.trace_overhead = true;
    c.refits = 3;
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--trace-overhead"));
    c = small("qwen3-30b-a3b", 1); /* readers 1: no request threads across processes */
    assert_int_equal(dcr_bench_config_check(&c, true), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--readers"));
    c = small("qwen3-30b-a3b", 1);
    c.run.transport = "relay";
    c.keep_payloads = true;
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--keep-payloads"));
    c = small("qwen3-30b-a3b", 1);
    c.run.adamw = true;
    c.run.lr = 0;
    assert_int_equal(dcr_bench_config_check(&c, false), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "--lr"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_objstore_sync_cross_bytes),
        cmocka_unit_test(test_relay_async_cross_once),
        cmocka_unit_test(test_more_owners_than_receivers),
        cmocka_unit_test(test_more_receivers_than_owners),
        cmocka_unit_test(test_families_and_modes),
        cmocka_unit_test(test_adamw_changes),
        cmocka_unit_test(test_fp8_export),
        cmocka_unit_test(test_trace_overhead_alternates),
        cmocka_unit_test(test_bad_configs_fail_cleanly),
        cmocka_unit_test(test_control_fresh),
        cmocka_unit_test(test_config_check_anchor_every),
        cmocka_unit_test(test_config_check_rules),
    };
    /* One test by name (a glob), as in test_faults: DCR_TEST_FILTER. */
    if (getenv("DCR_TEST_FILTER")) cmocka_set_test_filter(getenv("DCR_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
