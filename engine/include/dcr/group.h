/* Intra-cluster group communication (training side only; G4 forbids any
 * collective spanning the two clusters). A group is a set of ranks; a
 * dcr_group_t handle is one rank's endpoint in it. Backends fill
 * dcr_group_ops_t ("inproc": ranks are threads of one process, created
 * together; "mpi" later: one endpoint per process). Callers use only the
 * dcr_group_* wrappers, which is where tracing and fault interceptors hook in. */
#ifndef DCR_GROUP_H
#define DCR_GROUP_H

#include <stddef.h>

#include "dcr/status.h"

typedef struct dcr_group dcr_group_t;

/* A received message: owned by the receiver until dcr_group_release. */
typedef struct dcr_group_msg {
    int src;
    int tag;
    void *data;
    size_t len;
} dcr_group_msg_t;

typedef struct dcr_group_ops {
    const char *name;
    /* This endpoint's rank and the group size. Never block. */
    int (*rank)(const dcr_group_t *g);
    int (*size)(const dcr_group_t *g);
    /* Sends len bytes to dst with a tag. Copies buf before returning; may
     * block only for back-pressure, never for the receiver to call recv. */
    dcr_status_t (*send)(dcr_group_t *g, int dst, int tag, const void *buf, size_t len);
    /* Next message with this tag (from any source), blocking up to timeout_ms
     * (< 0: forever); DCR_ETIMEOUT on expiry. Messages of one (src, tag) pair
     * arrive in send order. */
    dcr_status_t (*recv)(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p);
    /* Frees a received message's data. */
    void (*release)(dcr_group_t *g, dcr_group_msg_t *msg);
    /* Frees this endpoint; the last endpoint of an inproc group frees the group. */
    void (*destroy)(dcr_group_t *g);
} dcr_group_ops_t;

/* Every endpoint starts with this header so the wrappers can find the ops. */
struct dcr_group {
    const dcr_group_ops_t *ops;
};

/* Creates the `size` endpoints of an in-process group (ranks 0..size-1) into
 * endpoints[]; each is used by one thread and destroyed with dcr_group_destroy. */
dcr_status_t dcr_group_create_inproc(int size, dcr_group_t **endpoints);

int dcr_group_rank(const dcr_group_t *g);
int dcr_group_size(const dcr_group_t *g);
dcr_status_t dcr_group_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len);
dcr_status_t dcr_group_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p);
void dcr_group_release(dcr_group_t *g, dcr_group_msg_t *msg);
/* Accepts NULL. */
void dcr_group_destroy(dcr_group_t *g);

#endif
