/* dcr payload inspect|verify FILE: a payload's header and items, or just its
 * validity. The file is read in two bounded steps (the header, then exactly
 * the body length it declares once the header passed its limits), so a
 * device, a pipe or a huge sparse file costs at most one header read and a
 * declared body is never allocated beyond --max-raw. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "dcr/codec.h"
#include "scenario_args.h"

/* Default --max-raw: 1 GiB of decompressed body, well above the payloads
 * dcr's own buckets produce at the default targets, and a bound a reader on
 * a small machine can afford. */
#define PAYLOAD_MAX_RAW_DEFAULT ((int64_t)1 << 30)

/* Reads up to n bytes; returns how many were read before end of file. */
static size_t read_upto(FILE *f, unsigned char *dst, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t k = fread(dst + got, 1, n - got, f);
        if (k == 0) break;
        got += k;
    }
    return got;
}

static dcr_status_t read_payload(const char *path, const dcr_payload_policy_t *pol,
                                 unsigned char **buf_p, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) return dcr_error_set(DCR_EIO, "cannot open %s: %s", path, strerror(errno));
    unsigned char hdr[DCR_CODEC_HEADER_SIZE], extra;
    unsigned char *buf = NULL;
    dcr_payload_header_t h;
    dcr_status_t st = DCR_OK;
    size_t body = 0, got = read_upto(f, hdr, sizeof hdr);
    if (ferror(f)) {
        st = dcr_error_set(DCR_EIO, "reading %s failed: %s", path, strerror(errno));
        goto done;
    }
    /* Rules 1-3 bound the body: compressed length <= ZSTD_COMPRESSBOUND(raw
     * length) and raw length <= --max-raw. */
    st = dcr_payload_header_parse(hdr, got, pol, &h);
    if (st != DCR_OK) goto done;
    body = (size_t)h.compressed_len;
    buf = malloc(sizeof hdr + body);
    if (!buf) {
        st = dcr_error_set(DCR_ENOMEM, "%zu bytes for the payload", sizeof hdr + body);
        goto done;
    }
    memcpy(buf, hdr, sizeof hdr);
    got = read_upto(f, buf + sizeof hdr, body);
    if (ferror(f))
        st = dcr_error_set(DCR_EIO, "reading %s failed: %s", path, strerror(errno));
    else if (got < body)
        st = dcr_error_set(DCR_EPAYLOAD,
                           "file ends after %zu body bytes, header declares a compressed body "
                           "of %zu",
                           got, body);
    else if (read_upto(f, &extra, 1) != 0)
        st = dcr_error_set(DCR_EPAYLOAD,
                           "bytes follow the %zu-byte compressed body the header declares", body);
done:
    fclose(f);
    if (st != DCR_OK) {
        free(buf);
        return st;
    }
    *buf_p = buf;
    *len_p = sizeof hdr + body;
    return DCR_OK;
}

static void print_payload(const char *path, const dcr_payload_t *p, size_t len)
{
    const dcr_payload_header_t *h = dcr_payload_get_header(p);
    printf("%s: %zu bytes, format %u, flags 0x%04x%s%s\n", path, len, h->version, h->flags,
           h->flags & DCR_CODEC_FLAG_SHUFFLE ? " (shuffled)" : "",
           h->flags & DCR_CODEC_FLAG_KEYED ? " (keyed)" : "");
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
    const char *key_path = NULL;
    int64_t max_raw = PAYLOAD_MAX_RAW_DEFAULT;
    dcr_arg_t args[] = {
        {"--payload-key", DCR_ARG_STRING, &key_path, 0, 0,
         "verify keyed payloads with the 32-byte key in FILE (unkeyed ones are then refused)",
         false},
        {"--max-raw", DCR_ARG_INT, &max_raw, 24, (double)DCR_CODEC_RAW_MAX,
         "largest decompressed body to accept, in bytes (default 1 GiB)", false},
    };
    int rc = dcr_args_parse("payload", "inspect|verify FILE [--payload-key FILE] [--max-raw N]",
                            args, 2, argc, argv, pos, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (npos != 2 || (strcmp(pos[0], "inspect") && strcmp(pos[0], "verify"))) {
        fprintf(stderr, "dcr payload: expected 'inspect FILE' or 'verify FILE'\n");
        return 2;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    dcr_payload_t *p = NULL;
    dcr_payload_key_t key;
    dcr_status_t s = dcr_cli_payload_key("payload", key_path, &key);
    if (s != DCR_OK) {
        dcr_cli_report("payload", s);
        return 1;
    }
    dcr_payload_policy_t pol = {.key = &key, .max_raw = (uint64_t)max_raw};
    DCR_CHECK_GOTO(read_payload(pos[1], &pol, &buf, &len), s, fail);
    DCR_CHECK_GOTO(dcr_payload_create(&p), s, fail);
    DCR_CHECK_GOTO(dcr_payload_decode_with(p, buf, len, &pol), s, fail);
    if (!strcmp(pos[0], "inspect"))
        print_payload(pos[1], p, len);
    else
        printf("%s: valid payload, %zu items%s\n", pos[1], dcr_payload_item_count(p),
               key.set ? ", signed with the payload key" : "");
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
