/* The coordinator's parties and what they say about themselves
 * (DESIGN.md sections 5 and 11): the rollout nodes (joined, done, failed an
 * attempt), the owners (sent an attempt, committed a version) and the
 * coordinator itself (it opened an attempt on its transport handle).
 *
 * Each party kind has one status record, and every record travels in one
 * versioned binary format, written and read by one pair of functions
 * (dcr_party_report_encode / dcr_party_report_decode): a party in another
 * process publishes its record through the control plane with the
 * dcr_*_report_put calls below, and the coordinator, the launcher and the
 * harness read it back with the matching get. Where in the control plane a
 * record lives is the business of these calls alone. */
#ifndef DCR_PARTIES_H
#define DCR_PARTIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/construct.h"
#include "dcr/control.h"
#include "dcr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status records ------------------------------------------------------------------ */

typedef enum dcr_node_phase {
    DCR_NODE_READY = 0,      /* holds the committed version `version`, waits for an attempt */
    DCR_NODE_JOINED = 1,     /* began attempt tau on its receivers and opened it on its transport */
    DCR_NODE_DONE = 2,       /* every payload of tau applied; its receivers acknowledged tau */
    DCR_NODE_FAILED = 3,     /* attempt tau failed here; why says how */
    DCR_NODE_GONE = 4,       /* the process died (written by whoever saw it): every attempt that
                                needs the node fails until it reports again */
    DCR_NODE_RESTARTING = 5, /* the process died and a new one is starting: the attempt fails,
                                the next one waits for the new process (join timeout) */
} dcr_node_phase_t;

/* A rollout-node process's state, replaced at every change. */
typedef struct dcr_node_report {
    uint32_t node;
    dcr_node_phase_t phase;
    uint64_t tau;        /* the attempt of the phase (0 when READY before any) */
    uint64_t version;    /* the committed version its receivers held last */
    int32_t pid;         /* the process, for the launcher's bookkeeping */
    double apply_end;    /* dcr_clock_s (CLOCK_MONOTONIC, one host) of its last apply */
    int64_t cross_bytes; /* its transport's V_cross since it started (its downloads) */
    double cpu_s;        /* CPU seconds of its node threads since it started */
    char why[256];       /* FAILED: the error line */
} dcr_node_report_t;

typedef enum dcr_owners_phase {
    DCR_OWNERS_SENT = 1,      /* every owner sent and finished attempt tau */
    DCR_OWNERS_FAILED = 2,    /* attempt tau failed on an owner; why says how. With a tau
                                 above every attempt (DCR_CONTROL_VALUE_MAX): the owner job
                                 is gone, every attempt fails until it reports again */
    DCR_OWNERS_COMMITTED = 3, /* every owner updated its baseline to the commit of tau */
    DCR_OWNERS_READY = 4,     /* the job started: every rank holds the committed version and
                                 takes part in attempts prepared from now on (tau 0) */
} dcr_owners_phase_t;

/* The owner job's state, written by its rank 0 for every rank. */
typedef struct dcr_owners_report {
    dcr_owners_phase_t phase;
    uint64_t tau;
    double t0;                       /* dcr_clock_s: the owners started constructing tau */
    double construction_end;         /* every owner submitted its last payload */
    double t1;                       /* COMMITTED: the last owner finished its baseline update */
    dcr_construct_stats_t construct; /* summed over owners (construction_s: the slowest) */
    double cpu_s; /* CPU seconds of every rank's process since it started, summed */
    char why[256];
} dcr_owners_report_t;

/* The coordinator's state: the attempt it last opened on its transport
 * handle. Until the transport can join an attempt without clearing its
 * prefix, handles open an attempt one after the other: the coordinator
 * first, then the nodes and owners (docs/guides/processes.md). */
typedef struct dcr_coord_report {
    uint64_t opened;
} dcr_coord_report_t;

/* Where a rollout node listens: its relay tree node's "HOST:PORT",
 * published when it starts listening and replaced by a restarted process
 * (deploy/roles.h, "Endpoints"). */
typedef struct dcr_node_endpoint {
    uint32_t node;
    char addr[256]; /* 1..255 bytes */
} dcr_node_endpoint_t;

