/* Non-blocking, regular-only reads of the simulator's input files. */
#include "sim/readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens path without blocking and without following it into a non-regular
 * file; *fd_p is open on success and -1 otherwise (so the compiler, which
 * cannot see that an error status is never DCR_OK, sees it set). */
static dcr_status_t dcr__open_regular(const char *what, const char *path, int *fd_p,
                                      struct stat *st_p)
{
    *fd_p = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return dcr_error_set(DCR_EIO, "%s %s: %s", what, path, strerror(errno));
    if (fstat(fd, st_p) != 0 || !S_ISREG(st_p->st_mode)) {
        close(fd);
        return dcr_error_set(DCR_EINVAL, "%s %s: not a regular file", what, path);
    }
    *fd_p = fd;
    return DCR_OK;
}

dcr_status_t dcr_sim_check_regular(const char *what, const char *path)
{
    int fd = -1;
    struct stat st;
    dcr_status_t s = dcr__open_regular(what, path, &fd, &st);
    /* A path a flag names that cannot be opened is bad input, like a bad
     * flag value (exit 2), whatever errno said. */
    if (s != DCR_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", dcr_error_detail());
        return dcr_error_set(DCR_EINVAL, "%s", why);
    }
    close(fd);
    return DCR_OK;
}

dcr_status_t dcr_sim_read_regular(const char *what, const char *path, size_t max, char **text_p)
{
    int fd = -1;
    struct stat st;
    DCR_CHECK(dcr__open_regular(what, path, &fd, &st));
    if ((size_t)st.st_size > max) {
        close(fd);
        return dcr_error_set(DCR_EPARSE, "%s %s: larger than %zu bytes", what, path, max);
    }
    char *text = malloc(max + 1);
    if (!text) {
        close(fd);
        return dcr_error_set(DCR_ENOMEM, "%s %s", what, path);
    }
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, text + got, max + 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || (got += (size_t)n) > max) {
            bool bad = n < 0 || got > max;
            int err = errno;
            if (!bad) break;
            close(fd);
            free(text);
            return dcr_error_set(DCR_EPARSE, "%s %s: %s", what, path,
                                 n < 0 ? strerror(err) : "grew past its limit while read");
        }
    }
    close(fd);
    text[got] = '\0';
    *text_p = text;
    return DCR_OK;
}
