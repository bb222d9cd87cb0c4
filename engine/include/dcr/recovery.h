/* Recovery: how a rollout node that fell behind, died mid-apply or joins
 * late comes back to the committed version without a full reload
 * (DESIGN.md sections 5 and 11). One header for the whole room:
 *
 *   retention   the payloads of the last K committed versions stay readable
 *               under their version (object store; the relay root's disk);
 *   replay      a receiver that holds u < v replays u+1..v through its own
 *               apply path;
 *   repair      the owners' repair sets (a committed run's records in
 *               overwrite form, built by the constructor, dcr/construct.h)
 *               bring a receiver killed mid-apply to u+1;
 *   anchors     dense snapshots every N commits, from which an elastic
 *               joiner replays;
 *   restore     the decision per receiver (clean, replay, repair, anchor,
 *               dense), carried out by the rollout-node process
 *               (deploy/restorer.h), whose outcomes are logged per node.
 *
 * Sections below, in that order: retention in the object store, anchors,
 * retention at the relay root, retention beside a coordinator (the
 * retainer), an owner's repair-set upload. */
#ifndef DCR_RECOVERY_H
#define DCR_RECOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/codec.h"
#include "dcr/construct.h"
#include "dcr/objstore.h"
#include "dcr/receiver.h"
#include "dcr/status.h"
#include "dcr/transport.h"

/* ==== Retention of committed versions =================================== */
/* Retention of committed payloads (issue 19): the payloads of the last K
 * committed versions stay readable in the object store under their version,
 * so that a receiver that fell behind replays the deltas it missed instead
 * of a dense refit.
 *
 * The objstore transport clears an attempt's prefix when the next attempt
 * opens, so the process that commits copies the committed attempt's listed
 * payloads, once the commit record is durable and before it prepares the
 * next attempt:
 *   versions/v<V>/payload-<owner>-<id>.dcrp   the payload, byte for byte
 *   versions/v<V>/VERSION                     written last: what the version holds
 * then deletes versions older than V - K + 1 (each VERSION first, so a
 * version is listed only while all its payloads are stored).
 *
 * VERSION is text, one record per line, each ending in '\n':
 *   dcr-version 1
 *   version <V>
 *   from <V - 1>
 *   tau <attempt that committed V>
 *   payloads <n>
 *   payload <name> <bytes> <BLAKE2b-256 of the whole object, 64 lowercase hex digits>  (n lines)
 *   end
 * Decimal numbers have no sign and no leading zeros; anything else is
 * malformed. A reader verifies every payload's length and digest and the
 * chain from -> version before it applies anything. */

/* Versions kept when the user does not say (--retain). */
#define DCR_RETAIN_DEFAULT 8
/* Bytes of a payload's digest in VERSION (BLAKE2b-256). */
#define DCR_RETAIN_DIGEST_BYTES 32
/* Longest payload name in a VERSION manifest (the transport's names are far shorter). */
#define DCR_RETAIN_NAME_MAX 95

/* One retained payload. */
typedef struct dcr_retain_entry {
    char name[DCR_RETAIN_NAME_MAX + 1]; /* key under versions/v<V>/ */
    uint64_t bytes;
    uint8_t digest[DCR_RETAIN_DIGEST_BYTES];
} dcr_retain_entry_t;

/* A parsed VERSION manifest, or a version's repair set (below). */
typedef struct dcr_retain_manifest {
    uint64_t version, from, tau;
    /* A repair set: the earliest attempt it covers (0 for a VERSION). */
    uint64_t covers_from;
    size_t n;
    dcr_retain_entry_t *entries; /* malloc'd; dcr_retain_manifest_free */
} dcr_retain_manifest_t;

/* What one dcr_retain_commit did and cost. */
typedef struct dcr_retain_stats {
    uint64_t payloads; /* copied */
    uint64_t bytes;    /* copied (read once and written once) */
    uint64_t pruned;   /* older versions deleted */
    double seconds;    /* the whole call */
} dcr_retain_stats_t;

