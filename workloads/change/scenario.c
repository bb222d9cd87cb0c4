/* Scenarios: model + layout setup, synthetic weights, uniform change injection. */
#include "workloads/change/scenario.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/rng.h"
#include "workloads/change/budget.h"
#include "workloads/change/change_profile.h"

dcr_scenario_spec_t dcr_scenario_spec_default(void)
{
    dcr_scenario_spec_t spec = {
        DCR_MODEL_DEFAULT, 1, 0, dcr_train_config_default(), DCR_MAPPING_EXTENDED, 1, 0, false, 0};
    return spec;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int lcm(int a, int b)
{
    return a / gcd(a, b) * b;
}

/* The source layout's metadata before it is built: every rank holds at most
 * one shard of each tensor, and each holder costs a 4-byte entry; shards and
 * tasks themselves a few hundred bytes per tensor and model-parallel slice
 * (measured: 25013 shards and 37493 tasks of the full Qwen3-30B-A3B take
 * about 22 MB). */
static dcr_status_t check_layout_memory(const dcr_scenario_t *s, int64_t world)
{
    int64_t tensors = (int64_t)dcr_inventory_count(s->inventory);
    int64_t slices = (int64_t)s->train.tp * s->train.pp * s->train.ep * s->train.etp;
    if (slices > world) slices = world;
    dcr_memory_estimate_t e = {0};
    e.checkpoint = dcr_inventory_bytes(s->inventory);
    e.process = dcr_rss_bytes();
    e.shards = tensors * world * 4 + tensors * slices * 1024;
    return dcr_memory_check("source layout", &e, s->max_memory);
}

dcr_status_t dcr_scenario_create(const dcr_scenario_spec_t *spec, dcr_scenario_t **out_p)
{
    if (spec->scale < 1 || spec->layers < 0 || spec->align_extra < 1)
        return dcr_error_set(DCR_EINVAL, "scale must be >= 1 and layers >= 0");
    dcr_scenario_t *s = calloc(1, sizeof(*s));
    if (!s) return dcr_error_set(DCR_ENOMEM, "scenario");
    dcr_status_t st;
    s->train = spec->train;
    s->mapping = spec->mapping;
    s->max_memory = spec->max_memory > 0 ? spec->max_memory : dcr_memory_budget_default();
    /* In 64 bits: nodes x GPUs overflows an int long before it is refused. */
    int64_t world = (int64_t)spec->train.nodes * spec->train.gpus_per_node;
    if (world > DCR_SCENARIO_WORLD_MAX) {
        st = dcr_error_set(DCR_EINVAL,
                           "--train-nodes %d x --gpus-per-node %d = %lld training ranks: at most "
                           "%d",
                           spec->train.nodes, spec->train.gpus_per_node, (long long)world,
                           DCR_SCENARIO_WORLD_MAX);
        goto fail;
    }
    DCR_CHECK_GOTO(dcr_model_load(spec->model, &s->model), st, fail);
    /* A command's default layer count is a cap: a smaller model keeps its
     * layers, and no error names a --layers the user never gave. */
    if (spec->layers && !(spec->layers_is_default && spec->layers >= s->model.layers))
        DCR_CHECK_GOTO(dcr_model_truncate_layers(&s->model, spec->layers), st, fail);
    if (spec->fp8_layers < 0 || spec->fp8_layers > s->model.layers) {
        st = dcr_error_set(DCR_EINVAL, "--fp8-layers %d: the model has %d layers", spec->fp8_layers,
                           s->model.layers);
        goto fail;
    }
    s->model.fp8_layers = spec->fp8_layers;
    if (s->train.etp == 0) s->train.etp = s->model.experts > 0 ? s->train.tp : 1; /* auto */
    /* Multiples of 8 and of every degree keep every split of the scaled sizes exact. */
    int align = lcm(lcm(8, spec->align_extra), lcm(s->train.tp, s->train.etp));
    DCR_CHECK_GOTO(dcr_model_scale(&s->model, spec->scale, align), st, fail);
    DCR_CHECK_GOTO(dcr_train_config_validate(&s->model, &s->train), st, fail);
    DCR_CHECK_GOTO(dcr_model_build_inventory(&s->model, &s->inventory), st, fail);
    DCR_CHECK_GOTO(check_layout_memory(s, world), st, fail);
    DCR_CHECK_GOTO(dcr_megatron_build(&s->model, s->inventory, &s->train, s->mapping, &s->layout),
                   st, fail);
    *out_p = s;
    return DCR_OK;
fail:
    dcr_scenario_destroy(s);
    return st;
}

void dcr_scenario_destroy(dcr_scenario_t *s)
{
    if (!s) return;
    dcr_source_layout_destroy(s->layout);
    dcr_inventory_destroy(s->inventory);
    free(s);
}

void dcr_scenario_free_tensors(dcr_storage_t **tensors, size_t n)
{
    for (size_t i = 0; tensors && i < n; i++) dcr_storage_destroy(tensors[i]);
    free(tensors);
}

static dcr_status_t alloc_descs(size_t n,
                                const dcr_tensor_desc_t *(*desc)(const dcr_scenario_t *, size_t),
                                const dcr_scenario_t *s, dcr_storage_t ***out_p)
{
    dcr_storage_t **t = calloc(n + 1, sizeof(*t));
    if (!t) return dcr_error_set(DCR_ENOMEM, "tensor table of %zu entries", n);
    for (size_t i = 0; i < n; i++) {
        dcr_status_t st = dcr_storage_create(dcr_desc_bytes(desc(s, i)), &t[i]);
        if (st != DCR_OK) {
            dcr_scenario_free_tensors(t, i);
            return st;
        }
    }
    *out_p = t;
    return DCR_OK;
}

static const dcr_tensor_desc_t *canonical_desc(const dcr_scenario_t *s, size_t i)
{
    return dcr_inventory_at(s->inventory, i);
}

static const dcr_tensor_desc_t *shard_desc(const dcr_scenario_t *s, size_t i)
{
    return &s->layout->shards[i].desc;
}

dcr_status_t dcr_scenario_alloc_canonical(const dcr_scenario_t *s, dcr_storage_t ***out_p)
{
    return alloc_descs(dcr_inventory_count(s->inventory), canonical_desc, s, out_p);
}

dcr_status_t dcr_scenario_alloc_shards(const dcr_scenario_t *s, dcr_storage_t ***out_p)
{
    return alloc_descs((size_t)s->layout->nshards, shard_desc, s, out_p);
}

/* ---- synthetic weights ----------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static void store(dcr_dtype_t dtype, void *elem, float v)
{
    dcr_convert(elem, dtype, &v, DCR_DTYPE_FP32, 1);
}

void dcr_scenario_init_weights(const dcr_scenario_t *s, uint64_t seed,
                               dcr_storage_t *const *canonical)
{
    dcr_rng_t root;
    dcr_rng_seed(&root, seed);
    for (size_t c = 0; c < dcr_inventory_count(s->inventory); c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(s->inventory, c);
        dcr_rng_t rng = dcr_rng_split(&root, c);
        size_t es = dcr_dtype_size(d->dtype);
        unsigned char *p = canonical[c]->data;
        int norm = d->ndim == 1 && (strstr(d->name, "norm") != NULL);
        int a_log = ends_with(d->name, "A_log"), dskip = ends_with(d->name, ".D");
        for (int64_t k = 0; k < dcr_desc_numel(d); k++) {
            float v = (float)(0.02 * dcr_rng_normal(&rng));
            if (norm) v = (float)(1.0 + 0.05 * dcr_rng_normal(&rng));
            if (a_log) v = (float)log(1.0 + (double)(k % 16));
            if (dskip) v = 1.0f;
            store(d->dtype, p + (size_t)k * es, v);
        }
    }
}

/* ---- uniform change injection ----------------------------------------------- */

typedef struct inject_ctx {
    dcr_rng_t rng;
    unsigned char *shard;
    dcr_dtype_t dtype;
    size_t es;
    int64_t remaining_pick, remaining_seen; /* selection sampling (Knuth's algorithm S) */
} inject_ctx_t;

/* A relative change of about 1e-2 whose stored bits are guaranteed to differ. */
static void perturb(inject_ctx_t *x, unsigned char *elem)
{
    unsigned char before[8];
    memcpy(before, elem, x->es);
    float v;
    dcr_convert(&v, DCR_DTYPE_FP32, elem, x->dtype, 1);
    float next = v == 0.0f || !isfinite(v) ? (float)(1e-3 * dcr_rng_normal(&x->rng))
                                           : v * (float)(1.0 + 1e-2 * dcr_rng_normal(&x->rng));
    store(x->dtype, elem, next);
    if (!memcmp(before, elem, x->es))
        elem[0] ^= 1; /* rounding kept the bits: flip the last mantissa bit */
}

static void inject_run(int64_t src, int64_t dst, int64_t len, void *p)
{
    inject_ctx_t *x = p;
    for (int64_t k = 0; k < len && x->remaining_pick > 0; k++, x->remaining_seen--) {
        if ((double)dcr_rng_below(&x->rng, (uint64_t)x->remaining_seen) >=
            (double)x->remaining_pick)
            continue;
        perturb(x, x->shard + (size_t)(src + k) * x->es);
        x->remaining_pick--;
    }
}

static int task_is_cast(const dcr_scenario_t *s, const dcr_task_t *t)
{
    return s->layout->shards[t->shard].desc.dtype !=
           dcr_inventory_at(s->inventory, (size_t)t->canonical)->dtype;
}

/* A task's shard elements in box order, or NULL when out of memory. */
static void *save_task(const dcr_source_layout_t *L, const dcr_task_t *t,
                       dcr_storage_t *const *shards)
{
    void *box =
        malloc((size_t)dcr_task_numel(t) * dcr_dtype_size(L->shards[t->shard].desc.dtype) + 1);
    if (box) dcr_task_pack(L, t, shards[t->shard]->data, box);
    return box;
}

static void restore_task(const dcr_source_layout_t *L, const dcr_task_t *t,
                         dcr_storage_t *const *shards, void *box)
{
    dcr_task_unpack(L, t, box, shards[t->shard]->data);
}

/* Rebuilds canonical from the owners' tasks, then re-imports: replicas and
 * padding that no task covers follow the owners' elements. The import goes
 * through the canonical dtype, which would round away changes of wider
 * shards (an FP32 router) and cannot invert an FP8 export, so those tasks'
 * owned elements are restored afterwards. */
static dcr_status_t sync_replicas(const dcr_scenario_t *s, dcr_storage_t *const *shards,
                                  dcr_storage_t *const *canonical)
{
    const dcr_source_layout_t *L = s->layout;
    for (int i = 0; i < L->ntasks; i++)
        dcr_task_scatter(L, &L->tasks[i], shards[L->tasks[i].shard]->data,
                         canonical[L->tasks[i].canonical]->data);
    void **kept = calloc((size_t)L->ntasks + 1, sizeof(void *));
    if (!kept) return dcr_error_set(DCR_ENOMEM, "replica sync");
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < L->ntasks && st == DCR_OK; i++)
        if (task_is_cast(s, &L->tasks[i]) && !(kept[i] = save_task(L, &L->tasks[i], shards)))
            st = dcr_error_set(DCR_ENOMEM, "replica sync");
    if (st == DCR_OK) st = dcr_megatron_import(&s->model, &s->train, L, canonical, shards);
    for (int i = 0; i < L->ntasks; i++) {
        if (kept[i] && st == DCR_OK) restore_task(L, &L->tasks[i], shards, kept[i]);
        free(kept[i]);
    }
    free(kept);
    return st;
}

