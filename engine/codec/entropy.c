/* The entropy coders of payload format version 2 (FORMAT.md section 8):
 * Golomb-Rice codes of location gaps with one parameter per item, and a
 * canonical Huffman code of 16-bit value words with one table per payload.
 * Both write one LSB-first bit stream per item segment; both are small on
 * purpose (the measurements put them within 1-2% of the entropy of
 * real training steps' changes), and the decoders check every bit they
 * read against the segment's end. */
#include "codec-internal.h"

/* ---- bits ---- */

/* Stream bit j is bit (j % 8) of byte j / 8. The writer keeps up to 63
 * pending bits in acc and flushes whole bytes. */
typedef struct dcr__bitw {
    uint8_t *p;
    uint64_t acc;
    unsigned n;
} dcr__bitw_t;

static inline void dcr__bitw_put(dcr__bitw_t *w, uint64_t v, unsigned n)
{
    /* n <= 32 keeps acc from overflowing (at most 7 + 32 bits pending). */
    w->acc |= v << w->n;
    w->n += n;
    while (w->n >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n -= 8;
    }
}

static inline void dcr__bitw_long(dcr__bitw_t *w, uint64_t v, unsigned n)
{
    while (n > 32) {
        dcr__bitw_put(w, v & 0xFFFFFFFFu, 32);
        v >>= 32;
        n -= 32;
    }
    dcr__bitw_put(w, v, n);
}

/* Pads the last byte with 0 bits; returns the end of the stream. */
static inline uint8_t *dcr__bitw_end(dcr__bitw_t *w)
{
    if (w->n > 0) *w->p++ = (uint8_t)w->acc;
    w->acc = 0;
    w->n = 0;
    return w->p;
}

typedef struct dcr__bitr {
    const uint8_t *p;
    uint64_t nbits; /* bits in the segment available to this stream */
    uint64_t pos;
    size_t fast_end; /* byte positions below this have 8 readable bytes */
} dcr__bitr_t;

static inline dcr__bitr_t dcr__bitr_init(const uint8_t *src, size_t avail)
{
    return (dcr__bitr_t){src, (uint64_t)avail * 8, 0, avail >= 8 ? avail - 7 : 0};
}

/* The next 57 or more stream bits at bit 0 (zeros past the segment's end;
 * the caller checks pos against nbits after consuming). One unaligned
 * 8-byte load away from the segment's last 7 bytes. */
static inline uint64_t dcr__bitr_peek(const dcr__bitr_t *r)
{
    size_t byte = (size_t)(r->pos >> 3);
    uint64_t w = 0;
    if (__builtin_expect(byte < r->fast_end, 1))
        memcpy(&w, r->p + byte, 8);
    else if ((uint64_t)byte < (r->nbits >> 3))
        memcpy(&w, r->p + byte, (size_t)((r->nbits >> 3) - byte));
    return w >> (r->pos & 7);
}

/* After the last symbol: the stream ends at the next byte boundary and the
 * padding bits are zero. Returns the bytes used, or SIZE_MAX on a violation. */
static size_t dcr__bitr_finish(const dcr__bitr_t *r)
{
    if (r->pos > r->nbits) return SIZE_MAX;
    unsigned pad = (unsigned)((8 - (r->pos & 7)) & 7);
    if (pad && (r->p[r->pos >> 3] >> (r->pos & 7)) != 0) return SIZE_MAX;
    return (size_t)((r->pos + 7) >> 3);
}

/* ---- Golomb-Rice gaps ---- */

uint64_t dcr__rice_bits(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, unsigned k)
{
    uint64_t bits = (uint64_t)ngaps * (k + 1);
    for (size_t i = 0; i < ngaps; i++) bits += (dcr__gap_load(gaps, i, gap_bytes) - 1) >> k;
    return bits;
}

