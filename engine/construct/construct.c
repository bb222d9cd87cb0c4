/* Delta construction: trackers, change detection, direct projection,
 * residual conversion through the group interface, chunks, buckets, payloads. */
#include "dcr/construct.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/codec.h"
#include "dcr/device.h"
#include "dcr/group.h"
#include "dcr/hash.h"
#include "dcr/queue.h"
#include "dcr/thread.h"
#include "dcr/trace.h"
#include "construct-internal.h"

#define TAG_FLAGS        1
#define TAG_PART         2
#define SUBRUN_MAX       DCR__SUBRUN_MAX
#define GROUP_TIMEOUT_MS 600000
/* A packed residual message grows to this size before it is sent (one part
 * larger than it travels alone). */
#define PACK_BYTES ((size_t)4 << 20)

dcr_status_t dcr_construct_mode_parse(const char *text, dcr_construct_mode_t *out_p)
{
    if (!strcmp(text, "X"))
        *out_p = DCR_MODE_X;
    else if (!strcmp(text, "P"))
        *out_p = DCR_MODE_P;
    else if (!strcmp(text, "F"))
        *out_p = DCR_MODE_F;
    else
        return dcr_error_set(DCR_EINVAL, "mode '%s' is not X, P or F", text);
    return DCR_OK;
}

const char *dcr_construct_mode_name(dcr_construct_mode_t mode)
{
    return mode == DCR_MODE_X ? "X" : mode == DCR_MODE_P ? "P" : "F";
}

dcr_construct_config_t dcr_construct_config_default(void)
{
    /* Shuffle on: at 3-5% changes it saves 10-15% of payload bytes for no
     * measurable construction time (dcr construct --compare-shuffle). */
    dcr_construct_config_t cfg = {.mode = DCR_MODE_X,
                                  .chunk_bytes = DCR_CHUNK_BYTES_OBJSTORE,
                                  .bucket_bytes = DCR_BUCKET_BYTES,
                                  .first_bucket_bytes = 0,
                                  .zstd_level = 1,
                                  .shuffle = true,
                                  .queue_depth = 2,
                                  .payload_key = {0},
                                  .device = NULL};
    return cfg;
}

size_t dcr_construct_first_bucket_bytes(const dcr_construct_config_t *cfg)
{
    size_t first = cfg->first_bucket_bytes;
    if (first == 0) first = cfg->bucket_bytes / 4 ? cfg->bucket_bytes / 4 : 1;
    return first < cfg->bucket_bytes ? first : cfg->bucket_bytes;
}

/* ---- state ---------------------------------------------------------------- */

typedef struct owned_task {
    int task;
    void *tracker; /* committed shard values, box order; NULL in mode F */
    /* The last run wrote every changed word of this task into the tracker
     * (inplace.c): it holds the candidate, and the commit skips it. */
    bool fresh;
} owned_task_t;

typedef struct residual_slot {
    int canonical;
    void *baseline;  /* R^v, canonical dtype */
    void *assembled; /* W^{v+1} from the last run, or NULL */
    void *staging;   /* converted tensors: parts assembled in the shards' dtype */
    /* Per element: placed by some part in the assembly under way. Kept
     * between runs and cleared at the start of each, because a fresh map
     * per run costs a page fault per 4 KiB on top of the clearing. */
    unsigned char *covered;
    /* The parts' element sets never change (the layout is fixed), so when
     * the baseline assembly found that they cover every element exactly
     * once, a run that receives each part once covers it too: such a
     * tensor needs no map per run. Overlapping parts (replicas) keep the
     * map, since their values must agree in every run. */
    bool tiled;
    int nparts; /* tasks contributing to this tensor */
} residual_slot_t;

typedef struct item_buf { /* records of one item under construction */
    int64_t *indices;
    unsigned char *values;
    /* With records kept (dcr_constructor_keep_records), an XOR item's new
     * values beside its masks: the item in overwrite form. */
    unsigned char *now;
    size_t count, cap, value_size;
} item_buf_t;

typedef struct pending_payload {
    uint64_t id;
    size_t len;
    uint8_t data[];
} pending_payload_t;

typedef struct owner {
    int rank;
    owned_task_t *direct; /* affine tasks projected directly */
    int ndirect;
    owned_task_t *parts; /* tasks whose parts go to an assembler */
    int nparts;
    residual_slot_t *slots;
    int nslots;
    dcr_encoder_t *enc;
    uint32_t *changed; /* SUBRUN_MAX detection output */
    /* This owner's stream on the constructor's device. On a device the host
     * cannot address: a sub-run of candidate words, the detection output
     * and workspace, and the changed words of candidate and tracker
     * gathered there (d_now, d_before) and brought down (now, before). */
    dcr_device_stream_t *stream;
    void *d_cand, *d_work, *d_now, *d_before;
    uint32_t *d_idx;
    unsigned char *now, *before;
    item_buf_t item;
    unsigned char *pack; /* residual part message, reused across parts and runs */
    size_t pack_cap;
    unsigned char *part_seen; /* per task: its part arrived in this run */
    /* per run */
    dcr_group_t *group;
    dcr_queue_t *queue;
    uint64_t next_payload;
    size_t bucket_input;
    dcr_construct_stats_t stats;
    dcr__kept_t kept; /* runs since the baseline, with keeping on */
    /* The words the runs since the last commit overwrote in this owner's
     * trackers; undone before the next run (the attempt was not committed). */
    dcr__undo_log_t undo;
    struct dcr_constructor *c;
} owner_t;

struct dcr_constructor {
    const dcr_source_layout_t *layout;
    dcr_construct_config_t cfg;
    dcr_device_t *dev; /* trackers and detection (engine/device) */
    bool dev_host;     /* its buffers are host memory: compare in place */
    int world;
    owner_t *owners;
    int *assembler; /* per canonical: assembling rank, or -1 (direct projection) */
    int *slot_of;   /* per canonical: slot index in its assembler */
    size_t baseline_bytes;
    dcr_storage_t **candidate; /* of the last successful run */
    /* An owner process's endpoint (dcr_constructor_set_group): only owner
     * rank(ext) runs here; NULL: every owner, an "inproc" group per run. */
    dcr_group_t *ext;
    unsigned char *required;      /* per canonical: rebuilt in the last run */
    bool keep;                    /* runs keep their records (repair) */
    dcr_repair_records_t *repair; /* the last commit's, until taken */
    /* per run */
    uint64_t tau;
    const uint8_t *xor_allowed;
    bool all_overwrite;
    const dcr_payload_sink_t *sink;
    /* Threads of a run start only once all of them exist (1), or leave
     * without working when one could not be created (-1): an owner that
     * never started would leave the others waiting in group collectives. */
    pthread_mutex_t gate_mu;
    pthread_cond_t gate_cv;
    int gate;
};

static size_t shard_elem(const dcr_constructor_t *c, const dcr_task_t *t)
{
    return dcr_dtype_size(c->layout->shards[t->shard].desc.dtype);
}

static const dcr_tensor_desc_t *canon(const dcr_constructor_t *c, int index)
{
    return dcr_inventory_at(c->layout->inventory, (size_t)index);
}

/* ---- create / destroy -------------------------------------------------------- */

static dcr_status_t append_owned(owned_task_t **list, int *n, int task)
{
    owned_task_t *p = realloc(*list, (size_t)(*n + 1) * sizeof(**list));
    if (!p) return dcr_error_set(DCR_ENOMEM, "owner task list");
    p[*n] = (owned_task_t){task, NULL, false};
    *list = p;
    (*n)++;
    return DCR_OK;
}

/* Chooses who assembles each canonical tensor: the layout's residual owner,
 * or in mode F (every tensor rebuilt whole) the same name hash for all. */
static dcr_status_t plan_assembly(dcr_constructor_t *c)
{
    size_t n = dcr_inventory_count(c->layout->inventory);
    c->assembler = malloc((n + 1) * sizeof(int));
    c->slot_of = malloc((n + 1) * sizeof(int));
    c->required = calloc(n + 1, 1);
    if (!c->assembler || !c->slot_of || !c->required)
        return dcr_error_set(DCR_ENOMEM, "assembly plan");
    for (size_t k = 0; k < n; k++) {
        int r = c->layout->residual_owner[k];
        if (c->cfg.mode == DCR_MODE_F && r < 0)
            r = (int)(dcr_hash64_str(canon(c, (int)k)->name) % (uint64_t)c->world);
        c->assembler[k] = r;
        c->slot_of[k] = -1;
    }
    for (size_t k = 0; k < n; k++) {
        if (c->assembler[k] < 0) continue;
        owner_t *o = &c->owners[c->assembler[k]];
        residual_slot_t *p = realloc(o->slots, (size_t)(o->nslots + 1) * sizeof(*p));
        if (!p) return dcr_error_set(DCR_ENOMEM, "residual slots");
        p[o->nslots] = (residual_slot_t){(int)k, NULL, NULL, NULL, NULL, false, 0};
        c->slot_of[k] = o->nslots++;
        o->slots = p;
    }
    for (int i = 0; i < c->layout->ntasks; i++) {
        int k = c->layout->tasks[i].canonical;
        if (c->assembler[k] >= 0) c->owners[c->assembler[k]].slots[c->slot_of[k]].nparts++;
    }
    return DCR_OK;
}

