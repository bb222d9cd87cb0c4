/* Retention of committed payloads (dcr/recovery.h): a copy of the committed
 * attempt's listed payloads under versions/v<V>/, a VERSION manifest written
 * last, and pruning of versions that fell out of the window. Written against
 * the object-store wrappers only (dcr/objstore.h), so it works over every
 * store; a dir store offers no server-side copy, so a copy is a get and a
 * put. */
#include "dcr/recovery.h"

#include <blake2.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "recovery/recovery-internal.h"

#define RETAIN_ROOT         "versions/"
#define RETAIN_MANIFEST     "VERSION"
#define RETAIN_MANIFEST_MAX ((size_t)64 << 20)
/* A payload is one encoded bucket; no bucket comes near this. */
#define RETAIN_PAYLOAD_MAX ((size_t)4 << 30)

static void version_prefix(uint64_t version, char *out, size_t cap)
{
    snprintf(out, cap, RETAIN_ROOT "v%" PRIu64 "/", version);
}

static void version_key(uint64_t version, const char *name, char *out, size_t cap)
{
    char prefix[64];
    version_prefix(version, prefix, sizeof prefix);
    snprintf(out, cap, "%s%s", prefix, name);
}

static void digest_of(const uint8_t *buf, size_t len, uint8_t out[DCR_RETAIN_DIGEST_BYTES])
{
    blake2b(out, buf, NULL, DCR_RETAIN_DIGEST_BYTES, len, 0);
}

/* ---- VERSION text -------------------------------------------------------- */

/* Appends to a growing text; false when out of memory. */
typedef struct text {
    char *buf;
    size_t len, cap;
} text_t;

__attribute__((format(printf, 2, 3))) static bool text_add(text_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return false;
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return true;
        }
        size_t cap = t->cap ? t->cap * 2 : 4096;
        while (cap < t->len + (size_t)n + 1) cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) return false;
        t->buf = b;
        t->cap = cap;
    }
}

static char *manifest_text(const dcr_retain_manifest_t *m, size_t *len_p)
{
    text_t t = {0};
    bool ok = text_add(
        &t, "dcr-version 1\nversion %" PRIu64 "\nfrom %" PRIu64 "\ntau %" PRIu64 "\npayloads %zu\n",
        m->version, m->from, m->tau, m->n);
    for (size_t i = 0; ok && i < m->n; i++) {
        char hex[2 * DCR_RETAIN_DIGEST_BYTES + 1];
        dcr__retain_hex(m->entries[i].digest, hex);
        ok = text_add(&t, "payload %s %" PRIu64 " %s\n", m->entries[i].name, m->entries[i].bytes,
                      hex);
    }
    ok = ok && text_add(&t, "end\n");
    if (!ok) {
        free(t.buf);
        return NULL;
    }
    *len_p = t.len;
    return t.buf;
}

void dcr__retain_hex(const uint8_t *digest, char *hex)
{
    for (int k = 0; k < DCR_RETAIN_DIGEST_BYTES; k++) snprintf(hex + 2 * k, 3, "%02x", digest[k]);
}

bool dcr__retain_cur_field(dcr__cursor_t *c, const char *lit, uint64_t *v)
{
    return dcr__cursor_lit(c, lit) && dcr__cursor_u64(c, v) && dcr__cursor_lit(c, "\n");
}

bool dcr__retain_cur_name(dcr__cursor_t *c, const char *reserved, char *out)
{
    size_t n = 0;
    while (c->p + n < c->end && n <= DCR_RETAIN_NAME_MAX) {
        char ch = c->p[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok) break;
        n++;
    }
    if (n == 0 || n > DCR_RETAIN_NAME_MAX || c->p[0] == '.' ||
        (n == strlen(reserved) && memcmp(c->p, reserved, n) == 0))
        return false;
    memcpy(out, c->p, n);
    out[n] = '\0';
    c->p += n;
    return true;
}

