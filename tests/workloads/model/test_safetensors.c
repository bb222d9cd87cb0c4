/* ctest-labels: unit */
/* safetensors reader and writer. Written files are checked by an
 * independent reading of the format (the header parsed here with jansson,
 * offsets recomputed by arithmetic from the shapes), round trips bit for bit,
 * a sharded checkpoint against the single file, and hand-made malformed
 * files that must each be refused with one line naming file and tensor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "dcr/rng.h"
#include "workloads/model/model.h"
#include "workloads/model/safetensors.h"
#include "workloads/tmp_dir.h"

/* A small inventory of every supported dtype and rank, with random bytes. */
typedef struct fixture {
    dcr_inventory_t *inv;
    uint8_t **data;
    dcr_st_entry_t *entries;
    size_t n;
} fixture_t;

static void fixture_fill(fixture_t *f, uint64_t seed)
{
    f->n = dcr_inventory_count(f->inv);
    f->data = calloc(f->n, sizeof(*f->data));
    f->entries = calloc(f->n, sizeof(*f->entries));
    dcr_rng_t rng;
    dcr_rng_seed(&rng, seed);
    for (size_t i = 0; i < f->n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(f->inv, i);
        size_t bytes = dcr_desc_bytes(d);
        f->data[i] = malloc(bytes + 1);
        for (size_t k = 0; k < bytes; k++) f->data[i][k] = (uint8_t)dcr_rng_u64(&rng);
        f->entries[i] = (dcr_st_entry_t){d, f->data[i]};
    }
}

static fixture_t fixture_small(void)
{
    fixture_t f = {0};
    assert_int_equal(dcr_inventory_create(&f.inv), DCR_OK);
    const struct {
        const char *name;
        dcr_dtype_t dtype;
        int ndim;
        int64_t shape[3];
    } t[] = {
        {"embed.weight", DCR_DTYPE_BF16, 2, {37, 16}},  {"norm.weight", DCR_DTYPE_BF16, 1, {16}},
        {"half.weight", DCR_DTYPE_FP16, 2, {5, 7}},     {"A_log", DCR_DTYPE_FP32, 1, {9}},
        {"fp8.weight", DCR_DTYPE_FP8_E4M3, 2, {3, 11}}, /* 33 bytes: the next tensor is unaligned */
        {"conv.weight", DCR_DTYPE_BF16, 3, {6, 1, 4}},  {"tail.bias", DCR_DTYPE_FP32, 1, {3}},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        assert_int_equal(dcr_inventory_add(f.inv, t[i].name, t[i].dtype, t[i].ndim, t[i].shape),
                         DCR_OK);
    fixture_fill(&f, 7);
    return f;
}

static void fixture_free(fixture_t *f)
{
    for (size_t i = 0; i < f->n; i++) free(f->data[i]);
    free(f->data);
    free(f->entries);
    dcr_inventory_destroy(f->inv);
}

static uint8_t *read_all(const char *path, size_t *size_p)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)size + 1);
    assert_int_equal(fread(buf, 1, (size_t)size, fp), (size_t)size);
    fclose(fp);
    *size_p = (size_t)size;
    return buf;
}

static void path_in(char *buf, size_t len, const char *leaf)
{
    snprintf(buf, len, "%s/%s", tmp_dir, leaf);
}

static void make_dir(const char *leaf, char *path, size_t len)
{
    path_in(path, len, leaf);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", path, path);
    assert_int_equal(system(cmd), 0);
}

/* The format read independently: little-endian length, a JSON object, and
 * data_offsets that follow from the shapes in writing order. */
