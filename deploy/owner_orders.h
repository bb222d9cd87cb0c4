/* The orders of the owners' job (owner_role.c): rank 0 reads the control
 * plane and tells every rank what to do next over the group, so that every
 * rank runs the same attempt with the same tau (the constructor's exchanges
 * pair up across ranks only then). This is how a rank other than 0 takes
 * its next order, on its own so that a test can drive it with a group and a
 * control plane of its own.
 *
 * One exception, for speed: the commit of the attempt a rank sent. While it
 * awaits that commit, every rank watches the control plane itself and takes
 * the commit as soon as the record names it, instead of after rank 0's
 * order: that hop (rank 0's wake-up and send, the other rank's receiving
 * thread and its wake-up, on a host whose cores the rollout nodes and the
 * coordinator share) was most of finalization as processes, 1 to 10 ms.
 * The order sequence stays the same on every rank: rank 0 decides a commit
 * from the same record with the same test (the attempt this job sent, the
 * next version), so its COMMIT order arrives as a duplicate that is dropped,
 * and any other order in its place (but a stop) is an error, never a silent
 * divergence. It cannot happen with one owners job: no later version can be
 * committed before the owners sent it, and rank 0 reads the commit record
 * before any attempt. Restores, attempts and stops stay rank 0's. Only on a
 * control plane whose reads are local (SQLite in the run directory): on a
 * networked one (etcd) every rank's waits and reads are requests to the
 * server in the very window they were to shorten, and finalization grew
 * (owner_role.c, owner_setup), so there the ranks wait for rank 0's word. */
#ifndef DCR_DEPLOY_OWNER_ORDERS_H
#define DCR_DEPLOY_OWNER_ORDERS_H

#include <signal.h>
#include <stdint.h>

#include "dcr/control.h"
#include "dcr/group.h"
#include "dcr/status.h"

/* The group tag of rank 0's orders (above the constructor's 1 and 2). */
#define DCR_OWNER_TAG_ORDER 40

typedef enum dcr_owner_order_kind {
    DCR_OWNER_ATTEMPT = 1, /* construct and send attempt tau from from_version */
    DCR_OWNER_COMMIT = 2,  /* tau committed `version`: update the baselines */
    DCR_OWNER_RESTORE = 3, /* `version` was committed without us: rebuild from it */
    DCR_OWNER_STOP = 4,
} dcr_owner_order_kind_t;

/* A raw struct on the wire: every rank runs the same dcr binary. */
typedef struct dcr_owner_order {
    uint32_t kind;
    uint32_t overwrite;
    uint64_t tau, from_version, version;
} dcr_owner_order_t;

/* A rank's follower of rank 0: its endpoint, its own control-plane handle
 * (NULL: it takes every order from rank 0, as on a networked control plane,
 * where each rank's waits and reads would be requests to the server), and
 * (kept between calls, zeroed at start) the commit it took from the control
 * plane before rank 0's order for it arrived. */
typedef struct dcr_owner_orders {
    dcr_group_t *g;
    dcr_control_t *control;
    dcr_owner_order_t early; /* kind 0: none */
} dcr_owner_orders_t;

/* Whether commit record rec commits attempt `part` (0: none sent) as the
 * next version after `version`, the one the baselines hold: then every rank
 * updates its baseline. One test for rank 0's decision and the other
 * ranks' early take, so that they agree on the same record. */
bool dcr_owner_commit_is_ours(const dcr_commit_record_t *rec, uint64_t version, uint64_t part);

/* A rank other than 0: its next order. `version` is the committed version
 * its baselines hold, `part` the attempt it sent and awaits the commit of
 * (0: none). With part set and a handle, the commit record naming it
 * returns a COMMIT at
 * once (remembered: rank 0's duplicate is dropped when it comes); otherwise
 * rank 0's next order. A stop flag seen while nothing came returns STOP.
 * DCR_EIO for a malformed order or one that contradicts a commit taken
 * early; the group's failures. */
dcr_status_t dcr_owner_next_order(dcr_owner_orders_t *f, uint64_t version, uint64_t part,
                                  volatile sig_atomic_t *stop, dcr_owner_order_t *o);

#endif
