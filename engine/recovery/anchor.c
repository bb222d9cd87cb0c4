/* Anchors: dense snapshots for an elastic join (dcr/recovery.h). */
#include "dcr/recovery.h"

#include <blake2.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recovery/recovery-internal.h"

#define ANCHOR_ROOT     "anchors/"
#define ANCHOR_MANIFEST "ANCHOR"
#define ANCHOR_TEXT_MAX ((size_t)16 << 20)
#define ANCHOR_OBJ_MAX  ((size_t)64 << 30)

static void anchor_key(uint64_t version, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, ANCHOR_ROOT "v%" PRIu64 "/%s", version, name);
}

static void digest_of(const uint8_t *buf, size_t len, uint8_t out[DCR_RETAIN_DIGEST_BYTES])
{
    blake2b(out, buf, NULL, DCR_RETAIN_DIGEST_BYTES, len, 0);
}

/* ---- ANCHOR text ----------------------------------------------------------- */

char *dcr_anchor_manifest_text(const dcr_anchor_manifest_t *m, size_t *len_p)
{
    /* Each object line: "object " + name + two numbers + 64 hex digits. */
    size_t cap = 64 + m->n * (16 + DCR_RETAIN_NAME_MAX + 24 + 2 * DCR_RETAIN_DIGEST_BYTES);
    char *t = malloc(cap);
    if (t == NULL) return NULL;
    size_t len = (size_t)snprintf(t, cap, "dcr-anchor 1\nversion %" PRIu64 "\nobjects %zu\n",
                                  m->version, m->n);
    for (size_t i = 0; i < m->n; i++) {
        char hex[2 * DCR_RETAIN_DIGEST_BYTES + 1];
        dcr__retain_hex(m->entries[i].digest, hex);
        len += (size_t)snprintf(t + len, cap - len, "object %s %" PRIu64 " %s\n",
                                m->entries[i].name, m->entries[i].bytes, hex);
    }
    len += (size_t)snprintf(t + len, cap - len, "end\n");
    *len_p = len;
    return t;
}

dcr_status_t dcr_anchor_manifest_parse(const char *text, size_t len, const char *where,
                                       dcr_anchor_manifest_t *out_p)
{
    if (text == NULL || where == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "anchor manifest: NULL argument");
    memset(out_p, 0, sizeof(*out_p));
    dcr__cursor_t c = {text, text + len};
    dcr_anchor_manifest_t m = {0};
    uint64_t n = 0;
    const char *expected = "'dcr-anchor 1'";
    bool ok = dcr__cursor_lit(&c, "dcr-anchor 1\n");
    if (ok) expected = "'version <decimal>'";
    ok = ok && dcr__retain_cur_field(&c, "version ", &m.version);
    if (ok) expected = "'objects <decimal>' (at least 1)";
    /* Every entry takes more than 64 bytes of text: a count the text cannot
     * hold is malformed, never an allocation. */
    dcr__cursor_t at = c; /* an error names the line of a count out of range */
    ok = ok && dcr__retain_cur_field(&c, "objects ", &n) && n >= 1 && n <= len / 64;
    if (!ok) c = at;
    if (ok) {
        m.entries = calloc((size_t)n, sizeof(*m.entries));
        if (!m.entries) return dcr_error_set(DCR_ENOMEM, "%s: %" PRIu64 " objects", where, n);
        expected = "'object <name> <bytes> <64 hex digits>' (each name once)";
    }
    ok = ok && dcr__retain_cur_entries(&c, "object", ANCHOR_MANIFEST, m.entries, n);
    if (ok) expected = "'end' and nothing after it";
    ok = ok && dcr__cursor_lit(&c, "end\n") && c.p == c.end;
    if (!ok) {
        size_t line = dcr__text_line_of(text, &c);
        free(m.entries);
        return dcr_error_set(DCR_ETRANSPORT, "anchor manifest %s: line %zu: expected %s", where,
                             line, expected);
    }
    m.n = (size_t)n;
    *out_p = m;
    return DCR_OK;
}

void dcr_anchor_manifest_free(dcr_anchor_manifest_t *m)
{
    if (m == NULL) return;
    free(m->entries);
    memset(m, 0, sizeof(*m));
}

/* ---- the store --------------------------------------------------------------- */

/* The version of a key "anchors/v<V>/ANCHOR"; false for any other key. */
static bool manifest_key_version(const char *key, uint64_t *v)
{
    dcr__cursor_t c = {key, key + strlen(key)};
    return dcr__cursor_lit(&c, ANCHOR_ROOT "v") && dcr__cursor_u64(&c, v) &&
           dcr__cursor_lit(&c, "/" ANCHOR_MANIFEST) && c.p == c.end;
}

/* Every complete anchor below `below` but the newest of them (a joiner may
 * be reading it): its ANCHOR first, then the rest. */
static dcr_status_t prune(dcr_objstore_t *s, uint64_t below)
{
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_objstore_list_all(s, ANCHOR_ROOT, &e, &n));
    uint64_t keep = 0;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        if (manifest_key_version(e[i].key, &v) && v < below && (!any || v > keep)) {
            keep = v;
            any = true;
        }
    }
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        uint64_t v = 0;
        if (!manifest_key_version(e[i].key, &v) || v >= keep) continue;
        char prefix[64];
        snprintf(prefix, sizeof prefix, ANCHOR_ROOT "v%" PRIu64 "/", v);
        st = dcr_objstore_delete(s, e[i].key);
        if (st == DCR_OK) st = dcr_objstore_delete_prefix(s, prefix);
    }
    free(e);
    return st;
}

