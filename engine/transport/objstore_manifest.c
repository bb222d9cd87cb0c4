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
#include <limits.h>
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

/* ---- text readers ------------------------------------------------------ */

bool dcr__cursor_lit(dcr__cursor_t *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return false;
    c->p += n;
    return true;
}

bool dcr__cursor_u64(dcr__cursor_t *c, uint64_t *v)
{
    const char *q = c->p;
    uint64_t x = 0;
    while (q < c->end && *q >= '0' && *q <= '9') {
        uint64_t d = (uint64_t)(*q - '0');
        if (x > (UINT64_MAX - d) / 10) return false;
        x = x * 10 + d;
        q++;
    }
    size_t n = (size_t)(q - c->p);
    if (n == 0 || (n > 1 && *c->p == '0')) return false;
    c->p = q;
    *v = x;
    return true;
}

bool dcr__cursor_hex(dcr__cursor_t *c, uint8_t *out, size_t bytes)
{
    if ((size_t)(c->end - c->p) < 2 * bytes) return false;
    for (size_t i = 0; i < 2 * bytes; i++) {
        char ch = c->p[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0) return false;
        if (i % 2 == 0)
            out[i / 2] = (uint8_t)(v << 4);
        else
            out[i / 2] |= (uint8_t)v;
    }
    c->p += 2 * bytes;
    return true;
}

/* ---- manifest ----------------------------------------------------------- */

/* Takes the next line off *text into *line, without its '\n'; false when
 * no '\n' remains. */
static bool mf_line(dcr__cursor_t *text, dcr__cursor_t *line)
{
    const char *nl = memchr(text->p, '\n', (size_t)(text->end - text->p));
    if (nl == NULL) return false;
    *line = (dcr__cursor_t){text->p, nl};
    text->p = nl + 1;
    return true;
}

/* The next line of *text is exactly lit. */
static bool mf_exact(dcr__cursor_t *text, const char *lit)
{
    dcr__cursor_t line;
    return mf_line(text, &line) && dcr__cursor_lit(&line, lit) && line.p == line.end;
}

/* The next line of *text is lit followed by a decimal, into *v. */
static bool mf_field(dcr__cursor_t *text, const char *lit, uint64_t *v)
{
    dcr__cursor_t line;
    return mf_line(text, &line) && dcr__cursor_lit(&line, lit) && dcr__cursor_u64(&line, v) &&
           line.p == line.end;
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
static bool mf_entry(dcr__cursor_t line, int world, dcr__ledger_entry_t *e)
{
    uint64_t owner, id, len;
    if (!dcr__cursor_lit(&line, "payload ") || !dcr__cursor_u64(&line, &owner) ||
        !dcr__cursor_lit(&line, " ") || !dcr__cursor_u64(&line, &id) ||
        !dcr__cursor_lit(&line, " ") || !dcr__cursor_u64(&line, &len) ||
        !dcr__cursor_lit(&line, " ") || !dcr__cursor_hex(&line, e->digest, 16) ||
        line.p != line.end) {
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
    dcr__cursor_t t = {text, text + len}, line;
    uint64_t v, n;
    if (!mf_exact(&t, "dcr-manifest 1")) return mf_bad(path, 1, "'dcr-manifest 1'");
    if (!mf_field(&t, "tau ", &v)) return mf_bad(path, 2, "'tau <attempt id>'");
    if (v != tau) {
        return dcr_error_set(DCR_ETRANSPORT,
                             "objstore: manifest %s line 2: tau %" PRIu64 ", expected %" PRIu64
                             " (the attempt it is stored under)",
                             path, v, tau);
    }
    if (!mf_field(&t, "payloads ", &n) || n > DCR__MANIFEST_MAX_ENTRIES)
        return mf_bad(path, 3, "'payloads <count>' with a count of at most 4194304");
    dcr__ledger_entry_t *e = calloc(n ? n : 1, sizeof *e);
    if (e == NULL)
        return dcr_error_set(DCR_ENOMEM, "objstore: manifest %s: %" PRIu64 " entries", path, n);
    dcr_status_t st = DCR_OK;
    for (uint64_t i = 0; i < n && st == DCR_OK; i++) {
        if (!mf_line(&t, &line) || !mf_entry(line, world, &e[i])) {
            st = mf_bad(path, (size_t)i + 4,
                        "'payload <owner below world> <id> <bytes, at least 64> <32 hex digits>'");
        }
    }
    if (st == DCR_OK && (!mf_exact(&t, "end") || t.p != t.end))
        st = mf_bad(path, (size_t)n + 4, "'end' as the last line");
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

dcr_status_t dcr__manifest_append(const char *text, size_t len, const char *path, uint64_t tau,
                                  int world, int first, int count, dcr__ledger_entry_t **entries_p,
                                  size_t *n_p)
{
    dcr__ledger_entry_t *m = NULL;
    size_t mn = 0;
    DCR_CHECK(dcr__manifest_parse(text, len, path, tau, world, &m, &mn));
    int lo = count ? first : 0, hi = count ? first + count : INT_MAX;
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; st == DCR_OK && i < mn; i++) {
        if ((int64_t)m[i].owner < lo || (int64_t)m[i].owner >= hi)
            st = dcr_error_set(DCR_ETRANSPORT,
                               "objstore: manifest %s lists owner %" PRIu32
                               ", expected owners %d..%d only",
                               path, m[i].owner, lo, hi - 1);
    }
    dcr__ledger_entry_t *all = NULL;
    if (st == DCR_OK && (all = realloc(*entries_p, (*n_p + mn + 1) * sizeof *all)) == NULL)
        st = dcr_error_set(DCR_ENOMEM, "objstore: manifest %s: %zu entries", path, *n_p + mn);
    if (st == DCR_OK) {
        if (mn > 0) memcpy(all + *n_p, m, mn * sizeof *m);
        *entries_p = all;
        *n_p += mn;
    }
    free(m);
    return st;
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
    dcr__cursor_t c = {s, s + strlen(s)};
    uint64_t o, i;
    if (!dcr__cursor_lit(&c, "payload-") || !dcr__cursor_u64(&c, &o) || !dcr__cursor_lit(&c, "-") ||
        !dcr__cursor_u64(&c, &i) || !dcr__cursor_lit(&c, ".dcrp") || c.p != c.end ||
        o > UINT32_MAX) {
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
    dcr__cursor_t c = {s, s + strlen(s)};
    uint64_t f, n;
    if (!dcr__cursor_lit(&c, "MANIFEST-") || !dcr__cursor_u64(&c, &f) ||
        !dcr__cursor_lit(&c, "-") || !dcr__cursor_u64(&c, &n) || c.p != c.end || n == 0 ||
        f >= (uint64_t)world || n > (uint64_t)world - f) {
        return false;
    }
    *first = (int)f;
    *count = (int)n;
    return true;
}