/* Copies the payloads that attempt tau's manifest (the transport's
 * attempt-<tau>/MANIFEST) lists into versions/v<version>/, writes the
 * VERSION manifest last, then deletes retained versions below
 * version - keep + 1. Call only after the commit record of version from
 * attempt tau is durable, and before the next attempt opens (it clears
 * attempt tau's prefix). keep >= 1. A payload whose length differs from the
 * manifest's fails the copy (DCR_ETRANSPORT), and nothing of version is
 * listed then; stats_p may be NULL. Blocks for one get and one put per
 * payload. */
dcr_status_t dcr_retain_commit(dcr_objstore_t *s, uint64_t tau, uint64_t version, int keep,
                               dcr_retain_stats_t *stats_p);

/* Reads and parses versions/v<version>/VERSION. DCR_ENOTFOUND when the
 * version is not retained (never kept, or pruned); DCR_ETRANSPORT for a
 * malformed one or one naming another version. *out_p is empty on failure
 * (dcr_retain_manifest_free is safe either way). */
dcr_status_t dcr_retain_manifest_read(dcr_objstore_t *s, uint64_t version,
                                      dcr_retain_manifest_t *out_p);
/* Parses VERSION text[0, len) (exposed for tests); `where` is named in
 * errors. Never reads past len. */
dcr_status_t dcr_retain_manifest_parse(const char *text, size_t len, const char *where,
                                       dcr_retain_manifest_t *out_p);
/* Frees the entries and zeroes *m; accepts NULL and a zeroed struct. */
void dcr_retain_manifest_free(dcr_retain_manifest_t *m);

/* Reads entry i of manifest m into a malloc'd buffer (the caller frees it)
 * and checks its length and digest against the manifest: DCR_ENOTFOUND when
 * absent (pruned meanwhile), DCR_EDIGEST when the bytes differ. */
dcr_status_t dcr_retain_payload_get(dcr_objstore_t *s, const dcr_retain_manifest_t *m, size_t i,
                                    uint8_t **buf_p, size_t *len_p);

/* Retains `version` (from version - 1, committed by attempt tau) from
 * payloads a caller holds: bufs[i][0, lens[i]) stored as versions/v<V>/
 * names[i], then VERSION written last (an earlier VERSION of the same
 * version is deleted first). For a producer that holds a version's records
 * itself rather than in an attempt's prefix: owners uploading repair
 * records, harnesses and tests. Prunes nothing. DCR_EINVAL for a name that
 * is empty, too long, or holds a space, '/' or newline. */
dcr_status_t dcr_retain_put(dcr_objstore_t *s, uint64_t version, uint64_t tau, size_t n,
                            const char *const *names, const uint8_t *const *bufs,
                            const size_t *lens);

/* ---- repair sets (issue 19) ----------------------------------------------
 * A version's retained payloads are the committing attempt's, XOR records
 * mostly, which cannot repair a receiver that died mid-apply. Each owner
 * stores beside them, after the commit, the committed run's records in
 * overwrite form (dcr_repair_records_encode, dcr/construct.h):
 *   versions/v<V>/repair-<owner>-<id>.dcrp   the overwrite payloads
 *   versions/v<V>/REPAIR-<owner>             written last by that owner
 * REPAIR-<owner> is text: "dcr-repair 1\n", "owner <o> of <owners>\n",
 * "covers-from <tau0>\n", then a VERSION manifest's text listing the
 * owner's repair payloads (same rules). A version's repair set is complete
 * when REPAIR-0..REPAIR-<owners - 1> all exist and agree. Pruning deletes it
 * with its version. */

/* Stores owner `owner` (of `owners`)'s repair payloads of `version`
 * (committed by attempt tau; covering attempts covers_from..tau) as
 * repair-<owner>-<i>.dcrp, then REPAIR-<owner> last (an earlier one
 * deleted first). stats_p (may be NULL): payloads and bytes written. */
