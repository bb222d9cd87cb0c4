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
/* The manifest text for entries e[0, n) of attempt tau; malloc'd, *len_p bytes;
 * NULL when out of memory. */
char *dcr__manifest_text(uint64_t tau, const dcr__ledger_entry_t *e, size_t n, size_t *len_p);
/* Bounds on a manifest, against a malformed one asking for unbounded memory. */
#define DCR__MANIFEST_MAX_BYTES   ((size_t)64 << 20)
#define DCR__MANIFEST_MAX_ENTRIES ((uint64_t)1 << 22)

/* ---- S3 helpers (objstore_s3_util.c), exposed for tests ---------------- */

extern const dcr_objstore_ops_t dcr__objstore_s3_ops;

/* MD5 of buf[0, len): raw, and as 32 lowercase hex digits and a NUL. */
void dcr__md5(const uint8_t *buf, size_t len, uint8_t out[16]);
void dcr__md5_hex(const uint8_t *buf, size_t len, char out[33]);
/* The ETag S3 gives a multipart object: the MD5 of its parts' raw MD5s in
 * hex, '-', the number of parts. */
void dcr__md5_multipart_etag(const uint8_t (*parts)[16], size_t n, char *out, size_t cap);
/* One parsed ListObjectsV2 response page. Keys are XML-unescaped and bounded;
 * DCR_ETRANSPORT on anything malformed (what and where). */
dcr_status_t dcr__s3_parse_list(const char *xml, size_t len, dcr_objstore_page_t *page);
/* The text of the first <tag>...</tag> in xml, unescaped, into out (cap
 * bytes); false when absent, malformed or too long. */
bool dcr__s3_xml_text(const char *xml, size_t len, const char *tag, char *out, size_t cap);

#endif
