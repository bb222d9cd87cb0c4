/* The per-thread work of the device kernels, shared by the CUDA kernels
 * (engine/device/device_cuda.cu) and by the CPU harness that runs the same
 * functions over every (block, thread) index of the same launch
 * configuration (tests/engine/device/device_harness.h). Keeping the work in
 * one header is what lets the kernels' logic be tested on machines without a
 * GPU: the CUDA file adds only the launch, the barriers and the warp vote.
 *
 * Everything here is plain C that also compiles as CUDA C++: no allocation,
 * no library calls but fmaf and rintf (exact on both sides), fixed-width words. Element sizes are
 * 1, 2 or 4 bytes (FP8, BF16/FP16, FP32) and values are handled as stored bit patterns, so -0.0 and
 * +0.0 differ and NaN payloads count, like the CPU path.
 *
 * Launch configuration (both sides use these constants):
 *  - detect: blocks of DCR_DK_BLOCK threads, block b covers elements
 *    [b * DCR_DK_TILE, (b + 1) * DCR_DK_TILE); in round j (0..DCR_DK_ITEMS)
 *    thread t looks at element b * DCR_DK_TILE + j * DCR_DK_BLOCK + t, so a
 *    round's loads are coalesced and the output stays in increasing order.
 *    Three kernels: count (compares, and keeps every warp's vote of every
 *    round: one bit per element, so the data is read once), scan (one block
 *    of DCR_DK_SCAN_THREADS threads: exclusive prefix of the block counts
 *    and the total) and write (the compacted indices, from the kept votes).
 *  - elementwise kernels (tracker update, gather, scatter, combine, reset): one
 *    element or record per thread, DCR_DK_BLOCK threads per block. */
#ifndef DCR_DEVICE_KERNELS_H
#define DCR_DEVICE_KERNELS_H

#include "dcr/device.h" /* dcr_device_region_t */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DCR_DK_FN static __host__ __device__ __forceinline__
#else
#define DCR_DK_FN static inline
#endif

#define DCR_DK_BLOCK        256 /* threads per block */
#define DCR_DK_WARP         32  /* threads per warp (fixed on every CUDA GPU) */
#define DCR_DK_WARPS        (DCR_DK_BLOCK / DCR_DK_WARP)
#define DCR_DK_ITEMS        8 /* detect rounds per block */
#define DCR_DK_TILE         (DCR_DK_BLOCK * DCR_DK_ITEMS)
#define DCR_DK_SCAN_THREADS 1024 /* threads of the one scan block */

/* Dtype codes the combine kernel needs for the NaN placeholder; the values
 * are those of dcr_dtype_t (dcr/dtype.h), repeated so this header has no
 * dependency a kernel cannot compile. */
#define DCR_DK_BF16     0
#define DCR_DK_FP16     1
#define DCR_DK_FP32     2
#define DCR_DK_FP8_E4M3 3

/* Bytes per element of a dtype code (0 for an unknown code). */
DCR_DK_FN unsigned dcr_dk_dtype_size(int dtype)
{
    return dtype == DCR_DK_FP32       ? 4u
           : dtype == DCR_DK_FP8_E4M3 ? 1u
           : dtype >= 0 && dtype < 2  ? 2u
                                      : 0u;
}

/* Blocks of the detect kernels for n elements (0 for n == 0). */
DCR_DK_FN size_t dcr_dk_detect_blocks(size_t n)
{
    return (n + DCR_DK_TILE - 1) / DCR_DK_TILE;
}

/* Blocks of an elementwise kernel over n items. */
DCR_DK_FN size_t dcr_dk_blocks(size_t n)
{
    return (n + DCR_DK_BLOCK - 1) / DCR_DK_BLOCK;
}

/* Ops of the combine rule; the values are those of dcr_device_op_t
 * (dcr/device.h). */
#define DCR_DK_XOR       0 /* dst ^= src */
#define DCR_DK_OVERWRITE 1 /* dst = src where active (or src not NaN) */
#define DCR_DK_ASSIGN    2 /* dst = src */

/* Element i of a buffer of es-byte words, widened. */
/* Word i of a buffer of es-byte words. On the host the buffer may be
 * unaligned (payload values are packed without padding: dcr/codec.h), so
 * the word is copied bytewise, which compilers turn into one plain load or
 * store; device buffers are aligned (cudaMalloc, staged copies). */
