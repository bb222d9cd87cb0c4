/* dcr payload inspect|verify FILE: a payload's header and items, or just its
 * validity. The file is read in two bounded steps (the header, then exactly
 * the body length it declares once the header passed its limits), so a
 * device, a pipe or a huge sparse file costs at most one header read and a
 * declared body is never allocated beyond --max-raw. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "dcr/codec.h"
#include "scenario_args.h"
#include "workloads/model/input_file.h"

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
    /* The one checked open: a FIFO with no writer is refused at once (no
     * open blocks), as is a directory; a device is read as a stream. */
    int fd = -1;
    DCR_CHECK(dcr_input_open_stream(path, "payload", &fd));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return dcr_error_set(DCR_EIO, "cannot read %s: %s", path, strerror(errno));
    }
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
    printf("\n\n%-64s %-20s %-8s %-9s %-10s %-7s %10s %12s %12s\n", "tensor", "shape", "dtype",
           "encoding", "locations", "coding", "values", "first", "last");
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_payload_item_t it;
        if (dcr_payload_item(p, i, &it) != DCR_OK) continue;
        char shape[96], loc[16];
        dcr_shape_format(it.ndim, it.shape, shape, sizeof(shape));
        if (it.location == DCR_LOCATION_RUN)
            snprintf(loc, sizeof(loc), "run");
        else if (it.location == DCR_LOCATION_RICE)
            snprintf(loc, sizeof(loc), "rice k%u", it.rice_k);
        else
            snprintf(loc, sizeof(loc), "gaps u%u", 8 * it.gap_bytes);
        /* Item names come from the file: printed escaped. */
        char name[1024];
        printf("%-64s %-20s %-8s %-9s %-10s %-7s %10zu %12lld %12lld\n",
               dcr_escape(name, sizeof(name), it.name), shape, dcr_dtype_name(it.dtype),
               dcr_encoding_name(it.encoding), loc,
               it.value_coding == DCR_VALUES_HUFFMAN ? "huffman" : "raw", it.count,
               (long long)it.first, (long long)it.last);
    }
}

static const char *location_name(dcr_location_type_t t)
{
    return t == DCR_LOCATION_RUN ? "run" : t == DCR_LOCATION_GAPS ? "gaps" : "rice";
}

/* Item i's records: "indices" and "values" (each value word as an unsigned
 * integer of the dtype's width, so others can check them bit for bit). */
static dcr_status_t records_json(const dcr_payload_t *p, size_t i, const dcr_payload_item_t *it,
                                 json_t *j)
{
    size_t es = dcr_dtype_size(it->dtype);
    int64_t *idx = malloc(it->count * sizeof(*idx));
    unsigned char *vals = malloc(it->count * es);
    if (!idx || !vals) {
        free(idx);
        free(vals);
        return dcr_error_set(DCR_ENOMEM, "records of item %zu", i);
    }
    dcr_payload_item_indices(p, i, idx);
    dcr_payload_item_values(p, i, vals);
    json_t *ji = json_array(), *jv = json_array();
    for (size_t k = 0; k < it->count; k++) {
        uint32_t w = 0;
        memcpy(&w, vals + k * es, es); /* the codec builds only on little-endian hosts */
        json_array_append_new(ji, json_integer(idx[k]));
        json_array_append_new(jv, json_integer(w));
    }
    json_object_set_new(j, "indices", ji);
    json_object_set_new(j, "values", jv);
    free(idx);
    free(vals);
    return DCR_OK;
}