dcr_status_t dcr_scenario_inject_uniform(const dcr_scenario_t *s, double rate, uint64_t seed,
                                         dcr_storage_t *const *shards,
                                         dcr_storage_t *const *canonical, int64_t *changed_p)
{
    if (!(rate >= 0.0 && rate <= 1.0))
        return dcr_error_set(DCR_EINVAL, "change rate %g is outside [0, 1]", rate);
    const dcr_source_layout_t *L = s->layout;
    dcr_rng_t root;
    dcr_rng_seed(&root, seed);
    int64_t changed = 0;
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        int64_t n = dcr_task_numel(t), k = llround(rate * (double)n);
        inject_ctx_t x = {dcr_rng_split(&root, (uint64_t)i),
                          shards[t->shard]->data,
                          L->shards[t->shard].desc.dtype,
                          dcr_dtype_size(L->shards[t->shard].desc.dtype),
                          k,
                          n};
        for (int m = 0; m < t->nmaps && x.remaining_pick > 0; m++)
            dcr_box_map_foreach_run(&t->maps[m], inject_run, &x);
        changed += k;
    }
    DCR_CHECK(sync_replicas(s, shards, canonical));
    *changed_p = changed;
    return DCR_OK;
}

/* ---- AdamW trajectories ------------------------------------------------------ */

