/* Pieces of the S3 backend that need no network: MD5 (the ETag of a
 * single-part object is the MD5 of its bytes, RFC 1321), from libcrypto, and
 * reading the few XML responses S3 sends (ListObjectsV2, multipart uploads,
 * errors) with expat. The readers look for known elements by name, take
 * only text elements that fit their bounds, and refuse anything else
 * instead of guessing: a document that is not well-formed up to what they
 * need, a document type declaration (S3 sends none, and without one no
 * entity but the five predefined ones and character references exists),
 * an undefined entity, a NUL. */
#include <expat.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/objstore-internal.h"

/* ---- MD5 ------------------------------------------------------------------ */

static void hex16(const uint8_t d[16], char out[33])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = x[d[i] >> 4];
        out[2 * i + 1] = x[d[i] & 15];
    }
    out[32] = '\0';
}

bool dcr__md5(const uint8_t *buf, size_t len, uint8_t out[16])
{
    return EVP_Digest(buf, len, out, NULL, EVP_md5(), NULL) == 1;
}

bool dcr__md5_hex(const uint8_t *buf, size_t len, char out[33])
{
    uint8_t d[16];
    if (!dcr__md5(buf, len, d)) return false;
    hex16(d, out);
    return true;
}

bool dcr__md5_multipart_etag(const uint8_t (*parts)[16], size_t n, char *out, size_t cap)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    bool ok = m != NULL && EVP_DigestInit_ex(m, EVP_md5(), NULL) == 1;
    for (size_t i = 0; ok && i < n; i++) ok = EVP_DigestUpdate(m, parts[i], 16) == 1;
    uint8_t d[16];
    ok = ok && EVP_DigestFinal_ex(m, d, NULL) == 1;
    EVP_MD_CTX_free(m);
    if (!ok) return false;
    char h[33];
    hex16(d, h);
    snprintf(out, cap, "%s-%zu", h, n);
    return true;
}

/* ---- XML ------------------------------------------------------------------ */

/* One text element being read: its characters go into out (cap bytes,
 * NUL-terminated); bad once it overflows or holds an element. */
typedef struct xml_field {
    char *out;
    size_t cap, n;
    int depth; /* of the element; 0: not reading one */
    bool bad;
} xml_field_t;

static void xml_field_start(xml_field_t *f, char *out, size_t cap, int depth)
{
    *f = (xml_field_t){.out = out, .cap = cap, .depth = depth};
    out[0] = '\0';
}

static void xml_field_chars(xml_field_t *f, const XML_Char *s, int len)
{
    if (f->depth == 0 || f->bad) return;
    if ((size_t)len >= f->cap - f->n) {
        f->bad = true;
        return;
    }
    memcpy(f->out + f->n, s, (size_t)len);
    f->n += (size_t)len;
    f->out[f->n] = '\0';
}

/* What every reader's state starts with: its parser (to stop it from a
 * handler) and whether it stopped at a document type declaration. */
typedef struct xml_base {
    XML_Parser p;
    bool doctype;
} xml_base_t;

