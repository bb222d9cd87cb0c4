/* The object-store registry and wrappers: the only callers of a backend's
 * slots. They check keys, ranges and out-parameters once for every backend,
 * so a backend can trust what reaches it. */
#include "dcr/objstore.h"

#include <stdlib.h>
#include <string.h>

#include "core/core-internal.h"
#include "transport/objstore-internal.h"
#include "transport/relay-internal.h"

static const void *const dcr__objstore_backends[] = {
    &dcr__objstore_dir_ops,
    &dcr__objstore_s3_ops,
    &dcr__objstore_relay_ops,
};
#define DCR__N_STORES (sizeof dcr__objstore_backends / sizeof dcr__objstore_backends[0])
/* The built-in backends, then those registered at run time
 * (dcr_objstore_register). */
static dcr__registry_t dcr__registry =
    DCR__REGISTRY_INIT("object store", dcr__objstore_backends, DCR__N_STORES);

size_t dcr_objstore_backend_count(void)
{
    return dcr__registry_count(&dcr__registry);
}

/* Registered backends come first in the claiming order (see for_url), but
 * after the built-in ones in this numbering, which conformance tests use. */
const dcr_objstore_ops_t *dcr_objstore_backend(size_t i)
{
    return dcr__registry_at(&dcr__registry, i);
}

const dcr_objstore_ops_t *dcr_objstore_find(const char *name)
{
    return dcr__registry_find(&dcr__registry, name);
}

dcr_status_t dcr_objstore_register(const dcr_objstore_ops_t *o)
{
    if (o == NULL || o->hdr.version != DCR_OBJSTORE_OPS_VERSION || o->hdr.name == NULL ||
        o->hdr.name[0] == '\0' || o->claims == NULL || o->create == NULL || o->put == NULL ||
        o->get == NULL || o->list == NULL || o->del == NULL || o->wait_change == NULL ||
        o->destroy == NULL) {
        return dcr_error_set(DCR_EINVAL,
                             "objstore_register: a backend needs version %d, a name and every slot",
                             DCR_OBJSTORE_OPS_VERSION);
    }
    return dcr__registry_add(&dcr__registry, o);
}

static bool dcr__claims(const dcr_objstore_ops_t *o, const char *url)
{
    if (o == NULL || o->hdr.version != DCR_OBJSTORE_OPS_VERSION) return false;
    return o->claims(o, url);
}

const dcr_objstore_ops_t *dcr_objstore_for_url(const char *url)
{
    if (url == NULL || url[0] == '\0') {
        dcr_error_set(DCR_EINVAL, "object store: empty store URL; expected a directory path, "
                                  "dir:PATH or s3://BUCKET/PREFIX");
        return NULL;
    }
    /* Registered schemes first ("faulty:s3://..."): the built-in "dir"
     * claims dir:PATH and every string without a scheme, and none claims
     * an unknown scheme ("bogus:x"), which is refused below. */
    size_t n = dcr_objstore_backend_count();
    for (size_t i = DCR__N_STORES; i < n; i++) {
        const dcr_objstore_ops_t *o = dcr_objstore_backend(i);
        if (dcr__claims(o, url)) return o;
    }
    for (size_t i = 0; i < DCR__N_STORES; i++) {
        const dcr_objstore_ops_t *o = dcr_objstore_backend(i);
        if (dcr__claims(o, url)) return o;
    }
    dcr_error_set(DCR_EINVAL,
                  "object store '%s': unknown scheme; expected a directory path, dir:PATH or "
                  "s3://BUCKET/PREFIX",
                  url);
    return NULL;
}

bool dcr_objstore_key_ok(const char *key)
{
    if (key == NULL) return false;
    size_t n = strlen(key);
    if (n == 0 || n > DCR_OBJSTORE_KEY_MAX || key[0] == '/') return false;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || c == '/';
        if (!ok) return false;
        /* Components may not start with '.': the dir backend keeps its
         * uploads in progress under such names, and ".." would escape. */
        if ((i == 0 || key[i - 1] == '/') && (c == '.' || c == '/')) return false;
    }
    return true;
}

/* Prefixes are keys' beginnings: empty, or a key, or a key ending in '/'. */
static bool dcr__prefix_ok(const char *prefix)
{
    if (prefix == NULL) return false;
    if (prefix[0] == '\0') return true;
    size_t n = strlen(prefix);
    if (n > DCR_OBJSTORE_KEY_MAX) return false;
    char buf[DCR_OBJSTORE_KEY_MAX + 2];
    memcpy(buf, prefix, n + 1);
    if (buf[n - 1] == '/') {
        buf[n] = 'x'; /* "a/" is ok as the beginning of "a/x" */
        buf[n + 1] = '\0';
    }
    return dcr_objstore_key_ok(buf);
}