bool dcr__retain_cur_entries(dcr__cursor_t *c, const char *keyword, const char *reserved,
                             dcr_retain_entry_t *entries, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        dcr__cursor_t at = *c;
        dcr_retain_entry_t *e = &entries[i];
        bool ok = dcr__cursor_lit(c, keyword) && dcr__cursor_lit(c, " ") &&
                  dcr__retain_cur_name(c, reserved, e->name) && dcr__cursor_lit(c, " ") &&
                  dcr__cursor_u64(c, &e->bytes) && dcr__cursor_lit(c, " ") &&
                  dcr__cursor_hex(c, e->digest, DCR_RETAIN_DIGEST_BYTES) &&
                  dcr__cursor_lit(c, "\n");
        for (uint64_t j = 0; ok && j < i; j++)
            if (strcmp(entries[j].name, e->name) == 0) ok = false;
        if (!ok) {
            *c = at;
            return false;
        }
    }
    return true;
}

size_t dcr__text_line_of(const char *text, const dcr__cursor_t *c)
{
    size_t line = 1;
    for (const char *q = text; q < c->p; q++) line += *q == '\n';
    return line;
}

dcr_status_t dcr_retain_manifest_parse(const char *text, size_t len, const char *where,
                                       dcr_retain_manifest_t *out_p)
{
    if (text == NULL || where == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "retain manifest: NULL argument");
    memset(out_p, 0, sizeof(*out_p));
    dcr__cursor_t c = {text, text + len};
    dcr_retain_manifest_t m = {0};
    uint64_t n = 0;
    const char *expected = "'dcr-version 1'";
    bool ok = dcr__cursor_lit(&c, "dcr-version 1\n");
    if (ok) expected = "'version <decimal>'";
    ok = ok && dcr__retain_cur_field(&c, "version ", &m.version);
    if (ok) expected = "'from <version - 1>'";
    ok = ok && dcr__retain_cur_field(&c, "from ", &m.from) && m.version >= 1 &&
         m.from == m.version - 1;
    if (ok) expected = "'tau <decimal>'";
    ok = ok && dcr__retain_cur_field(&c, "tau ", &m.tau);
    if (ok) expected = "'payloads <decimal>'";
    /* Every entry takes more than 64 bytes of text: a count the text cannot
     * hold is malformed, never an allocation. */
    ok = ok && dcr__retain_cur_field(&c, "payloads ", &n) && n <= len / 64;
    if (ok && n > 0) {
        m.entries = calloc((size_t)n, sizeof(*m.entries));
        if (!m.entries) return dcr_error_set(DCR_ENOMEM, "%s: %" PRIu64 " entries", where, n);
    }
    if (ok) expected = "'payload <name> <bytes> <64 hex digits>'";
    ok = ok && dcr__retain_cur_entries(&c, "payload", RETAIN_MANIFEST, m.entries, n);
    if (ok) expected = "'end' and nothing after it";
    ok = ok && dcr__cursor_lit(&c, "end\n") && c.p == c.end;
    if (!ok) {
        size_t line = dcr__text_line_of(text, &c);
        free(m.entries);
        return dcr_error_set(DCR_ETRANSPORT, "retained version manifest %s: line %zu: expected %s",
                             where, line, expected);
    }
    m.n = (size_t)n;
    *out_p = m;
    return DCR_OK;
}

void dcr_retain_manifest_free(dcr_retain_manifest_t *m)
{
    if (m == NULL) return;
    free(m->entries);
    memset(m, 0, sizeof(*m));
}

dcr_status_t dcr_retain_manifest_read(dcr_objstore_t *s, uint64_t version,
                                      dcr_retain_manifest_t *out_p)
{
    if (s == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "retain: NULL store or manifest");
    /* Empty on every failure, so that freeing it is always safe. */
    memset(out_p, 0, sizeof(*out_p));
    char key[128];
    version_key(version, RETAIN_MANIFEST, key, sizeof key);
    uint8_t *text = NULL;
    size_t len = 0;
    DCR_CHECK(dcr_objstore_get(s, key, RETAIN_MANIFEST_MAX, NULL, &text, &len));
    dcr_status_t st = dcr_retain_manifest_parse((const char *)text, len, key, out_p);
    free(text);
    if (st == DCR_OK && out_p->version != version) {
        uint64_t named = out_p->version;
        dcr_retain_manifest_free(out_p);
        return dcr_error_set(DCR_ETRANSPORT, "retained version manifest %s names version %" PRIu64,
                             key, named);
    }
    return st;
}

