/* The training-side description: shards, tasks, owners, and the box maps that
 * carry shard elements to canonical elements. */
#include "dcr/source.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/hash.h"

static int compare_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

dcr_status_t dcr_source_layout_create(const dcr_inventory_t *inv, int world,
                                      dcr_source_layout_t **out_p)
{
    if (!inv || world < 1)
        return dcr_error_set(DCR_EINVAL, "source layout needs an inventory and world >= 1");
    dcr_source_layout_t *layout = calloc(1, sizeof(*layout));
    size_t n = dcr_inventory_count(inv);
    int *residual_owner = malloc((n ? n : 1) * sizeof(int));
    int *derived_from = malloc((n ? n : 1) * sizeof(int));
    dcr_conversion_t *conversions = calloc(n ? n : 1, sizeof(dcr_conversion_t));
    if (!layout || !residual_owner || !derived_from || !conversions) {
        free(layout);
        free(residual_owner);
        free(derived_from);
        free(conversions);
        return dcr_error_set(DCR_ENOMEM, "source layout for %zu tensors", n);
    }
    for (size_t i = 0; i < n; i++) residual_owner[i] = derived_from[i] = -1;
    layout->conversions = conversions;
    layout->derived_from = derived_from;
    layout->inventory = inv;
    layout->world = world;
    layout->residual_owner = residual_owner;
    *out_p = layout;
    return DCR_OK;
}

void dcr_source_layout_destroy(dcr_source_layout_t *layout)
{
    if (!layout) return;
    for (int i = 0; i < layout->nshards; i++) {
        free(layout->shards[i].desc.name);
        free(layout->shards[i].holders);
    }
    for (int i = 0; i < layout->ntasks; i++) {
        free(layout->tasks[i].name);
        free(layout->tasks[i].maps);
    }
    free(layout->shards);
    free(layout->tasks);
    free(layout->residual_owner);
    free(layout->conversions);
    free(layout->derived_from);
    free(layout);
}

dcr_status_t dcr_source_layout_set_conversion(dcr_source_layout_t *layout, int canonical,
                                              const dcr_conversion_t *conv)
{
    const dcr_inventory_t *inv = layout->inventory;
    int n = (int)dcr_inventory_count(inv);
    if (canonical < 0 || canonical >= n)
        return dcr_error_set(DCR_EINVAL, "conversion of tensor %d", canonical);
    const dcr_tensor_desc_t *d = dcr_inventory_at(inv, (size_t)canonical);
    if (conv->kind == DCR_CONVERSION_FP8_BLOCK) {
        if (conv->scale < 0 || conv->scale >= n || conv->block < 1 || d->ndim != 2 ||
            d->dtype != DCR_DTYPE_FP8_E4M3)
            return dcr_error_set(
                DCR_EINVAL, "%s: FP8 block conversion needs a 2-D e4m3 tensor and a scale tensor",
                d->name);
        const dcr_tensor_desc_t *sd = dcr_inventory_at(inv, (size_t)conv->scale);
        int64_t rows = (d->shape[0] + conv->block - 1) / conv->block,
                cols = (d->shape[1] + conv->block - 1) / conv->block;
        if (sd->ndim != 2 || sd->dtype != DCR_DTYPE_FP32 || sd->shape[0] != rows ||
            sd->shape[1] != cols)
            return dcr_error_set(DCR_EINVAL, "%s: scale tensor %s must be FP32 [%lld, %lld]",
                                 d->name, sd->name, (long long)rows, (long long)cols);
        layout->derived_from[conv->scale] = canonical;
    }
    layout->conversions[canonical] = *conv;
    return DCR_OK;
}

