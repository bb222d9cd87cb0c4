/* The CPU harness of the device kernels: runs the per-thread functions of
 * engine/device/kernels-internal.h over every (block, thread) index of the launch
 * configuration the CUDA kernels use (engine/device/device_cuda.cu), with
 * the kernels' barriers as phase boundaries and the warp vote emulated per
 * warp (a ballot is assembled from the 32 lanes' predicates before any lane
 * reads it). Each function below mirrors one kernel line for line; a change
 * to a kernel's structure must be made here too. Header-only: each test is
 * one translation unit. */
#ifndef DCR_DEVICE_HARNESS_H
#define DCR_DEVICE_HARNESS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "device/kernels-internal.h"

/* dcr__k_detect_count over all blocks: the vote of each warp is
 * assembled from its 32 lanes' predicates before any lane reads it. */
static inline void harness_detect_count(const void *cand, const void *tracker, size_t n,
                                        unsigned es, uint32_t *counts, uint32_t *votes)
{
    for (size_t b = 0; b < dcr_dk_detect_blocks(n); b++) {
        uint32_t warp_total[DCR_DK_WARPS], mine[DCR_DK_BLOCK] = {0};
        for (unsigned j = 0; j < DCR_DK_ITEMS; j++) {
            for (unsigned w = 0; w < DCR_DK_WARPS; w++) {
                uint32_t ballot = 0; /* __ballot_sync */
                for (unsigned lane = 0; lane < DCR_DK_WARP; lane++)
                    if (dcr_dk_detect_pred(cand, tracker, n, es, b, j, w * DCR_DK_WARP + lane))
                        ballot |= 1u << lane;
                for (unsigned lane = 0; lane < DCR_DK_WARP; lane++) {
                    if (lane == 0) votes[dcr_dk_vote_slot(b, j, w)] = ballot;
                    mine[w * DCR_DK_WARP + lane] += dcr_dk_warp_count(ballot);
                }
            }
        }
        for (unsigned t = 0; t < DCR_DK_BLOCK; t++)
            if (t % DCR_DK_WARP == 0) warp_total[t / DCR_DK_WARP] = mine[t];
        /* __syncthreads(); thread 0: */
        unsigned total = 0;
        dcr_dk_warp_offset(warp_total, DCR_DK_WARPS, &total);
        counts[b] = total;
    }
}

/* dcr__k_detect_scan: one block of DCR_DK_SCAN_THREADS threads. */
static inline uint32_t harness_detect_scan(const uint32_t *counts, uint32_t *offsets, size_t nb)
{
    static uint32_t partial[DCR_DK_SCAN_THREADS];
    for (unsigned t = 0; t < DCR_DK_SCAN_THREADS; t++)
        partial[t] = dcr_dk_scan_partial(counts, nb, t);
    /* __syncthreads(); thread 0: */
    uint32_t total = dcr_dk_scan_partials(partial);
    /* __syncthreads(); */
    for (unsigned t = 0; t < DCR_DK_SCAN_THREADS; t++)
        dcr_dk_scan_write(counts, offsets, nb, t, partial[t]);
    return total;
}

/* dcr__k_detect_write over all blocks (nb of them), from the kept votes. */
static inline void harness_detect_write(const uint32_t *votes, size_t nb, const uint32_t *offsets,
                                        uint32_t *idx)
{
    for (size_t b = 0; b < nb; b++) {
        size_t before[DCR_DK_BLOCK] = {0};
        for (unsigned j = 0; j < DCR_DK_ITEMS; j++) {
            uint32_t ballot[DCR_DK_BLOCK], warp_counts[DCR_DK_WARPS];
            for (unsigned t = 0; t < DCR_DK_BLOCK; t++) {
                ballot[t] = votes[dcr_dk_vote_slot(b, j, t / DCR_DK_WARP)];
                if (t % DCR_DK_WARP == 0)
                    warp_counts[t / DCR_DK_WARP] = dcr_dk_warp_count(ballot[t]);
            }
            /* __syncthreads(); */
            for (unsigned t = 0; t < DCR_DK_BLOCK; t++) {
                unsigned round_total = 0;
                unsigned woff = dcr_dk_warp_offset(warp_counts, t / DCR_DK_WARP, &round_total);
                if (dcr_dk_vote_bit(ballot[t], t % DCR_DK_WARP))
                    idx[dcr_dk_out_pos(offsets[b], before[t], woff, ballot[t], t)] =
                        (uint32_t)dcr_dk_detect_elem(b, j, t);
                before[t] += round_total;
            }
            /* __syncthreads(); */
        }
    }
}