dcr_status_t dcr_retain_repair_put(dcr_objstore_t *s, uint64_t version, uint64_t tau,
                                   uint64_t covers_from, int owner, int owners, size_t n,
                                   const uint8_t *const *bufs, const size_t *lens,
                                   dcr_retain_stats_t *stats_p);

/* The complete repair set of `version` as one manifest (every owner's
 * payloads; tau the committing attempt; covers_from the latest owner's
 * bound), for dcr_retain_payload_get. DCR_ENOTFOUND while some owner's part
 * is missing (not stored yet, never, or pruned); DCR_ETRANSPORT for a
 * malformed part or parts that disagree. *out_p is empty on failure. */
dcr_status_t dcr_retain_repair_read(dcr_objstore_t *s, uint64_t version,
                                    dcr_retain_manifest_t *out_p);

/* Deletes every retained version below `below`: its VERSION first (so
 * that no reader trusts a version while its payloads go), then the rest;
 * adds the versions deleted to *pruned_p. For a writer that retains through
 * dcr_retain_put (the relay root), as dcr_retain_commit prunes. */
dcr_status_t dcr_retain_prune(dcr_objstore_t *s, uint64_t below, uint64_t *pruned_p);

/* Deletes every retained version (a run starting on a store that an
 * earlier run used: its versions are not this run's). */
dcr_status_t dcr_retain_clear(dcr_objstore_t *s);

/* The retained versions, ascending (those with a VERSION manifest);
 * *versions_p malloc'd (the caller frees it; NULL when none). */
dcr_status_t dcr_retain_list(dcr_objstore_t *s, uint64_t **versions_p, size_t *n_p);

/* ==== Anchors =========================================================== */
/* Anchors (issue 19, elastic join): a dense snapshot of the serving state at
 * a committed version, in the run's object store, from which a rollout node
 * added mid-run joins (the newest anchor it can read, then replay of the
 * retained versions after it, dcr/recovery.h) instead of a dense refit.
 *
 * One anchor of version V:
 *   anchors/v<V>/<name>     one object per serving shard (e.g. "t0": the
 *                           parameter bytes of tensor-parallel rank 0's
 *                           receiver, in its arena order), byte for byte
 *   anchors/v<V>/ANCHOR     written last: what the anchor holds
 * An anchor is listed only once its ANCHOR exists; after it is written the
 * older anchors but the newest of them (a joiner may be reading it) are
 * deleted, each ANCHOR first, so a reader never lists an anchor whose
 * objects are going.
 *
 * ANCHOR is text, one record per line, each ending in '\n':
 *   dcr-anchor 1
 *   version <V>
 *   objects <n>
 *   object <name> <bytes> <BLAKE2b-256 of the whole object, 64 lowercase hex digits>  (n lines)
 *   end
 * Decimal numbers have no sign and no leading zeros; names are key
 * components of [A-Za-z0-9._-] not starting with '.', each once; anything
 * else is malformed. A reader checks every object's length and digest
 * before it writes a byte of it anywhere. */

/* A parsed ANCHOR manifest; entries are named as retained payloads are. */
typedef struct dcr_anchor_manifest {
    uint64_t version;
    size_t n;
    dcr_retain_entry_t *entries; /* malloc'd; dcr_anchor_manifest_free */
} dcr_anchor_manifest_t;

/* The manifest's text (malloc'd, *len_p bytes, not NUL-terminated), or NULL
 * when out of memory. */
char *dcr_anchor_manifest_text(const dcr_anchor_manifest_t *m, size_t *len_p);
/* Parses ANCHOR text; `where` names it in errors. DCR_ETRANSPORT naming the
 * line and what was expected for malformed text; *out_p is empty then. */
dcr_status_t dcr_anchor_manifest_parse(const char *text, size_t len, const char *where,
                                       dcr_anchor_manifest_t *out_p);
