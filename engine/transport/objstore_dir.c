/* The object-storage transport on a directory, standing in for S3: owners
 * upload each payload once, and every rollout node downloads every payload on
 * its own, so each download crosses the cluster boundary again
 * (V_cross = upload + nodes x download, the seed's (1 + N_node) V_payload).
 *
 * Layout under the root directory:
 *   attempt-<tau>/payload-<owner>-<id>.dcrp   one payload, as the codec wrote it
 *   attempt-<tau>/MANIFEST                    written last, by the last owner's finish
 *   attempt-<tau>/.tmp-*                      uploads in progress (never read)
 *   reference-<pid>-<n>/ref-<owner>-<k>.bin   the reference's dummy checkpoint
 * One flat prefix per attempt, so one listing (readdir, S3 LIST) sees it all.
 * Every object is published by temporary file and rename: a visible name
 * always holds complete bytes, because readers see a name only once rename
 * has published it, whole. Objects are not fsynced: an object lives only for
 * its attempt, and after a crash of this machine the attempt fails anyway and
 * its retry resends every record; what must survive is the control plane's
 * commit record. The per-request cost of a real store's durable PUT is the
 * emulated link's latency (link.c), so an fsync would only add this disk's
 * flush time (milliseconds per object here) on top of it.
 *
 * The manifest is text, one record per line, each ending in '\n':
 *   dcr-manifest 1
 *   tau <tau>
 *   payloads <n>
 *   payload <owner> <id> <bytes> <BLAKE2b-128 digest, 32 lowercase hex digits>   (n lines)
 *   end
 * Decimal numbers have no sign and no leading zeros; anything else is
 * malformed, and a malformed manifest fails the attempt on every reader.
 *
 * Readers (rollout nodes) never share memory with the training side: each
 * node has OBJ_FLOWS download threads that list the attempt's prefix (when
 * the directory notifies a publication, else by polling), fetch
 * visible payloads through the emulated link, verify them (header, digest,
 * tau, owner and id against the name) and queue them for recv, in discovery
 * order. Before the manifest exists a node trusts a verified object whose
 * header matches its name and the open attempt, which lets sync RL apply
 * payloads as they arrive (owners publish nothing that the manifest will not
 * list); once the manifest exists only listed objects with the listed length
 * and digest are delivered. An unlisted object is dropped and counted; one
 * already delivered fails the attempt on that node. A listed object that is
 * missing or corrupt OBJ_LISTED_WAIT_MS after the manifest appeared fails the
 * attempt with DCR_ETRANSPORT naming it, so no reader hangs on it. */
#include "transport-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/thread.h"
#include "dcr/trace.h"

/* Parallel downloads per rollout node, as an S3 client keeps several GETs in
 * flight. Each GET waits out the link's one-way latency (5 ms by default)
 * before its first byte, while one payload of our scaled runs moves in about
 * a millisecond, so a node needs about (latency + transfer) / transfer flows
 * to keep its link busy; with two it sat idle most of the time and its
 * downloads, not the uploads, set the pace. Large objects (the reference's)
 * are bandwidth-bound either way: the node's rate is shared by all flows. */
#define OBJ_FLOWS 8
/* Listing interval: from 1 ms right after something new appeared, doubling
 * to 8 ms while nothing changes (a LIST per node every 8 ms when idle). Where
 * the directory can notify (inotify), a node lists as soon as an object is
 * published, as an S3 client would on the bucket's event notifications, and
 * the interval only backs that up. */
#define OBJ_POLL_MIN_NS 1000000ull
#define OBJ_POLL_MAX_NS 8000000ull
/* How long a listed payload may stay missing or corrupt after the manifest
 * appeared. Every listed payload was stored before its manifest was written,
 * so this only absorbs a slow listing; then the attempt fails. */
#define OBJ_LISTED_WAIT_MS 1000
/* Reference objects: a checkpoint share is uploaded as objects of this size,
 * as a checkpoint is saved as many files. */
#define OBJ_REF_OBJECT ((size_t)8 << 20)
/* Bounds on a manifest, against a malformed one asking for unbounded memory. */
#define OBJ_MANIFEST_MAX_BYTES   ((size_t)64 << 20)
#define OBJ_MANIFEST_MAX_ENTRIES ((uint64_t)1 << 22)
#define OBJ_WHY                  192

typedef enum obj_state {
    OBJ_PENDING,  /* visible (or listed), not fetched yet */
    OBJ_FETCHING, /* a download thread is on it */
    OBJ_READY,    /* verified, queued for recv */
    OBJ_HANDED,   /* returned by recv */
    OBJ_BAD,      /* failed verification; retried only if a new version appears */
    OBJ_GONE,     /* not visible */
    OBJ_UNLISTED, /* the manifest does not list it: never delivered */
} obj_state_t;

typedef struct obj_entry {
    uint32_t owner;
    uint64_t id;
    obj_state_t state;
    bool listed;
    bool counted; /* already counted in rejected or dropped_stale by this node */
    bool seen;    /* in the latest listing */
    uint64_t want_len;
    uint8_t want_digest[16];
    uint64_t got_len; /* what was delivered (READY, HANDED) */
    uint8_t got_digest[16];
    ino_t bad_ino; /* the version that failed, so it is not fetched again */
    char why[OBJ_WHY];
} obj_entry_t;

/* A downloaded payload; the delivery handle. */
typedef struct obj_blob {
    uint32_t owner;
    uint64_t id;
    uint8_t digest[16];
    size_t len;
    uint8_t data[];
} obj_blob_t;

struct objstore;

typedef struct obj_node {
    struct objstore *s;
    int idx;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* download threads wait here */
    pthread_cond_t recv_cv; /* recv waits here */
    /* Bumped whenever the attempt changes: aborts downloads in progress and
     * makes their results void. */
    atomic_uint_fast64_t gen;
    bool open;
    bool quit;
    uint64_t tau;
    obj_entry_t *e;
    size_t n, cap;
    obj_blob_t **ready; /* FIFO of verified payloads, at most rcap */
    size_t rcount, rcap;
    size_t fetching;
    bool listing;
    bool changed; /* the watcher saw an object published since the last listing began */
    uint64_t next_list_ns, poll_ns;
    bool have_manifest;
    uint64_t manifest_ns;
    size_t listed, handed_listed;
    dcr_status_t err;
    char errmsg[512];
    pthread_t th[OBJ_FLOWS];
    int nth;
    /* Change notification: -1 where the directory cannot notify (polling only). */
    int notify_fd, notify_wd, quit_fd;
    pthread_t watcher;
    bool have_watcher;
} obj_node_t;

typedef struct objstore {
    dcr__tbase_t base;
    /* training side */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* inflight reached 0 */
    atomic_uint_fast64_t gen;
    bool open;
    bool have_dir; /* attempt-<tau> was created by us */
    uint64_t tau, last_tau;
    int inflight;
    dcr__ledger_t ledger;
    atomic_uint seq; /* temporary and reference names */
    /* rollout side */
    obj_node_t *nodes;
} objstore_t;

/* ---- files -------------------------------------------------------------- */

static void obj_attempt_dir(const objstore_t *s, uint64_t tau, char *out, size_t cap)
{
    snprintf(out, cap, "%s/attempt-%" PRIu64, s->base.dir, tau);
}

