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
#ifndef DCR_RETAIN_H
#define DCR_RETAIN_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/objstore.h"
#include "dcr/status.h"

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

#endif
