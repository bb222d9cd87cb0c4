/* Object stores: flat key spaces of immutable objects, the storage under the
 * "objstore" transport (transport/objstore_transport.c speaks its protocol
 * once, against this table, for every store).
 *
 * A backend fills dcr_objstore_ops_t and says in its properties what it
 * guarantees; callers branch on properties, never on names. A store is named
 * by a URL: a plain path or "dir:PATH" (a local directory, "dir"), or
 * "s3://BUCKET/PREFIX" with an endpoint (an S3-compatible service over HTTP,
 * "s3"), or "relay://HOST:PORT" (a relay root's retained versions, read
 * over the network: "relay", read-only; dcr/recovery.h). Backends registered at run time
 * (dcr_objstore_register) claim their own schemes: faults/ adds "faulty:<URL>", a store that wraps
 * the one URL names and damages what it stores. Callers use only the dcr_objstore_* wrappers
 * (transport/objstore.c), which check arguments once for every backend before any slot runs.
 *
 * Keys are relative to the store's root or prefix: 1..DCR_OBJSTORE_KEY_MAX
 * bytes of [A-Za-z0-9._-] and '/', not starting with '/' or '.', without
 * "//" or a component starting with '.'. Objects are written whole: a key is
 * either absent or holds every byte of one put (a reader never sees a partial
 * object), and a put on an existing key replaces it whole. */
#ifndef DCR_OBJSTORE_H
#define DCR_OBJSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/ops.h"
#include "dcr/status.h"

/* Version of dcr_objstore_ops_t: a backend built against another version is
 * refused by the registry. */
#define DCR_OBJSTORE_OPS_VERSION 3
#define DCR_OBJSTORE_KEY_MAX     512
/* Version tags (dir: inode and size; S3: the ETag) fit in this many bytes. */
#define DCR_OBJSTORE_VERSION_MAX 80

/* Where a store lives and how to reach it. Strings are copied at create. */
typedef struct dcr_objstore_config {
    const char *url;         /* "PATH", "dir:PATH" or "s3://BUCKET[/PREFIX]" */
    const char *s3_endpoint; /* s3: "http[s]://HOST[:PORT]" (path-style requests) */
    int timeout_ms;          /* s3: a request fails when it cannot connect or no byte moves for this
                                long (whole seconds, at least 1; 0: 60000) */
    int retries;             /* s3: further tries after a 5xx, timeout or reset (0: 4; -1: none) */
    uint64_t multipart_threshold; /* s3: puts above it go in parts (0: 16 MiB) */
    uint64_t part_bytes;          /* s3: part size of multipart puts (0: 8 MiB; >= 5 MiB) */
} dcr_objstore_config_t;

/* What a backend guarantees; callers adapt to these, never to its name. */
typedef struct dcr_objstore_props {
    /* wait_change returns soon after a put or delete under the prefix;
     * without it, wait_change only sleeps and callers poll by listing. */
    bool change_notify;
    /* A completed put is in every later listing, and a completed delete is
     * in none (read-after-write for listings too). */
    bool consistent_list;
    /* get accepts a byte range (partial reads of large objects). */
    bool ranged_get;
    /* Serves reads only: put and delete are refused (DCR_EUNSUPPORTED).
     * The "relay" backend: a relay root's retained versions
     * (dcr/recovery.h), whose keys are written by the root itself. */
    bool read_only;
} dcr_objstore_props_t;

/* Pacing hook for the bytes of one transfer: called for each piece of at
 * most DCR_OBJSTORE_PACE_CHUNK bytes, in order (put: before the piece leaves
 * the caller, or for the whole body before a request that then sends at
 * once; get: when the piece has arrived, again for bytes a retry moves). A
 * non-OK return aborts the transfer, which then returns that status. NULL:
 * unpaced. */
typedef struct dcr_objstore_pace {
    dcr_status_t (*fn)(void *ctx, size_t n);
    void *ctx;
} dcr_objstore_pace_t;
#define DCR_OBJSTORE_PACE_CHUNK ((size_t)64 << 10)

