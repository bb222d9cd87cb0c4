/* Memory accounting: resident set, physical memory, the memory budget. */
#include "workloads/change/budget.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dcr/construct.h"

int64_t dcr_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long long size = 0, resident = 0;
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return got == 2 && page > 0 ? (int64_t)resident * page : 0;
}

int64_t dcr_peak_rss_bytes(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux reports KiB */
}

int64_t dcr_memory_total_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    long long kib = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof(line), f))
            if (sscanf(line, "MemTotal: %lld kB", &kib) == 1) break;
        fclose(f);
    }
    if (kib > 0) return (int64_t)kib * 1024;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

int64_t dcr_memory_budget_default(void)
{
    int64_t total = dcr_memory_total_bytes();
    return total > 0 ? (int64_t)((double)total * DCR_MEMORY_BUDGET_SHARE) : (int64_t)8 << 30;
}

dcr_status_t dcr_size_parse(const char *flag, const char *text, int64_t *out_p)
{
    const char *p = text ? text : "";
    int64_t v = 0;
    bool digits = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (INT64_MAX - (*p - '0')) / 10) goto bad;
        v = v * 10 + (*p - '0');
        digits = true;
    }
    int shift = 0;
    switch (*p) {
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    case 'T':
        shift = 40;
        break;
    default:
        break;
    }
    if (shift) p++;
    if (!strcmp(p, "iB") && shift)
        p += 2;
    else if (!strcmp(p, "B"))
        p++;
    if (!digits || *p || v == 0 || v > (INT64_MAX >> shift)) goto bad;
    *out_p = v << shift;
    return DCR_OK;
bad:
    return dcr_error_set(DCR_EINVAL,
                         "%s '%s': expected a positive decimal size, optionally with K, M, G or T "
                         "(powers of 1024), e.g. 8G",
                         flag, text ? text : "");
}

static int64_t add_sat(int64_t a, int64_t b)
{
    if (a < 0) a = 0;
    if (b < 0) b = 0;
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

int64_t dcr_memory_estimate_total(const dcr_memory_estimate_t *e)
{
    const int64_t parts[] = {e->process,  e->canonical, e->shards,    e->trackers, e->receivers,
                             e->verifier, e->changes,   e->transient, e->maps};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) total = add_sat(total, parts[i]);
    return total;
}

/* "1.23 GiB", "45.6 MiB": readable at every size the check meets. */
static const char *human(int64_t bytes, char *buf, size_t cap)
{
    if (bytes >= (int64_t)1 << 30)
        snprintf(buf, cap, "%.2f GiB", (double)bytes / (double)(1 << 30));
    else
        snprintf(buf, cap, "%.1f MiB", (double)bytes / (double)(1 << 20));
    return buf;
}

dcr_status_t dcr_memory_check(const char *what, const dcr_memory_estimate_t *e, int64_t budget)
{
    if (budget <= 0) budget = dcr_memory_budget_default();
    int64_t total = dcr_memory_estimate_total(e);
    if (total <= budget) return DCR_OK;
    /* The roles as multiples of the checkpoint, largest first, so the line
     * says what to shrink. */
    typedef struct {
        const char *name;
        int64_t bytes;
    } role_t;
    role_t roles[] = {
        {"shards", e->shards},       {"receivers", e->receivers}, {"changes", e->changes},
        {"canonical", e->canonical}, {"trackers", e->trackers},   {"verifier", e->verifier},
        {"transient", e->transient}, {"maps", e->maps},           {"process", e->process}};
    enum { NROLES = sizeof(roles) / sizeof(roles[0]) };
    for (int i = 1; i < NROLES; i++)
        for (int j = i; j > 0 && roles[j].bytes > roles[j - 1].bytes; j--) {
            role_t t = roles[j];
            roles[j] = roles[j - 1];
            roles[j - 1] = t;
        }
    char detail[256] = "";
    size_t len = 0;
    double ckpt = e->checkpoint > 0 ? (double)e->checkpoint : 1.0;
    for (int i = 0; i < 3 && roles[i].bytes > 0 && len < sizeof(detail); i++)
        len += (size_t)snprintf(detail + len, sizeof(detail) - len, "%s%s %.1fx", i ? ", " : "",
                                roles[i].name, (double)roles[i].bytes / ckpt);
    char a[32], b[32], c[32];
    return dcr_error_set(DCR_ENOMEM,
                         "%s: estimated peak memory %s (checkpoint %s; %s) exceeds the memory "
                         "budget of %s (--max-memory; default %.0f%% of physical memory)",
                         what, human(total, a, sizeof(a)), human(e->checkpoint, b, sizeof(b)),
                         detail, human(budget, c, sizeof(c)), 100 * DCR_MEMORY_BUDGET_SHARE);
}

