/* Shared by the transport wrappers (transport.c), link emulation (link.c) and
 * the built-in backends (objstore_transport.c, relay_tcp.c); not part of the public
 * interface. Tests may include it to reach the few test hooks at the end. */
#ifndef DCR_TRANSPORT_INTERNAL_H
#define DCR_TRANSPORT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/transport.h"

/* Defaults for the configuration fields where 0 means "choose for me". */
#define DCR__TRANSPORT_FANOUT_DEFAULT 2
#define DCR__TRANSPORT_QUEUE_DEFAULT  8
/* Bounds that keep a wrong configuration from asking for absurd resources. */
#define DCR__TRANSPORT_NODES_MAX 4096
#define DCR__TRANSPORT_WORLD_MAX 65536
/* Largest payload either backend accepts: far above any bucket (the seed's
 * target is 512 MiB of chunk input, and a payload is smaller than its input). */
#define DCR__TRANSPORT_PAYLOAD_MAX ((uint64_t)1 << 32)

/* ---- link emulation (link.c) ------------------------------------------- */

/* Booked intervals one link keeps (older ones are dropped as time passes). */
#define DCR__BUCKET_SLOTS 64

/* One direction of one node's link: a rate shared by every flow through it.
 * Pacing is by virtual time: a transfer of n bytes books the earliest free
 * interval of n / rate at or after its start and its sender sleeps until
 * the end, so concurrent flows share the rate in chunk-sized turns and an
 * idle link banks no credit (no burst beyond one chunk). Bookings are kept
 * as a calendar, not a single "free again" time: a flow's first chunk is
 * booked a latency ahead (when its bytes arrive), and another flow's bytes
 * that arrive before then must still find the link free. */
typedef struct dcr__bucket {
    pthread_mutex_t mu;
    double ns_per_byte; /* 0: unlimited */
    int nbooked;
    uint64_t lo[DCR__BUCKET_SLOTS], hi[DCR__BUCKET_SLOTS]; /* sorted, disjoint */
} dcr__bucket_t;

/* Every emulated link of one transport: the same objects serve the refit and
 * the reference, so both see the same limits. */
typedef struct dcr__links {
    dcr_link_config_t cfg;
    int train_nodes;
    int rollout_nodes;
    dcr__bucket_t *train_cross; /* [train_nodes] egress of each training node */
    dcr__bucket_t *roll_cross;  /* [rollout_nodes] cross-cluster ingress of each rollout node */
    dcr__bucket_t *local_out;   /* [rollout_nodes] local link, sending direction */
    dcr__bucket_t *local_in;    /* [rollout_nodes] local link, receiving direction */
} dcr__links_t;

/* One flow: a sequential byte stream (one object transfer, one connection's
 * frame). Owned by the thread that moves the bytes. */
typedef struct dcr__flow {
    dcr__bucket_t *via[2];
    int nvia;
    double ns_per_byte;  /* per-flow cap; 0: none */
    uint64_t next_ns;    /* when this flow may move its next byte */
    uint64_t latency_ns; /* one-way latency still to add before the first byte */
    /* Cancellation: the flow stops pacing (and its owner stops moving bytes)
     * once *gen differs from gen0. NULL: never cancelled. */
    const atomic_uint_fast64_t *gen;
    uint64_t gen0;
} dcr__flow_t;

/* Bytes moved between two pacing decisions: small enough that concurrent
 * flows interleave finely, large enough that sleeps stay long compared with
 * the timer's overshoot at our rates (64 KiB at 0.25 Gbps is 2.1 ms). */
#define DCR__LINK_CHUNK ((size_t)64 << 10)

dcr_status_t dcr__links_create(const dcr_link_config_t *cfg, int train_nodes, int rollout_nodes,
                               dcr__links_t **out_p);
/* Accepts NULL. */
void dcr__links_destroy(dcr__links_t *l);

/* A cross-cluster flow from training node `train_node` (-1: the object store)
 * to rollout node `rollout_node` (-1: the object store), with the per-flow cap
 * and one one-way latency. */
void dcr__flow_cross(dcr__flow_t *f, dcr__links_t *l, int train_node, int rollout_node,
                     const atomic_uint_fast64_t *gen, uint64_t gen0);
/* A local flow from rollout node `from` to rollout node `to` (relay hops). */
void dcr__flow_local(dcr__flow_t *f, dcr__links_t *l, int from, int to,
                     const atomic_uint_fast64_t *gen, uint64_t gen0);
/* Blocks until the next n bytes of the flow may move (n <= DCR__LINK_CHUNK
 * keeps sharing fair). DCR_ECLOSED, without waiting further, once the flow is
 * cancelled. */
dcr_status_t dcr__flow_pace(dcr__flow_t *f, size_t n);
/* True once the flow's cancellation generation moved on. */
bool dcr__flow_cancelled(const dcr__flow_t *f);

/* ---- the part every backend handle starts with (transport.c) ----------- */