dcr_status_t dcr_anchor_put(dcr_objstore_t *s, uint64_t version, size_t n, const char *const *names,
                            const uint8_t *const *bufs, const size_t *lens)
{
    if (s == NULL || n == 0 || names == NULL || bufs == NULL || lens == NULL)
        return dcr_error_set(DCR_EINVAL, "anchor put: bad arguments");
    dcr_anchor_manifest_t m = {version, n, calloc(n, sizeof(dcr_retain_entry_t))};
    if (m.entries == NULL) return dcr_error_set(DCR_ENOMEM, "anchor of version %" PRIu64, version);
    dcr_status_t st = DCR_OK;
    char key[256];
    for (size_t i = 0; st == DCR_OK && i < n; i++) {
        if (strlen(names[i]) > DCR_RETAIN_NAME_MAX) {
            st = dcr_error_set(DCR_EINVAL, "anchor object name %s is too long", names[i]);
            break;
        }
        snprintf(m.entries[i].name, sizeof m.entries[i].name, "%s", names[i]);
        m.entries[i].bytes = lens[i];
        digest_of(bufs[i], lens[i], m.entries[i].digest);
        anchor_key(version, names[i], key, sizeof key);
        st = dcr_objstore_put(s, key, bufs[i], lens[i], NULL);
    }
    size_t len = 0;
    char *text = st == DCR_OK ? dcr_anchor_manifest_text(&m, &len) : NULL;
    if (st == DCR_OK && text == NULL) st = dcr_error_set(DCR_ENOMEM, "anchor manifest");
    /* Parsing what we wrote keeps writer and reader one format. */
    dcr_anchor_manifest_t back = {0};
    if (st == DCR_OK) st = dcr_anchor_manifest_parse(text, len, "(written)", &back);
    dcr_anchor_manifest_free(&back);
    anchor_key(version, ANCHOR_MANIFEST, key, sizeof key);
    if (st == DCR_OK) st = dcr_objstore_put(s, key, (const uint8_t *)text, len, NULL);
    free(text);
    free(m.entries);
    if (st == DCR_OK) st = prune(s, version);
    return st;
}

dcr_status_t dcr_anchor_newest(dcr_objstore_t *s, uint64_t at_most, dcr_anchor_manifest_t *out_p)
{
    if (s == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "anchor: NULL argument");
    memset(out_p, 0, sizeof(*out_p));
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_objstore_list_all(s, ANCHOR_ROOT, &e, &n));
    bool found = false;
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        if (manifest_key_version(e[i].key, &v) && v <= at_most && (!found || v > best)) {
            best = v;
            found = true;
        }
    }
    free(e);
    if (!found)
        return dcr_error_set(DCR_ENOTFOUND, "no anchor of version %" PRIu64 " or older", at_most);
    char key[128];
    anchor_key(best, ANCHOR_MANIFEST, key, sizeof key);
    uint8_t *text = NULL;
    size_t len = 0;
    DCR_CHECK(dcr_objstore_get(s, key, ANCHOR_TEXT_MAX, NULL, &text, &len));
    dcr_status_t st = dcr_anchor_manifest_parse((const char *)text, len, key, out_p);
    free(text);
    if (st == DCR_OK && out_p->version != best) {
        uint64_t named = out_p->version;
        dcr_anchor_manifest_free(out_p);
        return dcr_error_set(DCR_ETRANSPORT, "anchor manifest %s names version %" PRIu64, key,
                             named);
    }
    return st;
}

dcr_status_t dcr_anchor_get(dcr_objstore_t *s, const dcr_anchor_manifest_t *m, const char *name,
                            uint8_t **buf_p, size_t *len_p)
{
    if (s == NULL || m == NULL || name == NULL || buf_p == NULL || len_p == NULL)
        return dcr_error_set(DCR_EINVAL, "anchor: bad object request");
    const dcr_retain_entry_t *e = NULL;
    for (size_t i = 0; i < m->n && !e; i++)
        if (strcmp(m->entries[i].name, name) == 0) e = &m->entries[i];
    if (e == NULL)
        return dcr_error_set(DCR_ENOTFOUND, "anchor of version %" PRIu64 " has no object %s",
                             m->version, name);
    char key[256];
    anchor_key(m->version, name, key, sizeof key);
    uint8_t *buf = NULL;
    size_t len = 0;
    /* One byte more than listed: a longer object is found, never cut. */
    DCR_CHECK(dcr_objstore_get(s, key, e->bytes < ANCHOR_OBJ_MAX ? e->bytes + 1 : e->bytes, NULL,
                               &buf, &len));
    uint8_t d[DCR_RETAIN_DIGEST_BYTES];
    digest_of(buf, len, d);
    if (len != e->bytes || memcmp(d, e->digest, sizeof d) != 0) {
        free(buf);
        return dcr_error_set(DCR_EDIGEST,
                             "anchor object %s: %zu bytes or its digest differ from its manifest "
                             "(%" PRIu64 " bytes)",
                             key, len, e->bytes);
    }
    *buf_p = buf;
    *len_p = len;
    return DCR_OK;
}

dcr_status_t dcr_anchor_clear(dcr_objstore_t *s)
{
    return dcr_objstore_delete_prefix(s, ANCHOR_ROOT);
}