static void XMLCALL xml_refuse_doctype(void *ctx, const XML_Char *name, const XML_Char *sysid,
                                       const XML_Char *pubid, int has_internal_subset)
{
    xml_base_t *b = ctx;
    (void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
    b->doctype = true;
    XML_StopParser(b->p, XML_FALSE);
}

/* Parses xml[0, len) with the handlers (user data b, which starts the
 * reader's state) until its end or until a handler stops it. true only when
 * the whole document was read: a stop (the reader knows why), a malformed
 * document and a parser that could not be made are false, with *why_p and
 * *line_p saying what and where. */
static bool xml_run(xml_base_t *b, const char *xml, size_t len, XML_StartElementHandler start,
                    XML_EndElementHandler end, XML_CharacterDataHandler chars, const char **why_p,
                    unsigned long *line_p)
{
    *why_p = "too large";
    *line_p = 0;
    if (len > INT_MAX) return false;
    *why_p = "out of memory";
    b->p = XML_ParserCreate(NULL);
    if (b->p == NULL) return false;
    XML_SetUserData(b->p, b);
    XML_SetElementHandler(b->p, start, end);
    XML_SetCharacterDataHandler(b->p, chars);
    XML_SetStartDoctypeDeclHandler(b->p, xml_refuse_doctype);
    bool ok = XML_Parse(b->p, xml, (int)len, XML_TRUE) != XML_STATUS_ERROR;
    enum XML_Error e = XML_GetErrorCode(b->p);
    const char *said = XML_ErrorString(e);
    *why_p = b->doctype ? "a document type declaration" : said != NULL ? said : "malformed";
    *line_p = (unsigned long)XML_GetCurrentLineNumber(b->p);
    XML_ParserFree(b->p);
    b->p = NULL;
    return ok;
}

/* ---- the text of one element ---- */

typedef struct xml_text {
    xml_base_t base; /* first */
    const char *tag;
    int depth;
    xml_field_t f;
    bool found;
} xml_text_t;

static void XMLCALL xml_text_start(void *ctx, const XML_Char *name, const XML_Char **attrs)
{
    xml_text_t *t = ctx;
    (void)attrs;
    t->depth++;
    if (t->f.depth != 0)
        t->f.bad = true; /* not a text element */
    else if (strcmp(name, t->tag) == 0)
        xml_field_start(&t->f, t->f.out, t->f.cap, t->depth);
}

static void XMLCALL xml_text_end(void *ctx, const XML_Char *name)
{
    xml_text_t *t = ctx;
    (void)name;
    if (t->f.depth != 0 && t->f.depth == t->depth) {
        t->found = true;
        XML_StopParser(t->base.p, XML_FALSE); /* the rest of the document does not matter */
    }
    t->depth--;
}

static void XMLCALL xml_text_chars(void *ctx, const XML_Char *s, int len)
{
    xml_field_chars(&((xml_text_t *)ctx)->f, s, len);
}

bool dcr__s3_xml_text(const char *xml, size_t len, const char *tag, char *out, size_t cap)
{
    xml_text_t t = {.tag = tag, .f = {.out = out, .cap = cap}};
    const char *why;
    unsigned long line;
    /* Found is enough: an error document may be cut after what it says. */
    (void)xml_run(&t.base, xml, len, xml_text_start, xml_text_end, xml_text_chars, &why, &line);
    return t.found && !t.f.bad;
}

/* ---- ListObjectsV2 ---- */

/* The fields read: of each <Contents> entry, then of the page. */
enum { XL_KEY, XL_SIZE, XL_ETAG, XL_TRUNCATED, XL_NEXT, XL_FIELDS };

typedef struct xml_list {
    xml_base_t base; /* first */
    dcr_objstore_page_t *page;
    size_t cap; /* of page->entries */
    int depth;
    bool root_ok;
    int contents; /* depth of the open <Contents>; 0: none */
    /* Each field is the first element of its name (an entry's inside its
     * <Contents>, the page's outside any): started, then read whole. */
    bool started[XL_FIELDS], read[XL_FIELDS];
    int field; /* the one f reads */
    xml_field_t f;
    char size[32], etag[DCR_OBJSTORE_VERSION_MAX], truncated[16];
    bool bad_entry, nomem;
} xml_list_t;

static const char *const xl_names[XL_FIELDS] = {"Key", "Size", "ETag", "IsTruncated",
                                                "NextContinuationToken"};

/* Opens the next entry at page->entries[page->n]. */
static bool xml_list_entry(xml_list_t *l)
{
    dcr_objstore_page_t *page = l->page;
    if (page->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        dcr_objstore_entry_t *e = realloc(page->entries, cap * sizeof *e);
        if (e == NULL) return false;
        page->entries = e;
        l->cap = cap;
    }
    memset(&page->entries[page->n], 0, sizeof *page->entries);
    for (int i = XL_KEY; i <= XL_ETAG; i++) l->started[i] = l->read[i] = false;
    return true;
}

static void XMLCALL xml_list_start(void *ctx, const XML_Char *name, const XML_Char **attrs)
{
    xml_list_t *l = ctx;
    (void)attrs;
    l->depth++;
    if (l->depth == 1) l->root_ok = strcmp(name, "ListBucketResult") == 0;
    if (l->f.depth != 0) {
        l->f.bad = true; /* not a text element */
        return;
    }
    if (l->contents == 0 && strcmp(name, "Contents") == 0) {
        if (!xml_list_entry(l)) {
            l->nomem = true;
            XML_StopParser(l->base.p, XML_FALSE);
            return;
        }
        l->contents = l->depth;
        return;
    }
    int first = l->contents ? XL_KEY : XL_TRUNCATED, last = l->contents ? XL_ETAG : XL_NEXT;
    for (int i = first; i <= last; i++) {
        if (l->started[i] || strcmp(name, xl_names[i]) != 0) continue;
        dcr_objstore_entry_t *e = l->contents ? &l->page->entries[l->page->n] : NULL;
        char *outs[XL_FIELDS] = {e ? e->key : NULL, l->size, l->etag, l->truncated, l->page->next};
        size_t caps[XL_FIELDS] = {e ? sizeof e->key : 0, sizeof l->size, sizeof l->etag,
                                  sizeof l->truncated, sizeof l->page->next};
        l->started[i] = true;
        l->field = i;
        xml_field_start(&l->f, outs[i], caps[i], l->depth);
        return;
    }
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

static void XMLCALL xml_list_end(void *ctx, const XML_Char *name)
{
    xml_list_t *l = ctx;
    (void)name;
    if (l->f.depth != 0 && l->f.depth == l->depth) {
        l->read[l->field] = !l->f.bad;
        if (l->f.bad) l->f.out[0] = '\0';
        l->f.depth = 0;
    } else if (l->contents != 0 && l->contents == l->depth) {
        dcr_objstore_entry_t *e = &l->page->entries[l->page->n];
        if (!l->read[XL_KEY] || !l->read[XL_SIZE] || !l->read[XL_ETAG] ||
            !xml_u64(l->size, &e->size)) {
            l->bad_entry = true;
            XML_StopParser(l->base.p, XML_FALSE);
        } else {
            snprintf(e->version, sizeof e->version, "%s", l->etag);
            l->page->n++;
        }
        l->contents = 0;
    }
    l->depth--;
}

static void XMLCALL xml_list_chars(void *ctx, const XML_Char *s, int len)
{
    xml_field_chars(&((xml_list_t *)ctx)->f, s, len);
}

dcr_status_t dcr__s3_parse_list(const char *xml, size_t len, dcr_objstore_page_t *page)
{
    page->n = 0;
    page->next[0] = '\0';
    page->entries = calloc(1, sizeof *page->entries);
    if (page->entries == NULL) return dcr_error_set(DCR_ENOMEM, "S3 list response");
    xml_list_t l = {.page = page, .cap = 1, .truncated = "false"};
    const char *why;
    unsigned long line;
    bool parsed =
        xml_run(&l.base, xml, len, xml_list_start, xml_list_end, xml_list_chars, &why, &line);
    if (l.nomem) return dcr_error_set(DCR_ENOMEM, "S3 list response: %zu entries", page->n + 1);
    if (l.bad_entry)
        return dcr_error_set(DCR_ETRANSPORT,
                             "S3 list response: entry %zu: expected <Key> (at most %d bytes), "
                             "<Size> (a decimal) and <ETag>",
                             page->n + 1, DCR_OBJSTORE_KEY_MAX);
    if (!parsed)
        return dcr_error_set(DCR_ETRANSPORT, "S3 list response: malformed XML (line %lu: %s)", line,
                             why);
    if (!l.root_ok)
        return dcr_error_set(DCR_ETRANSPORT, "S3 list response: no <ListBucketResult> in %zu bytes",
                             len);
    if (strcmp(l.truncated, "true") == 0 && page->next[0] == '\0') {
        return dcr_error_set(DCR_ETRANSPORT, "S3 list response: truncated without a "
                                             "<NextContinuationToken> (or one above 1535 bytes)");
    }
    return DCR_OK;
}