typedef struct dcr__counters {
    atomic_int_fast64_t payload_bytes;
    atomic_int_fast64_t cross_bytes;
    atomic_int_fast64_t local_bytes;
    atomic_int_fast64_t dropped_stale;
    atomic_int_fast64_t rejected;
    atomic_int_fast64_t unauthenticated; /* of rejected */
} dcr__counters_t;

typedef struct dcr__tbase {
    dcr_transport_t pub;        /* first: the wrappers' header */
    dcr_transport_config_t cfg; /* validated copy, defaults filled; cfg.dir points at dir */
    char *dir;                  /* owned copy of cfg->dir; NULL when none was given */
    char *s3_endpoint;          /* owned copy of cfg->s3_endpoint, or NULL */
    dcr__links_t *links;
    dcr__counters_t count;
} dcr__tbase_t;

/* Fills the common part from a configuration the wrapper validated. */
dcr_status_t dcr__tbase_init(dcr__tbase_t *b, const dcr_transport_config_t *cfg);
/* Frees what dcr__tbase_init allocated; safe on a zeroed or half-built base. */
void dcr__tbase_fini(dcr__tbase_t *b);
void dcr__tbase_counters(dcr__tbase_t *b, dcr_transport_counters_t *out_p);
/* Counts one payload the transport refused: in rejected, and also in
 * unauthenticated when `unauthenticated` (dcr_payload_auth_failure of the
 * refusal under the transport's key), so that a forgery shows apart from
 * corruption, as the receivers count them. Thread-safe. */
void dcr__tbase_refused(dcr__tbase_t *b, bool unauthenticated);
/* Training node of owner endpoint `owner`. */
int dcr__tbase_train_node(const dcr__tbase_t *b, int owner);

/* Checks a payload an owner hands to send against the open attempt: header
 * readable (magic, version, lengths; the digest is checked where the bytes
 * are received), tau equal to the attempt's (else dropped and counted stale:
 * DCR_ECLOSED), owner and payload id equal to the caller's (DCR_EINVAL). */
dcr_status_t dcr__payload_check_send(dcr__tbase_t *b, uint64_t tau, int owner, uint64_t payload_id,
                                     const uint8_t *buf, size_t len, dcr_payload_header_t *hdr_p);

/* The training side's record of one attempt: every payload each owner had
 * queued, for duplicate detection, finish counts and the object store's
 * manifest. Not thread-safe: the backend's training-side lock guards it. */
typedef struct dcr__ledger_entry {
    uint32_t owner;
    uint64_t id;
    uint64_t len;
    uint8_t digest[16];
} dcr__ledger_entry_t;

typedef struct dcr__ledger {
    int world;
    dcr__ledger_entry_t *e;
    size_t n, cap;
    uint64_t *sent; /* [world] payloads queued per owner */
    bool *finished; /* [world] */
    int nfinished;
} dcr__ledger_t;

dcr_status_t dcr__ledger_init(dcr__ledger_t *l, int world);
void dcr__ledger_fini(dcr__ledger_t *l);
void dcr__ledger_reset(dcr__ledger_t *l);
/* DCR_EINVAL when (owner, id) was already queued in this attempt, or the
 * owner already finished. */
dcr_status_t dcr__ledger_check(const dcr__ledger_t *l, uint64_t tau, int owner, uint64_t id);
dcr_status_t dcr__ledger_add(dcr__ledger_t *l, int owner, const dcr_payload_header_t *h,
                             uint64_t len);
/* Marks owner finished after checking npayloads against what it queued;
 * *all_p tells whether it was the last owner to finish. */
dcr_status_t dcr__ledger_finish(dcr__ledger_t *l, uint64_t tau, int owner, uint64_t npayloads,
                                bool *all_p);

/* Sleeps until deadline_ns (dcr_clock_ns time) or until *gen != gen0 (gen may
 * be NULL); returns false when cancelled. */
bool dcr__sleep_until(uint64_t deadline_ns, const atomic_uint_fast64_t *gen, uint64_t gen0);

/* ---- built-in backends -------------------------------------------------- */

extern const dcr_transport_ops_t dcr__transport_objstore_ops;
extern const dcr_transport_ops_t dcr__transport_relay_ops;

/* The object store's manifest (format in objstore_manifest.c). Parses text[0, len)
 * of the manifest at `path` (named in errors) for attempt tau of a transport
 * with `world` owners. On success *entries_p (malloc'd, caller frees) and
 * *n_p hold the listed payloads. Errors: DCR_ETRANSPORT naming the path, the
 * line and what was expected. Exposed for tests and the fuzz target. */
dcr_status_t dcr__manifest_parse(const char *text, size_t len, const char *path, uint64_t tau,
                                 int world, dcr__ledger_entry_t **entries_p, size_t *n_p);

/* Test hook: breaks one TCP connection of the relay's open attempt as a
 * crash or a network fault would (shutdown of both directions). node >= 1:
 * the link from node's parent to node; node == -1 - o: owner o's link to the
 * root. DCR_EUNSUPPORTED for other backends, DCR_ECLOSED with no attempt. */
dcr_status_t dcr__relay_break_link(dcr_transport_t *t, int node);

#endif
