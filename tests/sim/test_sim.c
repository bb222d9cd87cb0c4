/* ctest-labels: unit
 *
 * The SimGrid capacity planner: generated platforms, the engine's chunk and
 * bucket rules against hand-computed packings, refits and references whose
 * times follow from first principles (bytes, bandwidth, latency, compute),
 * V_cross of both transports, invariants on real inventories, and the
 * calibration file's validation. Expected values are computed here from the
 * inputs, never copied from the simulator's output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "dcr/codec.h"
#include "sim/calibrate.h"
#include "sim/platform.h"
#include "sim/description.h"
#include "sim/sim.h"
#include "sim/sweep.h"
#include "sim/validate.h"
#include "sim/workload.h"
#include "workloads/harness/construct_bench.h"
#include "sim_test_cal.h"

/* SimGrid computes in doubles; its flow model adds nothing beyond the
 * link figures (CM02, no TCP factors), so times agree to rounding. */
#define NEAR(a, b) assert_true(fabs((double)(a) - (double)(b)) <= 1e-6 * fabs((double)(b)) + 1e-9)

/* ---- helpers ------------------------------------------------------------------ */

/* A cluster whose only costs are the ones a test sets. */
static dcr_sim_cluster_t bare_cluster(int rollout_nodes)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.rollout_nodes = rollout_nodes;
    c.cross_gbps = 8;  /* 1e9 bytes per second */
    c.flow_gbps = 0;   /* no per-flow cap */
    c.local_gbps = 80; /* 1e10 bytes per second */
    c.latency_ms = 10;
    c.local_latency_ms = 0;
    c.store_latency_ms = 0;
    c.store_list_ms = 0;
    c.store_put_ms = 0;
    c.ack_rtt = false;
    c.ref_object_mib = 1 << 20; /* one object per owner */
    return c;
}

/* One owner that computes `compute` seconds, then finishes one payload of
 * `bytes`, which every receiver applies in `apply` seconds. */
static dcr_sim_workload_t *one_payload(int64_t bytes, double compute, double apply, double finalize)
{
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_create(1, 1, 1, &w), DCR_OK);
    dcr_sim_owner_t *o = &w->owners[0];
    dcr_sim_step_t c = {DCR_SIM_STEP_COMPUTE, DCR_SIM_WORK_CHUNK, -1, -1, 0, 0, 0, compute};
    dcr_sim_step_t f = {DCR_SIM_STEP_FLUSH, DCR_SIM_WORK_ENCODE, -1, 0, 0, bytes, 1, 0};
    assert_int_equal(dcr_sim_owner_push(o, &c), DCR_OK);
    assert_int_equal(dcr_sim_owner_push(o, &f), DCR_OK);
    w->payloads = calloc(1, sizeof(*w->payloads));
    w->apply_s = calloc(1, sizeof(double));
    w->payloads[0] = (dcr_sim_payload_t){0, 0, bytes, 1, 1, bytes, 2};
    w->apply_s[0] = apply;
    w->npayloads = w->cap = 1;
    w->payload_bytes = bytes;
    w->checkpoint_bytes = 1000000000;
    w->finalize_s = finalize;
    o->npayloads = 1;
    return w;
}

/* ---- platform ------------------------------------------------------------------ */

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

static void test_platform_generated(void **state)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.train_nodes = 2;
    c.train_gpus = 2;
    c.rollout_nodes = 3;
    c.rollout_gpus = 4;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    uint8_t pairs[16] = {0};
    pairs[0 * 4 + 3] = 1; /* owner 0 sends parts to owner 3 (another node) */
    pairs[1 * 4 + 0] = 1; /* owner 1 to owner 0 (same node) */
    assert_int_equal(dcr_sim_platform_write(&c, pairs, f), DCR_OK);
    fclose(f);
    assert_non_null(strstr(text, "<host id=\"train-1-1\""));
    assert_non_null(strstr(text, "<host id=\"rollout-2\" speed=\"1Gf\" core=\"4\""));
    assert_null(strstr(text, "<host id=\"cpu\"")); /* only with shared cores */
    assert_int_equal(count(text, "<host "), 4 + 3 + 1);
    /* Per-flow caps per node (FATPIPE) with the one-way latency, 1 ms, plus
     * the store's request latency, 10 ms, on store routes (the default
     * cluster); no shared store link while the store's rate is unlimited. */
    assert_non_null(strstr(text, "<link id=\"xflow-tx-1\" bandwidth=\"1250000000Bps\" "
                                 "latency=\"0.001s\" sharing_policy=\"FATPIPE\""));
    assert_non_null(strstr(text, "<link id=\"xstore-rx-2\" bandwidth=\"1250000000Bps\" "
                                 "latency=\"0.010999999999999999s\" sharing_policy=\"FATPIPE\""));
    assert_null(strstr(text, "id=\"store-out\""));
    assert_non_null(strstr(text, "<route src=\"store\" dst=\"rollout-2\" symmetrical=\"NO\">"
                                 "<link_ctn id=\"xstore-rx-2\"/><link_ctn id=\"rx-2\"/>"));
    /* 4 owners to the store and to the root, the store to 3 nodes, 2 tree
     * edges (fanout 2: 0->1, 0->2), 2 part routes. */
    assert_int_equal(count(text, "<route "), 4 + 4 + 3 + 2 + 2);
    assert_non_null(
        strstr(text, "<route src=\"train-0-0\" dst=\"train-1-1\" symmetrical=\"NO\"><link_ctn "
                     "id=\"fab-out-0\"/><link_ctn id=\"fab-in-1\"/>"));
    assert_non_null(strstr(text, "<route src=\"train-0-1\" dst=\"train-0-0\" "
                                 "symmetrical=\"NO\"><link_ctn id=\"nvlink-0\"/>"));
    assert_non_null(strstr(text, "<route src=\"rollout-0\" dst=\"rollout-2\""));
    /* 10 Gbps is 1.25e9 bytes per second. */
    assert_non_null(strstr(text, "<link id=\"tx-1\" bandwidth=\"1250000000Bps\""));
    free(text);
    assert_int_equal(dcr_sim_relay_parent(0, 2), -1);
    assert_int_equal(dcr_sim_relay_parent(5, 2), 2);
    assert_int_equal(dcr_sim_relay_parent(4, 3), 1);
}