unsigned dcr__rice_best_k(const uint8_t *gaps, size_t ngaps, unsigned gap_bytes, uint64_t *bits_p)
{
    /* For geometric gaps the best parameter is near log2(mean * ln 2); the
     * exact cost of the neighbours decides (the cost is convex in k). */
    uint64_t sum = 0;
    for (size_t i = 0; i < ngaps; i++) sum += dcr__gap_load(gaps, i, gap_bytes) - 1;
    double mean = ngaps ? (double)sum / (double)ngaps : 0.0;
    int guess = 0;
    while (guess < DCR__RICE_K_MAX && (double)((uint64_t)1 << (guess + 1)) <= mean * 0.6931)
        guess++;
    unsigned best = (unsigned)guess;
    uint64_t best_bits = dcr__rice_bits(gaps, ngaps, gap_bytes, best);
    for (int dir = -1; dir <= 1; dir += 2) {
        for (int k = guess + dir; k >= 0 && k <= DCR__RICE_K_MAX; k += dir) {
            uint64_t b = dcr__rice_bits(gaps, ngaps, gap_bytes, (unsigned)k);
            if (b >= best_bits) break;
            best_bits = b;
            best = (unsigned)k;
        }
    }
    *bits_p = best_bits;
    return best;
}

size_t dcr__rice_write(uint8_t *dst, const uint8_t *gaps, size_t ngaps, unsigned gap_bytes,
                       unsigned k)
{
    dcr__bitw_t w = {dst, 0, 0};
    uint64_t mask = k ? (~(uint64_t)0 >> (64 - k)) : 0;
    for (size_t i = 0; i < ngaps; i++) {
        uint64_t v = dcr__gap_load(gaps, i, gap_bytes) - 1, q = v >> k;
        while (q >= 32) {
            dcr__bitw_put(&w, 0xFFFFFFFFu, 32);
            q -= 32;
        }
        dcr__bitw_put(&w, ((uint64_t)1 << q) - 1, (unsigned)q + 1); /* q ones, one zero */
        if (k) dcr__bitw_long(&w, v & mask, k);
    }
    return (size_t)(dcr__bitw_end(&w) - dst);
}

/* One Rice code at r that does not fit one 57-bit peek (a long unary run
 * or a remainder of more than 56 bits): the gap (>= 1) in *gap_p; false when
 * the code runs past the segment or its gap reaches 2^62 (q_max =
 * 2^(62 - k)). */
static bool dcr__rice_long(dcr__bitr_t *r, unsigned k, uint64_t mask, uint64_t q_max,
                           uint64_t *gap_p)
{
    /* The unary part 56 bits at a time. */
    uint64_t q = 0;
    for (;;) {
        uint64_t w = dcr__bitr_peek(r);
        unsigned ones = (unsigned)__builtin_ctzll(~w | ((uint64_t)1 << 56)); /* at most 56 */
        q += ones;
        r->pos += ones;
        if (r->pos >= r->nbits || q >= q_max) return false;
        if (ones < 56) break;
    }
    r->pos++; /* the terminating zero */
    uint64_t rem = 0;
    if (k > 0) {
        uint64_t lo = dcr__bitr_peek(r);
        if (k <= 56) {
            rem = lo & mask;
            r->pos += k;
        } else {
            rem = lo & (((uint64_t)1 << 32) - 1);
            r->pos += 32;
            rem |= (dcr__bitr_peek(r) & (mask >> 32)) << 32;
            r->pos += k - 32;
        }
    }
    if (r->pos > r->nbits) return false;
    *gap_p = ((q << k) | rem) + 1;
    return true;
}

static inline void dcr__gap_put(uint8_t *words, size_t k, unsigned width, uint64_t v)
{
    switch (width) {
    case 1:
        words[k] = (uint8_t)v;
        break;
    case 2:
        dcr__st16(words + 2 * k, (uint16_t)v);
        break;
    case 4:
        dcr__st32(words + 4 * k, (uint32_t)v);
        break;
    default:
        dcr__st64(words + 8 * k, v);
    }
}

/* Rewrites the first n words from width `from` to the wider `to` in place.
 * Last word first: word i's new bytes start at i * to >= i * from, past
 * every word not yet moved. */
static void dcr__gaps_widen(uint8_t *words, size_t n, unsigned from, unsigned to)
{
    for (size_t i = n; i-- > 0;) dcr__gap_put(words, i, to, dcr__gap_load(words, i, from));
}

