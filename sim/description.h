/* The cluster description: one JSON file that names every figure the
 * simulator uses for a cluster (docs/formats/cluster.md). Presets are such
 * files in sim/clusters/; every entry point of `dcr sim` resolves one,
 * applies its flags as overrides of fields, and echoes the result.
 *
 *   {
 *     "format": "dcr-cluster", "version": 1,
 *     "name": "free text",
 *     "calibration": "paper-testbed",      stage costs: a name in sim/calibrations/,
 *                                          a path, or "local" (measure this machine)
 *     "train_nodes": 8, ..., "ack_rtt": true,   every field of dcr_sim_cluster_t
 *     "assumptions": {"cross_gbps": "why this figure", ...}   (optional)
 *   }
 * Every numeric field is required: a description that leaves one out would
 * hide a default. Unknown keys are refused. */
#ifndef DCR_SIM_DESCRIPTION_H
#define DCR_SIM_DESCRIPTION_H

#include <jansson.h>

#include "dcr/status.h"
#include "sim/cluster.h"

#define DCR_SIM_DESC_NOTES    40
#define DCR_SIM_DESC_NOTE_LEN 512

typedef struct dcr_sim_description {
    dcr_sim_cluster_t cluster;
    char name[256];
    char calibration[1024]; /* as written: preset name, path or "local" */
    char source[1024];      /* the file it was read from */
    int nnotes;
    char note_key[DCR_SIM_DESC_NOTES][48];
    char note[DCR_SIM_DESC_NOTES][DCR_SIM_DESC_NOTE_LEN];
    /* Fields a flag or a sweep replaced after reading (names, ", "-joined). */
    char overridden[1024];
} dcr_sim_description_t;

/* The path of the file NAME.json in the simulator's data folder sub
 * ("clusters", "calibrations"): in the folder the environment variable env
 * names when set, else in dcr's data folder sim/<sub> (an installed prefix's
 * share/dcr/sim/<sub> found relative to the binary, else the source tree's:
 * dcr_data_dir). */
dcr_status_t dcr_sim_data_path(const char *env, const char *sub, const char *name, char *buf,
                               size_t len);

/* The path of preset `name` (sim/clusters/NAME.json; DCR_SIM_CLUSTERS_DIR
 * replaces the folder). Names are [a-z0-9-]+ only. */
dcr_status_t dcr_sim_description_preset_path(const char *name, char *buf, size_t len);

/* Reads a description: `what` is a preset name, or a path when it holds a
 * '/' or ends in ".json". The file must be regular (sim/readfile.h). */
dcr_status_t dcr_sim_description_load(const char *what, dcr_sim_description_t *d);

/* Parses description JSON text; `origin` names it in errors. */
dcr_status_t dcr_sim_description_parse(const char *text, const char *origin,
                                       dcr_sim_description_t *d);

/* The path of the calibration the description names (a name resolves in
 * sim/calibrations/, a relative path beside the description's file).
 * "local" is left to the caller. */
dcr_status_t dcr_sim_description_calibration_path(const dcr_sim_description_t *d, char *buf,
                                                  size_t len);

/* Records that `field` was overridden (for the echo). */
void dcr_sim_description_overridden(dcr_sim_description_t *d, const char *field);

/* The resolved description as JSON: every field, the assumptions, the
 * calibration it names and what was overridden. */
json_t *dcr_sim_description_json(const dcr_sim_description_t *d);

/* The same as a few lines of text (the header of `dcr sim` and `sim plan`). */
void dcr_sim_description_print(const dcr_sim_description_t *d, FILE *out);

#endif
