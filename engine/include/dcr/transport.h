/* Payload transports between the training cluster (owners) and the rollout
 * cluster (rollout nodes). The two sides share no memory even in one
 * process (G4): everything crosses as bytes through a backend, and every
 * byte that crosses the cluster boundary is counted.
 *
 * Backends fill dcr_transport_ops_t and are created by name ("objstore":
 * a directory standing in for object storage; "relay": a TCP relay tree on
 * loopback). Callers use only the dcr_transport_* wrappers in
 * transport/transport.c, which also host the optional interceptor that
 * faults/ installs from outside.
 *
 * One transport instance serves one refit pipeline: `world` owner endpoints
 * (training ranks, grouped into training nodes) and `nodes` rollout node
 * endpoints. An attempt is opened on both sides with its tau; payloads of
 * another tau are dropped by the backend and counted, never delivered. */
#ifndef DCR_TRANSPORT_H
#define DCR_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* Emulated links (the same limits serve the refit and the reference). A
 * bandwidth of 0 means unlimited. */
typedef struct dcr_link_config {
    double cross_gbps;      /* per node, each direction, across the cluster boundary */
    double flow_gbps;       /* per single flow (one connection / one object transfer) across the boundary */
    double local_gbps;      /* per rollout node's local link (relay tree hops) */
    double latency_ms;      /* one-way, added per cross-cluster transfer */
} dcr_link_config_t;

typedef struct dcr_transport_config {
    int train_nodes;        /* training nodes; owner r lives on node r / (world / train_nodes) */
    int world;              /* owner endpoints (training ranks) */
    int rollout_nodes;      /* receiving endpoints */
    dcr_link_config_t link;
    const char *dir;        /* objstore: root directory (created if missing) */
    int fanout;             /* relay: children per tree node (>= 1) */
    size_t queue_payloads;  /* relay: per-hop bounded queue, in payloads (>= 1) */
} dcr_transport_config_t;

/* Cross-cluster accounting since creation (bytes). */
typedef struct dcr_transport_counters {
    int64_t payload_bytes;  /* V_payload: unique payload bytes submitted */
    int64_t cross_bytes;    /* V_cross: bytes that crossed the cluster boundary */
    int64_t local_bytes;    /* bytes moved over rollout-local links */
    int64_t dropped_stale;  /* payloads of a replaced attempt dropped */
    int64_t rejected;       /* corrupt/truncated/foreign items rejected */
} dcr_transport_counters_t;

typedef struct dcr_transport dcr_transport_t;

/* One delivered payload: bytes owned by the transport until release. */
typedef struct dcr_delivery {
    const uint8_t *data;
    size_t len;
    void *handle; /* backend's */
} dcr_delivery_t;

typedef struct dcr_transport_ops {
    const char *name;
    dcr_status_t (*create)(const dcr_transport_config_t *cfg, dcr_transport_t **out_p);
    /* Opens attempt tau on every endpoint; payloads and manifests of other
     * attempts are ignored from now on. Does not block on peers. */
    dcr_status_t (*open_attempt)(dcr_transport_t *t, uint64_t tau);
    /* Owner `owner` publishes one payload of the open attempt. Blocks until
     * the transport has queued it (the queueing acknowledgment), with
     * back-pressure when downstream is slow; copies what it keeps. Thread-safe
     * across owners; one caller per owner at a time. */
    dcr_status_t (*send)(dcr_transport_t *t, int owner, uint64_t payload_id, const uint8_t *buf, size_t len);
    /* Owner `owner` has sent all its payloads of the attempt (count of them).
     * The last owner to finish completes the attempt's manifest. */
    dcr_status_t (*finish)(dcr_transport_t *t, int owner, uint64_t npayloads);
    /* Next payload of the open attempt for rollout node `node`, in arrival
     * order; DCR_EAGAIN after timeout_ms when none arrived yet; DCR_ECLOSED
     * once every payload of the attempt has been delivered to this node.
     * Each node sees each payload exactly once. */
    dcr_status_t (*recv)(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p);
    void (*release)(dcr_transport_t *t, int node, dcr_delivery_t *d);
    /* Stops the attempt: wakes blocked senders and receivers (DCR_ECLOSED)
     * and returns once no write of the attempt can still take effect. */
    dcr_status_t (*stop_and_wait)(dcr_transport_t *t);
    /* The transport-only full-checkpoint reference over the same links:
     * each training node moves `per_node_bytes[i]` of checkpoint and every
     * rollout node receives all of it. Returns the elapsed seconds. */
    dcr_status_t (*reference)(dcr_transport_t *t, const int64_t *per_node_bytes, double *seconds_p);
    void (*counters)(dcr_transport_t *t, dcr_transport_counters_t *out_p);
    void (*destroy)(dcr_transport_t *t);
} dcr_transport_ops_t;

typedef dcr_status_t (*dcr_transport_interceptor_t)(void *ctx, const char *op, int endpoint, uint64_t payload_id,
                                                    const uint8_t *buf, size_t len);

/* Every backend's handle starts with this header; the wrappers own the
 * interceptor fields. */
struct dcr_transport {
    const dcr_transport_ops_t *ops;
    dcr_transport_interceptor_t intercept;
    void *intercept_ctx;
};

/* Backends by name: "objstore", "relay". NULL when unknown. */
const dcr_transport_ops_t *dcr_transport_find(const char *name);

/* Link defaults that keep our scaled models in the seed's transport-bound
 * regime (printed by dcr bench). */
dcr_link_config_t dcr_link_config_default(void);

dcr_status_t dcr_transport_create(const char *name, const dcr_transport_config_t *cfg, dcr_transport_t **out_p);
dcr_status_t dcr_transport_open_attempt(dcr_transport_t *t, uint64_t tau);
dcr_status_t dcr_transport_send(dcr_transport_t *t, int owner, uint64_t payload_id, const uint8_t *buf, size_t len);
dcr_status_t dcr_transport_finish(dcr_transport_t *t, int owner, uint64_t npayloads);
dcr_status_t dcr_transport_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p);
void dcr_transport_release(dcr_transport_t *t, int node, dcr_delivery_t *d);
dcr_status_t dcr_transport_stop_and_wait(dcr_transport_t *t);
dcr_status_t dcr_transport_reference(dcr_transport_t *t, const int64_t *per_node_bytes, double *seconds_p);
void dcr_transport_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p);
/* Accepts NULL. */
void dcr_transport_destroy(dcr_transport_t *t);

/* Interceptor for fault injection (installed by faults/, never by engine/):
 * called by the wrappers before the backend with the operation's name and
 * arguments; a non-OK return is returned instead of calling the backend.
 * NULL removes it. */
void dcr_transport_set_interceptor(dcr_transport_t *t, dcr_transport_interceptor_t fn, void *ctx);

#endif