static dcr_status_t assign_tasks(dcr_constructor_t *c)
{
    for (int i = 0; i < c->layout->ntasks; i++) {
        const dcr_task_t *t = &c->layout->tasks[i];
        owner_t *o = &c->owners[t->owner];
        if (c->assembler[t->canonical] >= 0)
            DCR_CHECK(append_owned(&o->parts, &o->nparts, i));
        else
            DCR_CHECK(append_owned(&o->direct, &o->ndirect, i));
    }
    return DCR_OK;
}

/* Packs task t of `shards` (box-map order) into its tracker: in place on a
 * device the host can address, else through host staging and a copy up. */
static dcr_status_t pack_tracker(dcr_constructor_t *c, owner_t *o, const dcr_task_t *t,
                                 const void *shard, void *tracker)
{
    if (c->dev_host) {
        dcr_task_pack(c->layout, t, shard, tracker);
        return DCR_OK;
    }
    size_t bytes = (size_t)dcr_task_numel(t) * shard_elem(c, t);
    void *stage = NULL;
    DCR_CHECK(dcr_device_host_alloc(c->dev, bytes ? bytes : 1, &stage));
    dcr_task_pack(c->layout, t, shard, stage);
    dcr_status_t st = dcr_device_copy(c->dev, o->stream, tracker, stage, bytes, DCR_DEVICE_H2D);
    if (st == DCR_OK) st = dcr_device_sync(c->dev, o->stream);
    dcr_device_host_free(c->dev, stage);
    return st;
}

/* Trackers hold the committed shard values of owned tasks, in the
 * constructor's device memory; mode F compares whole canonical tensors
 * instead and keeps none. */
static dcr_status_t build_trackers(dcr_constructor_t *c, dcr_storage_t *const *baseline)
{
    if (c->cfg.mode == DCR_MODE_F) return DCR_OK;
    for (int r = 0; r < c->world; r++) {
        owner_t *o = &c->owners[r];
        size_t owned = 0;
        for (int pass = 0; pass < 2; pass++) {
            owned_task_t *list = pass ? o->parts : o->direct;
            int n = pass ? o->nparts : o->ndirect;
            for (int i = 0; i < n; i++) {
                const dcr_task_t *t = &c->layout->tasks[list[i].task];
                size_t bytes = (size_t)dcr_task_numel(t) * shard_elem(c, t);
                DCR_CHECK(dcr_device_alloc(c->dev, bytes ? bytes : 1, &list[i].tracker));
                DCR_CHECK(pack_tracker(c, o, t, baseline[t->shard]->data, list[i].tracker));
                c->baseline_bytes += bytes;
                owned += bytes;
            }
        }
        /* Trackers the host cannot address are copied up whole at the commit. */
        o->undo.limit = c->dev_host ? owned / DCR_CONSTRUCT_UNDO_SHARE : 0;
    }
    return DCR_OK;
}

/* The constructor's device, one stream and detection workspace per owner,
 * and on a device the host cannot address the per-owner sub-run buffers. */
static dcr_status_t open_device(dcr_constructor_t *c, const dcr_device_ops_t *ops)
{
    if (ops)
        DCR_CHECK(ops->create(ops, 0, &c->dev));
    else
        DCR_CHECK(dcr_device_create(c->cfg.device ? c->cfg.device : "cpu", &c->dev));
    c->dev_host = dcr_device_backend(c->dev)->props.host_addressable;
    size_t words = (size_t)SUBRUN_MAX * sizeof(uint32_t); /* elements are at most 4 bytes */
    for (int r = 0; r < c->world; r++) {
        owner_t *o = &c->owners[r];
        DCR_CHECK(dcr_device_stream_create(c->dev, DCR_ACTOR_OWNER, r, &o->stream));
        DCR_CHECK(dcr_device_alloc(c->dev, dcr_device_detect_workspace(SUBRUN_MAX), &o->d_work));
        if (c->dev_host) continue;
        DCR_CHECK(dcr_device_alloc(c->dev, words, &o->d_cand));
        DCR_CHECK(dcr_device_alloc(c->dev, words, (void **)&o->d_idx));
        DCR_CHECK(dcr_device_alloc(c->dev, words, &o->d_now));
        DCR_CHECK(dcr_device_alloc(c->dev, words, &o->d_before));
        DCR_CHECK(dcr_device_host_alloc(c->dev, words, (void **)&o->now));
        DCR_CHECK(dcr_device_host_alloc(c->dev, words, (void **)&o->before));
    }
    return DCR_OK;
}

/* The changed positions of n candidate elements at cand (host memory)
 * against the tracker words at tracker (device memory) into o->changed;
 * their number in *count_p. In place on a device the host can address;
 * otherwise the sub-run goes up, and with `words` the changed words of
 * both sides come down into o->now and o->before for projection. */
static dcr_status_t owner_detect(owner_t *o, const unsigned char *cand,
                                 const unsigned char *tracker, size_t n, size_t es, bool words,
                                 size_t *count_p)
{
    dcr_device_t *d = o->c->dev;
    if (o->c->dev_host)
        return dcr_device_detect(d, o->stream, cand, tracker, n, es, o->changed, o->d_work,
                                 count_p);
    size_t count = 0;
    DCR_CHECK(dcr_device_copy(d, o->stream, o->d_cand, cand, n * es, DCR_DEVICE_H2D));
    DCR_CHECK(
        dcr_device_detect(d, o->stream, o->d_cand, tracker, n, es, o->d_idx, o->d_work, &count));
    DCR_CHECK(dcr_device_copy(d, o->stream, o->changed, o->d_idx, count * sizeof(uint32_t),
                              DCR_DEVICE_D2H));
    if (words) {
        DCR_CHECK(dcr_device_gather(d, o->stream, o->d_now, o->d_cand, es, o->d_idx, count));
        DCR_CHECK(dcr_device_gather(d, o->stream, o->d_before, tracker, es, o->d_idx, count));
        DCR_CHECK(dcr_device_copy(d, o->stream, o->now, o->d_now, count * es, DCR_DEVICE_D2H));
        DCR_CHECK(
            dcr_device_copy(d, o->stream, o->before, o->d_before, count * es, DCR_DEVICE_D2H));
    }
    DCR_CHECK(dcr_device_sync(d, o->stream));
    *count_p = count;
    return DCR_OK;
}

static dcr_status_t build_residual_baseline(dcr_constructor_t *c, dcr_storage_t *const *baseline);

dcr_status_t dcr_constructor_create(const dcr_source_layout_t *layout,
                                    const dcr_construct_config_t *cfg,
                                    dcr_storage_t *const *baseline, dcr_constructor_t **out_p)
{
    return dcr__constructor_create_on(NULL, layout, cfg, baseline, out_p);
}

dcr_status_t dcr__constructor_create_on(const dcr_device_ops_t *ops,
                                        const dcr_source_layout_t *layout,
                                        const dcr_construct_config_t *cfg,
                                        dcr_storage_t *const *baseline, dcr_constructor_t **out_p)
{
    if (cfg->chunk_bytes == 0 || cfg->bucket_bytes == 0 || cfg->queue_depth < 1)
        return dcr_error_set(DCR_EINVAL,
                             "chunk and bucket targets and queue depth must be positive");
    dcr_constructor_t *c = calloc(1, sizeof(*c));
    if (!c) return dcr_error_set(DCR_ENOMEM, "constructor");
    c->layout = layout;
    c->cfg = *cfg;
    c->cfg.first_bucket_bytes = dcr_construct_first_bucket_bytes(cfg);
    c->world = layout->world;
    pthread_mutex_init(&c->gate_mu, NULL);
    pthread_cond_init(&c->gate_cv, NULL);
    dcr_status_t st;
    c->owners = calloc((size_t)c->world, sizeof(owner_t));
    c->candidate = calloc((size_t)layout->nshards + 1, sizeof(*c->candidate));
    if (!c->owners || !c->candidate) {
        st = dcr_error_set(DCR_ENOMEM, "constructor for %d ranks", c->world);
        goto fail;
    }
    for (int r = 0; r < c->world; r++) {
        c->owners[r].rank = r;
        c->owners[r].c = c;
        c->owners[r].changed = malloc((size_t)SUBRUN_MAX * sizeof(uint32_t));
        c->owners[r].part_seen = calloc((size_t)layout->ntasks + 1, 1);
        if (!c->owners[r].changed || !c->owners[r].part_seen) {
            st = dcr_error_set(DCR_ENOMEM, "detection buffer");
            goto fail;
        }
        DCR_CHECK_GOTO(dcr_encoder_create(&c->owners[r].enc), st, fail);
        dcr_encoder_set_key(c->owners[r].enc, &c->cfg.payload_key);
    }
    DCR_CHECK_GOTO(plan_assembly(c), st, fail);
    DCR_CHECK_GOTO(assign_tasks(c), st, fail);
    DCR_CHECK_GOTO(open_device(c, ops), st, fail);
    DCR_CHECK_GOTO(build_trackers(c, baseline), st, fail);
    DCR_CHECK_GOTO(build_residual_baseline(c, baseline), st, fail);
    *out_p = c;
    return DCR_OK;
fail:
    dcr_constructor_destroy(c);
    return st;
}