/* Accepts an empty (zeroed) manifest. */
void dcr_anchor_manifest_free(dcr_anchor_manifest_t *m);

/* Writes anchor `version`: objects names[i] = bufs[i][0, lens[i]), then
 * ANCHOR, then deletes the older anchors but the newest of them. Blocks for
 * one put per object. */
dcr_status_t dcr_anchor_put(dcr_objstore_t *s, uint64_t version, size_t n, const char *const *names,
                            const uint8_t *const *bufs, const size_t *lens);

/* Deletes every anchor (a run starting on a store that an earlier run
 * used: its anchors are not this run's, and one above this run's versions
 * would never be pruned). */
dcr_status_t dcr_anchor_clear(dcr_objstore_t *s);

/* The newest complete anchor of version at most `at_most` (its ANCHOR
 * parsed, naming the version its key says): DCR_ENOTFOUND when there is
 * none; a malformed ANCHOR fails with its error. */
dcr_status_t dcr_anchor_newest(dcr_objstore_t *s, uint64_t at_most, dcr_anchor_manifest_t *out_p);

/* Object `name` of anchor m, checked against its length and digest
 * (DCR_EDIGEST otherwise), into *buf_p (malloc'd, *len_p bytes).
 * DCR_ENOTFOUND for a name m does not list. */
dcr_status_t dcr_anchor_get(dcr_objstore_t *s, const dcr_anchor_manifest_t *m, const char *name,
                            uint8_t **buf_p, size_t *len_p);

/* ==== Retention at the relay tree's root ================================ */
/* Retention at the relay tree's root (issue 19): the root keeps the
 * payloads of the last K committed versions on its own disk, in the layout
 * of dcr/recovery.h (versions/v<V>/..., a VERSION manifest written last), and
 * serves them to rollout nodes over the network, so that a node that fell
 * 1..K versions behind replays the deltas it missed (dcr_restore_replay
 * takes any dcr_objstore_t) instead of a dense refit.
 *
 * Every payload of an attempt crosses the root, which verifies it (digest,
 * attempt, owner, id) before it forwards it: the root keeps a reference to
 * each verified payload of the attempt under way, and when every owner
 * finished it, before the tree's nodes see its end (so before any of them
 * acknowledges), stages the attempt on its store outside versions/, in the
 * object-store transport's layout (attempt-<tau>/payload-<owner>-<id>.dcrp,
 * MANIFEST written last), where no reader looks. When told that the
 * attempt committed (dcr_relay_retain_commit, from the process that follows
 * the control plane's commit record at the root) it publishes the staged
 * attempt as the version (dcr_retain_commit: VERSION written last) and
 * deletes the staged attempts up to it, which committed or never will. A
 * root killed between its acknowledgment and the commit keeps the staged
 * attempt on disk: its restarted process publishes it when it finds the
 * commit record naming it (dcr_relay_retain_recover, or the commit call).
 *
 * Readers open the object store "relay://HOST:PORT" (dcr/objstore.h; HOST
 * an IPv4 address or name, PORT the root's listener): get and list of keys
 * under "versions/" only, by one connection per store handle; put and
 * delete are refused (DCR_EUNSUPPORTED), and wait_change only sleeps. The
 * root answers on the listener its tree uses (across processes: the address
 * it publishes for tree node 0), checks every request's length and key
 * (retain.h's name rule; "..", absolute and foreign keys are refused) and
 * serves at most 16 readers at once. Readers verify every payload against
 * its VERSION manifest (dcr_retain_payload_get), so a corrupt or missing
 * object served is a digest failure or a gap there, never applied. */

/* Makes relay handle t, which must serve the root (a whole tree in one
 * handle, or relay_node 0 across processes), keep the last `keep` (>= 1)
 * committed versions in the store store_url names (a directory path or
 * "dir:PATH" on the root's host; any writable store URL works) and serve
 * them. clear: deletes the versions and staged attempts the store holds
 * first (a fresh run on a store an earlier run used); a restarted root
 * keeps them (they are this run's). A handle holding the whole tree starts a listener on 127.0.0.1
 * for the readers. Call once, after create and before the first attempt.
 * DCR_EUNSUPPORTED for another backend or a handle that is not the root;
 * DCR_EINVAL for keep < 1 or a second call; the store's errors. */
