/* The "far" device of the tests: the "cpu" backend's slots over host memory
 * whose addresses are moved out of the canonical address range, so that any
 * host read or write of a device buffer (resident storage, scratch, an
 * activity map, uploaded records, a loader temporary, a tracker) faults
 * instead of passing unnoticed; only the table's own slots move them back.
 * It stands in for a device the host cannot address (cuda) on machines
 * without a GPU: props.host_addressable is false, everything else is the
 * cpu backend's. Register it by name with far_device_register() to run
 * code configured by device name (dcr bench, the constructor) on it.
 *
 * Asynchronous mode (far_set_async): the table then behaves like a GPU
 * stream. Copies and kernels only queue, and run in order at the next sync
 * (or before a call that must wait for the device: detect, free, host_free,
 * stream_destroy, close). A host-to-device copy reads its source then, so a
 * caller that rewrites the source (reuses staging) before the sync, or reads
 * a result before it, gets the wrong bytes. far_fail_sync(k) makes the k-th
 * sync from now a device error: it runs the first half of the queue, drops
 * the rest and fails with DCR_EIO, leaving its destinations half-written.
 * Freed buffers are poisoned (a kernel queued to read one after it was
 * freed sees garbage).
 * g_far_syncs counts syncs. One queue for every stream: for single-threaded
 * tests.
 *
 * Header-only: each test is one translation unit. */
#ifndef DCR_TEST_FAR_DEVICE_H
#define DCR_TEST_FAR_DEVICE_H

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/device.h"
#include "device/device-internal.h"

/* Buffers of the far table are host memory seen at address + FAR_SHIFT. */
#define FAR_SHIFT ((uintptr_t)1 << 62)
#define FAR_NAME  "cpu-far"

static inline void *near_of(const void *p)
{
    return p ? (void *)((uintptr_t)p - FAR_SHIFT) : NULL;
}

static inline void *far_of(void *p)
{
    return (void *)((uintptr_t)p + FAR_SHIFT);
}

static dcr_device_ops_t g_far;

/* ---- asynchronous mode ---- */

typedef enum far_kind {
    FAR_COPY,
    FAR_FILL,
    FAR_TRACK,
    FAR_GATHER,
    FAR_SCATTER,
    FAR_COMBINE,
    FAR_RESET,
    FAR_CONVERT,
} far_kind_t;

/* One queued operation, its pointers already moved back (near). */
typedef struct far_op {
    far_kind_t kind;
    dcr_device_t *d;
    dcr_device_stream_t *s;
    void *dst;
    const void *src, *idx, *active;
    size_t n, es;
    uint32_t word;
    dcr_device_copy_kind_t ck;
    dcr_device_op_t op;
    dcr_device_region_t region; /* copied: the caller's is read at the call */
    dcr_dtype_t dtype, from;
    int transform;
    uint32_t *nan_events;
} far_op_t;

static bool g_far_async;
static far_op_t *g_far_q;
static size_t g_far_qn, g_far_qcap;
static size_t g_far_syncs;
static int g_far_fail_in; /* > 0: the sync that brings it to 0 fails */

static dcr_status_t far_run(const far_op_t *o)
{
    const dcr_device_ops_t *c = &dcr__device_cpu_ops;
    switch (o->kind) {
    case FAR_COPY:
        return c->copy(o->d, o->s, o->dst, o->src, o->n, o->ck);
    case FAR_FILL:
        return c->fill(o->d, o->s, o->dst, o->es, o->word, o->n);
    case FAR_TRACK:
        return c->track(o->d, o->s, o->dst, o->src, o->es, o->idx, o->n);
    case FAR_GATHER:
        return c->gather(o->d, o->s, o->dst, o->src, o->es, o->idx, o->n);
    case FAR_SCATTER:
        return c->scatter(o->d, o->s, o->dst, o->es, o->idx, o->src, o->n, o->op);
    case FAR_COMBINE:
        return c->combine(o->d, o->s, o->dst, o->src, &o->region, o->active, o->dtype, o->op);
    case FAR_RESET:
        return c->reset(o->d, o->s, o->dst, o->es, o->idx, o->n, o->word);
    case FAR_CONVERT:
        return c->convert(o->d, o->s, o->dst, o->dtype, o->src, o->from, &o->region, o->active,
                          o->op, o->transform, o->nan_events);
    }
    return DCR_EINVAL;
}

