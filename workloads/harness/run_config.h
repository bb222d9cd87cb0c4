/* The run configuration every process of a run shares (DESIGN.md section
 * 11): what a role needs to rebuild the run's seeded world (scenario,
 * serving layout, change injection, seed, initial weights) and to reach its
 * services (transport, links, object store, control plane, work folder).
 * `dcr bench` embeds it in its own configuration (dcr_bench_config_t.run,
 * workloads/harness/bench.h) beside the bench-only fields; the process
 * roles of deploy/ take it alone. */
#ifndef DCR_WORKLOADS_HARNESS_RUN_CONFIG_H
#define DCR_WORKLOADS_HARNESS_RUN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/control.h"
#include "dcr/coord.h"
#include "dcr/transport.h"
#include "workloads/change/scenario.h"
#include "workloads/serve/vllm_layout.h"

typedef struct dcr_run_config {
    dcr_scenario_spec_t scenario;
    dcr_serve_config_t serve;
    const char *transport; /* "objstore" | "relay" */
    dcr_link_config_t link;
    int fanout;         /* relay tree */
    double change_rate; /* uniform stress changes */
    bool adamw;         /* AdamW trajectories instead (dcr_adamw_t) */
    /* A measured change profile replayed instead (per-class rates with row,
     * run and expert clustering; workloads/change/change_profile.h); NULL: none.
     * Borrowed for the run. */
    const struct dcr_change_profile *profile;
    double lr; /* AdamW learning rate */
    dcr_construct_mode_t mode;
    dcr_rl_mode_t rl;
    bool shuffle;             /* byte-plane shuffle in payloads */
    size_t chunk_bytes;       /* 0: scaled from the seed's (see dcr_run_targets) */
    size_t bucket_bytes;      /* 0: scaled from the seed's */
    const char *workdir;      /* object store and control plane files; NULL: a fresh temp dir */
    const char *control_path; /* SQLite file or etcd://HOST:PORT[/PREFIX] (see
                                 dcr_run_control_open); NULL: <workdir>/control.db */
    uint64_t seed;
    /* Safetensors checkpoint whose values start the weights (leading blocks
     * of a scaled model, see dcr_ckpt_init_canonical); NULL: synthetic. */
    const char *init;
    /* Unset: plain digests. Set: owners sign every payload with it, and the
     * transport and every receiver accept only payloads signed with it. */
    dcr_payload_key_t payload_key;
    /* Object store of the objstore transport (dcr/objstore.h): NULL, a
     * directory in the work dir; else a store URL (dir:PATH, s3://BUCKET/PREFIX). */
    const char *store;
    const char *s3_endpoint; /* for s3:// stores: http[s]://HOST[:PORT] */
    /* Where the receivers keep resident storage and apply, and where the
     * owners compare (engine/device): "cpu", "cuda" or "auto"; NULL: cpu.
     * Carried to every receiver of the bench's process and to its
     * constructor; role processes keep cpu. The bench's dense-refit
     * verification loads its oracle on the CPU path, so a verified run
     * on a GPU is bit-exact against the CPU path. */
    const char *device;
    /* Committed versions whose payloads stay in the object store for replay
     * (dcr/recovery.h, --retain); 0: none. Objstore transport only. */
    int retain;
    /* Rollout-node processes: node 0 writes an anchor (dcr/recovery.h, a
     * dense snapshot for an elastic join) after every anchor_every-th
     * commit, and a node with nothing to restore from joins from the
     * newest one plus replay (deploy/restorer.h, --anchor-every);
     * 0: none. Objstore transport with retention only. */
    int anchor_every;
} dcr_run_config_t;

/* Timed refits of a default `dcr bench`: enough for dcr compare's verdict
 * (at least 10 per side, reports/compare.h) with room for a bootstrap
 * interval of the median narrow enough to matter; 20 refits add about 10 s
 * to a default run on a 2-core machine. */
#define DCR_BENCH_DEFAULT_REFITS 20

/* Timed refits a side of an interleaved A/B run (bench --ab, --ab-binary)
 * when --refits is not given: with 20 a side a real 1.20x slowdown was
 * called in 18 of 20 jobs under load 6-18, with 40 in every job up to load
 * 10 (BENCHMARKS.md, regression tracking); a default A/B job takes about a
 * minute here. */
