/* apply_payload: decodes one dcr payload and applies the records of one
 * canonical tensor to that tensor's stored words, through libdcr's public
 * API only. It is the smallest receiver there is, and what the install test
 * builds against an installed libdcr with pkg-config (tests/install/).
 *
 *   apply_payload PAYLOAD NAME IN OUT [KEYFILE]
 *
 * IN holds the tensor's elements (row-major, little-endian words of its
 * dtype); OUT gets them with every record of NAME applied (XOR or
 * overwrite). With KEYFILE only payloads signed with that key are accepted.
 * Exit 0 on success, 1 on a failure (one line on stderr), 2 on bad usage.
 *
 * Build: cc apply_payload.c $(pkg-config --cflags --libs dcr) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dcr/codec.h>
#include <dcr/dtype.h>
#include <dcr/status.h>

/* The whole file into a malloc'd buffer; NULL (and a message) on failure. */
static uint8_t *read_file(const char *path, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "apply_payload: cannot open %s\n", path);
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                fprintf(stderr, "apply_payload: out of memory reading %s\n", path);
                return NULL;
            }
            buf = grown;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    *len_p = len;
    return buf;
}

/* Applies item i of p to words (numel elements of the item's dtype). */
static int apply_item(const dcr_payload_t *p, size_t i, const dcr_payload_item_t *it,
                      uint8_t *words)
{
    size_t width = dcr_dtype_size(it->dtype);
    int64_t *idx = malloc(it->count * sizeof(*idx));
    uint8_t *vals = malloc(it->count * width);
    if (!idx || !vals || dcr_payload_item_indices(p, i, idx) != DCR_OK ||
        dcr_payload_item_values(p, i, vals) != DCR_OK) {
        free(idx);
        free(vals);
        fprintf(stderr, "apply_payload: cannot read the records of %s\n", it->name);
        return 1;
    }
    for (size_t r = 0; r < it->count; r++) {
        uint8_t *elem = words + (size_t)idx[r] * width;
        uint64_t value = dcr_dtype_load_bits(it->dtype, vals + r * width);
        if (it->encoding == DCR_ENCODING_XOR) value ^= dcr_dtype_load_bits(it->dtype, elem);
        dcr_dtype_store_bits(it->dtype, elem, value);
    }
    free(idx);
    free(vals);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: apply_payload PAYLOAD NAME IN OUT [KEYFILE]\n");
        return 2;
    }
    dcr_payload_key_t key = {0};
    if (argc == 6) {
        dcr_status_t kst = dcr_payload_key_load(argv[5], &key, NULL);
        if (kst != DCR_OK) {
            fprintf(stderr, "apply_payload: %s\n", dcr_error_line(kst));
            return 1;
        }
    }
    size_t plen = 0, tlen = 0;
    uint8_t *payload = read_file(argv[1], &plen);
    uint8_t *words = payload ? read_file(argv[3], &tlen) : NULL;
    dcr_payload_t *p = NULL;
    int rc = 1;
    if (!words || dcr_payload_create(&p) != DCR_OK) goto out;
    dcr_payload_policy_t policy = {.key = &key};
    dcr_status_t st = dcr_payload_decode_with(p, payload, plen, &policy);
    if (st != DCR_OK) {
        fprintf(stderr, "apply_payload: %s: %s\n", argv[1], dcr_error_line(st));
        goto out;
    }
    size_t applied = 0;
    for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
        dcr_payload_item_t it;
        if (dcr_payload_item(p, i, &it) != DCR_OK || strcmp(it.name, argv[2]) != 0) continue;
        if ((uint64_t)it.numel * dcr_dtype_size(it.dtype) != tlen) {
            fprintf(stderr, "apply_payload: %s holds %zu bytes, %s has %lld elements of %s\n",
                    argv[3], tlen, it.name, (long long)it.numel, dcr_dtype_name(it.dtype));
            goto out;
        }
        if (apply_item(p, i, &it, words) != 0) goto out;
        applied += it.count;
    }
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(words, 1, tlen, f) != tlen || fclose(f) != 0) {
        fprintf(stderr, "apply_payload: cannot write %s\n", argv[4]);
        goto out;
    }
    printf("%zu records of %s applied\n", applied, argv[2]);
    rc = 0;
out:
    dcr_payload_destroy(p);
    free(words);
    free(payload);
    return rc;
}
