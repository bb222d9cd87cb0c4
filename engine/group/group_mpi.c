/* The "mpi" group backend: one endpoint per process of an MPI job, over a
 * duplicate of MPI_COMM_WORLD so that dcr's messages never match the job's
 * own. Compiled only when CMake finds MPI (DCR_HAVE_MPI).
 *
 * The engine never initializes MPI: the process that owns the job calls
 * MPI_Init_thread with MPI_THREAD_MULTIPLE, and create refuses anything else.
 * MULTIPLE is needed because each endpoint runs a receiving thread beside
 * the callers' threads (construction calls send and recv from an owner's
 * thread while the library's thread drains the network).
 *
 * Why a receiving thread: the group contract says a send never waits for its
 * destination to call recv. MPI_Send of a large message (above the eager
 * limit, 4 KiB on shared memory) waits until the receiver matches it, so all
 * ranks sending residual flags to all before any receives would deadlock.
 * The thread matches every incoming message as soon as it arrives
 * (MPI_Improbe + MPI_Mrecv, safe beside other threads' receives) and queues
 * it in the endpoint's mailbox; recv then waits on the mailbox with the
 * caller's timeout, so it can never hang inside MPI. Back-pressure: a send
 * blocks until the destination's thread has taken the bytes in (for large
 * messages, the transfer itself); the destination's memory is the bound.
 *
 * The thread polls with MPI_Improbe instead of blocking in MPI_Mprobe: Open
 * MPI's blocking calls spin a core for as long as they wait, which on a
 * shared host would take it from the owners' construction. For SPIN_MS after
 * a message it polls yielding the core (a stream or a reply is likely close
 * behind), then sleeps between polls, growing to POLL_MAX_US. The price is
 * up to POLL_MAX_US of added latency after an idle period. An endpoint idle
 * for PARK_AFTER_MS (no message in, no send or recv of its own, nobody in
 * recv) parks its thread on a condition, looking at MPI every PARK_MAX_MS
 * instead of 2,000 times a second (4 owner ranks polled away more CPU than
 * their construction used over a testbed run); its own next send or recv
 * wakes it at once. What parking can cost: a peer's message larger than the
 * eager limit to a rank that is parked and busy with other work waits up
 * to PARK_MAX_MS to be matched. Order: MPI does not let messages of one
 * sender overtake each other on one communicator when one receive (here any-source any-tag) could
 * match both, and the thread queues them in the order it matched them, so each (src, tag) pair
 * stays in send order. */
#include "group-internal.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "dcr/clock.h"
#include "dcr/log.h"
#include "dcr/thread.h"

#define POLL_MAX_US   500
#define PARK_AFTER_MS 200 /* idle this long: the receiving thread parks */
#define PARK_MAX_MS   5   /* a parked thread's look at MPI */
#define SPIN_MS       0.2 /* how long the receiving thread polls without sleeping */
/* How long destroy waits for the other ranks to destroy theirs. */
#define DESTROY_WAIT_MS 60000

typedef struct mpi_endpoint {
    dcr_group_t base;
    MPI_Comm comm;
    int rank, size;
    dcr__group_mbox_t box;
    pthread_t receiver;
    atomic_bool stop;
    /* Parking (see the top): the last activity (ns), callers inside recv,
     * whether the thread is parked, and its condition. */
    atomic_uint_fast64_t active_ns;
    atomic_int receiving;
    atomic_bool parked;
    pthread_mutex_t park_mu;
    pthread_cond_t park_cv;
} mpi_endpoint_t;

static const char *level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
        return "MPI_THREAD_MULTIPLE";
    default:
        return "an unknown thread level";
    }
}

/* The one line for a failed MPI call. */
static dcr_status_t mpi_fail(int rc, int rank, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return dcr_error_set(DCR_ETRANSPORT, "group mpi rank %d: %s failed: %s", rank, what,
                         len ? text : "unknown MPI error");
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

static double now_ms(void)
{
    return (double)dcr_clock_ns() / 1e6;
}

/* The endpoint's own send or recv, or a message in: it is active; a parked
 * thread wakes. */
static void mark_active(mpi_endpoint_t *ep)
{
    atomic_store(&ep->active_ns, dcr_clock_ns());
    if (!atomic_load(&ep->parked)) return;
    pthread_mutex_lock(&ep->park_mu);
    pthread_cond_signal(&ep->park_cv);
    pthread_mutex_unlock(&ep->park_mu);
}

/* Parks the receiving thread for up to PARK_MAX_MS when the endpoint has been
 * idle PARK_AFTER_MS; returns at once otherwise. The activity is checked
 * again under the lock after `parked` is set, and mark_active signals under
 * the same lock, so a wake-up between the check and the wait is not lost. */
static bool idle_long(mpi_endpoint_t *ep)
{
    uint64_t active = atomic_load(&ep->active_ns), now = dcr_clock_ns();
    return atomic_load(&ep->receiving) == 0 && !atomic_load(&ep->stop) && now > active &&
           now - active >= (uint64_t)PARK_AFTER_MS * 1000000u;
}

static void maybe_park(mpi_endpoint_t *ep)
{
    if (!idle_long(ep)) return;
    pthread_mutex_lock(&ep->park_mu);
    atomic_store(&ep->parked, true);
    if (idle_long(ep)) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += PARK_MAX_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&ep->park_cv, &ep->park_mu, &until);
    }
    atomic_store(&ep->parked, false);
    pthread_mutex_unlock(&ep->park_mu);
}

