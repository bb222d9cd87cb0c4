/* Resident weights that outlive their process (issue 19, first increment):
 * a memory-mapped file per receiver (under the run directory) holding a copy
 * of every resident parameter's bytes, in the loader's declaration order,
 * behind a small header: the committed version the bytes hold, a dirty mark
 * and the receiver's parameter layout (names and sizes, hashed). The page
 * cache keeps a MAP_SHARED mapping's bytes when the process dies, SIGKILL
 * included, so a restarted process finds what its predecessor saved.
 *
 * This increment saves a copy at each commit (dcr_resident_save): the dirty
 * mark covers that copy (set before its first byte, cleared after its last,
 * so a process killed mid-copy leaves a file that says "dirty"). A receiver
 * killed mid-apply therefore restarts from the last committed copy, clean
 * and behind. Keeping the live parameters themselves in the mapping (no copy;
 * the dirty mark set before an attempt's first write) needs an allocation
 * hook in the parameter set (engine/loader/params.c): a later increment. */
#ifndef DCR_RESIDENT_H
#define DCR_RESIDENT_H

#include <stdbool.h>
#include <stdint.h>

#include "dcr/receiver.h"
#include "dcr/status.h"

/* What a resident file says about its bytes. */
typedef enum dcr_resident_state {
    DCR_RESIDENT_ABSENT = 0,  /* no file, or one never saved */
    DCR_RESIDENT_DIRTY = 1,   /* a save was interrupted: the bytes are of no version */
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

/* The file's state; *version_p (may be NULL) gets the saved version when
 * clean. */
dcr_resident_state_t dcr_resident_state(const dcr_resident_t *f, uint64_t *version_p);

/* Copies every resident byte of r into the file as version `version`:
 * dirty mark, bytes, version, mark cleared. r must be the receiver (same
 * layout) the file was opened for. Call while nothing applies to r. */
dcr_status_t dcr_resident_save(dcr_resident_t *f, const dcr_receiver_t *r, uint64_t version);

/* Marks the file dirty (its bytes belong to no version), as a save does
 * before its first byte: for a caller about to change the bytes in place,
 * and for a harness that plays an interrupted save. The next save clears
 * it. A file never saved stays absent. */
void dcr_resident_mark_dirty(dcr_resident_t *f);

/* Copies the file's bytes into r's resident parameters; DCR_EINVAL unless
 * the file is clean. The caller checks the result (digests against an
 * oracle) before it serves from r. */
dcr_status_t dcr_resident_load(const dcr_resident_t *f, dcr_receiver_t *r);

/* Bytes of parameter data the file holds (the receiver's resident bytes). */
uint64_t dcr_resident_bytes(const dcr_resident_t *f);

#endif
