/* Cluster presets, checks and fields by name (sim/cluster.h). */
#include "sim/cluster.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

dcr_sim_cluster_t dcr_sim_cluster_default(void)
{
    dcr_sim_cluster_t c;
    memset(&c, 0, sizeof(c));
    c.train_nodes = c.train_gpus = c.rollout_nodes = c.rollout_gpus = 1;
    c.cross_gbps = 10;
    c.flow_gbps = 10;
    c.local_gbps = 100;
    c.fabric_gbps = 400;
    c.latency_ms = 1;
    c.local_latency_ms = 0.01;
    c.store_gbps = 0;
    c.store_latency_ms = 10;
    c.store_list_ms = 10;
    c.store_flows = 8; /* the engine's object store (OBJ_FLOWS): eight GETs in flight per node */
    c.fanout = 2;
    c.queue_payloads = 8;
    c.owner_queue = 2; /* dcr_construct_config_default's queue depth */
    c.ack_rtt = true;
    c.ref_object_mib = 8; /* the engine's reference objects */
    return c;
}

/* The seed gives nodes, GPUs, the 5 Gbps per node cross-cluster flow and
 * S3. The rest are stated assumptions, not fitted to the seed's results:
 * the per-flow cap equals the node's measured 5 Gbps (one flow can reach
 * it), two AWS regions are 30 ms apart one way, an S3 request adds 20 ms and
 * a listing sees a new object after 20 ms, rollout nodes reach each other
 * at 100 Gbps, training nodes at 400 Gbps, and the reference's checkpoint
 * files are 64 MiB objects. */
dcr_sim_cluster_t dcr_sim_cluster_testbed(void)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_default();
    c.train_nodes = 8;
    c.train_gpus = 4;
    c.rollout_nodes = 8;
    c.rollout_gpus = 8;
    c.cross_gbps = 5;
    c.flow_gbps = 5;
    c.local_gbps = 100;
    c.fabric_gbps = 400;
    c.latency_ms = 30;
    c.store_latency_ms = 20;
    c.store_list_ms = 20;
    c.ref_object_mib = 64;
    c.store_flows = 2; /* a stated assumption of the paper calibration (paper-testbed.json) */
    /* The seed's receivers hold 32 resident groups of at most 8 decoded
     * payloads plus one group under assembly: 264 payload slots. */
    c.staging_payloads = 264;
    return c;
}

dcr_sim_cluster_t dcr_sim_cluster_nemo_rl(void)
{
    dcr_sim_cluster_t c = dcr_sim_cluster_testbed();
    /* Stated by the document: 32 producers (8 x 4 is a guess of the split),
     * a balanced binary tree, 32 batches of 8 payloads plus the partial
     * one per receiver, 64 MiB multipart parts. */
    c.fanout = 2;
    c.staging_payloads = 264;
    c.ref_object_mib = 64;
    /* Guesses: the S3 client's 10 Gbps throughput target as each node's
     * rate and per-flow cap; rollout nodes as the seed's (8 x 8 H100);
     * 30 ms one way, 20 ms per S3 request and listing; 8 downloads per
     * node; no extra relay-root cap, no startup. */
    c.cross_gbps = c.flow_gbps = 10;
    c.store_flows = 8;
    c.relay_gbps = 0;
    c.startup_ms = 0;
    return c;
}

static dcr_status_t dcr__check_rate(const char *name, double v)
{
    if (!isfinite(v) || v < 0)
        return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %g, expected a finite value >= 0",
                             name, v);
    return DCR_OK;
}

static dcr_status_t dcr__check_count(const char *name, int v, int max)
{
    if (v < 1 || v > max)
        return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %d, expected 1..%d", name, v, max);
    return DCR_OK;
}