void dcr_conversion_apply(const dcr_source_layout_t *layout, int canonical, const void *assembled,
                          void *out, void *out_scale)
{
    const dcr_conversion_t *conv = &layout->conversions[canonical];
    const dcr_tensor_desc_t *d = dcr_inventory_at(layout->inventory, (size_t)canonical);
    if (conv->kind == DCR_CONVERSION_NONE) {
        dcr_convert(out, d->dtype, assembled, conv->assembled_dtype, (size_t)dcr_desc_numel(d));
        return;
    }
    int64_t rows = d->shape[0], cols = d->shape[1], b = conv->block, tiles_c = (cols + b - 1) / b;
    size_t es = dcr_dtype_size(conv->assembled_dtype);
    const unsigned char *in = assembled;
    for (int64_t r0 = 0; r0 < rows; r0 += b)
        for (int64_t c0 = 0; c0 < cols; c0 += b) {
            int64_t r1 = r0 + b < rows ? r0 + b : rows, c1 = c0 + b < cols ? c0 + b : cols;
            float amax = 0.0f, x;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    dcr_convert(&x, DCR_DTYPE_FP32, in + (size_t)(r * cols + c) * es,
                                conv->assembled_dtype, 1);
                    if (fabsf(x) > amax) amax = fabsf(x);
                }
            float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
            ((float *)out_scale)[(r0 / b) * tiles_c + c0 / b] = scale;
            for (int64_t r = r0; r < r1; r++)
                for (int64_t c = c0; c < c1; c++) {
                    dcr_convert(&x, DCR_DTYPE_FP32, in + (size_t)(r * cols + c) * es,
                                conv->assembled_dtype, 1);
                    ((uint8_t *)out)[r * cols + c] = dcr_f32_to_fp8e4m3(x / scale);
                }
        }
}

/* Appends stay amortized O(1) without a stored capacity: the capacity is 16,
 * then doubles whenever the count reaches a power of two. */
static dcr_status_t grow(void **array, int count, size_t elem)
{
    if (count != 0 && (count < 16 || (count & (count - 1)))) return DCR_OK;
    size_t cap = count ? (size_t)count * 2 : 16;
    void *p = realloc(*array, cap * elem);
    if (!p) return dcr_error_set(DCR_ENOMEM, "growing a source layout to %zu entries", cap);
    *array = p;
    return DCR_OK;
}

dcr_status_t dcr_source_layout_add_shard(dcr_source_layout_t *layout, const char *name,
                                         dcr_dtype_t dtype, int ndim, const int64_t *shape,
                                         int nholders, const int *holders, int *out_index_p)
{
    if (ndim < 1 || ndim > DCR_MAX_DIMS || nholders < 1)
        return dcr_error_set(DCR_EINVAL, "shard %s: ndim %d, %d holders", name, ndim, nholders);
    for (int i = 0; i < nholders; i++)
        if (holders[i] < 0 || holders[i] >= layout->world)
            return dcr_error_set(DCR_EINVAL, "shard %s: holder rank %d outside world %d", name,
                                 holders[i], layout->world);
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 1)
            return dcr_error_set(DCR_EINVAL, "shard %s: dimension %d is %lld", name, d,
                                 (long long)shape[d]);
    DCR_CHECK(grow((void **)&layout->shards, layout->nshards, sizeof(dcr_source_shard_t)));
    dcr_source_shard_t *s = &layout->shards[layout->nshards];
    memset(s, 0, sizeof(*s));
    s->desc.name = strdup(name);
    s->holders = malloc((size_t)nholders * sizeof(int));
    if (!s->desc.name || !s->holders) {
        free(s->desc.name);
        free(s->holders);
        return dcr_error_set(DCR_ENOMEM, "shard %s", name);
    }
    s->desc.dtype = dtype;
    s->desc.ndim = ndim;
    memcpy(s->desc.shape, shape, (size_t)ndim * sizeof(int64_t));
    memcpy(s->holders, holders, (size_t)nholders * sizeof(int));
    qsort(s->holders, (size_t)nholders, sizeof(int), compare_int);
    s->nholders = nholders;
    if (out_index_p) *out_index_p = layout->nshards;
    layout->nshards++;
    return DCR_OK;
}

int dcr_source_pick_owner(const char *task_name, int nholders, const int *holders)
{
    return holders[dcr_hash64_str(task_name) % (uint64_t)nholders];
}