static void test_cluster_validation(void **state)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.rollout_nodes = 0;
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "rollout_nodes"));
    c = dcr_sim_cluster_default();
    c.cross_gbps = -1;
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "cross_gbps"));
    c = dcr_sim_cluster_default();
    c.latency_ms = NAN;
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_EINVAL);
    c = dcr_sim_cluster_default();
    c.ref_object_mib = 0;
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_EINVAL);
    dcr_sim_description_t d;
    assert_int_equal(dcr_sim_description_load("paper-testbed", &d), DCR_OK);
    c = d.cluster;
    assert_int_equal(dcr_sim_cluster_validate(&c), DCR_OK);
    assert_int_equal(c.train_nodes * c.train_gpus, 32);
    assert_int_equal(c.rollout_nodes * c.rollout_gpus, 64);
}

/* ---- packing rules ----------------------------------------------------------------- */

static dcr_sim_costs_t flat_costs(void)
{
    dcr_sim_costs_t c;
    memset(&c, 0, sizeof(c));
    c.detect_s_per_byte = 1e-9;
    c.project_s_per_record = 1e-8;
    c.encode_s_per_record = 1e-7;
    c.construct_s_per_item = 1e-6;
    c.xor_value_bytes = 1;
    c.overwrite_value_bytes = 2;
    c.gap8_bytes = 1;
    c.gap16_bytes = 2;
    c.bytes_per_item = 10;
    return c;
}

static dcr_sim_unit_t unit(int64_t bytes, int64_t records)
{
    return (dcr_sim_unit_t){bytes, bytes / 2, records, 2, true, 1.0, -1};
}

static const dcr_sim_step_t *step(const dcr_sim_owner_t *o, int i)
{
    assert_true(i < o->nsteps);
    return &o->steps[i];
}

/* The four tasks of the packing tests: 40, 30, 50, 10 bytes with 1, 0, 2,
 * 0 records (unit(): 2-byte elements, so 20, 15, 25, 5 elements). */
static void pack_four_tasks(dcr_sim_packer_t *p, dcr_sim_workload_t *w, dcr_sim_owner_t *o)
{
    const int64_t bytes[4] = {40, 30, 50, 10}, recs[4] = {1, 0, 2, 0};
    for (int i = 0; i < 4; i++) {
        dcr_sim_unit_t u = unit(bytes[i], recs[i]);
        assert_int_equal(dcr_sim_pack_task(p, w, o, &u, i == 3), DCR_OK);
    }
    assert_int_equal(dcr_sim_pack_flush(p, w, o), DCR_OK);
}

/* Compressed bytes of the 50-byte task's item with flat costs: 10 of
 * metadata, 2 XOR values of 1 byte, and one gap. 2 records in 25 elements:
 * density 0.08, P(gap > 255) = 0.92^255, so the gap is 1 byte with
 * probability 1 - 0.92^255, else 2. */
static double two_record_item_bytes(void)
{
    double small = 1 - pow(0.92, 255);
    return 10 + 2 + small * 1 + (1 - small) * 2;
}

/* The engine's rule for the first payload's target (construct.h: 0 means a
 * quarter of the bucket, at least 1; never above the bucket). */
static void test_first_bucket_rule(void **state)
{
    dcr_construct_config_t cfg = dcr_construct_config_default();
    cfg.bucket_bytes = 100;
    assert_int_equal(dcr_sim_first_bucket_bytes(&cfg), 25); /* 100 / 4 */
    cfg.bucket_bytes = 3;
    assert_int_equal(dcr_sim_first_bucket_bytes(&cfg), 1); /* 3 / 4 = 0, raised to 1 */
    cfg.bucket_bytes = 100;
    cfg.first_bucket_bytes = 10;
    assert_int_equal(dcr_sim_first_bucket_bytes(&cfg), 10); /* set: kept */
    cfg.first_bucket_bytes = 500;
    assert_int_equal(dcr_sim_first_bucket_bytes(&cfg), 100); /* capped at the bucket */
    dcr_sim_packer_t p;
    dcr_sim_costs_t costs = flat_costs();
    dcr_sim_packer_init(&p, 64, 512 << 20, &costs);
    assert_int_equal(p.first_bucket_target, 128 << 20); /* the seed's bucket: 128 MiB first */
}

/* Chunk target 64, bucket target 100, so the first payload's target is 25
 * and its chunks are cut at min(64, 25) = 25. The 40-byte task alone
 * reaches 25: its chunk (40 B, 1 record, 1 task) emits, bucket 40 >= 25,
 * payload 0 is its one item. Then the targets are 64 and 100: 30 < 64
 * (no records) waits, + 50 = 80 >= 64 closes (80 B, 2 records, 2 tasks;
 * emits, bucket 80 < 100); the last task's chunk (10 B) emits nothing, so
 * the bucket stays 80 and the final flush makes payload 1 of the 50-byte
 * task's item. */
static void test_pack_chunks_and_buckets(void **state)
{
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_create(1, 1, 1, &w), DCR_OK);
    dcr_sim_owner_t *o = &w->owners[0];
    dcr_sim_costs_t costs = flat_costs();
    dcr_sim_packer_t p;
    dcr_sim_packer_init(&p, 64, 100, &costs);
    assert_int_equal(p.first_bucket_target, 25);
    pack_four_tasks(&p, w, o);
    assert_int_equal(o->nsteps, 7);
    assert_int_equal(step(o, 0)->kind, DCR_SIM_STEP_COMPUTE);
    assert_int_equal(step(o, 0)->work, DCR_SIM_WORK_CHUNK);
    assert_int_equal(step(o, 0)->bytes, 40);
    assert_int_equal(step(o, 0)->records, 1);
    NEAR(step(o, 0)->seconds, 40e-9 + 1e-8 + 1e-6); /* detect 40 B, project 1 record, 1 task */
    assert_int_equal(step(o, 1)->work, DCR_SIM_WORK_ENCODE);
    NEAR(step(o, 1)->seconds, 1e-7); /* 1 record */
    assert_int_equal(step(o, 2)->kind, DCR_SIM_STEP_FLUSH);
    assert_int_equal(step(o, 2)->payload, 0);
    assert_int_equal(step(o, 3)->bytes, 80);
    assert_int_equal(step(o, 3)->records, 2);
    NEAR(step(o, 3)->seconds, 80e-9 + 2e-8 + 2e-6); /* detect 80 B, project 2, 2 tasks */
    assert_int_equal(step(o, 4)->bytes, 10);
    assert_int_equal(step(o, 4)->records, 0);
    NEAR(step(o, 4)->seconds, 10e-9 + 1e-6);
    assert_int_equal(step(o, 5)->work, DCR_SIM_WORK_ENCODE);
    NEAR(step(o, 5)->seconds, 2e-7); /* 2 records */
    assert_int_equal(step(o, 6)->kind, DCR_SIM_STEP_FLUSH);
    assert_int_equal(step(o, 6)->payload, 1);
    assert_int_equal(w->npayloads, 2);
    assert_int_equal(o->npayloads, 2);
    assert_int_equal(w->payloads[0].id, 0);
    assert_int_equal(w->payloads[0].items, 1);
    assert_int_equal(w->payloads[0].records, 1);
    assert_int_equal(w->payloads[0].input_bytes, 40);
    /* Header 64; one record in 20 elements is a run: 10 + 1 value byte. */
    assert_int_equal(w->payloads[0].bytes, 64 + 11);
    assert_int_equal(w->payloads[1].id, 1);
    assert_int_equal(w->payloads[1].items, 1);
    assert_int_equal(w->payloads[1].records, 2);
    assert_int_equal(w->payloads[1].input_bytes, 80);
    assert_int_equal(w->payloads[1].bytes, (int64_t)llround(64 + two_record_item_bytes()));
    dcr_sim_workload_destroy(w);
}

