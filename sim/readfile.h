/* Input files of the simulator (calibrations, cluster descriptions, SimGrid
 * platforms) are opened one way: without blocking, and refused unless they
 * are regular files. A FIFO, a device or a directory named by a flag would
 * otherwise hang the command or feed it endless bytes. */
#ifndef DCR_SIM_READFILE_H
#define DCR_SIM_READFILE_H

#include <stddef.h>

#include "dcr/status.h"

/* Checks that `path` names a readable regular file (opened with O_NONBLOCK
 * and checked with fstat, so a FIFO never blocks). `what` names it in the
 * one-line error ("calibration", "--platform"); every failure is DCR_EINVAL
 * (the path is bad input). */
dcr_status_t dcr_sim_check_regular(const char *what, const char *path);

/* Reads a regular file of at most `max` bytes into a NUL-terminated,
 * malloc'd buffer (the caller frees). Same checks as above. */
dcr_status_t dcr_sim_read_regular(const char *what, const char *path, size_t max, char **text_p);

#endif