static void free_owned(dcr_device_t *dev, owned_task_t *list, int n)
{
    for (int i = 0; i < n; i++) dcr_device_free(dev, list[i].tracker);
    free(list);
}

void dcr_constructor_destroy(dcr_constructor_t *c)
{
    if (!c) return;
    for (int r = 0; c->owners && r < c->world; r++) {
        owner_t *o = &c->owners[r];
        free_owned(c->dev, o->direct, o->ndirect);
        free_owned(c->dev, o->parts, o->nparts);
        dcr_device_free(c->dev, o->d_cand);
        dcr_device_free(c->dev, o->d_idx);
        dcr_device_free(c->dev, o->d_work);
        dcr_device_free(c->dev, o->d_now);
        dcr_device_free(c->dev, o->d_before);
        dcr_device_host_free(c->dev, o->now);
        dcr_device_host_free(c->dev, o->before);
        dcr_device_stream_destroy(c->dev, o->stream);
        for (int s = 0; s < o->nslots; s++) {
            free(o->slots[s].baseline);
            free(o->slots[s].assembled);
            free(o->slots[s].staging);
            free(o->slots[s].covered);
        }
        free(o->pack);
        free(o->part_seen);
        free(o->slots);
        free(o->changed);
        free(o->item.indices);
        free(o->item.values);
        free(o->item.now);
        dcr__kept_clear(&o->kept);
        dcr__undo_free(&o->undo);
        dcr_encoder_destroy(o->enc);
    }
    free(c->owners);
    dcr_device_destroy(c->dev);
    pthread_mutex_destroy(&c->gate_mu);
    pthread_cond_destroy(&c->gate_cv);
    free(c->assembler);
    free(c->slot_of);
    free(c->required);
    free(c->candidate);
    dcr_repair_records_destroy(c->repair);
    free(c);
}

size_t dcr_constructor_baseline_bytes(const dcr_constructor_t *c)
{
    return c->baseline_bytes;
}

/* ---- records and payloads ---------------------------------------------------- */

static dcr_status_t item_reserve(item_buf_t *b, size_t extra)
{
    if (b->count + extra <= b->cap) return DCR_OK;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->count + extra) cap *= 2;
    int64_t *idx = realloc(b->indices, cap * sizeof(int64_t));
    if (idx) b->indices = idx;
    unsigned char *val = realloc(b->values, cap * 8);
    if (val) b->values = val;
    unsigned char *now = realloc(b->now, cap * 8);
    if (now) b->now = now;
    if (!idx || !val || !now) return dcr_error_set(DCR_ENOMEM, "record buffer of %zu entries", cap);
    b->cap = cap;
    return DCR_OK;
}

typedef struct pair_ref {
    int64_t index;
    size_t pos;
} pair_ref_t;

static int compare_pair(const void *a, const void *b)
{
    int64_t x = ((const pair_ref_t *)a)->index, y = ((const pair_ref_t *)b)->index;
    return (x > y) - (x < y);
}

/* vals[0, n) of vs bytes each reordered as p says, through scratch v. */
static void permute(unsigned char *vals, unsigned char *v, const pair_ref_t *p, size_t n, size_t vs)
{
    for (size_t k = 0; k < n; k++) memcpy(v + k * vs, vals + p[k].pos * vs, vs);
    memcpy(vals, v, n * vs);
}

/* Box maps whose canonical order differs from shard order (transposes) emit
 * indices out of order; the codec wants them increasing. with_now: the new
 * values beside the masks move too. */
static dcr_status_t item_sort(item_buf_t *b, bool with_now)
{
    size_t n = b->count, vs = b->value_size;
    for (size_t i = 1; i < n; i++) {
        if (b->indices[i] > b->indices[i - 1]) continue;
        pair_ref_t *p = malloc(n * sizeof(*p));
        unsigned char *v = malloc(n * vs);
        if (!p || !v) {
            free(p);
            free(v);
            return dcr_error_set(DCR_ENOMEM, "sorting %zu records", n);
        }
        for (size_t k = 0; k < n; k++) p[k] = (pair_ref_t){b->indices[k], k};
        qsort(p, n, sizeof(*p), compare_pair);
        for (size_t k = 0; k < n; k++) b->indices[k] = p[k].index;
        permute(b->values, v, p, n, vs);
        if (with_now) permute(b->now, v, p, n, vs);
        free(p);
        free(v);
        return DCR_OK;
    }
    return DCR_OK;
}

static dcr_status_t flush_payload(owner_t *o)
{
    dcr_constructor_t *c = o->c;
    o->bucket_input = 0;
    if (dcr_encoder_item_count(o->enc) == 0) return DCR_OK;
    dcr_encode_params_t params = {c->tau, (uint32_t)o->rank, o->next_payload, c->cfg.zstd_level,
                                  c->cfg.shuffle};
    const uint8_t *buf;
    size_t len;
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_ZSTD, DCR_ACTOR_OWNER, o->rank);
    dcr_status_t fin = dcr_encoder_finish(o->enc, &params, &buf, &len);
    dcr_trace_end(&span);
    DCR_CHECK(fin);
    dcr_payload_header_t h;
    DCR_CHECK(dcr_payload_peek(buf, len, false, &h));
    pending_payload_t *p = malloc(sizeof(*p) + len);
    if (!p) return dcr_error_set(DCR_ENOMEM, "payload of %zu bytes", len);
    p->id = o->next_payload++;
    p->len = len;
    memcpy(p->data, buf, len);
    o->stats.payloads++;
    o->stats.payload_bytes += (int64_t)len;
    o->stats.body_raw_bytes += (int64_t)h.raw_len;
    dcr_status_t st = dcr_queue_push(o->queue, p, -1);
    if (st != DCR_OK) free(p);
    return st;
}

/* Hands the item under construction to the encoder. */
static dcr_status_t emit_item(owner_t *o, int canonical, dcr_encoding_t encoding)
{
    item_buf_t *b = &o->item;
    if (b->count == 0) return DCR_OK;
    bool xor_now = o->c->keep && encoding == DCR_ENCODING_XOR;
    DCR_CHECK(item_sort(b, xor_now));
    const dcr_tensor_desc_t *d = canon(o->c, canonical);
    dcr_codec_item_t item = {d->name,  d->ndim,    d->shape, d->dtype, encoding,
                             b->count, b->indices, 0,        b->values};
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_ENCODE, DCR_ACTOR_OWNER, o->rank);
    dcr_status_t added = dcr_encoder_add(o->enc, &item);
    dcr_trace_end(&span);
    DCR_CHECK(added);
    if (o->c->keep)
        DCR_CHECK(dcr__kept_add(&o->kept, canonical, b->count, b->value_size, b->indices,
                                xor_now ? b->now : b->values));
    o->stats.records += (int64_t)b->count;
    o->stats.raw_changed_value_bytes += (int64_t)(b->count * b->value_size);
    o->stats.value_bytes += (int64_t)(b->count * b->value_size);
    if (encoding == DCR_ENCODING_XOR)
        o->stats.xor_items++;
    else
        o->stats.overwrite_items++;
    return DCR_OK;
}

/* ---- direct projection ------------------------------------------------------- */

typedef struct project_ctx {
    owner_t *o;
    const unsigned char *cand;
    unsigned char *tracker;
    size_t pos, es;
    dcr_dtype_t sdt, cdt;
    int xor_mode;
    bool fresh; /* every changed word so far went into the tracker */
    dcr_status_t st;
} project_ctx_t;

/* Projects the changed positions of one sub-run: destination index through
 * the run's offset, value through the value map. A cast can hide a source
 * change (two FP32 values, one BF16); such elements emit nothing, so the
 * records are exactly the canonical bits that changed. */
