/* Measured change profiles: what `dcr diff --profile` writes and
 * `dcr construct --changes profile:FILE` replays.
 *
 * A profile holds, per tensor class (workloads/change/ckpt_diff.h), the change rate
 * and how the changes cluster: the share of rows with a change, the mean run
 * length of consecutive changed elements, and for routed experts the share of
 * experts touched. Replay draws changes with those statistics on any model
 * (a scaled one too), so that benchmarks use a user's measured sparsity
 * instead of uniform changes.
 *
 * File schema (JSON object):
 *   "format": "dcr-change-profile", "version": 1,
 *   "model": string (informational), "old", "new": strings (optional),
 *   "classes": { "<class>": { "change_rate": [0, 1],
 *                             "changed_row_share": [change_rate, 1],
 *                             "mean_run_length": >= 1,
 *                             "expert_share": (0, 1] (optional, default 1),
 *                             "elements": integer (optional, informational) } }
 * Classes a profile does not list do not change in replay. */
#ifndef DCR_WORKLOADS_CHANGE_PROFILE_H
#define DCR_WORKLOADS_CHANGE_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/tensor.h"
#include "workloads/change/ckpt_diff.h"
#include "workloads/change/scenario.h"

typedef struct dcr_class_profile {
    bool present;
    double change_rate;  /* changed elements / elements */
    double row_share;    /* changed rows / rows */
    double mean_run;     /* changed elements / runs (>= 1) */
    double expert_share; /* experts touched / experts; 1 for other classes */
    int64_t elements;    /* of the measured model (informational) */
} dcr_class_profile_t;

typedef struct dcr_change_profile {
    char model[64];
    dcr_class_profile_t classes[DCR_CLASS_COUNT];
} dcr_change_profile_t;

/* The profile of a diff: every class the model has. */
void dcr_change_profile_from_diff(const dcr_diff_result_t *r, const char *model,
                                  dcr_change_profile_t *out_p);

/* Writes the profile (schema above) to path; old/new may be NULL. */
dcr_status_t dcr_change_profile_write(const dcr_change_profile_t *p, const char *path,
                                      const char *old_path, const char *new_path);

/* The largest profile file read: 1 MiB. A profile is a few hundred bytes
 * (eight classes of five numbers and a few names); the cap keeps a huge or
 * endless file from being read whole. */
#define DCR_CHANGE_PROFILE_FILE_MAX (1u << 20)

/* Loads and validates a profile file: DCR_EPARSE naming the file and the
 * key on any violation of the schema; a missing file DCR_ENOTFOUND; a FIFO,
 * a directory or a file over DCR_CHANGE_PROFILE_FILE_MAX DCR_EINVAL (the
 * checks of workloads/model/input_file.h). */
dcr_status_t dcr_change_profile_load(const char *path, dcr_change_profile_t *out_p);

/* The profile's overall change rate on a model: class rates weighted by the
 * model's elements per class (classes the profile does not list count as
 * unchanged). What a simulator that models one rate can take from it. */
double dcr_change_profile_rate(const dcr_change_profile_t *p, const dcr_inventory_t *inv);

/* Draws changes with the profile's statistics into the export of shards
 * (written to canonical first) and brings the shards in step by importing
 * them; canonical then holds the export of the new shards. Rows
 * (all dimensions but the last) are chosen with the row share (for routed
 * experts: experts with the expert share, then rows with row share / expert
 * share), and within a chosen row runs start and continue so that the
 * changed fraction is change rate / row share with runs of the mean length.
 * A change is a relative step of about 1e-2 with its bits guaranteed to
 * change. *changed_p receives the canonical elements changed. Reproducible
 * from the seed. */
dcr_status_t dcr_change_profile_inject(const dcr_scenario_t *sc, const dcr_change_profile_t *p,
                                       uint64_t seed, dcr_storage_t *const *shards,
                                       dcr_storage_t *const *canonical, int64_t *changed_p);

#endif