DCR_DK_FN uint32_t dcr_dk_load(const void *p, int64_t i, unsigned es)
{
#ifdef __CUDA_ARCH__
    if (es == 2) return ((const uint16_t *)p)[i];
    if (es == 4) return ((const uint32_t *)p)[i];
    return ((const uint8_t *)p)[i];
#else
    const unsigned char *b = (const unsigned char *)p + i * (int64_t)es;
    if (es == 2) {
        uint16_t w;
        memcpy(&w, b, 2);
        return w;
    }
    if (es == 4) {
        uint32_t w;
        memcpy(&w, b, 4);
        return w;
    }
    return b[0];
#endif
}

DCR_DK_FN void dcr_dk_store(void *p, int64_t i, unsigned es, uint32_t w)
{
#ifdef __CUDA_ARCH__
    if (es == 2)
        ((uint16_t *)p)[i] = (uint16_t)w;
    else if (es == 4)
        ((uint32_t *)p)[i] = w;
    else
        ((uint8_t *)p)[i] = (uint8_t)w;
#else
    unsigned char *b = (unsigned char *)p + i * (int64_t)es;
    if (es == 2) {
        uint16_t h = (uint16_t)w;
        memcpy(b, &h, 2);
    } else if (es == 4) {
        memcpy(b, &w, 4);
    } else {
        b[0] = (unsigned char)w;
    }
#endif
}

/* Whether the stored bits of element i differ (never a float compare). */
DCR_DK_FN int dcr_dk_changed(const void *a, const void *b, size_t i, unsigned es)
{
    return dcr_dk_load(a, (int64_t)i, es) != dcr_dk_load(b, (int64_t)i, es);
}

DCR_DK_FN unsigned dcr_dk_popc(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return (unsigned)__popc(x);
#else
    return (unsigned)__builtin_popcount(x);
#endif
}

/* ---- detect ---- */

/* The element thread t of block b looks at in round j. */
DCR_DK_FN size_t dcr_dk_detect_elem(size_t block, unsigned j, unsigned t)
{
    return block * DCR_DK_TILE + (size_t)j * DCR_DK_BLOCK + t;
}

/* The predicate thread t of block b votes in round j: its element exists
 * and changed. Every thread of the block votes, in range or not, since the
 * warp vote needs every lane. */
DCR_DK_FN int dcr_dk_detect_pred(const void *cand, const void *tracker, size_t n, unsigned es,
                                 size_t block, unsigned j, unsigned t)
{
    size_t i = dcr_dk_detect_elem(block, j, t);
    return i < n && dcr_dk_changed(cand, tracker, i, es);
}

/* Where the count kernel keeps warp w's vote of round j in block b, and
 * the votes' words for n elements (one bit per element, rounded up to
 * whole tiles). */
DCR_DK_FN size_t dcr_dk_vote_slot(size_t block, unsigned j, unsigned w)
{
    return (block * DCR_DK_ITEMS + j) * DCR_DK_WARPS + w;
}

DCR_DK_FN size_t dcr_dk_vote_words(size_t n)
{
    return dcr_dk_detect_blocks(n) * DCR_DK_ITEMS * DCR_DK_WARPS;
}

/* A lane's own predicate, read back from its warp's kept vote. */
DCR_DK_FN int dcr_dk_vote_bit(uint32_t ballot, unsigned lane)
{
    return (int)((ballot >> lane) & 1u);
}

/* Changed elements of one warp in one round, from its vote. */
DCR_DK_FN unsigned dcr_dk_warp_count(uint32_t ballot)
{
    return dcr_dk_popc(ballot);
}

/* A lane's place among its warp's changed lanes: the set votes below it. */
DCR_DK_FN unsigned dcr_dk_lane_rank(uint32_t ballot, unsigned lane)
{
    return dcr_dk_popc(ballot & ((1u << lane) - 1u));
}

/* Offset of warp w's changed elements within the round, from the per-warp
 * counts (each thread computes it itself: DCR_DK_WARPS adds, no barrier);
 * *round_total_p gets the round's count. */
DCR_DK_FN unsigned dcr_dk_warp_offset(const uint32_t *warp_counts, unsigned w,
                                      unsigned *round_total_p)
{
    unsigned off = 0, total = 0;
    for (unsigned k = 0; k < DCR_DK_WARPS; k++) {
        if (k < w) off += warp_counts[k];
        total += warp_counts[k];
    }
    *round_total_p = total;
    return off;
}