static void check_format(const char *path, const fixture_t *f, const char *meta_key,
                         const char *meta_value)
{
    static const char *const names[] = {"BF16", "F16", "F32", "F8_E4M3"};
    static const size_t sizes[] = {2, 2, 4, 1};
    size_t size = 0;
    uint8_t *buf = read_all(path, &size);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    assert_true(8 + hlen <= size);
    assert_int_equal(hlen % 8, 0);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, hlen, 0, &jerr);
    assert_non_null(root);
    uint64_t at = 0;
    for (size_t i = 0; i < f->n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(f->inv, i);
        json_t *t = json_object_get(root, d->name);
        assert_non_null(t);
        assert_string_equal(json_string_value(json_object_get(t, "dtype")), names[d->dtype]);
        json_t *shape = json_object_get(t, "shape");
        assert_int_equal(json_array_size(shape), (size_t)d->ndim);
        uint64_t bytes = sizes[d->dtype];
        for (int k = 0; k < d->ndim; k++) {
            assert_int_equal(json_integer_value(json_array_get(shape, k)), d->shape[k]);
            bytes *= (uint64_t)d->shape[k];
        }
        json_t *off = json_object_get(t, "data_offsets");
        assert_int_equal(json_integer_value(json_array_get(off, 0)), at);
        assert_int_equal(json_integer_value(json_array_get(off, 1)), at + bytes);
        assert_memory_equal(buf + 8 + hlen + at, f->data[i], bytes);
        at += bytes;
    }
    assert_int_equal(size, 8 + hlen + at);
    json_t *meta = json_object_get(root, "__metadata__");
    if (meta_key != NULL) {
        assert_string_equal(json_string_value(json_object_get(meta, meta_key)), meta_value);
        assert_int_equal(json_object_size(root), f->n + 1);
    } else {
        assert_null(meta);
        assert_int_equal(json_object_size(root), f->n);
    }
    json_decref(root);
    free(buf);
}

/* Every tensor of f, bit for bit, with its dtype and shape. */
static void check_contents(const dcr_checkpoint_t *ck, const fixture_t *f)
{
    assert_int_equal(dcr_checkpoint_count(ck), f->n);
    for (size_t i = 0; i < f->n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(f->inv, i);
        const dcr_st_tensor_t *t = dcr_checkpoint_find(ck, d->name);
        assert_non_null(t);
        assert_int_equal(t->dtype, d->dtype);
        assert_int_equal(t->ndim, d->ndim);
        for (int k = 0; k < d->ndim; k++) assert_int_equal(t->shape[k], d->shape[k]);
        assert_int_equal(t->end - t->begin, dcr_desc_bytes(d));
        assert_memory_equal(t->data, f->data[i], dcr_desc_bytes(d));
    }
    assert_null(dcr_checkpoint_find(ck, "absent.weight"));
}

static void test_round_trip(void **state)
{
    (void)state;
    fixture_t f = fixture_small();
    char path[512];
    path_in(path, sizeof(path), "one.safetensors");
    json_t *meta = json_pack("{s:s}", "format", "pt");
    assert_int_equal(dcr_st_write_file(path, f.entries, f.n, meta), DCR_OK);
    check_format(path, &f, "format", "pt");

    dcr_checkpoint_t *ck = NULL;
    assert_int_equal(dcr_checkpoint_open(path, &ck), DCR_OK);
    check_contents(ck, &f);
    size_t extra = 99;
    assert_int_equal(dcr_checkpoint_check_inventory(ck, f.inv, &extra), DCR_OK);
    assert_int_equal(extra, 0);
    dcr_checkpoint_close(ck);

    /* The parser hands back the metadata. */
    size_t size = 0;
    uint8_t *buf = read_all(path, &size);
    dcr_st_tensor_t *t = NULL;
    size_t n = 0;
    json_t *got = NULL;
    assert_int_equal(dcr_st_parse(buf, size, path, &t, &n, &got), DCR_OK);
    assert_int_equal(n, f.n);
    assert_true(json_equal(got, meta));
    json_decref(got);
    dcr_st_tensors_free(t, n);
    free(buf);
    json_decref(meta);
    fixture_free(&f);
}

/* A directory holding model.safetensors, and a sharded directory, read the
 * same tensors as the single file. */