dcr_status_t dcr_retain_payload_get(dcr_objstore_t *s, const dcr_retain_manifest_t *m, size_t i,
                                    uint8_t **buf_p, size_t *len_p)
{
    if (s == NULL || m == NULL || i >= m->n || buf_p == NULL || len_p == NULL)
        return dcr_error_set(DCR_EINVAL, "retain: bad payload request");
    const dcr_retain_entry_t *e = &m->entries[i];
    char key[256];
    version_key(m->version, e->name, key, sizeof key);
    uint8_t *buf = NULL;
    size_t len = 0;
    /* One byte more than listed: a longer object is found, never cut. */
    DCR_CHECK(dcr_objstore_get(s, key, e->bytes < RETAIN_PAYLOAD_MAX ? e->bytes + 1 : e->bytes,
                               NULL, &buf, &len));
    uint8_t d[DCR_RETAIN_DIGEST_BYTES];
    digest_of(buf, len, d);
    if (len != e->bytes || memcmp(d, e->digest, sizeof d) != 0) {
        free(buf);
        return dcr_error_set(DCR_EDIGEST,
                             "retained payload %s: %zu bytes or its digest differ from version "
                             "%" PRIu64 "'s manifest (%" PRIu64 " bytes)",
                             key, len, m->version, e->bytes);
    }
    *buf_p = buf;
    *len_p = len;
    return DCR_OK;
}

/* ---- listing and pruning -------------------------------------------------- */

/* The version a key under versions/ belongs to; false for a foreign key. */
static bool key_version(const char *key, uint64_t *v, bool *manifest_p)
{
    size_t root = strlen(RETAIN_ROOT);
    if (strncmp(key, RETAIN_ROOT, root) != 0 || key[root] != 'v') return false;
    dcr__cursor_t c = {key + root + 1, key + strlen(key)};
    if (!dcr__cursor_u64(&c, v) || !dcr__cursor_lit(&c, "/")) return false;
    *manifest_p = strcmp(c.p, RETAIN_MANIFEST) == 0;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every version with at least one key (manifest_only: with a VERSION). */
static dcr_status_t versions_in_store(dcr_objstore_t *s, bool manifest_only, uint64_t **out_p,
                                      size_t *n_p)
{
    dcr_objstore_entry_t *all = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_objstore_list_all(s, RETAIN_ROOT, &all, &n));
    uint64_t *v = malloc((n ? n : 1) * sizeof(*v));
    if (!v) {
        free(all);
        return dcr_error_set(DCR_ENOMEM, "retain: %zu keys", n);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ver;
        bool manifest;
        if (!key_version(all[i].key, &ver, &manifest) || (manifest_only && !manifest)) continue;
        v[k++] = ver;
    }
    free(all);
    /* Keys sort as text (v10 before v9): sort, then drop repeats. */
    qsort(v, k, sizeof(*v), cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
    if (u == 0) {
        free(v);
        v = NULL;
    }
    *out_p = v;
    *n_p = u;
    return DCR_OK;
}

dcr_status_t dcr_retain_list(dcr_objstore_t *s, uint64_t **versions_p, size_t *n_p)
{
    if (s == NULL || versions_p == NULL || n_p == NULL)
        return dcr_error_set(DCR_EINVAL, "retain: NULL argument");
    return versions_in_store(s, true, versions_p, n_p);
}

dcr_status_t dcr_retain_clear(dcr_objstore_t *s)
{
    if (s == NULL) return dcr_error_set(DCR_EINVAL, "retain: NULL store");
    return dcr_objstore_delete_prefix(s, RETAIN_ROOT);
}

dcr_status_t dcr_retain_prune(dcr_objstore_t *s, uint64_t below, uint64_t *pruned_p)
{
    uint64_t *v = NULL;
    size_t n = 0;
    DCR_CHECK(versions_in_store(s, false, &v, &n));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < n && v[i] < below && st == DCR_OK; i++) {
        char key[128], prefix[64];
        version_key(v[i], RETAIN_MANIFEST, key, sizeof key);
        version_prefix(v[i], prefix, sizeof prefix);
        st = dcr_objstore_delete(s, key);
        if (st == DCR_OK) st = dcr_objstore_delete_prefix(s, prefix);
        if (st == DCR_OK) (*pruned_p)++;
    }
    free(v);
    return st;
}

