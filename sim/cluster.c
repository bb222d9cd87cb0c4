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
    c.store_prefixes = 1;
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
    DCR_CHECK(dcr__check_count("store_prefixes", c->store_prefixes, 1 << 20));
    if (c->staging_payloads < 0 || c->staging_payloads > (1 << 20))
        return dcr_error_set(DCR_EINVAL, "sim cluster: staging_payloads is %d, expected 0..%d",
                             c->staging_payloads, 1 << 20);
    if (c->shared_cores < 0 || c->shared_cores > 4096)
        return dcr_error_set(DCR_EINVAL, "sim cluster: shared_cores is %d, expected 0..4096",
                             c->shared_cores);
    const struct {
        const char *name;
        double v;
    } rates[] = {
        {"cross_gbps", c->cross_gbps},         {"flow_gbps", c->flow_gbps},
        {"local_gbps", c->local_gbps},         {"fabric_gbps", c->fabric_gbps},
        {"latency_ms", c->latency_ms},         {"local_latency_ms", c->local_latency_ms},
        {"store_gbps", c->store_gbps},         {"store_latency_ms", c->store_latency_ms},
        {"store_list_ms", c->store_list_ms},   {"store_put_ms", c->store_put_ms},
        {"ref_object_mib", c->ref_object_mib}, {"relay_gbps", c->relay_gbps},
        {"startup_ms", c->startup_ms},         {"store_get_rps", c->store_get_rps},
        {"store_put_rps", c->store_put_rps},   {"owner_export_gbps", c->owner_export_gbps}};
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        DCR_CHECK(dcr__check_rate(rates[i].name, rates[i].v));
    if (c->ref_object_mib <= 0)
        return dcr_error_set(DCR_EINVAL, "sim cluster: ref_object_mib must be > 0");
    /* Far above any network, far below what overflows a simulated clock. */
    for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++)
        if (rates[i].v > 1e7)
            return dcr_error_set(DCR_EINVAL, "sim cluster: %s is %g, expected at most 1e7",
                                 rates[i].name, rates[i].v);
    if (c->agg_nodes < 0 || c->agg_nodes > 1 << 20)
        return dcr_error_set(DCR_EINVAL, "sim cluster: agg_nodes is %d", c->agg_nodes);
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
    DCR__CD(cross_gbps),     DCR__CD(flow_gbps),
    DCR__CD(local_gbps),     DCR__CD(fabric_gbps),
    DCR__CD(latency_ms),     DCR__CD(local_latency_ms),
    DCR__CD(store_gbps),     DCR__CD(store_latency_ms),
    DCR__CD(store_list_ms),  DCR__CD(store_put_ms),
    DCR__CD(ref_object_mib), DCR__CI(store_flows),
    DCR__CI(fanout),         DCR__CI(queue_payloads),
    DCR__CI(owner_queue),    DCR__CD(relay_gbps),
    DCR__CD(startup_ms),     DCR__CI(staging_payloads),
    DCR__CD(store_get_rps),  DCR__CD(store_put_rps),
    DCR__CI(store_prefixes), DCR__CD(owner_export_gbps),
    DCR__CI(train_nodes),    DCR__CI(train_gpus),
    DCR__CI(rollout_nodes),  DCR__CI(rollout_gpus),
    DCR__CI(shared_cores),
};

size_t dcr_sim_cluster_nfields(void)
{
    return sizeof(dcr__cluster_fields) / sizeof(dcr__cluster_fields[0]);
}

const char *dcr_sim_cluster_field_name(size_t i)
{
    return i < dcr_sim_cluster_nfields() ? dcr__cluster_fields[i].key : NULL;
}

double dcr_sim_cluster_get(const dcr_sim_cluster_t *c, size_t i)
{
    const dcr__cluster_field_t *f = &dcr__cluster_fields[i];
    return f->is_int ? *(const int *)((const char *)c + f->offset)
                     : *(const double *)((const char *)c + f->offset);
}

bool dcr_sim_cluster_field_is_int(size_t i)
{
    return dcr__cluster_fields[i].is_int;
}

void dcr_sim_cluster_set_link_rate(dcr_sim_cluster_t *c, double gbps)
{
    double was = c->cross_gbps;
    /* 0 means unlimited: a cap of 0 stays no cap; from an unlimited node
     * rate there is no fraction to keep. */
    if (was > 0) {
        c->flow_gbps *= gbps / was;
        c->relay_gbps *= gbps / was;
    }
    c->cross_gbps = gbps;
}

int dcr_sim_cluster_chain_kids(const dcr_sim_cluster_t *c, int node)
{
    /* The leftmost node at depth d is (f^d - 1) / (f - 1) (d for f = 1); its
     * children are the leftmost f nodes of the next depth that exist. */
    int n = c->agg_nodes, f = c->fanout;
    long first = 0, width = 1;
    for (int d = 0; d < node; d++) {
        first += width;
        width *= f;
    }
    long kid0 = first * f + 1;
    long kids = n - kid0;
    if (kids < 0) kids = 0;
    return (int)(kids < f ? kids : f);
}

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
