/* dcr payload inspect|verify FILE: a payload's header and items, or just its validity. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/codec.h"

static dcr_status_t read_file(const char *path, unsigned char **buf_p, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dcr_error_set(DCR_EIO, "cannot open %s: %s", path, strerror(errno));
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *p = realloc(buf, cap);
            if (!p) {
                free(buf);
                fclose(f);
                return dcr_error_set(DCR_ENOMEM, "reading %s", path);
            }
            buf = p;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return dcr_error_set(DCR_EIO, "reading %s failed: %s", path, strerror(errno));
    }
    *buf_p = buf;
    *len_p = len;
    return DCR_OK;
}

static void print_payload(const char *path, const dcr_payload_t *p, size_t len)
{
    const dcr_payload_header_t *h = dcr_payload_get_header(p);
    printf("%s: %zu bytes, format %u, flags 0x%04x%s\n", path, len, h->version, h->flags,
           h->flags & DCR_CODEC_FLAG_SHUFFLE ? " (shuffled)" : "");
    printf("attempt %llu, owner %u, payload %llu, %u items, body %llu raw / %llu compressed "
           "bytes\ndigest ",
           (unsigned long long)h->tau, h->owner, (unsigned long long)h->payload_id, h->item_count,
           (unsigned long long)h->raw_len, (unsigned long long)h->compressed_len);
    for (int i = 0; i < 16; i++) printf("%02x", h->digest[i]);
    printf("\n\n%-64s %-20s %-8s %-9s %-10s %10s %12s %12s\n", "tensor", "shape", "dtype",
           "encoding", "locations", "values", "first", "last");
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_payload_item_t it;
        if (dcr_payload_item(p, i, &it) != DCR_OK) continue;
        char shape[96], loc[16];
        dcr_shape_format(it.ndim, it.shape, shape, sizeof(shape));
        if (it.location == DCR_LOCATION_RUN)
            snprintf(loc, sizeof(loc), "run");
        else
            snprintf(loc, sizeof(loc), "gaps u%u", 8 * it.gap_bytes);
        /* Item names come from the file: printed escaped. */
        char name[1024];
        printf("%-64s %-20s %-8s %-9s %-10s %10zu %12lld %12lld\n",
               dcr_escape(name, sizeof(name), it.name), shape, dcr_dtype_name(it.dtype),
               dcr_encoding_name(it.encoding), loc, it.count, (long long)it.first,
               (long long)it.last);
    }
}

int dcr_cmd_payload(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0;
    dcr_arg_t none[1];
    int rc = dcr_args_parse("payload", "inspect|verify FILE", none, 0, argc, argv, pos, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 2 || (strcmp(pos[0], "inspect") && strcmp(pos[0], "verify"))) {
        fprintf(stderr, "dcr payload: expected 'inspect FILE' or 'verify FILE'\n");
        return 2;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    dcr_payload_t *p = NULL;
    dcr_status_t s;
    DCR_CHECK_GOTO(read_file(pos[1], &buf, &len), s, fail);
    DCR_CHECK_GOTO(dcr_payload_create(&p), s, fail);
    DCR_CHECK_GOTO(dcr_payload_decode(p, buf, len), s, fail);
    if (!strcmp(pos[0], "inspect"))
        print_payload(pos[1], p, len);
    else
        printf("%s: valid payload, %zu items\n", pos[1], dcr_payload_item_count(p));
    dcr_payload_destroy(p);
    free(buf);
    return 0;
fail:
    char safe[1024];
    fprintf(stderr, "dcr payload: %s: %s\n", dcr_escape(safe, sizeof(safe), pos[1]),
            dcr_error_line(s));
    dcr_payload_destroy(p);
    free(buf);
    return 1;
}