dcr_status_t dcr_source_layout_add_task(dcr_source_layout_t *layout, const char *name,
                                        dcr_task_kind_t kind, const char *mapping, int shard,
                                        int canonical, int nmaps, const dcr_box_map_t *maps)
{
    if (shard < 0 || shard >= layout->nshards || canonical < 0 ||
        (size_t)canonical >= dcr_inventory_count(layout->inventory) || nmaps < 1)
        return dcr_error_set(DCR_EINVAL, "task %s: shard %d, canonical %d, %d maps", name, shard,
                             canonical, nmaps);
    DCR_CHECK(grow((void **)&layout->tasks, layout->ntasks, sizeof(dcr_task_t)));
    dcr_task_t *t = &layout->tasks[layout->ntasks];
    memset(t, 0, sizeof(*t));
    t->name = strdup(name);
    t->maps = malloc((size_t)nmaps * sizeof(dcr_box_map_t));
    if (!t->name || !t->maps) {
        free(t->name);
        free(t->maps);
        return dcr_error_set(DCR_ENOMEM, "task %s", name);
    }
    memcpy(t->maps, maps, (size_t)nmaps * sizeof(dcr_box_map_t));
    t->nmaps = nmaps;
    t->kind = kind;
    t->mapping = mapping;
    t->shard = shard;
    t->canonical = canonical;
    const dcr_source_shard_t *s = &layout->shards[shard];
    t->owner = dcr_source_pick_owner(name, s->nholders, s->holders);
    layout->ntasks++;
    return DCR_OK;
}

static int64_t box_numel(const dcr_box_map_t *m)
{
    return dcr_shape_numel(m->ndim, m->shape);
}

int64_t dcr_task_numel(const dcr_task_t *task)
{
    int64_t n = 0;
    for (int i = 0; i < task->nmaps; i++) n += box_numel(&task->maps[i]);
    return n;
}

/* Largest flat index a box touches on one side, or -1 for a negative stride. */
static int64_t box_last(int ndim, const int64_t *shape, int64_t offset, const int64_t *strides)
{
    int64_t last = offset;
    for (int d = 0; d < ndim; d++) {
        if (strides[d] < 0 || shape[d] < 1) return -1;
        last += (shape[d] - 1) * strides[d];
    }
    return last;
}

static dcr_status_t check_task_bounds(const dcr_source_layout_t *layout, const dcr_task_t *t)
{
    int64_t shard_n = dcr_desc_numel(&layout->shards[t->shard].desc);
    int64_t canon_n = dcr_desc_numel(dcr_inventory_at(layout->inventory, (size_t)t->canonical));
    for (int i = 0; i < t->nmaps; i++) {
        const dcr_box_map_t *m = &t->maps[i];
        if (m->ndim < 1 || m->ndim > DCR_MAX_DIMS)
            return dcr_error_set(DCR_ELAYOUT, "task %s: map %d has ndim %d", t->name, i, m->ndim);
        int64_t src_last = box_last(m->ndim, m->shape, m->src_offset, m->src_strides);
        int64_t dst_last = box_last(m->ndim, m->shape, m->dst_offset, m->dst_strides);
        if (m->src_offset < 0 || src_last < 0 || src_last >= shard_n)
            return dcr_error_set(DCR_ELAYOUT,
                                 "task %s: map %d reads outside its shard (%lld elements)", t->name,
                                 i, (long long)shard_n);
        if (m->dst_offset < 0 || dst_last < 0 || dst_last >= canon_n)
            return dcr_error_set(
                DCR_ELAYOUT, "task %s: map %d writes outside its canonical tensor (%lld elements)",
                t->name, i, (long long)canon_n);
    }
    return DCR_OK;
}