static void obj_payload_name(uint32_t owner, uint64_t id, char *out, size_t cap)
{
    snprintf(out, cap, "payload-%" PRIu32 "-%" PRIu64 ".dcrp", owner, id);
}

static dcr_status_t obj_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        return dcr_error_set(DCR_EINVAL, "objstore: path too long: %s", path);
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            return dcr_error_set(DCR_EIO, "objstore: cannot create directory %s: %s", buf,
                                 strerror(errno));
        }
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return dcr_error_set(DCR_EIO, "objstore: %s is not a directory", path);
    }
    return DCR_OK;
}

/* Removes every entry of the flat directory `dir`, then dir itself. */
static void obj_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        unlinkat(dirfd(d), de->d_name, 0);
    }
    closedir(d);
    rmdir(dir);
}

/* Writes buf[0, len) to a new temporary file in dir, paced by flow (NULL:
 * unpaced). tmp receives its path; the caller renames or unlinks it. */
static dcr_status_t obj_write_tmp(objstore_t *s, const char *dir, const char *name,
                                  const uint8_t *buf, size_t len, dcr__flow_t *flow, char *tmp,
                                  size_t cap)
{
    snprintf(tmp, cap, "%s/.tmp-%s-%d-%u", dir, name, (int)getpid(), atomic_fetch_add(&s->seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        return dcr_error_set(DCR_EIO, "objstore: cannot create %s: %s", tmp, strerror(errno));
    }
    dcr_status_t st = DCR_OK;
    for (size_t off = 0; off < len && st == DCR_OK;) {
        size_t n = len - off < DCR__LINK_CHUNK ? len - off : DCR__LINK_CHUNK;
        if (flow != NULL && dcr__flow_pace(flow, n) != DCR_OK) {
            st = dcr_error_set(DCR_ECLOSED,
                               "objstore: upload of %s stopped: the attempt was stopped", name);
            break;
        }
        ssize_t w = write(fd, buf + off, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            st = dcr_error_set(DCR_EIO, "objstore: writing %s: %s", tmp, strerror(errno));
        else
            off += (size_t)w;
    }
    if (close(fd) != 0 && st == DCR_OK) {
        st = dcr_error_set(DCR_EIO, "objstore: closing %s: %s", tmp, strerror(errno));
    }
    if (st != DCR_OK) unlink(tmp);
    return st;
}

static dcr_status_t obj_rename(const char *tmp, const char *dir, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (rename(tmp, path) != 0) {
        dcr_status_t st =
            dcr_error_set(DCR_EIO, "objstore: publishing %s: %s", path, strerror(errno));
        unlink(tmp);
        return st;
    }
    return DCR_OK;
}

/* Reads the file `path` of `len` bytes through flow into dst (NULL: into a
 * scratch chunk, for the reference). DCR_ECLOSED when the flow is cancelled. */
static dcr_status_t obj_read_paced(int fd, const char *path, uint8_t *dst, size_t len,
                                   dcr__flow_t *flow)
{
    uint8_t scratch[4096];
    for (size_t off = 0; off < len;) {
        size_t n = len - off < DCR__LINK_CHUNK ? len - off : DCR__LINK_CHUNK;
        if (dcr__flow_pace(flow, n) != DCR_OK) {
            return dcr_error_set(DCR_ECLOSED, "objstore: download of %s stopped", path);
        }
        for (size_t done = 0; done < n;) {
            size_t k = n - done;
            uint8_t *to = dst != NULL ? dst + off + done : scratch;
            if (dst == NULL && k > sizeof scratch) k = sizeof scratch;
            ssize_t r = pread(fd, to, k, (off_t)(off + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                return dcr_error_set(DCR_EIO, "objstore: reading %s at byte %zu: %s", path,
                                     off + done, r == 0 ? "file shrank" : strerror(errno));
            }
            done += (size_t)r;
        }
        off += n;
    }
    return DCR_OK;
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
        p != eol || n > OBJ_MANIFEST_MAX_ENTRIES) {
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

/* The manifest text for the ledger's entries; malloc'd, *len_p bytes. */
static char *obj_manifest_text(uint64_t tau, const dcr__ledger_entry_t *e, size_t n, size_t *len_p)
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

/* ---- rollout side: entries and the ready queue (node lock held) --------- */

static obj_entry_t *obj_find(obj_node_t *nd, uint32_t owner, uint64_t id)
{
    for (size_t i = 0; i < nd->n; i++) {
        if (nd->e[i].owner == owner && nd->e[i].id == id) return &nd->e[i];
    }
    return NULL;
}

static obj_entry_t *obj_add(obj_node_t *nd, uint32_t owner, uint64_t id)
{
    if (nd->n == nd->cap) {
        size_t cap = nd->cap ? 2 * nd->cap : 64;
        obj_entry_t *e = realloc(nd->e, cap * sizeof *e);
        if (e == NULL) return NULL;
        nd->e = e;
        nd->cap = cap;
    }
    obj_entry_t *e = &nd->e[nd->n++];
    *e = (obj_entry_t){.owner = owner, .id = id, .state = OBJ_PENDING};
    return e;
}

static void obj_fail(obj_node_t *nd, dcr_status_t st, const char *msg)
{
    if (nd->err != DCR_OK) return;
    nd->err = st;
    snprintf(nd->errmsg, sizeof nd->errmsg, "%s", msg);
    pthread_cond_broadcast(&nd->recv_cv);
}

static void obj_count(obj_node_t *nd, obj_entry_t *e, atomic_int_fast64_t *counter)
{
    if (e->counted) return;
    e->counted = true;
    atomic_fetch_add(counter, 1);
}

/* Takes the queued payload (owner, id) out of the ready queue and frees it. */
static void obj_unready(obj_node_t *nd, const obj_entry_t *e)
{
    for (size_t i = 0; i < nd->rcount; i++) {
        if (nd->ready[i]->owner != e->owner || nd->ready[i]->id != e->id) continue;
        free(nd->ready[i]);
        memmove(&nd->ready[i], &nd->ready[i + 1], (nd->rcount - i - 1) * sizeof *nd->ready);
        nd->rcount--;
        return;
    }
}

static bool obj_done(const obj_node_t *nd)
{
    return nd->have_manifest && nd->handed_listed == nd->listed;
}

/* Points the node's change notification at its open attempt's prefix (or at
 * nothing). The prefix exists: open_attempt creates it before nodes open. A
 * watch that cannot be added leaves the node polling. */
static void obj_watch(obj_node_t *nd, bool open)
{
    if (nd->notify_fd < 0) return;
    if (nd->notify_wd >= 0) inotify_rm_watch(nd->notify_fd, nd->notify_wd);
    nd->notify_wd = -1;
    if (!open) return;
    char dir[PATH_MAX];
    obj_attempt_dir(nd->s, nd->tau, dir, sizeof dir);
    nd->notify_wd = inotify_add_watch(nd->notify_fd, dir, IN_MOVED_TO);
}

/* Drops everything of the node's current attempt and opens `tau` (open) or
 * nothing. Queued payloads of the old attempt are counted as dropped. */
static void obj_node_reset(obj_node_t *nd, uint64_t tau, bool open)
{
    pthread_mutex_lock(&nd->mu);
    atomic_fetch_add(&nd->gen, 1);
    for (size_t i = 0; i < nd->rcount; i++) free(nd->ready[i]);
    atomic_fetch_add(&nd->s->base.count.dropped_stale, (int_fast64_t)nd->rcount);
    nd->rcount = 0;
    nd->n = 0;
    nd->have_manifest = false;
    nd->listed = nd->handed_listed = 0;
    nd->err = DCR_OK;
    nd->errmsg[0] = '\0';
    nd->tau = tau;
    nd->open = open;
    nd->poll_ns = OBJ_POLL_MIN_NS;
    nd->next_list_ns = 0;
    obj_watch(nd, open);
    pthread_cond_broadcast(&nd->work_cv);
    pthread_cond_broadcast(&nd->recv_cv);
    pthread_mutex_unlock(&nd->mu);
}

/* ---- rollout side: fetching one payload (no lock held) ------------------ */

typedef enum { FETCH_OK, FETCH_GONE, FETCH_BAD, FETCH_STALE, FETCH_ABORT } obj_fetch_kind_t;

typedef struct obj_fetch {
    /* what to fetch */
    uint64_t tau;
    uint32_t owner;
    uint64_t id;
    bool listed;
    uint64_t want_len;
    uint8_t want_digest[16];
    uint64_t gen0;
    /* outcome */
    obj_fetch_kind_t kind;
    obj_blob_t *blob;
    ino_t ino;
    char why[OBJ_WHY];
} obj_fetch_t;

static void obj_fetch_fail(obj_fetch_t *f, obj_fetch_kind_t kind, const char *why)
{
    f->kind = kind;
    snprintf(f->why, sizeof f->why, "%s", why);
    free(f->blob);
    f->blob = NULL;
}

/* Checks a downloaded payload against its name, the attempt and the manifest. */
static void obj_verify(obj_node_t *nd, obj_fetch_t *f)
{
    dcr_payload_header_t h;
    char why[OBJ_WHY];
    if (dcr_payload_verify(f->blob->data, f->blob->len, &nd->s->base.pub.payload_policy, &h) !=
        DCR_OK) {
        snprintf(why, sizeof why, "corrupt (%s)", dcr_error_detail());
        obj_fetch_fail(f, FETCH_BAD, why);
    } else if (h.tau != f->tau) {
        snprintf(why, sizeof why, "of attempt %" PRIu64 ", not %" PRIu64, h.tau, f->tau);
        obj_fetch_fail(f, FETCH_STALE, why);
    } else if (h.owner != f->owner || h.payload_id != f->id) {
        snprintf(why, sizeof why, "foreign (header names owner %" PRIu32 " payload %" PRIu64 ")",
                 h.owner, h.payload_id);
        obj_fetch_fail(f, FETCH_BAD, why);
    } else if (f->listed && memcmp(h.digest, f->want_digest, 16) != 0) {
        obj_fetch_fail(f, FETCH_BAD, "corrupt (digest differs from the manifest's)");
    } else {
        f->blob->owner = f->owner;
        f->blob->id = f->id;
        memcpy(f->blob->digest, h.digest, 16);
        f->kind = FETCH_OK;
    }
}

static void obj_fetch_run(obj_node_t *nd, obj_fetch_t *f)
{
    objstore_t *s = nd->s;
    char dir[PATH_MAX], name[64], path[PATH_MAX + 64], why[OBJ_WHY];
    if (f->owner >= (uint32_t)s->base.cfg.world) {
        return obj_fetch_fail(f, FETCH_BAD, "foreign (owner out of range)");
    }
    obj_attempt_dir(s, f->tau, dir, sizeof dir);
    obj_payload_name(f->owner, f->id, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof why, "missing (%s)", strerror(errno));
        return obj_fetch_fail(f, errno == ENOENT ? FETCH_GONE : FETCH_BAD, why);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) st.st_size = 0;
    f->ino = st.st_ino;
    uint64_t size = (uint64_t)st.st_size;
    if (size < DCR_CODEC_HEADER_SIZE || size > DCR__TRANSPORT_PAYLOAD_MAX ||
        (f->listed && size != f->want_len)) {
        close(fd);
        snprintf(why, sizeof why,
                 "truncated or oversized (%" PRIu64 " bytes, expected %s%" PRIu64 ")", size,
                 f->listed ? "" : "at least ", f->listed ? f->want_len : DCR_CODEC_HEADER_SIZE);
        return obj_fetch_fail(f, FETCH_BAD, why);
    }
    f->blob = malloc(sizeof *f->blob + size);
    if (f->blob == NULL) {
        close(fd);
        return obj_fetch_fail(f, FETCH_BAD, "not downloaded (out of memory)");
    }
    f->blob->len = (size_t)size;
    dcr__flow_t flow;
    dcr__flow_cross(&flow, s->base.links, -1, nd->idx, &nd->gen, f->gen0);
    dcr_status_t rst = obj_read_paced(fd, path, f->blob->data, (size_t)size, &flow);
    close(fd);
    if (rst == DCR_ECLOSED) return obj_fetch_fail(f, FETCH_ABORT, "aborted");
    atomic_fetch_add(&s->base.count.cross_bytes, (int_fast64_t)size);
    if (rst != DCR_OK) return obj_fetch_fail(f, FETCH_BAD, dcr_error_detail());
    obj_verify(nd, f);
}

/* Records a finished download (node lock held, attempt unchanged). */
static void obj_fetch_apply(obj_node_t *nd, obj_entry_t *e, obj_fetch_t *f)
{
    dcr__counters_t *c = &nd->s->base.count;
    if (f->kind == FETCH_OK && nd->have_manifest &&
        (!e->listed || f->blob->len != e->want_len ||
         memcmp(f->blob->digest, e->want_digest, 16))) {
        /* The manifest appeared while this download ran. */
        obj_fetch_fail(f, FETCH_BAD,
                       e->listed ? "corrupt (differs from the manifest)" : "unlisted");
    }
    switch (f->kind) {
    case FETCH_OK:
        e->got_len = f->blob->len;
        memcpy(e->got_digest, f->blob->digest, 16);
        nd->ready[nd->rcount++] = f->blob;
        f->blob = NULL;
        e->state = OBJ_READY;
        pthread_cond_broadcast(&nd->recv_cv);
        return;
    case FETCH_GONE:
        e->state = OBJ_GONE;
        break;
    case FETCH_ABORT:
        e->state = OBJ_PENDING;
        return;
    case FETCH_STALE:
    case FETCH_BAD:
        e->state = nd->have_manifest && !e->listed ? OBJ_UNLISTED : OBJ_BAD;
        e->bad_ino = f->ino;
        obj_count(nd, e, f->kind == FETCH_STALE ? &c->dropped_stale : &c->rejected);
        DCR_LOG_DEBUG("objstore: node %d: payload %" PRIu32 "-%" PRIu64 " not delivered: %s",
                      nd->idx, e->owner, e->id, f->why);
        break;
    }
    snprintf(e->why, sizeof e->why, "%s", f->why);
}

/* Downloads entry e (lock held on entry and exit, dropped meanwhile). */
static void obj_fetch_locked(obj_node_t *nd, obj_entry_t *e)
{
    obj_fetch_t f = {.tau = nd->tau,
                     .owner = e->owner,
                     .id = e->id,
                     .listed = e->listed,
                     .want_len = e->want_len,
                     .gen0 = atomic_load(&nd->gen)};
    memcpy(f.want_digest, e->want_digest, 16);
    e->state = OBJ_FETCHING;
    nd->fetching++;
    pthread_mutex_unlock(&nd->mu);
    /* The second half of the sending endpoint's transport interval (see
     * trace/bounds.c): recorded only when the payload ends up queued. */
    dcr_trace_span_t span = dcr_trace_begin(DCR_STAGE_FETCH, DCR_ACTOR_ENDPOINT, (int)f.owner);
    obj_fetch_run(nd, &f);
    pthread_mutex_lock(&nd->mu);
    nd->fetching--;
    pthread_cond_broadcast(&nd->work_cv);
    bool queued = false;
    if (atomic_load(&nd->gen) == f.gen0) {
        obj_fetch_apply(nd, obj_find(nd, f.owner, f.id), &f);
        queued = f.kind == FETCH_OK;
    }
    if (queued)
        dcr_trace_end(&span);
    else
        dcr_trace_cancel(&span);
    free(f.blob);
}

/* ---- rollout side: listing ---------------------------------------------- */

typedef struct obj_name {
    uint32_t owner;
    uint64_t id;
    ino_t ino;
} obj_name_t;

typedef struct obj_listing {
    obj_name_t *v;
    size_t n, cap;
    bool manifest; /* parsed below */
    dcr__ledger_entry_t *m;
    size_t mn;
    dcr_status_t merr;
    char merrmsg[512];
} obj_listing_t;

/* "payload-<owner>-<id>.dcrp" exactly as obj_payload_name writes it. */
static bool obj_parse_name(const char *s, uint32_t *owner, uint64_t *id)
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

static void obj_listing_add(obj_listing_t *L, uint32_t owner, uint64_t id, ino_t ino)
{
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 64;
        obj_name_t *v = realloc(L->v, cap * sizeof *v);
        if (v == NULL) return; /* seen on a later listing */
        L->v = v;
        L->cap = cap;
    }
    L->v[L->n++] = (obj_name_t){owner, id, ino};
}

static void obj_read_manifest(objstore_t *s, const char *dir, uint64_t tau, obj_listing_t *L)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    char *text = NULL;
    dcr_status_t err = DCR_OK;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > OBJ_MANIFEST_MAX_BYTES) {
        err = dcr_error_set(DCR_ETRANSPORT, "objstore: manifest %s: unreadable or above %zu bytes",
                            path, OBJ_MANIFEST_MAX_BYTES);
    } else if ((text = malloc((size_t)st.st_size + 1)) == NULL) {
        err = dcr_error_set(DCR_ENOMEM, "objstore: manifest %s", path);
    } else if (pread(fd, text, (size_t)st.st_size, 0) != (ssize_t)st.st_size) {
        err = dcr_error_set(DCR_ETRANSPORT, "objstore: manifest %s: short read", path);
    } else {
        err = dcr__manifest_parse(text, (size_t)st.st_size, path, tau, s->base.cfg.world, &L->m,
                                  &L->mn);
    }
    close(fd);
    free(text);
    L->manifest = true;
    L->merr = err;
    if (err != DCR_OK) snprintf(L->merrmsg, sizeof L->merrmsg, "%s", dcr_error_detail());
}

