/* The relay-tree transport over TCP on loopback. Rollout node 0 is the root;
 * node i's children are i*fanout+1 .. i*fanout+fanout, a balanced tree. Each
 * owner endpoint has its own connection to the root (one flow per training
 * rank, as each rank streams its own payloads; the flows of one training node
 * share that node's emulated link). Every payload crosses the cluster
 * boundary once (V_cross = V_payload); the root and each inner node forward
 * it to every child over local links (local_bytes).
 *
 * Every hop acknowledges queueing, not application: a node reads a frame,
 * queues it for each child and for its own recv (bounded queues of
 * queue_payloads), and only then answers ACK. A sender waits for that answer
 * before its next frame (an owner: before its frame RELAY_WINDOW frames
 * later, so that its link's latency is paid once per stream, not once per
 * payload), so a slow receiver fills its queues, stops acknowledging, and
 * slows every hop above it down to the owners' send (back-pressure without
 * loss). The root verifies each payload (header, digest, tau, owner and id)
 * before queueing it and answers NACK with the reason otherwise, so a
 * corrupt or stale payload fails that owner's stream (that send, a later
 * one or its finish) and is never forwarded; inner nodes check headers
 * again before delivering.
 *
 * Each attempt gets a fresh tree (connections and threads), built by
 * open_attempt and torn down by the next open_attempt or stop_and_wait: no
 * byte of a replaced attempt can arrive on a newer attempt's connections, and
 * a connection lost in one attempt does not poison the retry. A lost
 * connection fails the whole attempt: every connection of the tree is shut
 * down, and every blocked or later send, finish and recv of that attempt
 * returns DCR_ETRANSPORT with the first failure's message (shared in-process
 * for diagnosis only; the protocol itself carries everything else).
 *
 * Across processes (cfg.relay_dir, DESIGN.md section 11) each process's
 * handle holds one part of the same tree: a rollout-node process is tree
 * node relay_node, listens on its own port for the whole run and publishes
 * it through the directory; an owner process holds the owners' ends. The
 * connections of an attempt are made by the side that sends upstream data
 * (a child to its parent, an owner to the root), each opening with a HELLO
 * frame naming the attempt and who connects; the listener's acceptor thread
 * hands it to that attempt's tree, or keeps it until the handle opens that
 * attempt (its peers open attempts in no particular order), or closes it
 * when the attempt is older. A peer that closes its end after the end of
 * the attempt went through is not a failure: processes tear their trees
 * down at their own pace.
 *
 * Wire format (relay-internal.h, relay_wire.c): one 48-byte header per
 * frame, then its bytes. DATA (a = owner, b = payload id, payload bytes),
 * FIN (a = payloads the owner sent), END (end of attempt), REF (reference
 * bytes), ACK, NACK (code = dcr_status_t, message bytes), HELLO (a =
 * DCR__RELAY_HELLO_OWNER or _NODE, b = the owner or tree node connecting;
 * no bytes).
 *
 * Retention (dcr/recovery.h, relay_retain.c): a root that retains keeps
 * a reference to every payload it verified, per attempt, and a HELLO of
 * kind DCR__RELAY_HELLO_STORE on its listener opens a reader's connection
 * to its retained versions instead of a tree link. */
#include "transport/relay-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/queue.h"
#include "dcr/thread.h"
#include "dcr/trace.h"

/* Reference frames: a checkpoint share streams as frames of this size, each
 * stored and forwarded whole at every hop, like a payload. */
#define RELAY_REF_FRAME ((size_t)4 << 20)
/* Across processes: how long a connection may take to reach its peer (the
 * peer's address published, its listener up) and to say hello. */
#define RELAY_DIAL_MS     30000
#define RELAY_HELLO_MS    5000
#define RELAY_CONNECT_MS  2000
#define RELAY_PENDING_MAX 4096
/* An owner writes up to this many DATA frames before it reads the root's
 * answer to the oldest: a stop-and-wait owner idles its link for a round
 * trip per frame (a latency each way), a pipelined one pays it once per
 * stream. Small, so back-pressure still reaches the owner within a few
 * frames of a full queue at the root. */
#define RELAY_WINDOW 4
/* A stream whose pacing fell this far behind the real clock went idle (its
 * owner had nothing to send): its next frame starts the link anew and pays
 * the one-way latency again. The link emulation's own slack. */
#define RELAY_IDLE_NS 2000000ull

/* ---- the tree of one attempt ------------------------------------------- */

struct relay;
struct relay_tree;

typedef struct relay_kid {
    struct relay_tree *tree;
    int from, node; /* parent and child */
    int fd;         /* parent's end of the link */
    dcr_queue_t *q; /* buffers waiting to go to the child */
    pthread_t th;
    bool started;
} relay_kid_t;

typedef struct relay_tnode {
    struct relay_tree *tree;
    int idx, parent;
    int up_fd; /* this node's end of the link from its parent; -1 at the root */
    pthread_t reader;
    bool started;
    relay_kid_t *kids;
    int nkids;
    dcr_queue_t *ready; /* payloads for recv; NULL in a reference tree */
    atomic_bool done;   /* recv returned the end of the attempt */
} relay_tnode_t;

typedef struct relay_olink {
    struct relay_tree *tree;
    int owner;
    int fd;      /* the owner's end */
    int root_fd; /* the root's end */
    pthread_t th;
    bool started;
    uint64_t queued; /* root: frames queued from this owner (tree lock) */
    bool fin;        /* root: the owner finished (tree lock) */
    /* The owner's side of a pipelined stream (its one sender thread only):
     * DATA frames written whose answers are not read yet, oldest first (ids
     * and submission times, a ring of RELAY_WINDOW), the first refusal read (later
     * sends and the finish return it), and the stream's pacing flow, kept
     * across frames while it keeps moving. */
    uint64_t inflight_id[RELAY_WINDOW];
    uint64_t inflight_t0[RELAY_WINDOW]; /* when its send was called (ns) */
    int inflight, oldest;
    dcr_status_t refused;
    char refused_why[DCR__RELAY_NACK_MAX + 64];
    dcr__flow_t flow;
    bool flowing;
} relay_olink_t;

typedef struct relay_tree {
    struct relay *r;
    bool reference;
    uint64_t tau;
    /* 0 while running, 1 once stopping or failed: cancels pacing. */
    atomic_uint_fast64_t cancel;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, failed;
    dcr_status_t fail_st;
    char why[512];
    int refs; /* callers inside send, finish, recv */
    int nfin; /* owners finished */
    int ends; /* reference: nodes that took the end marker */
    relay_tnode_t *nodes;
    int nnodes;
    relay_olink_t *owners;
    int nowners;
} relay_tree_t;

/* Across processes: a connection that said hello for an attempt this
 * handle has not opened yet. */
typedef struct relay_pending {
    int fd;
    uint64_t tau;
    int kind, id;
} relay_pending_t;

typedef struct relay {
    dcr__tbase_t base;
    pthread_mutex_t mu; /* the tree pointer, the training side's attempt, pending */
    relay_tree_t *tree;
    bool open;
    uint64_t tau, last_tau;
    bool opening; /* open_attempt(last_tau) is building its tree */
    dcr__ledger_t ledger;
    /* Across processes (cfg.relay_dir): the tree node this handle is (-1:
     * none), its listener and acceptor, connections waiting for their
     * attempt. */
    bool split;
    int self;
    dcr_relay_directory_t dir;
    char host[64];
    int lfd;
    pthread_t acceptor;
    bool accepting;
    relay_pending_t *pend;
    int npend;
    uint16_t port; /* the listener's (lfd >= 0) */
    /* The root's retained versions (dcr/recovery.h); .ctx NULL: none. Set
     * under mu once, before the first attempt. */
    dcr__relay_retention_t retention;
} relay_t;

/* ---- sockets ------------------------------------------------------------ */

/* Listens on host (an IPv4 address; NULL: loopback), port chosen by the
 * kernel. */
static dcr_status_t relay_listen_on(const char *host, int *fd_p, uint16_t *port_p)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (host != NULL && inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return dcr_error_set(DCR_EINVAL, "relay: listen address '%s': expected an IPv4 address",
                             host);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        dcr_status_t st = dcr_error_set(DCR_ETRANSPORT, "relay: cannot listen on %s: %s",
                                        host ? host : "127.0.0.1", strerror(errno));
        if (fd >= 0) close(fd);
        return st;
    }
    *fd_p = fd;
    *port_p = ntohs(a.sin_port);
    return DCR_OK;
}

static dcr_status_t relay_listen(int *fd_p, uint16_t *port_p)
{
    return relay_listen_on(NULL, fd_p, port_p);
}