static void project_changes(project_ctx_t *p, int64_t src, int64_t dst, size_t nchanged)
{
    item_buf_t *b = &p->o->item;
    size_t cs = b->value_size;
    int cast = p->sdt != p->cdt;
    /* The changed words: in place, or as the device brought them down. */
    bool host = p->o->c->dev_host;
    for (size_t i = 0; i < nchanged; i++) {
        size_t k = p->o->changed[i];
        unsigned char now[8], before[8];
        unsigned char *out = b->values + b->count * cs;
        dcr_convert(now, p->cdt, host ? p->cand + ((size_t)src + k) * p->es : p->o->now + i * p->es,
                    p->sdt, 1);
        if (p->xor_mode || cast) {
            dcr_convert(before, p->cdt,
                        host ? p->tracker + (p->pos + k) * p->es : p->o->before + i * p->es, p->sdt,
                        1);
            if (!memcmp(now, before, cs)) continue;
        }
        for (size_t j = 0; j < cs; j++)
            out[j] = p->xor_mode ? (unsigned char)(now[j] ^ before[j]) : now[j];
        if (p->xor_mode && p->o->c->keep) memcpy(b->now + b->count * cs, now, cs);
        b->indices[b->count++] = dst + (int64_t)k;
    }
}

static inline void word_xor(unsigned char *dst, const unsigned char *a, const unsigned char *b,
                            size_t es)
{
    if (es == 2) {
        uint16_t x, y;
        memcpy(&x, a, 2);
        memcpy(&y, b, 2);
        x ^= y;
        memcpy(dst, &x, 2);
        return;
    }
    if (es == 4) {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        x ^= y;
        memcpy(dst, &x, 4);
        return;
    }
    for (size_t j = 0; j < es; j++) dst[j] = (unsigned char)(a[j] ^ b[j]);
}

/* project_changes where source and canonical dtypes agree: a changed
 * source word is a changed canonical word, so every change is a record and
 * values move as whole words (the per-element conversion and comparison
 * cost more than the record itself). */
static void project_same_dtype(project_ctx_t *p, int64_t src, int64_t dst, size_t nchanged)
{
    item_buf_t *b = &p->o->item;
    size_t es = p->es;
    bool host = p->o->c->dev_host, keep_now = p->xor_mode && p->o->c->keep;
    /* The changed words: in place (at their positions), or as the device
     * brought them down (packed). */
    const unsigned char *now = host ? p->cand + (size_t)src * es : p->o->now;
    const unsigned char *before = host ? p->tracker + p->pos * es : p->o->before;
    unsigned char *vals = b->values + b->count * es, *nows = b->now + b->count * es;
    int64_t *ix = b->indices + b->count;
    for (size_t i = 0; i < nchanged; i++) {
        size_t k = p->o->changed[i], at = (host ? k : i) * es;
        if (p->xor_mode)
            word_xor(vals + i * es, now + at, before + at, es);
        else
            dcr__word_copy(vals + i * es, now + at, es);
        if (keep_now) dcr__word_copy(nows + i * es, now + at, es);
        ix[i] = dst + (int64_t)k;
    }
    b->count += nchanged;
}

/* After a sub-run's detection (and projection, which reads the tracker's
 * old words): its changed words go into the tracker, logged, where the
 * tracker is host memory and the log has room. false: not all of them. */
static bool update_in_place(owner_t *o, unsigned char *tracker, const unsigned char *cand,
                            size_t nchanged, size_t es)
{
    if (!o->c->dev_host) return false;
    return dcr__undo_update(&o->undo, tracker, cand, o->changed, nchanged, es);
}

static void project_run(int64_t src, int64_t dst, int64_t len, void *ctx)
{
    project_ctx_t *p = ctx;
    for (int64_t off = 0; off < len && p->st == DCR_OK; off += SUBRUN_MAX) {
        size_t n = (size_t)(len - off < SUBRUN_MAX ? len - off : SUBRUN_MAX), nchanged = 0;
        p->st = owner_detect(p->o, p->cand + (size_t)(src + off) * p->es,
                             p->tracker + p->pos * p->es, n, p->es, true, &nchanged);
        if (p->st != DCR_OK) return;
        p->o->stats.changed_elements += (int64_t)nchanged;
        if (nchanged && (p->st = item_reserve(&p->o->item, nchanged)) == DCR_OK) {
            if (p->sdt == p->cdt)
                project_same_dtype(p, src + off, dst + off, nchanged);
            else
                project_changes(p, src + off, dst + off, nchanged);
        }
        p->fresh &= update_in_place(p->o, p->tracker + p->pos * p->es,
                                    p->cand + (size_t)(src + off) * p->es, nchanged, p->es);
        p->pos += n;
    }
}

static dcr_encoding_t encoding_for(const dcr_constructor_t *c, int canonical)
{
    int xor_ok = c->cfg.mode == DCR_MODE_X && !c->all_overwrite && c->xor_allowed &&
                 c->xor_allowed[canonical];
    return xor_ok ? DCR_ENCODING_XOR : DCR_ENCODING_OVERWRITE;
}

static dcr_status_t project_task(owner_t *o, owned_task_t *ot, int *emitted_p)
{
    dcr_constructor_t *c = o->c;
    const dcr_task_t *t = &c->layout->tasks[ot->task];
    dcr_encoding_t enc = encoding_for(c, t->canonical);
    project_ctx_t p = {o,
                       c->candidate[t->shard]->data,
                       ot->tracker,
                       0,
                       shard_elem(c, t),
                       c->layout->shards[t->shard].desc.dtype,
                       canon(c, t->canonical)->dtype,
                       enc == DCR_ENCODING_XOR,
                       true,
                       DCR_OK};
    o->item.count = 0;
    o->item.value_size = dcr_dtype_size(p.cdt);
    /* Detection and projection interleave per run; one span covers both
     * (both are compute intervals of the construction bound). */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, o->rank);
    for (int m = 0; m < t->nmaps && p.st == DCR_OK; m++)
        dcr_box_map_foreach_run(&t->maps[m], project_run, &p);
    dcr_trace_end(&span);
    DCR_CHECK(p.st);
    ot->fresh = p.fresh;
    o->stats.compared_elements += dcr_task_numel(t);
    *emitted_p = o->item.count > 0;
    return emit_item(o, t->canonical, enc);
}

/* The bucket target of the payload under construction: the run's first
 * is smaller (dcr_construct_config_t.first_bucket_bytes). */
static size_t bucket_target(const owner_t *o)
{
    return o->next_payload == 0 ? o->c->cfg.first_bucket_bytes : o->c->cfg.bucket_bytes;
}

/* Tasks are compared chunk by chunk; a chunk that emits records counts its
 * whole input toward the bucket, and a full bucket becomes a payload. */
static dcr_status_t project_direct(owner_t *o)
{
    dcr_constructor_t *c = o->c;
    size_t chunk = 0;
    int chunk_emitted = 0;
    for (int i = 0; i < o->ndirect; i++) {
        const dcr_task_t *t = &c->layout->tasks[o->direct[i].task];
        int emitted = 0;
        DCR_CHECK(project_task(o, &o->direct[i], &emitted));
        chunk += (size_t)dcr_task_numel(t) * shard_elem(c, t);
        chunk_emitted |= emitted;
        size_t bucket = bucket_target(o);
        size_t chunk_target = c->cfg.chunk_bytes < bucket ? c->cfg.chunk_bytes : bucket;
        if (chunk < chunk_target && i + 1 < o->ndirect) continue;
        if (chunk_emitted) o->bucket_input += chunk;
        chunk = 0;
        chunk_emitted = 0;
        if (o->bucket_input >= bucket) DCR_CHECK(flush_payload(o));
    }
    return DCR_OK;
}

/* ---- residual conversion ----------------------------------------------------- */

typedef struct count_ctx {
    owner_t *o;
    const unsigned char *cand;
    unsigned char *tracker;
    size_t es, pos;
    int64_t changed;
    bool fresh; /* as project_ctx_t's */
    dcr_status_t st;
} count_ctx_t;

static void count_run(int64_t src, int64_t dst, int64_t len, void *p)
{
    count_ctx_t *a = p;
    for (int64_t off = 0; off < len && a->st == DCR_OK; off += SUBRUN_MAX) {
        size_t n = (size_t)(len - off < SUBRUN_MAX ? len - off : SUBRUN_MAX), k = 0;
        a->st = owner_detect(a->o, a->cand + (size_t)(src + off) * a->es,
                             a->tracker + a->pos * a->es, n, a->es, false, &k);
        if (a->st != DCR_OK) return;
        a->changed += (int64_t)k;
        a->fresh &= update_in_place(a->o, a->tracker + a->pos * a->es,
                                    a->cand + (size_t)(src + off) * a->es, k, a->es);
        a->pos += n;
    }
}

/* Source elements of a residual task whose bits changed: nonzero raises the
 * task's residual flag. Counted in full so N_chg covers residual tasks too. */
