/* The folders a run works in: its temporary folder (/dev/shm/dcr-bench-*
 * with TMPDIR/dcr-bench-control-*, or TMPDIR/dcr-bench-*; TMPDIR/dcr-faults-*)
 * or a folder the user names (--workdir, --keep-payloads).
 *
 * A folder is dcr's only when it is empty or holds the marker file
 * DCR_WORKDIR_MARKER that dcr wrote there; anything else is refused with one
 * line, so a mistyped path never has its files replaced or removed. A
 * marker counts as dcr's only when it is a regular file owned by this user,
 * in a folder (never a symbolic link) owned by this user, and names that
 * folder's device and inode: a marker copied from another folder, written
 * by hand (or by a dcr before this format) or in another user's folder is
 * refused, and such folders are never swept. The marker records the run
 * using the folder (pid, the process's start time, the boot id): a folder
 * whose run is alive is refused, and one whose run died (killed, crashed,
 * or of an earlier boot; a pid since reused by another process counts as
 * dead) is emptied by the next run that uses it. Temporary folders with a
 * dead run's marker are removed by the next run that makes one under the
 * same TMPDIR. The checks keep dcr from taking a folder it did not make;
 * they are not a secret against the same user, who can remove the folder
 * anyway. */
#ifndef DCR_WORKLOADS_WORKDIR_H
#define DCR_WORKLOADS_WORKDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

#define DCR_WORKDIR_MARKER ".dcr-workdir"

typedef struct dcr_workdir {
    char path[4096];
    bool temp; /* a temporary folder this run made and removes */
} dcr_workdir_t;

/* Checks a folder the user named with `flag` without changing anything:
 * absent (its parent must accept it), or a real directory (not a symbolic
 * link) that is empty or holds dcr's marker of a run that is not alive.
 * DCR_EINVAL with one line naming the flag, the path and the reason. */
dcr_status_t dcr_workdir_check(const char *flag, const char *dir);

/* dir NULL: dcr_workdir_open_temp in TMPDIR (below). dir given: checks it as above, creates it when
 * missing, empties it when a dead run's marker is there, and writes this
 * run's marker. *w is filled on success. */
dcr_status_t dcr_workdir_open(const char *flag, const char *dir, const char *prefix,
                              dcr_workdir_t *w);

/* Removes dead runs' PARENT/PREFIX-* folders, creates a fresh one with the
 * marker and registers it for removal by a second stop signal
 * (workloads/harness/interrupt.h). parent NULL: dcr_workdir_tmpdir(). */
dcr_status_t dcr_workdir_open_temp(const char *parent, const char *prefix, dcr_workdir_t *w);

/* TMPDIR, or /tmp when it is unset or empty. */
const char *dcr_workdir_tmpdir(void);

/* Whether dir is on a memory-backed file system (tmpfs). */
bool dcr_workdir_is_memory(const char *dir);

/* A memory-backed parent for temporary folders: "/dev/shm" when it is a
 * tmpfs directory (not a link) this process may create in, with at least
 * need_bytes free; NULL otherwise. What a folder there holds is memory:
 * the caller sizes need_bytes for it. */
const char *dcr_workdir_memory_parent(uint64_t need_bytes);

/* Removes a temporary folder with everything in it; a user's folder stays,
 * its marker too, so the next run recognises it. Accepts a zeroed *w. */
void dcr_workdir_close(dcr_workdir_t *w);

/* Removes folders PARENT/PREFIX-* that hold a marker of a run that is not
 * alive. Returns how many it removed. */
int dcr_workdir_sweep(const char *parent, const char *prefix);

#endif