#define CHECK_STORE(s)                                                                             \
    if ((s) == NULL || (s)->ops == NULL)                                                           \
    return dcr_error_set(DCR_EINVAL, "object store: NULL handle")
#define CHECK_KEY(key)                                                                             \
    if (!dcr_objstore_key_ok(key))                                                                 \
    return dcr_error_set(DCR_EINVAL,                                                               \
                         "object store: key '%s' is not a valid key (expected 1..%d bytes of "     \
                         "[A-Za-z0-9._-/], no empty or dot-leading component)",                    \
                         (key) ? (key) : "(null)", DCR_OBJSTORE_KEY_MAX)

dcr_status_t dcr_objstore_create(const dcr_objstore_config_t *cfg, dcr_objstore_t **out_p)
{
    if (cfg == NULL || out_p == NULL)
        return dcr_error_set(DCR_EINVAL, "object store: NULL configuration or output");
    *out_p = NULL;
    const dcr_objstore_ops_t *o = dcr_objstore_for_url(cfg->url);
    if (o == NULL) return DCR_EINVAL;
    if (cfg->timeout_ms < 0 || cfg->retries < -1 || cfg->retries > 100) {
        return dcr_error_set(DCR_EINVAL,
                             "object store %s: timeout_ms %d / retries %d: expected >= 0 / -1..100",
                             cfg->url, cfg->timeout_ms, cfg->retries);
    }
    dcr_objstore_t *s = NULL;
    DCR_CHECK(o->create(o, cfg, &s));
    s->ops = o;
    *out_p = s;
    return DCR_OK;
}

dcr_status_t dcr_objstore_put(dcr_objstore_t *s, const char *key, const uint8_t *buf, size_t len,
                              const dcr_objstore_pace_t *pace)
{
    CHECK_STORE(s);
    CHECK_KEY(key);
    if (buf == NULL && len > 0) return dcr_error_set(DCR_EINVAL, "object store put %s: NULL", key);
    return s->ops->put(s, key, buf, len, pace != NULL && pace->fn != NULL ? pace : NULL);
}

dcr_status_t dcr_objstore_get(dcr_objstore_t *s, const char *key, size_t max_bytes,
                              const dcr_objstore_pace_t *pace, uint8_t **data_p, size_t *len_p)
{
    CHECK_STORE(s);
    CHECK_KEY(key);
    if (data_p == NULL || len_p == NULL)
        return dcr_error_set(DCR_EINVAL, "object store get %s: NULL output", key);
    uint8_t *buf = malloc(max_bytes ? max_bytes : 1);
    if (buf == NULL)
        return dcr_error_set(DCR_ENOMEM, "object store get %s: %zu bytes", key, max_bytes);
    size_t got = 0;
    dcr_status_t st = s->ops->get(s, key, 0, UINT64_MAX, buf, max_bytes, &got,
                                  pace != NULL && pace->fn != NULL ? pace : NULL);
    if (st != DCR_OK) {
        free(buf);
        return st;
    }
    *data_p = buf;
    *len_p = got;
    return DCR_OK;
}

dcr_status_t dcr_objstore_get_into(dcr_objstore_t *s, const char *key, uint64_t off, uint64_t len,
                                   uint8_t *dst, size_t cap, size_t *got_p,
                                   const dcr_objstore_pace_t *pace)
{
    CHECK_STORE(s);
    CHECK_KEY(key);
    if ((dst == NULL && cap > 0) || got_p == NULL)
        return dcr_error_set(DCR_EINVAL, "object store get %s: NULL buffer or count", key);
    if (len != UINT64_MAX && (len > cap || off > UINT64_MAX - len))
        return dcr_error_set(DCR_EINVAL,
                             "object store get %s: %llu bytes at %llu do not fit %zu bytes", key,
                             (unsigned long long)len, (unsigned long long)off, cap);
    return s->ops->get(s, key, off, len, dst, cap, got_p,
                       pace != NULL && pace->fn != NULL ? pace : NULL);
}

dcr_status_t dcr_objstore_get_range(dcr_objstore_t *s, const char *key, uint64_t off, size_t len,
                                    uint8_t *dst, const dcr_objstore_pace_t *pace)
{
    CHECK_STORE(s);
    CHECK_KEY(key);
    if (dst == NULL && len > 0)
        return dcr_error_set(DCR_EINVAL, "object store get %s: NULL buffer", key);
    if (len == 0) return DCR_OK;
    if (off > UINT64_MAX - len)
        return dcr_error_set(DCR_EINVAL, "object store get %s: range overflows", key);
    size_t got = 0;
    dcr_status_t st = s->ops->get(s, key, off, len, dst, len, &got,
                                  pace != NULL && pace->fn != NULL ? pace : NULL);
    if (st == DCR_OK && got != len) {
        return dcr_error_set(DCR_ETRANSPORT, "object store get %s: %zu bytes at %llu, expected %zu",
                             key, got, (unsigned long long)off, len);
    }
    return st;
}