/* Where a changed element of thread t goes: the block's offset, the rounds
 * before this one, the warps before it, the lanes before it. */
DCR_DK_FN size_t dcr_dk_out_pos(size_t block_offset, size_t rounds_before, unsigned warp_offset,
                                uint32_t ballot, unsigned t)
{
    return block_offset + rounds_before + warp_offset + dcr_dk_lane_rank(ballot, t % DCR_DK_WARP);
}

/* Scan, phase 1: thread t's sum of its segment of the nb block counts. */
DCR_DK_FN uint32_t dcr_dk_scan_partial(const uint32_t *counts, size_t nb, unsigned t)
{
    size_t seg = (nb + DCR_DK_SCAN_THREADS - 1) / DCR_DK_SCAN_THREADS;
    uint32_t s = 0;
    for (size_t k = (size_t)t * seg; k < (size_t)(t + 1) * seg && k < nb; k++) s += counts[k];
    return s;
}

/* Scan, phase 2 (thread 0 only): exclusive prefix of the partial sums in
 * place; returns the total. */
DCR_DK_FN uint32_t dcr_dk_scan_partials(uint32_t *partial)
{
    uint32_t run = 0;
    for (unsigned t = 0; t < DCR_DK_SCAN_THREADS; t++) {
        uint32_t v = partial[t];
        partial[t] = run;
        run += v;
    }
    return run;
}

/* Scan, phase 3: thread t writes the exclusive prefix of its segment,
 * starting from its partial prefix. */
DCR_DK_FN void dcr_dk_scan_write(const uint32_t *counts, uint32_t *offsets, size_t nb, unsigned t,
                                 uint32_t prefix)
{
    size_t seg = (nb + DCR_DK_SCAN_THREADS - 1) / DCR_DK_SCAN_THREADS;
    for (size_t k = (size_t)t * seg; k < (size_t)(t + 1) * seg && k < nb; k++) {
        offsets[k] = prefix;
        prefix += counts[k];
    }
}

/* Tracker update after the commit: record k's element takes the
 * candidate's bits. */
DCR_DK_FN void dcr_dk_track(void *tracker, const void *cand, unsigned es, const uint32_t *idx,
                            size_t count, size_t k)
{
    if (k < count) dcr_dk_store(tracker, idx[k], es, dcr_dk_load(cand, idx[k], es));
}

/* The candidate words of the changed elements, for projection on the
 * host: vals[k] = src[idx[k]]. */
DCR_DK_FN void dcr_dk_gather(void *vals, const void *src, unsigned es, const uint32_t *idx,
                             size_t count, size_t k)
{
    if (k < count) dcr_dk_store(vals, (int64_t)k, es, dcr_dk_load(src, idx[k], es));
}

/* ---- apply ---- */

/* The quiet NaN a placeholder-filled scratch holds (the bits the receiver's
 * CPU path uses), and whether bits are a NaN of the dtype. */
DCR_DK_FN uint32_t dcr_dk_nan_word(int dtype)
{
    switch (dtype) {
    case DCR_DK_BF16:
        return 0x7FC0u;
    case DCR_DK_FP16:
        return 0x7E00u;
    case DCR_DK_FP32:
        return 0x7FC00000u;
    case DCR_DK_FP8_E4M3:
        return 0x7Fu;
    default:
        return 0;
    }
}

