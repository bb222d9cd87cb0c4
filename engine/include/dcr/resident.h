/* Resident weights that outlive their process (issue 19): a memory-mapped
 * file per receiver (under the run directory) holding every resident
 * parameter's bytes at the parameter set's arena offsets
 * (dcr_params_arena_bytes), behind a small durable header: the committed
 * version, the attempt tau being applied, a dirty mark, and the receiver's
 * parameter layout (names and sizes, hashed). The page cache keeps a
 * MAP_SHARED mapping's bytes when the process dies, SIGKILL included, so a
 * restarted process finds what its predecessor held.
 *
 * Two ways to use one:
 *   live (dcr_resident_attach): the receiver's parameters ARE the mapped
 *     bytes (dcr_params_place, no copy at commit). dcr_resident_begin sets
 *     the dirty mark (with tau) before an attempt's first write;
 *     dcr_resident_save at the attempt's commit (or after a verified
 *     repair) clears it, writing only the header. A process killed
 *     mid-apply leaves a file that says dirty, from version u, attempt tau:
 *     its bytes are a mixture of u and the attempt's writes, which only
 *     complete overwrite records can repair (deploy/restorer.h).
 *   copy (dcr_resident_save without attach): a copy of the bytes at each
 *     commit; the mark covers the copy (a process killed mid-copy leaves
 *     dirty with tau 0).
 * Crash consistency is the process's, not the machine's: nothing is synced
 * to disk. */
#ifndef DCR_RESIDENT_H
#define DCR_RESIDENT_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/receiver.h"
#include "dcr/status.h"

/* What a resident file says about its bytes. */
typedef enum dcr_resident_state {
    DCR_RESIDENT_ABSENT = 0,  /* no file, or one never saved */
    DCR_RESIDENT_DIRTY = 1,   /* an attempt (tau) or a copy was interrupted: of no version */
    DCR_RESIDENT_CLEAN = 2,   /* the bytes are exactly the saved version's */
    DCR_RESIDENT_FOREIGN = 3, /* another layout (a different receiver or model), or damaged */
} dcr_resident_state_t;

/* "absent", "dirty", "clean", "foreign". */
const char *dcr_resident_state_name(dcr_resident_state_t s);

typedef struct dcr_resident dcr_resident_t;

/* Opens (or creates, sized for r's parameters) the resident file at path
 * and maps it shared. identity names what the bytes belong to (e.g. the
 * receiver's slot: ranks of one layout have the same parameter names and
 * sizes); with the layout it must match for the file to read as clean. An
 * existing file of another size, layout or identity is kept as it is and
 * reads as DCR_RESIDENT_FOREIGN until the next save, which resizes it. r
 * must have data (not shape-only): DCR_EINVAL. DCR_EIO with the path and
 * the system's reason when the file cannot be opened, sized or mapped. */
dcr_status_t dcr_resident_open(const char *path, const dcr_receiver_t *r, uint64_t identity,
                               dcr_resident_t **out_p);
/* Unmaps and closes; the file stays. Accepts NULL. */
void dcr_resident_close(dcr_resident_t *f);

/* The file's state; *version_p (may be NULL) gets the committed version
 * when clean, and when dirty the version the interrupted attempt (or copy)
 * started from. A file sized by dcr_resident_attach but never committed
 * reads absent. */
dcr_resident_state_t dcr_resident_state(const dcr_resident_t *f, uint64_t *version_p);

/* Records that r holds version `version`, clean. Attached (live): only the
 * header changes (version, mark cleared): r's bytes are the file's. Not
 * attached: copies every resident byte of r in first, under the dirty mark.
 * r must be the receiver (same layout) the file was opened for, and the
 * attached one when some receiver is attached. Call while nothing applies
 * to r: at a commit, or after a restore checked against the oracle. */
dcr_status_t dcr_resident_save(dcr_resident_t *f, const dcr_receiver_t *r, uint64_t version);

/* Marks the file dirty (its bytes belong to no version), as a save does
 * before its first byte: for a harness that plays an interrupted save. The
 * next save clears it. A file never saved stays absent. */
void dcr_resident_mark_dirty(dcr_resident_t *f);

/* Copies the file's bytes into r's resident parameters (nothing to copy when
 * r is attached); DCR_EINVAL unless the file is clean. The caller checks
 * the result (digests against an oracle) before it serves from r. */
dcr_status_t dcr_resident_load(const dcr_resident_t *f, dcr_receiver_t *r);

/* The allocation hook at work: r's parameters move into the mapping and
 * live there from now on. With adopt, a file that is clean or dirty for
 * this layout is taken as it is (r now holds the file's bytes, of its
 * version, or of no version when dirty: never serve from it before a
 * restore); otherwise (or without adopt: r holds what it should keep, e.g.
 * after a dense refit) the file is sized and r's current bytes are copied
 * in, and it reads absent until the next save. *found_p (may be NULL) gets the state found. One
 * receiver per file, whose parameters were never placed (DCR_EINVAL). The
 * file must stay open while r lives: close it only after destroying r (or
 * dcr_resident_detach, for a caller that destroys r first). */
dcr_status_t dcr_resident_attach(dcr_resident_t *f, dcr_receiver_t *r, bool adopt,
                                 dcr_resident_state_t *found_p);
/* Forgets that r is attached (r was destroyed, or is about to be). */
void dcr_resident_detach(dcr_resident_t *f, const dcr_receiver_t *r);
/* Whether r's parameters live in f's mapping. */
bool dcr_resident_attached(const dcr_resident_t *f, const dcr_receiver_t *r);

/* Before the first write of attempt tau into the attached receiver: records
 * tau, then sets the dirty mark (a kill between the two leaves a clean file
 * with no writes). Cleared by the next dcr_resident_save. DCR_EINVAL when
 * no receiver is attached. */
dcr_status_t dcr_resident_begin(dcr_resident_t *f, uint64_t tau);
/* The attempt the header names (the last dcr_resident_begin), 0 for none. */
uint64_t dcr_resident_tau(const dcr_resident_t *f);

/* Bytes of parameter data the file holds (dcr_params_arena_bytes of the
 * receiver's parameters). */
uint64_t dcr_resident_bytes(const dcr_resident_t *f);

#endif