/* One LIST of the attempt's prefix, plus the manifest when still needed. */
static void obj_scan(objstore_t *s, uint64_t tau, bool need_manifest, obj_listing_t *L)
{
    char dir[PATH_MAX];
    obj_attempt_dir(s, tau, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint32_t owner;
        uint64_t id;
        if (obj_parse_name(de->d_name, &owner, &id)) obj_listing_add(L, owner, id, de->d_ino);
    }
    closedir(d);
    /* Read after the listing: every payload is stored before the manifest, so
     * a manifest seen now lists only objects that are already visible. */
    if (need_manifest) obj_read_manifest(s, dir, tau, L);
}

static void obj_apply_unlisted(obj_node_t *nd, obj_entry_t *e, const char *mpath)
{
    dcr__counters_t *c = &nd->s->base.count;
    char msg[512];
    switch (e->state) {
    case OBJ_HANDED:
        snprintf(msg, sizeof msg,
                 "objstore: rollout node %d: payload %" PRIu32 "-%" PRIu64
                 " was delivered before the manifest, but %s does not list it",
                 nd->idx, e->owner, e->id, mpath);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    case OBJ_FETCHING: /* obj_fetch_apply drops it */
        return;
    case OBJ_READY:
        obj_unready(nd, e);
        /* fallthrough */
    default:
        e->state = OBJ_UNLISTED;
        obj_count(nd, e, &c->rejected);
    }
}

