/* The seeded world every role of a multi-process refit rebuilds for itself
 * (DESIGN.md section 11): processes share nothing but the transport, the
 * control plane and the run configuration, so each one derives the model,
 * the layouts and the weights of any version from the configuration alone.
 *
 * Versions follow `dcr bench`: version 0 is the export of the imported
 * initial weights; the transition v -> v+1 is step v of the run, whose
 * candidate is version v's shards changed by the step's seeded injection
 * (uniform changes with seed + 1000 + v, or the next AdamW step). Every
 * refit of a run commits exactly one version (a run whose transition gives
 * up stops), so version v is the result of steps 0..v-1. */
#ifndef DCR_DEPLOY_WORLD_H
#define DCR_DEPLOY_WORLD_H

#include <stdint.h>

#include "dcr/receiver.h"
#include "workloads/harness/run_config.h"
#include "workloads/change/scenario.h"

typedef struct dcr_role_world {
    dcr_run_config_t cfg; /* copied; strings borrowed from the caller */
    dcr_scenario_t *sc;
    dcr_serve_config_t serve;  /* validated */
    size_t nc, ns;             /* canonical tensors, shards */
    uint64_t version;          /* what shards and canonical hold */
    dcr_storage_t **shards;    /* the training shards of `version` */
    dcr_storage_t **canonical; /* the canonical tensors of `version` (the export) */
    dcr_adamw_t *adamw;        /* in step with shards, when cfg.adamw */
} dcr_role_world_t;

/* Builds the scenario, the serving layout and version 0 from the
 * configuration alone. */
dcr_status_t dcr_role_world_create(const dcr_run_config_t *cfg, dcr_role_world_t **out_p);
/* Accepts NULL. */
void dcr_role_world_destroy(dcr_role_world_t *w);

/* Moves the world forward to `version` by replaying the steps in between;
 * DCR_EINVAL for a version behind it (replays only go forward). */
dcr_status_t dcr_role_world_advance(dcr_role_world_t *w, uint64_t version);

/* A fresh receiver of slot `receiver` of the serving layout, dense-loaded
 * with the world's version and prewarmed (a restore by dense refit). */
dcr_status_t dcr_role_world_receiver(dcr_role_world_t *w, int receiver, dcr_receiver_t **out_p);

/* The verifier: per-parameter digests of what receiver slot `receiver`
 * must hold at `version`, by a dense refit of that version in this world
 * (advanced to it first) through a fresh receiver of the slot's loader
 * configuration. */
dcr_status_t dcr_role_world_expected_digests(dcr_role_world_t *w, uint64_t version, int receiver,
                                             dcr_param_digests_t *out_p);

#endif