/* A first target equal to the bucket packs full buckets from the start
 * (the engine before its first payload was cut): 40 < 64, so the first
 * chunk takes 30 more (70; it emits, bucket 70); the second gathers
 * 50 + 10 = 60 and closes at the last task (emits, bucket 130 >= 100): one
 * payload of both emitting tasks. */
static void test_pack_full_first_bucket(void **state)
{
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_create(1, 1, 1, &w), DCR_OK);
    dcr_sim_owner_t *o = &w->owners[0];
    dcr_sim_costs_t costs = flat_costs();
    dcr_sim_packer_t p;
    dcr_sim_packer_init(&p, 64, 100, &costs);
    p.first_bucket_target = 100;
    pack_four_tasks(&p, w, o); /* the final flush has nothing left: no second payload */
    assert_int_equal(o->nsteps, 4);
    assert_int_equal(step(o, 0)->kind, DCR_SIM_STEP_COMPUTE);
    assert_int_equal(step(o, 0)->bytes, 70);
    assert_int_equal(step(o, 0)->records, 1);
    NEAR(step(o, 0)->seconds, 70e-9 + 1e-8 + 2e-6); /* detect, project, two tasks */
    assert_int_equal(step(o, 1)->bytes, 60);
    assert_int_equal(step(o, 1)->records, 2);
    assert_int_equal(step(o, 2)->work, DCR_SIM_WORK_ENCODE);
    NEAR(step(o, 2)->seconds, 3e-7);
    assert_int_equal(step(o, 3)->kind, DCR_SIM_STEP_FLUSH);
    assert_int_equal(step(o, 3)->payload, 0);
    assert_int_equal(w->npayloads, 1);
    assert_int_equal(w->payloads[0].items, 2);
    assert_int_equal(w->payloads[0].records, 3);
    assert_int_equal(w->payloads[0].input_bytes, 130);
    /* Header 64; item 1: 10 + 1 value byte; item 2 as above. */
    assert_int_equal(w->payloads[0].bytes, (int64_t)llround(64 + 11 + two_record_item_bytes()));
    dcr_sim_workload_destroy(w);
}

/* A chunk that emits nothing does not count toward the bucket; a task larger
 * than the chunk target is one chunk (tensors are never split); the first
 * payload's target (25 here) holds for residual tensors too. */
static void test_pack_silent_chunks(void **state)
{
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_create(1, 1, 1, &w), DCR_OK);
    dcr_sim_owner_t *o = &w->owners[0];
    dcr_sim_costs_t costs = flat_costs();
    dcr_sim_packer_t p;
    dcr_sim_packer_init(&p, 64, 100, &costs);
    dcr_sim_unit_t a = unit(70, 0), b = unit(70, 1), big = unit(1000, 5);
    /* 70 >= 25 closes a chunk that emits nothing: the bucket stays empty. */
    assert_int_equal(dcr_sim_pack_task(&p, w, o, &a, false), DCR_OK);
    assert_int_equal(p.bucket_input, 0);
    assert_int_equal(w->npayloads, 0);
    /* 70 >= 25 again, and it emits: bucket 70 >= 25 flushes payload 0. */
    assert_int_equal(dcr_sim_pack_task(&p, w, o, &b, false), DCR_OK);
    assert_int_equal(p.bucket_input, 0);
    assert_int_equal(w->npayloads, 1);
    assert_int_equal(w->payloads[0].input_bytes, 70);
    assert_int_equal(w->payloads[0].records, 1);
    /* Full targets now: 1000 >= 64 is one chunk, 1000 >= 100 flushes. */
    assert_int_equal(dcr_sim_pack_task(&p, w, o, &big, true), DCR_OK);
    assert_int_equal(w->npayloads, 2);
    assert_int_equal(w->payloads[1].input_bytes, 1000);
    assert_int_equal(w->payloads[1].records, 5);
    /* Residual tensors count their canonical bytes when they emit: 60 < 100. */
    dcr_sim_unit_t r1 = unit(50, 0), r2 = unit(60, 3);
    r2.xor_enc = false;
    assert_int_equal(dcr_sim_pack_residual(&p, w, o, &r1), DCR_OK);
    assert_int_equal(p.bucket_input, 0);
    assert_int_equal(dcr_sim_pack_residual(&p, w, o, &r2), DCR_OK);
    assert_int_equal(p.bucket_input, 60);
    assert_int_equal(w->npayloads, 2);
    assert_int_equal(dcr_sim_pack_flush(&p, w, o), DCR_OK);
    assert_int_equal(w->npayloads, 3);
    assert_int_equal(w->payloads[2].items, 1);
    assert_int_equal(w->payloads[2].owner, 0);
    assert_int_equal(w->payloads[2].id, 2);
    /* An owner whose first residual tensor is its first emitter: 60 >= 25
     * flushes at once, before the final flush. */
    dcr_sim_workload_t *w2 = NULL;
    assert_int_equal(dcr_sim_workload_create(1, 1, 1, &w2), DCR_OK);
    dcr_sim_packer_init(&p, 64, 100, &costs);
    assert_int_equal(dcr_sim_pack_residual(&p, w2, &w2->owners[0], &r2), DCR_OK);
    assert_int_equal(w2->npayloads, 1);
    assert_int_equal(w2->payloads[0].input_bytes, 60);
    assert_int_equal(p.bucket_input, 0);
    dcr_sim_workload_destroy(w2);
    dcr_sim_workload_destroy(w);
}