static void test_sharded(void **state)
{
    (void)state;
    fixture_t f = fixture_small();
    char single[512], sharded[512], path[600];
    make_dir("single", single, sizeof(single));
    make_dir("sharded", sharded, sizeof(sharded));
    assert_int_equal(dcr_checkpoint_write(single, f.entries, f.n, 0), DCR_OK);
    /* 1200 bytes per file: embed (1184 B) alone, then the rest in groups. */
    assert_int_equal(dcr_checkpoint_write(sharded, f.entries, f.n, 1200), DCR_OK);
    snprintf(path, sizeof(path), "%s/model.safetensors", single);
    check_format(path, &f, NULL, NULL);

    /* The index, read independently: total size and one file per group. */
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", sharded);
    json_error_t jerr;
    json_t *index = json_load_file(path, 0, &jerr);
    assert_non_null(index);
    uint64_t total = 0;
    for (size_t i = 0; i < f.n; i++) total += dcr_desc_bytes(dcr_inventory_at(f.inv, i));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(index, "metadata"), "total_size")),
        total);
    json_t *map = json_object_get(index, "weight_map");
    assert_int_equal(json_object_size(map), f.n);
    assert_string_equal(json_string_value(json_object_get(map, "embed.weight")),
                        "model-00001-of-00002.safetensors");
    assert_string_equal(json_string_value(json_object_get(map, "tail.bias")),
                        "model-00002-of-00002.safetensors");
    json_decref(index);

    dcr_checkpoint_t *a = NULL, *b = NULL;
    assert_int_equal(dcr_checkpoint_open(single, &a), DCR_OK);
    assert_int_equal(dcr_checkpoint_open(sharded, &b), DCR_OK);
    check_contents(a, &f);
    check_contents(b, &f);
    assert_non_null(dcr_checkpoint_file(b, 1));
    assert_null(dcr_checkpoint_file(b, 2));
    dcr_checkpoint_close(a);
    dcr_checkpoint_close(b);
    fixture_free(&f);
}

/* The inventory check names the tensor that is missing or differs, and
 * counts tensors the model does not have. */
static void test_inventory_check(void **state)
{
    (void)state;
    fixture_t f = fixture_small();
    char path[512];
    path_in(path, sizeof(path), "inv.safetensors");
    /* Without its last tensor: the model's tail.bias is missing. */
    assert_int_equal(dcr_st_write_file(path, f.entries, f.n - 1, NULL), DCR_OK);
    dcr_checkpoint_t *ck = NULL;
    assert_int_equal(dcr_checkpoint_open(path, &ck), DCR_OK);
    dcr_status_t st = dcr_checkpoint_check_inventory(ck, f.inv, NULL);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_ENOTFOUND);
    assert_non_null(strstr(dcr_error_line(st), "\"tail.bias\""));
    dcr_checkpoint_close(ck);

    /* A model with a differently shaped norm, and one tensor fewer. */
    dcr_inventory_t *other = NULL;
    assert_int_equal(dcr_inventory_create(&other), DCR_OK);
    int64_t e[2] = {37, 16}, nshape[1] = {17};
    assert_int_equal(dcr_inventory_add(other, "embed.weight", DCR_DTYPE_BF16, 2, e), DCR_OK);
    assert_int_equal(dcr_checkpoint_open(path, &ck), DCR_OK);
    size_t extra = 0;
    assert_int_equal(dcr_checkpoint_check_inventory(ck, other, &extra), DCR_OK);
    assert_int_equal(extra, f.n - 2);
    assert_int_equal(dcr_inventory_add(other, "norm.weight", DCR_DTYPE_BF16, 1, nshape), DCR_OK);
    st = dcr_checkpoint_check_inventory(ck, other, NULL);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(dcr_error_line(st), "\"norm.weight\""));
    assert_non_null(strstr(dcr_error_line(st), "[17]"));
    dcr_checkpoint_close(ck);
    dcr_inventory_destroy(other);
    fixture_free(&f);
}

/* ---- malformed files ---- */

/* Writes 8-byte length hlen (or the header's own length when hlen is
 * UINT64_MAX), the header and data_len zero bytes of data; a NULL header
 * writes only data_len bytes (a file too short for the length). */
