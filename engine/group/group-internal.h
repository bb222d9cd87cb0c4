/* Shared between the group wrapper and its built-in backends; not part of
 * the public interface. */
#ifndef DCR_GROUP_INTERNAL_H
#define DCR_GROUP_INTERNAL_H

#include <pthread.h>

#include "dcr/group.h"

/* Built-in backends, listed in the registry of group.c. */
extern const dcr_group_ops_t dcr__group_inproc_ops;
#ifdef DCR_HAVE_MPI
extern const dcr_group_ops_t dcr__group_mpi_ops;
#endif

/* A rank's queue of received messages, shared by the backends: senders (or a
 * backend's receiving thread) append, recv takes the oldest message of a tag.
 * Appending at the tail is what keeps each (src, tag) pair in send order. */
typedef struct dcr__group_mbox_item {
    struct dcr__group_mbox_item *next;
    dcr_group_msg_t msg;
} dcr__group_mbox_item_t;

typedef struct dcr__group_mbox {
    pthread_mutex_t lock;
    pthread_cond_t arrived; /* on CLOCK_MONOTONIC */
    dcr__group_mbox_item_t *head, *tail;
    /* Set once the box can no longer be trusted to hold every message sent
     * to it (a backend's receiving thread failed); take then returns it. */
    dcr_status_t failed;
    char failed_detail[256];
} dcr__group_mbox_t;

void dcr__group_mbox_init(dcr__group_mbox_t *box);
/* Frees every message still queued and the box's locks. */
void dcr__group_mbox_fini(dcr__group_mbox_t *box);
/* Appends a message whose data (malloc'd, len bytes) the box takes over;
 * DCR_ENOMEM (data then still the caller's). */
dcr_status_t dcr__group_mbox_put(dcr__group_mbox_t *box, int src, int tag, void *data, size_t len);
/* The release slot of a backend whose messages come from a mailbox: frees
 * the data a put handed over. */
void dcr__group_mbox_release(dcr_group_t *g, dcr_group_msg_t *msg);
/* Marks the box failed with status and detail and wakes every waiter; only
 * the first failure is kept. */
void dcr__group_mbox_fail(dcr__group_mbox_t *box, dcr_status_t status, const char *detail);
/* Takes the oldest message with tag, waiting up to timeout_ms (< 0: no
 * limit); DCR_ETIMEOUT naming rank on expiry, the failure once the box
 * failed. */
dcr_status_t dcr__group_mbox_take(dcr__group_mbox_t *box, int rank, int tag, int timeout_ms,
                                  dcr_group_msg_t *out_p);

#endif
