/* Loading the payload key that owners sign with and receivers verify with
 * (FORMAT.md section 1.1). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec-internal.h"

dcr_status_t dcr_payload_key_load(const char *path, dcr_payload_key_t *out_p, bool *shared_p)
{
    if (path == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "dcr_payload_key_load: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return dcr_error_set(DCR_EIO, "payload key %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dcr_error_set(DCR_EIO, "payload key %s: cannot stat: %s", path, strerror(e));
    }
    /* One byte more than a key tells a long file from a key without reading
     * all of it (a device or a pipe has no size to ask for). */
    uint8_t buf[DCR_CODEC_KEY_SIZE + 1];
    size_t got = 0;
    while (got < sizeof buf) {
        ssize_t n = read(fd, buf + got, sizeof buf - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return dcr_error_set(DCR_EIO, "payload key %s: read failed: %s", path, strerror(e));
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (got != DCR_CODEC_KEY_SIZE) {
        memset(buf, 0, sizeof buf);
        if (S_ISREG(st.st_mode))
            return dcr_error_set(DCR_EINVAL,
                                 "payload key %s: %lld bytes, expected exactly %d (a raw binary "
                                 "key, e.g. head -c %d /dev/urandom)",
                                 path, (long long)st.st_size, DCR_CODEC_KEY_SIZE,
                                 DCR_CODEC_KEY_SIZE);
        if (got > DCR_CODEC_KEY_SIZE)
            return dcr_error_set(DCR_EINVAL,
                                 "payload key %s: more than %d bytes, expected exactly %d", path,
                                 DCR_CODEC_KEY_SIZE, DCR_CODEC_KEY_SIZE);
        return dcr_error_set(DCR_EINVAL, "payload key %s: %zu bytes, expected exactly %d", path,
                             got, DCR_CODEC_KEY_SIZE);
    }
    dcr_payload_key_t k = {.set = true};
    memcpy(k.bytes, buf, DCR_CODEC_KEY_SIZE);
    memset(buf, 0, sizeof buf);
    if (shared_p) *shared_p = (st.st_mode & (S_IRGRP | S_IROTH)) != 0;
    *out_p = k;
    return DCR_OK;
}
