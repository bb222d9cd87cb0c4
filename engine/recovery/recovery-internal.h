/* Shared by the files of engine/recovery: the line readers of the
 * retained-version and anchor manifests (retain.c) and the relay root's
 * reader bound (relay_retain.c). Not public; tests may include it. */
#ifndef DCR_RECOVERY_INTERNAL_H
#define DCR_RECOVERY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/recovery.h"
#include "transport/objstore-internal.h"

/* ---- the retained-version and anchor manifests' lines (retain.c) ---------- */
/* Both manifests (dcr/recovery.h) list "<keyword> <name>
 * <bytes> <64 hex digits>" lines under the same rules. */
struct dcr_retain_entry;
/* digest (DCR_RETAIN_DIGEST_BYTES) as lowercase hex into hex (2x + 1). */
void dcr__retain_hex(const uint8_t *digest, char *hex);
/* "<lit><decimal>\n" */
bool dcr__retain_cur_field(dcr__cursor_t *c, const char *lit, uint64_t *v);
/* A name: a key component of [A-Za-z0-9._-] of at most DCR_RETAIN_NAME_MAX
 * bytes, not starting with '.', not `reserved` (the manifest's own name);
 * into out (DCR_RETAIN_NAME_MAX + 1). */
bool dcr__retain_cur_name(dcr__cursor_t *c, const char *reserved, char *out);
/* n entry lines "<keyword> <name> <bytes> <hex digest>\n", names unique; on
 * failure c is left at the start of the line that failed. */
bool dcr__retain_cur_entries(dcr__cursor_t *c, const char *keyword, const char *reserved,
                             struct dcr_retain_entry *entries, uint64_t n);
/* The 1-based line number of c->p in text, for error lines. */
size_t dcr__text_line_of(const char *text, const dcr__cursor_t *c);

/* Readers a relay root's retention serves at once (relay_retain.c); one
 * more is refused with DCR_EAGAIN at its hello (the relay:// store tries
 * again until its timeout). */
#define DCR__RELAY_RETAIN_READERS 16

#endif
