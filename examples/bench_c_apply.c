/* The C receiver's apply on given tensors and payloads: the other half of
 * examples/bench_torch_apply.py's same-tensor comparison (which runs it).
 *
 *   dcr_bench_c_apply MODEL.json CKPT.safetensors REPEATS PAYLOAD...
 *
 * One receiver of the model's vLLM loader (engine/receiver, the loaders of
 * workloads/serve; TP 1) holds the checkpoint, prewarms, and then, REPEATS
 * times: a dense load of the checkpoint (timed: the dense reference), and
 * the payloads decoded and their items applied (timed: ingest = decode +
 * apply + sync; apply = the receiver's own apply time), and a dense load as a
 * serving runtime does it, from the checkpoint file (timed: mapped and
 * validated again, every tensor read from the page cache, then loaded). It
 * prints one JSON
 * object: the best of each, the records applied, and, after the last apply,
 * dcr_hash64 and size of every resident parameter, so the caller can check
 * that the C receiver and the torch one ended bit for bit the same. Built in
 * the source tree only: it links the workloads' loaders, which are not part
 * of the installed library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/hash.h"
#include "dcr/receiver.h"
#include "workloads/model/input_file.h"
#include "workloads/model/safetensors.h"
#include "workloads/serve/vllm_layout.h"

typedef struct bench {
    dcr_model_config_t model;
    dcr_inventory_t *inv;
    const char *ckpt_path;
    dcr_storage_t **canon; /* the checkpoint's tensors in inventory order */
    dcr_receiver_t *r;
    size_t npayloads;
    uint8_t **buf;
    size_t *len;
} bench_t;

static int fail(const char *what, dcr_status_t st)
{
    fprintf(stderr, "dcr_bench_c_apply: %s: %s\n", what, dcr_error_line(st));
    return 1;
}

/* The checkpoint's tensors, copied into storages in inventory order. */
static dcr_status_t read_checkpoint(bench_t *b, const char *path)
{
    dcr_checkpoint_t *ck;
    DCR_CHECK(dcr_checkpoint_open(path, &ck));
    dcr_status_t st = dcr_checkpoint_check_inventory(ck, b->inv, NULL);
    size_t n = dcr_inventory_count(b->inv);
    b->canon = calloc(n, sizeof(*b->canon));
    if (st == DCR_OK && b->canon == NULL) st = dcr_error_set(DCR_ENOMEM, "checkpoint tensors");
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(b->inv, i);
        const dcr_st_tensor_t *t = dcr_checkpoint_find(ck, d->name);
        st = dcr_storage_create(dcr_desc_bytes(d), &b->canon[i]);
        if (st == DCR_OK) memcpy(b->canon[i]->data, t->data, dcr_desc_bytes(d));
    }
    dcr_checkpoint_close(ck);
    return st;
}

/* A dense load from the file, as a serving runtime reloads: the checkpoint
 * opened (mapped, validated) again and every tensor read into the receiver
 * through the loader. The tensors pass through b->canon, the loader's input. */
static dcr_status_t dense_from_file(bench_t *b)
{
    dcr_checkpoint_t *ck;
    DCR_CHECK(dcr_checkpoint_open(b->ckpt_path, &ck));
    dcr_status_t st = dcr_checkpoint_check_inventory(ck, b->inv, NULL);
    for (size_t i = 0; st == DCR_OK && i < dcr_inventory_count(b->inv); i++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(b->inv, i);
        memcpy(b->canon[i]->data, dcr_checkpoint_find(ck, d->name)->data, dcr_desc_bytes(d));
    }
    dcr_checkpoint_close(ck);
    if (st == DCR_OK) st = dcr_receiver_load_dense_all(b->r, b->canon);
    return st;
}

static dcr_status_t read_payloads(bench_t *b, char **paths, size_t n)
{
    b->npayloads = n;
    b->buf = calloc(n, sizeof(*b->buf));
    b->len = calloc(n, sizeof(*b->len));
    if (b->buf == NULL || b->len == NULL) return dcr_error_set(DCR_ENOMEM, "payloads");
    for (size_t i = 0; i < n; i++)
        DCR_CHECK(
            dcr_input_read(paths[i], "payload", (size_t)1 << 32, (char **)&b->buf[i], &b->len[i]));
    return DCR_OK;
}