static void write_image(const char *path, const char *header, uint64_t hlen, size_t data_len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (header == NULL) {
        for (size_t i = 0; i < data_len; i++) fputc(1, fp);
        assert_int_equal(fclose(fp), 0);
        return;
    }
    uint64_t len = hlen == UINT64_MAX ? strlen(header) : hlen;
    for (int i = 0; i < 8; i++) fputc((int)((len >> (8 * i)) & 0xff), fp);
    fputs(header, fp);
    for (size_t i = 0; i < data_len; i++) fputc(0, fp);
    assert_int_equal(fclose(fp), 0);
}

static void expect_refused(const char *leaf, const char *header, uint64_t hlen, size_t data_len,
                           const char *needle)
{
    char path[512];
    path_in(path, sizeof(path), leaf);
    write_image(path, header, hlen, data_len);
    dcr_checkpoint_t *ck = NULL;
    dcr_status_t st = dcr_checkpoint_open(path, &ck);
    const char *line = dcr_error_line(st);
    print_message("  %s -> %s\n", leaf, line);
    assert_int_equal(st, DCR_EPARSE);
    assert_null(ck);
    assert_non_null(strstr(line, leaf));
    assert_non_null(strstr(line, needle));
    assert_null(strchr(line, '\n'));
}

#define T(name, dtype, shape, b, e)                                                                \
    "\"" name "\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": [" #b        \
    ", " #e "]}"

static void test_malformed(void **state)
{
    (void)state;
    const uint64_t keep = UINT64_MAX;
    expect_refused("past-end.st", "{" T("a.weight", "BF16", "[2, 4]", 0, 16) "}", keep, 8,
                   "\"a.weight\"");
    expect_refused(
        "overlap.st",
        "{" T("a.weight", "BF16", "[4]", 0, 8) ", " T("b.weight", "BF16", "[4]", 4, 12) "}", keep,
        12, "\"b.weight\" (bytes 4..12) overlaps tensor \"a.weight\"");
    expect_refused("huge-header.st", "{}", UINT64_C(1) << 63, 0, "header length");
    expect_refused("past-file-header.st", "{}", 4096, 0, "header length 4096");
    expect_refused("dtype.st", "{" T("a.weight", "BF61", "[4]", 0, 8) "}", keep, 8,
                   "\"a.weight\": unknown dtype \"BF61\"");
    expect_refused(
        "duplicate.st",
        "{" T("a.weight", "BF16", "[4]", 0, 8) ", " T("a.weight", "BF16", "[4]", 8, 16) "}", keep,
        16, "duplicate object key near '\"a.weight\"'");
    expect_refused("size.st", "{" T("a.weight", "F32", "[4]", 0, 8) "}", keep, 8,
                   "\"a.weight\": data_offsets span 8 bytes but shape x F32 needs 16");
    expect_refused(
        "gap.st",
        "{" T("a.weight", "BF16", "[4]", 0, 8) ", " T("b.weight", "BF16", "[4]", 10, 18) "}", keep,
        18, "\"b.weight\" starts at 10");
    expect_refused("tail.st", "{" T("a.weight", "BF16", "[4]", 0, 8) "}", keep, 12,
                   "4 bytes after the last tensor");
    expect_refused("json.st", "{\"a.weight\": {\"dtype\": ", keep, 0, "header JSON invalid");
    expect_refused("array.st", "[1, 2]", keep, 0, "must be a JSON object");
    expect_refused("short.st", NULL, 0, 3, "shorter than the 8-byte header length");
    expect_refused("meta.st", "{\"__metadata__\": {\"format\": 1}}", keep, 0, "\"format\"");
    expect_refused(
        "offsets.st",
        "{\"a.weight\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [8, 0]}}", keep, 8,
        "\"a.weight\": \"data_offsets\"");
    expect_refused(
        "shape.st",
        "{\"a.weight\": {\"dtype\": \"BF16\", \"shape\": [-4], \"data_offsets\": [0, 8]}}", keep, 8,
        "\"a.weight\": shape dimension 0");
    expect_refused("overflow.st",
                   "{\"a.weight\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
                   "\"data_offsets\": [0, 8]}}",
                   keep, 8, "the size overflows");
}