void dcr_scenario_estimate(const dcr_scenario_t *s, const dcr_run_shape_t *shape,
                           dcr_memory_estimate_t *out_p)
{
    const dcr_source_layout_t *L = s->layout;
    int64_t ckpt = dcr_inventory_bytes(s->inventory), shards = 0, shard_elems = 0, owned = 0,
            owned_elems = 0;
    for (int i = 0; i < L->nshards; i++) {
        shards = add_sat(shards, dcr_desc_bytes(&L->shards[i].desc));
        shard_elems = add_sat(shard_elems, dcr_desc_numel(&L->shards[i].desc));
    }
    for (int i = 0; i < L->ntasks; i++) {
        const dcr_task_t *t = &L->tasks[i];
        int64_t n = dcr_task_numel(t);
        owned_elems = add_sat(owned_elems, n);
        owned = add_sat(owned, n * (int64_t)dcr_dtype_size(L->shards[t->shard].desc.dtype));
    }
    /* Residual conversions keep the assembled tensor on its residual owner. */
    for (size_t c = 0; c < dcr_inventory_count(s->inventory); c++)
        if (L->residual_owner && L->residual_owner[c] >= 0)
            owned = add_sat(owned, dcr_desc_bytes(dcr_inventory_at(s->inventory, c)));
    int tp = shape->serve_tp > 0 ? shape->serve_tp : 1;
    /* A receiver's metadata (plans, loader tables) per tensor, whatever the scale. */
    int64_t per_receiver = (int64_t)(DCR_ESTIMATE_RECEIVER_FACTOR * (double)ckpt / tp) +
                           (int64_t)dcr_inventory_count(s->inventory) * 512;
    dcr_memory_estimate_t e = {0};
    e.checkpoint = ckpt;
    e.process = dcr_rss_bytes();
    e.canonical = ckpt > INT64_MAX / 8 ? INT64_MAX : ckpt * shape->canonical_copies;
    e.shards = shards > INT64_MAX / 8 ? INT64_MAX : shards * shape->shard_copies;
    /* The undo log's bound counts for every owner: host trackers are the default. */
    double tracker_factor = DCR_ESTIMATE_TRACKER_FACTOR + 1.0 / DCR_CONSTRUCT_UNDO_SHARE;
    e.trackers = shape->trackers ? (int64_t)(tracker_factor * (double)owned) : 0;
    e.receivers = (int64_t)((double)per_receiver * shape->receivers);
    e.verifier = (int64_t)((double)per_receiver * shape->verifiers);
    e.changes = shape->adamw ? (int64_t)((double)owned_elems * DCR_ESTIMATE_ADAMW_BYTES) : 0;
    e.transient = shape->transient ? (int64_t)(DCR_ESTIMATE_TRANSIENT * (double)ckpt) : 0;
    e.maps = (int64_t)((double)shard_elems * shape->map_bytes);
    *out_p = e;
}

dcr_status_t dcr_scenario_check_memory(const dcr_scenario_t *s, const char *what,
                                       const dcr_run_shape_t *shape)
{
    dcr_memory_estimate_t e;
    dcr_scenario_estimate(s, shape, &e);
    return dcr_memory_check(what, &e, s->max_memory);
}
