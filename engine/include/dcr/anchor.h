/* Anchors (issue 19, elastic join): a dense snapshot of the serving state at
 * a committed version, in the run's object store, from which a rollout node
 * added mid-run joins (the newest anchor it can read, then replay of the
 * retained versions after it, dcr/retain.h) instead of a dense refit.
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
#ifndef DCR_ANCHOR_H
#define DCR_ANCHOR_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/objstore.h"
#include "dcr/retain.h"
#include "dcr/status.h"

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

#endif