/* A tensor of a dtype dcr does not hold (I64 position ids, say) is parsed
 * and checked like the others; it may sit beside the model's tensors but
 * cannot be one of them. */
static void test_other_dtypes(void **state)
{
    (void)state;
    char path[512];
    path_in(path, sizeof(path), "i64.st");
    write_image(path, "{" T("a.weight", "BF16", "[4]", 0, 8) ", " T("pos", "I64", "[2]", 8, 24) "}",
                UINT64_MAX, 24);
    dcr_checkpoint_t *ck = NULL;
    assert_int_equal(dcr_checkpoint_open(path, &ck), DCR_OK);
    const dcr_st_tensor_t *pos = dcr_checkpoint_find(ck, "pos");
    assert_non_null(pos);
    assert_int_equal(pos->dtype, DCR_DTYPE_COUNT);
    assert_string_equal(pos->dtype_name, "I64");
    assert_int_equal(pos->elem_size, 8);
    dcr_inventory_t *inv = NULL;
    int64_t four[1] = {4}, two[1] = {2};
    assert_int_equal(dcr_inventory_create(&inv), DCR_OK);
    assert_int_equal(dcr_inventory_add(inv, "a.weight", DCR_DTYPE_BF16, 1, four), DCR_OK);
    size_t extra = 0;
    assert_int_equal(dcr_checkpoint_check_inventory(ck, inv, &extra), DCR_OK);
    assert_int_equal(extra, 1);
    assert_int_equal(dcr_inventory_add(inv, "pos", DCR_DTYPE_BF16, 1, two), DCR_OK);
    dcr_status_t st = dcr_checkpoint_check_inventory(ck, inv, NULL);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(dcr_error_line(st), "\"pos\" in"));
    assert_non_null(strstr(dcr_error_line(st), "is I64 [2] (the model expects BF16 [2])"));
    dcr_inventory_destroy(inv);
    dcr_checkpoint_close(ck);
    /* The size check uses the format's element size: 2 x I64 is 16 bytes. */
    expect_refused("i64-size.st", "{" T("pos", "I64", "[2]", 0, 8) "}", UINT64_MAX, 8,
                   "span 8 bytes but shape x I64 needs 16");
}

/* A weight_map that points outside the directory or at the wrong file. */
static void test_bad_index(void **state)
{
    (void)state;
    fixture_t f = fixture_small();
    char dir[512], path[700];
    make_dir("badindex", dir, sizeof(dir));
    assert_int_equal(dcr_checkpoint_write(dir, f.entries, f.n, 1200), DCR_OK);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    json_error_t jerr;
    json_t *index = json_load_file(path, 0, &jerr);
    json_t *map = json_object_get(index, "weight_map");
    json_object_set_new(map, "tail.bias", json_string("model-00001-of-00002.safetensors"));
    assert_int_equal(json_dump_file(index, path, 0), 0);
    dcr_checkpoint_t *ck = NULL;
    dcr_status_t st = dcr_checkpoint_open(dir, &ck);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(dcr_error_line(st), "\"tail.bias\" is not in model-00001"));
    json_object_set_new(map, "tail.bias", json_string("../model-00002-of-00002.safetensors"));
    assert_int_equal(json_dump_file(index, path, 0), 0);
    st = dcr_checkpoint_open(dir, &ck);
    print_message("  %s\n", dcr_error_line(st));
    assert_int_equal(st, DCR_EPARSE);
    assert_non_null(strstr(dcr_error_line(st), "\"tail.bias\" must name a file"));
    json_decref(index);
    /* A directory with neither file. */
    make_dir("empty", dir, sizeof(dir));
    st = dcr_checkpoint_open(dir, &ck);
    assert_int_equal(st, DCR_ENOTFOUND);
    assert_null(ck);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),      cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_inventory_check), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_bad_index),       cmocka_unit_test(test_other_dtypes),
    };
    return cmocka_run_group_tests(tests, tmp_dir_setup, tmp_dir_teardown);
}