size_t dcr__rice_read(const uint8_t *src, size_t avail, size_t ngaps, unsigned k, uint8_t *out,
                      unsigned *width_p)
{
    enum { CHUNK = 256 };
    dcr__bitr_t r = dcr__bitr_init(src, avail);
    /* A gap is below 2^62 (numel's bound), so q < 2^(62 - k). */
    uint64_t q_max = (uint64_t)1 << (62 - k);
    uint64_t mask = k ? (~(uint64_t)0 >> (64 - k)) : 0;
    uint64_t chunk[CHUNK];
    unsigned width = 1;
    for (size_t i = 0; i < ngaps;) {
        size_t n = ngaps - i < CHUNK ? ngaps - i : CHUNK;
        uint64_t any = 0; /* OR of the chunk's gaps: its highest bit sets the width */
        for (size_t j = 0; j < n;) {
            /* As many whole codes as one 57-bit peek holds, shifted out of a
             * register: the position is updated once per peek. Codes of
             * len <= 57 - used bits imply q <= 56 - k < q_max. */
            uint64_t w = dcr__bitr_peek(&r);
            unsigned used = 0;
            while (j < n) {
                unsigned ones = (unsigned)__builtin_ctzll(~w | ((uint64_t)1 << 63));
                unsigned len = ones + 1 + k;
                if (len > 57 - used) break;
                uint64_t gap = (((uint64_t)ones << k) | ((w >> (ones + 1)) & mask)) + 1;
                chunk[j++] = gap;
                any |= gap;
                w >>= len;
                used += len;
            }
            r.pos += used;
            if (r.pos > r.nbits) return SIZE_MAX;
            if (used == 0) { /* one code longer than a peek */
                if (!dcr__rice_long(&r, k, mask, q_max, &chunk[j])) return SIZE_MAX;
                any |= chunk[j++];
            }
        }
        /* Words as narrow as the widest gap so far: typical gaps take 1 or 2
         * bytes instead of 8, which is most of the memory the decode touches. */
        unsigned need = dcr__gap_bytes_for(any);
        if (need > width) {
            dcr__gaps_widen(out, i, width, need);
            width = need;
        }
        uint8_t *dst = out + i * width;
        switch (width) {
        case 1:
            for (size_t j = 0; j < n; j++) dst[j] = (uint8_t)chunk[j];
            break;
        case 2:
            for (size_t j = 0; j < n; j++) dcr__st16(dst + 2 * j, (uint16_t)chunk[j]);
            break;
        case 4:
            for (size_t j = 0; j < n; j++) dcr__st32(dst + 4 * j, (uint32_t)chunk[j]);
            break;
        default:
            memcpy(dst, chunk, n * 8);
        }
        i += n;
    }
    *width_p = width;
    return dcr__bitr_finish(&r);
}

/* ---- canonical Huffman of 16-bit words ---- */

/* Code lengths for n >= 1 symbols of nonzero frequency sorted ascending
 * (f[i] for symbol order[i]): the two-queue Huffman construction on sorted
 * leaves. len_out[i] receives leaf i's depth; a single symbol gets 1. */
static unsigned dcr__huff_depths(const uint64_t *f, size_t n, uint64_t *w, uint32_t *parent,
                                 uint32_t *depth, uint8_t *len_out)
{
    if (n == 1) {
        len_out[0] = 1;
        return 1;
    }
    size_t leaf = 0, node = n, next = n;
    for (size_t i = 0; i < n; i++) w[i] = f[i];
    for (; next < 2 * n - 1; next++) {
        size_t pick[2];
        for (int j = 0; j < 2; j++) {
            if (leaf < n && (node >= next || w[leaf] <= w[node]))
                pick[j] = leaf++;
            else
                pick[j] = node++;
        }
        w[next] = w[pick[0]] + w[pick[1]];
        parent[pick[0]] = parent[pick[1]] = (uint32_t)next;
    }
    /* Depths from the root down; parents are always created after children. */
    depth[2 * n - 2] = 0;
    unsigned max = 0;
    for (size_t i = 2 * n - 2; i-- > 0;) {
        depth[i] = depth[parent[i]] + 1;
        if (i < n) {
            len_out[i] = depth[i] > 255 ? 255 : (uint8_t)depth[i];
            if (depth[i] > max) max = depth[i];
        }
    }
    return max;
}

