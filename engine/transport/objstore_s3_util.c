/* Pieces of the S3 backend that need no network: MD5 (the ETag of a
 * single-part object is the MD5 of its bytes, RFC 1321) and a minimal XML
 * reader for the few responses S3 sends (ListObjectsV2, multipart uploads,
 * errors). The reader is bounded and forgiving only where S3's schema is:
 * it looks for known elements by name, never recurses, unescapes the five
 * predefined entities and numeric character references, and refuses
 * anything it cannot read instead of guessing. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/objstore-internal.h"

/* ---- MD5 ------------------------------------------------------------------ */

typedef struct md5 {
    uint32_t h[4];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} md5_t;

static uint32_t md5_rol(uint32_t x, int c)
{
    return (x << c) | (x >> (32 - c));
}

static void md5_block(md5_t *m, const uint8_t *p)
{
    static const uint32_t K[64] = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
        0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
        0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
        0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
        0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
        0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
        0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
        0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
        0xeb86d391};
    static const int R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                              5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                              4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                              6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    uint32_t a = m->h[0], b = m->h[1], c = m->h[2], d = m->h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + md5_rol(a + f + K[i] + w[g], R[i]);
        a = t;
    }
    m->h[0] += a;
    m->h[1] += b;
    m->h[2] += c;
    m->h[3] += d;
}

static void md5_init(md5_t *m)
{
    *m = (md5_t){.h = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}};
}

static void md5_update(md5_t *m, const uint8_t *p, size_t n)
{
    m->len += n;
    if (m->nbuf > 0) {
        size_t k = 64 - m->nbuf < n ? 64 - m->nbuf : n;
        memcpy(m->buf + m->nbuf, p, k);
        m->nbuf += k;
        p += k;
        n -= k;
        if (m->nbuf < 64) return;
        md5_block(m, m->buf);
        m->nbuf = 0;
    }
    for (; n >= 64; p += 64, n -= 64) md5_block(m, p);
    memcpy(m->buf, p, n);
    m->nbuf = n;
}

static void md5_final(md5_t *m, uint8_t out[16])
{
    uint64_t bits = m->len * 8;
    uint8_t pad[72] = {0x80};
    size_t padlen = (m->nbuf < 56 ? 56 : 120) - m->nbuf;
    for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (8 * i));
    md5_update(m, pad, padlen + 8);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(m->h[i] >> (8 * j));
}

static void hex16(const uint8_t d[16], char out[33])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[32] = '\0';
}

void dcr__md5(const uint8_t *buf, size_t len, uint8_t out[16])
{
    md5_t m;
    md5_init(&m);
    md5_update(&m, buf, len);
    md5_final(&m, out);
}

void dcr__md5_hex(const uint8_t *buf, size_t len, char out[33])
{
    uint8_t d[16];
    dcr__md5(buf, len, d);
    hex16(d, out);
}

void dcr__md5_multipart_etag(const uint8_t (*parts)[16], size_t n, char *out, size_t cap)
{
    md5_t m;
    md5_init(&m);
    for (size_t i = 0; i < n; i++) md5_update(&m, parts[i], 16);
    uint8_t d[16];
    md5_final(&m, d);
    char h[33];
    hex16(d, h);
    snprintf(out, cap, "%s-%zu", h, n);
}

/* ---- XML ------------------------------------------------------------------ */

/* Unescapes src[0, n) into out (cap bytes, NUL-terminated); false on an
 * unknown or malformed entity, a NUL, or when it does not fit. */
static bool xml_unescape(const char *src, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        bool ent = src[i] == '&';
        if (!ent) {
            c = (uint8_t)src[i++];
        } else {
            const char *semi = memchr(src + i, ';', n - i < 12 ? n - i : 12);
            if (semi == NULL) return false;
            const char *e = src + i + 1;
            size_t elen = (size_t)(semi - e);
            if (elen == 3 && memcmp(e, "amp", 3) == 0)
                c = '&';
            else if (elen == 2 && memcmp(e, "lt", 2) == 0)
                c = '<';
            else if (elen == 2 && memcmp(e, "gt", 2) == 0)
                c = '>';
            else if (elen == 4 && memcmp(e, "quot", 4) == 0)
                c = '"';
            else if (elen == 4 && memcmp(e, "apos", 4) == 0)
                c = '\'';
            else if (elen >= 2 && e[0] == '#') {
                bool hex = e[1] == 'x';
                const char *d = e + (hex ? 2 : 1);
                if (d == semi) return false;
                c = 0;
                for (; d < semi; d++) {
                    int v = *d >= '0' && *d <= '9'          ? *d - '0'
                            : hex && *d >= 'a' && *d <= 'f' ? *d - 'a' + 10
                            : hex && *d >= 'A' && *d <= 'F' ? *d - 'A' + 10
                                                            : -1;
                    if (v < 0 || c > 0x10ffff) return false;
                    c = c * (hex ? 16 : 10) + (uint32_t)v;
                }
                if (c > 0x10ffff) return false;
            } else {
                return false;
            }
            i += elen + 2;
        }
        if (c == 0) return false;
        /* UTF-8 of c (bytes above 0x7f pass through as they came). */
        uint8_t u[4];
        size_t un = 0;
        if (c < 0x80 || !ent)
            u[un++] = (uint8_t)c;
        else if (c < 0x800) {
            u[un++] = (uint8_t)(0xc0 | c >> 6);
            u[un++] = (uint8_t)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            u[un++] = (uint8_t)(0xe0 | c >> 12);
            u[un++] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            u[un++] = (uint8_t)(0x80 | (c & 0x3f));
        } else {
            u[un++] = (uint8_t)(0xf0 | c >> 18);
            u[un++] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
            u[un++] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
            u[un++] = (uint8_t)(0x80 | (c & 0x3f));
        }
        if (k + un >= cap) return false;
        memcpy(out + k, u, un);
        k += un;
    }
    out[k] = '\0';
    return true;
}

