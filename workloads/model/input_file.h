/* Opening and reading the files a user names as input: a model config, a
 * checkpoint's shard index, a change profile. Every such reader goes through
 * these two functions, so every one refuses the same things the same way:
 *  - anything but a regular file where the format needs a file (a FIFO, a
 *    character or block device, a socket, a directory): DCR_EINVAL;
 *  - a missing file: DCR_ENOTFOUND;
 *  - a file larger than the reader's bound: DCR_EINVAL, before any buffer
 *    of that size is allocated.
 * The open is non-blocking, so a FIFO with no writer is refused at once
 * instead of holding the caller (and the signal handling of a command that
 * waits for it at its next safe point) forever. Symbolic links are followed:
 * inputs are read, never written, and model folders (a Hugging Face cache)
 * are made of links. Error details name `what` and the path. */
#ifndef DCR_WORKLOADS_INPUT_FILE_H
#define DCR_WORKLOADS_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "dcr/status.h"

/* Opens path read-only after the checks above; on DCR_OK *fd_p is an open
 * descriptor the caller closes (in blocking mode again) and *size_p the
 * file's size in bytes. size_p may be NULL. */
dcr_status_t dcr_input_open(const char *path, const char *what, uint64_t max_bytes, int *fd_p,
                            uint64_t *size_p);

/* For a format read as a stream with bounds of its own (a payload: a
 * header, then the body it declares): like dcr_input_open, but a character
 * device is accepted too (`payload verify /dev/zero` reads one header and
 * refuses it). A FIFO, a socket and a directory are still refused: a FIFO
 * with no writer would block the open forever. No size bound. */
dcr_status_t dcr_input_open_stream(const char *path, const char *what, int *fd_p);

/* Reads a whole file of at most max_bytes into a NUL-terminated buffer the
 * caller frees; *len_p (may be NULL) gets its length. A file that grows past
 * max_bytes while it is read is refused too. */
dcr_status_t dcr_input_read(const char *path, const char *what, size_t max_bytes, char **text_p,
                            size_t *len_p);

#endif
