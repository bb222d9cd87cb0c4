/* Loading the payload key that owners sign with and receivers verify with
 * (FORMAT.md section 1.1). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec-internal.h"

static const char *dcr__key_kind(mode_t m)
{
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* Opens the key without blocking (a FIFO with no writer would hold the
 * caller forever) and accepts only a regular file: a key has a size, and
 * a device or a pipe named by mistake is refused at once. */
static dcr_status_t dcr__key_open(const char *path, int *fd_p, struct stat *st_p)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        return dcr_error_set(e == ENOENT || e == ENOTDIR ? DCR_ENOTFOUND : DCR_EIO,
                             "payload key %s: cannot open: %s", path, strerror(e));
    }
    if (fstat(fd, st_p) != 0) {
        int e = errno;
        close(fd);
        return dcr_error_set(DCR_EIO, "payload key %s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st_p->st_mode)) {
        close(fd);
        return dcr_error_set(DCR_EINVAL,
                             "payload key %s: %s, expected a regular file of exactly %d bytes",
                             path, dcr__key_kind(st_p->st_mode), DCR_CODEC_KEY_SIZE);
    }
    if (st_p->st_size != DCR_CODEC_KEY_SIZE) {
        close(fd);
        return dcr_error_set(DCR_EINVAL,
                             "payload key %s: %lld bytes, expected exactly %d (a raw binary "
                             "key, e.g. head -c %d /dev/urandom)",
                             path, (long long)st_p->st_size, DCR_CODEC_KEY_SIZE,
                             DCR_CODEC_KEY_SIZE);
    }
    *fd_p = fd;
    return DCR_OK;
}

dcr_status_t dcr_payload_key_load(const char *path, dcr_payload_key_t *out_p, bool *shared_p)
{
    if (path == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "dcr_payload_key_load: NULL argument");
    int fd = -1;
    struct stat st;
    DCR_CHECK(dcr__key_open(path, &fd, &st));
    /* One byte more than a key tells a file that grew since fstat. */
    uint8_t buf[DCR_CODEC_KEY_SIZE + 1];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t n = read(fd, buf + got, sizeof buf - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            memset(buf, 0, sizeof buf);
            return dcr_error_set(DCR_EIO, "payload key %s: read failed: %s", path, strerror(e));
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (got != DCR_CODEC_KEY_SIZE) {
        memset(buf, 0, sizeof buf);
        return dcr_error_set(DCR_EINVAL,
                             "payload key %s: changed while read (%s%zu bytes), "
                             "expected exactly %d",
                             path, got > DCR_CODEC_KEY_SIZE ? "more than " : "",
                             got > DCR_CODEC_KEY_SIZE ? (size_t)DCR_CODEC_KEY_SIZE : got,
                             DCR_CODEC_KEY_SIZE);
    }
    dcr_payload_key_t k = {.set = true};
    memcpy(k.bytes, buf, DCR_CODEC_KEY_SIZE);
    memset(buf, 0, sizeof buf);
    if (shared_p) *shared_p = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
    *out_p = k;
    return DCR_OK;
}