dcr_status_t dcr_source_layout_finish(dcr_source_layout_t *layout)
{
    const dcr_inventory_t *inv = layout->inventory;
    size_t n = dcr_inventory_count(inv);
    int64_t *covered = calloc(n ? n : 1, sizeof(int64_t));
    signed char *kind = malloc(n ? n : 1);
    dcr_status_t st = DCR_OK;
    if (!covered || !kind) {
        st = dcr_error_set(DCR_ENOMEM, "checking a layout of %zu tensors", n);
        goto cleanup;
    }
    memset(kind, -1, n);
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        DCR_CHECK_GOTO(check_task_bounds(layout, t), st, cleanup);
        if (kind[t->canonical] >= 0 && kind[t->canonical] != (signed char)t->kind) {
            st = dcr_error_set(DCR_ELAYOUT, "%s mixes affine and residual tasks",
                               dcr_inventory_at(inv, (size_t)t->canonical)->name);
            goto cleanup;
        }
        kind[t->canonical] = (signed char)t->kind;
        covered[t->canonical] += dcr_task_numel(t);
    }
    for (size_t c = 0; c < n; c++) {
        const dcr_tensor_desc_t *d = dcr_inventory_at(inv, c);
        if (layout->derived_from[c] >= 0) continue; /* written by its source's conversion */
        if (layout->conversions[c].kind != DCR_CONVERSION_NONE && kind[c] != DCR_TASK_RESIDUAL) {
            st = dcr_error_set(DCR_ELAYOUT, "%s: a converted tensor needs residual tasks", d->name);
            goto cleanup;
        }
        if (covered[c] != dcr_desc_numel(d)) {
            st = dcr_error_set(DCR_ELAYOUT, "%s: tasks cover %lld of %lld elements", d->name,
                               (long long)covered[c], (long long)dcr_desc_numel(d));
            goto cleanup;
        }
        layout->residual_owner[c] = kind[c] == DCR_TASK_RESIDUAL
                                        ? (int)(dcr_hash64_str(d->name) % (uint64_t)layout->world)
                                        : -1;
    }
    for (size_t c = 0; c < n; c++) /* derived outputs live with their conversion's assembler */
        if (layout->derived_from[c] >= 0)
            layout->residual_owner[c] = layout->residual_owner[layout->derived_from[c]];
cleanup:
    free(covered);
    free(kind);
    return st;
}

typedef struct element_walk {
    void (*fn)(int64_t src, int64_t dst, void *ctx);
    void *ctx;
} element_walk_t;

static void walk_run_elements(int64_t src, int64_t dst, int64_t len, void *p)
{
    element_walk_t *w = p;
    for (int64_t k = 0; k < len; k++) w->fn(src + k, dst + k, w->ctx);
}

void dcr_box_map_foreach(const dcr_box_map_t *map, void (*fn)(int64_t src, int64_t dst, void *ctx),
                         void *ctx)
{
    element_walk_t w = {fn, ctx};
    dcr_box_map_foreach_run(map, walk_run_elements, &w);
}

typedef struct coverage_ctx {
    unsigned char *shard_seen;
    unsigned char *canon_seen;
    int64_t shard_dup, canon_dup; /* first duplicate index, or -1 */
} coverage_ctx_t;

static void mark_coverage(int64_t src, int64_t dst, void *p)
{
    coverage_ctx_t *c = p;
    if (c->shard_seen[src]++ && c->shard_dup < 0) c->shard_dup = src;
    if (c->canon_seen[dst]++ && c->canon_dup < 0) c->canon_dup = dst;
}

static dcr_status_t check_one_canonical(const dcr_source_layout_t *layout, int c,
                                        unsigned char **shard_seen, const int *tasks, int ntasks)
{
    const dcr_tensor_desc_t *d = dcr_inventory_at(layout->inventory, (size_t)c);
    int64_t n = dcr_desc_numel(d);
    coverage_ctx_t ctx = {NULL, calloc((size_t)n, 1), -1, -1};
    if (!ctx.canon_seen) return dcr_error_set(DCR_ENOMEM, "coverage of %s", d->name);
    for (int i = 0; i < ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[tasks[i]];
        ctx.shard_seen = shard_seen[t->shard];
        for (int m = 0; m < t->nmaps; m++) dcr_box_map_foreach(&t->maps[m], mark_coverage, &ctx);
        if (ctx.shard_dup >= 0) {
            free(ctx.canon_seen);
            return dcr_error_set(
                DCR_ELAYOUT, "shard %s element %lld claimed by two tasks (second: %s)",
                layout->shards[t->shard].desc.name, (long long)ctx.shard_dup, t->name);
        }
    }
    dcr_status_t st = DCR_OK;
    for (int64_t k = 0; k < n && st == DCR_OK; k++)
        if (ctx.canon_seen[k] != 1)
            st = dcr_error_set(DCR_ELAYOUT, "%s element %lld produced by %d tasks (expected 1)",
                               d->name, (long long)k, ctx.canon_seen[k]);
    free(ctx.canon_seen);
    return st;
}