/* ---- the copy at commit --------------------------------------------------- */

/* The `size` bytes of key (malloc'd into *buf_p) as a listing or a
 * manifest gave them, at most max. Where the store serves byte ranges this
 * is a ranged GET of exactly those bytes, as the rollout nodes read (a
 * manifest is then checked by its strict parse; a payload by the digest its
 * readers check when they replay it): a whole-object GET is checked against the ETag, and s3rver
 * can keep a partial upload's MD5 as the ETag of the intact object (a testbed run failed retaining
 * version 5 that way). Elsewhere the whole object, which must hold exactly size bytes. */
static dcr_status_t read_sized(dcr_objstore_t *s, const char *key, uint64_t size, size_t max,
                               uint8_t **buf_p)
{
    if (size > max)
        return dcr_error_set(DCR_ETRANSPORT, "retain: %s holds %" PRIu64 " bytes, above %zu", key,
                             size, max);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (dcr_objstore_props(s)->ranged_get && size > 0) {
        if (!(buf = malloc((size_t)size)))
            return dcr_error_set(DCR_ENOMEM, "retain: %s: %" PRIu64 " bytes", key, size);
        dcr_status_t st = dcr_objstore_get_range(s, key, 0, (size_t)size, buf, NULL);
        if (st != DCR_OK) {
            free(buf);
            return st;
        }
    } else {
        DCR_CHECK(dcr_objstore_get(s, key, (size_t)size + 1, NULL, &buf, &len));
        if (len != size) {
            free(buf);
            return dcr_error_set(DCR_ETRANSPORT,
                                 "retain: %s holds %zu bytes, where %" PRIu64 " were listed", key,
                                 len, size);
        }
    }
    *buf_p = buf;
    return DCR_OK;
}

/* Reads one manifest object of attempt tau (the whole one, count 0, or the
 * part of owners [first, first + count)) of the listed size and appends its
 * entries. */
static dcr_status_t read_manifest_object(dcr_objstore_t *s, const dcr_objstore_entry_t *k,
                                         uint64_t tau, int world, int first, int count,
                                         dcr__ledger_entry_t **e_p, size_t *n_p)
{
    uint8_t *text = NULL;
    DCR_CHECK(read_sized(s, k->key, k->size, DCR__MANIFEST_MAX_BYTES, &text));
    dcr_status_t st = dcr__manifest_append((const char *)text, (size_t)k->size, k->key, tau, world,
                                           first, count, e_p, n_p);
    free(text);
    return st;
}

/* Reads attempt tau's transport manifest into entries: the one MANIFEST a
 * handle serving every owner writes, or the parts owner processes write
 * (MANIFEST-<first>-<count>; a committed attempt's parts cover every owner
 * once: its readers checked that before the commit). One listing finds
 * them and their sizes; it is handed back (*keys_p, freed by the caller)
 * for the payloads' sizes. */