static dcr_status_t task_changes(owner_t *o, owned_task_t *ot, int64_t *changed_p)
{
    const dcr_constructor_t *c = o->c;
    const dcr_task_t *t = &c->layout->tasks[ot->task];
    count_ctx_t a = {o,     c->candidate[t->shard]->data, ot->tracker, shard_elem(c, t), 0, 0, true,
                     DCR_OK};
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, o->rank);
    for (int m = 0; m < t->nmaps && a.st == DCR_OK; m++)
        dcr_box_map_foreach_run(&t->maps[m], count_run, &a);
    dcr_trace_end(&span);
    DCR_CHECK(a.st);
    ot->fresh = a.fresh;
    o->stats.compared_elements += dcr_task_numel(t);
    o->stats.changed_elements += a.changed;
    *changed_p = a.changed;
    return DCR_OK;
}

/* Every rank tells every rank which residual tensors its owned tasks flag;
 * the union is the required set U_req, the same on every rank. Mode F
 * rebuilds every tensor without flags. */
static dcr_status_t exchange_flags(owner_t *o, unsigned char *required, size_t ncanon)
{
    dcr_constructor_t *c = o->c;
    if (c->cfg.mode == DCR_MODE_F) {
        for (size_t k = 0; k < ncanon; k++) required[k] = c->assembler[k] >= 0;
        return DCR_OK;
    }
    int32_t *flags = malloc(((size_t)o->nparts + 1) * sizeof(int32_t));
    if (!flags) return dcr_error_set(DCR_ENOMEM, "residual flags");
    size_t n = 0;
    /* A failed comparison still takes part in the exchange (the other
     * owners wait for every rank's flags) and fails the run after it. */
    dcr_status_t dst = DCR_OK;
    for (int i = 0; i < o->nparts && dst == DCR_OK; i++) {
        int64_t changed = 0;
        dst = task_changes(o, &o->parts[i], &changed);
        if (dst == DCR_OK && changed) flags[n++] = c->layout->tasks[o->parts[i].task].canonical;
    }
    dcr_status_t st = DCR_OK;
    for (int r = 0; r < c->world && st == DCR_OK; r++)
        st = dcr_group_send(o->group, r, TAG_FLAGS, flags, n * sizeof(int32_t));
    free(flags);
    DCR_CHECK(st);
    for (int r = 0; r < c->world; r++) {
        dcr_group_msg_t msg;
        DCR_CHECK(dcr_group_recv(o->group, TAG_FLAGS, GROUP_TIMEOUT_MS, &msg));
        const int32_t *got = msg.data;
        for (size_t k = 0; k < msg.len / sizeof(int32_t); k++)
            if (got[k] >= 0 && (size_t)got[k] < ncanon) required[got[k]] = 1;
        dcr_group_release(o->group, &msg);
    }
    for (size_t k = 0; k < ncanon; k++) /* a conversion's derived outputs follow its input */
        if (c->layout->derived_from[k] >= 0) required[k] = required[c->layout->derived_from[k]];
    return dst;
}

/* Grows the part message buffer to hold at least need bytes. */
static dcr_status_t pack_reserve(owner_t *o, size_t need, const char *what)
{
    if (need <= o->pack_cap) return DCR_OK;
    unsigned char *grown = realloc(o->pack, need);
    if (!grown) return dcr_error_set(DCR_ENOMEM, "residual parts for %s", what);
    o->pack = grown;
    o->pack_cap = need;
    return DCR_OK;
}

/* Converts this owner's parts of required tensors and sends them to their
 * assemblers, packed: one message holds every part for one destination
 * (records of a task id and its box, whose length the layout gives), cut at
 * PACK_BYTES so that the first parts travel while later ones are packed.
 * One message per part cost a hand-off (an MPI match, a wake-up of the
 * assembler) per part on the critical path as processes. Destinations are
 * taken from the next rank on, so ranks do not all start with rank 0. */
static dcr_status_t send_parts(owner_t *o, const unsigned char *required)
{
    dcr_constructor_t *c = o->c;
    for (int step = 1; step <= c->world; step++) {
        int dst = (o->rank + step) % c->world;
        size_t used = 0;
        for (int i = 0; i < o->nparts; i++) {
            const dcr_task_t *t = &c->layout->tasks[o->parts[i].task];
            if (!required[t->canonical] || c->assembler[t->canonical] != dst) continue;
            size_t bytes = (size_t)dcr_task_numel(t) * shard_elem(c, t);
            size_t record = sizeof(int32_t) + bytes;
            if (used > 0 && used + record > PACK_BYTES) { /* send what is packed */
                DCR_CHECK(dcr_group_send(o->group, dst, TAG_PART, o->pack, used));
                used = 0;
            }
            DCR_CHECK(pack_reserve(o, used + record, t->name));
            int32_t id = o->parts[i].task;
            memcpy(o->pack + used, &id, sizeof(id));
            dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_RESIDUAL, DCR_ACTOR_OWNER, o->rank);
            dcr_task_pack(c->layout, t, c->candidate[t->shard]->data, o->pack + used + sizeof(id));
            dcr_trace_end(&span);
            used += record;
        }
        if (used > 0) DCR_CHECK(dcr_group_send(o->group, dst, TAG_PART, o->pack, used));
    }
    return DCR_OK;
}

typedef struct place_ctx {
    const unsigned char *part;
    unsigned char *assembled, *covered;
    size_t pos, ses, ces;
    dcr_dtype_t sdt, cdt;
    int64_t conflict; /* first element where overlapping parts disagree, or -1 */
} place_ctx_t;

static void place_run(int64_t src, int64_t dst, int64_t len, void *p)
{
    place_ctx_t *a = p;
    unsigned char *out = a->assembled + (size_t)dst * a->ces;
    const unsigned char *in = a->part + a->pos * a->ses;
    a->pos += (size_t)len;
    if (!a->covered) { /* a tiled tensor: coverage proven at create */
        dcr_convert(out, a->cdt, in, a->sdt, (size_t)len);
        return;
    }
    unsigned char *cov = a->covered + dst;
    if (!memchr(cov, 1, (size_t)len)) { /* the common case: nothing placed here yet */
        dcr_convert(out, a->cdt, in, a->sdt, (size_t)len);
        memset(cov, 1, (size_t)len);
        return;
    }
    for (int64_t k = 0; k < len; k++) { /* overlapping parts must agree bit for bit */
        unsigned char value[8];
        dcr_convert(value, a->cdt, in + (size_t)k * a->ses, a->sdt, 1);
        if (cov[k] && memcmp(out + (size_t)k * a->ces, value, a->ces) && a->conflict < 0)
            a->conflict = dst + k;
        memcpy(out + (size_t)k * a->ces, value, a->ces);
        cov[k] = 1;
    }
}

static residual_slot_t *slot_for(dcr_constructor_t *c, int canonical)
{
    return &c->owners[c->assembler[canonical]].slots[c->slot_of[canonical]];
}

/* Places a task's elements (box order, shard dtype) into its tensor under
 * assembly: the canonical tensor itself, or for a converted tensor the
 * staging tensor in the shards' dtype. The slot's coverage map, cleared
 * before the assembly began, tracks which elements some part has written. */
static dcr_status_t place_box(dcr_constructor_t *c, const dcr_task_t *t, const void *box)
{
    const dcr_tensor_desc_t *d = canon(c, t->canonical);
    const dcr_conversion_t *conv = &c->layout->conversions[t->canonical];
    residual_slot_t *slot = slot_for(c, t->canonical);
    dcr_dtype_t target = conv->kind == DCR_CONVERSION_NONE ? d->dtype : conv->assembled_dtype;
    void **buf = conv->kind == DCR_CONVERSION_NONE ? &slot->assembled : &slot->staging;
    size_t bytes = (size_t)dcr_desc_numel(d) * dcr_dtype_size(target);
    if (!*buf) *buf = malloc(bytes ? bytes : 1);
    if (!slot->tiled && !slot->covered) slot->covered = calloc((size_t)dcr_desc_numel(d) + 1, 1);
    if (!*buf || (!slot->tiled && !slot->covered))
        return dcr_error_set(DCR_ENOMEM, "assembling %s", d->name);
    place_ctx_t a = {box,
                     *buf,
                     slot->tiled ? NULL : slot->covered,
                     0,
                     shard_elem(c, t),
                     dcr_dtype_size(target),
                     c->layout->shards[t->shard].desc.dtype,
                     target,
                     -1};
    for (int m = 0; m < t->nmaps; m++) dcr_box_map_foreach_run(&t->maps[m], place_run, &a);
    if (a.conflict >= 0)
        return dcr_error_set(DCR_EMISMATCH, "%s element %lld: overlapping residual parts disagree",
                             d->name, (long long)a.conflict);
    return DCR_OK;
}

/* Places one part record of a received message: a task this rank
 * assembles, of a required tensor, the first time in this run (what a tiled
 * tensor's coverage rests on). Its length is the layout's: *used_p grows by
 * the record's bytes. */