static dcr_status_t print_payload_json(const char *path, const dcr_payload_t *p, size_t len,
                                       bool records)
{
    const dcr_payload_header_t *h = dcr_payload_get_header(p);
    char digest[33];
    for (int i = 0; i < 16; i++) snprintf(digest + 2 * i, 3, "%02x", h->digest[i]);
    json_t *j = json_pack("{s:s, s:I, s:i, s:i, s:b, s:b, s:I, s:i, s:I, s:i, s:I, s:I, s:s}",
                          "path", path, "bytes", (json_int_t)len, "version", h->version, "flags",
                          h->flags, "shuffled", (h->flags & DCR_CODEC_FLAG_SHUFFLE) != 0, "keyed",
                          (h->flags & DCR_CODEC_FLAG_KEYED) != 0, "tau", (json_int_t)h->tau,
                          "owner", (int)h->owner, "payload_id", (json_int_t)h->payload_id,
                          "item_count", (int)h->item_count, "raw_length", (json_int_t)h->raw_len,
                          "compressed_length", (json_int_t)h->compressed_len, "digest", digest);
    json_t *items = json_array();
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < dcr_payload_item_count(p) && st == DCR_OK; i++) {
        dcr_payload_item_t it;
        if (dcr_payload_item(p, i, &it) != DCR_OK) continue;
        json_t *shape = json_array();
        for (int d = 0; d < it.ndim; d++) json_array_append_new(shape, json_integer(it.shape[d]));
        json_t *ji =
            json_pack("{s:s, s:o, s:s, s:s, s:s, s:i, s:i, s:s, s:I, s:I, s:I, s:I, s:I}", "name",
                      it.name, "shape", shape, "dtype", dcr_dtype_name(it.dtype), "encoding",
                      dcr_encoding_name(it.encoding), "location", location_name(it.location),
                      "gap_bytes", (int)it.gap_bytes, "rice_k", (int)it.rice_k, "value_coding",
                      it.value_coding == DCR_VALUES_HUFFMAN ? "huffman" : "raw", "count",
                      (json_int_t)it.count, "first", (json_int_t)it.first, "last",
                      (json_int_t)it.last, "location_bytes", (json_int_t)it.location_bytes,
                      "value_bytes", (json_int_t)it.value_bytes);
        if (records) st = records_json(p, i, &it, ji);
        json_array_append_new(items, ji);
    }
    json_object_set_new(j, "items", items);
    if (st == DCR_OK) {
        json_dumpf(j, stdout, JSON_INDENT(2));
        printf("\n");
    }
    json_decref(j);
    return st;
}

int dcr_cmd_payload(int argc, char **argv)
{
    const char *pos[2];
    int npos = 0;
    const char *key_path = NULL;
    int64_t max_raw = PAYLOAD_MAX_RAW_DEFAULT;
    bool json = false, records = false;
    dcr_arg_t args[] = {
        {"--payload-key", DCR_ARG_STRING, &key_path, 0, 0,
         "verify keyed payloads with the 32-byte key in FILE (unkeyed ones are then refused)",
         false},
        {"--max-raw", DCR_ARG_INT, &max_raw, 24, (double)DCR_CODEC_RAW_MAX,
         "largest decompressed body to accept, in bytes (default 1 GiB)", false},
        {"--json", DCR_ARG_FLAG, &json, 0, 0, "inspect: print one JSON object", false},
        {"--records", DCR_ARG_FLAG, &records, 0, 0,
         "inspect --json: also each item's indices and value words", false},
    };
    int rc = dcr_args_parse("payload",
                            "inspect|verify FILE [--payload-key FILE] [--max-raw N] [--json "
                            "[--records]]",
                            args, 4, argc, argv, pos, 2, &npos);
    if (rc) return rc == 1 ? 0 : 2;
    if (records && !json) {
        fprintf(stderr, "dcr payload: --records needs --json\n");
        return 2;
    }
    if (npos != 2 || (strcmp(pos[0], "inspect") && strcmp(pos[0], "verify"))) {
        fprintf(stderr, "dcr payload: expected 'inspect FILE' or 'verify FILE'\n");
        return 2;
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    dcr_payload_t *p = NULL;
    dcr_payload_key_t key;
    dcr_status_t s = dcr_cli_payload_key("payload", key_path, &key);
    if (s != DCR_OK) return dcr_cli_check("payload", s); /* a bad key file: usage, exit 2 */
    dcr_payload_policy_t pol = {.key = &key, .max_raw = (uint64_t)max_raw};
    DCR_CHECK_GOTO(read_payload(pos[1], &pol, &buf, &len), s, fail);
    DCR_CHECK_GOTO(dcr_payload_create(&p), s, fail);
    DCR_CHECK_GOTO(dcr_payload_decode_with(p, buf, len, &pol), s, fail);
    if (!strcmp(pos[0], "inspect") && json)
        DCR_CHECK_GOTO(print_payload_json(pos[1], p, len, records), s, fail);
    else if (!strcmp(pos[0], "inspect"))
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
    /* A FILE that is missing or not a regular file is the user's input
     * error (2); a payload that fails validation is a failure (1). */
    return s == DCR_ENOTFOUND || s == DCR_EINVAL ? 2 : 1;
}
