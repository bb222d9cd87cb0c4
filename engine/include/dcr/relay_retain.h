/* Retention at the relay tree's root (issue 19): the root keeps the
 * payloads of the last K committed versions on its own disk, in the layout
 * of dcr/retain.h (versions/v<V>/..., a VERSION manifest written last), and
 * serves them to rollout nodes over the network, so that a node that fell
 * 1..K versions behind replays the deltas it missed (dcr_restore_replay
 * takes any dcr_objstore_t) instead of a dense refit.
 *
 * Every payload of an attempt crosses the root, which verifies it (digest,
 * attempt, owner, id) before it forwards it: the root keeps a reference to
 * each verified payload of the attempt under way, and when every owner
 * finished it, before the tree's nodes see its end (so before any of them
 * acknowledges), stages the attempt on its store outside versions/, in the
 * object-store transport's layout (attempt-<tau>/payload-<owner>-<id>.dcrp,
 * MANIFEST written last), where no reader looks. When told that the
 * attempt committed (dcr_relay_retain_commit, from the process that follows
 * the control plane's commit record at the root) it publishes the staged
 * attempt as the version (dcr_retain_commit: VERSION written last) and
 * deletes the staged attempts up to it, which committed or never will. A
 * root killed between its acknowledgment and the commit keeps the staged
 * attempt on disk: its restarted process publishes it when it finds the
 * commit record naming it (dcr_relay_retain_recover, or the commit call).
 *
 * Readers open the object store "relay://HOST:PORT" (dcr/objstore.h; HOST
 * an IPv4 address or name, PORT the root's listener): get and list of keys
 * under "versions/" only, by one connection per store handle; put and
 * delete are refused (DCR_EUNSUPPORTED), and wait_change only sleeps. The
 * root answers on the listener its tree uses (across processes: the address
 * it publishes for tree node 0), checks every request's length and key
 * (retain.h's name rule; "..", absolute and foreign keys are refused) and
 * serves at most 16 readers at once. Readers verify every payload against
 * its VERSION manifest (dcr_retain_payload_get), so a corrupt or missing
 * object served is a digest failure or a gap there, never applied. */
#ifndef DCR_RELAY_RETAIN_H
#define DCR_RELAY_RETAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dcr/retain.h"
#include "dcr/status.h"
#include "dcr/transport.h"

/* Makes relay handle t, which must serve the root (a whole tree in one
 * handle, or relay_node 0 across processes), keep the last `keep` (>= 1)
 * committed versions in the store store_url names (a directory path or
 * "dir:PATH" on the root's host; any writable store URL works) and serve
 * them. clear: deletes the versions and staged attempts the store holds
 * first (a fresh run on a store an earlier run used); a restarted root
 * keeps them (they are this run's). A handle holding the whole tree starts a listener on 127.0.0.1
 * for the readers. Call once, after create and before the first attempt.
 * DCR_EUNSUPPORTED for another backend or a handle that is not the root;
 * DCR_EINVAL for keep < 1 or a second call; the store's errors. */
dcr_status_t dcr_relay_retain_start(dcr_transport_t *t, const char *store_url, int keep,
                                    bool clear);

/* Attempt tau committed `version` (the commit record says so, and is
 * durable): writes every payload of tau that the root verified as
 * versions/v<version>/payload-<owner>-<id>.dcrp with its VERSION manifest
 * last (dcr_retain_put), then deletes the versions below
 * version - keep + 1 (each VERSION first). Publishes what tau staged on
 * the root's store, so a root restarted since tau ended retains it too;
 * DCR_OK without a copy when version is retained from tau already. Blocks
 * for one get and one put per payload on the root's store; call from one
 * thread at a time, not concurrently with open_attempt. DCR_ENOTFOUND when
 * tau was not staged whole at this root (it never ended there, or its
 * staging failed): version is then a gap, and replays across it take a
 * dense refit. stats_p may be NULL. */
dcr_status_t dcr_relay_retain_commit(dcr_transport_t *t, uint64_t tau, uint64_t version,
                                     dcr_retain_stats_t *stats_p);

/* dcr_relay_retain_commit without a relay handle, for a restarted root
 * before its transport exists: the commit record names attempt tau as
 * `version`, and the root's store (store_url, as given to
 * dcr_relay_retain_start) may hold it staged from before the restart.
 * Publishes it (DCR_OK when retained already), prunes to keep versions and
 * deletes the staged attempts up to tau; later ones stay, they may still
 * commit. DCR_ENOTFOUND when tau was never staged whole there (a gap). */
dcr_status_t dcr_relay_retain_recover(const char *store_url, uint64_t tau, uint64_t version,
                                      int keep, dcr_retain_stats_t *stats_p);

/* The readers' store URL ("relay://HOST:PORT") into url (cap bytes).
 * DCR_EINVAL before dcr_relay_retain_start. */
dcr_status_t dcr_relay_retain_url(dcr_transport_t *t, char *url, size_t cap);

#endif