dcr_status_t dcr_source_layout_check_coverage(const dcr_source_layout_t *layout)
{
    size_t n = dcr_inventory_count(layout->inventory);
    unsigned char **shard_seen = calloc((size_t)layout->nshards + 1, sizeof(*shard_seen));
    int *order = malloc(((size_t)layout->ntasks + 1) * sizeof(int));
    int *start = calloc(n + 1, sizeof(int));
    dcr_status_t st = DCR_OK;
    if (!shard_seen || !order || !start) {
        st = dcr_error_set(DCR_ENOMEM, "coverage check");
        goto cleanup;
    }
    for (int s = 0; s < layout->nshards; s++) {
        shard_seen[s] = calloc((size_t)dcr_desc_numel(&layout->shards[s].desc), 1);
        if (!shard_seen[s]) {
            st = dcr_error_set(DCR_ENOMEM, "coverage of shard %s", layout->shards[s].desc.name);
            goto cleanup;
        }
    }
    /* Bucket tasks by canonical tensor (counting sort) so each tensor is checked once. */
    for (int i = 0; i < layout->ntasks; i++) start[layout->tasks[i].canonical + 1]++;
    for (size_t c = 0; c < n; c++) start[c + 1] += start[c];
    int *fill = calloc(n + 1, sizeof(int));
    if (!fill) {
        st = dcr_error_set(DCR_ENOMEM, "coverage check");
        goto cleanup;
    }
    for (int i = 0; i < layout->ntasks; i++) {
        int c = layout->tasks[i].canonical;
        order[start[c] + fill[c]++] = i;
    }
    free(fill);
    for (size_t c = 0; c < n && st == DCR_OK; c++)
        if (layout->derived_from[c] < 0)
            st = check_one_canonical(layout, (int)c, shard_seen, order + start[c],
                                     start[c + 1] - start[c]);
cleanup:
    if (shard_seen)
        for (int s = 0; s < layout->nshards; s++) free(shard_seen[s]);
    free(shard_seen);
    free(order);
    free(start);
    return st;
}

typedef struct copy_ctx {
    const unsigned char *from;
    unsigned char *to;
    dcr_dtype_t from_dtype, to_dtype;
    size_t from_size, to_size;
    int reverse; /* 0: src -> dst (scatter), 1: dst -> src (gather) */
} copy_ctx_t;

static void copy_element(int64_t src, int64_t dst, void *p)
{
    copy_ctx_t *c = p;
    int64_t from = c->reverse ? dst : src, to = c->reverse ? src : dst;
    dcr_convert(c->to + (size_t)to * c->to_size, c->to_dtype, c->from + (size_t)from * c->from_size,
                c->from_dtype, 1);
}

static void task_copy(const dcr_source_layout_t *layout, const dcr_task_t *task, const void *from,
                      void *to, int reverse)
{
    dcr_dtype_t shard_dt = layout->shards[task->shard].desc.dtype;
    dcr_dtype_t canon_dt = dcr_inventory_at(layout->inventory, (size_t)task->canonical)->dtype;
    copy_ctx_t c = {from, to,     reverse ? canon_dt : shard_dt, reverse ? shard_dt : canon_dt, 0,
                    0,    reverse};
    c.from_size = dcr_dtype_size(c.from_dtype);
    c.to_size = dcr_dtype_size(c.to_dtype);
    for (int m = 0; m < task->nmaps; m++) dcr_box_map_foreach(&task->maps[m], copy_element, &c);
}

void dcr_task_scatter(const dcr_source_layout_t *layout, const dcr_task_t *task,
                      const void *shard_data, void *canonical_data)
{
    task_copy(layout, task, shard_data, canonical_data, 0);
}

void dcr_task_gather(const dcr_source_layout_t *layout, const dcr_task_t *task,
                     const void *canonical_data, void *shard_data)
{
    task_copy(layout, task, canonical_data, shard_data, 1);
}

