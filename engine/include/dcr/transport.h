/* Payload transports between the training cluster (owners) and the rollout
 * cluster (rollout nodes). The two sides share no memory even in one
 * process (G4): everything crosses as bytes through a backend, and every
 * byte that crosses the cluster boundary is counted.
 *
 * Backends fill dcr_transport_ops_t and are created by name ("objstore":
 * object storage, a directory or an S3-compatible service chosen by the
 * store URL in dir; "relay": a TCP relay tree on loopback), or registered at
 * run time from outside the engine (dcr_transport_register: faults/ adds
 * "faulty:<name>" backends that wrap the real ones, as SQLite's test VFS
 * wraps its parent VFS). Callers use only the dcr_transport_* wrappers in
 * transport/transport.c.
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

#include "dcr/codec.h"
#include "dcr/ops.h"
#include "dcr/status.h"

/* Emulated links (the same limits serve the refit and the reference). A
 * bandwidth of 0 means unlimited. Bytes really move (files, loopback TCP);
 * the emulation paces them by sleeping as they move. Directions are
 * independent (full duplex). */
typedef struct dcr_link_config {
    double cross_gbps; /* per node, each direction, across the cluster boundary */
    double flow_gbps;  /* per single flow (one connection, one object) across the boundary */
    double local_gbps; /* per rollout node's local link (relay tree hops), each direction */
    double latency_ms; /* one-way, added once per cross-cluster transfer (object, payload frame) */
} dcr_link_config_t;

/* The relay tree across processes: where each tree node accepts
 * connections (DESIGN.md section 11: endpoints are published through the
 * control plane; the roles implement this over it). Both calls may block
 * briefly on the directory's store and are made from transport threads. */
typedef struct dcr_relay_directory {
    /* Records that tree node `node` (this handle's) accepts connections at
     * addr ("HOST:PORT"); called once by create. */
    dcr_status_t (*publish)(void *ctx, int node, const char *addr);
    /* Writes where tree node `node` accepts connections now ("HOST:PORT")
     * into addr; DCR_ENOTFOUND while nothing is published. */
    dcr_status_t (*lookup)(void *ctx, int node, char *addr, size_t cap);
    void *ctx;
} dcr_relay_directory_t;

typedef struct dcr_transport_config {
    int train_nodes;   /* training nodes (>= 1); owner r lives on node r / (world / train_nodes) */
    int world;         /* owner endpoints (training ranks): a multiple of train_nodes */
    int rollout_nodes; /* receiving endpoints (>= 1) */
    dcr_link_config_t link;
    const char *dir;         /* objstore: the store (copied at create): a directory (created
                                if missing) or a store URL, "dir:PATH" or "s3://BUCKET/PREFIX"
                                (dcr/objstore.h) */
    int fanout;              /* relay: children per tree node (>= 1; 0: 2) */
    size_t queue_payloads;   /* relay: per-hop bounded queue; objstore: payloads each rollout
                                node prefetches ahead of recv (>= 1; 0: 8) */
    const char *s3_endpoint; /* objstore on s3://: "http[s]://HOST[:PORT]" (copied at create) */
    /* objstore: destroy leaves the last attempt's objects (payloads and
     * manifest) in the store for the user to inspect, instead of deleting
     * them; older attempts are still removed as new ones open. */
    bool keep_objects;
    /* objstore across processes (DESIGN.md section 11; deploy/roles.h).
     * Every process of a run opens its own handle over the same store.
     *
     * join: open_attempt joins attempt tau without clearing anything: neither
     * tau's prefix nor the previous attempt's is removed, and destroy leaves
     * the store alone. Exactly one handle per run opens without join (the
     * coordinator's, the clearing handle) and owns clearing: its open of tau
     * must complete before any joining handle opens tau (the coordinator says
     * so through the control plane), and it removes the replaced attempt's
     * objects when it opens the next one.
     *
     * owner_first, owner_count: the owners this handle serves, [owner_first,
     * owner_first + owner_count) of [0, world) (an owner process's ranks);
     * owner_count 0: every owner. send and finish refuse other owners
     * (DCR_EINVAL). Once all of its owners finished, the handle writes its
     * owners' completion marker, a manifest part listing their payloads
     * (objstore_manifest.c); readers complete the attempt once the parts of
     * all `world` owners are present. A handle serving every owner writes
     * the one whole manifest, as in one process.
     *
     * send_only: the handle serves no rollout endpoint (an owner's or the
     * coordinator's): no download threads, recv is DCR_EINVAL;
     * rollout_nodes still sizes the links. The relay supports none of
     * these (it refuses them at create). */
    bool join;
    int owner_first, owner_count;
    bool send_only;
    /* relay across processes: with relay_dir (copied at create; its ctx is
     * borrowed and must outlive the handle) each process's handle is one
     * part of the tree. A handle serving tree node relay_node (0: the
     * root) listens on relay_host (an IPv4 address; NULL: 127.0.0.1; port
     * chosen by the kernel), publishes "HOST:PORT" through relay_dir and,
     * in each attempt, accepts its children (and, at the root, the owners)
     * and connects to its parent itself (open_attempt tries once, for at
     * most 2 s, then its reader thread keeps trying for 30 s; a child that
     * has not connected within 30 s fails the attempt); recv serves
     * relay_node only. A
     * handle with relay_node -1 serves no tree node: an owner process's (it
     * connects each owner it sends for to the root, at its first send or
     * finish of the attempt) or the coordinator's (it sends nothing and
     * connects nowhere). Every connection opens with a hello naming the
     * attempt, so one that arrives before its peer opened the attempt
     * waits for it. Bytes that cross the boundary are counted by the
     * owner's handle that sent them, so that the sum over processes counts
     * each once. reference is refused (it runs in one handle). NULL: the
     * whole tree lives in this handle (the fields above are ignored). */
    const dcr_relay_directory_t *relay_dir;
    int relay_node;
    const char *relay_host;
} dcr_transport_config_t;