/* A payload delivered or queued before the manifest differs from its entry. */
static void obj_mismatch(obj_node_t *nd, obj_entry_t *e, const char *mpath)
{
    char msg[512];
    if (e->state == OBJ_HANDED) {
        snprintf(msg, sizeof msg,
                 "objstore: rollout node %d: payload %" PRIu32 "-%" PRIu64
                 " was delivered before the manifest, but differs from its entry in %s",
                 nd->idx, e->owner, e->id, mpath);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    }
    obj_unready(nd, e);
    e->state = OBJ_BAD;
    snprintf(e->why, sizeof e->why, "corrupt (differs from the manifest)");
    obj_count(nd, e, &nd->s->base.count.rejected);
}

/* Binds the node's entries to the manifest's list. */
static void obj_apply_manifest(obj_node_t *nd, const obj_listing_t *L)
{
    char dir[PATH_MAX], mpath[PATH_MAX + 16];
    obj_attempt_dir(nd->s, nd->tau, dir, sizeof dir);
    snprintf(mpath, sizeof mpath, "%s/MANIFEST", dir);
    for (size_t i = 0; i < nd->n; i++) nd->e[i].listed = false;
    for (size_t i = 0; i < L->mn; i++) {
        const dcr__ledger_entry_t *m = &L->m[i];
        obj_entry_t *e = obj_find(nd, m->owner, m->id);
        if (e == NULL && (e = obj_add(nd, m->owner, m->id)) == NULL) {
            obj_fail(nd, DCR_ENOMEM, "objstore: out of memory while reading the manifest");
            return;
        }
        e->listed = true;
        e->want_len = m->len;
        memcpy(e->want_digest, m->digest, 16);
        bool got = e->state == OBJ_READY || e->state == OBJ_HANDED;
        if (got && (e->got_len != m->len || memcmp(e->got_digest, m->digest, 16) != 0)) {
            obj_mismatch(nd, e, mpath);
        }
    }
    for (size_t i = 0; i < nd->n; i++) {
        if (!nd->e[i].listed) obj_apply_unlisted(nd, &nd->e[i], mpath);
    }
    nd->have_manifest = true;
    nd->manifest_ns = dcr_clock_ns();
    nd->listed = L->mn;
    nd->handed_listed = 0;
    for (size_t i = 0; i < nd->n; i++) {
        if (nd->e[i].listed && nd->e[i].state == OBJ_HANDED) nd->handed_listed++;
    }
}

