/* Where the parties' status records live in the control plane: the remote
 * parties' storage only (dcr/parties.h). The control plane has one slot for
 * per-party blobs, the receivers' prewarm reports, keyed by receiver id;
 * the records sit in that slot under ids above every receiver id
 * (DCR_CONTROL_RECEIVERS_MAX), so that no control backend needs a slot of
 * its own for them. Nothing outside engine/coord uses these ids but tests
 * that plant a malformed record (or fail reads of one). */
#ifndef DCR_COORD_PARTIES_INTERNAL_H
#define DCR_COORD_PARTIES_INTERNAL_H

#include <stdint.h>

/* Rollout node n's record. */
#define DCR_NODE_REPORT_BASE  0x80000000u
#define DCR_NODE_REPORT_ID(n) (DCR_NODE_REPORT_BASE + (uint32_t)(n))
/* Rollout node n's endpoint (its relay tree node's address). */
#define DCR_ENDPOINT_REPORT_ID(n) (0xC0000000u + (uint32_t)(n))
/* The owner job's record, written by its rank 0. */
#define DCR_OWNERS_REPORT_ID 0xFFFFFFFEu
/* The coordinator's record. */
#define DCR_COORD_REPORT_ID 0xFFFFFFFFu

#endif
