/* Shared by the relay tree (relay_tcp.c), the root's retained versions
 * (relay_retain.c) and the read-only "relay://" object store that reads them
 * (objstore_backend_relay.c); not part of the public interface. One wire
 * format (relay_wire.c) serves the tree's frames and the store's requests.
 *
 * Wire format, little-endian, one 48-byte header per frame:
 *   u32 magic "DCRF", u32 type, i32 code, u32 reserved, u64 tau, u64 a, u64 b, u64 len
 * then len bytes. The tree's frames are described in relay_tcp.c. The
 * store's (tau 0, on a connection that opened with a HELLO of kind
 * DCR__RELAY_HELLO_STORE, answered ACK, or NACK when the node keeps no
 * versions):
 *   SGET   body: u64 off, u64 len (UINT64_MAX: to the end), u64 cap, key
 *          answer SDATA (a = the byte count, then the bytes) or NACK
 *   SLIST  a = max_keys (1..1000); body: prefix, NUL, start token
 *          answer SDATA, body: u16 next length, next, then per entry
 *          u16 key length, key, u64 size, u8 version length, version
 *   NACK   code = dcr_status_t, body: the message (< DCR__RELAY_NACK_MAX)
 * Every request names a key or prefix under "versions/" in the layout of
 * dcr/recovery.h; anything else is refused (NACK), and a frame longer than a
 * request can be closes the connection. */
#ifndef DCR_RELAY_INTERNAL_H
#define DCR_RELAY_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/objstore.h"
#include "transport/transport-internal.h"

#define DCR__RELAY_MAGIC    0x46524344u /* "DCRF" */
#define DCR__RELAY_HDR      48
#define DCR__RELAY_NACK_MAX 512
/* Read errors other than errno values. */
#define DCR__RELAY_EOF   (-1)
#define DCR__RELAY_PROTO (-2)

/* Who a HELLO frame (a = kind, b = id) says is connecting. */
#define DCR__RELAY_HELLO_OWNER 0
#define DCR__RELAY_HELLO_NODE  1
#define DCR__RELAY_HELLO_STORE 2 /* a reader of the root's retained versions; b = 0 */

typedef enum dcr__relay_type {
    DCR__F_DATA = 1,
    DCR__F_FIN = 2,
    DCR__F_END = 3,
    DCR__F_ACK = 4,
    DCR__F_NACK = 5,
    DCR__F_REF = 6,
    DCR__F_HELLO = 7,
    DCR__F_SGET = 8,
    DCR__F_SLIST = 9,
    DCR__F_SDATA = 10,
} dcr__relay_type_t;

typedef struct dcr__relay_frame {
    uint32_t type;
    int32_t code;
    uint64_t tau, a, b, len;
} dcr__relay_frame_t;

/* The store's request bounds: a GET body is three u64 and a key; a LIST
 * body a prefix, a NUL and a start token. */
#define DCR__RELAY_SGET_FIXED 24
#define DCR__RELAY_SREQ_MAX   (DCR__RELAY_SGET_FIXED + 2 * DCR_OBJSTORE_KEY_MAX + 1024 + 1)

/* ---- sockets and frames (relay_wire.c) ---------------------------------- */

/* 0, or an errno value. */
int dcr__relay_write_all(int fd, const uint8_t *p, size_t n);
/* 0, DCR__RELAY_EOF, or an errno value. */
int dcr__relay_read_all(int fd, uint8_t *p, size_t n);
/* Writes one frame, pacing header and payload through flow (NULL:
 * unpaced); ECANCELED when the flow was cancelled. 0 or an errno value.
 * payload NULL with len > 0: the header alone (the caller then writes the
 * len bytes itself). */
int dcr__relay_frame_write(int fd, const dcr__relay_frame_t *f, const uint8_t *payload,
                           dcr__flow_t *flow);
/* Reads one header: DCR__RELAY_PROTO for a bad magic, an unknown type or a
 * length above DCR__TRANSPORT_PAYLOAD_MAX. */