/* One connection to the listener: *client_p is the connecting end. */
static dcr_status_t relay_connect(int lfd, uint16_t port, int *client_p, int *server_p)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a) != 0) {
        dcr_status_t st = dcr_error_set(DCR_ETRANSPORT, "relay: cannot connect to 127.0.0.1:%u: %s",
                                        port, strerror(errno));
        if (c >= 0) close(c);
        return st;
    }
    int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) {
        close(c);
        return dcr_error_set(DCR_ETRANSPORT, "relay: accept on 127.0.0.1:%u: %s", port,
                             strerror(errno));
    }
    dcr__relay_nodelay(c);
    dcr__relay_nodelay(s);
    *client_p = c;
    *server_p = s;
    return DCR_OK;
}

/* ---- across processes: finding and greeting peers ------------------------ */

static void relay_tree_fail(relay_tree_t *T, dcr_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Whether tree node i's threads and queues live in this handle. */
static bool relay_local(const relay_t *r, int i)
{
    return !r->split || r->self == i;
}

/* Connects to tree node `target` (its address from the directory) for
 * attempt T, says hello as (kind, id) and stores the connection in *fd_p
 * under the tree's lock, unless the tree was cancelled meanwhile. Retries
 * while the peer is not there yet, up to RELAY_DIAL_MS; a failure fails
 * the attempt. once: one try, and DCR_ENOTFOUND without failing anything
 * when the peer cannot be reached. */
static dcr_status_t relay_dial(relay_tree_t *T, int target, int kind, int id, int *fd_p, bool once)
{
    relay_t *r = T->r;
    double t0 = dcr_clock_s();
    char addr[256] = "";
    int e = 0, fd = -1;
    while (fd < 0) {
        if (atomic_load(&T->cancel) != 0) return DCR_ECLOSED;
        if (r->dir.lookup(r->dir.ctx, target, addr, sizeof addr) == DCR_OK)
            fd = dcr__relay_connect_addr(addr, RELAY_CONNECT_MS, &e);
        else
            e = ENOENT;
        if (fd >= 0) break;
        if (once) return DCR_ENOTFOUND;
        if ((dcr_clock_s() - t0) * 1000.0 > RELAY_DIAL_MS) {
            relay_tree_fail(T, DCR_ETRANSPORT,
                            "relay: %s %d cannot reach tree node %d%s%s within %d ms: %s",
                            kind == DCR__RELAY_HELLO_NODE ? "node" : "owner", id, target,
                            addr[0] ? " at " : " (no address published)", addr, RELAY_DIAL_MS,
                            e == ENOENT ? "not published" : strerror(e));
            return DCR_ETRANSPORT;
        }
        dcr_clock_nap_ns(20000000L);
    }
    dcr__relay_frame_t hello = {
        .type = DCR__F_HELLO, .tau = T->tau, .a = (uint64_t)kind, .b = (uint64_t)id, .len = 0};
    e = dcr__relay_frame_write(fd, &hello, NULL, NULL);
    pthread_mutex_lock(&T->mu);
    bool live = e == 0 && atomic_load(&T->cancel) == 0;
    if (live) *fd_p = fd;
    pthread_mutex_unlock(&T->mu);
    if (live) return DCR_OK;
    close(fd);
    if (e != 0)
        relay_tree_fail(T, DCR_ETRANSPORT, "relay: hello to tree node %d at %s failed: %s", target,
                        addr, dcr__relay_err_str(e));
    return e != 0 ? DCR_ETRANSPORT : DCR_ECLOSED;
}

/* ---- failure and teardown ------------------------------------------------ */

static void relay_shut(int fd)
{
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

/* Wakes every thread and caller of the tree: pacing stops, blocked socket
 * calls return, queues refuse pushes and pops. */
static void relay_tree_cancel(relay_tree_t *T)
{
    atomic_store(&T->cancel, 1);
    for (int i = 0; i < T->nowners; i++) {
        relay_shut(T->owners[i].fd);
        relay_shut(T->owners[i].root_fd);
    }
    for (int i = 0; i < T->nnodes; i++) {
        relay_tnode_t *nd = &T->nodes[i];
        relay_shut(nd->up_fd);
        if (nd->ready != NULL) dcr_queue_close(nd->ready);
        for (int k = 0; k < nd->nkids; k++) {
            relay_shut(nd->kids[k].fd);
            if (nd->kids[k].q != NULL) dcr_queue_close(nd->kids[k].q);
        }
    }
    pthread_mutex_lock(&T->mu);
    pthread_cond_broadcast(&T->cv);
    pthread_mutex_unlock(&T->mu);
}

/* Fails the attempt with the first failure's message; later ones are its
 * consequences and are dropped. */
static void relay_tree_fail(relay_tree_t *T, dcr_status_t st, const char *fmt, ...)
{
    pthread_mutex_lock(&T->mu);
    bool first = !T->stopping && !T->failed;
    if (first) {
        T->failed = true;
        T->fail_st = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(T->why, sizeof T->why, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&T->mu);
    if (!first) return;
    DCR_LOG_WARN("%s", T->why);
    relay_tree_cancel(T);
}

/* A connection error seen by a tree thread: a failure unless we are tearing
 * down (or already failed, of which it is a consequence). */
static void relay_link_lost(relay_tree_t *T, int from, int to, int e)
{
    if (atomic_load(&T->cancel) != 0) return;
    if (e == DCR__RELAY_PROTO) {
        relay_tree_fail(T, DCR_ETRANSPORT,
                        "relay: malformed frame on the link from node %d to node %d", from, to);
        return;
    }
    relay_tree_fail(T, DCR_ETRANSPORT, "relay: link from node %d to node %d lost (%s)", from, to,
                    dcr__relay_err_str(e));
}

/* The root's view of a lost owner connection. */
static void relay_owner_lost(relay_tree_t *T, int owner, int e)
{
    if (atomic_load(&T->cancel) != 0) return;
    relay_tree_fail(T, DCR_ETRANSPORT, "relay: connection from owner %d to the root lost (%s)",
                    owner, dcr__relay_err_str(e));
}

/* The status a caller gets once the tree is cancelled: the failure, or a
 * plain stop. */
static dcr_status_t relay_tree_status(relay_tree_t *T, const char *who)
{
    pthread_mutex_lock(&T->mu);
    bool failed = T->failed;
    dcr_status_t st = T->fail_st;
    char why[sizeof T->why];
    memcpy(why, T->why, sizeof why);
    pthread_mutex_unlock(&T->mu);
    if (failed) return dcr_error_set(st, "%s: attempt %" PRIu64 " failed: %s", who, T->tau, why);
    return dcr_error_set(DCR_ECLOSED, "%s: attempt %" PRIu64 " was stopped", who, T->tau);
}

static void relay_drain(dcr_queue_t *q, dcr__counters_t *c)
{
    void *item;
    while (q != NULL && dcr_queue_pop(q, 0, &item) == DCR_OK) {
        dcr__relay_buf_t *b = item;
        if (c != NULL && b->kind == DCR__BUF_DATA) atomic_fetch_add(&c->dropped_stale, 1);
        dcr__relay_buf_unref(b);
    }
}

static void relay_close(int fd)
{
    if (fd >= 0) close(fd);
}

/* Stops the tree, waits until no thread or caller uses it, and frees it. */
static void relay_tree_destroy(relay_tree_t *T)
{
    if (T == NULL) return;
    pthread_mutex_lock(&T->mu);
    if (!T->failed) T->stopping = true;
    pthread_mutex_unlock(&T->mu);
    relay_tree_cancel(T);
    for (int i = 0; i < T->nowners; i++) {
        if (T->owners[i].started) pthread_join(T->owners[i].th, NULL);
    }
    for (int i = 0; i < T->nnodes; i++) {
        relay_tnode_t *nd = &T->nodes[i];
        if (nd->started) pthread_join(nd->reader, NULL);
        for (int k = 0; k < nd->nkids; k++) {
            if (nd->kids[k].started) pthread_join(nd->kids[k].th, NULL);
        }
    }
    pthread_mutex_lock(&T->mu);
    while (T->refs > 0) pthread_cond_wait(&T->cv, &T->mu);
    pthread_mutex_unlock(&T->mu);
    dcr__counters_t *c = &T->r->base.count;
    for (int i = 0; i < T->nowners; i++) {
        relay_close(T->owners[i].fd);
        relay_close(T->owners[i].root_fd);
    }
    for (int i = 0; i < T->nnodes; i++) {
        relay_tnode_t *nd = &T->nodes[i];
        relay_close(nd->up_fd);
        relay_drain(nd->ready, c);
        dcr_queue_destroy(nd->ready);
        for (int k = 0; k < nd->nkids; k++) {
            relay_close(nd->kids[k].fd);
            relay_drain(nd->kids[k].q, NULL);
            dcr_queue_destroy(nd->kids[k].q);
        }
        free(nd->kids);
    }
    free(T->nodes);
    free(T->owners);
    pthread_cond_destroy(&T->cv);
    pthread_mutex_destroy(&T->mu);
    free(T);
}

/* ---- the rollout side's threads ------------------------------------------ */

/* Queues b for every child and for the node's own recv, then drops the
 * caller's reference. DCR_ECLOSED once the tree is cancelled. */
static dcr_status_t relay_deliver(relay_tnode_t *nd, dcr__relay_buf_t *b)
{
    relay_tree_t *T = nd->tree;
    dcr_status_t st = DCR_OK;
    for (int k = 0; k < nd->nkids && st == DCR_OK; k++) {
        dcr__relay_buf_ref(b);
        st = dcr_queue_push(nd->kids[k].q, b, -1);
        if (st != DCR_OK) dcr__relay_buf_unref(b);
    }
    if (st == DCR_OK && nd->ready != NULL && b->kind != DCR__BUF_REF) {
        dcr__relay_buf_ref(b);
        st = dcr_queue_push(nd->ready, b, -1);
        if (st != DCR_OK) dcr__relay_buf_unref(b);
    }
    if (st == DCR_OK && T->reference && b->kind == DCR__BUF_END) {
        pthread_mutex_lock(&T->mu);
        T->ends++;
        pthread_cond_broadcast(&T->cv);
        pthread_mutex_unlock(&T->mu);
    }
    dcr__relay_buf_unref(b);
    return st == DCR_OK ? DCR_OK : DCR_ECLOSED;
}

/* Verifies a received payload against its frame and the attempt; the
 * detail names what is wrong. DCR_ECLOSED: another attempt's. The root
 * checks the digest (bytes from across the boundary); inner hops check the
 * header only: their bytes are the root's verified copy over a reliable
 * local stream, and receivers check the digest again when they decode, so a
 * second hash per node would only spend the CPU the refit is measured on. */
static dcr_status_t relay_verify(const relay_tree_t *T, const dcr__relay_frame_t *f,
                                 const dcr__relay_buf_t *b, bool digest)
{
    dcr_payload_header_t h;
    DCR_CHECK(digest ? dcr_payload_verify(b->data, b->len, &T->r->base.pub.payload_policy, &h)
                     : dcr_payload_peek(b->data, b->len, false, &h));
    if (h.tau != T->tau) {
        return dcr_error_set(DCR_ECLOSED,
                             "payload of attempt %" PRIu64 " dropped: attempt %" PRIu64 " is open",
                             h.tau, T->tau);
    }
    if (h.owner != f->a || h.payload_id != f->b) {
        return dcr_error_set(DCR_EPAYLOAD,
                             "header names owner %" PRIu32 " payload %" PRIu64
                             ", the frame owner %" PRIu64 " payload %" PRIu64,
                             h.owner, h.payload_id, f->a, f->b);
    }
    return DCR_OK;
}

/* Reads a DATA/REF/END frame's body into a new buffer. 0 or a read error. */
static int relay_read_body(int fd, const dcr__relay_frame_t *f, dcr__relay_buf_t **out_p)
{
    dcr__relay_kind_t kind = f->type == DCR__F_DATA  ? DCR__BUF_DATA
                             : f->type == DCR__F_REF ? DCR__BUF_REF
                                                     : DCR__BUF_END;
    if (kind == DCR__BUF_END && f->len != 0) return DCR__RELAY_PROTO;
    dcr__relay_buf_t *b = dcr__relay_buf_new(kind, (size_t)f->len);
    if (b == NULL) return ENOMEM;
    b->owner = (uint32_t)f->a;
    b->id = f->b;
    int e = dcr__relay_read_all(fd, b->data, (size_t)f->len);
    if (e != 0) {
        dcr__relay_buf_unref(b);
        return e;
    }
    *out_p = b;
    return 0;
}

static void *relay_node_reader(void *arg)
{
    relay_tnode_t *nd = arg;
    relay_tree_t *T = nd->tree;
    /* Across processes this node connects to its parent itself. */
    if (nd->up_fd < 0 &&
        relay_dial(T, nd->parent, DCR__RELAY_HELLO_NODE, nd->idx, &nd->up_fd, false) != DCR_OK)
        return NULL;
    for (bool ended = false;;) {
        dcr__relay_frame_t f;
        dcr__relay_buf_t *b = NULL;
        int e = dcr__relay_frame_read(nd->up_fd, &f);
        if (e == DCR__RELAY_EOF && ended) return NULL; /* the parent's process moved on */
        if (e == 0 && (f.tau != T->tau || f.type == DCR__F_FIN || f.type == DCR__F_ACK ||
                       f.type == DCR__F_NACK || f.type == DCR__F_HELLO)) {
            e = DCR__RELAY_PROTO;
        }
        if (e == 0) e = relay_read_body(nd->up_fd, &f, &b);
        if (e != 0) {
            relay_link_lost(T, nd->parent, nd->idx, e);
            return NULL;
        }
        ended = b->kind == DCR__BUF_END;
        if (b->kind == DCR__BUF_DATA) {
            atomic_fetch_add(&T->r->base.count.local_bytes, (int_fast64_t)b->len);
            if (relay_verify(T, &f, b, false) != DCR_OK) {
                atomic_fetch_add(&T->r->base.count.rejected, 1);
                relay_tree_fail(T, DCR_ETRANSPORT,
                                "relay: node %d got a bad payload from node %d: %s", nd->idx,
                                nd->parent, dcr_error_detail());
                dcr__relay_buf_unref(b);
                return NULL;
            }
        }
        if (relay_deliver(nd, b) != DCR_OK) return NULL;
        e = dcr__relay_reply(nd->up_fd, T->tau, DCR_OK, "");
        if (e != 0) {
            relay_link_lost(T, nd->parent, nd->idx, e);
            return NULL;
        }
    }
}

static void *relay_forwarder(void *arg)
{
    relay_kid_t *k = arg;
    relay_tree_t *T = k->tree;
    /* Across processes the child connects when its process opens the
     * attempt; until then its queue fills and back-pressure holds. A child
     * that does not come within RELAY_DIAL_MS (its process died, or does
     * not take part) fails the attempt, so that the owners blocked behind
     * it learn of it. */
    double t0 = dcr_clock_s();
    bool late = false;
    pthread_mutex_lock(&T->mu);
    while (k->fd < 0 && atomic_load(&T->cancel) == 0 && !late) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* T->cv's clock */
        until.tv_nsec += 100000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&T->cv, &T->mu, &until);
        late = (dcr_clock_s() - t0) * 1000.0 > RELAY_DIAL_MS;
    }
    bool missing = k->fd < 0;
    pthread_mutex_unlock(&T->mu);
    if (late && missing)
        relay_tree_fail(T, DCR_ETRANSPORT,
                        "relay: tree node %d's child %d did not connect within %d ms", k->from,
                        k->node, RELAY_DIAL_MS);
    if (atomic_load(&T->cancel) != 0) return NULL;
    void *item;
    while (dcr_queue_pop(k->q, -1, &item) == DCR_OK) {
        dcr__relay_buf_t *b = item;
        bool end = b->kind == DCR__BUF_END;
        uint32_t type = b->kind == DCR__BUF_DATA  ? DCR__F_DATA
                        : b->kind == DCR__BUF_REF ? DCR__F_REF
                                                  : DCR__F_END;
        dcr__relay_frame_t f = {
            .type = type, .tau = T->tau, .a = b->owner, .b = b->id, .len = b->len};
        dcr__flow_t flow;
        dcr__flow_local(&flow, T->r->base.links, k->from, k->node, &T->cancel, 0);
        int e = dcr__relay_frame_write(k->fd, &f, b->data, &flow);
        dcr__relay_frame_t ack;
        if (e == 0) e = dcr__relay_frame_read(k->fd, &ack);
        if (e == 0 && ack.type != DCR__F_ACK) e = DCR__RELAY_PROTO;
        dcr__relay_buf_unref(b);
        if (e != 0) {
            relay_link_lost(T, k->from, k->node, e);
            return NULL;
        }
        if (end) return NULL; /* nothing follows the end of an attempt */
    }
    return NULL;
}

/* ---- the root's side of owner connections ------------------------------- */

/* A DATA or REF frame from owner o: verify, queue, count. *msg on refusal. */
static dcr_status_t relay_root_take(relay_olink_t *o, const dcr__relay_frame_t *f,
                                    dcr__relay_buf_t *b, char *msg, size_t cap)
{
    relay_tree_t *T = o->tree;
    dcr__counters_t *c = &T->r->base.count;
    pthread_mutex_lock(&T->mu);
    bool fin = o->fin;
    pthread_mutex_unlock(&T->mu);
    dcr_status_t st = DCR_OK;
    if (fin) {
        st = dcr_error_set(DCR_EINVAL, "owner %d already finished attempt %" PRIu64, o->owner,
                           T->tau);
    } else if (b->kind == DCR__BUF_DATA) {
        /* Across processes the sending owner's handle counts them. */
        if (!T->r->split) atomic_fetch_add(&c->cross_bytes, (int_fast64_t)b->len);
        if (f->a != (uint64_t)o->owner) {
            st = dcr_error_set(DCR_EPAYLOAD, "frame names owner %" PRIu64, f->a);
        } else {
            st = relay_verify(T, f, b, true);
        }
        if (st == DCR_ECLOSED)
            atomic_fetch_add(&c->dropped_stale, 1);
        else if (st != DCR_OK)
            dcr__tbase_refused(
                &T->r->base,
                dcr_payload_auth_failure(st, b->data, b->len, T->r->base.pub.payload_policy.key));
    }
    if (st != DCR_OK) {
        snprintf(msg, cap, "relay root refused owner %d payload %" PRIu64 ": %s", o->owner, f->b,
                 dcr_error_detail());
        dcr__relay_buf_unref(b);
        return st;
    }
    if (b->kind == DCR__BUF_DATA && T->r->retention.ctx != NULL)
        T->r->retention.hold(T->r->retention.ctx, T->tau, b);
    if (relay_deliver(&T->nodes[0], b) != DCR_OK) return DCR_ECLOSED;
    pthread_mutex_lock(&T->mu);
    o->queued++;
    pthread_mutex_unlock(&T->mu);
    return DCR_OK;
}

/* A FIN frame: the owner sent f->a frames. The last owner to finish queues
 * the end marker behind every payload. */
static dcr_status_t relay_root_fin(relay_olink_t *o, const dcr__relay_frame_t *f, char *msg,
                                   size_t cap)
{
    relay_tree_t *T = o->tree;
    pthread_mutex_lock(&T->mu);
    if (o->fin || f->a != o->queued) {
        snprintf(msg, cap,
                 "relay root: owner %d %s (it finished with %" PRIu64
                 " payloads, the root queued %" PRIu64 ")",
                 o->owner, o->fin ? "finished twice" : "finished with a wrong count", f->a,
                 o->queued);
        pthread_mutex_unlock(&T->mu);
        return DCR_EINVAL;
    }
    o->fin = true;
    bool last = ++T->nfin == T->nowners;
    pthread_mutex_unlock(&T->mu);
    if (!last) return DCR_OK;
    if (!T->reference && T->r->retention.ctx != NULL)
        T->r->retention.ended(T->r->retention.ctx, T->tau);
    dcr__relay_buf_t *end = dcr__relay_buf_new(DCR__BUF_END, 0);
    if (end == NULL) {
        snprintf(msg, cap, "relay root: out of memory");
        return DCR_ENOMEM;
    }
    return relay_deliver(&T->nodes[0], end);
}

static void *relay_owner_reader(void *arg)
{
    relay_olink_t *o = arg;
    relay_tree_t *T = o->tree;
    for (;;) {
        dcr__relay_frame_t f;
        dcr__relay_buf_t *b = NULL;
        char msg[DCR__RELAY_NACK_MAX] = "";
        int e = dcr__relay_frame_read(o->root_fd, &f);
        pthread_mutex_lock(&T->mu);
        bool fin = o->fin;
        pthread_mutex_unlock(&T->mu);
        if (e == DCR__RELAY_EOF && fin) return NULL; /* the owner's process moved on */
        if (e == 0 && (f.tau != T->tau || f.type == DCR__F_END || f.type == DCR__F_ACK ||
                       f.type == DCR__F_NACK || f.type == DCR__F_HELLO)) {
            e = DCR__RELAY_PROTO;
        }
        if (e == 0 && f.type != DCR__F_FIN) e = relay_read_body(o->root_fd, &f, &b);
        if (e != 0) {
            relay_owner_lost(T, o->owner, e);
            return NULL;
        }
        dcr_status_t st = f.type == DCR__F_FIN ? relay_root_fin(o, &f, msg, sizeof msg)
                                               : relay_root_take(o, &f, b, msg, sizeof msg);
        if (atomic_load(&T->cancel) != 0) return NULL;
        e = dcr__relay_reply(o->root_fd, T->tau, st, msg);
        if (e != 0) {
            relay_owner_lost(T, o->owner, e);
            return NULL;
        }
    }
}

/* ---- building a tree ------------------------------------------------------ */

/* Every field that teardown reads gets its "nothing here" value (fd -1,
 * queue NULL) before anything can fail, so a half-built tree tears down. */
static dcr_status_t relay_tree_alloc_node(relay_tree_t *T, int i)
{
    const dcr_transport_config_t *c = &T->r->base.cfg;
    relay_tnode_t *nd = &T->nodes[i];
    int first = i * c->fanout + 1;
    int nkids =
        first >= T->nnodes ? 0 : (T->nnodes - first < c->fanout ? T->nnodes - first : c->fanout);
    nd->kids = calloc((size_t)(nkids ? nkids : 1), sizeof *nd->kids);
    if (nd->kids == NULL) return dcr_error_set(DCR_ENOMEM, "relay: tree allocation failed");
    for (int k = 0; k < nkids; k++) {
        nd->kids[k] = (relay_kid_t){.tree = T, .from = i, .node = first + k, .fd = -1};
    }
    nd->nkids = nkids;
    if (!relay_local(T->r, i)) return DCR_OK; /* another process's node */
    for (int k = 0; k < nkids; k++) DCR_CHECK(dcr_queue_create(c->queue_payloads, &nd->kids[k].q));
    if (!T->reference) DCR_CHECK(dcr_queue_create(c->queue_payloads, &nd->ready));
    return DCR_OK;
}

static dcr_status_t relay_tree_alloc(relay_t *r, uint64_t tau, bool reference, relay_tree_t **out_p)
{
    const dcr_transport_config_t *c = &r->base.cfg;
    relay_tree_t *T = calloc(1, sizeof *T);
    if (T == NULL) return dcr_error_set(DCR_ENOMEM, "relay: tree allocation failed");
    *T = (relay_tree_t){.r = r, .reference = reference, .tau = tau};
    pthread_mutex_init(&T->mu, NULL);
    pthread_cond_init(&T->cv, NULL);
    *out_p = T;
    T->nodes = calloc((size_t)c->rollout_nodes, sizeof *T->nodes);
    T->owners = calloc((size_t)c->world, sizeof *T->owners);
    if (T->nodes == NULL || T->owners == NULL) {
        return dcr_error_set(DCR_ENOMEM, "relay: tree allocation failed");
    }
    T->nnodes = c->rollout_nodes;
    T->nowners = c->world;
    for (int i = 0; i < T->nowners; i++) {
        T->owners[i] = (relay_olink_t){.tree = T, .owner = i, .fd = -1, .root_fd = -1};
    }
    for (int i = 0; i < T->nnodes; i++) {
        T->nodes[i] = (relay_tnode_t){
            .tree = T, .idx = i, .parent = i ? (i - 1) / c->fanout : -1, .up_fd = -1};
    }
    for (int i = 0; i < T->nnodes; i++) DCR_CHECK(relay_tree_alloc_node(T, i));
    return DCR_OK;
}

static dcr_status_t relay_tree_connect(relay_tree_t *T)
{
    if (T->r->split) return DCR_OK; /* peers connect per attempt (relay_dial) */
    int lfd = -1;
    uint16_t port = 0;
    DCR_CHECK(relay_listen(&lfd, &port));
    dcr_status_t st = DCR_OK;
    for (int i = 0; i < T->nowners && st == DCR_OK; i++) {
        st = relay_connect(lfd, port, &T->owners[i].fd, &T->owners[i].root_fd);
    }
    int fanout = T->r->base.cfg.fanout;
    for (int i = 1; i < T->nnodes && st == DCR_OK; i++) {
        relay_tnode_t *nd = &T->nodes[i];
        relay_kid_t *k = &T->nodes[nd->parent].kids[i - (nd->parent * fanout + 1)];
        st = relay_connect(lfd, port, &k->fd, &nd->up_fd);
    }
    close(lfd);
    return st;
}

static dcr_status_t relay_tree_start(relay_tree_t *T)
{
    for (int i = 0; i < T->nnodes; i++) {
        relay_tnode_t *nd = &T->nodes[i];
        if (!relay_local(T->r, i)) continue;
        for (int k = 0; k < nd->nkids; k++) {
            if (dcr_thread_start(&nd->kids[k].th, DCR_THREAD_TRANSPORT, relay_forwarder,
                                 &nd->kids[k], "dcr-fwd-%d-%d", i, nd->kids[k].node) != 0)
                goto fail;
            nd->kids[k].started = true;
        }
        /* Across processes a node greets its parent at open when it can
         * (its reader keeps trying otherwise): an attempt opened only to be
         * stopped at once then still tells the parent, whose forwarder
         * fails on the closed connection instead of waiting for it. */
        if (i > 0 && T->r->split)
            relay_dial(T, nd->parent, DCR__RELAY_HELLO_NODE, i, &nd->up_fd, true);
        if (i > 0) {
            if (dcr_thread_start(&nd->reader, DCR_THREAD_TRANSPORT, relay_node_reader, nd,
                                 "dcr-relay-%d", i) != 0)
                goto fail;
            nd->started = true;
        }
    }
    /* Across processes the root starts an owner's reader when it connects. */
    for (int i = 0; i < T->nowners && !T->r->split; i++) {
        if (dcr_thread_start(&T->owners[i].th, DCR_THREAD_TRANSPORT, relay_owner_reader,
                             &T->owners[i], "dcr-root-in-%d", i) != 0)
            goto fail;
        T->owners[i].started = true;
    }
    return DCR_OK;
fail:
    return dcr_error_set(DCR_ENOMEM, "relay: cannot start the tree's threads");
}

static dcr_status_t relay_tree_create(relay_t *r, uint64_t tau, bool reference,
                                      relay_tree_t **out_p)
{
    relay_tree_t *T = NULL;
    dcr_status_t st = relay_tree_alloc(r, tau, reference, &T);
    if (st == DCR_OK) st = relay_tree_connect(T);
    if (st == DCR_OK) st = relay_tree_start(T);
    if (st != DCR_OK) {
        relay_tree_destroy(T);
        return st;
    }
    *out_p = T;
    return DCR_OK;
}

/* ---- the owners' end ------------------------------------------------------ */

/* Takes a reference on the open attempt's tree for a caller; NULL (and the
 * error set) when no attempt is open. */
static relay_tree_t *relay_hold(relay_tree_t *T)
{
    pthread_mutex_lock(&T->mu);
    T->refs++;
    pthread_mutex_unlock(&T->mu);
    return T;
}

static void relay_unhold(relay_tree_t *T)
{
    pthread_mutex_lock(&T->mu);
    if (--T->refs == 0) pthread_cond_broadcast(&T->cv);
    pthread_mutex_unlock(&T->mu);
}

/* Connects owner `owner` to the root at its first frame of the attempt
 * (across processes; in one process the tree made the connection). */
static dcr_status_t relay_owner_link(relay_tree_t *T, int owner, const char *what)
{
    relay_olink_t *o = &T->owners[owner];
    if (o->fd >= 0) return DCR_OK;
    char who[64];
    snprintf(who, sizeof who, "relay: owner %d %s", owner, what);
    if (relay_dial(T, 0, DCR__RELAY_HELLO_OWNER, owner, &o->fd, false) != DCR_OK)
        return relay_tree_status(T, who);
    return DCR_OK;
}

/* The owner's connection failed (e: an errno or DCR__RELAY_*): the attempt
 * fails, unless it was already being stopped. */
static dcr_status_t relay_owner_broken(relay_tree_t *T, int owner, int e, const char *what)
{
    char who[64];
    snprintf(who, sizeof who, "relay: owner %d %s", owner, what);
    if (atomic_load(&T->cancel) == 0) {
        relay_tree_fail(T, DCR_ETRANSPORT, "relay: owner %d lost its connection to the root (%s)",
                        owner, dcr__relay_err_str(e));
    }
    return relay_tree_status(T, who);
}

/* Reads the root's answer to the owner's oldest unanswered frame: DCR_OK
 * for ACK, the refusal's code and message for NACK. */
static dcr_status_t relay_owner_answer(relay_tree_t *T, int owner, const char *what)
{
    relay_olink_t *o = &T->owners[owner];
    dcr__relay_frame_t ans;
    int e = dcr__relay_frame_read(o->fd, &ans);
    if (e == 0 && ans.type == DCR__F_ACK) return DCR_OK;
    if (e == 0 && ans.type == DCR__F_NACK && ans.len < DCR__RELAY_NACK_MAX) {
        char msg[DCR__RELAY_NACK_MAX] = "";
        e = dcr__relay_read_all(o->fd, (uint8_t *)msg, (size_t)ans.len);
        dcr_status_t code =
            ans.code < 0 && ans.code > -200 ? (dcr_status_t)ans.code : DCR_ETRANSPORT;
        if (e == 0) return dcr_error_set(code, "%s", msg);
    }
    if (e == 0) e = DCR__RELAY_PROTO;
    return relay_owner_broken(T, owner, e, what);
}

/* One frame from owner `owner` to the root and its answer (stop and wait:
 * each frame is a transfer of its own and pays the link's latency). */
static dcr_status_t relay_owner_call(relay_tree_t *T, int owner, const dcr__relay_frame_t *f,
                                     const uint8_t *payload, const char *what)
{
    DCR_CHECK(relay_owner_link(T, owner, what));
    relay_olink_t *o = &T->owners[owner];
    dcr__flow_t flow;
    dcr__flow_cross(&flow, T->r->base.links, dcr__tbase_train_node(&T->r->base, owner), 0,
                    &T->cancel, 0);
    int e = dcr__relay_frame_write(o->fd, f, payload, &flow);
    if (e != 0) return relay_owner_broken(T, owner, e, what);
    return relay_owner_answer(T, owner, what);
}

/* ---- an owner's pipelined stream ------------------------------------------ */

/* The owner's first refusal, again: once the root refused one of its
 * payloads, every later send and the finish of the attempt fail with it. */
static dcr_status_t relay_owner_refused(const relay_olink_t *o)
{
    return dcr_error_set(o->refused, "%s", o->refused_why);
}

/* Reads the answer to the oldest frame in flight; a refusal (or a lost
 * connection) is kept as the owner's refusal. An accepted payload's
 * transport interval, from its send until the root's queueing
 * acknowledgment (DCR_STAGE_SEND, as the bounds define it), is recorded
 * here: the send itself returns before that answer. */
static dcr_status_t relay_owner_settle(relay_tree_t *T, relay_olink_t *o)
{
    char what[64];
    snprintf(what, sizeof what, "payload %" PRIu64, o->inflight_id[o->oldest]);
    dcr_status_t st = relay_owner_answer(T, o->owner, what);
    if (st == DCR_OK) {
        dcr_trace_record(DCR_STAGE_SEND, DCR_ACTOR_ENDPOINT, o->owner, o->inflight_t0[o->oldest],
                         dcr_clock_ns());
    }
    o->oldest = (o->oldest + 1) % RELAY_WINDOW;
    o->inflight--;
    if (st != DCR_OK && o->refused == DCR_OK) {
        o->refused = st;
        snprintf(o->refused_why, sizeof o->refused_why, "%s", dcr_error_detail());
    }
    return st;
}

static bool relay_readable(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* The stream's pacing: a stream that kept moving continues on its flow; one
 * that went idle starts a new transfer, which pays the latency again. */
static void relay_owner_pace_from_now(relay_tree_t *T, relay_olink_t *o)
{
    if (o->flowing && o->flow.next_ns + RELAY_IDLE_NS >= dcr_clock_ns()) return;
    dcr__flow_cross(&o->flow, T->r->base.links, dcr__tbase_train_node(&T->r->base, o->owner), 0,
                    &T->cancel, 0);
    o->flowing = true;
}

/* Takes the answers that already arrived (without waiting): a refusal
 * surfaces at the earliest call, and an acknowledgment is timed when it came. */
static dcr_status_t relay_owner_take_answers(relay_tree_t *T, relay_olink_t *o)
{
    while (o->inflight > 0 && relay_readable(o->fd))
        if (relay_owner_settle(T, o) != DCR_OK) return relay_owner_refused(o);
    return DCR_OK;
}

/* Writes one frame on the owner's stream without waiting for its answer,
 * after making room in the window; takes the answers that already arrived
 * before and after. t0: when the payload's send was called. */
static dcr_status_t relay_owner_stream(relay_tree_t *T, int owner, const dcr__relay_frame_t *f,
                                       const uint8_t *payload, const char *what, uint64_t t0)
{
    relay_olink_t *o = &T->owners[owner];
    if (o->refused != DCR_OK) return relay_owner_refused(o);
    DCR_CHECK(relay_owner_link(T, owner, what));
    DCR_CHECK(relay_owner_take_answers(T, o));
    while (o->inflight == RELAY_WINDOW)
        if (relay_owner_settle(T, o) != DCR_OK) return relay_owner_refused(o);
    relay_owner_pace_from_now(T, o);
    int e = dcr__relay_frame_write(o->fd, f, payload, &o->flow);
    if (e != 0) return relay_owner_broken(T, owner, e, what);
    int slot = (o->oldest + o->inflight) % RELAY_WINDOW;
    o->inflight_id[slot] = f->b;
    o->inflight_t0[slot] = t0;
    o->inflight++;
    return relay_owner_take_answers(T, o);
}

/* The owner's FIN, behind its payloads on the stream; then every answer,
 * the FIN's last. */
static dcr_status_t relay_owner_end(relay_tree_t *T, int owner, const dcr__relay_frame_t *fin)
{
    relay_olink_t *o = &T->owners[owner];
    if (o->refused != DCR_OK) return relay_owner_refused(o);
    DCR_CHECK(relay_owner_link(T, owner, "finish"));
    relay_owner_pace_from_now(T, o);
    int e = dcr__relay_frame_write(o->fd, fin, NULL, &o->flow);
    if (e != 0) return relay_owner_broken(T, owner, e, "finish");
    while (o->inflight > 0)
        if (relay_owner_settle(T, o) != DCR_OK) return relay_owner_refused(o);
    return relay_owner_answer(T, owner, "finish");
}

/* The open attempt's tree with a caller reference, under the checks every
 * owner call shares; *tau_p its attempt. */
static dcr_status_t relay_owner_enter(relay_t *r, int owner, const char *what, relay_tree_t **T_p,
                                      uint64_t *tau_p)
{
    if (!r->open || r->tree == NULL) {
        return dcr_error_set(DCR_ECLOSED, "relay: owner %d %s: no attempt is open", owner, what);
    }
    *T_p = relay_hold(r->tree);
    *tau_p = r->tau;
    return DCR_OK;
}

static dcr_status_t relay_send(dcr_transport_t *t, int owner, uint64_t payload_id,
                               const uint8_t *buf, size_t len)
{
    uint64_t t0 = dcr_clock_ns();
    relay_t *r = (relay_t *)t;
    relay_tree_t *T = NULL;
    uint64_t tau = 0;
    dcr_payload_header_t h;
    pthread_mutex_lock(&r->mu);
    dcr_status_t st = relay_owner_enter(r, owner, "cannot send", &T, &tau);
    if (st == DCR_OK) {
        st = dcr__payload_check_send(&r->base, tau, owner, payload_id, buf, len, &h);
        if (st == DCR_OK) st = dcr__ledger_check(&r->ledger, tau, owner, payload_id);
        if (st != DCR_OK) relay_unhold(T);
    }
    pthread_mutex_unlock(&r->mu);
    if (st != DCR_OK) return st;
    dcr__relay_frame_t f = {
        .type = DCR__F_DATA, .tau = tau, .a = (uint64_t)owner, .b = payload_id, .len = len};
    char what[64];
    snprintf(what, sizeof what, "payload %" PRIu64, payload_id);
    st = relay_owner_stream(T, owner, &f, buf, what, t0);
    if (st == DCR_OK) {
        /* On the connection: sent. A refusal by the root fails this owner's
         * later sends and its finish. */
        pthread_mutex_lock(&r->mu);
        if (r->tree == T) st = dcr__ledger_add(&r->ledger, owner, &h, len);
        pthread_mutex_unlock(&r->mu);
        atomic_fetch_add(&r->base.count.payload_bytes, (int_fast64_t)len);
        if (r->split) atomic_fetch_add(&r->base.count.cross_bytes, (int_fast64_t)len);
    }
    relay_unhold(T);
    return st;
}

static dcr_status_t relay_finish(dcr_transport_t *t, int owner, uint64_t npayloads)
{
    relay_t *r = (relay_t *)t;
    relay_tree_t *T = NULL;
    uint64_t tau = 0;
    bool all;
    pthread_mutex_lock(&r->mu);
    dcr_status_t st = relay_owner_enter(r, owner, "cannot finish", &T, &tau);
    if (st == DCR_OK) {
        st = dcr__ledger_finish(&r->ledger, tau, owner, npayloads, &all);
        if (st != DCR_OK) relay_unhold(T);
    }
    pthread_mutex_unlock(&r->mu);
    if (st != DCR_OK) return st;
    dcr__relay_frame_t f = {.type = DCR__F_FIN, .tau = tau, .a = npayloads};
    st = relay_owner_end(T, owner, &f);
    relay_unhold(T);
    return st;
}

/* ---- the rollout nodes' end ---------------------------------------------- */

static dcr_status_t relay_node_recv(relay_tree_t *T, int node, int timeout_ms,
                                    dcr_delivery_t *out_p)
{
    relay_tnode_t *nd = &T->nodes[node];
    char who[64];
    snprintf(who, sizeof who, "relay: rollout node %d", node);
    if (atomic_load(&T->cancel) != 0) return relay_tree_status(T, who);
    if (atomic_load(&nd->done)) {
        return dcr_error_set(DCR_ECLOSED, "%s: attempt %" PRIu64 " complete", who, T->tau);
    }
    void *item;
    dcr_status_t st = dcr_queue_pop(nd->ready, timeout_ms, &item);
    if (st == DCR_ETIMEOUT) {
        return dcr_error_set(DCR_ETIMEOUT, "%s: no payload within %d ms", who, timeout_ms);
    }
    if (st != DCR_OK) return relay_tree_status(T, who);
    dcr__relay_buf_t *b = item;
    if (atomic_load(&T->cancel) != 0) {
        dcr__relay_buf_unref(b);
        return relay_tree_status(T, who);
    }
    if (b->kind == DCR__BUF_END) {
        atomic_store(&nd->done, true);
        dcr__relay_buf_unref(b);
        return dcr_error_set(DCR_ECLOSED, "%s: attempt %" PRIu64 " complete", who, T->tau);
    }
    *out_p = (dcr_delivery_t){.data = b->data, .len = b->len, .handle = b};
    return DCR_OK;
}

static dcr_status_t relay_recv(dcr_transport_t *t, int node, int timeout_ms, dcr_delivery_t *out_p)
{
    relay_t *r = (relay_t *)t;
    if (!relay_local(r, node))
        return dcr_error_set(DCR_EINVAL, "relay: rollout node %d is not served by this handle (%s)",
                             node, r->self < 0 ? "it serves none" : "it serves one other");
    pthread_mutex_lock(&r->mu);
    relay_tree_t *T = r->tree != NULL ? relay_hold(r->tree) : NULL;
    pthread_mutex_unlock(&r->mu);
    if (T == NULL)
        return dcr_error_set(DCR_ECLOSED, "relay: rollout node %d: no attempt is open", node);
    dcr_status_t st = relay_node_recv(T, node, timeout_ms, out_p);
    relay_unhold(T);
    return st;
}

static void relay_release(dcr_transport_t *t, int node, dcr_delivery_t *d)
{
    dcr__relay_buf_unref(d->handle);
}

/* ---- across processes: accepting peers ---------------------------------- */

/* Hands a connection that said hello as (kind, id) to tree T (r->mu held):
 * an owner's to the root's reader for it, a child's to the forwarder that
 * waits for it. Closes it when the tree is ending or the place is taken. */
static void relay_adopt(relay_tree_t *T, int kind, int id, int fd)
{
    relay_t *r = T->r;
    pthread_mutex_lock(&T->mu);
    bool ok = !T->stopping && !T->failed && atomic_load(&T->cancel) == 0;
    if (ok && kind == DCR__RELAY_HELLO_OWNER) {
        relay_olink_t *o = &T->owners[id];
        ok = o->root_fd < 0 && !o->started;
        if (ok) {
            o->root_fd = fd;
            o->started = dcr_thread_start(&o->th, DCR_THREAD_TRANSPORT, relay_owner_reader, o,
                                          "dcr-root-in-%d", id) == 0;
            if (!o->started) o->root_fd = -1;
            ok = o->started;
        }
    } else if (ok) {
        relay_kid_t *k = &T->nodes[r->self].kids[id - (r->self * r->base.cfg.fanout + 1)];
        ok = k->fd < 0;
        if (ok) k->fd = fd;
        pthread_cond_broadcast(&T->cv);
    }
    pthread_mutex_unlock(&T->mu);
    if (!ok) close(fd);
}

/* A connection that said hello for attempt tau (r->mu held): to the open
 * tree of tau, kept for an attempt not opened yet (or being opened),
 * closed for an older or stopped one, so that its peer fails at once. */
static void relay_place(relay_t *r, int fd, uint64_t tau, int kind, int id)
{
    if (r->tree != NULL && r->tree->tau == tau) {
        relay_adopt(r->tree, kind, id, fd);
    } else if ((tau > r->last_tau || (tau == r->last_tau && r->opening)) &&
               r->npend < RELAY_PENDING_MAX) {
        r->pend[r->npend++] = (relay_pending_t){fd, tau, kind, id};
    } else {
        close(fd);
    }
}

/* Whether a hello names a peer this handle takes: an owner at the root, a
 * child of this node. */
static bool relay_hello_ok(const relay_t *r, const dcr__relay_frame_t *f)
{
    const dcr_transport_config_t *c = &r->base.cfg;
    if (f->type != DCR__F_HELLO || f->len != 0 || f->tau == 0) return false;
    if (f->a == DCR__RELAY_HELLO_OWNER) return r->self == 0 && f->b < (uint64_t)c->world;
    return f->a == DCR__RELAY_HELLO_NODE && f->b >= 1 && f->b < (uint64_t)c->rollout_nodes &&
           (int)((f->b - 1) / (uint64_t)c->fanout) == r->self;
}

/* A reader of the root's retained versions (relay-internal.h): served on a
 * thread of the retention's, or refused with the reason. True when f was
 * such a hello (fd taken). */
static bool relay_store_hello(relay_t *r, int fd, const dcr__relay_frame_t *f)
{
    if (f->type != DCR__F_HELLO || f->a != DCR__RELAY_HELLO_STORE || f->len != 0) return false;
    dcr__relay_nodelay(fd);
    pthread_mutex_lock(&r->mu);
    dcr__relay_retention_t R = r->retention;
    pthread_mutex_unlock(&r->mu);
    if (R.ctx != NULL) {
        R.serve(R.ctx, fd);
        return true;
    }
    char msg[128];
    snprintf(msg, sizeof msg,
             "relay tree node %d keeps no retained versions (only the root does, "
             "with --retain)",
             r->self);
    dcr__relay_reply(fd, 0, DCR_EUNSUPPORTED, msg);
    close(fd);
    return true;
}

static void relay_set_rcvtimeo(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* Accepts peers for the whole life of the handle; ends when destroy shuts
 * the listener down. A peer gets RELAY_HELLO_MS to say hello. */
static void *relay_acceptor(void *arg)
{
    relay_t *r = arg;
    for (;;) {
        int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            dcr_clock_nap_ns(10000000L);
            continue;
        }
        if (fd < 0) return NULL; /* shut down */
        relay_set_rcvtimeo(fd, RELAY_HELLO_MS);
        dcr__relay_frame_t f;
        int e = dcr__relay_frame_read(fd, &f);
        relay_set_rcvtimeo(fd, 0);
        if (e == 0 && relay_store_hello(r, fd, &f)) continue;
        if (e != 0 || !relay_hello_ok(r, &f)) {
            DCR_LOG_WARN("relay: tree node %d refused a connection: %s", r->self,
                         e != 0 ? dcr__relay_err_str(e) : "not a hello from its child or an owner");
            close(fd);
            continue;
        }
        dcr__relay_nodelay(fd);
        pthread_mutex_lock(&r->mu);
        relay_place(r, fd, f.tau, (int)f.a, (int)f.b);
        pthread_mutex_unlock(&r->mu);
    }
}

/* Connections kept for attempt tau go to its tree T; older ones are closed
 * (r->mu held). */
static void relay_adopt_pending(relay_t *r, relay_tree_t *T)
{
    int kept = 0;
    for (int i = 0; i < r->npend; i++) {
        relay_pending_t *p = &r->pend[i];
        if (p->tau == T->tau)
            relay_adopt(T, p->kind, p->id, p->fd);
        else if (p->tau < T->tau)
            close(p->fd);
        else
            r->pend[kept++] = *p;
    }
    r->npend = kept;
}

static dcr_status_t relay_accept_start(relay_t *r)
{
    if (dcr_thread_start(&r->acceptor, DCR_THREAD_TRANSPORT, relay_acceptor, r, "dcr-accept-%d",
                         r->self) != 0)
        return dcr_error_set(DCR_ENOMEM, "relay: cannot start the acceptor");
    r->accepting = true;
    return DCR_OK;
}

/* Across processes: listens, publishes this node's address, starts the
 * acceptor. */
static dcr_status_t relay_split_start(relay_t *r, const dcr_transport_config_t *cfg)
{
    r->split = true;
    r->dir = *cfg->relay_dir;
    r->self = cfg->relay_node;
    if (r->dir.publish == NULL || r->dir.lookup == NULL)
        return dcr_error_set(DCR_EINVAL, "relay: the directory needs publish and lookup");
    if (r->self < -1 || r->self >= cfg->rollout_nodes)
        return dcr_error_set(DCR_EINVAL, "relay: tree node %d: expected -1 (none) or 0..%d",
                             r->self, cfg->rollout_nodes - 1);
    snprintf(r->host, sizeof r->host, "%s", cfg->relay_host ? cfg->relay_host : "127.0.0.1");
    if (r->self < 0) return DCR_OK; /* owners and the coordinator accept nothing */
    r->pend = calloc(RELAY_PENDING_MAX, sizeof *r->pend);
    if (r->pend == NULL) return dcr_error_set(DCR_ENOMEM, "relay: pending connections");
    DCR_CHECK(relay_listen_on(r->host, &r->lfd, &r->port));
    char addr[128];
    snprintf(addr, sizeof addr, "%s:%u", r->host, r->port);
    dcr_status_t st = r->dir.publish(r->dir.ctx, r->self, addr);
    if (st != DCR_OK) {
        dcr_error_prefix("relay: publishing tree node %d at %s: ", r->self, addr);
        return st;
    }
    return relay_accept_start(r);
}

static void relay_split_stop(relay_t *r)
{
    if (r->lfd >= 0) shutdown(r->lfd, SHUT_RDWR);
    if (r->accepting) pthread_join(r->acceptor, NULL);
    r->accepting = false;
    if (r->lfd >= 0) close(r->lfd);
    r->lfd = -1;
    for (int i = 0; i < r->npend; i++) close(r->pend[i].fd);
    r->npend = 0;
    free(r->pend);
    r->pend = NULL;
}

/* ---- attempts ------------------------------------------------------------ */

/* Detaches the open attempt's tree (lock held by the caller's caller). */
static relay_tree_t *relay_detach(relay_t *r)
{
    pthread_mutex_lock(&r->mu);
    relay_tree_t *T = r->tree;
    r->tree = NULL;
    r->open = false;
    pthread_mutex_unlock(&r->mu);
    return T;
}

static dcr_status_t relay_open_attempt(dcr_transport_t *t, uint64_t tau)
{
    relay_t *r = (relay_t *)t;
    pthread_mutex_lock(&r->mu);
    if (tau <= r->last_tau) {
        uint64_t last = r->last_tau;
        pthread_mutex_unlock(&r->mu);
        return dcr_error_set(
            DCR_EINVAL, "relay: attempt %" PRIu64 " is not newer than attempt %" PRIu64, tau, last);
    }
    r->last_tau = tau;
    r->opening = true;
    pthread_mutex_unlock(&r->mu);
    relay_tree_destroy(relay_detach(r));
    relay_tree_t *T = NULL;
    dcr_status_t st = relay_tree_create(r, tau, false, &T);
    pthread_mutex_lock(&r->mu);
    r->opening = false;
    if (st == DCR_OK) {
        r->tree = T;
        r->tau = tau;
        dcr__ledger_reset(&r->ledger);
        r->open = true;
        if (r->split && r->self >= 0) relay_adopt_pending(r, T);
    }
    pthread_mutex_unlock(&r->mu);
    return st;
}

static void relay_stop_and_wait(dcr_transport_t *t)
{
    relay_tree_destroy(relay_detach((relay_t *)t));
}

/* ---- reference ------------------------------------------------------------ */

typedef struct relay_ref_arg {
    relay_tree_t *T;
    int owner;
    uint64_t bytes;
    const uint8_t *pattern;
    dcr_status_t st;
    char msg[512];
} relay_ref_arg_t;

static void *relay_ref_owner(void *arg)
{
    relay_ref_arg_t *a = arg;
    uint64_t frames = 0;
    dcr_status_t st = DCR_OK;
    for (uint64_t left = a->bytes; left > 0 && st == DCR_OK; frames++) {
        size_t n = left < RELAY_REF_FRAME ? (size_t)left : RELAY_REF_FRAME;
        dcr__relay_frame_t f = {.type = DCR__F_REF, .a = (uint64_t)a->owner, .len = n};
        st = relay_owner_call(a->T, a->owner, &f, a->pattern, "reference");
        left -= n;
    }
    dcr__relay_frame_t fin = {.type = DCR__F_FIN, .a = frames};
    if (st == DCR_OK) st = relay_owner_call(a->T, a->owner, &fin, NULL, "reference finish");
    a->st = st;
    if (st != DCR_OK) snprintf(a->msg, sizeof a->msg, "%s", dcr_error_detail());
    return NULL;
}

/* Streams every owner's share and waits until every node took the end. */
static dcr_status_t relay_ref_run(relay_tree_t *T, relay_ref_arg_t *args, pthread_t *th)
{
    int started = 0;
    while (started < T->nowners &&
           dcr_thread_start(&th[started], DCR_THREAD_TRANSPORT, relay_ref_owner, &args[started],
                            "dcr-ref-%d", started) == 0) {
        started++;
    }
    dcr_status_t st = started == T->nowners
                          ? DCR_OK
                          : dcr_error_set(DCR_ENOMEM, "relay reference: cannot start threads");
    if (st != DCR_OK) relay_tree_fail(T, st, "relay reference: cannot start threads");
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < started && st == DCR_OK; i++) {
        if (args[i].st != DCR_OK) st = dcr_error_set(args[i].st, "%s", args[i].msg);
    }
    if (st != DCR_OK) return st;
    pthread_mutex_lock(&T->mu);
    while (T->ends < T->nnodes && !T->failed) pthread_cond_wait(&T->cv, &T->mu);
    pthread_mutex_unlock(&T->mu);
    return atomic_load(&T->cancel) != 0 ? relay_tree_status(T, "relay reference") : DCR_OK;
}

static dcr_status_t relay_reference(dcr_transport_t *t, const int64_t *per_node_bytes,
                                    double *seconds_p)
{
    relay_t *r = (relay_t *)t;
    if (r->split)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "relay: the reference runs in a handle holding the whole tree, not "
                             "in one part of a tree across processes");
    const dcr_transport_config_t *c = &r->base.cfg;
    int per = c->world / c->train_nodes;
    relay_tree_t *T = NULL;
    relay_ref_arg_t *args = calloc((size_t)c->world, sizeof *args);
    pthread_t *th = calloc((size_t)c->world, sizeof *th);
    uint8_t *pattern = calloc(1, RELAY_REF_FRAME);
    dcr_status_t st = args && th && pattern ? DCR_OK : dcr_error_set(DCR_ENOMEM, "relay reference");
    if (st == DCR_OK) st = relay_tree_create(r, 0, true, &T);
    if (st == DCR_OK) {
        for (int o = 0; o < c->world; o++) {
            uint64_t node_bytes = (uint64_t)per_node_bytes[o / per];
            uint64_t share =
                node_bytes / (uint64_t)per + (o % per == 0 ? node_bytes % (uint64_t)per : 0);
            args[o] = (relay_ref_arg_t){.T = T, .owner = o, .bytes = share, .pattern = pattern};
        }
        double t0 = dcr_clock_s();
        st = relay_ref_run(T, args, th);
        if (st == DCR_OK) *seconds_p = dcr_clock_s() - t0;
    }
    relay_tree_destroy(T);
    free(pattern);
    free(th);
    free(args);
    return st;
}