static void test_item_bytes(void **state)
{
    dcr_sim_costs_t c = flat_costs();
    /* One record: a run, no gap words. */
    dcr_sim_unit_t u = {1000, 500, 1, 2, true, 1.0, -1};
    NEAR(dcr_sim_item_bytes(&c, &u), 10 + 1);
    /* Every element changed: a run again; overwrite values of FP32 cost 2 more. */
    u = (dcr_sim_unit_t){4000, 1000, 1000, 4, false, 1.0, -1};
    NEAR(dcr_sim_item_bytes(&c, &u), 10 + 1000 * 4.0);
    /* 1% of a large contiguous shard: P(a gap > 255) is 0.99^255, and with
     * 9999 gaps some gap is surely long: 2-byte gaps. */
    u = (dcr_sim_unit_t){2000000, 1000000, 10000, 2, true, 1.0, -1};
    double p_small = pow(1 - pow(0.99, 255), 9999);
    NEAR(dcr_sim_item_bytes(&c, &u), 10 + 10000 * 1.0 + 9999 * (p_small * 1 + (1 - p_small) * 2));
    /* A strided shard spreads the same changes over twice the span. */
    u.spread = 2;
    p_small = pow(1 - pow(0.995, 255), 9999);
    NEAR(dcr_sim_item_bytes(&c, &u), 10 + 10000 * 1.0 + 9999 * (p_small * 1 + (1 - p_small) * 2));
}

/* ---- first-principles refits -------------------------------------------------------- */

/* One owner, one rollout node, 8 Gbps (1e9 B/s) everywhere across the
 * boundary, 10 ms one way. Object store: the upload takes B/1e9 + 10 ms,
 * the download the same, then apply and finalization; the manifest (one
 * latency after the upload) is seen before the apply ends. */
static void test_refit_objstore_first_principles(void **state)
{
    const int64_t B = 50000000;
    const double c = 0.25, a = 0.1, f = 0.05, L = 0.01;
    dcr_sim_workload_t *w = one_payload(B, c, a, f);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(1);
    spec.transport = "objstore";
    dcr_sim_result_t r;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    double move = (double)B / 1e9 + L;
    NEAR(r.latency_s, c + 2 * move + a + f);
    NEAR(r.construction_lb_s, c);
    NEAR(r.transport_lb_s, move);
    NEAR(r.finalization_s, f);
    assert_int_equal(r.payload_bytes, B);
    assert_int_equal(r.cross_bytes, 2 * B); /* one upload, one download */
    /* Reference: the checkpoint (1e9 B) uploaded as one object, then
     * downloaded by the node: 2 x (1 s + 10 ms). */
    NEAR(r.reference_s, 2 * (1.0 + L));
    NEAR(r.speedup, r.reference_s / r.latency_s);
    dcr_sim_workload_destroy(w);
}

/* Relay: one cross-cluster transfer (payload plus the 48-byte frame header)
 * to the root, which is the only node; then apply and finalization. The
 * owner's finish follows one latency after its last send; the end marker
 * comes before the apply ends. */
static void test_refit_relay_first_principles(void **state)
{
    const int64_t B = 50000000;
    const double c = 0.25, a = 0.1, f = 0.05, L = 0.01;
    dcr_sim_workload_t *w = one_payload(B, c, a, f);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(1);
    spec.transport = "relay";
    dcr_sim_result_t r;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    double move = (double)(B + 48) / 1e9 + L;
    NEAR(r.latency_s, c + move + a + f);
    NEAR(r.transport_lb_s, move);
    assert_int_equal(r.cross_bytes, B);
    /* With acknowledgments paying the way back, the send holds one more latency. */
    spec.cluster.ack_rtt = true;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    NEAR(r.transport_lb_s, move + L);
    dcr_sim_workload_destroy(w);
}

/* V_cross: the object store moves the payload up once and down once per
 * rollout node; the relay tree crosses once and forwards over local links. */
static void test_cross_accounting(void **state)
{
    const int64_t B = 10000000;
    dcr_sim_workload_t *w = one_payload(B, 0.01, 0.001, 0);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(5);
    dcr_sim_result_t r;
    spec.transport = "objstore";
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    assert_int_equal(r.cross_bytes, B * (1 + 5));
    spec.transport = "relay";
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    assert_int_equal(r.cross_bytes, B);
    /* Relay to 5 nodes, fanout 2 (0 -> 1, 2; 1 -> 3, 4): a node forwards to
     * its two children at once over its one local link, so each hop of
     * B + 48 bytes takes twice B / 1e10 s, and nodes 3 and 4 are two hops
     * behind the root. */
    double move = (double)(B + 48) / 1e9 + 0.01, hop = 2 * (double)(B + 48) / 1e10;
    NEAR(r.apply_end_s, 0.01 + move + 2 * hop + 0.001);
    dcr_sim_workload_destroy(w);
}

/* The reference scales with checkpoint bytes and with the downloads the
 * rollout nodes share: with a store link of 1e9 B/s (8 Gbps) every node's
 * download shares it. */
static void test_reference_scaling(void **state)
{
    dcr_sim_workload_t *w = one_payload(1000, 0, 0, 0);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(1);
    dcr_sim_result_t r1, r2, r4;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r1), DCR_OK);
    NEAR(r1.reference_s, 2 * (1.0 + 0.01));
    w->checkpoint_bytes *= 2;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r2), DCR_OK);
    NEAR(r2.reference_s, 2 * (2.0 + 0.01));
    spec.cluster = bare_cluster(4);
    spec.cluster.store_gbps = 8;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r4), DCR_OK);
    /* Upload 2 s (store link shared by nothing else), downloads 4 x 2e9 B
     * through the 1e9 B/s store link: 8 s; one latency each way. */
    NEAR(r4.reference_s, 2.0 + 0.01 + 8.0 + 0.01);
    dcr_sim_workload_destroy(w);
}

/* The store's GET limit is a token bucket that refills at the rate and
 * holds one second of it. Reference of one node, one download at a time:
 * the checkpoint's 1e9 B as 100 objects of 1e7 B, uploaded in
 * 100 x (1e7 / 1e9 + 0.01) = 2 s, then downloaded at 0.02 s each under
 * 10 GET/s. Download k asks at 2 + 0.02k while the bucket keeps up; the
 * bucket's theoretical time after k grants is 2 + 0.1k (the first grant
 * at 2 s, then 0.1 s per grant), and a request waits only for
 * 2 + 0.1k - 1 (one second of tokens back) > 2 + 0.02k, so from k = 13
 * on (1 + 1.3 = 2.3 > 2.26). Those wait: download k starts at 1 + 0.1k,
 * the last (k = 99) at 10.9 s, ending at 10.92 s. A pacer (one token deep)
 * would have spaced all 100 by 0.1 s: 2 + 9.9 + 0.02 = 11.92 s. */
