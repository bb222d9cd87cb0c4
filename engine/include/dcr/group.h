/* Intra-cluster group communication (training side only; G4 forbids any
 * collective spanning the two clusters). A group is a set of ranks 0..size-1;
 * a dcr_group_t handle is one rank's endpoint in it. Backends fill a
 * versioned dcr_group_ops_t and are found by name in a registry:
 *   "inproc": every rank is a thread of one process; one create call makes
 *             all the endpoints;
 *   "mpi":    (only when libdcr was built with MPI, DCR_HAVE_MPI) one
 *             endpoint per process of an MPI job, ranks are MPI_COMM_WORLD
 *             ranks, messages travel on a duplicate of MPI_COMM_WORLD. The
 *             process that owns the job calls MPI_Init_thread with
 *             MPI_THREAD_MULTIPLE before creating the endpoint and
 *             MPI_Finalize after destroying it; the engine never does. Each
 *             endpoint runs a thread that takes messages in as they arrive,
 *             so sends complete without the destination calling recv.
 * Backends registered at run time (dcr_group_register) join them, as the
 * other pluggable parts allow (faults/ registers a "faulty:<name>" wrapper
 * around each, which loses or delays owners' messages). Callers use
 * only the dcr_group_* wrappers (engine/group/group.c), which validate
 * arguments once for every backend. */
#ifndef DCR_GROUP_H
#define DCR_GROUP_H

#include <stdbool.h>
#include <stddef.h>

#include "dcr/ops.h"
#include "dcr/status.h"

typedef struct dcr_group dcr_group_t;

/* A received message: data is owned by the receiver until dcr_group_release
 * (on the endpoint that received it). src is the sender's rank. */
typedef struct dcr_group_msg {
    int src;
    int tag;
    void *data;
    size_t len;
} dcr_group_msg_t;

/* What a backend guarantees; conformance tests and callers branch on these,
 * never on a backend's name. */
typedef struct dcr_group_props {
    /* Ranks may live in other processes (or hosts): only bytes cross, so a
     * message must never carry pointers, and one create call yields only
     * this process's endpoint. */
    bool cross_process;
    /* Messages of one (src, tag) pair are received in the order they were
     * sent (both built-in backends guarantee it; construction relies on it). */
    bool ordered_per_pair;
    /* Valid tags are 0..max_tag (MPI guarantees at least 32767). */
    int max_tag;
    /* Largest len of one message. */
    size_t max_message;
} dcr_group_props_t;

/* The ops table layout this header describes; a backend sets version to it,
 * and the registry refuses tables written for another layout. */
#define DCR_GROUP_OPS_VERSION 3

/* A backend. Slots receive arguments the wrappers have already validated
 * (non-NULL, ranks in 0..size-1, tags in 0..props.max_tag, len at most
 * props.max_message), write out-parameters only when returning DCR_OK, and
 * report failures with dcr_error_set. Every slot of one endpoint may be
 * called by several threads at once, except destroy, which must be the last
 * call on the endpoint. */
