/* The model and training-layout flags shared by every command that builds a
 * scenario (--model --scale --layers --train-nodes --gpus-per-node --tp
 * --etp --ep --pp --dp --mapping --fp8-layers) and the memory budget
 * (--max-memory), so they parse and read the same everywhere. */
#ifndef DCR_CLI_SCENARIO_ARGS_H
#define DCR_CLI_SCENARIO_ARGS_H

#include "args.h"
#include "dcr/codec.h"
#include "dcr/device.h"
#include "deploy/launch.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

typedef struct dcr_cli_scenario {
    const char *model, *mapping;
    const char *max_memory; /* --max-memory SIZE; NULL: the default share */
    int64_t scale, layers, nodes, gpus, tp, etp, ep, pp, dp, fp8_layers;
    const dcr_arg_t *args; /* where dcr_cli_scenario_args put the entries (their `seen`) */
} dcr_cli_scenario_t;

#define DCR_CLI_SCENARIO_NARGS 13

/* Defaults: the given model and scale, one rank, extended mapping (every
 * change an XOR record; the seed's tables are reproduced with --mapping
 * paper). */
void dcr_cli_scenario_init(dcr_cli_scenario_t *o, const char *model, int64_t scale, int64_t layers);
/* Writes the DCR_CLI_SCENARIO_NARGS flag entries into args. */
void dcr_cli_scenario_args(dcr_cli_scenario_t *o, dcr_arg_t *args);
/* Turns parsed flags into a spec (fails on an unknown mapping or a malformed
 * --max-memory). */
dcr_status_t dcr_cli_scenario_spec(const dcr_cli_scenario_t *o, dcr_scenario_spec_t *out_p);

/* --payload-key FILE, for the commands that sign or verify payloads: loads
 * the key into *out_p (an unset key when path is NULL) and warns on stderr,
 * in one "dcr COMMAND: warning: ..." line, when the file is readable by
 * group or others. Errors (one line naming the file): see
 * dcr_payload_key_load. */
dcr_status_t dcr_cli_payload_key(const char *command, const char *path, dcr_payload_key_t *out_p);
/* Builds the scenario once and drops it, so that a model, layer count or
 * layout the run could not use is a usage error before the run starts; with
 * serve, checks the serving layout against the model too. */
dcr_status_t dcr_cli_scenario_validate(const dcr_scenario_spec_t *spec,
                                       const dcr_serve_config_t *serve);

/* The change flags of bench and faults: --changes is uniform or adamw (or,
 * with profiles, profile:FILE, a measured change profile replayed: see
 * workloads/change/change_profile.h), --lr applies to adamw only and --change-rate
 * to uniform only (AdamW's change rate follows from the learning rate, a
 * profile's from the profile). DCR_EINVAL naming the flag. */
dcr_status_t dcr_cli_changes_check(const dcr_arg_t *args, int nargs, const char *changes,
                                   bool profiles);

/* The output and work paths of bench and faults, checked before the run:
 * --out and --trace under the output-path rule (dcr/outpath.h), --workdir
 * and --keep-payloads dcr's (workloads/harness/workdir.h) and not both, --control a
 * regular file or a new name (and its SQLite -journal, -wal, -shm too).
 * NULL paths are skipped. */
dcr_status_t dcr_cli_paths_check(const char *out, const char *trace, const char *keep,
                                 const char *workdir, const char *control);

/* --store and --s3-endpoint of bench and faults, before anything runs
 * (usage errors, one line each): an endpoint only with a store, a store URL
 * some object store claims, an endpoint exactly for s3:// stores, and an
 * http:// or https:// one. Both NULL: nothing to check. */
dcr_status_t dcr_cli_store_check(const char *store, const char *s3_endpoint);
/* --retain K (dcr/recovery.h): the versions whose payloads stay in the object
 * store, or on the relay root's disk (dcr/recovery.h), for replay.
 * Given, it must be at least 1 and needs the objstore or relay transport; not given, it is
 * DCR_RETAIN_DEFAULT for runs whose rollout nodes are processes (they restart) and 0 otherwise.
 * DCR_EINVAL naming the flag. */
dcr_status_t dcr_cli_retain(const dcr_arg_t *args, int nargs, int64_t k, const char *transport,
                            bool processes, int *out_p);
/* --device cpu|cuda|auto, the place of resident storage and device stages
 * (engine/device): the flag entry for a command's table, writing the name
 * to *name (the caller's default is "cpu"). */
dcr_arg_t dcr_cli_device_arg(const char **name);
/* Checks and opens --device: returns 0 with the device in *out_p (close it
 * with dcr_device_destroy); 2 after one line for a name that is not cpu, cuda
 * or auto, or a place this build or machine lacks (cuda without a GPU); 1
 * after one line when the runtime refuses the device. */
int dcr_cli_device_open(const char *command, const char *name, dcr_device_t **out_p);
#endif