/* The three detect kernels in stream order, as dcr__cuda_detect runs them;
 * returns the count. idx needs n entries. */
static inline size_t harness_detect(const void *cand, const void *tracker, size_t n, unsigned es,
                                    uint32_t *idx)
{
    size_t nb = dcr_dk_detect_blocks(n);
    uint32_t *counts = calloc(nb + 1, sizeof(*counts)), *offsets = calloc(nb + 1, sizeof(*offsets));
    uint32_t *votes = calloc(dcr_dk_vote_words(n) + 1, sizeof(*votes));
    harness_detect_count(cand, tracker, n, es, counts, votes);
    uint32_t total = harness_detect_scan(counts, offsets, nb);
    harness_detect_write(votes, nb, offsets, idx);
    free(counts);
    free(offsets);
    free(votes);
    return total;
}

/* Every thread of an elementwise launch over n items: the global thread
 * index blockIdx.x * blockDim.x + threadIdx.x, threads past n included (the
 * per-thread functions must ignore them). */
#define HARNESS_ELEMENTWISE(n, k, body)                                                            \
    do {                                                                                           \
        for (size_t harness_b = 0; harness_b < dcr_dk_blocks(n); harness_b++)                      \
            for (unsigned harness_t = 0; harness_t < DCR_DK_BLOCK; harness_t++) {                  \
                size_t k = harness_b * DCR_DK_BLOCK + harness_t;                                   \
                body;                                                                              \
            }                                                                                      \
    } while (0)

static inline void harness_track(void *tracker, const void *cand, unsigned es, const uint32_t *idx,
                                 size_t count)
{
    HARNESS_ELEMENTWISE(count, k, dcr_dk_track(tracker, cand, es, idx, count, k));
}

static inline void harness_gather(void *vals, const void *src, unsigned es, const uint32_t *idx,
                                  size_t count)
{
    HARNESS_ELEMENTWISE(count, k, dcr_dk_gather(vals, src, es, idx, count, k));
}

static inline void harness_scatter(void *dst, unsigned es, const int64_t *idx, const void *val,
                                   size_t count, int xor_op)
{
    HARNESS_ELEMENTWISE(count, k, dcr_dk_scatter(dst, es, idx, val, count, xor_op, k));
}

/* op: DCR_DK_XOR, DCR_DK_OVERWRITE or DCR_DK_ASSIGN. */
static inline void harness_combine(void *dst, const void *src, int dtype, dcr_device_region_t r,
                                   const uint8_t *active, int op)
{
    unsigned es = dcr_dk_dtype_size(dtype);
    size_t n = (size_t)(r.rows * r.cols);
    HARNESS_ELEMENTWISE(n, i, dcr_dk_combine(dst, src, es, dtype, r, active, op, i));
}

/* dcr__k_convert: each thread's NaN event added to the counters (the
 * kernel's atomics). */
static inline void harness_convert(void *dst, int to, const void *src, int from,
                                   dcr_device_region_t r, const uint8_t *active, int mode,
                                   int transform, uint32_t *nan_events)
{
    size_t n = (size_t)(r.rows * r.cols);
    HARNESS_ELEMENTWISE(n, i, {
        int ev = dcr_dk_convert(dst, to, src, from, r, active, mode, transform, i);
        if (nan_events && ev == DCR_DK_NAN_CREATED) nan_events[0]++;
        if (nan_events && ev == DCR_DK_NAN_LOST) nan_events[1]++;
    });
}

static inline void harness_reset(void *scratch, unsigned es, const int64_t *idx, size_t count,
                                 uint32_t base_word)
{
    HARNESS_ELEMENTWISE(count, k, dcr_dk_reset(scratch, es, idx, count, base_word, k));
}

static inline void harness_fill(void *dst, unsigned es, uint32_t word, size_t n)
{
    HARNESS_ELEMENTWISE(n, i, dcr_dk_fill(dst, es, word, n, i));
}

#endif