/* The format of every record: a magic word, this version, the kind, the
 * kind's fixed little-endian fields, then the length and bytes of its text
 * (a node's or the owners' reason, an endpoint's address).
 * A reader refuses every other version. */
#define DCR_PARTY_REPORT_VERSION 1
/* Bytes of the longest record (an owners' report with a 255-byte reason). */
#define DCR_PARTY_REPORT_MAX 512

typedef enum dcr_party_kind {
    DCR_PARTY_NODE = 1,
    DCR_PARTY_OWNERS = 2,
    DCR_PARTY_COORD = 3,
    DCR_PARTY_ENDPOINT = 4,
} dcr_party_kind_t;

/* "node", "owners", "coordinator", "endpoint". */
const char *dcr_party_kind_name(dcr_party_kind_t kind);

/* One record of any kind. */
typedef struct dcr_party_report {
    dcr_party_kind_t kind;
    union {
        dcr_node_report_t node;
        dcr_owners_report_t owners;
        dcr_coord_report_t coord;
        dcr_node_endpoint_t endpoint;
    } u;
} dcr_party_report_t;

/* Encodes r into buf (cap bytes; DCR_PARTY_REPORT_MAX always suffices) and
 * sets *len_p. A reason is cut at 255 bytes. DCR_EINVAL for an unknown kind
 * or phase, an empty address, or a buffer too small. */
dcr_status_t dcr_party_report_encode(const dcr_party_report_t *r, uint8_t *buf, size_t cap,
                                     size_t *len_p);
/* Decodes exactly len bytes. Everything is checked before *out_p is
 * written: magic, version, kind, phase, the text's length (an address is
 * never empty; a coordinator's record has no text), and that the record is
 * neither short nor long; any violation is DCR_ECONTROL with one line
 * naming the field. */
dcr_status_t dcr_party_report_decode(const void *buf, size_t len, dcr_party_report_t *out_p);

/* ---- records in the control plane ------------------------------------------------------ */

/* Each put replaces its party's record; each get reads it, DCR_ENOTFOUND
 * before the first put, DCR_ECONTROL for one that does not decode (or holds
 * another kind or node). */
dcr_status_t dcr_node_report_put(dcr_control_t *control, const dcr_node_report_t *r);
dcr_status_t dcr_node_report_get(dcr_control_t *control, int node, dcr_node_report_t *out_p);
/* dcr_node_report_put of r (DONE) in the write that acknowledges
 * receivers[0..n) of the node for attempt r->tau (dcr_control_ack_report):
 * the report is never read before the acknowledgments, and none is written
 * when they are refused (a replaced attempt: DCR_ECONFLICT). */
dcr_status_t dcr_node_report_put_acked(dcr_control_t *control, const dcr_node_report_t *r,
                                       const uint32_t *receivers, size_t n);
dcr_status_t dcr_owners_report_put(dcr_control_t *control, const dcr_owners_report_t *r);
dcr_status_t dcr_owners_report_get(dcr_control_t *control, dcr_owners_report_t *out_p);
dcr_status_t dcr_coord_report_opened(dcr_control_t *control, uint64_t tau);
dcr_status_t dcr_coord_opened(dcr_control_t *control, uint64_t *tau_p);
/* Publishes node's address (1..255 bytes; DCR_EINVAL otherwise); the get
 * copies it into addr (DCR_ECONTROL when it does not fit cap bytes with its
 * terminator). */
dcr_status_t dcr_node_endpoint_put(dcr_control_t *control, int node, const char *addr);
dcr_status_t dcr_node_endpoint_get(dcr_control_t *control, int node, char *addr, size_t cap);

/* A node's counters over the run, across restarts: each process counts
 * from 0, so what the previous process last reported is banked when the pid
 * changes (bytes or CPU it spent after its last report are not seen). */
typedef struct dcr_node_totals {
    int32_t pid;
    int64_t cross_base, cross_last;
    double cpu_base, cpu_last;
} dcr_node_totals_t;

/* Folds report r into t (zero-initialized before the first); GONE and
 * RESTARTING reports, written for a dead process, carry no counters. */
void dcr_node_totals_update(dcr_node_totals_t *t, const dcr_node_report_t *r);

#ifdef __cplusplus
}
#endif
#endif