/* ---- lifetime ------------------------------------------------------------- */

static void relay_counters(dcr_transport_t *t, dcr_transport_counters_t *out_p)
{
    dcr__tbase_counters(&((relay_t *)t)->base, out_p);
}

static void relay_destroy(dcr_transport_t *t)
{
    relay_t *r = (relay_t *)t;
    /* No connection can reach a tree once the acceptor has ended. */
    relay_split_stop(r);
    relay_tree_destroy(relay_detach(r));
    /* After the tree: its threads hold payloads. */
    if (r->retention.ctx != NULL) r->retention.destroy(r->retention.ctx);
    dcr__ledger_fini(&r->ledger);
    pthread_mutex_destroy(&r->mu);
    dcr__tbase_fini(&r->base);
    free(r);
}

static dcr_status_t relay_create(const dcr_transport_ops_t *self, const dcr_transport_config_t *cfg,
                                 dcr_transport_t **out_p)
{
    (void)self;
    relay_t *r = calloc(1, sizeof *r);
    if (r == NULL) return dcr_error_set(DCR_ENOMEM, "relay: allocation failed");
    pthread_mutex_init(&r->mu, NULL);
    r->base.pub.ops = &dcr__transport_relay_ops;
    r->lfd = -1;
    r->self = -1;
    dcr_status_t st = dcr__tbase_init(&r->base, cfg);
    if (st == DCR_OK) st = dcr__ledger_init(&r->ledger, cfg->world);
    if (st == DCR_OK && cfg->relay_dir != NULL) st = relay_split_start(r, cfg);
    if (st != DCR_OK) {
        relay_destroy(&r->base.pub);
        return st;
    }
    *out_p = &r->base.pub;
    return DCR_OK;
}

