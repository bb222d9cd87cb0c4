/* The object-storage transport's names and manifest format.
 *
 * Keys (relative to the store's root or prefix):
 *   attempt-<tau>/payload-<owner>-<id>.dcrp   one payload, as the codec wrote it
 *   attempt-<tau>/MANIFEST                    written last, by the last owner's finish
 *   attempt-<tau>/MANIFEST-<first>-<count>    a manifest part: the completion marker of a
 *                                             handle serving owners [first, first + count)
 *                                             (an owner process), listing their payloads only
 *   reference-<pid>-<n>/ref-<owner>-<k>.bin   the reference's dummy checkpoint
 * One flat prefix per attempt, so one listing sees it all.
 *
 * The manifest is text, one record per line, each ending in '\n':
 *   dcr-manifest 1
 *   tau <tau>
 *   payloads <n>
 *   payload <owner> <id> <bytes> <BLAKE2b-128 digest, 32 lowercase hex digits>   (n lines)
 *   end
 * A part has the same format. Readers take the whole manifest, or else the
 * parts once they cover every owner of [0, world) exactly once, as one
 * manifest (the union of their entries).
 * Decimal numbers have no sign and no leading zeros; anything else is
 * malformed, and a malformed manifest fails the attempt on every reader
 * (once it stayed malformed OBJ_LISTED_WAIT_MS, objstore_transport.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/objstore-internal.h"

void dcr__obj_attempt_prefix(uint64_t tau, char *out, size_t cap)
{
    snprintf(out, cap, "attempt-%" PRIu64 "/", tau);
}

void dcr__obj_payload_name(uint32_t owner, uint64_t id, char *out, size_t cap)
{
    snprintf(out, cap, "payload-%" PRIu32 "-%" PRIu64 ".dcrp", owner, id);
}

/* ---- manifest ----------------------------------------------------------- */

static bool mf_lit(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0) return false;
    *p += n;
    return true;
}

static bool mf_u64(const char **p, const char *end, uint64_t *v)
{
    const char *q = *p;
    uint64_t x = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        uint64_t d = (uint64_t)(*q - '0');
        if (x > (UINT64_MAX - d) / 10) return false;
        x = x * 10 + d;
        q++;
    }
    size_t n = (size_t)(q - *p);
    if (n == 0 || (n > 1 && **p == '0')) return false;
    *p = q;
    *v = x;
    return true;
}

static bool mf_hex16(const char **p, const char *end, uint8_t out[16])
{
    if (end - *p < 32) return false;
    for (int i = 0; i < 32; i++) {
        char c = (*p)[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return false;
        if (i % 2 == 0)
            out[i / 2] = (uint8_t)(v << 4);
        else
            out[i / 2] |= (uint8_t)v;
    }
    *p += 32;
    return true;
}

/* The next line [*p, *eol) without its '\n'; false when no '\n' remains. */
static bool mf_line(const char *p, const char *end, const char **eol)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (nl == NULL) return false;
    *eol = nl;
    return true;
}

