/* Restoring a rollout node's receivers to the committed version without a
 * full reload where it can (issue 19; DESIGN.md sections 5 and 11).
 *
 * Each receiver is classified, said in the log, and counted by kind:
 *   clean   holds the committed version v, clean: rejoins at once;
 *   replay  holds u < v, clean: replays the retained versions u+1..v
 *           (dcr/retain.h) through its own apply path;
 *   repair  dirty: died (or failed) mid-apply of an attempt from u, its
 *           bytes a mixture of u and that attempt's writes (live resident
 *           files only, see below): the complete overwrite records of
 *           version u+1 (its repair set), then replay of u+2..v
 *           (dcr_restore_repair);
 *   dense   dirty, unknown, ahead of v, or behind the retention window (or
 *           a replay or a check failed): a dense refit, as before;
 *   anchor  (run->anchor_every > 0) what would be dense, e.g. a node added
 *           mid-run with nothing resident (an elastic join): the newest
 *           anchor of version A <= v it can read (dcr/anchor.h: a dense
 *           snapshot one node writes every N commits), each object checked
 *           against its digest before a byte of it is used, then replay of
 *           the retained versions A+1..v; bytes = the anchor object + the
 *           replay. No anchor, a bad object, a gap or a failed check: dense.
 * A receiver that did not take the dense path rejoins only after its
 * digests equal a dense refit of v (the oracle: the run's seeded world,
 * workloads/roles/world.h); otherwise it is restored densely.
 *
 * Where the repair records come from (the rule, tested by
 * tests/workloads/test_restore.c at several kill points against a dense
 * refit): version u+1's repair set (dcr/retain.h), which the owners store
 * beside its retained payloads after every commit: the committed run's
 * records in overwrite form (dcr_repair_records_encode, dcr/construct.h),
 * built as the seed's retry builds them, from the unchanged B^u and the
 * committed candidate over the complete changed set, so they bring every
 * element an attempt from u touched to u+1's value, whatever landed before,
 * provided the attempt's records lie within them. The set says which
 * attempts it covers (covers_from..tau: the owners checked each earlier
 * run from B^u against the committed one, item by item); a receiver whose
 * interrupted attempt it does not cover (another candidate, or a run the
 * owners never saw) is not repaired with it. Without a usable set (relay
 * runs, a set not stored yet, not covering), the retained payloads of u+1
 * serve when they hold overwrite records only (the committed attempt was
 * an overwrite retry); XOR records, which flip whatever the receiver holds
 * and cannot be re-applied to a partly applied state, are refused before
 * any write, and the receiver is refitted densely, unless u+1 was
 * committed by the very attempt it was killed in and its digests equal a
 * dense refit of u+1 (it died after its last write; a verified repair),
 * then it replays u+2..v from there. Bytes moved: the repair set of u+1
 * (or its retained payloads) plus the retained payloads of u+2..v
 * (verified: u+2..v only). Whatever the path, the repaired receiver's
 * digests are compared with a dense refit of v before it rejoins.
 *
 * Live resident files (cfg.live, dcr/resident.h): the receivers' weights
 * live in their mapped files, dirty-marked (with the attempt) before each
 * attempt's first write (dcr_restorer_begin) and cleared at its commit or
 * after a checked restore. A live node whose receiver is dirty at the
 * committed version u (an attempt from u failed, none committed since) has
 * no copy of u to fall back to: without cfg.repair_in_retry it is
 * restored densely (cause dirty). In
 * copy mode (cfg.live false) the files hold a copy saved at each commit
 * instead, and nothing is ever repaired. Rollout-node processes run live
 * with cfg.repair_in_retry (workloads/roles/node_role.c): the survivors of
 * a killed attempt and the restarted node itself (the retry waits for it)
 * are dirty at u exactly in that way, and take part in the overwrite retry
 * from u as they are (the seed's in-place repair), checking their digests
 * against the oracle before they acknowledge it; the commit of u+1 records
 * them as repairs. A restarted node with a pending receiver reports FAILED
 * (with why), never READY, until that commit.
 *
 * Where a node's receivers came from: in memory (a live node the run went
 * on without; clean when no payload reached it since its last clean point),
 * or a fresh process's resident files (dcr/resident.h), saved at every
 * commit under <workdir>/resident/. A dirty receiver in memory (it holds
 * writes of an attempt that did not commit) is replaced by its resident
 * copy of the last commit when there is one, else refitted densely; a
 * rollout node restores such receivers before it takes part in any later
 * attempt (cause "dirty" below).
 *
 * The request gate across processes: a receiver killed mid-apply never
 * serves before it is restored (dcr_restorer_serves is the readers' check:
 * false while its in-memory state or, live, its file's mark says dirty),
 * because its process is gone and a
 * rollout-node process reports READY (the phase that lets it serve and
 * join) only at the end of its setup, after dcr_restorer_restore brought
 * every receiver to the committed version and compared the digests of each
 * one that was not refitted densely with a dense refit (the oracle); a
 * failed check makes it dense. A live node whose attempt did not commit
 * stays DONE or FAILED, not READY, until the next commit or its restore
 * before the next attempt. tests/faults/test_faults_processes.c checks the
 * order (each restarted process's READY after its restore records). */
#ifndef DCR_WORKLOADS_ROLES_RESTORE_H
#define DCR_WORKLOADS_ROLES_RESTORE_H

#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/objstore.h"
#include "dcr/receiver.h"
#include "workloads/roles/world.h"