static dcr_status_t place_record(owner_t *o, const unsigned char *rec, size_t left,
                                 const unsigned char *required, size_t *used_p)
{
    dcr_constructor_t *c = o->c;
    int32_t id;
    if (left < sizeof(id)) return dcr_error_set(DCR_EINVAL, "residual part of %zu bytes", left);
    memcpy(&id, rec, sizeof(id));
    if (id < 0 || id >= c->layout->ntasks)
        return dcr_error_set(DCR_EINVAL, "residual part for task %d", id);
    const dcr_task_t *t = &c->layout->tasks[id];
    size_t bytes = (size_t)dcr_task_numel(t) * shard_elem(c, t);
    if (c->assembler[t->canonical] != o->rank || left - sizeof(id) < bytes)
        return dcr_error_set(DCR_EINVAL, "residual part %s sent to the wrong rank or truncated",
                             t->name);
    if (!required[t->canonical] || o->part_seen[id])
        return dcr_error_set(DCR_EINVAL, "residual part %s not expected in this run or repeated",
                             t->name);
    o->part_seen[id] = 1;
    *used_p += sizeof(id) + bytes;
    return place_box(c, t, rec + sizeof(id));
}

/* Places every part record of one received message; *placed_p counts them. */
static dcr_status_t place_parts(owner_t *o, const dcr_group_msg_t *msg,
                                const unsigned char *required, int *placed_p)
{
    const unsigned char *data = msg->data;
    if (msg->len == 0) return dcr_error_set(DCR_EINVAL, "residual part message of 0 bytes");
    for (size_t used = 0; used < msg->len; (*placed_p)++)
        DCR_CHECK(place_record(o, data + used, msg->len - used, required, &used));
    return DCR_OK;
}

/* After every part arrived: every element covered, then the conversion of a
 * converted tensor, which also writes its derived outputs (FP8 scales). */
static dcr_status_t finish_assembly(dcr_constructor_t *c, int canonical)
{
    const dcr_tensor_desc_t *d = canon(c, canonical);
    residual_slot_t *slot = slot_for(c, canonical);
    size_t n = (size_t)dcr_desc_numel(d);
    const unsigned char *gap = slot->covered ? memchr(slot->covered, 0, n) : NULL;
    if (n && !slot->tiled && (!slot->covered || gap))
        return dcr_error_set(DCR_EMISMATCH, "%s element %lld: no residual part covers it", d->name,
                             (long long)(gap ? gap - slot->covered : 0));
    const dcr_conversion_t *conv = &c->layout->conversions[canonical];
    if (conv->kind == DCR_CONVERSION_NONE) return DCR_OK;
    residual_slot_t *scale = slot_for(c, conv->scale);
    size_t bytes = dcr_desc_bytes(d), scale_bytes = dcr_desc_bytes(canon(c, conv->scale));
    if (!slot->assembled) slot->assembled = malloc(bytes ? bytes : 1);
    if (!scale->assembled) scale->assembled = malloc(scale_bytes ? scale_bytes : 1);
    if (!slot->assembled || !scale->assembled)
        return dcr_error_set(DCR_ENOMEM, "converting %s", d->name);
    dcr_conversion_apply(c->layout, canonical, slot->staging, slot->assembled, scale->assembled);
    return DCR_OK;
}

/* Compares an assembled tensor with R^v and emits its changed elements as
 * overwrites (residual conversions may change any output, so no XOR). */
static dcr_status_t emit_residual(owner_t *o, residual_slot_t *slot)
{
    const dcr_tensor_desc_t *d = canon(o->c, slot->canonical);
    int64_t n = dcr_desc_numel(d);
    size_t es = dcr_dtype_size(d->dtype);
    o->item.count = 0;
    o->item.value_size = es;
    const unsigned char *now = slot->assembled, *before = slot->baseline;
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_COMPARE, DCR_ACTOR_OWNER, o->rank);
    for (int64_t off = 0; off < n; off += SUBRUN_MAX) {
        size_t len = (size_t)(n - off < SUBRUN_MAX ? n - off : SUBRUN_MAX);
        size_t nchanged = dcr_detect_changes(now + (size_t)off * es, before + (size_t)off * es, len,
                                             es, o->changed);
        DCR_CHECK(item_reserve(&o->item, nchanged));
        for (size_t i = 0; i < nchanged; i++) {
            size_t at = (size_t)off + o->changed[i];
            o->item.indices[o->item.count] = (int64_t)at;
            memcpy(o->item.values + o->item.count * es, now + at * es, es);
            o->item.count++;
        }
    }
    dcr_trace_end(&span);
    if (o->c->cfg.mode == DCR_MODE_F) o->stats.compared_elements += n;
    int emitted = o->item.count > 0;
    DCR_CHECK(emit_item(o, slot->canonical, DCR_ENCODING_OVERWRITE));
    if (emitted) o->bucket_input += dcr_desc_bytes(d);
    if (o->bucket_input >= bucket_target(o)) DCR_CHECK(flush_payload(o));
    return DCR_OK;
}

/* Receives every part of the required tensors this rank assembles, converts,
 * then compares each (derived outputs included) with its residual baseline. */
static dcr_status_t assemble_residuals(owner_t *o, const unsigned char *required)
{
    dcr_constructor_t *c = o->c;
    int expected = 0;
    memset(o->part_seen, 0, (size_t)c->layout->ntasks);
    for (int s = 0; s < o->nslots; s++) {
        residual_slot_t *slot = &o->slots[s];
        if (!required[slot->canonical]) continue;
        expected += slot->nparts;
        if (slot->covered)
            memset(slot->covered, 0, (size_t)dcr_desc_numel(canon(c, slot->canonical)));
    }
    dcr_status_t st = DCR_OK;
    for (int placed = 0; placed < expected && st == DCR_OK;) {
        dcr_group_msg_t msg;
        st = dcr_group_recv(o->group, TAG_PART, GROUP_TIMEOUT_MS, &msg);
        if (st != DCR_OK) break;
        dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_RESIDUAL, DCR_ACTOR_OWNER, o->rank);
        st = place_parts(o, &msg, required, &placed);
        dcr_trace_end(&span);
        dcr_group_release(o->group, &msg);
    }
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_RESIDUAL, DCR_ACTOR_OWNER, o->rank);
    for (int s = 0; s < o->nslots && st == DCR_OK; s++)
        if (required[o->slots[s].canonical] && o->slots[s].nparts > 0)
            st = finish_assembly(c, o->slots[s].canonical);
    dcr_trace_end(&span);
    for (int s = 0; s < o->nslots && st == DCR_OK; s++) {
        if (!required[o->slots[s].canonical]) continue;
        o->stats.residual_tensors++;
        st = emit_residual(o, &o->slots[s]);
    }
    return st;
}

/* After the baseline assembly proved that parts cover every element: a
 * tensor whose parts hold exactly numel elements in all has none placed
 * twice, so it is tiled and drops its coverage map. */
static dcr_status_t mark_tiled(dcr_constructor_t *c)
{
    size_t n = dcr_inventory_count(c->layout->inventory);
    int64_t *placed = calloc(n + 1, sizeof(*placed));
    if (!placed) return dcr_error_set(DCR_ENOMEM, "residual coverage");
    for (int i = 0; i < c->layout->ntasks; i++)
        placed[c->layout->tasks[i].canonical] += dcr_task_numel(&c->layout->tasks[i]);
    for (size_t k = 0; k < n; k++) {
        if (c->assembler[k] < 0 || slot_for(c, (int)k)->nparts == 0) continue;
        residual_slot_t *slot = slot_for(c, (int)k);
        slot->tiled = placed[k] == dcr_desc_numel(canon(c, (int)k));
        if (slot->tiled) {
            free(slot->covered);
            slot->covered = NULL;
        }
    }
    free(placed);
    return DCR_OK;
}

/* The residual baseline R^v: every assembled tensor built from the committed
 * shards the way a run builds it (parts placed, then converted). */
static dcr_status_t build_residual_baseline(dcr_constructor_t *c, dcr_storage_t *const *baseline)
{
    size_t n = dcr_inventory_count(c->layout->inventory);
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < c->layout->ntasks && st == DCR_OK; i++) {
        const dcr_task_t *t = &c->layout->tasks[i];
        if (c->assembler[t->canonical] < 0) continue;
        void *box = malloc((size_t)dcr_task_numel(t) * shard_elem(c, t) + 1);
        if (!box) {
            st = dcr_error_set(DCR_ENOMEM, "residual baseline of %s", t->name);
            break;
        }
        dcr_task_pack(c->layout, t, baseline[t->shard]->data, box);
        st = place_box(c, t, box);
        free(box);
    }
    for (size_t k = 0; k < n && st == DCR_OK; k++)
        if (c->assembler[k] >= 0 && slot_for(c, (int)k)->nparts > 0)
            st = finish_assembly(c, (int)k);
    if (st == DCR_OK) st = mark_tiled(c);
    for (size_t k = 0; k < n; k++) {
        if (st != DCR_OK || c->assembler[k] < 0) continue;
        residual_slot_t *slot = slot_for(c, (int)k); /* the assembled version becomes R^v */
        slot->baseline = slot->assembled;
        slot->assembled = NULL;
        c->baseline_bytes += dcr_desc_bytes(canon(c, (int)k));
    }
    return st;
}