static void test_store_get_bucket(void **state)
{
    dcr_sim_workload_t *w = one_payload(1000, 0, 0, 0);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(1);
    spec.cluster.store_flows = 1;
    spec.cluster.ref_object_mib = 1e7 / 1048576.0; /* exactly 1e7 bytes: 1048576 is 2^20 */
    dcr_sim_result_t r;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    NEAR(r.reference_s, 2.0 + 100 * 0.02); /* unlimited: 4 s */
    spec.cluster.store_get_rps = 10;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    NEAR(r.reference_s, 1 + 0.1 * 99 + 0.02);
    /* Two prefixes double the rate: the bucket (20 tokens, 0.05 s each)
     * keeps up while 2 + 0.05k - 1 <= 2 + 0.02k, i.e. k <= 33; download k
     * then starts at 1 + 0.05k, the last at 5.95 s, ending at 5.97 s. */
    spec.cluster.store_prefixes = 2;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &r), DCR_OK);
    NEAR(r.reference_s, 1 + 0.05 * 99 + 0.02);
    dcr_sim_workload_destroy(w);
}

/* The fast path's one node books the tokens of the nodes it stands for
 * and starts with the last of them, as the full simulation's last node
 * does. Reference of 4 nodes, one download each of the checkpoint's 1e9 B
 * (1.01 s), after its upload (1.01 s); 2 GET/s, so the bucket holds 2
 * tokens and refills one per 0.5 s. At 1.01 s the nodes ask together:
 * request k may start at 1.01 + k x 0.5 - 1 (one second of tokens back),
 * so three start at once and the fourth at 1.51 s, ending at 2.52 s. The
 * fast path gives the same, its one node waiting for the fourth token. */
static void test_store_bucket_fast_path(void **state)
{
    dcr_sim_workload_t *w = one_payload(1000, 0, 0, 0);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    spec.cluster = bare_cluster(4);
    spec.cluster.store_flows = 1;
    spec.cluster.store_get_rps = 2;
    assert_true(dcr_sim_fast_path(&spec, w));
    dcr_sim_result_t fast, full;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &fast), DCR_OK);
    spec.full = true;
    assert_int_equal(dcr_sim_run_workload(&spec, w, &full), DCR_OK);
    NEAR(full.reference_s, 1.01 + 0.5 + 1.01);
    NEAR(fast.reference_s, 1.01 + 0.5 + 1.01);
    dcr_sim_workload_destroy(w);
}

/* ---- real inventories ----------------------------------------------------------------- */

static dcr_sim_spec_t small_spec(const char *transport)
{
    dcr_sim_spec_t s = dcr_sim_spec_default();
    s.scenario.model = "qwen3-30b-a3b";
    s.scenario.scale = 16;
    s.scenario.layers = 2;
    s.scenario.train = (dcr_train_config_t){2, 2, 2, 2, 1, 1, 0};
    s.transport = transport;
    s.change_rate = 0.03;
    s.chunk_bytes = 256 << 10;
    s.bucket_bytes = 1 << 20;
    s.cluster.train_nodes = 2;
    s.cluster.train_gpus = 2;
    s.cluster.rollout_nodes = 3;
    s.cluster.rollout_gpus = 2;
    s.cluster.cross_gbps = 0.5;
    s.cluster.flow_gbps = 0.4;
    return s;
}

/* The workload of a real (scaled) model: every task changes round(rate n)
 * elements, every record lands in exactly one payload, and every owner's
 * payloads are numbered from 0. */
static void test_workload_real_model(void **state)
{
    dcr_sim_spec_t spec = small_spec("objstore");
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_build(&spec, &cal, &w), DCR_OK);
    dcr_scenario_spec_t ss = spec.scenario;
    ss.align_extra = 2;
    dcr_scenario_t *sc = NULL;
    assert_int_equal(dcr_scenario_create(&ss, &sc), DCR_OK);
    int64_t expect = 0;
    for (int i = 0; i < sc->layout->ntasks; i++)
        expect += llround(0.03 * (double)dcr_task_numel(&sc->layout->tasks[i]));
    assert_int_equal(w->records, expect);
    assert_int_equal(w->checkpoint_bytes, dcr_inventory_bytes(sc->inventory));
    int64_t sum = 0;
    int *next = calloc((size_t)w->world, sizeof(int));
    for (int p = 0; p < w->npayloads; p++) {
        sum += w->payloads[p].records;
        assert_int_equal(w->payloads[p].id, next[w->payloads[p].owner]++);
        assert_true(w->payloads[p].bytes > 64);
    }
    assert_int_equal(sum, expect);
    for (int o = 0; o < w->world; o++) assert_int_equal(next[o], w->owners[o].npayloads);
    free(next);
    dcr_scenario_destroy(sc);
    dcr_sim_workload_destroy(w);
}

typedef struct owner_payloads {
    pthread_mutex_t lock;
    int64_t count[16];
} owner_payloads_t;

static dcr_status_t count_owner_payloads(void *ctx, int owner, uint64_t id, const uint8_t *buf,
                                         size_t len)
{
    (void)id, (void)buf, (void)len;
    owner_payloads_t *c = ctx;
    if (owner < 0 || owner >= 16) return dcr_error_set(DCR_EINVAL, "owner %d", owner);
    pthread_mutex_lock(&c->lock);
    c->count[owner]++;
    pthread_mutex_unlock(&c->lock);
    return DCR_OK;
}

/* The simulated packing against the engine itself: a real constructor run
 * (the construction bench: seeded weights, uniform stress changes, the same
 * chunk and bucket targets, the first payload's left to the engine) cuts
 * each owner's changes into as many payloads as the simulated owner, with
 * as many records in all. Both with the engine's smaller first payload and,
 * as a control that the comparison can tell them apart, not with full
 * buckets from the start. */