/* Decodes every payload and applies every item; the records applied. */
static dcr_status_t ingest(bench_t *b, dcr_payload_t *p, uint64_t *records_p)
{
    uint64_t records = 0;
    for (size_t k = 0; k < b->npayloads; k++) {
        DCR_CHECK(dcr_payload_decode(p, b->buf[k], b->len[k]));
        for (size_t i = 0; i < dcr_payload_item_count(p); i++) {
            dcr_payload_item_t it;
            DCR_CHECK(dcr_payload_item(p, i, &it));
            DCR_CHECK(dcr_receiver_apply_item(b->r, p, i));
            records += it.count;
        }
    }
    DCR_CHECK(dcr_receiver_sync(b->r));
    *records_p = records;
    return DCR_OK;
}

static void print_result(const bench_t *b, const double best[4], uint64_t records)
{
    printf("{\"dense_s\": %.6f, \"dense_file_s\": %.6f, \"ingest_s\": %.6f, \"apply_s\": %.6f, "
           "\"records\": %llu, \"params\": [",
           best[0], best[1], best[2], best[3], (unsigned long long)records);
    const dcr_params_t *ps = dcr_receiver_params(b->r);
    for (size_t i = 0; i < dcr_params_count(ps); i++) {
        const dcr_param_t *q = dcr_params_at(ps, i);
        printf("%s[\"%s\", %zu, \"%016llx\"]", i ? ", " : "", q->name, q->storage->bytes,
               (unsigned long long)dcr_hash64(q->storage->data, q->storage->bytes));
    }
    printf("]}\n");
}

static dcr_status_t run(bench_t *b, int repeats)
{
    dcr_serve_config_t sc = dcr_serve_config_default();
    DCR_CHECK(dcr_serve_config_validate(&b->model, &sc));
    DCR_CHECK(dcr_serve_receiver_create(&b->model, b->inv, &sc, 0, NULL, &b->r));
    DCR_CHECK(dcr_receiver_load_dense_all(b->r, b->canon));
    DCR_CHECK(dcr_receiver_prewarm(b->r));
    DCR_CHECK(dcr_receiver_begin_attempt(b->r, 1));
    dcr_payload_t *p;
    DCR_CHECK(dcr_payload_create(&p));
    double best[4] = {0}; /* dense, dense from the file, ingest, apply */
    uint64_t records = 0;
    dcr_status_t st = DCR_OK;
    for (int rep = 0; st == DCR_OK && rep < repeats; rep++) {
        double t[4], t0 = dcr_clock_s();
        st = dense_from_file(b);
        t[1] = dcr_clock_s() - t0;
        t0 = dcr_clock_s();
        if (st == DCR_OK) st = dcr_receiver_load_dense_all(b->r, b->canon);
        t[0] = dcr_clock_s() - t0;
        dcr_receiver_stats_t s0, s1;
        dcr_receiver_stats(b->r, &s0);
        t0 = dcr_clock_s();
        if (st == DCR_OK) st = ingest(b, p, &records);
        t[2] = dcr_clock_s() - t0;
        dcr_receiver_stats(b->r, &s1);
        t[3] = s1.apply_s - s0.apply_s;
        for (int k = 0; k < 4; k++)
            if (rep == 0 || t[k] < best[k]) best[k] = t[k];
    }
    dcr_payload_destroy(p);
    if (st == DCR_OK) print_result(b, best, records);
    return st;
}

int main(int argc, char **argv)
{
    int repeats = argc > 3 ? atoi(argv[3]) : 0;
    if (argc < 5 || repeats < 1 || repeats > 1000) {
        fprintf(stderr, "usage: dcr_bench_c_apply MODEL.json CKPT.safetensors REPEATS(1..1000) "
                        "PAYLOAD...\n");
        return 2;
    }
    bench_t b = {0};
    dcr_status_t st = dcr_model_load(argv[1], &b.model);
    if (st != DCR_OK) return fail(argv[1], st);
    st = dcr_model_build_inventory(&b.model, &b.inv);
    b.ckpt_path = argv[2];
    if (st == DCR_OK) st = read_checkpoint(&b, argv[2]);
    if (st == DCR_OK) st = read_payloads(&b, argv + 4, (size_t)(argc - 4));
    if (st == DCR_OK) st = run(&b, repeats);
    int rc = st == DCR_OK ? 0 : fail("apply", st);
    dcr_receiver_destroy(b.r);
    for (size_t i = 0; b.canon && i < dcr_inventory_count(b.inv); i++)
        dcr_storage_destroy(b.canon[i]);
    free(b.canon);
    for (size_t i = 0; i < b.npayloads && b.buf; i++) free(b.buf[i]);
    free(b.buf);
    free(b.len);
    dcr_inventory_destroy(b.inv);
    return rc;
}