static dcr_status_t read_attempt(dcr_objstore_t *s, uint64_t tau, int world, char *mkey,
                                 size_t mkey_cap, dcr__ledger_entry_t **e_p, size_t *n_p,
                                 dcr_objstore_entry_t **keys_p, size_t *nkeys_p)
{
    char prefix[64];
    dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
    size_t plen = strlen(prefix);
    snprintf(mkey, mkey_cap, "%sMANIFEST", prefix);
    *e_p = NULL;
    *n_p = 0;
    dcr_objstore_entry_t *keys = NULL;
    size_t nkeys = 0, parts = 0;
    bool whole = false;
    DCR_CHECK(dcr_objstore_list_all(s, prefix, &keys, &nkeys));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < nkeys && !whole; i++)
        if (!strcmp(keys[i].key, mkey)) {
            whole = true;
            st = read_manifest_object(s, &keys[i], tau, world, 0, 0, e_p, n_p);
        }
    for (size_t i = 0; i < nkeys && !whole && st == DCR_OK; i++) {
        int first, count;
        if (strncmp(keys[i].key, prefix, plen) != 0 ||
            !dcr__obj_parse_manifest_part_name(keys[i].key + plen, world, &first, &count))
            continue;
        st = read_manifest_object(s, &keys[i], tau, world, first, count, e_p, n_p);
        parts++;
    }
    if (st == DCR_OK && !whole && parts == 0)
        st = dcr_error_set(DCR_ENOTFOUND,
                           "retain: attempt %" PRIu64 " has no manifest %s nor manifest parts "
                           "(already cleared by a later attempt, or not an objstore run?)",
                           tau, mkey);
    if (st != DCR_OK) {
        free(*e_p);
        free(keys);
        *e_p = NULL;
        *n_p = 0;
        keys = NULL;
        nkeys = 0;
    }
    *keys_p = keys;
    *nkeys_p = nkeys;
    return st;
}

/* The listing's size of key, or UINT64_MAX when it lists no such key. */
static uint64_t listed_size(const dcr_objstore_entry_t *keys, size_t nkeys, const char *key)
{
    for (size_t i = 0; i < nkeys; i++)
        if (!strcmp(keys[i].key, key)) return keys[i].size;
    return UINT64_MAX;
}

/* Copies the payloads the manifest lists (le), each as the attempt's
 * listing shows it with the manifest's length, filling m's entries. */
static dcr_status_t copy_payloads(dcr_objstore_t *s, uint64_t tau, const dcr__ledger_entry_t *le,
                                  const dcr_objstore_entry_t *keys, size_t nkeys,
                                  dcr_retain_manifest_t *m, dcr_retain_stats_t *stats)
{
    for (size_t i = 0; i < m->n; i++) {
        dcr_retain_entry_t *e = &m->entries[i];
        dcr__obj_payload_name(le[i].owner, le[i].id, e->name, sizeof e->name);
        char from[256], to[256], prefix[64];
        dcr__obj_attempt_prefix(tau, prefix, sizeof prefix);
        snprintf(from, sizeof from, "%s%s", prefix, e->name);
        version_key(m->version, e->name, to, sizeof to);
        uint64_t size = listed_size(keys, nkeys, from);
        if (size == UINT64_MAX)
            return dcr_error_set(DCR_ENOTFOUND,
                                 "retain: %s, listed in its attempt's manifest, is "
                                 "not in the store",
                                 from);
        if (size != le[i].len)
            return dcr_error_set(DCR_ETRANSPORT,
                                 "retain: %s holds %" PRIu64 " bytes, its attempt's manifest lists "
                                 "%" PRIu64,
                                 from, size, le[i].len);
        uint8_t *buf = NULL;
        DCR_CHECK(read_sized(s, from, size, RETAIN_PAYLOAD_MAX, &buf));
        size_t len = (size_t)le[i].len;
        e->bytes = len;
        digest_of(buf, len, e->digest);
        dcr_status_t st = dcr_objstore_put(s, to, buf, len, NULL);
        free(buf);
        DCR_CHECK(st);
        stats->payloads++;
        stats->bytes += len;
    }
    return DCR_OK;
}

