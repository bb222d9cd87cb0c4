/* Memory per role as processes: each rollout-node and owner process writes
 * its peak resident memory beside what it must hold, and the launcher
 * gathers the figures when the roles stop (issue 30, item 5).
 *
 * What a role must hold (required_bytes):
 *   - a rollout node: its receivers' resident parameters (one replica per
 *     receiver of the node) plus one scratch for the largest canonical
 *     tensor (dcr_receiver_create reserves it);
 *   - an owner rank: the training shards it holds (the candidate it
 *     compares) plus the trackers of the tasks it owns and one payload
 *     bucket (the buffer a payload is assembled in).
 * What the harness adds (harness_bytes), which a real deployment would not
 * hold: every role rebuilds the seeded world (all training shards and the
 * canonical export of the whole checkpoint, deploy/world.h) to replay the
 * training steps itself, and an owner process's constructor also builds the
 * trackers of the other ranks (others_trackers_bytes).
 *
 * The file: <workdir>/memory/<role>-<id>.json, one JSON object
 * {"role", "id", "peak_rss_bytes", "required_bytes", "harness_bytes",
 * "parts": {name: bytes}}, rewritten (atomically) after every attempt the
 * role took part in, so the last one holds the role's peak so far. */
#ifndef DCR_DEPLOY_ROLE_MEMORY_H
#define DCR_DEPLOY_ROLE_MEMORY_H

#include <stdint.h>

#include "dcr/status.h"

struct json_t;

/* This process's peak resident set in bytes: VmHWM from /proc/self/status,
 * else getrusage's ru_maxrss; 0 when neither can be read. */
int64_t dcr_role_peak_rss_bytes(void);

/* Records this process's resident set now as its base (libraries, the
 * runtime's heap: what any process of the build holds), reported as the
 * part "process_base" of every later dcr_role_memory_write. Call at the
 * start of a role, before it builds anything. */
void dcr_role_memory_mark_base(void);

/* Named byte counts of one role's figures (at most DCR_ROLE_MEMORY_PARTS). */
#define DCR_ROLE_MEMORY_PARTS 8
typedef struct dcr_role_memory {
    const char *role; /* "rollout-node" or "owner" */
    int id;           /* node number or owner rank */
    int64_t required_bytes, harness_bytes;
    int nparts;
    struct {
        const char *name;
        int64_t bytes;
    } parts[DCR_ROLE_MEMORY_PARTS];
} dcr_role_memory_t;

/* Bytes of the seeded world a role rebuilds: its training shards and its
 * canonical export (AdamW state, when on, is not counted). */
struct dcr_role_world;
int64_t dcr_role_world_bytes(const struct dcr_role_world *w);

/* Bytes of the largest canonical tensor of w's checkpoint. */
int64_t dcr_role_world_largest_tensor(const struct dcr_role_world *w);

/* Adds a named part to m. */
void dcr_role_memory_part(dcr_role_memory_t *m, const char *name, int64_t bytes);

/* Writes m with this process's peak resident set now to
 * <workdir>/memory/<role>-<id>.json. */
dcr_status_t dcr_role_memory_write(const char *workdir, const dcr_role_memory_t *m);

/* Every role's file under <workdir>/memory as one JSON array ordered by
 * role and id (a new reference; an empty array when there are none). A
 * file that cannot be read or parsed is left out with a warning. */
struct json_t *dcr_role_memory_collect(const char *workdir);

/* Logs (info) what this process asked of its control plane and object
 * store since it started (dcr_control_counts, dcr_objstore_transport_counts),
 * one line naming the role and id, and how many committed versions it saw,
 * so that requests per refit can be read off a run's log (issue 30). */
void dcr_role_log_requests(const char *role, int id, uint64_t versions);

#endif
