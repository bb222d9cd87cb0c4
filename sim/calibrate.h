/* Calibration of the simulator: what each pipeline stage costs on one core
 * of some machine, and how many payload bytes one changed value costs after
 * the codec, measured with the real engine (`dcr calibrate`) or supplied by
 * a user as JSON (for example GPU-side stage costs of another cluster).
 *
 * JSON format (every number finite and >= 0; rates strictly increasing in
 * (0, 1]; unknown keys are rejected so that a typo is not silently ignored):
 *   {
 *     "format": "dcr-calibration", "version": 1,
 *     "machine": "free text",
 *     "points": [ {"rate": 0.03, "detect_s_per_byte": ..., "encode_s_per_record": ...,
 *                  "xor_value_bytes": ..., "overwrite_value_bytes": ...,
 *                  "gap8_bytes": ..., "gap16_bytes": ...}, ... ],
 *     "project_s_per_record": ..., "construct_s_per_item": ..., "residual_s_per_byte": ...,
 *     "copy_s_per_byte": ..., "bytes_per_item": ..., "decode_s_per_byte": ...,
 *     "decode_s_per_payload": ...,
 *     "apply_s_per_record": ..., "apply_s_per_item": ...,
 *     "apply_s_per_full_byte": ..., "ack_s": ..., "commit_s": ..., "store_put_s": ...,
 *     "relay_hop_s": ..., "relay_hop_s_per_byte": ...,
 *     "payload_factors": [ {"bytes": 4096, "factor": 1.15}, ... ],   (optional)
 *     "cores": 2,
 *     "cluster": {"cross_gbps": 2.9, ...},                             (optional)
 *     "provenance": ["free text: which measurement or seed figure fixed what", ...]  (optional)
 *     "rollout_gpu": {"zstd_gbps_per_core": ..., ...},     (optional; see dcr_sim_rollout_gpu_t)
 *     "rollout_measured": {"decode_s_per_byte": ..., ...}  (optional, with rollout_gpu)
 *   }
 * With "rollout_gpu" the seven rollout figures (decode_s_per_byte ...
 * relay_hop_s_per_byte) are derived from it and may not appear at the top
 * level; measured ones go in "rollout_measured".
 * "cluster" holds figures of a cluster that were fitted together with the
 * stage costs (for example the seed's testbed: effective per-node rates and
 * per-request latency of its object store); keys are the fields of
 * dcr_sim_cluster_t that dcr_sim_cluster_set knows, and `dcr sim` applies
 * them over the testbed's preset before any flag. "provenance" says, one
 * line each, where every fitted figure comes from; `dcr sim` prints it.
 * Per-rate figures are interpolated linearly in the rate and held constant
 * outside the measured range. Value bytes are for 2-byte (BF16) words;
 * wider dtypes add their extra bytes. */
#ifndef DCR_SIM_CALIBRATE_H
#define DCR_SIM_CALIBRATE_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/status.h"

#define DCR_SIM_CAL_POINTS_MAX 16
#define DCR_SIM_CAL_NOTES_MAX  16
#define DCR_SIM_CAL_NOTE_LEN   512

/* Figures that depend on the change rate. Payload bytes are modelled per
 * record as a value word plus a location word, each at its compressed size:
 * values by encoding, locations by the gap word the item needs (1 byte when
 * every gap of the item is below 256, else 2). */
typedef struct dcr_sim_cal_point {
    double rate;
    double detect_s_per_byte;     /* bit-pattern comparison, per source byte compared */
    double encode_s_per_record;   /* item copy, location coding, zstd, digest */
    double xor_value_bytes;       /* compressed bytes of one XOR mask */
    double overwrite_value_bytes; /* compressed bytes of one overwrite value */
    double gap8_bytes;            /* compressed bytes of one 1-byte gap */
    double gap16_bytes;           /* compressed bytes of one 2-byte gap */
} dcr_sim_cal_point_t;