/* Runs the first `upto` queued operations and empties the queue. */
static dcr_status_t far_drain(size_t upto)
{
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < upto && i < g_far_qn; i++) {
        dcr_status_t one = far_run(&g_far_q[i]);
        if (st == DCR_OK) st = one;
    }
    g_far_qn = 0;
    return st;
}

/* Runs o now, or queues it in asynchronous mode. */
static dcr_status_t far_do(const far_op_t *o)
{
    if (!g_far_async) return far_run(o);
    if (g_far_qn == g_far_qcap) {
        size_t cap = g_far_qcap ? 2 * g_far_qcap : 64;
        far_op_t *q = realloc(g_far_q, cap * sizeof(*q));
        if (q == NULL) return dcr_error_set(DCR_ENOMEM, "cpu-far: queue");
        g_far_q = q;
        g_far_qcap = cap;
    }
    g_far_q[g_far_qn++] = *o;
    return DCR_OK;
}

/* Asynchronous mode on or off (the queue drained, counters reset). */
static inline void far_set_async(bool on)
{
    (void)far_drain(g_far_qn);
    g_far_async = on;
    g_far_syncs = 0;
    g_far_fail_in = 0;
    if (!on) {
        free(g_far_q);
        g_far_q = NULL;
        g_far_qcap = 0;
    }
}

/* The k-th sync from now (k >= 1) fails as a device error. */
static inline void far_fail_sync(int k)
{
    g_far_fail_in = k;
}

static dcr_status_t far_sync(dcr_device_t *d, dcr_device_stream_t *s)
{
    g_far_syncs++;
    size_t queued = g_far_qn;
    bool fail = g_far_fail_in > 0 && --g_far_fail_in == 0;
    dcr_status_t st = far_drain(fail ? queued / 2 : queued);
    if (fail)
        return dcr_error_set(DCR_EIO,
                             "cpu-far: sync: injected device error after %zu of %zu queued "
                             "operations",
                             queued / 2, queued);
    DCR_CHECK(st);
    return dcr__device_cpu_ops.sync(d, s);
}

static void far_stream_destroy(dcr_device_t *d, dcr_device_stream_t *s)
{
    (void)far_drain(g_far_qn);
    dcr__device_cpu_ops.stream_destroy(d, s);
}

static void far_destroy(dcr_device_t *d)
{
    (void)far_drain(g_far_qn);
    dcr__device_cpu_ops.destroy(d);
}

/* In asynchronous mode freed memory is garbage at once: a kernel still
 * meant to read it sees the poison instead of bytes that happen to stay. */
static void far_poison(void *near)
{
    if (g_far_async && near) memset(near, 0xA5, malloc_usable_size(near));
}

static void far_host_free(dcr_device_t *d, void *p)
{
    (void)far_drain(g_far_qn);
    far_poison(p);
    dcr__device_cpu_ops.host_free(d, p);
}

static dcr_status_t far_create(const dcr_device_ops_t *self, int ordinal, dcr_device_t **out_p)
{
    const dcr_device_ops_t *parent = self->hdr.parent; /* the cpu table */
    DCR_CHECK(parent->create(parent, ordinal, out_p));
    (*out_p)->ops = &g_far;
    return DCR_OK;
}

static dcr_status_t far_alloc(dcr_device_t *d, size_t bytes, void **out_p)
{
    DCR_CHECK(dcr__device_cpu_ops.alloc(d, bytes, out_p));
    *out_p = far_of(*out_p);
    return DCR_OK;
}

static void far_free(dcr_device_t *d, void *p)
{
    (void)far_drain(g_far_qn);
    far_poison(near_of(p));
    dcr__device_cpu_ops.free(d, near_of(p));
}

static dcr_status_t far_copy(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                             size_t bytes, dcr_device_copy_kind_t kind)
{
    far_op_t o = {.kind = FAR_COPY, .d = d, .s = s, .n = bytes, .ck = kind};
    o.dst = kind == DCR_DEVICE_D2H ? dst : near_of(dst);
    o.src = kind == DCR_DEVICE_H2D ? src : near_of(src);
    return far_do(&o);
}

static dcr_status_t far_fill(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                             uint32_t word, size_t n)
{
    far_op_t o = {
        .kind = FAR_FILL, .d = d, .s = s, .dst = near_of(dst), .es = es, .word = word, .n = n};
    return far_do(&o);
}