static void test_packing_matches_engine(void **state)
{
    dcr_sim_spec_t spec = small_spec("objstore");
    spec.change_rate = 0.05;
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_workload_t *w = NULL;
    assert_int_equal(dcr_sim_workload_build(&spec, &cal, &w), DCR_OK);
    dcr_scenario_spec_t ss = spec.scenario;
    ss.align_extra = spec.cluster.rollout_gpus; /* the serving TP, as the builder aligns */
    dcr_scenario_t *sc = NULL;
    assert_int_equal(dcr_scenario_create(&ss, &sc), DCR_OK);
    assert_true(w->world <= 16);
    owner_payloads_t got = {PTHREAD_MUTEX_INITIALIZER, {0}};
    dcr_payload_sink_t sink = {count_owner_payloads, &got};
    dcr_construct_bench_t b = {.change_rate = spec.change_rate,
                               .seed = 11,
                               .cfg = dcr_construct_config_default(),
                               .sink = &sink,
                               .rounds = 1};
    b.cfg.chunk_bytes = spec.chunk_bytes;
    b.cfg.bucket_bytes = spec.bucket_bytes;
    const dcr_construct_mode_t mode = DCR_MODE_X;
    dcr_construct_bench_result_t res;
    if (dcr_construct_bench_run(sc, &b, &mode, 1, &res) != DCR_OK)
        fail_msg("%s", dcr_error_detail());
    /* The same changes to within the few the engine finds equal after
     * projection (the sim takes round(rate x n) per task as records). */
    print_message("records: engine %lld, sim %lld; payloads: engine %lld, sim %d\n",
                  (long long)res.stats.records, (long long)w->records,
                  (long long)res.stats.payloads, w->npayloads);
    assert_true(llabs(res.stats.records - w->records) <= w->records / 100);
    assert_int_equal(res.stats.payloads, w->npayloads);
    for (int o = 0; o < w->world; o++) {
        print_message("owner %d: engine %lld payloads, sim %d\n", o, (long long)got.count[o],
                      w->owners[o].npayloads);
        assert_int_equal(got.count[o], w->owners[o].npayloads);
    }
    /* Full buckets from the start pack fewer payloads than the engine cut. */
    dcr_sim_workload_t *full = NULL;
    spec.first_bucket_bytes = spec.bucket_bytes;
    assert_int_equal(dcr_sim_workload_build(&spec, &cal, &full), DCR_OK);
    assert_true(full->npayloads < res.stats.payloads);
    dcr_sim_workload_destroy(full);
    dcr_scenario_destroy(sc);
    dcr_sim_workload_destroy(w);
}

/* Latency is at least each bound; doubling the cross-cluster bandwidth
 * never slows a refit. */
static void test_invariants(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    const char *transports[2] = {"objstore", "relay"};
    for (int t = 0; t < 2; t++) {
        dcr_sim_spec_t spec = small_spec(transports[t]);
        dcr_sim_result_t a, b;
        assert_int_equal(dcr_sim_run(&spec, &cal, &a), DCR_OK);
        assert_true(a.latency_s >= a.construction_lb_s);
        assert_true(a.latency_s >= a.transport_lb_s);
        assert_true(a.latency_s >= a.finalization_s);
        assert_true(a.payloads > 0);
        spec.cluster.cross_gbps *= 2;
        spec.cluster.flow_gbps *= 2;
        assert_int_equal(dcr_sim_run(&spec, &cal, &b), DCR_OK);
        assert_true(b.latency_s <= a.latency_s * (1 + 1e-9));
        assert_true(b.reference_s < a.reference_s);
        assert_int_equal(b.payload_bytes, a.payload_bytes);
    }
}

static void test_bad_specs(void **state)
{
    dcr_sim_calibration_t cal = test_cal();
    dcr_sim_result_t r;
    dcr_sim_spec_t spec = small_spec("carrier-pigeon");
    assert_int_equal(dcr_sim_run(&spec, &cal, &r), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "carrier-pigeon"));
    spec = small_spec("relay");
    spec.change_rate = 1.5;
    assert_int_equal(dcr_sim_run(&spec, &cal, &r), DCR_EINVAL);
    spec = small_spec("relay");
    spec.cluster.platform_xml = "/nonexistent/platform.xml";
    assert_int_equal(dcr_sim_run(&spec, &cal, &r), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "/nonexistent/platform.xml"));
    /* A user platform without the expected hosts: one clear line. */
    char path[] = "/tmp/dcr-test-platform-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *xml =
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\"><zone id=\"z\" routing=\"Full\"><host id=\"a\" speed=\"1Gf\"/>"
        "</zone></platform>\n";
    assert_int_equal(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
    close(fd);
    spec.cluster.platform_xml = path;
    assert_int_equal(dcr_sim_run(&spec, &cal, &r), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "train-0-0"));
    unlink(path);
}

/* ---- calibration files ------------------------------------------------------------------- */

/* Fitted cluster figures survive a save and load, and apply over a preset. */
static void test_calibration_cluster_roundtrip(void **state)
{
    dcr_sim_calibration_t c = test_cal(), back;
    c.ncluster = 2;
    c.cluster[0] = (dcr_sim_cal_cluster_value_t){"cross_gbps", 3.25};
    c.cluster[1] = (dcr_sim_cal_cluster_value_t){"store_flows", 4};
    c.nprovenance = 1;
    snprintf(c.provenance[0], sizeof(c.provenance[0]), "cross_gbps: fitted to a test point");
    char *text = dcr_sim_cal_to_json(&c);
    assert_int_equal(dcr_sim_cal_parse(text, "rt.json", &back), DCR_OK);
    free(text);
    assert_int_equal(back.ncluster, 2);
    assert_int_equal(back.nprovenance, 1);
    assert_string_equal(back.provenance[0], c.provenance[0]);
    dcr_sim_cluster_t cl = dcr_sim_cluster_default();
    assert_int_equal(dcr_sim_cluster_apply_calibration(&cl, &back), DCR_OK);
    assert_true(cl.cross_gbps == 3.25);
    assert_int_equal(cl.store_flows, 4);
    assert_true(cl.flow_gbps == dcr_sim_cluster_default().flow_gbps); /* untouched */
}

/* A description must name every field: one left out, one unknown, a
 * wrong format or a bad value is one clear line naming it; the echo holds
 * every field with its value and what was overridden. */
