/* The seed's latency testbed as a sweep: the five checkpoint sizes of its
 * Figure 10 and Table 4, the figures it publishes for them, and the fitted
 * calibration of its GPU clusters (sim/calibrations/paper-testbed.json).
 *
 * The seed's 120B, 550B and 1T checkpoints have no public config here; they
 * are Nemotron-H-like stand-ins sized to the published bytes
 * (workloads/models/paper-*-hybrid.json). 30B is the real
 * Nemotron-3-Nano-30B-A3B inventory and 235B the real Qwen3-235B-A22B. */
#ifndef DCR_SIM_PAPER_H
#define DCR_SIM_PAPER_H

#include <stdbool.h>
#include <stddef.h>

#include "dcr/status.h"
#include "sim/sim.h"

/* One checkpoint size of the seed's sweep and what the seed says about it.
 * A range of 0..0 means the seed gives no figure for this size. */
typedef struct dcr_sim_paper_size {
    const char *label;                 /* "30B" */
    const char *model;                 /* config name under workloads/models */
    double published_bytes;            /* the seed's checkpoint size (1 GB = 1e9 bytes) */
    bool stand_in;                     /* a hybrid sized to the bytes, not a real inventory */
    double latency_lo_s, latency_hi_s; /* refit latency over both transports, 3% and 5% */
    double speedup_lo, speedup_hi;     /* speedup over the reference, same rows */
    double relay_gain_5pct;            /* object-store latency / relay latency at 5% */
} dcr_sim_paper_size_t;

#define DCR_SIM_PAPER_NSIZES 5

/* Size i (0..DCR_SIM_PAPER_NSIZES-1, smallest first); NULL outside. */
const dcr_sim_paper_size_t *dcr_sim_paper_size(int i);

/* The size whose config is `model`, or NULL. */
const dcr_sim_paper_size_t *dcr_sim_paper_size_of(const char *model);

/* Figures the seed gives over the whole sweep (section 8.1 and 8.7). */
#define DCR_SIM_PAPER_SPEEDUP_LO      12.0 /* every size, both rates and transports */
#define DCR_SIM_PAPER_SPEEDUP_HI      40.0
#define DCR_SIM_PAPER_TRANSPORT_LB_LO 0.77 /* transport lower bound / latency */
#define DCR_SIM_PAPER_TRANSPORT_LB_HI 0.94
#define DCR_SIM_PAPER_CONSTRUCT_LB_LO 0.18 /* construction lower bound / latency */
#define DCR_SIM_PAPER_CONSTRUCT_LB_HI 0.45
#define DCR_SIM_PAPER_FINALIZE_LO_S   0.2
#define DCR_SIM_PAPER_FINALIZE_HI_S   1.7
#define DCR_SIM_PAPER_GAP_LO_S        1.8 /* latency above the larger bound + finalization */
#define DCR_SIM_PAPER_GAP_HI_S        9.2
#define DCR_SIM_PAPER_120B_PAYLOAD_LO 0.024 /* payload / checkpoint bytes at 120B */
#define DCR_SIM_PAPER_120B_PAYLOAD_HI 0.038
#define DCR_SIM_PAPER_120B_PAYLOADS   482 /* payloads across 32 owners at 120B */

/* NeMo-RL's published refits of a 247.2 GB checkpoint (the seed's 120B
 * size) in docs/design-docs/sparse-delta-refit.md: S3 20.234 s at 3% and
 * 25.790 s at 5%, its ZeroMQ relay tree 24.095 s and 33.776 s. The
 * latency for a transport ("objstore" or "relay") and rate, 0 where none. */
#define DCR_SIM_NEMO_RL_MODEL "paper-120b-hybrid"
double dcr_sim_nemo_rl_latency(const char *transport, double rate);

/* The fitted calibration of the seed's testbed, paper-testbed.json in the
 * calibrations folder (dcr_sim_data_path: $DCR_SIM_CALIBRATIONS_DIR, an
 * installed prefix's, or this source tree's). DCR_EINVAL when the path does
 * not fit in buf. */
dcr_status_t dcr_sim_paper_calibration_path(char *buf, size_t len);

/* The testbed's training layout (the seed gives none): TP 4 inside each
 * 4-GPU node and, for MoE models, experts spread by EP 8 with ETP 1. */
#define DCR_SIM_PAPER_TP  4
#define DCR_SIM_PAPER_EP  8
#define DCR_SIM_PAPER_ETP 1

/* One row of the sweep: `model` (one with experts, as every size of the
 * sweep) on the testbed's description (sim/clusters/paper-testbed.json)
 * and layout at full size, mode X, the seed's mapping, chunk and bucket
 * targets, and the seed's packing: full buckets from the first payload
 * (first_bucket_bytes = the bucket; the engine cuts its first payload at a
 * quarter bucket since session 14, which the seed's figures predate). The
 * description's fitted figures are fitted on this spec. */
dcr_status_t dcr_sim_paper_spec(const char *model, const char *transport, double rate,
                                dcr_sim_spec_t *out_p);

#endif