DCR_DK_FN int dcr_dk_isnan(int dtype, uint32_t b)
{
    switch (dtype) {
    case DCR_DK_BF16:
        return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
    case DCR_DK_FP16:
        return (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0;
    case DCR_DK_FP32:
        return (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu) != 0;
    case DCR_DK_FP8_E4M3:
        return (b & 0x7Fu) == 0x7Fu;
    default:
        return 0;
    }
}

/* Record k scattered into dst: XOR masks into the word, overwrites replace
 * it. Record indices of one call are distinct (an item's are strictly
 * increasing), so threads never write the same word. */
DCR_DK_FN void dcr_dk_scatter(void *dst, unsigned es, const int64_t *idx, const void *val,
                              size_t count, int xor_op, size_t k)
{
    if (k >= count) return;
    int64_t i = idx[k];
    uint32_t w = dcr_dk_load(val, (int64_t)k, es);
    dcr_dk_store(dst, i, es, xor_op ? dcr_dk_load(dst, i, es) ^ w : w);
}

/* The combine rule for one element, word di of dst from word si of src:
 * XOR applies the source word (0 where no record landed); overwrite takes
 * the source word where act is NULL and it is not a NaN (the placeholder of
 * positions no record touched, which is why NaN-valued records cannot take
 * this path), or where *act (the element's byte of the activity map the
 * loader carried through its ops: the tracked pass) is set; assign always
 * takes it (dense loads). The one definition: dcr_dk_combine and the CPU
 * backend's row loop both call it. */
DCR_DK_FN void dcr_dk_combine_at(void *dst, int64_t di, const void *src, int64_t si, unsigned es,
                                 int dtype, const uint8_t *act, int op)
{
    uint32_t s = dcr_dk_load(src, si, es);
    if (op == DCR_DK_XOR)
        dcr_dk_store(dst, di, es, dcr_dk_load(dst, di, es) ^ s);
    else if (op == DCR_DK_ASSIGN || (act ? *act != 0 : !dcr_dk_isnan(dtype, s)))
        dcr_dk_store(dst, di, es, s);
}

/* Byte of the activity map for the region's element (row, col). */
DCR_DK_FN int64_t dcr_dk_act_at(dcr_device_region_t r, int64_t row, int64_t col)
{
    if (r.act_row == 0 && r.act_col == 0) return row * r.cols + col;
    return row * r.act_row + col * r.act_col;
}

/* Element i (row-major) of a full pass over a region, by dcr_dk_combine_at;
 * active is NULL (untracked) or the activity map, placed by the region's
 * act strides. */
DCR_DK_FN void dcr_dk_combine(void *dst, const void *src, unsigned es, int dtype,
                              dcr_device_region_t r, const uint8_t *active, int op, size_t i)
{
    if (r.cols <= 0 || i >= (size_t)(r.rows * r.cols)) return;
    int64_t row = (int64_t)i / r.cols, col = (int64_t)i % r.cols;
    dcr_dk_combine_at(dst, row * r.dst_row + col * r.dst_col, src,
                      row * r.src_row + col * r.src_col, es, dtype,
                      active ? active + dcr_dk_act_at(r, row, col) : NULL, op);
}

/* ---- convert (cast and converting copies) ----
 *
 * The integer-only conversions of engine/core/dtype.c, word for word, so a
 * cast on the device yields the bits dcr_convert yields on the host: every
 * conversion goes through FP32 bits (exact for every source dtype here),
 * narrowing rounds to nearest even, FP8 e4m3fn does not saturate (Inf, NaN
 * and anything rounding above 448 become NaN), and NaN payloads keep their
 * top bits (to BF16 as they are when those still make a NaN, so a BF16 NaN
 * widened and narrowed again comes back bit for bit; else the quiet bit is
 * forced). */

#define DCR_DK_F32_SIGN  0x80000000u
#define DCR_DK_F32_EXP   0x7F800000u
#define DCR_DK_F32_MANT  0x007FFFFFu
#define DCR_DK_F32_QUIET 0x00400000u

/* x >> shift rounded to nearest, ties to even (dcr__shift_rne). */
DCR_DK_FN uint32_t dcr_dk_shift_rne(uint32_t x, unsigned shift)
{
    if (shift == 0) return x;
    if (shift > 31) return 0;
    uint32_t kept = x >> shift, rest = x & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (kept & 1u))) kept++;
    return kept;
}

/* A finite nonzero |FP32| rounded to mbits mantissa bits and exponent bias
 * bias: the unsigned target code, possibly past the target's largest
 * (dcr__narrow). */
DCR_DK_FN uint32_t dcr_dk_narrow(uint32_t abs_bits, unsigned mbits, int bias)
{
    int exp8 = (int)(abs_bits >> 23);
    uint32_t mant = abs_bits & DCR_DK_F32_MANT;
    int e = exp8 - 127 + bias;
    if (e >= 1) return dcr_dk_shift_rne(((uint32_t)e << 23) | mant, 23u - mbits);
    if (exp8 == 0) return 0;
    return dcr_dk_shift_rne(mant | 0x00800000u, (unsigned)(23 - (int)mbits + 1 - e));
}

/* FP32 bits of a subnormal with mantissa mant (nonzero, mbits wide) and the
 * biased FP32 exponent of its unit's leading position. */