/* Accounting since creation, of attempts only (reference() traffic is not
 * counted). Callers take differences around a refit. */
typedef struct dcr_transport_counters {
    int64_t payload_bytes;   /* V_payload: bytes of payloads send() accepted */
    int64_t cross_bytes;     /* V_cross: payload bytes that crossed the cluster boundary
                                (objstore: every upload and every download; relay: owner
                                to root); manifests and frame headers are not counted */
    int64_t local_bytes;     /* payload bytes moved over rollout-local links (relay hops) */
    int64_t dropped_stale;   /* payloads of another or a replaced attempt dropped (sent with
                                a stale tau, found under the wrong attempt, or queued for a
                                node's recv when the attempt was replaced or stopped) */
    int64_t rejected;        /* corrupt, truncated, foreign or unlisted payloads refused
                                (objstore: once per rollout node that saw the object) */
    int64_t unauthenticated; /* of rejected: refused for their keying or keyed digest
                                (forged, unkeyed under a key, keyed differently, keyed
                                with no key; dcr_payload_auth_failure), as receivers
                                count them in their stats.unauthenticated */
} dcr_transport_counters_t;

typedef struct dcr_transport dcr_transport_t;

/* One delivered payload: bytes owned by the transport until release. Its
 * header names the open attempt, and the bytes passed dcr_payload_peek with
 * verify_digest where they entered the rollout cluster (objstore: on every
 * node; relay: at the root). */
typedef struct dcr_delivery {
    const uint8_t *data;
    size_t len;
    void *handle; /* backend's */
} dcr_delivery_t;

/* What a backend guarantees; the wrappers, callers and the conformance
 * suite branch on these, never on a backend's name. A wrapping backend
 * (its header's parent set, dcr/ops.h) states what the backend it wraps
 * guarantees. */
typedef struct dcr_transport_props {
    /* Payloads are objects of a store (dcr/objstore.h) that cfg->dir names
     * (required): listable under the attempt's prefix ("attempt-<tau>/"),
     * readable by other processes, removed when a later attempt opens (or
     * at destroy, unless keep_objects). Readers verify each object, so a
     * corrupt one is stored and refused by every reader. */
    bool durable_store;
    /* A payload crosses the cluster boundary once, into the tree's root,
     * and moves on over per-hop rollout-local links (counted in
     * local_bytes); the root verifies it at send, so a corrupt payload is
     * refused there (DCR_EPAYLOAD, DCR_EDIGEST). Without it every rollout
     * node fetches every payload across the boundary itself. */
    bool per_hop_links;
    /* send waits for slow receivers (bounded per-hop queues); without it a
     * send never waits for a reader. */
    bool backpressure;
    /* Payloads move over connections that can break mid-attempt; the
     * attempt then fails (DCR_ETRANSPORT) and the next one reconnects. */
    bool connections;
    /* Accepts join, owner subsets and send_only (one handle per process of
     * a run, dcr_transport_config_t); without it create refuses them. */
    bool split_handles;
} dcr_transport_props_t;

/* The ops table layout this header describes; a backend sets version to it,
 * and the registry refuses tables written for another layout. */
#define DCR_TRANSPORT_OPS_VERSION 3