/* zstd compresses a small payload less well than a large one (fewer
 * matches, tables per block): compressed bytes of a payload of `bytes`
 * are `factor` times what the per-record figures give. */
typedef struct dcr_sim_cal_size {
    double bytes;
    double factor;
} dcr_sim_cal_size_t;

/* One cluster figure fitted with the calibration ("cluster" in the JSON). */
typedef struct dcr_sim_cal_cluster_value {
    char key[32];
    double value;
} dcr_sim_cal_cluster_value_t;

/* Rollout-side costs of GPU receivers from first principles ("rollout_gpu"
 * in the JSON, every key required, each > 0): what a node's host cores,
 * its PCIe link and the GPU's memory can do, each figure with its source
 * in the calibration's provenance. dcr_sim_rollout_gpu_costs turns them
 * into the receiver and relay figures of a calibration. Measured GPU costs
 * (`dcr calibrate --device cuda`) go in "rollout_measured" instead: an
 * object holding any of the seven rollout figures, which replace the
 * derived ones key by key. */
typedef struct dcr_sim_rollout_gpu {
    double zstd_gbps_per_core;   /* zstd decode, decompressed GB/s (1e9 B/s) per host core */
    double digest_gbps_per_core; /* BLAKE2b over the compressed payload, GB/s per core */
    double expansion;            /* decompressed bytes per compressed payload byte */
    double cores_per_receiver;   /* host cores decoding for one GPU receiver */
    double h2d_gbps;             /* pinned host-to-device copy, GB/s */
    double h2d_bytes_per_record; /* bytes copied to the GPU per record (position, value) */
    double hbm_gbps;             /* the GPU's memory bandwidth, GB/s */
    double rmw_bytes_per_record; /* HBM bytes a scattered record reads and writes (sectors) */
    double loader_s_per_item;    /* loader dispatch, lookup and kernel launches per item */
    double payload_s;            /* fixed per payload: header, zstd context, stream sync */
    double relay_hop_s;          /* relay: fixed host work of one hop (frame, queue, ack) */
    double relay_gbps_per_core;  /* relay: per-byte host work of one hop (digest, copy), GB/s */
} dcr_sim_rollout_gpu_t;

/* Rollout figures a calibration can hold in "rollout_measured" (bit i of
 * dcr_sim_calibration_t.rollout_measured is key i of this list). */
#define DCR_SIM_ROLLOUT_NKEYS 7
extern const char *const dcr_sim_rollout_keys[DCR_SIM_ROLLOUT_NKEYS];

typedef struct dcr_sim_calibration {
    char machine[128];
    bool has_rollout_gpu; /* rollout figures derived from rollout_gpu */
    dcr_sim_rollout_gpu_t rollout_gpu;
    unsigned rollout_measured; /* rollout figures that measurements replaced (bits) */
    int ncluster;
    dcr_sim_cal_cluster_value_t cluster[DCR_SIM_CAL_NOTES_MAX];
    int nprovenance;
    char provenance[DCR_SIM_CAL_NOTES_MAX][DCR_SIM_CAL_NOTE_LEN];
    int npoints;
    dcr_sim_cal_point_t points[DCR_SIM_CAL_POINTS_MAX];
    int nsizes; /* 0: no size effect */
    dcr_sim_cal_size_t sizes[DCR_SIM_CAL_POINTS_MAX];
    double project_s_per_record;  /* destination index and value of one changed element */
    double construct_s_per_item;  /* fixed cost of one task or tensor compared and itemized */
    double residual_s_per_byte;   /* residual part placement and conversion, per canonical byte */
    double copy_s_per_byte;       /* packing parts and the in-place baseline update */
    double bytes_per_item;        /* compressed item metadata (name, shape, offsets) */
    double decode_s_per_byte;     /* receiver: digest, zstd, validation per payload byte */
    double decode_s_per_payload;  /* receiver: the same, fixed per payload (header, contexts) */
    double apply_s_per_record;    /* receiver: one record through the loader (sparse apply) */
    double apply_s_per_item;      /* receiver: fixed cost of one item (lookup, loader run, views) */
    double apply_s_per_full_byte; /* receiver: full scratch pass, per canonical byte */
    double ack_s, commit_s;       /* one control-plane acknowledgment / joint commit */
    double store_put_s;           /* directory object store: fsync and rename per PUT */
    double relay_hop_s; /* relay: one payload through one hop (frame, verify, queue, ack) */
    double relay_hop_s_per_byte; /* relay: the same, per payload byte */
    int cores;                   /* cores of the machine that was measured */
} dcr_sim_calibration_t;