/* The raw content of the first <tag>...</tag> in [p, end): *s_p, *n_p. */
static bool xml_find(const char *p, const char *end, const char *tag, const char **s_p, size_t *n_p)
{
    char open[64], close[64];
    int no = snprintf(open, sizeof open, "<%s>", tag);
    int nc = snprintf(close, sizeof close, "</%s>", tag);
    if (no <= 0 || nc <= 0 || (size_t)no >= sizeof open) return false;
    const char *s = memmem(p, (size_t)(end - p), open, (size_t)no);
    if (s == NULL) return false;
    s += no;
    const char *e = memmem(s, (size_t)(end - s), close, (size_t)nc);
    if (e == NULL) return false;
    *s_p = s;
    *n_p = (size_t)(e - s);
    return true;
}

bool dcr__s3_xml_text(const char *xml, size_t len, const char *tag, char *out, size_t cap)
{
    const char *s;
    size_t n;
    if (!xml_find(xml, xml + len, tag, &s, &n)) return false;
    if (memchr(s, '<', n) != NULL) return false; /* not a text element */
    return xml_unescape(s, n, out, cap);
}

static bool xml_u64(const char *s, uint64_t *v)
{
    uint64_t x = 0;
    if (*s == '\0') return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || x > (UINT64_MAX - 9) / 10) return false;
        x = x * 10 + (uint64_t)(*s - '0');
    }
    *v = x;
    return true;
}

dcr_status_t dcr__s3_parse_list(const char *xml, size_t len, dcr_objstore_page_t *page)
{
    const char *end = xml + len;
    if (memmem(xml, len, "<ListBucketResult", 17) == NULL) {
        return dcr_error_set(DCR_ETRANSPORT, "S3 list response: no <ListBucketResult> in %zu bytes",
                             len);
    }
    size_t count = 0;
    for (const char *p = xml; (p = memmem(p, (size_t)(end - p), "<Contents>", 10)) != NULL; p += 10)
        count++;
    page->entries = calloc(count ? count : 1, sizeof *page->entries);
    if (page->entries == NULL)
        return dcr_error_set(DCR_ENOMEM, "S3 list response: %zu entries", count);
    page->n = 0;
    const char *p = xml;
    for (size_t i = 0; i < count; i++) {
        const char *s = memmem(p, (size_t)(end - p), "<Contents>", 10);
        const char *e = s ? memmem(s, (size_t)(end - s), "</Contents>", 11) : NULL;
        if (s == NULL || e == NULL)
            return dcr_error_set(DCR_ETRANSPORT, "S3 list response: unterminated <Contents>");
        dcr_objstore_entry_t *en = &page->entries[page->n];
        char size[32], etag[DCR_OBJSTORE_VERSION_MAX];
        if (!dcr__s3_xml_text(s, (size_t)(e - s), "Key", en->key, sizeof en->key) ||
            !dcr__s3_xml_text(s, (size_t)(e - s), "Size", size, sizeof size) ||
            !xml_u64(size, &en->size) ||
            !dcr__s3_xml_text(s, (size_t)(e - s), "ETag", etag, sizeof etag)) {
            return dcr_error_set(DCR_ETRANSPORT,
                                 "S3 list response: entry %zu: expected <Key> (at most %d bytes), "
                                 "<Size> (a decimal) and <ETag>",
                                 i + 1, DCR_OBJSTORE_KEY_MAX);
        }
        snprintf(en->version, sizeof en->version, "%s", etag);
        page->n++;
        p = e + 11;
    }
    char trunc[16] = "false";
    dcr__s3_xml_text(xml, len, "IsTruncated", trunc, sizeof trunc);
    page->next[0] = '\0';
    if (strcmp(trunc, "true") == 0 &&
        (!dcr__s3_xml_text(xml, len, "NextContinuationToken", page->next, sizeof page->next) ||
         page->next[0] == '\0')) {
        return dcr_error_set(DCR_ETRANSPORT, "S3 list response: truncated without a "
                                             "<NextContinuationToken> (or one above 1535 bytes)");
    }
    return DCR_OK;
}