/* Blocks until the count is known: everything queued before runs first. */
static dcr_status_t far_detect(dcr_device_t *d, dcr_device_stream_t *s, const void *cand,
                               const void *tracker, size_t n, size_t es, uint32_t *idx, void *work,
                               size_t *count_p)
{
    DCR_CHECK(far_drain(g_far_qn));
    return dcr__device_cpu_ops.detect(d, s, near_of(cand), near_of(tracker), n, es, near_of(idx),
                                      near_of(work), count_p);
}

static dcr_status_t far_track(dcr_device_t *d, dcr_device_stream_t *s, void *tracker,
                              const void *cand, size_t es, const uint32_t *idx, size_t count)
{
    far_op_t o = {.kind = FAR_TRACK,
                  .d = d,
                  .s = s,
                  .dst = near_of(tracker),
                  .src = near_of(cand),
                  .es = es,
                  .idx = near_of(idx),
                  .n = count};
    return far_do(&o);
}

static dcr_status_t far_gather(dcr_device_t *d, dcr_device_stream_t *s, void *vals, const void *src,
                               size_t es, const uint32_t *idx, size_t count)
{
    far_op_t o = {.kind = FAR_GATHER,
                  .d = d,
                  .s = s,
                  .dst = near_of(vals),
                  .src = near_of(src),
                  .es = es,
                  .idx = near_of(idx),
                  .n = count};
    return far_do(&o);
}

static dcr_status_t far_scatter(dcr_device_t *d, dcr_device_stream_t *s, void *dst, size_t es,
                                const int64_t *idx, const void *val, size_t count,
                                dcr_device_op_t op)
{
    far_op_t o = {.kind = FAR_SCATTER,
                  .d = d,
                  .s = s,
                  .dst = near_of(dst),
                  .es = es,
                  .idx = near_of(idx),
                  .src = near_of(val),
                  .n = count,
                  .op = op};
    return far_do(&o);
}

static dcr_status_t far_combine(dcr_device_t *d, dcr_device_stream_t *s, void *dst, const void *src,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_dtype_t dtype, dcr_device_op_t op)
{
    far_op_t o = {.kind = FAR_COMBINE,
                  .d = d,
                  .s = s,
                  .dst = near_of(dst),
                  .src = near_of(src),
                  .region = *region,
                  .active = near_of(active),
                  .dtype = dtype,
                  .op = op};
    return far_do(&o);
}

static dcr_status_t far_reset(dcr_device_t *d, dcr_device_stream_t *s, void *scratch, size_t es,
                              const int64_t *idx, size_t count, uint32_t base_word)
{
    far_op_t o = {.kind = FAR_RESET,
                  .d = d,
                  .s = s,
                  .dst = near_of(scratch),
                  .es = es,
                  .idx = near_of(idx),
                  .n = count,
                  .word = base_word};
    return far_do(&o);
}

static dcr_status_t far_convert(dcr_device_t *d, dcr_device_stream_t *s, void *dst, dcr_dtype_t to,
                                const void *src, dcr_dtype_t from,
                                const dcr_device_region_t *region, const uint8_t *active,
                                dcr_device_op_t op, int transform, uint32_t *nan_events)
{
    far_op_t o = {.kind = FAR_CONVERT,
                  .d = d,
                  .s = s,
                  .dst = near_of(dst),
                  .dtype = to,
                  .src = near_of(src),
                  .from = from,
                  .region = *region,
                  .active = near_of(active),
                  .op = op,
                  .transform = transform,
                  .nan_events = near_of(nan_events)};
    return far_do(&o);
}

/* The table (every slot). */
static inline const dcr_device_ops_t *far_table(void)
{
    g_far = dcr__device_cpu_ops;
    g_far.hdr.name = FAR_NAME;
    g_far.hdr.parent = &dcr__device_cpu_ops;
    g_far.props.host_addressable = false;
    g_far.create = far_create;
    g_far.destroy = far_destroy;
    g_far.alloc = far_alloc;
    g_far.free = far_free;
    g_far.host_free = far_host_free;
    g_far.stream_destroy = far_stream_destroy;
    g_far.sync = far_sync;
    g_far.copy = far_copy;
    g_far.fill = far_fill;
    g_far.detect = far_detect;
    g_far.track = far_track;
    g_far.gather = far_gather;
    g_far.scatter = far_scatter;
    g_far.combine = far_combine;
    g_far.reset = far_reset;
    g_far.convert = far_convert;
    return &g_far;
}

/* Makes the far table openable by the name FAR_NAME. */
static inline void far_device_register(void)
{
    dcr__device_register_extra(far_table());
}

#endif