void dcr_source_layout_stats(const dcr_source_layout_t *layout, dcr_source_stats_t *out_p)
{
    dcr_source_stats_t st = {0};
    const dcr_inventory_t *inv = layout->inventory;
    size_t n = dcr_inventory_count(inv);
    int64_t *owned = calloc((size_t)layout->world, sizeof(int64_t));
    for (int i = 0; i < layout->ntasks; i++) {
        const dcr_task_t *t = &layout->tasks[i];
        if (t->kind == DCR_TASK_AFFINE) st.affine_items++;
        if (owned) owned[t->owner] += dcr_task_numel(t);
    }
    for (size_t c = 0; c < n; c++) {
        size_t bytes = dcr_desc_bytes(dcr_inventory_at(inv, c));
        if (layout->residual_owner[c] >= 0) {
            st.residual_tensors++;
            st.residual_bytes += (int64_t)bytes;
        } else {
            st.affine_tensors++;
            st.affine_bytes += (int64_t)bytes;
        }
    }
    st.residual_items = st.residual_tensors;
    int64_t total = st.affine_bytes + st.residual_bytes;
    st.affine_byte_share = total ? (double)st.affine_bytes / (double)total : 0.0;
    if (owned) {
        st.owned_elements_min = st.owned_elements_max = owned[0];
        for (int r = 1; r < layout->world; r++) {
            if (owned[r] < st.owned_elements_min) st.owned_elements_min = owned[r];
            if (owned[r] > st.owned_elements_max) st.owned_elements_max = owned[r];
        }
    }
    free(owned);
    *out_p = st;
}

void dcr_box_map_foreach_run(const dcr_box_map_t *map,
                             void (*fn)(int64_t src, int64_t dst, int64_t len, void *ctx),
                             void *ctx)
{
    int last = map->ndim - 1;
    int unit = map->src_strides[last] == 1 && map->dst_strides[last] == 1;
    int outer = unit ? last : map->ndim; /* dims iterated by the odometer */
    int64_t len = unit ? map->shape[last] : 1;
    int64_t idx[DCR_MAX_DIMS] = {0}, total = 1;
    for (int d = 0; d < outer; d++) total *= map->shape[d];
    int64_t src = map->src_offset, dst = map->dst_offset;
    for (int64_t r = 0; r < total; r++) {
        fn(src, dst, len, ctx);
        for (int d = outer - 1; d >= 0; d--) {
            src += map->src_strides[d];
            dst += map->dst_strides[d];
            if (++idx[d] < map->shape[d]) break;
            src -= map->shape[d] * map->src_strides[d];
            dst -= map->shape[d] * map->dst_strides[d];
            idx[d] = 0;
        }
    }
}

typedef struct pack_ctx {
    unsigned char *shard, *box;
    size_t es, pos;
    int to_box;
} pack_ctx_t;

static void pack_run(int64_t src, int64_t dst, int64_t len, void *p)
{
    pack_ctx_t *c = p;
    unsigned char *a = c->shard + (size_t)src * c->es, *b = c->box + c->pos * c->es;
    memcpy(c->to_box ? b : a, c->to_box ? a : b, (size_t)len * c->es);
    c->pos += (size_t)len;
}

static void task_pack_dir(const dcr_source_layout_t *layout, const dcr_task_t *task, void *shard,
                          void *box, int to_box)
{
    pack_ctx_t c = {shard, box, dcr_dtype_size(layout->shards[task->shard].desc.dtype), 0, to_box};
    for (int m = 0; m < task->nmaps; m++) dcr_box_map_foreach_run(&task->maps[m], pack_run, &c);
}

void dcr_task_pack(const dcr_source_layout_t *layout, const dcr_task_t *task,
                   const void *shard_data, void *box)
{
    task_pack_dir(layout, task, (void *)shard_data, box, 1);
}

void dcr_task_unpack(const dcr_source_layout_t *layout, const dcr_task_t *task, const void *box,
                     void *shard_data)
{
    task_pack_dir(layout, task, shard_data, (void *)box, 0);
}