/* Sets the seven rollout figures of cal from first principles:
 *   decode_s_per_byte    = (1/digest + expansion/zstd) / cores_per_receiver
 *   decode_s_per_payload = payload_s
 *   apply_s_per_record   = h2d_bytes_per_record/h2d + rmw_bytes_per_record/hbm
 *   apply_s_per_item     = loader_s_per_item
 *   apply_s_per_full_byte= 2/hbm (a full scratch pass reads and writes each byte)
 *   relay_hop_s          = relay_hop_s, relay_hop_s_per_byte = 1/relay_gbps_per_core
 * (rates in bytes per second), except those whose bit is set in
 * cal->rollout_measured. DCR_EINVAL with one line when a figure is not
 * finite and > 0. */
dcr_status_t dcr_sim_rollout_gpu_costs(const dcr_sim_rollout_gpu_t *g, dcr_sim_calibration_t *cal);

/* Rate-dependent figures at `rate`, interpolated. */
dcr_sim_cal_point_t dcr_sim_cal_at(const dcr_sim_calibration_t *cal, double rate);

/* The size factor of a payload of `bytes` compressed bytes: interpolated in
 * log(bytes), the smallest measured factor below the range, 1 above it. */
double dcr_sim_cal_size_factor(const dcr_sim_calibration_t *cal, double bytes);

/* The median of v[0, n) (sorted in place); 0 when n <= 0. Timings here are
 * medians: on a shared machine noise only ever adds time, now and then a lot. */
double dcr_sim_median(double *v, int n);

/* Checks ranges and ordering; one clear DCR_EINVAL line naming the field. */
dcr_status_t dcr_sim_cal_validate(const dcr_sim_calibration_t *cal);

/* Reads and validates a calibration file; errors name the file and the key. */
dcr_status_t dcr_sim_cal_load(const char *path, dcr_sim_calibration_t *out_p);
/* Parses calibration JSON text; `origin` names it in errors. */
dcr_status_t dcr_sim_cal_parse(const char *text, const char *origin, dcr_sim_calibration_t *out_p);
/* The JSON text of a calibration (malloc'd; the caller frees). NULL when out of memory. */
char *dcr_sim_cal_to_json(const dcr_sim_calibration_t *cal);
/* Writes the JSON to `path` through a temporary file and rename, so a
 * reader never sees half a file. */
dcr_status_t dcr_sim_cal_save(const dcr_sim_calibration_t *cal, const char *path);

/* Options of a measurement run. */
typedef struct dcr_sim_cal_options {
    const char *model; /* scaled model used for the construction and apply runs */
    int scale;         /* >= 1 */
    int layers;        /* 0: all */
    bool quick;        /* fewer repetitions and rates (tests) */
    uint64_t seed;
} dcr_sim_cal_options_t;

/* Qwen3-30B-A3B at scale 16 with 8 layers (the bench's default model), full run. */
dcr_sim_cal_options_t dcr_sim_cal_options_default(void);

/* Measures every figure with the real engine on this machine: change
 * detection and the codec on synthetic BF16 weights at several change rates,
 * whole constructions (modes X and F) for projection and residual costs, a
 * receiver's decode and apply, the control plane's ack and commit, and the
 * directory object store's PUT. Progress goes to the log at info level. */
dcr_status_t dcr_sim_calibrate(const dcr_sim_cal_options_t *opt, dcr_sim_calibration_t *out_p);

#endif