static void test_description_checks(void **state)
{
    dcr_sim_description_t d;
    assert_int_equal(dcr_sim_description_load("paper-testbed", &d), DCR_OK);
    json_t *j = dcr_sim_description_json(&d);
    for (size_t i = 0; i < dcr_sim_cluster_nfields(); i++)
        assert_non_null(json_object_get(j, dcr_sim_cluster_field_name(i)));
    /* The echo is itself a description (less its echo-only keys). */
    json_object_del(j, "source");
    json_object_del(j, "overridden");
    char *text = json_dumps(j, 0);
    json_decref(j);
    dcr_sim_description_t back;
    assert_int_equal(dcr_sim_description_parse(text, "echo", &back), DCR_OK);
    assert_true(back.cluster.cross_gbps == d.cluster.cross_gbps);
    assert_int_equal(back.cluster.store_flows, d.cluster.store_flows);
    free(text);
    const struct {
        const char *text, *needle;
    } bad[] = {
        {"{\"format\": \"dcr-cluster\", \"version\": 1, \"calibration\": \"x\"}", "missing field"},
        {"{\"format\": \"dcr-cluster\", \"version\": 1, \"calibration\": \"x\", \"warp\": 9}",
         "warp"},
        {"{\"format\": \"dcr-calibration\", \"version\": 1}", "dcr-cluster"},
        {"[1, 2]", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_not_equal(dcr_sim_description_parse(bad[i].text, "t.json", &back), DCR_OK);
        if (!strstr(dcr_error_detail(), bad[i].needle))
            fail_msg("'%s': '%s' lacks '%s'", bad[i].text, dcr_error_detail(), bad[i].needle);
    }
    /* A bad value in an otherwise whole description. */
    j = dcr_sim_description_json(&d);
    json_object_del(j, "source");
    json_object_del(j, "overridden");
    json_object_set_new(j, "cross_gbps", json_real(-1));
    text = json_dumps(j, 0);
    json_decref(j);
    assert_int_equal(dcr_sim_description_parse(text, "t.json", &back), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "cross_gbps"));
    free(text);
    char path[16];
    assert_int_equal(dcr_sim_description_preset_path("../etc", path, sizeof(path)), DCR_EINVAL);
}

/* The relay fast path's chain: the leftmost path's children in the tree. */
static void test_chain_kids(void **state)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.fanout = 2;
    c.agg_nodes = 12; /* 0; 1 2; 3 4 5 6; 7 8 9 10 11 */
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 0), 2);
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 1), 2);
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 2), 2); /* node 3: children 7, 8 */
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 3), 0);
    c.agg_nodes = 8; /* node 3 has one child, 7 */
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 2), 1);
    c.fanout = 3;
    c.agg_nodes = 5; /* 0; 1 2 3; 4 */
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 0), 3);
    assert_int_equal(dcr_sim_cluster_chain_kids(&c, 1), 1);
}

static void test_calibration_roundtrip(void **state)
{
    dcr_sim_calibration_t c = test_cal(), back;
    /* Every scalar distinct, so a field the writer or the reader forgets shows. */
    dcr_sim_calibration_t *cs[2] = {&c, &back};
#define SCALARS(x)                                                                                 \
    {                                                                                              \
        &x->project_s_per_record, &x->construct_s_per_item, &x->residual_s_per_byte,               \
            &x->copy_s_per_byte, &x->bytes_per_item, &x->decode_s_per_byte,                        \
            &x->decode_s_per_payload, &x->apply_s_per_record, &x->apply_s_per_item,                \
            &x->apply_s_per_full_byte, &x->ack_s, &x->commit_s, &x->store_put_s, &x->relay_hop_s,  \
            &x->relay_hop_s_per_byte                                                               \
    }
    double *fields[2][15] = {SCALARS(cs[0]), SCALARS(cs[1])};
    for (int i = 0; i < 15; i++) *fields[0][i] = 1e-9 * (i + 1);
    c.nsizes = 2;
    c.sizes[0] = (dcr_sim_cal_size_t){1000, 1.2};
    c.sizes[1] = (dcr_sim_cal_size_t){100000, 1.0};
    char *text = dcr_sim_cal_to_json(&c);
    assert_non_null(text);
    assert_int_equal(dcr_sim_cal_parse(text, "test", &back), DCR_OK);
    free(text);
    assert_int_equal(back.npoints, 2);
    NEAR(back.points[1].gap8_bytes, 0.8);
    for (int i = 0; i < 15; i++) NEAR(*fields[1][i], 1e-9 * (i + 1));
    assert_int_equal(back.cores, 2);
    /* Interpolation between points, held outside them. */
    dcr_sim_cal_point_t p = dcr_sim_cal_at(&back, 0.03);
    NEAR(p.gap8_bytes, 0.9);
    NEAR(dcr_sim_cal_at(&back, 0.5).gap16_bytes, 1.0);
    NEAR(dcr_sim_cal_at(&back, 0.001).gap16_bytes, 1.5);
    /* Size factors: in log(bytes) between points. */
    NEAR(dcr_sim_cal_size_factor(&back, 10000), 1.1);
    NEAR(dcr_sim_cal_size_factor(&back, 10), 1.2);
    char path[] = "/tmp/dcr-test-cal-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    assert_int_equal(dcr_sim_cal_save(&c, path), DCR_OK);
    assert_int_equal(dcr_sim_cal_load(path, &back), DCR_OK);
    NEAR(back.commit_s, c.commit_s);
    unlink(path);
}

/* Each bad file gets one clear error that names what is wrong. */
static void check_bad(const char *text, dcr_status_t want, const char *needle)
{
    dcr_sim_calibration_t c;
    assert_int_equal(dcr_sim_cal_parse(text, "bad.json", &c), want);
    assert_non_null(strstr(dcr_error_detail(), needle));
    assert_null(strchr(dcr_error_detail(), '\n'));
}

/* text with key set to the JSON `value`, checked to fail naming `needle`. */
static void check_bad_with(const char *text, const char *key, const char *value, const char *needle)
{
    json_t *root = json_loads(text, 0, NULL);
    json_object_set_new(root, key, json_loads(value, JSON_DECODE_ANY, NULL));
    char *bad = json_dumps(root, 0);
    check_bad(bad, DCR_EPARSE, needle);
    free(bad);
    json_decref(root);
}

/* Fitted cluster figures and provenance: unknown fields, counts that are
 * not whole, values the cluster rejects, and text that is not text. */
static void check_bad_cluster(const char *text)
{
    check_bad_with(text, "cluster", "{\"warp_gbps\": 1}", "warp_gbps");
    check_bad_with(text, "cluster", "{\"store_flows\": 1.5}", "store_flows");
    check_bad_with(text, "cluster", "{\"cross_gbps\": -1}", "cross_gbps");
    check_bad_with(text, "cluster", "{\"cross_gbps\": \"fast\"}", "cluster.cross_gbps");
    check_bad_with(text, "cluster", "[1]", "\"cluster\"");
    check_bad_with(text, "provenance", "\"one line\"", "\"provenance\"");
    check_bad_with(text, "provenance", "[3]", "provenance[0]");
}