dcr_status_t dcr_relay_retain_start(dcr_transport_t *t, const char *store_url, int keep,
                                    bool clear);

/* Attempt tau committed `version` (the commit record says so, and is
 * durable): writes every payload of tau that the root verified as
 * versions/v<version>/payload-<owner>-<id>.dcrp with its VERSION manifest
 * last (dcr_retain_put), then deletes the versions below
 * version - keep + 1 (each VERSION first). Publishes what tau staged on
 * the root's store, so a root restarted since tau ended retains it too;
 * DCR_OK without a copy when version is retained from tau already. Blocks
 * for one get and one put per payload on the root's store; call from one
 * thread at a time, not concurrently with open_attempt. DCR_ENOTFOUND when
 * tau was not staged whole at this root (it never ended there, or its
 * staging failed): version is then a gap, and replays across it take a
 * dense refit. stats_p may be NULL. */
dcr_status_t dcr_relay_retain_commit(dcr_transport_t *t, uint64_t tau, uint64_t version,
                                     dcr_retain_stats_t *stats_p);

/* dcr_relay_retain_commit without a relay handle, for a restarted root
 * before its transport exists: the commit record names attempt tau as
 * `version`, and the root's store (store_url, as given to
 * dcr_relay_retain_start) may hold it staged from before the restart.
 * Publishes it (DCR_OK when retained already), prunes to keep versions and
 * deletes the staged attempts up to tau; later ones stay, they may still
 * commit. DCR_ENOTFOUND when tau was never staged whole there (a gap). */
dcr_status_t dcr_relay_retain_recover(const char *store_url, uint64_t tau, uint64_t version,
                                      int keep, dcr_retain_stats_t *stats_p);

/* The readers' store URL ("relay://HOST:PORT") into url (cap bytes).
 * DCR_EINVAL before dcr_relay_retain_start. */
dcr_status_t dcr_relay_retain_url(dcr_transport_t *t, char *url, size_t cap);

/* ==== Retention beside a coordinator ==================================== */
/* Retention of committed versions run beside a coordinator (dcr/recovery.h):
 * the copy of a committed attempt's payloads under versions/ runs in the
 * background after the commit record is durable, and is joined before the
 * next attempt opens (which clears the committed attempt's prefix). Shared
 * by dcr bench and dcr faults --processes, which commit through their own
 * coordinators. */

typedef struct dcr_retainer dcr_retainer_t;

/* Opens its own handle on the object store at url (s3_endpoint NULL: a
 * directory) and deletes every retained version found there (an earlier
 * run's versions are not this run's: nothing may replay them). keep >= 1:
 * the window (--retain K). */
dcr_status_t dcr_retainer_create(const char *url, const char *s3_endpoint, int keep,
                                 dcr_retainer_t **out_p);

/* Joins a running copy (its error is dropped; join first to see it) and
 * closes the store. Accepts NULL. */
void dcr_retainer_destroy(dcr_retainer_t *t);

/* Starts copying attempt tau's payloads as `version` in the background,
 * after joining the one before (whose error it returns, copying nothing).
 * Call only once the commit record of version from attempt tau is durable. */
dcr_status_t dcr_retainer_start(dcr_retainer_t *t, uint64_t tau, uint64_t version);

/* As dcr_retainer_start, and then, in the same background thread, stores
 * `repair` (the committed run's records, taken: the retainer frees it; NULL
 * for none) as version's repair set, every owner's part (owners of them),
 * encoded as cfg says (dcr/recovery.h "repair sets"): for a process that
 * holds every owner's constructor (dcr bench in one process, or with owner
 * threads). A failure to store it is logged, not returned: the version
 * only loses its repairs. */