dcr_status_t dcr_objstore_list(dcr_objstore_t *s, const char *prefix, const char *start,
                               size_t max_keys, dcr_objstore_page_t *page)
{
    CHECK_STORE(s);
    if (page == NULL) return dcr_error_set(DCR_EINVAL, "object store list: NULL page");
    memset(page, 0, sizeof *page);
    if (!dcr__prefix_ok(prefix))
        return dcr_error_set(DCR_EINVAL, "object store list: prefix '%s' is not a key prefix",
                             prefix ? prefix : "(null)");
    if (start == NULL) start = "";
    if (strlen(start) >= sizeof page->next)
        return dcr_error_set(DCR_EINVAL, "object store list %s: start token too long", prefix);
    if (max_keys == 0 || max_keys > 1000)
        return dcr_error_set(DCR_EINVAL, "object store list %s: max_keys %zu, expected 1..1000",
                             prefix, max_keys);
    dcr_status_t st = s->ops->list(s, prefix, start, max_keys, page);
    if (st != DCR_OK) dcr_objstore_page_free(page);
    return st;
}

void dcr_objstore_page_free(dcr_objstore_page_t *page)
{
    if (page == NULL) return;
    free(page->entries);
    page->entries = NULL;
    page->n = 0;
}

dcr_status_t dcr_objstore_list_all(dcr_objstore_t *s, const char *prefix,
                                   dcr_objstore_entry_t **entries_p, size_t *n_p)
{
    if (entries_p == NULL || n_p == NULL)
        return dcr_error_set(DCR_EINVAL, "object store list: NULL output");
    dcr_objstore_entry_t *all = NULL;
    size_t n = 0;
    char start[sizeof((dcr_objstore_page_t *)0)->next] = "";
    for (;;) {
        dcr_objstore_page_t page;
        dcr_status_t st = dcr_objstore_list(s, prefix, start, 1000, &page);
        if (st != DCR_OK) {
            free(all);
            return st;
        }
        if (page.n > 0) {
            dcr_objstore_entry_t *grown = realloc(all, (n + page.n) * sizeof *all);
            if (grown == NULL) {
                dcr_objstore_page_free(&page);
                free(all);
                return dcr_error_set(DCR_ENOMEM, "object store list %s: %zu keys", prefix,
                                     n + page.n);
            }
            all = grown;
            memcpy(all + n, page.entries, page.n * sizeof *all);
            n += page.n;
        }
        memcpy(start, page.next, sizeof start);
        dcr_objstore_page_free(&page);
        if (start[0] == '\0') break;
    }
    *entries_p = all;
    *n_p = n;
    return DCR_OK;
}

dcr_status_t dcr_objstore_delete(dcr_objstore_t *s, const char *key)
{
    CHECK_STORE(s);
    CHECK_KEY(key);
    return s->ops->del(s, key);
}

dcr_status_t dcr_objstore_delete_prefix(dcr_objstore_t *s, const char *prefix)
{
    dcr_objstore_entry_t *e = NULL;
    size_t n = 0;
    DCR_CHECK(dcr_objstore_list_all(s, prefix, &e, &n));
    dcr_status_t st = DCR_OK;
    for (size_t i = 0; i < n && st == DCR_OK; i++) st = dcr_objstore_delete(s, e[i].key);
    free(e);
    return st;
}

dcr_status_t dcr_objstore_wait_change(dcr_objstore_t *s, const char *prefix, int timeout_ms)
{
    CHECK_STORE(s);
    if (!dcr__prefix_ok(prefix) || timeout_ms < 0)
        return dcr_error_set(DCR_EINVAL, "object store wait: prefix '%s', timeout %d ms",
                             prefix ? prefix : "(null)", timeout_ms);
    return s->ops->wait_change(s, prefix, timeout_ms);
}

const dcr_objstore_props_t *dcr_objstore_props(const dcr_objstore_t *s)
{
    static const dcr_objstore_props_t none = {0};
    return s != NULL && s->ops != NULL ? &s->ops->props : &none;
}

const char *dcr_objstore_name(const dcr_objstore_t *s)
{
    return s != NULL && s->ops != NULL ? s->ops->hdr.name : NULL;
}

void dcr_objstore_destroy(dcr_objstore_t *s)
{
    if (s != NULL && s->ops != NULL) s->ops->destroy(s);
}