/* Backend slots. The wrappers check handles, owner and node ranges and
 * out-parameters before any slot runs, and fill the handle's header after
 * create. Threading: send/finish are called concurrently from owner threads
 * and recv/release from node threads (one caller per owner or node at a
 * time); open_attempt, stop_and_wait, reference and destroy are called by
 * one control thread, never concurrently with each other; destroy only when
 * no other call is in flight. */
typedef struct dcr_transport_ops {
    dcr_ops_header_t hdr; /* version DCR_TRANSPORT_OPS_VERSION; a wrapper's parent */
    dcr_transport_props_t props;
    /* Builds a handle from a validated configuration (defaults filled). May
     * start threads. self is the table the backend was found in (a
     * wrapper's names the backend it wraps as its parent). */
    dcr_status_t (*create)(const struct dcr_transport_ops *self, const dcr_transport_config_t *cfg,
                           dcr_transport_t **out_p);
    /* Opens attempt tau (> every tau opened before on this handle) on every
     * endpoint; first stops the previous attempt as stop_and_wait does, so
     * payloads and manifests of other attempts are ignored from now on. Does
     * not block on peers. */
    dcr_status_t (*open_attempt)(dcr_transport_t *t, uint64_t tau);
    /* Owner `owner` publishes one payload of the open attempt. Blocks until
     * the transport has taken it (objstore: the queueing acknowledgment;
     * relay: its bytes are on the owner's connection, with at most a few
     * frames unanswered by the root), with back-pressure when downstream is
     * slow; copies what it keeps. Thread-safe
     * across owners; one caller per owner at a time. The payload's header must
     * name the open attempt (else it is dropped and counted stale:
     * DCR_ECLOSED), this owner and payload_id (else DCR_EINVAL); an id sent
     * twice in one attempt is DCR_EINVAL. Corrupt bytes: the relay root
     * refuses them (DCR_EPAYLOAD, DCR_EDIGEST), and the refusal fails that
     * send or one of the owner's later sends, at the latest its finish,
     * naming the payload; the object store stores them and its readers
     * refuse them. DCR_ECLOSED when no attempt is open
     * or it was stopped meanwhile; DCR_ETRANSPORT when the attempt failed. */
    dcr_status_t (*send)(dcr_transport_t *t, int owner, uint64_t payload_id, const uint8_t *buf,
                         size_t len);
    /* Owner `owner` has sent all its payloads of the attempt (count of them;
     * DCR_EINVAL if it differs from what the transport queued, or on a second
     * finish). Every owner finishes every attempt, also with 0. The last
     * owner to finish completes the attempt (objstore: writes the manifest;
     * relay: the root queues the end marker behind every payload). */
    dcr_status_t (*finish)(dcr_transport_t *t, int owner, uint64_t npayloads);
    /* Next payload of the open attempt for rollout node `node`, in arrival
     * order; DCR_ETIMEOUT after timeout_ms (0: poll, < 0: no limit) when
     * none arrived yet (the one timeout code of every timed wait in the
     * engine: transport recv, group recv, queue push and pop, object store
     * wait_change); DCR_ECLOSED once every payload of the attempt has been
     * delivered to this node, or when no attempt is open (stopped, not yet
     * opened); DCR_ETRANSPORT with the cause when the attempt failed (lost
     * connection, malformed manifest, a listed payload missing or corrupt).
     * Each node sees each payload exactly once. *out_p is written only on
     * success and stays valid until release, also across later attempts. */
    dcr_status_t (*recv)(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p);
    /* Gives back delivery d (d->handle set by this backend's recv on this
     * node): frees or unreferences its bytes. Any attempt's delivery, also
     * after a later open_attempt or stop_and_wait. Never blocks on peers,
     * never fails; the wrapper clears *d afterwards and skips a cleared d. */
    void (*release)(dcr_transport_t *t, int node, dcr_delivery_t *d);
    /* Stops the attempt: wakes blocked senders and receivers (DCR_ECLOSED)
     * and returns once no write of the attempt can still take effect.
     * Returns at once when no attempt is open. Cannot fail and cannot be
     * refused (a wrapping backend passes it on): callers rely on it to end
     * an attempt whatever state it is in, on failure paths too. */
    void (*stop_and_wait)(dcr_transport_t *t);
    /* The transport-only full-checkpoint reference over the same links:
     * each training node moves `per_node_bytes[i]` (train_nodes entries) of
     * dummy checkpoint bytes through the backend's own data path (objstore:
     * its owners upload objects, then every rollout node downloads all of
     * them; relay: its owners stream them through the tree to every node).
     * Blocks; returns the elapsed seconds. Runs between attempts: it shares
     * the emulated links with an open attempt. Not counted in counters. */
    dcr_status_t (*reference)(dcr_transport_t *t, const int64_t *per_node_bytes, double *seconds_p);
    /* Fills *out_p with the counts since create. Any thread, any time before
     * destroy; never blocks on peers, never fails. */
    void (*counters)(dcr_transport_t *t, dcr_transport_counters_t *out_p);
    /* Stops any open attempt as stop_and_wait does, joins the backend's
     * threads, removes what this handle owns in its store (objstore: not with
     * join or keep_objects) and frees t. Only when no other call is in
     * flight and every delivery was released; payloads not yet delivered
     * are freed. Never fails. */
    void (*destroy)(dcr_transport_t *t);
    /* Optional: called by dcr_transport_set_payload_key after the header's
     * payload_key and payload_policy changed; a wrapping backend passes the
     * key on to the backend it wraps. Built-in backends read the header. */
    void (*payload_key_changed)(dcr_transport_t *t, const dcr_payload_key_t *key);
} dcr_transport_ops_t;

