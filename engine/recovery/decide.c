/* The restore decision (dcr/recovery.h): which of clean, replay, repair,
 * anchor or dense brings one receiver back to the committed version. Pure,
 * so that it can be tested against the table on its own; the rollout node's
 * restorer (deploy/restorer.c) gathers the state and carries it out. */
#include "dcr/recovery.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void append(char *why, size_t cap, const char *text)
{
    if (why == NULL || cap == 0) return;
    size_t l = strnlen(why, cap - 1);
    snprintf(why + l, cap - l, "%s", text);
}

static dcr_restore_choice_t choice(dcr_restore_kind_t kind, dcr_restore_action_t action)
{
    return (dcr_restore_choice_t){kind, action};
}

/* Dirty, killed (or failed) mid-apply of an attempt from s->from. */
static dcr_restore_choice_t decide_interrupted(const dcr_restore_state_t *s, uint64_t version,
                                               char *why, size_t cap)
{
    if (s->from == version && s->repair_in_retry && !s->retry_refused)
        return choice(DCR_RESTORE_CLEAN, DCR_RESTORE_DEFER);
    if (s->from < version) return choice(DCR_RESTORE_REPAIR, DCR_RESTORE_APPLY);
    if (s->from == version && s->retry_refused)
        append(why, cap, "; its repair in the overwrite retry failed its check");
    append(why, cap, "; no version committed after it: no overwrite records to repair with");
    return choice(DCR_RESTORE_DENSE, DCR_RESTORE_APPLY);
}

dcr_restore_choice_t dcr_restore_decide(const dcr_restore_state_t *s, uint64_t version, char *why,
                                        size_t cap)
{
    if (s->from != DCR_RESTORE_NONE) return decide_interrupted(s, version, why, cap);
    if (s->held == version)
        return choice(DCR_RESTORE_CLEAN, s->untouched ? DCR_RESTORE_NOTHING : DCR_RESTORE_CHECK);
    if (s->held < version) return choice(DCR_RESTORE_REPLAY, DCR_RESTORE_APPLY);
    if (s->held != DCR_RESTORE_NONE && why != NULL && cap > 0)
        snprintf(why, cap, "holds version %" PRIu64 ", ahead of %" PRIu64, s->held, version);
    return choice(DCR_RESTORE_DENSE, DCR_RESTORE_APPLY);
}

bool dcr_restore_prefers_anchor(dcr_restore_kind_t kind, int anchor_every, bool store,
                                uint64_t version)
{
    return kind == DCR_RESTORE_DENSE && anchor_every > 0 && store && version > 0;
}