static int dcr__freq_order(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

dcr_status_t dcr__huff_build(dcr__huff_t *h)
{
    /* Keys: frequency << 16 | symbol, sorted, so ties break by symbol and
     * the code is a deterministic function of the histogram. */
    size_t n = 0;
    for (uint32_t s = 0; s < 65536; s++)
        if (h->freq[s]) h->key[n++] = ((uint64_t)h->freq[s] << 16) | s;
    h->nsym = n;
    memset(h->len, 0, 65536);
    if (n == 0) return DCR_OK;
    qsort(h->key, n, sizeof(*h->key), dcr__freq_order);
    uint64_t *f = h->work;
    for (size_t i = 0; i < n; i++) f[i] = h->key[i] >> 16;
    /* Too deep a tree: halve the frequencies (keeping them >= 1) and build
     * again; each round flattens the distribution, so this ends. */
    for (;;) {
        unsigned max = dcr__huff_depths(f, n, h->work + n, h->parent, h->node_depth, h->depth);
        if (max <= DCR__HUFF_MAX_LEN) {
            h->max_len = max;
            break;
        }
        for (size_t i = 0; i < n; i++) f[i] = (f[i] >> 1) | 1;
    }
    for (size_t i = 0; i < n; i++) h->len[h->key[i] & 0xFFFF] = h->depth[i];
    /* Canonical codes: by length, then by symbol value. */
    uint32_t count[DCR__HUFF_MAX_LEN + 2] = {0}, code[DCR__HUFF_MAX_LEN + 2] = {0};
    for (uint32_t s = 0; s < 65536; s++) count[h->len[s]]++;
    count[0] = 0;
    uint32_t c = 0;
    for (unsigned l = 1; l <= h->max_len; l++) {
        c = (c + count[l - 1]) << 1;
        code[l] = c;
        h->count[l] = count[l];
    }
    for (uint32_t s = 0; s < 65536; s++) {
        unsigned l = h->len[s];
        if (l == 0) continue;
        uint32_t v = code[l]++, rev = 0;
        /* The code goes out most significant bit first; an LSB-first writer
         * therefore puts its bits reversed. */
        for (unsigned b = 0; b < l; b++) rev |= ((v >> b) & 1u) << (l - 1 - b);
        h->rcode[s] = rev;
    }
    return DCR_OK;
}

size_t dcr__huff_table_size(const dcr__huff_t *h)
{
    return 1 + 4 * (size_t)h->max_len + 2 * h->nsym;
}

void dcr__huff_table_write(const dcr__huff_t *h, uint8_t *dst)
{
    *dst++ = (uint8_t)h->max_len;
    for (unsigned l = 1; l <= h->max_len; l++, dst += 4) dcr__st32(dst, h->count[l]);
    for (unsigned l = 1; l <= h->max_len; l++)
        for (uint32_t s = 0; s < 65536; s++)
            if (h->len[s] == l) {
                dcr__st16(dst, (uint16_t)s);
                dst += 2;
            }
}

uint64_t dcr__huff_bits(const dcr__huff_t *h, const uint8_t *vals, size_t n)
{
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++) bits += h->len[dcr__ld16(vals + 2 * i)];
    return bits;
}

size_t dcr__huff_write(const dcr__huff_t *h, uint8_t *dst, const uint8_t *vals, size_t n)
{
    dcr__bitw_t w = {dst, 0, 0};
    for (size_t i = 0; i < n; i++) {
        uint16_t s = dcr__ld16(vals + 2 * i);
        dcr__bitw_put(&w, h->rcode[s], h->len[s]);
    }
    return (size_t)(dcr__bitw_end(&w) - dst);
}

/* Reads and checks a table (FORMAT.md 8.3); fills the decoding tables.
 * Returns the table's bytes, 0 when it is invalid. */