/* Every backend's handle starts with this header; the wrappers fill it
 * after create. */
struct dcr_transport {
    const dcr_transport_ops_t *ops;
    /* The validated configuration's sizes, for the wrappers' range checks
     * (a backend registered from outside the engine has no other header). */
    int train_nodes, world, rollout_nodes;
    int owner_first, owner_count; /* the owners this handle serves (count 0: all) */
    bool send_only;               /* serves no rollout node */
    /* What the places where payloads enter the rollout cluster accept
     * (objstore: every download; relay: the root), passed to
     * dcr_payload_verify. Set by dcr_transport_set_payload_key;
     * payload_policy.key points at payload_key once a key is set. */
    dcr_payload_key_t payload_key;
    dcr_payload_policy_t payload_policy;
};

/* Sets the payload key the transport verifies arriving payloads with
 * (copied): keyed payloads under another key, unkeyed ones and forgeries
 * are refused and counted as rejected and unauthenticated. NULL or an
 * unset key: only unkeyed
 * payloads are accepted. Call after create and before the first attempt. */
void dcr_transport_set_payload_key(dcr_transport_t *t, const dcr_payload_key_t *key);

/* Backends by name: "objstore", "relay", and those registered. NULL when
 * unknown. */
const dcr_transport_ops_t *dcr_transport_find(const char *name);
/* Adds a backend from outside the engine (the table is borrowed and must
 * stay valid for the process). It needs version DCR_TRANSPORT_OPS_VERSION,
 * a name and every slot but payload_key_changed. Registering the same table
 * again is a no-op; another table under a taken name, or a full registry
 * (64), is DCR_EINVAL. Thread-safe. */
dcr_status_t dcr_transport_register(const dcr_transport_ops_t *ops);
/* Registry: backends compiled into libdcr in a fixed order, then those
 * registered, in registration order (conformance tests loop over them). */
size_t dcr_transport_backend_count(void);
/* Name of backend i (< count), or NULL. */
const char *dcr_transport_backend_name(size_t i);

/* Link defaults that keep our scaled models in the seed's transport-bound
 * regime (printed by dcr bench): 0.25 Gbps per node across the boundary,
 * 0.2 Gbps per flow, 2.5 Gbps local, 5 ms latency; link.c says why. */
dcr_link_config_t dcr_link_config_default(void);

dcr_status_t dcr_transport_create(const char *name, const dcr_transport_config_t *cfg,
                                  dcr_transport_t **out_p);
dcr_status_t dcr_transport_open_attempt(dcr_transport_t *t, uint64_t tau);
dcr_status_t dcr_transport_send(dcr_transport_t *t, int owner, uint64_t payload_id,
                                const uint8_t *buf, size_t len);
dcr_status_t dcr_transport_finish(dcr_transport_t *t, int owner, uint64_t npayloads);
dcr_status_t dcr_transport_recv(dcr_transport_t *t, int node, int timeout_ms,
                                dcr_delivery_t *out_p);
void dcr_transport_release(dcr_transport_t *t, int node, dcr_delivery_t *d);
/* See the slot. Accepts NULL (does nothing). */
void dcr_transport_stop_and_wait(dcr_transport_t *t);
dcr_status_t dcr_transport_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                     double *seconds_p);
void dcr_transport_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p);
/* Stops any open attempt, joins the backend's threads, removes what it
 * stored, frees t. Accepts NULL. */
void dcr_transport_destroy(dcr_transport_t *t);
/* The backend's name ("objstore", "relay"); NULL for NULL. */
const char *dcr_transport_name(const dcr_transport_t *t);
/* What t's backend guarantees; NULL for NULL. */
const dcr_transport_props_t *dcr_transport_props(const dcr_transport_t *t);

#endif