dcr_status_t dcr_retain_commit(dcr_objstore_t *s, uint64_t tau, uint64_t version, int keep,
                               dcr_retain_stats_t *stats_p)
{
    if (s == NULL || keep < 1 || version < 1)
        return dcr_error_set(DCR_EINVAL,
                             "retain: store %p, version %" PRIu64 ", keep %d (expected a store, "
                             "version >= 1, keep >= 1)",
                             (void *)s, version, keep);
    uint64_t t0 = dcr_clock_ns();
    dcr_retain_stats_t stats = {0};
    char mkey[128];
    dcr__ledger_entry_t *le = NULL;
    dcr_objstore_entry_t *keys = NULL;
    size_t n = 0, nkeys = 0;
    /* Owners are bounded by the manifest's own checks; the payloads' headers
     * are checked again by every receiver that replays them. */
    DCR_CHECK(read_attempt(s, tau, INT32_MAX, mkey, sizeof mkey, &le, &n, &keys, &nkeys));
    dcr_retain_manifest_t m = {.version = version, .from = version - 1, .tau = tau, .n = n};
    m.entries = calloc(n ? n : 1, sizeof(*m.entries));
    dcr_status_t st = m.entries ? DCR_OK : dcr_error_set(DCR_ENOMEM, "retain: %zu entries", n);
    /* A rerun of this version (a replaced coordinator) rewrites it whole. */
    char key[128];
    version_key(version, RETAIN_MANIFEST, key, sizeof key);
    if (st == DCR_OK) st = dcr_objstore_delete(s, key);
    if (st == DCR_OK) st = copy_payloads(s, tau, le, keys, nkeys, &m, &stats);
    free(le);
    free(keys);
    size_t len = 0;
    char *text = st == DCR_OK ? manifest_text(&m, &len) : NULL;
    if (st == DCR_OK && !text) st = dcr_error_set(DCR_ENOMEM, "retain: manifest of %zu entries", n);
    if (st == DCR_OK) st = dcr_objstore_put(s, key, (const uint8_t *)text, len, NULL);
    free(text);
    dcr_retain_manifest_free(&m);
    if (st == DCR_OK && version >= (uint64_t)keep)
        st = dcr_retain_prune(s, version - (uint64_t)keep + 1, &stats.pruned);
    stats.seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
    if (st == DCR_OK)
        DCR_LOG_DEBUG("retain: version %" PRIu64 " (attempt %" PRIu64 "): %" PRIu64
                      " payloads, %" PRIu64 " bytes in %.3f s; %" PRIu64 " pruned",
                      version, tau, stats.payloads, stats.bytes, stats.seconds, stats.pruned);
    if (stats_p) *stats_p = stats;
    return st;
}

dcr_status_t dcr_retain_put(dcr_objstore_t *s, uint64_t version, uint64_t tau, size_t n,
                            const char *const *names, const uint8_t *const *bufs,
                            const size_t *lens)
{
    if (s == NULL || version < 1 || (n > 0 && (!names || !bufs || !lens)))
        return dcr_error_set(DCR_EINVAL, "retain put of version %" PRIu64 ": bad arguments",
                             version);
    dcr_retain_manifest_t m = {.version = version, .from = version - 1, .tau = tau, .n = n};
    m.entries = calloc(n ? n : 1, sizeof(*m.entries));
    if (!m.entries) return dcr_error_set(DCR_ENOMEM, "retain put: %zu entries", n);
    /* Every name as the manifest reader will take it (its own rule, and no
     * duplicates), before anything of the version is touched. */
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        const char *nm = names[i] ? names[i] : "";
        dcr__cursor_t c = {nm, nm + strlen(nm)};
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++) dup = strcmp(m.entries[j].name, nm) == 0;
        if (!dcr__retain_cur_name(&c, RETAIN_MANIFEST, m.entries[i].name) || c.p != c.end || dup)
            st = dcr_error_set(DCR_EINVAL,
                               "retain put of version %" PRIu64 ": payload name %zu ('%.64s') is "
                               "not a key component of [A-Za-z0-9._-] (no leading '.', not %s, "
                               "at most %d bytes, unique)",
                               version, i, nm, RETAIN_MANIFEST, DCR_RETAIN_NAME_MAX);
    }
    char key[256];
    version_key(version, RETAIN_MANIFEST, key, sizeof key);
    if (st == DCR_OK) st = dcr_objstore_delete(s, key);
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        dcr_retain_entry_t *e = &m.entries[i];
        e->bytes = lens[i];
        digest_of(bufs[i], lens[i], e->digest);
        char pk[256];
        version_key(version, e->name, pk, sizeof pk);
        st = dcr_objstore_put(s, pk, bufs[i], lens[i], NULL);
    }
    size_t len = 0;
    char *text = st == DCR_OK ? manifest_text(&m, &len) : NULL;
    if (st == DCR_OK && !text) st = dcr_error_set(DCR_ENOMEM, "retain put: manifest");
    if (st == DCR_OK) st = dcr_objstore_put(s, key, (const uint8_t *)text, len, NULL);
    free(text);
    dcr_retain_manifest_free(&m);
    return st;
}