/* One object of a listing. */
typedef struct dcr_objstore_entry {
    char key[DCR_OBJSTORE_KEY_MAX + 1];
    uint64_t size;
    /* Changes whenever the key is put again (dir: inode and size; S3: ETag). */
    char version[DCR_OBJSTORE_VERSION_MAX];
} dcr_objstore_entry_t;

/* One page of a listing: keys in ascending byte order. */
typedef struct dcr_objstore_page {
    dcr_objstore_entry_t *entries; /* malloc'd; dcr_objstore_page_free */
    size_t n;
    /* Where the next page starts; "" when this was the last page. */
    char next[DCR_OBJSTORE_KEY_MAX + 1024];
} dcr_objstore_page_t;

typedef struct dcr_objstore dcr_objstore_t;

/* Backend slots. The wrappers check the handle, keys, ranges and
 * out-parameters first. Every slot but destroy is thread-safe: transfers of
 * different threads run in parallel. claims and create receive the table
 * they were found in as self (a wrapper finds the table it wraps in
 * self->hdr.parent, dcr/ops.h). */
typedef struct dcr_objstore_ops {
    dcr_ops_header_t hdr; /* version DCR_OBJSTORE_OPS_VERSION; name "dir", "s3" */
    /* A wrapper states what the store it wraps guarantees. */
    dcr_objstore_props_t props;
    /* True when this backend serves `url` (its scheme). */
    bool (*claims)(const struct dcr_objstore_ops *self, const char *url);
    /* Opens the store cfg->url names (the location must exist or be
     * creatable: a directory is created, an S3 bucket must exist). */
    dcr_status_t (*create)(const struct dcr_objstore_ops *self, const dcr_objstore_config_t *cfg,
                           dcr_objstore_t **out_p);
    /* Stores buf[0, len) under key, whole and atomically. A put that fails
     * leaves the key absent or holding a whole earlier version. */
    dcr_status_t (*put)(dcr_objstore_t *s, const char *key, const uint8_t *buf, size_t len,
                        const dcr_objstore_pace_t *pace);
    /* Reads bytes [off, off + len) of key into dst (len == UINT64_MAX: from
     * off to the end, then *got_p tells how many, at most cap). The object
     * must hold them all: a shorter body is an error, never data.
     * DCR_ENOTFOUND when the key is absent; DCR_EINVAL when the object holds
     * more than cap bytes from off. */
    dcr_status_t (*get)(dcr_objstore_t *s, const char *key, uint64_t off, uint64_t len,
                        uint8_t *dst, size_t cap, size_t *got_p, const dcr_objstore_pace_t *pace);
    /* The page of keys starting with prefix from `start` ("" or a page's
     * next), at most max_keys entries (>= 1). */
    dcr_status_t (*list)(dcr_objstore_t *s, const char *prefix, const char *start, size_t max_keys,
                         dcr_objstore_page_t *page);
    /* Removes key; an absent key is not an error. */
    dcr_status_t (*del)(dcr_objstore_t *s, const char *key);
    /* Returns DCR_OK once something under prefix may have changed since the
     * call began, or DCR_ETIMEOUT after timeout_ms (>= 0; the engine's one
     * timeout code, as for transport and group recv and the queue). Without
     * props.change_notify it sleeps timeout_ms and returns DCR_ETIMEOUT. */
    dcr_status_t (*wait_change)(dcr_objstore_t *s, const char *prefix, int timeout_ms);
    /* Closes the store's connections and watches and frees s; the objects
     * stay. Only when no other call on s is in flight. Never fails. */
    void (*destroy)(dcr_objstore_t *s);
} dcr_objstore_ops_t;

/* Every backend handle starts with this header. */
struct dcr_objstore {
    const dcr_objstore_ops_t *ops;
};

/* Backends by name ("dir", "s3", and those registered); NULL when unknown. */
const dcr_objstore_ops_t *dcr_objstore_find(const char *name);
/* Adds a backend from outside the engine (the table is borrowed and must
 * stay valid for the process). It needs version DCR_OBJSTORE_OPS_VERSION, a
 * name and every slot. Registered backends are asked before the
 * built-in ones whether they claim a URL (the "dir" backend claims dir:PATH
 * and any string without a scheme; an unknown scheme is refused). Registering the same table again
 * is a no-op; another table under a taken name, or a full registry (64), is DCR_EINVAL.
 * Thread-safe. */
