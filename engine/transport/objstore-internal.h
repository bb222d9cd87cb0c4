/* Shared by the object-store wrappers (objstore.c), its backends
 * (objstore_backend_*.c) and the object-storage transport
 * (objstore_transport.c, objstore_manifest.c); not part of the public
 * interface. Tests may include it for the S3 parsing helpers. */
#ifndef DCR_OBJSTORE_INTERNAL_H
#define DCR_OBJSTORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/objstore.h"
#include "transport/transport-internal.h"

extern const dcr_objstore_ops_t dcr__objstore_dir_ops;

/* ---- the object-storage transport's names and manifest (objstore_manifest.c) */

/* A read position in text [p, end), for the token readers of the object
 * store's manifests and names and of the retained-version manifests
 * (retain.c): one reader of each token for every format. Each reader
 * advances p past what it read and returns true, or returns false and
 * leaves p where it was. */
typedef struct dcr__cursor {
    const char *p, *end;
} dcr__cursor_t;

/* The literal lit, byte for byte. */
bool dcr__cursor_lit(dcr__cursor_t *c, const char *lit);
/* A decimal of at most UINT64_MAX without sign or leading zeros ("0" itself
 * is one) into *v. */
bool dcr__cursor_u64(dcr__cursor_t *c, uint64_t *v);
/* 2 * bytes lowercase hex digits into out[0, bytes) (which a failure may
 * leave partly written). */
bool dcr__cursor_hex(dcr__cursor_t *c, uint8_t *out, size_t bytes);

/* Key prefix of attempt tau ("attempt-<tau>/"). */
void dcr__obj_attempt_prefix(uint64_t tau, char *out, size_t cap);
/* Key of one payload under its attempt's prefix ("payload-<owner>-<id>.dcrp"). */
void dcr__obj_payload_name(uint32_t owner, uint64_t id, char *out, size_t cap);
/* Parses a payload name as dcr__obj_payload_name writes it, exactly. */
bool dcr__obj_parse_payload_name(const char *s, uint32_t *owner, uint64_t *id);
/* Name of the manifest part of owners [first, first + count)
 * ("MANIFEST-<first>-<count>"), under its attempt's prefix. */
void dcr__obj_manifest_part_name(int first, int count, char *out, size_t cap);
/* Parses a part name as dcr__obj_manifest_part_name writes it, exactly, for
 * a non-empty range inside [0, world). */
bool dcr__obj_parse_manifest_part_name(const char *s, int world, int *first, int *count);
/* Reads one manifest object of attempt tau, as dcr__manifest_parse does,
 * and appends its entries to *entries_p (*n_p of them; realloc'd, the
 * caller frees): the whole manifest (count 0) or the part of owners
 * [first, first + count), every entry of which must be in that range. The
 * one reading of a manifest object: the transport's readers and retention
 * (retain.c) both call it. On failure *entries_p and *n_p are unchanged.
 * Errors: those of dcr__manifest_parse; DCR_ETRANSPORT for an owner outside
 * the part, naming the path; DCR_ENOMEM. */
dcr_status_t dcr__manifest_append(const char *text, size_t len, const char *path, uint64_t tau,
                                  int world, int first, int count, dcr__ledger_entry_t **entries_p,
                                  size_t *n_p);
/* The manifest text for entries e[0, n) of attempt tau; malloc'd, *len_p bytes;
 * NULL when out of memory. */
char *dcr__manifest_text(uint64_t tau, const dcr__ledger_entry_t *e, size_t n, size_t *len_p);
/* Bounds on a manifest, against a malformed one asking for unbounded memory. */
#define DCR__MANIFEST_MAX_BYTES   ((size_t)64 << 20)
#define DCR__MANIFEST_MAX_ENTRIES ((uint64_t)1 << 22)

/* ---- S3 helpers (objstore_s3_util.c), exposed for tests ---------------- */

extern const dcr_objstore_ops_t dcr__objstore_s3_ops;

/* MD5 of buf[0, len) (libcrypto): raw, and as 32 lowercase hex digits and a
 * NUL; false when libcrypto cannot compute it (no memory, no MD5 in its
 * providers). */
bool dcr__md5(const uint8_t *buf, size_t len, uint8_t out[16]);
bool dcr__md5_hex(const uint8_t *buf, size_t len, char out[33]);
/* The ETag S3 gives a multipart object: the MD5 of its parts' raw MD5s in
 * hex, '-', the number of parts; false as dcr__md5. */
bool dcr__md5_multipart_etag(const uint8_t (*parts)[16], size_t n, char *out, size_t cap);
/* One parsed ListObjectsV2 response page (expat). Keys are XML-unescaped and
 * bounded; DCR_ETRANSPORT on anything malformed (what and where). */
dcr_status_t dcr__s3_parse_list(const char *xml, size_t len, dcr_objstore_page_t *page);
/* The text of the first <tag>...</tag> in xml, unescaped, into out (cap
 * bytes); false when absent, not text, too long, or the document is
 * malformed before its end tag. */
bool dcr__s3_xml_text(const char *xml, size_t len, const char *tag, char *out, size_t cap);

#endif