/* Merges a listing into the node's entries; true if anything new appeared. */
static bool obj_merge(obj_node_t *nd, const obj_listing_t *L)
{
    bool progress = false;
    for (size_t i = 0; i < nd->n; i++) nd->e[i].seen = false;
    for (size_t i = 0; i < L->n; i++) {
        obj_entry_t *e = obj_find(nd, L->v[i].owner, L->v[i].id);
        if (e == NULL) {
            if ((e = obj_add(nd, L->v[i].owner, L->v[i].id)) == NULL) continue;
            if (nd->have_manifest) obj_apply_unlisted(nd, e, "the manifest");
            progress = true;
        }
        e->seen = true;
        if (e->state == OBJ_GONE || (e->state == OBJ_BAD && e->bad_ino != L->v[i].ino)) {
            e->state = OBJ_PENDING; /* appeared, or replaced by a new version */
            progress = true;
        }
    }
    if (L->manifest && L->merr != DCR_OK)
        obj_fail(nd, L->merr, L->merrmsg);
    else if (L->manifest && !nd->have_manifest) {
        obj_apply_manifest(nd, L);
        progress = true;
    }
    for (size_t i = 0; i < nd->n; i++) {
        if (!nd->e[i].seen && nd->e[i].state == OBJ_PENDING && nd->have_manifest) {
            nd->e[i].state = OBJ_GONE;
            snprintf(nd->e[i].why, sizeof nd->e[i].why, "missing");
        }
    }
    return progress;
}

/* Fails the attempt when a listed payload stayed missing or corrupt too long. */
static void obj_check_deadline(obj_node_t *nd)
{
    if (!nd->have_manifest || nd->err != DCR_OK) return;
    if (dcr_clock_ns() < nd->manifest_ns + (uint64_t)OBJ_LISTED_WAIT_MS * 1000000ull) return;
    for (size_t i = 0; i < nd->n; i++) {
        obj_entry_t *e = &nd->e[i];
        if (!e->listed || (e->state != OBJ_BAD && e->state != OBJ_GONE)) continue;
        char dir[PATH_MAX], name[64], msg[PATH_MAX + 512];
        obj_attempt_dir(nd->s, nd->tau, dir, sizeof dir);
        obj_payload_name(e->owner, e->id, name, sizeof name);
        snprintf(
            msg, sizeof msg,
            "objstore: rollout node %d: payload %s/%s listed in the manifest is %s %d ms after "
            "the manifest appeared",
            nd->idx, dir, name, e->why[0] ? e->why : "missing", OBJ_LISTED_WAIT_MS);
        obj_fail(nd, DCR_ETRANSPORT, msg);
        return;
    }
}

/* Lists the attempt's prefix (lock held on entry and exit, dropped meanwhile). */
static void obj_list_locked(obj_node_t *nd)
{
    uint64_t gen0 = atomic_load(&nd->gen), tau = nd->tau;
    bool need_manifest = !nd->have_manifest;
    nd->listing = true;
    nd->changed = false; /* a publication from now on needs another listing */
    pthread_mutex_unlock(&nd->mu);
    obj_listing_t L = {0};
    obj_scan(nd->s, tau, need_manifest, &L);
    pthread_mutex_lock(&nd->mu);
    nd->listing = false;
    if (atomic_load(&nd->gen) == gen0) {
        bool progress = obj_merge(nd, &L);
        nd->poll_ns = progress
                          ? OBJ_POLL_MIN_NS
                          : (nd->poll_ns * 2 > OBJ_POLL_MAX_NS ? OBJ_POLL_MAX_NS : nd->poll_ns * 2);
        nd->next_list_ns = dcr_clock_ns() + nd->poll_ns;
        obj_check_deadline(nd);
        pthread_cond_broadcast(&nd->work_cv);
        pthread_cond_broadcast(&nd->recv_cv);
    }
    free(L.v);
    free(L.m);
}

static obj_entry_t *obj_pick(obj_node_t *nd)
{
    if (nd->rcount + nd->fetching >= nd->rcap) return NULL;
    for (size_t i = 0; i < nd->n; i++) {
        obj_entry_t *e = &nd->e[i];
        if (e->state == OBJ_PENDING && (!nd->have_manifest || e->listed)) return e;
    }
    return NULL;
}

static void obj_wait_until(obj_node_t *nd, uint64_t deadline_ns)
{
    struct timespec ts = {(time_t)(deadline_ns / 1000000000ull),
                          (long)(deadline_ns % 1000000000ull)};
    pthread_cond_timedwait(&nd->work_cv, &nd->mu, &ts);
}

static void *obj_worker(void *arg)
{
    obj_node_t *nd = arg;
    pthread_mutex_lock(&nd->mu);
    while (!nd->quit) {
        if (!nd->open || nd->err != DCR_OK || obj_done(nd)) {
            pthread_cond_wait(&nd->work_cv, &nd->mu);
            continue;
        }
        obj_entry_t *e = obj_pick(nd);
        if (e != NULL) {
            obj_fetch_locked(nd, e);
            continue;
        }
        uint64_t now = dcr_clock_ns();
        if (!nd->listing && (nd->changed || now >= nd->next_list_ns)) {
            obj_list_locked(nd);
            continue;
        }
        obj_wait_until(nd, nd->listing ? now + OBJ_POLL_MAX_NS : nd->next_list_ns);
    }
    pthread_mutex_unlock(&nd->mu);
    return NULL;
}

/* Turns the directory's notifications into listings: the download threads
 * wait on a condition variable, which cannot also wait on a descriptor. */
static void *obj_watcher(void *arg)
{
    obj_node_t *nd = arg;
    struct pollfd p[2] = {{.fd = nd->notify_fd, .events = POLLIN},
                          {.fd = nd->quit_fd, .events = POLLIN}};
    _Alignas(struct inotify_event) char events[4096];
    for (;;) {
        if (poll(p, 2, -1) < 0 && errno != EINTR) break;
        if (p[1].revents != 0) break;
        if (p[0].revents == 0) continue;
        while (read(nd->notify_fd, events, sizeof events) > 0) {
        }
        pthread_mutex_lock(&nd->mu);
        nd->changed = true;
        pthread_cond_broadcast(&nd->work_cv);
        pthread_mutex_unlock(&nd->mu);
    }
    return NULL;
}

/* Starts the node's change notification; without it the node only polls. */
static void obj_notify_init(obj_node_t *nd)
{
    nd->notify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    nd->quit_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nd->notify_fd >= 0 && nd->quit_fd >= 0 &&
        dcr_thread_start(&nd->watcher, DCR_THREAD_TRANSPORT, obj_watcher, nd, "dcr-list-%d",
                         nd->idx) == 0) {
        nd->have_watcher = true;
        return;
    }
    DCR_LOG_DEBUG("objstore: node %d lists by polling only (no change notification)", nd->idx);
    if (nd->notify_fd >= 0) close(nd->notify_fd);
    if (nd->quit_fd >= 0) close(nd->quit_fd);
    nd->notify_fd = nd->quit_fd = -1;
}

static void obj_notify_fini(obj_node_t *nd)
{
    if (nd->have_watcher) {
        uint64_t one = 1;
        ssize_t w = write(nd->quit_fd, &one, sizeof one); /* a fresh eventfd takes it */
        (void)w;
        pthread_join(nd->watcher, NULL);
        nd->have_watcher = false;
    }
    if (nd->notify_fd >= 0) close(nd->notify_fd);
    if (nd->quit_fd >= 0) close(nd->quit_fd);
    nd->notify_fd = nd->quit_fd = -1;
}

