/* A rank's next order in the owners' job (owner_orders.h). */
#include "deploy/owner_orders.h"

#include <string.h>

#include "dcr/log.h"

#define ORDER_POLL_MS 200 /* one wait for an order (then a look at stop) */
/* Awaiting a commit: one wait on the control plane before a look for rank
 * 0's order. A commit wakes the wait at once, and so does nearly every
 * order rank 0 gives meanwhile (it follows a change: a new attempt, the
 * coordinator's open, the nodes joining it); this bounds how late one that
 * follows none is seen. Not shorter: on etcd each wait is a watch request,
 * and every rank waits so through each refit's delivery. */
#define COMMIT_SLICE_MS 50

bool dcr_owner_commit_is_ours(const dcr_commit_record_t *rec, uint64_t version, uint64_t part)
{
    return part != 0 && rec->attempt == part && rec->version == version + 1;
}

static bool same_order(const dcr_owner_order_t *a, const dcr_owner_order_t *b)
{
    return a->kind == b->kind && a->tau == b->tau && a->version == b->version;
}

/* Rank 0's next order (DCR_ETIMEOUT after timeout_ms), less the duplicate
 * of a commit taken early. */
static dcr_status_t take_order(dcr_owner_orders_t *f, int timeout_ms, dcr_owner_order_t *o)
{
    for (;;) {
        dcr_group_msg_t m;
        DCR_CHECK(dcr_group_recv(f->g, DCR_OWNER_TAG_ORDER, timeout_ms, &m));
        bool ok = m.len == sizeof(*o);
        if (ok) memcpy(o, m.data, sizeof(*o));
        dcr_group_release(f->g, &m);
        int rank = dcr_group_rank(f->g);
        if (!ok) return dcr_error_set(DCR_EIO, "owner %d: an order of %zu bytes", rank, m.len);
        dcr_owner_order_t e = f->early;
        f->early.kind = 0;
        if (!e.kind || o->kind == DCR_OWNER_STOP) return DCR_OK;
        if (same_order(o, &e)) continue; /* the duplicate */
        return dcr_error_set(DCR_EIO,
                             "owner %d: took the commit of attempt %llu (version %llu) from the "
                             "control plane, but rank 0 then ordered %u for attempt %llu",
                             rank, (unsigned long long)e.tau, (unsigned long long)e.version,
                             o->kind, (unsigned long long)o->tau);
    }
}

/* With an attempt sent: whichever comes first, the commit record naming it
 * or rank 0's order (a restore, a retry, a stop). DCR_ETIMEOUT after about
 * ORDER_POLL_MS without either. */
static dcr_status_t await_commit(dcr_owner_orders_t *f, uint64_t version, uint64_t part,
                                 dcr_owner_order_t *o)
{
    /* The record is read at the start and after each change, not after a
     * wait that saw none (on etcd a read is a round trip). The position is
     * taken before each read only, so a change between a wait and the next
     * one is not lost. */
    uint64_t pos = 0;
    bool read = true;
    for (int waited = 0; waited < ORDER_POLL_MS; waited += COMMIT_SLICE_MS) {
        dcr_commit_record_t rec;
        if (read) {
            pos = dcr_control_position(f->control);
            if (dcr_control_read(f->control, &rec) == DCR_OK &&
                dcr_owner_commit_is_ours(&rec, version, part)) {
                *o = (dcr_owner_order_t){DCR_OWNER_COMMIT, 0, rec.attempt, 0, rec.version};
                f->early = *o;
                return DCR_OK;
            }
        }
        dcr_status_t st = take_order(f, 0, o);
        if (st != DCR_ETIMEOUT) return st;
        read = dcr_control_wait(f->control, pos, COMMIT_SLICE_MS) != DCR_ETIMEOUT;
    }
    return DCR_ETIMEOUT;
}

dcr_status_t dcr_owner_next_order(dcr_owner_orders_t *f, uint64_t version, uint64_t part,
                                  volatile sig_atomic_t *stop, dcr_owner_order_t *o)
{
    for (;;) {
        dcr_status_t st = part && f->control ? await_commit(f, version, part, o)
                                             : take_order(f, ORDER_POLL_MS, o);
        if (st != DCR_ETIMEOUT) return st;
        if (*stop) {
            *o = (dcr_owner_order_t){DCR_OWNER_STOP, 0, 0, 0, 0};
            return DCR_OK;
        }
    }
}
