/* The one output-path rule for every file dcr writes.
 *
 * A path a user hands dcr for output (a trace, a results file, a calibration,
 * a report folder) must never harm what it points at. The rule:
 *   - the final component is either a new name or a regular file; a device
 *     node, FIFO, socket, directory or symbolic link is refused with one line
 *     (a symlink is never followed: lstat, O_NOFOLLOW, *at calls on the
 *     parent's descriptor);
 *   - the parent directory is checked for writability before the run starts
 *     (dcr_outpath_check), by creating and removing a probe file there;
 *   - the content goes to a temporary file in the same directory (O_EXCL,
 *     mode 0644 less the umask), which is renamed over the target only when
 *     the target is still absent or a regular file.
 * Temporary names carry the writer's pid (".NAME.dcr-tmp-PID-XXXXXX",
 * ".dcr-stage-PID-XXXXXX"), so that the next writer into the same folder
 * removes those left by a killed process.
 *
 * This lives in engine/core because the engine's own writers (the object
 * store directory) must follow the same rule, and the engine may depend on
 * nothing outside engine/. */
#ifndef DCR_OUTPATH_H
#define DCR_OUTPATH_H

#include <stdbool.h>
#include <stddef.h>

#include "dcr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks that `path` may be written under the rule: its final component is
 * absent or a regular file, and its folder exists and accepts a new file.
 * `what` names the flag or role in the error line ("--out"). DCR_EINVAL for
 * a target of the wrong kind, DCR_EIO (with the path and strerror) for a
 * folder that is missing or not writable. Writes nothing that stays. */
dcr_status_t dcr_outpath_check(const char *what, const char *path);

/* Checks that `dir` may receive output files: an existing directory (not
 * a symbolic link, not even one to a directory: the files written inside
 * would replace its target's) that accepts a new file, or a new name whose
 * parent does. DCR_EINVAL for a link or a non-directory. */
dcr_status_t dcr_outdir_check(const char *what, const char *dir);

/* An output file being written: a temporary file beside the target. */
typedef struct dcr_outfile dcr_outfile_t;

/* Start from a copy of the target's current content (append-style writers
 * such as the HDF5 results file); without it the temporary file is empty. */
#define DCR_OUTFILE_KEEP 1u

/* Checks `path` as dcr_outpath_check does, removes temporary files that dead
 * writers left for the same name, and creates the temporary file. The caller
 * writes through dcr_outfile_fd or dcr_outfile_tmp_path, then calls exactly
 * one of commit or abort, which free *out_p. */
dcr_status_t dcr_outfile_open(const char *what, const char *path, unsigned flags,
                              dcr_outfile_t **out_p);

/* The temporary file's descriptor (open for writing, owned by the handle:
 * do not close it; fdopen a dup() for stdio). */
int dcr_outfile_fd(const dcr_outfile_t *f);

/* The temporary file's path, for libraries that open files by name (HDF5).
 * Valid until commit or abort. */
const char *dcr_outfile_tmp_path(const dcr_outfile_t *f);

/* Flushes the temporary file and renames it over the target, which must
 * still be absent or a regular file (checked again; a target that appeared
 * meanwhile as anything else is refused and left alone). On failure the
 * temporary file is removed. Frees f either way. */
dcr_status_t dcr_outfile_commit(dcr_outfile_t *f);

/* Removes the temporary file and frees f. Accepts NULL. */
void dcr_outfile_abort(dcr_outfile_t *f);

/* Writes len bytes to path under the rule (open, write, commit). */
dcr_status_t dcr_outpath_write(const char *what, const char *path, const void *buf, size_t len);

/* An output folder being written: files are produced in a staging folder
 * inside it and moved in only when all of them are ready, so a failed run
 * leaves none of its files behind. */
typedef struct dcr_outdir dcr_outdir_t;

/* Creates `dir` when missing (mode 0755 less the umask), removes staging
 * folders of dead writers, and creates a fresh staging folder inside. */
dcr_status_t dcr_outdir_open(const char *what, const char *dir, dcr_outdir_t **out_p);

/* The staging folder's path: write every output under it (subfolders too).
 * Valid until commit or abort. */
const char *dcr_outdir_stage(const dcr_outdir_t *d);

/* Moves every file of the staging folder to the same relative name in the
 * output folder. Checks every target first (absent or a regular file;
 * subfolders absent or real directories) and moves nothing when one fails.
 * Removes the staging folder and frees d either way. */
dcr_status_t dcr_outdir_commit(dcr_outdir_t *d);

/* Removes the staging folder with everything in it and frees d. Accepts NULL. */
void dcr_outdir_abort(dcr_outdir_t *d);

/* Removes path and, when it is a directory, everything under it, without
 * following any symbolic link (a link is removed, never its target). Only
 * system calls, no allocation: safe to call from a signal handler. Returns
 * 0, or -1 with errno set on the first failure (removal continues). */
int dcr_outpath_remove_tree(const char *path);

/* Removes entries of folder `dir` named PREFIX + "PID-..." (a temporary file
 * or folder of an earlier writer) whose pid is not a live process. Returns
 * how many it removed. */
int dcr_outpath_sweep(const char *dir, const char *prefix);

/* Whether process `pid` is alive (kill(pid, 0) does not fail with ESRCH). */
bool dcr_outpath_pid_alive(long pid);

#ifdef __cplusplus
}
#endif
#endif
