/* Shared by sim/sim.c (the driver) and sim/actors.c (the SimGrid side). */
#ifndef DCR_SIM_INTERNAL_H
#define DCR_SIM_INTERNAL_H

#include <sys/types.h>

#include "sim/sim.h"
#include "sim/workload.h"

/* What one SimGrid run hands back to the driver. */
typedef struct dcr__sim_out {
    double latency_s, construction_lb_s, transport_lb_s, finalization_s;
    double construction_end_s, apply_end_s;
    double reference_s;
    int64_t cross_bytes;
    int staging_max, staging_cap;
    double receive_lb_s;
} dcr__sim_out_t;

/* Simulates the refit of workload w on the platform file `platform`. Must
 * run in a process where SimGrid was never initialized (a forked child). */
dcr_status_t dcr__sim_refit(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                            const char *platform, dcr__sim_out_t *out);

/* Simulates the transport-only full-checkpoint reference (object store:
 * each training node uploads its share, then every rollout node downloads
 * all of it). Same process rule as dcr__sim_refit. */
dcr_status_t dcr__sim_reference(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                const char *platform, dcr__sim_out_t *out);

/* Loads a user's platform (stderr silenced) and checks its hosts against
 * spec's cluster and every link's bandwidth (> 0) and latency (>= 0). Same
 * process rule as dcr__sim_refit. */
dcr_status_t dcr__sim_probe_platform(const dcr_sim_spec_t *spec, const dcr_sim_workload_t *w,
                                     const char *platform, dcr__sim_out_t *out);

/* Forks a child tied to this process: it dies with its parent (even by
 * SIGKILL, so a killed dcr sim leaves nothing running) and leaves stop
 * signals to the parent. fds is a pipe: the child keeps fds[1], the parent
 * fds[0]. Returns the child's pid in the parent, 0 in the child, -1 (errno
 * set, both ends closed) when the fork failed. */
pid_t dcr__fork_tied(int fds[2]);

/* Reads len bytes of a child's result from fd into buf (fewer when the
 * child closed it early: *got_p says how many), waking for a stop signal
 * (workloads/harness/interrupt.h): DCR_EINTR then, and the caller kills
 * the child. */
dcr_status_t dcr__sim_read_all(int fd, void *buf, size_t len, size_t *got_p);

/* Writes len bytes to fd, retrying short writes; a child's side of the
 * above (a failed write shows as a short result there). */
void dcr__sim_write_all(int fd, const void *buf, size_t len);

#endif