static void test_calibration_bad_files(void **state)
{
    dcr_sim_calibration_t good = test_cal();
    char *text = dcr_sim_cal_to_json(&good);
    char buf[8192];
    check_bad("{", DCR_EPARSE, "bad.json");
    check_bad("[]", DCR_EPARSE, "object");
    check_bad("{\"format\": \"other\"}", DCR_EPARSE, "format");
    /* A misspelled key, a missing key, a negative cost, rates out of order. */
    snprintf(buf, sizeof(buf), "%s", text);
    char *k = strstr(buf, "\"ack_s\"");
    memcpy(k, "\"akc_s\"", 7);
    check_bad(buf, DCR_EPARSE, "akc_s");
    json_t *root = json_loads(text, 0, NULL);
    json_object_del(root, "commit_s");
    char *missing = json_dumps(root, 0);
    check_bad(missing, DCR_EPARSE, "\"commit_s\"");
    free(missing);
    json_object_set_new(root, "commit_s", json_string("fast"));
    char *wrong = json_dumps(root, 0);
    check_bad(wrong, DCR_EPARSE, "commit_s");
    free(wrong);
    json_decref(root);
    dcr_sim_calibration_t c = good;
    c.decode_s_per_byte = -1;
    assert_int_equal(dcr_sim_cal_validate(&c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "decode_s_per_byte"));
    c = good;
    c.points[1].rate = 0.01;
    assert_int_equal(dcr_sim_cal_validate(&c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "points[1].rate"));
    c = good;
    c.cores = 0;
    assert_int_equal(dcr_sim_cal_validate(&c), DCR_EINVAL);
    c = good;
    c.nsizes = 2;
    c.sizes[0] = (dcr_sim_cal_size_t){100, 1.1};
    c.sizes[1] = (dcr_sim_cal_size_t){50, 1.0};
    assert_int_equal(dcr_sim_cal_validate(&c), DCR_EINVAL);
    assert_non_null(strstr(dcr_error_detail(), "payload_factors[1]"));
    check_bad_cluster(text);
    dcr_sim_calibration_t out;
    assert_int_equal(dcr_sim_cal_load("/nonexistent/cal.json", &out), DCR_EIO);
    assert_non_null(strstr(dcr_error_detail(), "/nonexistent/cal.json"));
    free(text);
}

/* The relay's gain is object-store latency over relay latency of the same
 * model and rate; rows without a partner give none; the seed's figure comes
 * with a model the seed sized. A sweep larger than the rows' room fails
 * before it simulates anything. */
static void test_sweep_relay_gains(void **state)
{
    (void)state;
    const dcr_sim_paper_size_t *z = dcr_sim_paper_size(0);
    dcr_sim_row_t rows[5] = {
        {z->model, z, "objstore", 0.05, {.latency_s = 6.0}},
        {z->model, z, "relay", 0.05, {.latency_s = 2.0}},
        {z->model, z, "relay", 0.03, {.latency_s = 1.0}}, /* no object-store row at 3% */
        {"other", NULL, "relay", 0.05, {.latency_s = 4.0}},
        {"other", NULL, "objstore", 0.05, {.latency_s = 5.0}},
    };
    assert_true(dcr_sim_rows_latency(rows, 5, "other", "objstore", 0.05) == 5.0);
    assert_true(dcr_sim_rows_latency(rows, 5, "other", "objstore", 0.03) == 0.0);
    dcr_sim_relay_gain_t g[4];
    assert_int_equal(dcr_sim_relay_gains(rows, 5, 0.05, g, 4), 2);
    assert_string_equal(g[0].model, z->model);
    assert_true(fabs(g[0].gain - 3.0) < 1e-12);
    assert_true(g[0].seed_gain == z->relay_gain_5pct);
    assert_string_equal(g[1].model, "other");
    assert_true(fabs(g[1].gain - 1.25) < 1e-12);
    assert_true(g[1].seed_gain == 0);
    assert_int_equal(dcr_sim_relay_gains(rows, 5, 0.05, g, 1), 1); /* at most cap */

    const char *models[] = {"qwen3-30b-a3b", "qwen2.5-7b"}, *transports[] = {"objstore", "relay"};
    double rates[] = {0.01, 0.03, 0.05};
    dcr_sim_sweep_t sw = {models, 2, transports, 2, rates, 3, NULL, false, NULL, NULL};
    assert_int_equal(dcr_sim_sweep_rows(&sw), 12);
    double per_model[] = {0.02, 0.04};
    sw.model_rates = per_model;
    assert_int_equal(dcr_sim_sweep_rows(&sw), 4);
    dcr_sim_spec_t spec = dcr_sim_spec_default();
    dcr_sim_calibration_t cal = test_cal();
    int n = -1;
    assert_int_equal(dcr_sim_sweep_run(&sw, &spec, &cal, rows, 3, &n), DCR_EINVAL);
    assert_int_equal(n, 0);
}

/* A process's scheduler statistics (what --validate reports of the
 * testbed's store): this single-threaded process's time on a CPU agrees
 * with its own thread CPU clock, and a reaped child has none. */
static void test_proc_sched(void **state)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 100000; i++) x += i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    } while ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 < 0.2);
    double run, wait, life;
    assert_int_equal(dcr_sim_proc_sched(getpid(), &run, &wait, &life), DCR_OK);
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    double cpu = now.tv_sec + now.tv_nsec / 1e9;
    print_message("schedstat run %.3f s wait %.3f s life %.3f s; thread CPU clock %.3f s\n", run,
                  wait, life, cpu);
    assert_true(run >= 0.2 && fabs(run - cpu) < 0.05 + 0.05 * cpu);
    assert_true(wait >= 0 && life + 0.02 >= run);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(dcr_sim_proc_sched(pid, &run, &wait, &life), DCR_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_platform_generated),
        cmocka_unit_test(test_cluster_validation),
        cmocka_unit_test(test_first_bucket_rule),
        cmocka_unit_test(test_pack_chunks_and_buckets),
        cmocka_unit_test(test_pack_full_first_bucket),
        cmocka_unit_test(test_pack_silent_chunks),
        cmocka_unit_test(test_item_bytes),
        cmocka_unit_test(test_refit_objstore_first_principles),
        cmocka_unit_test(test_refit_relay_first_principles),
        cmocka_unit_test(test_cross_accounting),
        cmocka_unit_test(test_reference_scaling),
        cmocka_unit_test(test_store_get_bucket),
        cmocka_unit_test(test_store_bucket_fast_path),
        cmocka_unit_test(test_workload_real_model),
        cmocka_unit_test(test_packing_matches_engine),
        cmocka_unit_test(test_invariants),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_calibration_roundtrip),
        cmocka_unit_test(test_description_checks),
        cmocka_unit_test(test_chain_kids),
        cmocka_unit_test(test_calibration_cluster_roundtrip),
        cmocka_unit_test(test_calibration_bad_files),
        cmocka_unit_test(test_sweep_relay_gains),
        cmocka_unit_test(test_proc_sched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