/* Per owned element (one per unique source element): the FP32 master weight
 * and Adam's two moments, in each task's box order. */
typedef struct adamw_task {
    float *master, *m, *v;
} adamw_task_t;

struct dcr_adamw {
    const dcr_scenario_t *s;
    double lr;
    uint64_t seed;
    int step;
    adamw_task_t *tasks;
};

#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS   1e-8

dcr_status_t dcr_adamw_create(const dcr_scenario_t *s, dcr_storage_t *const *shards, double lr,
                              uint64_t seed, dcr_adamw_t **out_p)
{
    if (!(lr > 0.0 && lr < 1.0))
        return dcr_error_set(DCR_EINVAL, "learning rate %g is outside (0, 1)", lr);
    const dcr_source_layout_t *L = s->layout;
    dcr_adamw_t *a = calloc(1, sizeof(*a));
    if (!a || !(a->tasks = calloc((size_t)L->ntasks + 1, sizeof(adamw_task_t)))) {
        free(a);
        return dcr_error_set(DCR_ENOMEM, "AdamW state");
    }
    *a = (dcr_adamw_t){s, lr, seed, 0, a->tasks};
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        size_t n = (size_t)dcr_task_numel(t);
        dcr_dtype_t dt = L->shards[t->shard].desc.dtype;
        adamw_task_t *x = &a->tasks[i];
        x->master = malloc(n * sizeof(float) + 1);
        x->m = calloc(n + 1, sizeof(float));
        x->v = calloc(n + 1, sizeof(float));
        unsigned char *box = malloc(n * dcr_dtype_size(dt) + 1);
        if (!x->master || !x->m || !x->v || !box) {
            free(box);
            dcr_adamw_destroy(a);
            return dcr_error_set(DCR_ENOMEM, "AdamW state of %s", t->name);
        }
        dcr_task_pack(L, t, shards[t->shard]->data, box);
        dcr_convert(x->master, DCR_DTYPE_FP32, box, dt, n);
        free(box);
    }
    *out_p = a;
    return DCR_OK;
}