/* The receiving thread: matches every message for this endpoint and queues
 * it. A failure fails the mailbox, so every recv from then on reports it
 * instead of waiting for a message that was lost. After a lost message
 * (no memory) the thread keeps taking messages in and dropping them, so no
 * peer stays blocked in a send to this rank; after an MPI error it stops. */
static void *mpi_receive_main(void *arg)
{
    mpi_endpoint_t *ep = arg;
    long idle_us = 0;
    double last_ms = now_ms(); /* when a message last arrived */
    bool failed = false;
    while (!atomic_load(&ep->stop)) {
        int found = 0, count = 0;
        MPI_Message handle;
        MPI_Status status;
        int rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, ep->comm, &found, &handle, &status);
        if (rc != MPI_SUCCESS) {
            dcr_status_t st = mpi_fail(rc, ep->rank, "MPI_Improbe");
            dcr__group_mbox_fail(&ep->box, st, dcr_error_detail());
            break;
        }
        if (!found) {
            /* Shortly after a message the next one is likely close behind
             * (a stream, a reply): keep polling, yielding the core. Then
             * sleep, starting at the shortest sleep Linux grants (its
             * default timer slack is 50 us) and growing to POLL_MAX_US. */
            if (now_ms() - last_ms < SPIN_MS) {
                sched_yield();
                continue;
            }
            idle_us = idle_us ? (idle_us * 2 > POLL_MAX_US ? POLL_MAX_US : idle_us * 2) : 50;
            if (idle_us == POLL_MAX_US) maybe_park(ep);
            sleep_us(idle_us);
            continue;
        }
        idle_us = 0;
        last_ms = now_ms();
        atomic_store(&ep->active_ns, dcr_clock_ns());
        MPI_Get_count(&status, MPI_BYTE, &count);
        void *data = failed ? NULL : malloc(count > 0 ? (size_t)count : 1);
        if (!data) {
            /* Take the matched message off the wire into nothing (a
             * truncation error, returned on this communicator, not fatal). */
            char none;
            MPI_Mrecv(&none, 0, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
            if (!failed) {
                dcr_status_t st = dcr_error_set(
                    DCR_ENOMEM, "group mpi rank %d: no memory for a %d-byte message from rank %d",
                    ep->rank, count, status.MPI_SOURCE);
                dcr__group_mbox_fail(&ep->box, st, dcr_error_detail());
                failed = true;
            }
            continue;
        }
        rc = MPI_Mrecv(data, count, MPI_BYTE, &handle, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            free(data);
            dcr_status_t st = mpi_fail(rc, ep->rank, "MPI_Mrecv");
            dcr__group_mbox_fail(&ep->box, st, dcr_error_detail());
            break;
        }
        dcr_status_t st =
            dcr__group_mbox_put(&ep->box, status.MPI_SOURCE, status.MPI_TAG, data, (size_t)count);
        if (st != DCR_OK) {
            free(data);
            dcr__group_mbox_fail(&ep->box, st, dcr_error_detail());
            failed = true;
        }
    }
    return NULL;
}

static int mpi_rank(const dcr_group_t *g)
{
    return ((const mpi_endpoint_t *)g)->rank;
}

static int mpi_size(const dcr_group_t *g)
{
    return ((const mpi_endpoint_t *)g)->size;
}

static dcr_status_t mpi_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len)
{
    mpi_endpoint_t *ep = (mpi_endpoint_t *)g;
    mark_active(ep); /* a reply is likely: the thread should be polling */
    /* len fits an int: the wrapper enforced props.max_message. */
    int rc = MPI_Send(buf, (int)len, MPI_BYTE, dst, tag, ep->comm);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, ep->rank, "MPI_Send");
    return DCR_OK;
}

static dcr_status_t mpi_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    mpi_endpoint_t *ep = (mpi_endpoint_t *)g;
    /* Never parked while someone waits for a message. */
    atomic_fetch_add(&ep->receiving, 1);
    mark_active(ep);
    dcr_status_t st = dcr__group_mbox_take(&ep->box, ep->rank, tag, timeout_ms, out_p);
    atomic_fetch_sub(&ep->receiving, 1);
    atomic_store(&ep->active_ns, dcr_clock_ns());
    return st;
}

/* Waits for every rank to reach destroy while this rank's receiving thread
 * still runs: every send to this rank has then been taken in, so no peer is
 * left blocked in MPI_Send when the thread stops. Bounded, so a peer that
 * never destroys costs a warning, not a hang. Returns whether all arrived. */