dcr_status_t dcr_retainer_start_repair(dcr_retainer_t *t, uint64_t tau, uint64_t version,
                                       dcr_repair_records_t *repair,
                                       const dcr_construct_config_t *cfg, int owners);

/* Waits for the running copy, if any (*ran_p false, nothing else written,
 * when none ran): its stats and the seconds this call blocked. Its failure
 * comes back naming the version. stats_p, wait_s_p and ran_p may be NULL. */
dcr_status_t dcr_retainer_join(dcr_retainer_t *t, dcr_retain_stats_t *stats_p, double *wait_s_p,
                               bool *ran_p);

/* ==== An owner's repair sets ============================================ */
/* An owner's repair sets (issue 19; dcr/construct.h, dcr/recovery.h): after
 * each commit the owner process encodes the committed run's records as
 * overwrite payloads and stores them beside the version's retained
 * payloads, in a background thread started once the commit is reported
 * (after t1), so that neither the refit's window nor its commit waits for
 * it. The next attempt (or a rebuild of the constructor) joins it first:
 * the constructor's next commit would replace nothing it uses, but two
 * uploads must not overlap on one store handle. */

/* Encodes set r (cfg) and stores it as version's repair set
 * (dcr_retain_repair_put): owner `owner`'s part, or with owner -1 every
 * owner's part 0..owners-1 (a process that holds every owner, as dcr bench
 * in one process does). Blocks. encode_p and store_p (may be NULL): what the
 * encoding and the puts did and took. */
dcr_status_t dcr_repair_store(dcr_objstore_t *s, dcr_repair_records_t *r,
                              const dcr_construct_config_t *cfg, uint64_t version, int owner,
                              int owners, dcr_construct_stats_t *encode_p,
                              dcr_retain_stats_t *store_p);

typedef struct dcr_repair_upload dcr_repair_upload_t;

/* An uploader for owner `owner` of `owners`, storing into s (borrowed; it
 * must outlive the uploader), encoding as cfg says (copied). */
dcr_status_t dcr_repair_upload_create(dcr_objstore_t *s, const dcr_construct_config_t *cfg,
                                      int owner, int owners, dcr_repair_upload_t **out_p);

/* Joins a running upload, then frees. Accepts NULL. */
void dcr_repair_upload_destroy(dcr_repair_upload_t *u);

/* Starts storing `records` (taken: freed when done) as the repair set of
 * `version`, after joining the one before. NULL records: nothing to do. */
dcr_status_t dcr_repair_upload_start(dcr_repair_upload_t *u, dcr_repair_records_t *records,
                                     uint64_t version);

/* Waits for the running upload, if any. Its failure is logged, not
 * returned: a version without a repair set only loses its repairs (its
 * dirty receivers are refitted densely), never correctness. *wait_s_p (may
 * be NULL): the seconds this call blocked. */
void dcr_repair_upload_join(dcr_repair_upload_t *u, double *wait_s_p);

/* ==== The restore decision, replay and repair, the restore log ========== */