/* ---- repair sets ------------------------------------------------------------ */

#define REPAIR_PART      "REPAIR-"
#define REPAIR_PUT_TRIES 5

/* One put of a repair set. Owners store while the committing process
 * retains the same version, whose delete of an absent VERSION makes a
 * directory store drop the version's folder if it is still empty: a put
 * racing that finds its folder gone (DCR_EIO); the next try makes it
 * again. */
static dcr_status_t repair_put_one(dcr_objstore_t *s, const char *key, const uint8_t *buf,
                                   size_t len)
{
    dcr_status_t st = DCR_EIO;
    for (int i = 0; i < REPAIR_PUT_TRIES && st == DCR_EIO; i++) {
        if (i > 0) dcr_clock_nap_ns(2000000L);
        st = dcr_objstore_put(s, key, buf, len, NULL);
    }
    return st;
}

dcr_status_t dcr_retain_repair_put(dcr_objstore_t *s, uint64_t version, uint64_t tau,
                                   uint64_t covers_from, int owner, int owners, size_t n,
                                   const uint8_t *const *bufs, const size_t *lens,
                                   dcr_retain_stats_t *stats_p)
{
    if (s == NULL || version < 1 || owner < 0 || owners < 1 || owner >= owners ||
        covers_from > tau || (n > 0 && (!bufs || !lens)))
        return dcr_error_set(DCR_EINVAL,
                             "repair set of version %" PRIu64 ": bad arguments (owner %d of %d, "
                             "covers %" PRIu64 "..%" PRIu64 ")",
                             version, owner, owners, covers_from, tau);
    uint64_t t0 = dcr_clock_ns();
    dcr_retain_stats_t stats = {0};
    dcr_retain_manifest_t m = {.version = version, .from = version - 1, .tau = tau, .n = n};
    m.entries = calloc(n ? n : 1, sizeof(*m.entries));
    if (!m.entries) return dcr_error_set(DCR_ENOMEM, "repair set: %zu entries", n);
    char key[128], name[64];
    snprintf(name, sizeof name, REPAIR_PART "%d", owner);
    version_key(version, name, key, sizeof key);
    dcr_status_t st = dcr_objstore_delete(s, key);
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        dcr_retain_entry_t *e = &m.entries[i];
        snprintf(e->name, sizeof e->name, "repair-%d-%zu.dcrp", owner, i);
        e->bytes = lens[i];
        digest_of(bufs[i], lens[i], e->digest);
        char pk[256];
        version_key(version, e->name, pk, sizeof pk);
        st = repair_put_one(s, pk, bufs[i], lens[i]);
        stats.payloads++;
        stats.bytes += lens[i];
    }
    size_t len = 0;
    char *body = st == DCR_OK ? manifest_text(&m, &len) : NULL;
    text_t t = {0};
    bool ok = body && text_add(&t, "dcr-repair 1\nowner %d of %d\ncovers-from %" PRIu64 "\n%.*s",
                               owner, owners, covers_from, (int)len, body);
    if (st == DCR_OK && !ok) st = dcr_error_set(DCR_ENOMEM, "repair set: manifest");
    if (st == DCR_OK) st = repair_put_one(s, key, (const uint8_t *)t.buf, t.len);
    free(body);
    free(t.buf);
    dcr_retain_manifest_free(&m);
    stats.seconds = (double)(dcr_clock_ns() - t0) * 1e-9;
    if (st == DCR_OK && stats_p) *stats_p = stats;
    return st;
}

/* Parses REPAIR-<owner> of version: its owner count and bound, and its
 * payloads into *m. */