/* ---- rollout side: setup ------------------------------------------------ */

static dcr_status_t obj_node_init(objstore_t *s, obj_node_t *nd, int idx)
{
    nd->s = s;
    nd->idx = idx;
    nd->notify_fd = nd->notify_wd = nd->quit_fd = -1;
    nd->rcap = s->base.cfg.queue_payloads;
    nd->ready = calloc(nd->rcap, sizeof *nd->ready);
    if (nd->ready == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: node %d queue", idx);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&nd->mu, NULL);
    pthread_cond_init(&nd->work_cv, &attr);
    pthread_cond_init(&nd->recv_cv, &attr);
    pthread_condattr_destroy(&attr);
    obj_notify_init(nd);
    for (int i = 0; i < OBJ_FLOWS; i++) {
        if (dcr_thread_start(&nd->th[i], DCR_THREAD_TRANSPORT, obj_worker, nd, "dcr-get-%d-%d", idx,
                             i) != 0) {
            return dcr_error_set(DCR_ENOMEM, "objstore: cannot start download thread of node %d",
                                 idx);
        }
        nd->nth++;
    }
    return DCR_OK;
}

static void obj_node_fini(obj_node_t *nd)
{
    if (nd->s == NULL) return;
    pthread_mutex_lock(&nd->mu);
    nd->quit = true;
    atomic_fetch_add(&nd->gen, 1);
    pthread_cond_broadcast(&nd->work_cv);
    pthread_mutex_unlock(&nd->mu);
    for (int i = 0; i < nd->nth; i++) pthread_join(nd->th[i], NULL);
    obj_notify_fini(nd);
    for (size_t i = 0; i < nd->rcount; i++) free(nd->ready[i]);
    free(nd->ready);
    free(nd->e);
    pthread_cond_destroy(&nd->work_cv);
    pthread_cond_destroy(&nd->recv_cv);
    pthread_mutex_destroy(&nd->mu);
}

/* ---- training side ------------------------------------------------------ */

/* Closes the training side's attempt; returns once no upload or manifest
 * write of it can still be published (lock not held). */
static void obj_train_stop(objstore_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->open = false;
    atomic_fetch_add(&s->gen, 1);
    while (s->inflight > 0) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void obj_inflight_done(objstore_t *s)
{
    s->inflight--;
    if (s->inflight == 0) pthread_cond_broadcast(&s->cv);
}

static dcr_status_t obj_send(dcr_transport_t *t, int owner, uint64_t payload_id, const uint8_t *buf,
                             size_t len)
{
    objstore_t *s = (objstore_t *)t;
    dcr_payload_header_t h;
    pthread_mutex_lock(&s->mu);
    if (!s->open) {
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_ECLOSED,
                             "objstore: owner %d payload %" PRIu64 " not sent: no attempt is open",
                             owner, payload_id);
    }
    uint64_t tau = s->tau, gen0 = atomic_load(&s->gen);
    dcr_status_t st = dcr__payload_check_send(&s->base, tau, owner, payload_id, buf, len, &h);
    if (st == DCR_OK) st = dcr__ledger_check(&s->ledger, tau, owner, payload_id);
    if (st != DCR_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    s->inflight++;
    pthread_mutex_unlock(&s->mu);

    char dir[PATH_MAX], name[64], tmp[PATH_MAX + 128];
    obj_attempt_dir(s, tau, dir, sizeof dir);
    obj_payload_name((uint32_t)owner, payload_id, name, sizeof name);
    dcr__flow_t flow;
    dcr__flow_cross(&flow, s->base.links, dcr__tbase_train_node(&s->base, owner), -1, &s->gen,
                    gen0);
    st = obj_write_tmp(s, dir, name, buf, len, &flow, tmp, sizeof tmp);

    /* Publish under the lock, so stop_and_wait cannot return between the
     * check and the rename: after it returns, nothing of the attempt appears. */
    pthread_mutex_lock(&s->mu);
    if (st == DCR_OK && atomic_load(&s->gen) != gen0) {
        unlink(tmp);
        st = dcr_error_set(DCR_ECLOSED,
                           "objstore: owner %d payload %" PRIu64 " not stored: attempt %" PRIu64
                           " was stopped",
                           owner, payload_id, tau);
    }
    if (st == DCR_OK) st = obj_rename(tmp, dir, name);
    if (st == DCR_OK && (st = dcr__ledger_add(&s->ledger, owner, &h, len)) != DCR_OK) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        unlink(path);
    }
    obj_inflight_done(s);
    pthread_mutex_unlock(&s->mu);
    if (st != DCR_OK) return st;
    atomic_fetch_add(&s->base.count.payload_bytes, (int_fast64_t)len);
    atomic_fetch_add(&s->base.count.cross_bytes, (int_fast64_t)len);
    return DCR_OK;
}

/* Writes the attempt's manifest (the last owner's finish). */
static dcr_status_t obj_write_manifest(objstore_t *s, uint64_t tau, uint64_t gen0,
                                       const dcr__ledger_entry_t *e, size_t n)
{
    size_t len;
    char *text = obj_manifest_text(tau, e, n, &len);
    if (text == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: manifest of %zu payloads", n);
    char dir[PATH_MAX], tmp[PATH_MAX + 128];
    obj_attempt_dir(s, tau, dir, sizeof dir);
    dcr_status_t st =
        obj_write_tmp(s, dir, "MANIFEST", (const uint8_t *)text, len, NULL, tmp, sizeof tmp);
    free(text);
    pthread_mutex_lock(&s->mu);
    if (st == DCR_OK && atomic_load(&s->gen) != gen0) {
        unlink(tmp);
        st = dcr_error_set(DCR_ECLOSED,
                           "objstore: manifest of attempt %" PRIu64 " not stored: stopped", tau);
    }
    if (st == DCR_OK) st = obj_rename(tmp, dir, "MANIFEST");
    obj_inflight_done(s);
    pthread_mutex_unlock(&s->mu);
    return st;
}

static dcr_status_t obj_finish(dcr_transport_t *t, int owner, uint64_t npayloads)
{
    objstore_t *s = (objstore_t *)t;
    bool all = false;
    pthread_mutex_lock(&s->mu);
    if (!s->open) {
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_ECLOSED, "objstore: owner %d cannot finish: no attempt is open",
                             owner);
    }
    uint64_t tau = s->tau, gen0 = atomic_load(&s->gen);
    dcr_status_t st = dcr__ledger_finish(&s->ledger, tau, owner, npayloads, &all);
    dcr__ledger_entry_t *copy = NULL;
    size_t n = s->ledger.n;
    if (st == DCR_OK && all) {
        copy = malloc((n ? n : 1) * sizeof *copy);
        if (copy == NULL)
            st = dcr_error_set(DCR_ENOMEM, "objstore: manifest of %zu payloads", n);
        else if (n > 0)
            memcpy(copy, s->ledger.e, n * sizeof *copy);
    }
    if (copy != NULL) s->inflight++;
    pthread_mutex_unlock(&s->mu);
    if (copy == NULL) return st;
    st = obj_write_manifest(s, tau, gen0, copy, n);
    free(copy);
    return st;
}

/* ---- attempts ----------------------------------------------------------- */

static dcr_status_t obj_open_attempt(dcr_transport_t *t, uint64_t tau)
{
    objstore_t *s = (objstore_t *)t;
    pthread_mutex_lock(&s->mu);
    if (tau <= s->last_tau) {
        uint64_t last = s->last_tau;
        pthread_mutex_unlock(&s->mu);
        return dcr_error_set(DCR_EINVAL,
                             "objstore: attempt %" PRIu64 " is not newer than attempt %" PRIu64,
                             tau, last);
    }
    s->last_tau = tau;
    pthread_mutex_unlock(&s->mu);
    obj_train_stop(s);
    for (int i = 0; i < s->base.cfg.rollout_nodes; i++) obj_node_reset(&s->nodes[i], 0, false);

    char dir[PATH_MAX];
    if (s->have_dir) {
        /* The replaced attempt can no longer publish or deliver anything. */
        obj_attempt_dir(s, s->tau, dir, sizeof dir);
        obj_remove_dir(dir);
        s->have_dir = false;
    }
    obj_attempt_dir(s, tau, dir, sizeof dir);
    obj_remove_dir(dir); /* leftovers of an earlier run that used the same tau */
    DCR_CHECK(obj_mkdirs(dir));
    s->have_dir = true;

    pthread_mutex_lock(&s->mu);
    s->tau = tau;
    dcr__ledger_reset(&s->ledger);
    s->open = true;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->base.cfg.rollout_nodes; i++) obj_node_reset(&s->nodes[i], tau, true);
    return DCR_OK;
}