typedef enum dcr_restore_kind {
    DCR_RESTORE_CLEAN = 0,
    DCR_RESTORE_REPLAY = 1,
    DCR_RESTORE_REPAIR = 2,
    DCR_RESTORE_DENSE = 3,
    DCR_RESTORE_ANCHOR = 4,
    DCR_RESTORE_KINDS = 5,
} dcr_restore_kind_t;

/* "clean", "replay", "repair", "dense", "anchor". */
const char *dcr_restore_kind_name(dcr_restore_kind_t k);

/* Why a receiver was restored (the record's last word):
 *   start   a fresh process (a restarted node);
 *   behind  a live node the run committed a newer version without;
 *   dirty   a live node whose receivers hold writes of an attempt that did
 *           not commit (failed, replaced, or the coordinator gave up): it
 *           restores its committed version before it takes part in any
 *           later attempt, since a later XOR attempt from the same version
 *           would apply its deltas over the stray writes (the engine's
 *           drop_dirty relies on gate dirty marks node processes never
 *           set). */
typedef enum dcr_restore_cause {
    DCR_RESTORE_START = 0,
    DCR_RESTORE_BEHIND = 1,
    DCR_RESTORE_DIRTY = 2,
    DCR_RESTORE_CAUSES = 3,
} dcr_restore_cause_t;

/* "start", "behind", "dirty". */
const char *dcr_restore_cause_name(dcr_restore_cause_t c);

/* What one replay moved. */
typedef struct dcr_replay_stats {
    uint64_t versions, payloads;
    uint64_t bytes; /* payload bytes downloaded (once for all receivers given) */
    double seconds;
    bool repair_set; /* a repair: version from+1 came from its repair set */
} dcr_replay_stats_t;

/* Replays retained versions from+1..to into r[0, n), which must all hold
 * version `from`, clean. Every VERSION manifest is read and the chain
 * checked, and every payload downloaded and checked against its digest,
 * before the first write: a missing version (DCR_ENOTFOUND, "gap"), a
 * broken chain or a bad payload fails with the receivers untouched. A
 * failure while applying (a payload refused or not accepted) leaves them
 * dirty: the caller must restore them densely. stats_p may be NULL. */
dcr_status_t dcr_restore_replay(dcr_objstore_t *s, dcr_receiver_t *const *r, int n, uint64_t from,
                                uint64_t to, dcr_replay_stats_t *stats_p);

/* Repairs receivers r[0, n), which all hold a partly applied attempt tau
 * from version `from` (dirty): applies version from+1's repair set when it
 * covers tau (0: unknown, never covered), else its retained payloads, which
 * must then carry overwrite records only (complete: see the rule above),
 * then replays from+2..to. Every manifest and payload is read and checked,
 * and version from+1's records decoded (with key: the run's payload key,
 * NULL or unset for none), before the first write: DCR_EUNSUPPORTED naming
 * the payload and tensor when a record is XOR (and why the repair set did
 * not serve), DCR_ENOTFOUND when to == from (no overwrite records exist
 * yet) or a version is missing; the receivers are untouched then. Other
 * failures as dcr_restore_replay. */
dcr_status_t dcr_restore_repair(dcr_objstore_t *s, const dcr_payload_key_t *key,
                                dcr_receiver_t *const *r, int n, uint64_t from, uint64_t to,
                                uint64_t tau, dcr_replay_stats_t *stats_p);

/* One receiver's restore, as logged and written to
 * <workdir>/restores/n<node>.txt (one line each). A fresh run's initial
 * dense load (version 0 into receivers that hold nothing) is setup, not a
 * restore: it is neither written nor counted. */
typedef struct dcr_restore_record {
    int receiver;
    dcr_restore_kind_t kind;
    uint64_t held; /* the version it held (clean) or UINT64_MAX (dirty or unknown) */
    uint64_t version;
    uint64_t bytes;       /* moved over the network for this restore */
    uint64_t dense_bytes; /* what a dense refit moves (the whole checkpoint) */
    double seconds;
    dcr_restore_cause_t cause;
    uint64_t tau;  /* repair: the interrupted attempt; 0 otherwise */
    char why[160]; /* why not clean or replay; "" otherwise */
} dcr_restore_record_t;

typedef struct dcr_restorer_config {
    const dcr_bench_config_t *run;
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
 * (workloads/bench.h; objstore transport), on node 0
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

/* Sums the lines of <workdir>/restores/ (every node, every process) into
 * counts, bytes, dense_bytes and seconds (per kind; seconds may be NULL); a
 * missing folder is all zeros. DCR_EPARSE naming the file and line for a
 * malformed line. */
dcr_status_t dcr_restore_totals(const char *workdir, uint64_t counts[DCR_RESTORE_KINDS],
                                uint64_t bytes[DCR_RESTORE_KINDS],
                                uint64_t dense_bytes[DCR_RESTORE_KINDS],
                                double seconds[DCR_RESTORE_KINDS]);

/* The first n restore records of rollout node `node` (e.g. its receivers'
 * restores when it joined): counts by kind, their bytes and what dense
 * refits of them move. DCR_ENOTFOUND when fewer lines exist; DCR_EPARSE
 * as dcr_restore_totals. */
dcr_status_t dcr_restore_first(const char *workdir, int node, int n,
                               uint64_t counts[DCR_RESTORE_KINDS], uint64_t *bytes_p,
                               uint64_t *dense_bytes_p);

/* Sums the lines of <workdir>/restores/ by cause (dcr_restore_cause_t); a
 * missing folder is all zeros; errors as dcr_restore_totals. */
dcr_status_t dcr_restore_causes(const char *workdir, uint64_t counts[DCR_RESTORE_CAUSES]);

#endif