static int mf_cmp(const void *a, const void *b)
{
    const dcr__ledger_entry_t *x = a, *y = b;
    if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static dcr_status_t mf_bad(const char *path, size_t line, const char *what)
{
    return dcr_error_set(DCR_ETRANSPORT, "objstore: manifest %s line %zu: expected %s", path, line,
                         what);
}

/* One "payload <owner> <id> <bytes> <digest>" line into *e. */
static bool mf_entry(const char *p, const char *eol, int world, dcr__ledger_entry_t *e)
{
    uint64_t owner, id, len;
    if (!mf_lit(&p, eol, "payload ") || !mf_u64(&p, eol, &owner) || !mf_lit(&p, eol, " ") ||
        !mf_u64(&p, eol, &id) || !mf_lit(&p, eol, " ") || !mf_u64(&p, eol, &len) ||
        !mf_lit(&p, eol, " ") || !mf_hex16(&p, eol, e->digest) || p != eol) {
        return false;
    }
    if (owner >= (uint64_t)world || len < DCR_CODEC_HEADER_SIZE ||
        len > DCR__TRANSPORT_PAYLOAD_MAX) {
        return false;
    }
    e->owner = (uint32_t)owner;
    e->id = id;
    e->len = len;
    return true;
}

dcr_status_t dcr__manifest_parse(const char *text, size_t len, const char *path, uint64_t tau,
                                 int world, dcr__ledger_entry_t **entries_p, size_t *n_p)
{
    const char *p = text, *end = text + len, *eol;
    uint64_t v, n;
    if (!mf_line(p, end, &eol) || !mf_lit(&p, eol, "dcr-manifest 1") || p != eol) {
        return mf_bad(path, 1, "'dcr-manifest 1'");
    }
    p = eol + 1;
    if (!mf_line(p, end, &eol) || !mf_lit(&p, eol, "tau ") || !mf_u64(&p, eol, &v) || p != eol) {
        return mf_bad(path, 2, "'tau <attempt id>'");
    }
    if (v != tau) {
        return dcr_error_set(DCR_ETRANSPORT,
                             "objstore: manifest %s line 2: tau %" PRIu64 ", expected %" PRIu64
                             " (the attempt it is stored under)",
                             path, v, tau);
    }
    p = eol + 1;
    if (!mf_line(p, end, &eol) || !mf_lit(&p, eol, "payloads ") || !mf_u64(&p, eol, &n) ||
        p != eol || n > DCR__MANIFEST_MAX_ENTRIES) {
        return mf_bad(path, 3, "'payloads <count>' with a count of at most 4194304");
    }
    p = eol + 1;
    dcr__ledger_entry_t *e = calloc(n ? n : 1, sizeof *e);
    if (e == NULL)
        return dcr_error_set(DCR_ENOMEM, "objstore: manifest %s: %" PRIu64 " entries", path, n);
    dcr_status_t st = DCR_OK;
    for (uint64_t i = 0; i < n && st == DCR_OK; i++) {
        if (!mf_line(p, end, &eol) || !mf_entry(p, eol, world, &e[i])) {
            st = mf_bad(path, (size_t)i + 4,
                        "'payload <owner below world> <id> <bytes, at least 64> <32 hex digits>'");
        }
        p = eol + 1;
    }
    if (st == DCR_OK &&
        (!mf_line(p, end, &eol) || !mf_lit(&p, eol, "end") || p != eol || eol + 1 != end)) {
        st = mf_bad(path, (size_t)n + 4, "'end' as the last line");
    }
    if (st == DCR_OK && n > 1) {
        dcr__ledger_entry_t *sorted = malloc(n * sizeof *sorted);
        if (sorted == NULL)
            st = dcr_error_set(DCR_ENOMEM, "objstore: manifest %s", path);
        else {
            memcpy(sorted, e, n * sizeof *sorted);
            qsort(sorted, n, sizeof *sorted, mf_cmp);
            for (uint64_t i = 1; i < n && st == DCR_OK; i++) {
                if (mf_cmp(&sorted[i - 1], &sorted[i]) == 0) {
                    st = dcr_error_set(DCR_ETRANSPORT,
                                       "objstore: manifest %s lists owner %" PRIu32
                                       " payload %" PRIu64 " twice; expected each payload once",
                                       path, sorted[i].owner, sorted[i].id);
                }
            }
            free(sorted);
        }
    }
    if (st != DCR_OK) {
        free(e);
        return st;
    }
    *entries_p = e;
    *n_p = (size_t)n;
    return DCR_OK;
}

char *dcr__manifest_text(uint64_t tau, const dcr__ledger_entry_t *e, size_t n, size_t *len_p)
{
    size_t cap = 128 + n * 128;
    char *text = malloc(cap);
    if (text == NULL) return NULL;
    size_t k =
        (size_t)snprintf(text, cap, "dcr-manifest 1\ntau %" PRIu64 "\npayloads %zu\n", tau, n);
    for (size_t i = 0; i < n; i++) {
        k += (size_t)snprintf(text + k, cap - k, "payload %" PRIu32 " %" PRIu64 " %" PRIu64 " ",
                              e[i].owner, e[i].id, e[i].len);
        for (int j = 0; j < 16; j++)
            k += (size_t)snprintf(text + k, cap - k, "%02x", e[i].digest[j]);
        text[k++] = '\n';
    }
    k += (size_t)snprintf(text + k, cap - k, "end\n");
    *len_p = k;
    return text;
}

/* "payload-<owner>-<id>.dcrp" exactly as dcr__obj_payload_name writes it. */
bool dcr__obj_parse_payload_name(const char *s, uint32_t *owner, uint64_t *id)
{
    const char *p = s, *end = s + strlen(s);
    uint64_t o, i;
    if (!mf_lit(&p, end, "payload-") || !mf_u64(&p, end, &o) || !mf_lit(&p, end, "-") ||
        !mf_u64(&p, end, &i) || !mf_lit(&p, end, ".dcrp") || p != end || o > UINT32_MAX) {
        return false;
    }
    *owner = (uint32_t)o;
    *id = i;
    return true;
}

void dcr__obj_manifest_part_name(int first, int count, char *out, size_t cap)
{
    snprintf(out, cap, "MANIFEST-%d-%d", first, count);
}

bool dcr__obj_parse_manifest_part_name(const char *s, int world, int *first, int *count)
{
    const char *p = s, *end = s + strlen(s);
    uint64_t f, n;
    if (!mf_lit(&p, end, "MANIFEST-") || !mf_u64(&p, end, &f) || !mf_lit(&p, end, "-") ||
        !mf_u64(&p, end, &n) || p != end || n == 0 || f >= (uint64_t)world ||
        n > (uint64_t)world - f) {
        return false;
    }
    *first = (int)f;
    *count = (int)n;
    return true;
}