dcr_status_t dcr__relay_break_link(dcr_transport_t *t, int node)
{
    if (t == NULL || t->ops != &dcr__transport_relay_ops) {
        return dcr_error_set(DCR_EUNSUPPORTED, "break_link: not a relay transport");
    }
    relay_t *r = (relay_t *)t;
    dcr_status_t st = DCR_OK;
    pthread_mutex_lock(&r->mu);
    relay_tree_t *T = r->tree;
    if (T == NULL)
        st = dcr_error_set(DCR_ECLOSED, "break_link: no attempt is open");
    else if (node >= 1 && node < T->nnodes)
        shutdown(T->nodes[node].up_fd, SHUT_RDWR);
    else if (node <= -1 && -1 - node < T->nowners)
        shutdown(T->owners[-1 - node].root_fd, SHUT_RDWR);
    else
        st = dcr_error_set(DCR_EINVAL, "break_link: no link %d", node);
    pthread_mutex_unlock(&r->mu);
    return st;
}

/* ---- retention at the root (dcr/recovery.h) ---------------------------- */

static dcr_status_t relay_of(dcr_transport_t *t, const char *what, relay_t **r_p)
{
    if (t == NULL || t->ops != &dcr__transport_relay_ops)
        return dcr_error_set(DCR_EUNSUPPORTED, "%s: %s is not a relay transport", what,
                             t ? dcr_transport_name(t) : "(null)");
    *r_p = (relay_t *)t;
    return DCR_OK;
}