dcr_status_t dcr_objstore_register(const dcr_objstore_ops_t *ops);
/* Backends compiled into libdcr in a fixed order, then those registered
 * (conformance tests). */
size_t dcr_objstore_backend_count(void);
const dcr_objstore_ops_t *dcr_objstore_backend(size_t i);
/* The backend serving url; NULL (with the error detail set) when none. */
const dcr_objstore_ops_t *dcr_objstore_for_url(const char *url);
/* For a dir:PATH store, whether opening it would be allowed, touching
 * nothing: PATH is absent, or a folder (not a link) that is empty or marked
 * as a store by dcr. Commands call it before any setup; opening the store
 * applies the same rule. DCR_OK for every other scheme. */
dcr_status_t dcr_objstore_dir_check(const char *url);

/* Opens the store cfg->url names, through the backend claiming its scheme.
 * Errors are one line naming the URL and what was expected (a missing
 * credential variable, an unreachable endpoint, a missing bucket). */
dcr_status_t dcr_objstore_create(const dcr_objstore_config_t *cfg, dcr_objstore_t **out_p);
dcr_status_t dcr_objstore_put(dcr_objstore_t *s, const char *key, const uint8_t *buf, size_t len,
                              const dcr_objstore_pace_t *pace);
/* The whole object into a malloc'd buffer (*data_p, *len_p; freed by the
 * caller) when it holds at most max_bytes. */
dcr_status_t dcr_objstore_get(dcr_objstore_t *s, const char *key, size_t max_bytes,
                              const dcr_objstore_pace_t *pace, uint8_t **data_p, size_t *len_p);
/* The get slot's own contract, for a backend that wraps another (a wrapping
 * backend reaches the one it wraps only through wrappers): bytes [off, off +
 * len) of key into dst (len UINT64_MAX: to the end, at most cap), their count
 * in *got_p. */
dcr_status_t dcr_objstore_get_into(dcr_objstore_t *s, const char *key, uint64_t off, uint64_t len,
                                   uint8_t *dst, size_t cap, size_t *got_p,
                                   const dcr_objstore_pace_t *pace);
/* Exactly bytes [off, off + len) of key into dst. */
dcr_status_t dcr_objstore_get_range(dcr_objstore_t *s, const char *key, uint64_t off, size_t len,
                                    uint8_t *dst, const dcr_objstore_pace_t *pace);
dcr_status_t dcr_objstore_list(dcr_objstore_t *s, const char *prefix, const char *start,
                               size_t max_keys, dcr_objstore_page_t *page);
/* Every key under prefix, all pages joined (*entries_p malloc'd). */
dcr_status_t dcr_objstore_list_all(dcr_objstore_t *s, const char *prefix,
                                   dcr_objstore_entry_t **entries_p, size_t *n_p);
void dcr_objstore_page_free(dcr_objstore_page_t *page);
dcr_status_t dcr_objstore_delete(dcr_objstore_t *s, const char *key);
/* Deletes every key under prefix. */
dcr_status_t dcr_objstore_delete_prefix(dcr_objstore_t *s, const char *prefix);
dcr_status_t dcr_objstore_wait_change(dcr_objstore_t *s, const char *prefix, int timeout_ms);
const dcr_objstore_props_t *dcr_objstore_props(const dcr_objstore_t *s);
/* The backend's name; NULL for NULL. */
const char *dcr_objstore_name(const dcr_objstore_t *s);
/* Accepts NULL. */
void dcr_objstore_destroy(dcr_objstore_t *s);

/* True when key follows the key rules above. */
bool dcr_objstore_key_ok(const char *key);

/* What the object-store transport (engine/transport/objstore_transport.c)
 * of this process asked of its stores since the process started: listings
 * of an attempt's prefix, gets (payloads, manifests, reference parts) and
 * puts (payloads, manifest parts, reference objects). The requests per
 * refit a role costs its store. Thread-safe. */
typedef struct dcr_objstore_counts {
    uint64_t lists, gets, puts;
} dcr_objstore_counts_t;
void dcr_objstore_transport_counts(dcr_objstore_counts_t *out_p);

#endif
