/* The one checked way to open an input file (see input_file.h). */
#include "workloads/model/input_file.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dcr__input_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

static dcr_status_t dcr__input_open_as(const char *path, const char *what, bool devices,
                                       uint64_t max_bytes, int *fd_p, uint64_t *size_p)
{
    if (what == NULL) what = "input";
    if (path == NULL || path[0] == '\0' || fd_p == NULL)
        return dcr_error_set(DCR_EINVAL, "%s: no file named", what);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer; O_NOCTTY: a terminal named by mistake never becomes ours. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return dcr_error_set(e == ENOENT || e == ENOTDIR ? DCR_ENOTFOUND : DCR_EIO,
                             "%s %s: cannot open: %s", what, path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dcr_error_set(DCR_EIO, "%s %s: cannot stat: %s", what, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) && !(devices && S_ISCHR(st.st_mode))) {
        close(fd);
        return dcr_error_set(DCR_EINVAL, "%s %s: %s, expected a regular file", what, path,
                             dcr__input_kind(st.st_mode));
    }
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
        close(fd);
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: %lld bytes, more than the %llu this reader accepts", what,
                             path, (long long)st.st_size, (unsigned long long)max_bytes);
    }
    /* Back to blocking reads: a regular file never waits, and callers that
     * hand the descriptor on expect ordinary semantics. */
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *fd_p = fd;
    if (size_p != NULL) *size_p = (uint64_t)st.st_size;
    return DCR_OK;
}

dcr_status_t dcr_input_open(const char *path, const char *what, uint64_t max_bytes, int *fd_p,
                            uint64_t *size_p)
{
    return dcr__input_open_as(path, what, false, max_bytes, fd_p, size_p);
}

dcr_status_t dcr_input_open_stream(const char *path, const char *what, int *fd_p)
{
    return dcr__input_open_as(path, what, true, UINT64_MAX, fd_p, NULL);
}

dcr_status_t dcr_input_read(const char *path, const char *what, size_t max_bytes, char **text_p,
                            size_t *len_p)
{
    if (what == NULL) what = "input";
    if (text_p == NULL) return dcr_error_set(DCR_EINVAL, "%s: NULL argument", what);
    int fd = -1;
    uint64_t size = 0;
    DCR_CHECK(dcr_input_open(path, what, max_bytes, &fd, &size));
    /* Sized by the file, not by the bound: a 600-byte config costs 600
     * bytes. One byte more than the size tells a file that grew. */
    size_t cap = (size_t)size + 1;
    char *text = malloc(cap + 1);
    if (text == NULL) {
        close(fd);
        return dcr_error_set(DCR_ENOMEM, "%s %s: out of memory for %zu bytes", what, path, cap);
    }
    size_t got = 0;
    dcr_status_t st = DCR_OK;
    while (got < cap) {
        ssize_t n = read(fd, text + got, cap - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = dcr_error_set(DCR_EIO, "%s %s: read failed: %s", what, path, strerror(errno));
            break;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (st == DCR_OK && (got > size || got > max_bytes))
        st = dcr_error_set(DCR_EINVAL, "%s %s: grew while read (more than %llu bytes)", what, path,
                           (unsigned long long)size);
    if (st != DCR_OK) {
        free(text);
        return st;
    }
    text[got] = '\0';
    *text_p = text;
    if (len_p != NULL) *len_p = got;
    return DCR_OK;
}