DCR_DK_FN uint32_t dcr_dk_widen_subnormal(uint32_t sign, uint32_t mant, unsigned mbits, int e)
{
    while ((mant & (1u << mbits)) == 0) {
        mant <<= 1;
        e--;
    }
    return sign | ((uint32_t)e << 23) | ((mant & ((1u << mbits) - 1u)) << (23 - mbits));
}

/* Word w of dtype as FP32 bits (exact). */
DCR_DK_FN uint32_t dcr_dk_to_f32(int dtype, uint32_t w)
{
    if (dtype == DCR_DK_BF16) return w << 16;
    if (dtype == DCR_DK_FP32) return w;
    if (dtype == DCR_DK_FP16) {
        uint32_t sign = (w & 0x8000u) << 16, exp = (w >> 10) & 0x1Fu, mant = w & 0x3FFu;
        if (exp == 0x1F)
            return sign | DCR_DK_F32_EXP | (mant << 13) | (mant ? DCR_DK_F32_QUIET : 0);
        if (exp == 0) return mant ? dcr_dk_widen_subnormal(sign, mant, 10, 1 - 15 + 127) : sign;
        return sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    if (dtype == DCR_DK_FP8_E4M3) {
        uint32_t sign = (w & 0x80u) << 24, exp = (w >> 3) & 0xFu, mant = w & 0x7u;
        if (exp == 0xF && mant == 0x7) return sign | DCR_DK_F32_EXP | DCR_DK_F32_QUIET;
        if (exp == 0) return mant ? dcr_dk_widen_subnormal(sign, mant, 3, 1 - 7 + 127) : sign;
        return sign | ((exp - 7 + 127) << 23) | (mant << 20);
    }
    return 0;
}

/* FP32 bits as a word of dtype, rounded like dcr_convert. */
DCR_DK_FN uint32_t dcr_dk_from_f32(int dtype, uint32_t bits)
{
    uint32_t abs_bits = bits & ~DCR_DK_F32_SIGN;
    if (dtype == DCR_DK_FP32) return bits;
    if (dtype == DCR_DK_BF16) {
        if (abs_bits > DCR_DK_F32_EXP) { /* a NaN: kept when its top half still is one */
            uint32_t top = (bits >> 16) & 0xFFFFu;
            return (top & 0x007Fu) != 0 ? top : top | 0x0040u;
        }
        return ((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16) & 0xFFFFu;
    }
    if (dtype == DCR_DK_FP16) {
        uint32_t sign = (bits >> 16) & 0x8000u;
        if (abs_bits > DCR_DK_F32_EXP) return sign | 0x7E00u | ((abs_bits >> 13) & 0x3FFu);
        if (abs_bits == DCR_DK_F32_EXP) return sign | 0x7C00u;
        if (abs_bits == 0) return sign;
        if ((int)(abs_bits >> 23) - 127 + 15 >= 31) return sign | 0x7C00u;
        uint32_t code = dcr_dk_narrow(abs_bits, 10, 15);
        return sign | (code >= 0x7C00u ? 0x7C00u : code);
    }
    if (dtype == DCR_DK_FP8_E4M3) {
        uint32_t sign = (bits >> 24) & 0x80u;
        if (abs_bits >= DCR_DK_F32_EXP) return sign | 0x7Fu;
        if (abs_bits == 0) return sign;
        if ((int)(abs_bits >> 23) - 127 + 7 > 15) return sign | 0x7Fu;
        uint32_t code = dcr_dk_narrow(abs_bits, 3, 7);
        return sign | (code > 0x7Eu ? 0x7Fu : code);
    }
    return 0;
}

/* ---- elementwise transforms (the loader's map on a device) ----
 *
 * A closed set, each computed in FP32 the same way on the host and on the
 * device: only IEEE operations that round once (multiply, fmaf, rintf,
 * add) and integer bit work, so nvcc's and the host compiler's code give
 * the same bits (no libm call, whose last bit differs between glibc and
 * CUDA, and nothing a compiler may contract). The values are those of
 * dcr_load_transform_t (dcr/loader.h). */
#define DCR_DK_T_NONE     0 /* y = x */
#define DCR_DK_T_NEG      1 /* y = -x */
#define DCR_DK_T_NEG_EXP  2 /* y = -exp(x) (Mamba's A = -exp(A_log)) */
#define DCR_DK_TRANSFORMS 3

DCR_DK_FN float dcr_dk_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

DCR_DK_FN uint32_t dcr_dk_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* exp(x) in FP32 within 2 ulp (Cephes' polynomial on [-ln2/2, ln2/2],
 * Cody-Waite reduction with fmaf, scaling by exact powers of two). NaN in,
 * the same NaN out (quieted). */
DCR_DK_FN uint32_t dcr_dk_exp_bits(uint32_t xb)
{
    if ((xb & ~DCR_DK_F32_SIGN) > DCR_DK_F32_EXP) return xb | DCR_DK_F32_QUIET;
    float x = dcr_dk_f32(xb);
    if (x > 88.72283935546875f) return DCR_DK_F32_EXP; /* +inf (and exp(+inf)) */
    if (x < -104.0f) return 0;                         /* below half the least subnormal */
    float k = rintf(x * 1.44269502162933349609375f);
    float r = fmaf(k, -0.693145751953125f, x);
    r = fmaf(k, -1.428606765330187045e-06f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float y = fmaf(p, r * r, r) + 1.0f;
    /* y * 2^k, k in [-150, 128], as two multiplications by normal powers. */
    int ki = (int)k, k1 = ki / 2, k2 = ki - k1;
    y = y * dcr_dk_f32((uint32_t)(k1 + 127) << 23);
    return dcr_dk_bits(y * dcr_dk_f32((uint32_t)(k2 + 127) << 23));
}

/* A transform of FP32 bits. */
DCR_DK_FN uint32_t dcr_dk_transform(int op, uint32_t xb)
{
    if (op == DCR_DK_T_NEG) return xb ^ DCR_DK_F32_SIGN;
    if (op == DCR_DK_T_NEG_EXP) return dcr_dk_exp_bits(xb) ^ DCR_DK_F32_SIGN;
    return xb;
}

/* What a conversion did to the NaN placeholder rule: created a NaN from a
 * number, lost one (a NaN became a number), or neither. */
#define DCR_DK_NAN_NONE    0
#define DCR_DK_NAN_CREATED 1
#define DCR_DK_NAN_LOST    2

/* Element i (row-major over the region) of dst (dtype to) = transform op
 * of src (dtype from) converted; returns its NaN event. Same dtypes
 * without a transform copy bits. mode DCR_DK_ASSIGN writes every element;
 * DCR_DK_OVERWRITE (a converting copy in an overwrite pass) only where the
 * element's activity byte is set (active, placed by the region's act
 * strides) or, without one, where the source word is not a NaN of from
 * (the placeholder rule, on the source like the host's mask). */
DCR_DK_FN int dcr_dk_convert(void *dst, int to, const void *src, int from, dcr_device_region_t r,
                             const uint8_t *active, int mode, int op, size_t i)
{
    if (r.cols <= 0 || i >= (size_t)(r.rows * r.cols)) return DCR_DK_NAN_NONE;
    int64_t row = (int64_t)i / r.cols, col = (int64_t)i % r.cols;
    uint32_t s = dcr_dk_load(src, row * r.src_row + col * r.src_col, dcr_dk_dtype_size(from));
    if (mode == DCR_DK_OVERWRITE &&
        !(active ? active[dcr_dk_act_at(r, row, col)] != 0 : !dcr_dk_isnan(from, s)))
        return DCR_DK_NAN_NONE;
    uint32_t d = to == from && op == DCR_DK_T_NONE
                     ? s
                     : dcr_dk_from_f32(to, dcr_dk_transform(op, dcr_dk_to_f32(from, s)));
    dcr_dk_store(dst, row * r.dst_row + col * r.dst_col, dcr_dk_dtype_size(to), d);
    int a = dcr_dk_isnan(from, s), b = dcr_dk_isnan(to, d);
    return !a && b ? DCR_DK_NAN_CREATED : a && !b ? DCR_DK_NAN_LOST : DCR_DK_NAN_NONE;
}

/* Restores scratch at record k's position to the base word (0 after XOR,
 * the placeholder NaN after overwrite), so the next item finds scratch
 * clean without a full refill. */
DCR_DK_FN void dcr_dk_reset(void *scratch, unsigned es, const int64_t *idx, size_t count,
                            uint32_t base_word, size_t k)
{
    if (k < count) dcr_dk_store(scratch, idx[k], es, base_word);
}

/* Element i of a fill with one word (scratch base patterns). */
DCR_DK_FN void dcr_dk_fill(void *dst, unsigned es, uint32_t word, size_t n, size_t i)
{
    if (i < n) dcr_dk_store(dst, (int64_t)i, es, word);
}

#endif