/* ---- one run ------------------------------------------------------------------ */

typedef struct owner_run_ctx {
    owner_t *o;
    unsigned char *required; /* this owner's copy of U_req */
} owner_run_ctx_t;

static dcr_status_t owner_run(owner_t *o, unsigned char *required)
{
    size_t ncanon = dcr_inventory_count(o->c->layout->inventory);
    DCR_CHECK(exchange_flags(o, required, ncanon));
    DCR_CHECK(send_parts(o, required));
    DCR_CHECK(project_direct(o));
    DCR_CHECK(assemble_residuals(o, required));
    return flush_payload(o);
}

/* Waits at the start gate; true when the run goes ahead. */
static bool start_gate_wait(dcr_constructor_t *c)
{
    pthread_mutex_lock(&c->gate_mu);
    while (c->gate == 0) pthread_cond_wait(&c->gate_cv, &c->gate_mu);
    bool go = c->gate > 0;
    pthread_mutex_unlock(&c->gate_mu);
    return go;
}

static void start_gate_open(dcr_constructor_t *c, int state)
{
    pthread_mutex_lock(&c->gate_mu);
    c->gate = state;
    pthread_cond_broadcast(&c->gate_cv);
    pthread_mutex_unlock(&c->gate_mu);
}

static dcr_status_t owner_main(void *arg)
{
    owner_run_ctx_t *r = arg;
    if (!start_gate_wait(r->o->c)) {
        dcr_queue_close(r->o->queue);
        return DCR_OK;
    }
    dcr_status_t st = owner_run(r->o, r->required);
    if (st != DCR_OK) dcr_error_prefix("owner %d: ", r->o->rank);
    dcr_queue_close(r->o->queue);
    return st;
}

/* Drains the owner's finished payloads into the sink, so that the owner
 * builds bucket l+1 while payload l is being sent. After a failed submit it
 * still drains (the owner must never block on a full queue) but sends
 * nothing more; that first failure is its result, kept aside because the
 * pop that ends the loop overwrites the thread's detail. */
static dcr_status_t sender_main(void *arg)
{
    owner_t *o = arg;
    const dcr_payload_sink_t *sink = o->c->sink;
    dcr_error_t failed = {0};
    for (;;) {
        void *item;
        if (dcr_queue_pop(o->queue, -1, &item) != DCR_OK) break;
        pending_payload_t *p = item;
        if (failed.status == DCR_OK && sink && sink->submit) {
            dcr_status_t st = sink->submit(sink->ctx, o->rank, p->id, p->data, p->len);
            if (st != DCR_OK) {
                dcr_error_prefix("owner %d sending payload %llu: ", o->rank,
                                 (unsigned long long)p->id);
                dcr_error_save(&failed, st);
            }
        }
        free(p);
    }
    return dcr_error_restore(&failed);
}

void dcr_construct_stats_add(dcr_construct_stats_t *sum, const dcr_construct_stats_t *s)
{
    sum->compared_elements += s->compared_elements;
    sum->changed_elements += s->changed_elements;
    sum->records += s->records;
    sum->raw_changed_value_bytes += s->raw_changed_value_bytes;
    sum->payload_bytes += s->payload_bytes;
    sum->body_raw_bytes += s->body_raw_bytes;
    sum->value_bytes += s->value_bytes;
    sum->payloads += s->payloads;
    sum->xor_items += s->xor_items;
    sum->overwrite_items += s->overwrite_items;
    sum->residual_tensors += s->residual_tensors;
}

/* Keeps status, with the calling thread's detail, in *first unless an
 * earlier failure is there already. */
static void keep_first(dcr_error_t *first, dcr_status_t status)
{
    if (first->status == DCR_OK && status != DCR_OK) dcr_error_save(first, status);
}

typedef struct run_threads {
    dcr_thread_t *owners, *senders;
    owner_run_ctx_t *ctx;
    unsigned char *required; /* world x ncanon */
    dcr_group_t **group;
} run_threads_t;

static void free_run(run_threads_t *rt, dcr_constructor_t *c)
{
    for (int r = 0; c->owners && r < c->world; r++) {
        dcr_queue_destroy(c->owners[r].queue);
        c->owners[r].queue = NULL;
        if (rt->group && !c->ext) dcr_group_destroy(rt->group[r]);
    }
    free(rt->owners);
    free(rt->senders);
    free(rt->ctx);
    free(rt->required);
    free(rt->group);
}

/* Whether owner r runs in this process. */
static bool is_local(const dcr_constructor_t *c, int r)
{
    return c->ext == NULL || r == dcr_group_rank(c->ext);
}

static dcr_status_t start_run(dcr_constructor_t *c, run_threads_t *rt, size_t ncanon)
{
    int w = c->world;
    rt->owners = calloc((size_t)w, sizeof(dcr_thread_t));
    rt->senders = calloc((size_t)w, sizeof(dcr_thread_t));
    rt->ctx = calloc((size_t)w, sizeof(owner_run_ctx_t));
    rt->required = calloc((size_t)w * (ncanon + 1), 1);
    rt->group = calloc((size_t)w, sizeof(dcr_group_t *));
    if (!rt->owners || !rt->senders || !rt->ctx || !rt->required || !rt->group)
        return dcr_error_set(DCR_ENOMEM, "run state for %d owners", w);
    int created = 0;
    if (c->ext)
        rt->group[dcr_group_rank(c->ext)] = c->ext;
    else
        DCR_CHECK(dcr_group_create("inproc", w, rt->group, &created));
    for (int r = 0; r < w; r++) {
        if (!is_local(c, r)) continue;
        owner_t *o = &c->owners[r];
        memset(&o->stats, 0, sizeof(o->stats));
        o->group = rt->group[r];
        o->next_payload = 0;
        o->bucket_input = 0;
        dcr_encoder_reset(o->enc);
        if (c->keep) DCR_CHECK(dcr__kept_begin(&o->kept, c->tau));
        DCR_CHECK(dcr_queue_create((size_t)c->cfg.queue_depth, &o->queue));
        rt->ctx[r] = (owner_run_ctx_t){o, rt->required + (size_t)r * (ncanon + 1)};
    }
    return DCR_OK;
}

static void clear_fresh(owner_t *o)
{
    for (int i = 0; i < o->ndirect; i++) o->direct[i].fresh = false;
    for (int i = 0; i < o->nparts; i++) o->parts[i].fresh = false;
}

/* Puts back what a run that was not committed wrote into owner o's
 * trackers, so that this run compares with B^v again (retries, runs over
 * another candidate, runs after a failed one). */
static void restore_baseline(owner_t *o)
{
    clear_fresh(o);
    if (o->undo.len == 0) {
        dcr__undo_forget(&o->undo);
        return;
    }
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, o->rank);
    dcr__undo_apply(&o->undo);
    dcr_trace_end(&span);
}

dcr_status_t dcr_constructor_run(dcr_constructor_t *c, dcr_storage_t *const *candidate,
                                 uint64_t tau, const uint8_t *xor_allowed, bool all_overwrite,
                                 const dcr_payload_sink_t *sink, dcr_construct_stats_t *out_stats_p)
{
    size_t ncanon = dcr_inventory_count(c->layout->inventory);
    for (int s = 0; s < c->layout->nshards; s++) {
        if (!candidate[s] || candidate[s]->bytes < dcr_desc_bytes(&c->layout->shards[s].desc))
            return dcr_error_set(DCR_EINVAL, "candidate shard %s missing or too small",
                                 c->layout->shards[s].desc.name);
        c->candidate[s] = candidate[s];
    }
    c->tau = tau;
    c->xor_allowed = xor_allowed;
    c->all_overwrite = all_overwrite;
    c->sink = sink;
    /* The owners of this process: [base, base + local). */
    int base = c->ext ? dcr_group_rank(c->ext) : 0, local = c->ext ? 1 : c->world;
    for (int r = base; r < base + local; r++) restore_baseline(&c->owners[r]);
    run_threads_t rt = {0};
    double t0 = dcr_clock_s();
    dcr_status_t st = start_run(c, &rt, ncanon);
    int owners = 0, senders = 0;
    c->gate = 0;
    for (int r = base; st == DCR_OK && r < base + local; r++) {
        if (dcr_thread_run(&rt.senders[r], DCR_THREAD_TRANSPORT, sender_main, &c->owners[r],
                           "dcr-send-%d", r))
            break;
        senders++;
        if (dcr_thread_run(&rt.owners[r], DCR_THREAD_OWNER, owner_main, &rt.ctx[r], "dcr-owner-%d",
                           r))
            break;
        owners++;
    }
    if (st == DCR_OK && owners < local) {
        st = dcr_error_set(DCR_ENOMEM, "construction: cannot start the threads of owner %d",
                           base + owners);
        for (int r = base + owners; r < base + senders; r++) dcr_queue_close(c->owners[r].queue);
    }
    start_gate_open(c, st == DCR_OK ? 1 : -1);
    /* The run's failure is the first one in rank order, an owner's before
     * its sender's; threads never started join as DCR_OK. */
    dcr_error_t first = {0};
    for (int r = base; r < base + local; r++) {
        if (rt.owners) keep_first(&first, dcr_thread_join(&rt.owners[r]));
        if (rt.senders) keep_first(&first, dcr_thread_join(&rt.senders[r]));
    }
    if (st == DCR_OK) st = dcr_error_restore(&first);
    dcr_construct_stats_t sum = {0};
    sum.construction_s = dcr_clock_s() - t0;
    for (int r = base; st == DCR_OK && r < base + local; r++)
        dcr_construct_stats_add(&sum, &c->owners[r].stats);
    /* U_req is the same on every rank: this process's first owner's copy. */
    if (st == DCR_OK) memcpy(c->required, rt.required + (size_t)base * (ncanon + 1), ncanon);
    free_run(&rt, c);
    if (st != DCR_OK) {
        c->candidate[0] = NULL; /* no commit from a failed run */
        return st;
    }
    if (out_stats_p) *out_stats_p = sum;
    return DCR_OK;
}