dcr_status_t dcr__relay_retention_check(dcr_transport_t *t, const char *what)
{
    relay_t *r = NULL;
    DCR_CHECK(relay_of(t, what, &r));
    if (r->split && r->self != 0)
        return dcr_error_set(DCR_EUNSUPPORTED,
                             "%s: only the root keeps retained versions (this handle "
                             "serves tree node %d)",
                             what, r->self);
    pthread_mutex_lock(&r->mu);
    bool busy = r->retention.ctx != NULL || r->last_tau != 0;
    pthread_mutex_unlock(&r->mu);
    if (busy) return dcr_error_set(DCR_EINVAL, "%s: start once, before the first attempt", what);
    return DCR_OK;
}

dcr_status_t dcr__relay_retention_install(dcr_transport_t *t, const char *what,
                                          const dcr__relay_retention_t *ret)
{
    DCR_CHECK(dcr__relay_retention_check(t, what));
    relay_t *r = (relay_t *)t;
    /* A whole tree in one handle has no listener of its own: readers get one. */
    dcr_status_t st = DCR_OK;
    if (r->lfd < 0) {
        snprintf(r->host, sizeof r->host, "127.0.0.1");
        st = relay_listen_on(r->host, &r->lfd, &r->port);
    }
    pthread_mutex_lock(&r->mu);
    if (st == DCR_OK) r->retention = *ret;
    pthread_mutex_unlock(&r->mu);
    if (st == DCR_OK && !r->accepting) st = relay_accept_start(r);
    if (st != DCR_OK) {
        pthread_mutex_lock(&r->mu);
        r->retention = (dcr__relay_retention_t){0};
        pthread_mutex_unlock(&r->mu);
    }
    return st;
}

dcr_status_t dcr__relay_retention_ctx(dcr_transport_t *t, const char *what, void **ctx_p,
                                      char *addr, size_t cap)
{
    relay_t *r = NULL;
    DCR_CHECK(relay_of(t, what, &r));
    pthread_mutex_lock(&r->mu);
    void *ctx = r->retention.ctx;
    pthread_mutex_unlock(&r->mu);
    if (addr != NULL && cap > 0) snprintf(addr, cap, "%s:%u", r->host, r->port);
    *ctx_p = ctx;
    return DCR_OK;
}

const dcr_transport_ops_t dcr__transport_relay_ops = {
    .hdr = {.version = DCR_TRANSPORT_OPS_VERSION, .name = "relay"},
    .props = {.per_hop_links = true, .backpressure = true, .connections = true},
    .create = relay_create,
    .open_attempt = relay_open_attempt,
    .send = relay_send,
    .finish = relay_finish,
    .recv = relay_recv,
    .release = relay_release,
    .stop_and_wait = relay_stop_and_wait,
    .reference = relay_reference,
    .counters = relay_counters,
    .destroy = relay_destroy,
};