static dcr_status_t repair_part_parse(const char *text, size_t len, const char *key, int owner,
                                      uint64_t version, uint64_t *owners_p,
                                      dcr_retain_manifest_t *m)
{
    dcr__cursor_t c = {text, text + len};
    uint64_t o = 0, owners = 0, covers = 0;
    bool ok = dcr__cursor_lit(&c, "dcr-repair 1\n") && dcr__cursor_lit(&c, "owner ") &&
              dcr__cursor_u64(&c, &o) && dcr__cursor_lit(&c, " of ") &&
              dcr__cursor_u64(&c, &owners) && dcr__cursor_lit(&c, "\n") &&
              dcr__retain_cur_field(&c, "covers-from ", &covers) && o == (uint64_t)owner &&
              owners >= 1 && owners <= INT32_MAX && o < owners;
    if (!ok)
        return dcr_error_set(DCR_ETRANSPORT,
                             "repair set part %s: expected 'dcr-repair 1', 'owner %d of <owners>', "
                             "'covers-from <attempt>'",
                             key, owner);
    DCR_CHECK(dcr_retain_manifest_parse(c.p, (size_t)(c.end - c.p), key, m));
    if (m->version != version || covers > m->tau) {
        dcr_retain_manifest_free(m);
        return dcr_error_set(DCR_ETRANSPORT,
                             "repair set part %s: names version %" PRIu64
                             " or covers attempts from %" PRIu64 " after its own",
                             key, m->version, covers);
    }
    m->covers_from = covers;
    *owners_p = owners;
    return DCR_OK;
}

/* Appends part p's entries to m (names are unique per owner). */
static dcr_status_t repair_merge(dcr_retain_manifest_t *m, const dcr_retain_manifest_t *p)
{
    dcr_retain_entry_t *e = realloc(m->entries, (m->n + p->n + 1) * sizeof(*e));
    if (!e) return dcr_error_set(DCR_ENOMEM, "repair set: %zu entries", m->n + p->n);
    memcpy(e + m->n, p->entries, p->n * sizeof(*e));
    m->entries = e;
    m->n += p->n;
    if (p->covers_from > m->covers_from) m->covers_from = p->covers_from;
    return DCR_OK;
}

dcr_status_t dcr_retain_repair_read(dcr_objstore_t *s, uint64_t version,
                                    dcr_retain_manifest_t *out_p)
{
    if (s == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "repair set: NULL argument");
    memset(out_p, 0, sizeof(*out_p));
    dcr_retain_manifest_t all = {0};
    uint64_t owners = 1;
    dcr_status_t st = DCR_OK;
    for (uint64_t o = 0; o < owners && st == DCR_OK; o++) {
        char key[128], name[64];
        snprintf(name, sizeof name, REPAIR_PART "%" PRIu64, o);
        version_key(version, name, key, sizeof key);
        uint8_t *text = NULL;
        size_t len = 0;
        st = dcr_objstore_get(s, key, RETAIN_MANIFEST_MAX, NULL, &text, &len);
        if (st == DCR_ENOTFOUND)
            st = dcr_error_set(DCR_ENOTFOUND,
                               "repair set of version %" PRIu64 ": no part of owner %" PRIu64
                               " (not stored yet, or pruned)",
                               version, o);
        dcr_retain_manifest_t part = {0};
        uint64_t n = 0;
        if (st == DCR_OK)
            st = repair_part_parse((const char *)text, len, key, (int)o, version, &n, &part);
        free(text);
        if (st == DCR_OK && o == 0) {
            owners = n;
            all.version = part.version;
            all.from = part.from;
            all.tau = part.tau;
        } else if (st == DCR_OK && (n != owners || part.tau != all.tau)) {
            st = dcr_error_set(DCR_ETRANSPORT,
                               "repair set of version %" PRIu64 ": owner %" PRIu64
                               "'s part says %" PRIu64 " owners and attempt %" PRIu64
                               ", owner 0's %" PRIu64 " and %" PRIu64,
                               version, o, n, part.tau, owners, all.tau);
        }
        if (st == DCR_OK) st = repair_merge(&all, &part);
        dcr_retain_manifest_free(&part);
    }
    if (st != DCR_OK) {
        dcr_retain_manifest_free(&all);
        return st;
    }
    *out_p = all;
    return DCR_OK;
}