/* The committed run's records become the repair set (after the baseline
 * update, outside the window's critical work: only pointers move). */
static dcr_status_t take_kept(dcr_constructor_t *c)
{
    int base = c->ext ? dcr_group_rank(c->ext) : 0, local = c->ext ? 1 : c->world;
    dcr__kept_t *kept = malloc((size_t)local * sizeof(*kept));
    int *ranks = malloc((size_t)local * sizeof(int));
    if (!kept || !ranks) {
        free(kept);
        free(ranks);
        return dcr_error_set(DCR_ENOMEM, "repair records");
    }
    for (int i = 0; i < local; i++) {
        kept[i] = c->owners[base + i].kept;
        ranks[i] = base + i;
    }
    dcr_repair_records_destroy(c->repair);
    c->repair = NULL;
    dcr_status_t st = dcr__repair_from_kept(c->layout->inventory, &c->cfg.payload_key, kept, ranks,
                                            local, &c->repair);
    for (int i = 0; i < local; i++) c->owners[base + i].kept = (dcr__kept_t){0};
    free(kept);
    free(ranks);
    return st;
}

/* Owner r's share of the baseline update: its trackers take the candidate
 * (those the run updated in place hold it already), its assembled residual
 * tensors become R^{v+1}. */
static dcr_status_t commit_owner(dcr_constructor_t *c, int r)
{
    owner_t *o = &c->owners[r];
    dcr_status_t st = DCR_OK;
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_BASELINE, DCR_ACTOR_OWNER, r);
    for (int pass = 0; pass < 2; pass++) {
        owned_task_t *list = pass ? o->parts : o->direct;
        int n = pass ? o->nparts : o->ndirect;
        for (int i = 0; list && i < n && st == DCR_OK; i++) {
            if (!list[i].tracker || list[i].fresh) continue;
            const dcr_task_t *t = &c->layout->tasks[list[i].task];
            st = pack_tracker(c, o, t, c->candidate[t->shard]->data, list[i].tracker);
        }
    }
    for (int s = 0; s < o->nslots; s++) {
        residual_slot_t *slot = &o->slots[s];
        if (!c->required[slot->canonical] || !slot->assembled) continue;
        void *old = slot->baseline; /* swap: the assembled candidate becomes R^{v+1} */
        slot->baseline = slot->assembled;
        slot->assembled = old;
    }
    dcr__undo_forget(&o->undo); /* the words it logged are committed */
    clear_fresh(o);
    dcr_trace_end(&span);
    return st;
}

/* Bytes owner o's commit copies: trackers the last run did not update in place. */
static size_t commit_bytes(const dcr_constructor_t *c, const owner_t *o)
{
    size_t bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        const owned_task_t *list = pass ? o->parts : o->direct;
        int n = pass ? o->nparts : o->ndirect;
        for (int i = 0; i < n; i++) {
            if (!list[i].tracker || list[i].fresh) continue;
            const dcr_task_t *t = &c->layout->tasks[list[i].task];
            bytes += (size_t)dcr_task_numel(t) * shard_elem(c, t);
        }
    }
    return bytes;
}

/* Below this much copying a commit runs on the calling thread: starting a
 * thread per owner would cost more than the copy. */
#define COMMIT_THREAD_BYTES ((size_t)1 << 20)

typedef struct commit_ctx {
    dcr_constructor_t *c;
    int rank;
} commit_ctx_t;

static dcr_status_t commit_main(void *arg)
{
    commit_ctx_t *x = arg;
    return commit_owner(x->c, x->rank);
}

dcr_status_t dcr_constructor_commit(dcr_constructor_t *c)
{
    if (c->layout->nshards > 0 && !c->candidate[0])
        return dcr_error_set(DCR_EINVAL, "baseline update without a successful construction run");
    /* The owners of this process update their shares at once (the update
     * is on the refit's path, before t1) when there is copying left to do;
     * an owner whose thread does not start updates on this one. A tracker upload that fails (a
     * device error) leaves B^v partly updated: the error is returned and the constructor must be
     * rebuilt from the committed shards. */
    int base = c->ext ? dcr_group_rank(c->ext) : 0, local = c->ext ? 1 : c->world;
    size_t copy = 0;
    for (int i = 0; i < local; i++) copy += commit_bytes(c, &c->owners[base + i]);
    bool threads = local > 1 && copy >= COMMIT_THREAD_BYTES;
    dcr_thread_t *th = threads ? calloc((size_t)local, sizeof(*th)) : NULL;
    commit_ctx_t *ctx = threads ? calloc((size_t)local, sizeof(*ctx)) : NULL;
    dcr_error_t first = {0};
    for (int i = 0; i < local; i++) {
        bool started = false;
        if (th && ctx) {
            ctx[i] = (commit_ctx_t){c, base + i};
            started = dcr_thread_run(&th[i], DCR_THREAD_OWNER, commit_main, &ctx[i],
                                     "dcr-commit-%d", base + i) == 0;
        }
        if (!started) keep_first(&first, commit_owner(c, base + i));
    }
    for (int i = 0; th && i < local; i++) keep_first(&first, dcr_thread_join(&th[i]));
    free(th);
    free(ctx);
    dcr_status_t st = dcr_error_restore(&first);
    c->candidate[0] = NULL;
    if (st == DCR_OK && c->keep) st = take_kept(c);
    return st;
}

void dcr__constructor_set_undo_limit(dcr_constructor_t *c, size_t bytes)
{
    for (int r = 0; r < c->world; r++) {
        dcr__undo_free(&c->owners[r].undo);
        c->owners[r].undo.limit = c->dev_host && c->cfg.mode != DCR_MODE_F ? bytes : 0;
    }
}

const void *dcr__constructor_tracker(const dcr_constructor_t *c, int task, bool *fresh_p)
{
    const owner_t *o = &c->owners[c->layout->tasks[task].owner];
    for (int pass = 0; pass < 2; pass++) {
        const owned_task_t *list = pass ? o->parts : o->direct;
        int n = pass ? o->nparts : o->ndirect;
        for (int i = 0; i < n; i++) {
            if (list[i].task != task) continue;
            *fresh_p = list[i].fresh;
            return c->dev_host ? list[i].tracker : NULL;
        }
    }
    *fresh_p = false;
    return NULL;
}

void dcr_constructor_keep_records(dcr_constructor_t *c, bool on)
{
    if (!c) return;
    c->keep = on;
    if (on) return;
    for (int r = 0; r < c->world; r++) dcr__kept_clear(&c->owners[r].kept);
    dcr_repair_records_destroy(c->repair);
    c->repair = NULL;
}

void dcr_constructor_take_repair(dcr_constructor_t *c, dcr_repair_records_t **out_p)
{
    *out_p = c ? c->repair : NULL;
    if (c) c->repair = NULL;
}

dcr_status_t dcr_constructor_set_group(dcr_constructor_t *c, dcr_group_t *g)
{
    if (!c) return dcr_error_set(DCR_EINVAL, "constructor_set_group: c is NULL");
    if (g && dcr_group_size(g) != c->world)
        return dcr_error_set(DCR_EINVAL,
                             "constructor_set_group: a group of %d ranks for %d owners; expected "
                             "one rank per owner",
                             dcr_group_size(g), c->world);
    c->ext = g;
    return DCR_OK;
}