size_t dcr__huff_table_read(dcr__huff_dec_t *d, const uint8_t *src, size_t avail)
{
    if (avail < 1) return 0;
    unsigned m = src[0];
    if (m < 1 || m > DCR__HUFF_MAX_LEN || avail < 1 + 4 * (size_t)m) return 0;
    uint64_t nsym = 0, kraft = 0; /* kraft in units of 2^-m */
    for (unsigned l = 1; l <= m; l++) {
        d->count[l] = dcr__ld32(src + 1 + 4 * (l - 1));
        nsym += d->count[l];
        kraft += (uint64_t)d->count[l] << (m - l);
    }
    if (d->count[m] == 0 || nsym > 65536 || kraft > ((uint64_t)1 << m)) return 0;
    if ((nsym == 1) != (kraft < ((uint64_t)1 << m))) return 0; /* complete, or one symbol */
    size_t size = 1 + 4 * (size_t)m + 2 * (size_t)nsym;
    if (avail < size) return 0;
    memset(d->seen, 0, sizeof d->seen);
    const uint8_t *syms = src + 1 + 4 * (size_t)m;
    size_t at = 0;
    for (unsigned l = 1; l <= m; l++) {
        for (uint32_t j = 0; j < d->count[l]; j++, at++) {
            uint16_t s = dcr__ld16(syms + 2 * at);
            if (d->seen[s >> 6] & ((uint64_t)1 << (s & 63))) return 0; /* repeated */
            if (j > 0 && s <= d->sym[at - 1]) return 0;                /* not ascending */
            d->seen[s >> 6] |= (uint64_t)1 << (s & 63);
            d->sym[at] = s;
        }
    }
    d->max_len = m;
    /* first[l]: the first code of length l; index[l]: its symbol's position. */
    uint32_t c = 0, idx = 0;
    for (unsigned l = 1; l <= m; l++) {
        c = (c + (l > 1 ? d->count[l - 1] : 0)) << (l > 1 ? 1 : 0);
        d->first[l] = c;
        d->index[l] = idx;
        idx += d->count[l];
    }
    /* limit[l]: one past the last code of length l, left-justified to m
     * bits; a code of length l read as m bits is below it and at or above
     * limit[l - 1]. */
    for (unsigned l = 1; l <= m; l++) d->limit[l] = (d->first[l] + d->count[l]) << (m - l);
    /* Short codes through one lookup: entry = symbol << 8 | length, 0 for
     * a longer code (or none). */
    unsigned lb = m < DCR__HUFF_LUT_BITS ? m : DCR__HUFF_LUT_BITS;
    d->lut_bits = lb;
    memset(d->lut, 0, sizeof(uint32_t) << lb);
    for (unsigned l = 1; l <= lb; l++) {
        for (uint32_t j = 0; j < d->count[l]; j++) {
            uint32_t code = d->first[l] + j, rev = 0;
            for (unsigned b = 0; b < l; b++) rev |= ((code >> b) & 1u) << (l - 1 - b);
            for (uint32_t hi = 0; hi < (1u << (lb - l)); hi++)
                d->lut[rev | (hi << l)] = ((uint32_t)d->sym[d->index[l] + j] << 8) | l;
        }
    }
    return size;
}

/* The low n bits of v in reverse order (n <= 32), without a loop. */
static inline uint32_t dcr__reverse_bits(uint32_t v, unsigned n)
{
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
    return __builtin_bswap32(v) >> (32 - n);
}

/* A code longer than the lookup: the next max_len stream bits read as one
 * MSB-first number, compared with each longer length's limit. Returns the
 * code's length and stores its symbol, 0 for a code no symbol has. */
static inline unsigned dcr__huff_long(const dcr__huff_dec_t *d, uint64_t w, uint16_t *sym_p)
{
    unsigned m = d->max_len;
    uint32_t v = dcr__reverse_bits((uint32_t)w & ((1u << m) - 1), m);
    for (unsigned l = d->lut_bits + 1; l <= m; l++) {
        if (v < d->limit[l]) {
            *sym_p = d->sym[d->index[l] + ((v >> (m - l)) - d->first[l])];
            return l;
        }
    }
    return 0;
}

size_t dcr__huff_read(const dcr__huff_dec_t *d, const uint8_t *src, size_t avail, size_t n,
                      uint8_t *out)
{
    dcr__bitr_t r = dcr__bitr_init(src, avail);
    uint32_t lut_mask = (1u << d->lut_bits) - 1;
    /* A peek holds 57 bits, so `per` codes of at most max_len bits each
     * decode from one register, shifted as they go; the position is updated
     * once per peek and checked against the segment's end then. */
    size_t per = 56 / d->max_len;
    for (size_t i = 0; i < n;) {
        uint64_t w = dcr__bitr_peek(&r);
        uint64_t used = 0;
        size_t stop = n - i < per ? n : i + per;
        for (; i < stop; i++) {
            uint32_t e = d->lut[w & lut_mask];
            uint16_t s = (uint16_t)(e >> 8);
            unsigned len = e & 0xFF;
            if (__builtin_expect(len == 0, 0)) {
                len = dcr__huff_long(d, w, &s);
                if (len == 0) return SIZE_MAX;
            }
            w >>= len;
            used += len;
            dcr__st16(out + 2 * i, s);
        }
        r.pos += used;
        if (r.pos > r.nbits) return SIZE_MAX;
    }
    return dcr__bitr_finish(&r);
}