void dcr_adamw_destroy(dcr_adamw_t *a)
{
    if (!a) return;
    for (int i = 0; a->tasks && i < a->s->layout->ntasks; i++) {
        free(a->tasks[i].master);
        free(a->tasks[i].m);
        free(a->tasks[i].v);
    }
    free(a->tasks);
    free(a);
}

/* One optimizer step of one task: synthetic gradients, AdamW (no weight
 * decay, as in the seed's recipe), the stored value rounded from the master. */
static int64_t adamw_task_step(dcr_adamw_t *a, int i, dcr_storage_t *const *shards)
{
    const dcr_source_layout_t *L = a->s->layout;
    const dcr_task_t *t = &L->tasks[i];
    adamw_task_t *x = &a->tasks[i];
    size_t n = (size_t)dcr_task_numel(t), es = dcr_dtype_size(L->shards[t->shard].desc.dtype);
    dcr_dtype_t dt = L->shards[t->shard].desc.dtype;
    dcr_rng_t root, rng;
    dcr_rng_seed(&root, a->seed + (uint64_t)a->step);
    rng = dcr_rng_split(&root, (uint64_t)i);
    double c1 = 1.0 - pow(ADAM_BETA1, a->step), c2 = 1.0 - pow(ADAM_BETA2, a->step);
    unsigned char *before = malloc(n * es + 1), *after = malloc(n * es + 1);
    if (!before || !after) {
        free(before);
        free(after);
        return -1;
    }
    dcr_task_pack(L, t, shards[t->shard]->data, before);
    for (size_t k = 0; k < n; k++) {
        float g = (float)dcr_rng_normal(&rng);
        x->m[k] = (float)(ADAM_BETA1 * x->m[k] + (1.0 - ADAM_BETA1) * g);
        x->v[k] = (float)(ADAM_BETA2 * x->v[k] + (1.0 - ADAM_BETA2) * (double)g * g);
        x->master[k] -= (float)(a->lr * (x->m[k] / c1) / (sqrt(x->v[k] / c2) + ADAM_EPS));
    }
    dcr_convert(after, dt, x->master, DCR_DTYPE_FP32, n);
    int64_t changed = 0;
    for (size_t k = 0; k < n; k++) changed += memcmp(before + k * es, after + k * es, es) != 0;
    dcr_task_unpack(L, t, after, shards[t->shard]->data);
    free(before);
    free(after);
    return changed;
}