#define DCR_BENCH_AB_DEFAULT_REFITS 40

/* The embedded default: scaled Qwen3-30B-A3B (scale 16, 8 layers) trained on
 * 2 nodes x 2 GPUs (TP 2, ETP 2), served by 2 rollout nodes x 2 GPUs (TP 2),
 * 3% uniform changes, object store, sync RL, mode X, default links. */
dcr_run_config_t dcr_run_config_default(void);

/* The run-level rules of a configuration, which every role process checks
 * as well as the process that starts the run (dcr_bench_config_check adds
 * the bench's own). process_roles: the rollout nodes will be processes of
 * their own (--processes). DCR_EINVAL with one line naming the flag: an
 * unknown transport, --changes adamw without a positive --lr, processes
 * with async RL, and --anchor-every without processes over the object store
 * or above the configured retention window (cfg->retain: a join replays the
 * retained versions after its anchor). */
dcr_status_t dcr_run_config_check(const dcr_run_config_t *cfg, bool process_roles);

/* The constructor configuration of a run (mode, shuffle, key, device, chunk
 * and bucket targets), the same in dcr bench and in every owner process. */
dcr_construct_config_t dcr_run_construct_config(const dcr_run_config_t *cfg,
                                                const dcr_scenario_t *sc);
/* Per canonical tensor of sc: XOR on every receiver's path of the serving
 * layout (mode X only), from shape-only probes; malloc'd into *out_p. */
dcr_status_t dcr_run_xor_policy(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                dcr_construct_mode_t mode, uint8_t **out_p);
/* Chunk and bucket targets for a checkpoint: the configured ones, or by
 * default about 12 payloads per owner (the seed's 482 payloads over 32
 * owners) with the seed's chunk-to-bucket proportion for the transport. */
void dcr_run_targets(const dcr_run_config_t *cfg, int64_t checkpoint_bytes, int owners,
                     size_t *chunk_p, size_t *bucket_p);

/* Control-plane addresses of a run (--control): etcd://HOST:PORT[/PREFIX]
 * selects the etcd backend; anything else is a SQLite file path. True for the
 * former. */
bool dcr_run_control_is_etcd(const char *address);

/* Checks a --control value before any work is done: DCR_EINVAL with one line
 * naming flag for an empty value or an etcd URL that is not of the form
 * etcd://HOST:PORT[/PREFIX] (the backend checks it again when it opens). */
dcr_status_t dcr_run_control_check(const char *flag, const char *address);

/* Refuses, before a run, a SQLite control plane (a --control FILE that
 * exists) holding any commit record but the empty initial one: a run starts
 * its receivers at version 0, and carrying on from an earlier run's
 * committed version N would hand them deltas against weights they never
 * had. DCR_EINVAL with one line naming flag, the path and the version
 * found; errors opening or reading the file as the SQLite backend's. An
 * absent file and an etcd URL (each run gets a fresh namespace) pass. Only
 * the process that starts a run checks: its role processes join the
 * plane it bootstrapped. */
dcr_status_t dcr_run_control_fresh(const char *flag, const char *address);

/* The etcd URL a run's control plane lives at: address with the namespace
 * PREFIX/<run> appended (PREFIX "dcr" when address names none), or address
 * itself for run NULL. DCR_EINVAL when it does not fit cap. */
dcr_status_t dcr_run_control_url(const char *address, const char *run, char *url, size_t cap);

/* Opens the control plane of one run. Every run starts from an empty
 * control plane, so an etcd URL gets the fresh namespace PREFIX/<run>
 * (PREFIX "dcr" when the URL names none; run unique to the run, e.g.
 * bench-<pid>-<ns>), or with run NULL the URL as given (processes of one run
 * that share a control plane); a file path (NULL: default_path) is opened as
 * SQLite. */
dcr_status_t dcr_run_control_open(const char *address, const char *default_path, const char *run,
                                  dcr_control_t **out_p);
/* The same over the backends named prefix + "sqlite" / prefix + "etcd"
 * (prefix "faulty:" for a faults run, "" for the real ones). */
dcr_status_t dcr_run_control_open_as(const char *prefix, const char *address,
                                     const char *default_path, const char *run,
                                     dcr_control_t **out_p);

#endif