static dcr_status_t obj_stop_and_wait(dcr_transport_t *t)
{
    objstore_t *s = (objstore_t *)t;
    obj_train_stop(s);
    for (int i = 0; i < s->base.cfg.rollout_nodes; i++) {
        obj_node_t *nd = &s->nodes[i];
        pthread_mutex_lock(&nd->mu);
        uint64_t tau = nd->tau;
        pthread_mutex_unlock(&nd->mu);
        obj_node_reset(nd, tau, false);
    }
    return DCR_OK;
}

/* ---- rollout side: the caller's end ------------------------------------- */

static struct timespec obj_deadline(int timeout_ms)
{
    uint64_t ns = dcr_clock_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    return (struct timespec){(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
}

/* Hands the oldest queued payload to the caller (node lock held). */
static void obj_pop(obj_node_t *nd, dcr_delivery_t *out_p)
{
    obj_blob_t *b = nd->ready[0];
    memmove(&nd->ready[0], &nd->ready[1], (nd->rcount - 1) * sizeof *nd->ready);
    nd->rcount--;
    obj_entry_t *e = obj_find(nd, b->owner, b->id);
    e->state = OBJ_HANDED;
    if (e->listed) nd->handed_listed++;
    pthread_cond_broadcast(&nd->work_cv);
    *out_p = (dcr_delivery_t){.data = b->data, .len = b->len, .handle = b};
}

static dcr_status_t obj_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p)
{
    objstore_t *s = (objstore_t *)t;
    obj_node_t *nd = &s->nodes[node];
    struct timespec deadline = obj_deadline(timeout_ms);
    dcr_status_t st;
    pthread_mutex_lock(&nd->mu);
    for (;;) {
        if (nd->err != DCR_OK) {
            char msg[sizeof nd->errmsg];
            memcpy(msg, nd->errmsg, sizeof msg);
            st = nd->err;
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(st, "%s", msg);
        }
        if (!nd->open) {
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(DCR_ECLOSED, "objstore: rollout node %d: no attempt is open",
                                 node);
        }
        if (nd->rcount > 0) {
            obj_pop(nd, out_p);
            pthread_mutex_unlock(&nd->mu);
            return DCR_OK;
        }
        if (obj_done(nd)) {
            uint64_t tau = nd->tau;
            size_t n = nd->listed;
            pthread_mutex_unlock(&nd->mu);
            return dcr_error_set(DCR_ECLOSED,
                                 "objstore: rollout node %d: attempt %" PRIu64
                                 " complete (%zu payloads)",
                                 node, tau, n);
        }
        if (timeout_ms == 0) break;
        if (timeout_ms < 0)
            pthread_cond_wait(&nd->recv_cv, &nd->mu);
        else if (pthread_cond_timedwait(&nd->recv_cv, &nd->mu, &deadline) == ETIMEDOUT) {
            if (nd->rcount == 0 && nd->err == DCR_OK && nd->open && !obj_done(nd)) break;
        }
    }
    pthread_mutex_unlock(&nd->mu);
    return dcr_error_set(DCR_EAGAIN, "objstore: rollout node %d: no payload within %d ms", node,
                         timeout_ms);
}

static void obj_release(dcr_transport_t *t, int node, dcr_delivery_t *d)
{
    free(d->handle);
}

/* ---- reference ---------------------------------------------------------- */

typedef struct obj_ref_obj {
    int owner;
    int k;
    size_t len;
} obj_ref_obj_t;

typedef struct obj_ref {
    objstore_t *s;
    char dir[PATH_MAX];
    obj_ref_obj_t *objs;
    size_t nobjs;
    const uint8_t *pattern;
    pthread_mutex_t mu;
    dcr_status_t st;
    char msg[512];
    atomic_size_t *next; /* [rollout_nodes] next object each node downloads */
} obj_ref_t;

typedef struct obj_ref_arg {
    obj_ref_t *r;
    int who; /* owner (upload) or rollout node (download) */
} obj_ref_arg_t;

static void obj_ref_fail(obj_ref_t *r, dcr_status_t st)
{
    pthread_mutex_lock(&r->mu);
    if (r->st == DCR_OK) {
        r->st = st;
        snprintf(r->msg, sizeof r->msg, "%s", dcr_error_detail());
    }
    pthread_mutex_unlock(&r->mu);
}

static void obj_ref_name(const obj_ref_obj_t *o, char *out, size_t cap)
{
    snprintf(out, cap, "ref-%d-%d.bin", o->owner, o->k);
}

static void *obj_ref_upload(void *arg)
{
    obj_ref_arg_t *a = arg;
    obj_ref_t *r = a->r;
    int node = dcr__tbase_train_node(&r->s->base, a->who);
    for (size_t i = 0; i < r->nobjs; i++) {
        if (r->objs[i].owner != a->who) continue;
        char name[64], tmp[PATH_MAX + 128];
        obj_ref_name(&r->objs[i], name, sizeof name);
        dcr__flow_t flow;
        dcr__flow_cross(&flow, r->s->base.links, node, -1, NULL, 0);
        dcr_status_t st =
            obj_write_tmp(r->s, r->dir, name, r->pattern, r->objs[i].len, &flow, tmp, sizeof tmp);
        if (st == DCR_OK) st = obj_rename(tmp, r->dir, name);
        if (st != DCR_OK) {
            obj_ref_fail(r, st);
            return NULL;
        }
    }
    return NULL;
}

static dcr_status_t obj_ref_get(obj_ref_t *r, int node, const obj_ref_obj_t *o)
{
    char name[64], path[PATH_MAX + 64];
    obj_ref_name(o, name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dcr_error_set(DCR_EIO, "objstore reference: %s: %s", path, strerror(errno));
    dcr__flow_t flow;
    dcr__flow_cross(&flow, r->s->base.links, -1, node, NULL, 0);
    dcr_status_t st = obj_read_paced(fd, path, NULL, o->len, &flow);
    close(fd);
    return st;
}

static void *obj_ref_download(void *arg)
{
    obj_ref_arg_t *a = arg;
    obj_ref_t *r = a->r;
    for (;;) {
        size_t i = atomic_fetch_add(&r->next[a->who], 1);
        if (i >= r->nobjs) return NULL;
        dcr_status_t st = obj_ref_get(r, a->who, &r->objs[i]);
        if (st != DCR_OK) {
            obj_ref_fail(r, st);
            return NULL;
        }
    }
}

/* Runs fn on n threads with args[i] and joins them. */
static dcr_status_t obj_ref_run(obj_ref_t *r, void *(*fn)(void *), obj_ref_arg_t *args, int n)
{
    pthread_t *th = calloc((size_t)n, sizeof *th);
    if (th == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: %d threads", n);
    int started = 0;
    while (started < n && dcr_thread_start(&th[started], DCR_THREAD_TRANSPORT, fn, &args[started],
                                           "dcr-ref-%d", started) == 0)
        started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(th);
    if (started < n)
        return dcr_error_set(DCR_ENOMEM, "objstore reference: cannot start %d threads", n);
    if (r->st != DCR_OK) return dcr_error_set(r->st, "%s", r->msg);
    return DCR_OK;
}

/* Splits each training node's share among its owners, in objects of at most
 * OBJ_REF_OBJECT bytes. */
static dcr_status_t obj_ref_plan(obj_ref_t *r, const int64_t *per_node_bytes)
{
    const dcr_transport_config_t *c = &r->s->base.cfg;
    int per = c->world / c->train_nodes;
    size_t cap = 0;
    for (int i = 0; i < c->train_nodes; i++)
        cap += (size_t)per_node_bytes[i] / OBJ_REF_OBJECT + (size_t)per;
    r->objs = calloc(cap ? cap : 1, sizeof *r->objs);
    if (r->objs == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: %zu objects", cap);
    for (int i = 0; i < c->train_nodes; i++) {
        for (int j = 0; j < per; j++) {
            uint64_t share = (uint64_t)per_node_bytes[i] / (uint64_t)per;
            if (j == 0) share += (uint64_t)per_node_bytes[i] % (uint64_t)per;
            for (int k = 0; share > 0; k++) {
                size_t n = share < OBJ_REF_OBJECT ? (size_t)share : OBJ_REF_OBJECT;
                r->objs[r->nobjs++] = (obj_ref_obj_t){i * per + j, k, n};
                share -= n;
            }
        }
    }
    return DCR_OK;
}

static dcr_status_t obj_ref_transfer(obj_ref_t *r, double *seconds_p)
{
    const dcr_transport_config_t *c = &r->s->base.cfg;
    int nup = c->world, ndown = c->rollout_nodes * OBJ_FLOWS;
    obj_ref_arg_t *args = calloc((size_t)(nup > ndown ? nup : ndown), sizeof *args);
    if (args == NULL) return dcr_error_set(DCR_ENOMEM, "objstore reference: thread arguments");
    double t0 = dcr_clock_s();
    for (int i = 0; i < nup; i++) args[i] = (obj_ref_arg_t){r, i};
    dcr_status_t st = obj_ref_run(r, obj_ref_upload, args, nup);
    /* Downloads start once the checkpoint is stored, as in the seed's reference. */
    for (int i = 0; i < ndown; i++) args[i] = (obj_ref_arg_t){r, i / OBJ_FLOWS};
    if (st == DCR_OK) st = obj_ref_run(r, obj_ref_download, args, ndown);
    double t1 = dcr_clock_s();
    free(args);
    if (st == DCR_OK) *seconds_p = t1 - t0;
    return st;
}

static dcr_status_t obj_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                  double *seconds_p)
{
    objstore_t *s = (objstore_t *)t;
    obj_ref_t r = {.s = s};
    pthread_mutex_init(&r.mu, NULL);
    snprintf(r.dir, sizeof r.dir, "%s/reference-%d-%u", s->base.dir, (int)getpid(),
             atomic_fetch_add(&s->seq, 1));
    uint8_t *pattern = malloc(OBJ_REF_OBJECT);
    r.next = calloc((size_t)s->base.cfg.rollout_nodes, sizeof *r.next);
    dcr_status_t st = pattern && r.next ? DCR_OK : dcr_error_set(DCR_ENOMEM, "objstore reference");
    if (st == DCR_OK) {
        for (size_t i = 0; i < OBJ_REF_OBJECT; i++) pattern[i] = (uint8_t)(i * 131u + 7u);
        r.pattern = pattern;
        st = obj_ref_plan(&r, per_node_bytes);
    }
    if (st == DCR_OK) st = obj_mkdirs(r.dir);
    if (st == DCR_OK) st = obj_ref_transfer(&r, seconds_p);
    obj_remove_dir(r.dir);
    free(r.objs);
    free(r.next);
    free(pattern);
    pthread_mutex_destroy(&r.mu);
    return st;
}

/* ---- lifetime ----------------------------------------------------------- */

static void obj_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p)
{
    dcr__tbase_counters(&((objstore_t *)t)->base, out_p);
}

static void obj_destroy(dcr_transport_t *t)
{
    objstore_t *s = (objstore_t *)t;
    if (s->nodes != NULL) obj_train_stop(s);
    for (int i = 0; s->nodes != NULL && i < s->base.cfg.rollout_nodes; i++)
        obj_node_fini(&s->nodes[i]);
    free(s->nodes);
    if (s->have_dir) {
        char dir[PATH_MAX];
        obj_attempt_dir(s, s->tau, dir, sizeof dir);
        obj_remove_dir(dir);
    }
    dcr__ledger_fini(&s->ledger);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    dcr__tbase_fini(&s->base);
    free(s);
}

static dcr_status_t obj_create(const dcr_transport_config_t *cfg, dcr_transport_t **out_p)
{
    objstore_t *s = calloc(1, sizeof *s);
    if (s == NULL) return dcr_error_set(DCR_ENOMEM, "objstore: allocation failed");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->base.pub.ops = &dcr__transport_objstore_ops;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr__tbase_init(&s->base, cfg), st, fail);
    DCR_CHECK_GOTO(dcr__ledger_init(&s->ledger, cfg->world), st, fail);
    DCR_CHECK_GOTO(obj_mkdirs(s->base.dir), st, fail);
    s->nodes = calloc((size_t)cfg->rollout_nodes, sizeof *s->nodes);
    if (s->nodes == NULL) {
        st = dcr_error_set(DCR_ENOMEM, "objstore: %d rollout nodes", cfg->rollout_nodes);
        goto fail;
    }
    for (int i = 0; i < cfg->rollout_nodes; i++)
        DCR_CHECK_GOTO(obj_node_init(s, &s->nodes[i], i), st, fail);
    *out_p = &s->base.pub;
    return DCR_OK;
fail:
    obj_destroy(&s->base.pub);
    return st;
}

const dcr_transport_ops_t dcr__transport_objstore_ops = {
    .name = "objstore",
    .create = obj_create,
    .open_attempt = obj_open_attempt,
    .send = obj_send,
    .finish = obj_finish,
    .recv = obj_recv,
    .release = obj_release,
    .stop_and_wait = obj_stop_and_wait,
    .reference = obj_reference,
    .counters = obj_counters,
    .destroy = obj_destroy,
};
