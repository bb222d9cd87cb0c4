/* The restorer of a rollout-node process: carries out the restore decision
 * of dcr/recovery.h for the node's receivers, with the run's seeded world
 * as the oracle (deploy/world.h) and the node's resident files. */
#ifndef DCR_DEPLOY_RESTORER_H
#define DCR_DEPLOY_RESTORER_H

#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/objstore.h"
#include "dcr/receiver.h"
#include "dcr/recovery.h"
#include "deploy/world.h"

typedef struct dcr_restorer_config {
    const dcr_run_config_t *run;
    dcr_role_world_t *world; /* borrowed; advanced to the restored version */
    const char *workdir;
    int node, first, per;
    /* Keep resident files under <workdir>/resident/ (saved at every commit). */
    bool resident;
    /* With resident: the receivers' weights live in the files (no copy at
     * commit), and a receiver killed mid-apply is repaired. The receivers
     * must be destroyed before the restorer (their bytes are its mappings). */
    bool live;
    /* With live: a receiver dirty at the very version a restore asks for
     * (an attempt from it did not commit, none committed since) is left
     * as it is, pending (dcr_restorer_pending), instead of refitted
     * densely: the caller takes part in the overwrite retry from that
     * version with it, checks it (dcr_restorer_check_repair) before
     * acknowledging, and the commit of the retry's version records it as
     * a repair (cause start or dirty; bytes: the retry's). A pending
     * receiver never serves. One whose check failed is refitted densely at
     * the next restore. */
    bool repair_in_retry;
} dcr_restorer_config_t;

typedef struct dcr_restorer dcr_restorer_t;

dcr_status_t dcr_restorer_create(const dcr_restorer_config_t *cfg, dcr_restorer_t **out_p);
/* Accepts NULL. */
void dcr_restorer_destroy(dcr_restorer_t *R);

/* Brings recv[0, per) to `version`. recv[k] NULL: a fresh process, whose
 * resident file (if any) says what it holds; otherwise an in-memory
 * receiver holding `held`, or dirty (payloads reached it after its last
 * clean point): then, in copy mode, its resident copy of the last commit
 * stands in for it when there is one (a clean restore moving nothing, or a
 * replay from there), else it is restored densely; live, a dirty one (in
 * memory or its file) is repaired when a version after the one its
 * attempt started from is committed, else (its attempt started from
 * `version`) left pending with cfg.repair_in_retry (not recorded, not
 * clean) or restored densely. An in-memory
 * receiver clean at `version` is left as it is, and not recorded.
 * Receivers may be replaced (the old ones are destroyed). Before a replay it waits up to 3 s for
 * `version` itself to be retained (the committing process copies it just after the commit record is
 * durable, which is when a node may read it). On DCR_OK every receiver holds `version`: checked
 * against the oracle unless it was refitted densely. Blocks; call while nothing applies to the
 * receivers. */
dcr_status_t dcr_restorer_restore(dcr_restorer_t *R, dcr_receiver_t **recv, uint64_t held,
                                  uint64_t version);

/* After the commit of `version` that recv[0, per) took part in: their
 * clean point, and their resident files. With the run's anchor_every
 * (workloads/harness/run_config.h; objstore transport), on node 0
 * at a version due: the receivers of every tensor-parallel rank are copied
 * (a memcpy each, while nothing applies) and uploaded as anchor `version`
 * by a background thread, so that refits do not wait for it; an anchor
 * still uploading when the next falls due makes that one skipped (said in
 * the log). */
dcr_status_t dcr_restorer_committed(dcr_restorer_t *R, dcr_receiver_t *const *recv,
                                    uint64_t version);

/* Waits for the anchor upload in flight, if any: DCR_OK, or its error
 * (said in the log too). dcr_restorer_destroy waits as well. */
dcr_status_t dcr_restorer_anchor_flush(dcr_restorer_t *R);

/* Whether receiver k was left dirty by a restore for its repair in the
 * overwrite retry (cfg.repair_in_retry) and is not repaired yet. */
bool dcr_restorer_pending(const dcr_restorer_t *R, int k);

/* Pending receiver k took part in an attempt that builds `version` (the
 * overwrite retry from the version it is dirty at): its digests against a
 * dense refit of `version` (the oracle). DCR_OK: once `version` is
 * committed with nothing applied to it since, dcr_restorer_committed
 * records it as a repair that moved `bytes` (the attempt's payload bytes
 * it took) and marks it clean. Otherwise the mismatch (DCR_EMISMATCH
 * naming the tensor, or the oracle's error): it must not acknowledge, it
 * stays dirty, and the next restore refits it densely. DCR_EINVAL when it
 * is not pending. The world (cfg.world) stays where it is. */
dcr_status_t dcr_restorer_check_repair(dcr_restorer_t *R, dcr_receiver_t *const *recv, int k,
                                       uint64_t version, uint64_t bytes);

/* Whether some receiver of recv[0, per) took payloads after its last clean
 * point (a restore or a commit it took part in): it holds writes of an
 * attempt that did not commit, and must be restored before the next one. */
bool dcr_restorer_dirty(const dcr_restorer_t *R, dcr_receiver_t *const *recv);

/* Live: before receiver k (0-based in the node) takes its first write of
 * attempt tau: its file's dirty mark, with tau. Cheap when already marked
 * for tau (every payload may call it); nothing when not live or before the
 * receiver's first clean point. Safe from the applying thread. */
void dcr_restorer_begin(dcr_restorer_t *R, int k, uint64_t tau);

/* The readers' check (request gate): whether receiver k of recv may serve:
 * it holds a committed version cleanly, no payload reached it since, and
 * (live) its file is not marked dirty. */
bool dcr_restorer_serves(const dcr_restorer_t *R, dcr_receiver_t *const *recv, int k);

/* Restores by kind so far, and the bytes they moved, in this process. */
void dcr_restorer_counts(const dcr_restorer_t *R, uint64_t counts[DCR_RESTORE_KINDS],
                         uint64_t bytes[DCR_RESTORE_KINDS]);

#endif