/* Restoring a rollout node's receivers to the committed version without a
 * full reload where it can (issue 19; DESIGN.md sections 5 and 11).
 *
 * Each receiver is classified, said in the log, and counted by kind:
 *   clean   holds the committed version v, clean: rejoins at once;
 *   replay  holds u < v, clean: replays the retained versions u+1..v
 *           (dcr/recovery.h) through its own apply path;
 *   repair  dirty: died (or failed) mid-apply of an attempt from u, its
 *           bytes a mixture of u and that attempt's writes (live resident
 *           files only, see below): the complete overwrite records of
 *           version u+1 (its repair set), then replay of u+2..v
 *           (dcr_restore_repair);
 *   dense   dirty, unknown, ahead of v, or behind the retention window (or
 *           a replay or a check failed): a dense refit, as before;
 *   anchor  (run->anchor_every > 0) what would be dense, e.g. a node added
 *           mid-run with nothing resident (an elastic join): the newest
 *           anchor of version A <= v it can read (dcr/recovery.h: a dense
 *           snapshot one node writes every N commits), each object checked
 *           against its digest before a byte of it is used, then replay of
 *           the retained versions A+1..v; bytes = the anchor object + the
 *           replay. No anchor, a bad object, a gap or a failed check: dense.
 * A receiver that did not take the dense path rejoins only after its
 * digests equal a dense refit of v (the oracle: the run's seeded world,
 * deploy/world.h); otherwise it is restored densely.
 *
 * Where the repair records come from (the rule, tested by
 * tests/deploy/test_restore.c at several kill points against a dense
 * refit): version u+1's repair set (dcr/recovery.h), which the owners store
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
 * with cfg.repair_in_retry (deploy/node_role.c): the survivors of
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

/* ---- the decision -------------------------------------------------------- */

/* No version: a receiver that holds no clean version, or no interrupted
 * attempt. */
#define DCR_RESTORE_NONE UINT64_MAX

/* What a receiver's restorer found before deciding (its input). */
typedef struct dcr_restore_state {
    /* The clean version it holds, or DCR_RESTORE_NONE (dirty, unknown). */
    uint64_t held;
    /* Dirty with a known interrupted attempt: the version that attempt
     * started from (live resident files only); else DCR_RESTORE_NONE. */
    uint64_t from;
    /* In memory and untouched since its last clean point: a receiver clean
     * at the version asked needs nothing, not even a check. */
    bool untouched;
    /* The caller repairs a receiver dirty at the very version asked in the
     * overwrite retry from it (rollout-node processes do). */
    bool repair_in_retry;
    /* Its repair in such a retry failed its check before. */
    bool retry_refused;
} dcr_restore_state_t;

/* What to do with one receiver asked to reach a version. */
typedef enum dcr_restore_action {
    DCR_RESTORE_NOTHING = 0, /* clean, untouched: rejoins as it is, not recorded */
    DCR_RESTORE_CHECK = 1,   /* clean copy: rejoins after its digests equal the oracle's */
    DCR_RESTORE_DEFER = 2,   /* dirty at the version asked: left for the overwrite retry */
    DCR_RESTORE_APPLY = 3,   /* replay, repair or dense (kind), then the oracle check */
} dcr_restore_action_t;

typedef struct dcr_restore_choice {
    dcr_restore_kind_t kind; /* CLEAN for NOTHING, CHECK and DEFER */
    dcr_restore_action_t action;
} dcr_restore_choice_t;

/* The restore decision for one receiver asked to reach `version` (the table
 * above): dirty with a known attempt from u: repair when u < version, left
 * for the retry when u == version and the caller repairs in the retry (and
 * no such repair failed before), else dense; clean at version: nothing
 * (untouched) or a check; clean at u < version: replay; anything else
 * (unknown, ahead): dense. Pure: no I/O. Anchors replace dense afterwards
 * (dcr_restore_prefers_anchor). why (NULL, or NUL-terminated in cap bytes:
 * what the restorer found so far) gets the reason a receiver is not clean
 * or replayed appended, where the decision adds one. */
dcr_restore_choice_t dcr_restore_decide(const dcr_restore_state_t *s, uint64_t version, char *why,
                                        size_t cap);

/* Whether a receiver decided dense joins from an anchor instead: anchors
 * are written (anchor_every > 0), a store is reachable and version > 0
 * (version 0 is the run's initial load). */
bool dcr_restore_prefers_anchor(dcr_restore_kind_t kind, int anchor_every, bool store,
                                uint64_t version);

/* Appends rec to <workdir>/restores/n<node>.txt (one short line per
 * append, so lines stay whole across restarts; the folder is created).
 * DCR_EIO naming the path on failure. */
dcr_status_t dcr_restore_log_append(const char *workdir, int node, const dcr_restore_record_t *rec);

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