static bool mpi_destroy_barrier(mpi_endpoint_t *ep)
{
    MPI_Request req;
    if (MPI_Ibarrier(ep->comm, &req) != MPI_SUCCESS) return false;
    long idle_us = 2;
    for (double start = now_ms(); now_ms() - start < DESTROY_WAIT_MS;) {
        int done = 0;
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        sleep_us(idle_us);
        idle_us = idle_us * 2 > POLL_MAX_US ? POLL_MAX_US : idle_us * 2;
    }
    return false;
}

static void mpi_destroy(dcr_group_t *g)
{
    mpi_endpoint_t *ep = (mpi_endpoint_t *)g;
    mark_active(ep); /* the barrier's peers need this rank's thread polling */
    bool all = mpi_destroy_barrier(ep);
    atomic_store(&ep->stop, true);
    mark_active(ep);
    pthread_join(ep->receiver, NULL);
    pthread_mutex_destroy(&ep->park_mu);
    pthread_cond_destroy(&ep->park_cv);
    if (all) {
        MPI_Comm_free(&ep->comm);
    } else {
        /* An incomplete barrier still refers to the communicator: leave both. */
        DCR_LOG_WARN("group mpi rank %d: other ranks did not destroy the group within %d ms; "
                     "its communicator is leaked",
                     ep->rank, DESTROY_WAIT_MS);
    }
    dcr__group_mbox_fini(&ep->box);
    free(ep);
}

static dcr_status_t mpi_create(const dcr_group_ops_t *self, int size, dcr_group_t **endpoints,
                               int *count_p)
{
    (void)self;
    int initialized = 0, finalized = 0, provided = 0, world = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return dcr_error_set(DCR_EINVAL,
                             "group backend 'mpi': MPI is %s; the process that owns the job calls "
                             "MPI_Init_thread(MPI_THREAD_MULTIPLE) first (run under mpirun)",
                             finalized ? "already finalized" : "not initialized");
    }
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        return dcr_error_set(DCR_EINVAL,
                             "group backend 'mpi': MPI was initialized with %s, expected "
                             "MPI_THREAD_MULTIPLE (the endpoint's receiving thread calls MPI "
                             "beside the caller's threads)",
                             level_name(provided));
    }
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (size != 0 && size != world) {
        return dcr_error_set(DCR_EINVAL,
                             "group backend 'mpi': size %d, but the MPI job has %d processes "
                             "(expected 0 or %d)",
                             size, world, world);
    }
    mpi_endpoint_t *ep = calloc(1, sizeof *ep);
    if (!ep) return dcr_error_set(DCR_ENOMEM, "group mpi endpoint");
    ep->base.ops = &dcr__group_mpi_ops;
    ep->size = world;
    MPI_Comm_rank(MPI_COMM_WORLD, &ep->rank);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &ep->comm);
    if (rc != MPI_SUCCESS) {
        free(ep);
        return mpi_fail(rc, -1, "MPI_Comm_dup of MPI_COMM_WORLD");
    }
    /* Errors on dcr's communicator come back as codes, never abort the job. */
    MPI_Comm_set_errhandler(ep->comm, MPI_ERRORS_RETURN);
    dcr__group_mbox_init(&ep->box);
    atomic_init(&ep->stop, false);
    atomic_init(&ep->active_ns, dcr_clock_ns());
    atomic_init(&ep->receiving, 0);
    atomic_init(&ep->parked, false);
    pthread_mutex_init(&ep->park_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ep->park_cv, &ca);
    pthread_condattr_destroy(&ca);
    /* Owner-side work: its CPU counts with the owners' (dcr/thread.h). */
    if (dcr_thread_start(&ep->receiver, DCR_THREAD_OWNER, mpi_receive_main, ep, "dcr-grp-%d",
                         ep->rank) != 0) {
        int rank = ep->rank;
        pthread_mutex_destroy(&ep->park_mu);
        pthread_cond_destroy(&ep->park_cv);
        dcr__group_mbox_fini(&ep->box);
        MPI_Comm_free(&ep->comm);
        free(ep);
        return dcr_error_set(DCR_ENOMEM, "group mpi rank %d: cannot start the receiving thread",
                             rank);
    }
    endpoints[0] = &ep->base;
    *count_p = 1;
    return DCR_OK;
}

const dcr_group_ops_t dcr__group_mpi_ops = {
    .hdr = {.version = DCR_GROUP_OPS_VERSION, .name = "mpi"},
    /* Tags up to the smallest MPI_TAG_UB the standard allows; messages up
     * to what one int count of MPI_BYTE describes. */
    .props = {.cross_process = true,
              .ordered_per_pair = true,
              .max_tag = 32767,
              .max_message = INT_MAX},
    .create = mpi_create,
    .rank = mpi_rank,
    .size = mpi_size,
    .send = mpi_send,
    .recv = mpi_recv,
    .release = dcr__group_mbox_release,
    .destroy = mpi_destroy,
};