typedef struct dcr_group_ops {
    dcr_ops_header_t hdr; /* version DCR_GROUP_OPS_VERSION; a wrapper's parent */
    /* A wrapper states what the backend it wraps guarantees. */
    dcr_group_props_t props;
    /* Creates this process's endpoints of a new group: size >= 1 endpoints
     * (ranks 0..size-1) for an in-process backend; for a cross-process one
     * exactly one (this process's rank), size being 0 ("whatever the job
     * has") or the job's size. Writes them to endpoints[0..*count_p), which
     * has room for max(size, 1) entries. A cross-process create is
     * collective: every process of the job calls it, in the same order
     * relative to its other group creations. DCR_EINVAL for a bad size or
     * an environment the backend cannot use (MPI not initialized, wrong
     * thread level), DCR_ENOMEM. Blocks only for the collective. self is
     * the table the backend was found in (a wrapper's names its parent). */
    dcr_status_t (*create)(const struct dcr_group_ops *self, int size, dcr_group_t **endpoints,
                           int *count_p);
    /* This endpoint's rank and the group size. Never block, never fail. */
    int (*rank)(const dcr_group_t *g);
    int (*size)(const dcr_group_t *g);
    /* Sends len bytes of buf (len may be 0) to rank dst, which may be this
     * endpoint's own rank. buf stays the caller's: the message is copied
     * (or fully transferred) before send returns. May block for
     * back-pressure (the destination taking the bytes in), never until the
     * destination calls recv. DCR_ENOMEM, DCR_ETRANSPORT. */
    dcr_status_t (*send)(dcr_group_t *g, int dst, int tag, const void *buf, size_t len);
    /* Takes the oldest received message with this tag (from any source),
     * waiting up to timeout_ms (0: only check, < 0: no limit); DCR_ETIMEOUT
     * (nothing written) on expiry. *out_p's data is the caller's until
     * release. */
    dcr_status_t (*recv)(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p);
    /* Frees a received message's data and clears msg->data. Never fails. */
    void (*release)(dcr_group_t *g, dcr_group_msg_t *msg);
    /* Frees this endpoint and the messages it received but nobody took.
     * Never fails. The last endpoint of an in-process group frees the group;
     * a cross-process destroy is collective (every process destroys its
     * endpoint) and must come after every message sent to this endpoint was
     * received, since a peer's send may otherwise wait forever. */
    void (*destroy)(dcr_group_t *g);
} dcr_group_ops_t;

/* Every endpoint starts with this header; create sets it and the wrappers
 * dispatch through it. */
struct dcr_group {
    const dcr_group_ops_t *ops;
};

/* Adds a backend from outside the engine (the table is borrowed and must
 * stay valid for the process). It needs version DCR_GROUP_OPS_VERSION, a
 * name and every slot. Registering the same table again is a no-op; another
 * table under a taken name, or a full registry (64), is DCR_EINVAL.
 * Thread-safe. */
dcr_status_t dcr_group_register(const dcr_group_ops_t *ops);
/* Registry: the backends compiled into libdcr, in a fixed order ("inproc",
 * then "mpi" when built with MPI), then those registered. Conformance tests
 * loop over them. */
size_t dcr_group_backend_count(void);
/* Name of backend i (< count), or NULL. */
const char *dcr_group_backend_name(size_t i);
/* The backend named name, or NULL when unknown or not compiled in. */
const dcr_group_ops_t *dcr_group_find(const char *name);

/* Creates this process's endpoints of a new group of backend `backend` into
 * endpoints[0..*count_p) (see the create slot): "inproc" makes `size`
 * endpoints, ranks 0..size-1, each used by one or more threads of this
 * process; "mpi" makes this process's one endpoint over a duplicate of
 * MPI_COMM_WORLD, `size` being 0 or the world size, collectively. endpoints
 * must have room for max(size, 1) entries. Each endpoint is destroyed with
 * dcr_group_destroy. DCR_ENOTFOUND for an unknown backend (or "mpi" in a
 * build without MPI), DCR_EINVAL for a bad size or environment, DCR_ENOMEM.
 * *count_p is written only on success (endpoints[] holds nothing usable
 * after a failure). */
dcr_status_t dcr_group_create(const char *backend, int size, dcr_group_t **endpoints, int *count_p);

/* This endpoint's rank in 0..size-1, and the group size. */
int dcr_group_rank(const dcr_group_t *g);
int dcr_group_size(const dcr_group_t *g);
/* The backend's ops table (name, properties). */
const dcr_group_ops_t *dcr_group_backend(const dcr_group_t *g);

/* Sends len bytes to rank dst with tag (see the send slot): DCR_EINVAL for a
 * rank out of range, a tag outside 0..max_tag, len above max_message or a
 * NULL buf with len > 0. */
dcr_status_t dcr_group_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len);
/* Receives the oldest message with tag from any rank, waiting up to
 * timeout_ms (< 0: no limit): DCR_ETIMEOUT on expiry, DCR_EINVAL for a bad
 * tag or NULL out_p. Release the message with dcr_group_release. */
dcr_status_t dcr_group_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p);
/* Frees msg's data (msg NULL or already released: nothing happens). */
void dcr_group_release(dcr_group_t *g, dcr_group_msg_t *msg);
/* Frees the endpoint (see the destroy slot). Accepts NULL. */
void dcr_group_destroy(dcr_group_t *g);

#endif