dcr_status_t dcr_adamw_step(dcr_adamw_t *a, dcr_storage_t *const *shards,
                            dcr_storage_t *const *canonical, int64_t *changed_p)
{
    a->step++;
    int64_t changed = 0;
    for (int i = 0; i < a->s->layout->ntasks; i++) {
        int64_t c = adamw_task_step(a, i, shards);
        if (c < 0) return dcr_error_set(DCR_ENOMEM, "AdamW step");
        changed += c;
    }
    DCR_CHECK(sync_replicas(a->s, shards, canonical));
    *changed_p = changed;
    return DCR_OK;
}

/* ---- edge values ---------------------------------------------------------------- */

/* Bit patterns a comparison by value would get wrong: signed zeros, NaNs
 * with payloads and either sign, infinities, the smallest subnormal. */
static uint64_t edge_bits(dcr_dtype_t dtype, uint64_t pick, uint64_t noise)
{
    static const uint64_t bf16[] = {0x0000, 0x8000, 0x7FC1, 0xFF81, 0x7F80, 0x0001};
    static const uint64_t fp16[] = {0x0000, 0x8000, 0x7E01, 0xFC01, 0x7C00, 0x0001};
    static const uint64_t fp32[] = {0x00000000, 0x80000000, 0x7FC00001,
                                    0xFF800001, 0x7F800000, 0x00000001};
    static const uint64_t fp8[] = {0x00, 0x80, 0x7F, 0xFF, 0x7E, 0x01};
    const uint64_t *table = dtype == DCR_DTYPE_BF16   ? bf16
                            : dtype == DCR_DTYPE_FP16 ? fp16
                            : dtype == DCR_DTYPE_FP32 ? fp32
                                                      : fp8;
    uint64_t bits = table[pick % 6];
    if ((pick % 6 == 2 || pick % 6 == 3) && dtype == DCR_DTYPE_BF16)
        bits |= noise & 0x3F; /* NaN payload */
    return bits;
}

dcr_status_t dcr_scenario_inject_edges(const dcr_scenario_t *s, int per_task, uint64_t seed,
                                       dcr_storage_t *const *shards,
                                       dcr_storage_t *const *canonical, int64_t *changed_p)
{
    const dcr_source_layout_t *L = s->layout;
    dcr_rng_t root;
    dcr_rng_seed(&root, seed);
    int64_t changed = 0;
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        if (task_is_cast(s, t)) continue; /* casts cannot carry NaN payloads bit for bit */
        dcr_rng_t rng = dcr_rng_split(&root, (uint64_t)i);
        dcr_dtype_t dt = L->shards[t->shard].desc.dtype;
        size_t n = (size_t)dcr_task_numel(t), es = dcr_dtype_size(dt);
        unsigned char *box = malloc(n * es + 1);
        if (!box) return dcr_error_set(DCR_ENOMEM, "edge values of %s", t->name);
        dcr_task_pack(L, t, shards[t->shard]->data, box);
        for (int k = 0; k < per_task; k++) {
            size_t at = (size_t)dcr_rng_below(&rng, n);
            uint64_t before = dcr_dtype_load_bits(dt, box + at * es);
            uint64_t bits = edge_bits(dt, dcr_rng_u64(&rng), dcr_rng_u64(&rng));
            dcr_dtype_store_bits(dt, box + at * es, bits);
            changed += before != bits;
        }
        dcr_task_unpack(L, t, box, shards[t->shard]->data);
        free(box);
    }
    DCR_CHECK(sync_replicas(s, shards, canonical));
    *changed_p = changed;
    return DCR_OK;
}

dcr_status_t dcr_scenario_step(const dcr_scenario_t *s, dcr_adamw_t *adamw,
                               const struct dcr_change_profile *profile, double rate, uint64_t seed,
                               dcr_storage_t *const *shards, dcr_storage_t *const *canonical,
                               int64_t *changed_p)
{
    if (adamw) return dcr_adamw_step(adamw, shards, canonical, changed_p);
    if (profile) return dcr_change_profile_inject(s, profile, seed, shards, canonical, changed_p);
    return dcr_scenario_inject_uniform(s, rate, seed, shards, canonical, changed_p);
}

uint64_t dcr_scenario_step_seed(uint64_t seed, uint64_t step)
{
    return seed + 1000 + step;
}