dcr_status_t dcr_sim_cluster_validate(const dcr_sim_cluster_t *c)
{
    DCR_CHECK(dcr__check_count("train_nodes", c->train_nodes, 4096));
    DCR_CHECK(dcr__check_count("train_gpus", c->train_gpus, 64));
    DCR_CHECK(dcr__check_count("rollout_nodes", c->rollout_nodes, 4096));
    DCR_CHECK(dcr__check_count("rollout_gpus", c->rollout_gpus, 64));
    DCR_CHECK(dcr__check_count("store_flows", c->store_flows, 64));
    DCR_CHECK(dcr__check_count("fanout", c->fanout, 64));
    DCR_CHECK(dcr__check_count("queue_payloads", c->queue_payloads, 1 << 20));
    DCR_CHECK(dcr__check_count("owner_queue", c->owner_queue, 1 << 20));
    if (c->staging_payloads < 0 || c->staging_payloads > (1 << 20))
        return dcr_error_set(DCR_EINVAL, "sim cluster: staging_payloads is %d, expected 0..%d",
                             c->staging_payloads, 1 << 20);
    if (c->shared_cores < 0 || c->shared_cores > 4096)
        return dcr_error_set(DCR_EINVAL, "sim cluster: shared_cores is %d, expected 0..4096",
                             c->shared_cores);
    const struct {
        const char *name;
        double v;
    } rates[] = {{"cross_gbps", c->cross_gbps},         {"flow_gbps", c->flow_gbps},
                 {"local_gbps", c->local_gbps},         {"fabric_gbps", c->fabric_gbps},
                 {"latency_ms", c->latency_ms},         {"local_latency_ms", c->local_latency_ms},
                 {"store_gbps", c->store_gbps},         {"store_latency_ms", c->store_latency_ms},
                 {"store_list_ms", c->store_list_ms},   {"store_put_ms", c->store_put_ms},
                 {"ref_object_mib", c->ref_object_mib}, {"relay_gbps", c->relay_gbps},
                 {"startup_ms", c->startup_ms}};
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        DCR_CHECK(dcr__check_rate(rates[i].name, rates[i].v));
    if (c->ref_object_mib <= 0)
        return dcr_error_set(DCR_EINVAL, "sim cluster: ref_object_mib must be > 0");
    return DCR_OK;
}

/* The numeric fields a calibration or a user may set by name. */
typedef struct dcr__cluster_field {
    const char *key;
    size_t offset;
    bool is_int;
} dcr__cluster_field_t;

/* clang-format off */
#define DCR__CD(name) {#name, offsetof(dcr_sim_cluster_t, name), false}
#define DCR__CI(name) {#name, offsetof(dcr_sim_cluster_t, name), true}
/* clang-format on */
static const dcr__cluster_field_t dcr__cluster_fields[] = {
    DCR__CD(cross_gbps),   DCR__CD(flow_gbps),        DCR__CD(local_gbps),
    DCR__CD(fabric_gbps),  DCR__CD(latency_ms),       DCR__CD(local_latency_ms),
    DCR__CD(store_gbps),   DCR__CD(store_latency_ms), DCR__CD(store_list_ms),
    DCR__CD(store_put_ms), DCR__CD(ref_object_mib),   DCR__CI(store_flows),
    DCR__CI(fanout),       DCR__CI(queue_payloads),   DCR__CI(owner_queue),
    DCR__CD(relay_gbps),   DCR__CD(startup_ms),       DCR__CI(staging_payloads),
};

dcr_status_t dcr_sim_cluster_set(dcr_sim_cluster_t *c, const char *key, double v)
{
    for (size_t i = 0; i < sizeof(dcr__cluster_fields) / sizeof(dcr__cluster_fields[0]); i++) {
        const dcr__cluster_field_t *f = &dcr__cluster_fields[i];
        if (strcmp(key, f->key)) continue;
        if (!f->is_int) {
            *(double *)((char *)c + f->offset) = v;
            return DCR_OK;
        }
        if (!(v == floor(v) && fabs(v) <= 1e9))
            return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %g, expected a whole number", key,
                                 v);
        *(int *)((char *)c + f->offset) = (int)v;
        return DCR_OK;
    }
    return dcr_error_set(DCR_EINVAL, "sim cluster: no numeric field \"%s\"", key);
}

dcr_status_t dcr_sim_cluster_apply_calibration(dcr_sim_cluster_t *c,
                                               const dcr_sim_calibration_t *cal)
{
    for (int i = 0; i < cal->ncluster; i++)
        DCR_CHECK(dcr_sim_cluster_set(c, cal->cluster[i].key, cal->cluster[i].value));
    return dcr_sim_cluster_validate(c);
}