int dcr__relay_frame_read(int fd, dcr__relay_frame_t *f);
/* An ACK (st DCR_OK) or a NACK carrying st and msg. */
int dcr__relay_reply(int fd, uint64_t tau, dcr_status_t st, const char *msg);
const char *dcr__relay_err_str(int e);
/* TCP_NODELAY: frames and answers strictly alternate. */
void dcr__relay_nodelay(int fd);
/* One TCP connection to "HOST:PORT" within connect_ms; -1 with an
 * errno-style *err_p. */
int dcr__relay_connect_addr(const char *addr, int connect_ms, int *err_p);
/* Send and receive timeouts of fd (0: none). */
void dcr__relay_set_timeouts(int fd, int ms);

/* ---- buffers shared by the queues of one node ---------------------------- */

typedef enum dcr__relay_kind { DCR__BUF_DATA, DCR__BUF_REF, DCR__BUF_END } dcr__relay_kind_t;

/* One frame's body, reference counted: a payload is queued for every child
 * and for recv, and held by the root's retention until its attempt is
 * staged or replaced. */
typedef struct dcr__relay_buf {
    atomic_int refs;
    dcr__relay_kind_t kind;
    uint32_t owner;
    uint64_t id;
    size_t len;
    uint8_t data[];
} dcr__relay_buf_t;

dcr__relay_buf_t *dcr__relay_buf_new(dcr__relay_kind_t kind, size_t len);
void dcr__relay_buf_ref(dcr__relay_buf_t *b);
/* Accepts NULL. */
void dcr__relay_buf_unref(dcr__relay_buf_t *b);

/* ---- the root's retention, seen from the tree ----------------------------
 * Recovery (engine/recovery/relay_retain.c, dcr/recovery.h) keeps a root's
 * retained versions; the tree only hands it what it sees through these
 * slots, so that the transport layer never depends on recovery. Every slot
 * is thread-safe. */
typedef struct dcr__relay_retention {
    void *ctx; /* NULL: the handle retains nothing */
    /* The root verified and queued payload b of attempt tau: take a
     * reference until tau is staged or no longer can be. */
    void (*hold)(void *ctx, uint64_t tau, dcr__relay_buf_t *b);
    /* Every owner finished attempt tau at the root; called before the tree
     * sees tau's end (a node acknowledges only after it returns). */
    void (*ended)(void *ctx, uint64_t tau);
    /* A reader's connection fd, its hello taken: served on a thread of the
     * retention's (or refused); fd is taken. */
    void (*serve)(void *ctx, int fd);
    /* After the tree has stopped (its threads hold payloads). */
    void (*destroy)(void *ctx);
} dcr__relay_retention_t;
/* DCR_OK when t is a relay handle that may still start retaining (the
 * root, before its first attempt); else the error line, prefixed by what. */
dcr_status_t dcr__relay_retention_check(dcr_transport_t *t, const char *what);
/* Installs ret on t (checked as above; a whole tree in one handle gets a
 * listener for readers). On success the handle owns ret->ctx and destroys
 * it with itself; on failure nothing is taken. */
dcr_status_t dcr__relay_retention_install(dcr_transport_t *t, const char *what,
                                          const dcr__relay_retention_t *ret);
/* The retention ctx installed on t (NULL: none; an error line when t is
 * not a relay handle) and the address its readers reach, "HOST:PORT". */
dcr_status_t dcr__relay_retention_ctx(dcr_transport_t *t, const char *what, void **ctx_p,
                                      char *addr, size_t cap);

/* The retained versions' root folder and name bound as the relay:// store's
 * requests carry them (dcr/recovery.h's layout; relay_retain.c asserts that
 * the two agree). */
#define DCR__RELAY_RETAINED_ROOT     "versions/"
#define DCR__RELAY_RETAINED_NAME_MAX 95

/* True when key names a retained object: "versions/v<decimal>/<name>",
 * name "VERSION" or a payload name by retain.h's rule ([A-Za-z0-9._-], not
 * starting with '.', at most DCR_RETAIN_NAME_MAX bytes). */
bool dcr__relay_retained_key_ok(const char *key);
/* True when prefix is "versions/" or "versions/v<decimal>/". */
bool dcr__relay_retained_prefix_ok(const char *prefix);

/* The read-only store of a relay root's retained versions ("relay://"). */
extern const dcr_objstore_ops_t dcr__objstore_relay_ops;

#endif
