#include "workloads/harness/construct_bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcr/log.h"
#include "workloads/change/budget.h"
#include "workloads/change/ckpt_init.h"
#include "dcr/outpath.h"

/* One configuration of the comparison: a mode with one shuffle setting. */
typedef struct bench_config {
    dcr_constructor_t *con; /* built at first use, kept for later rounds */
    dcr_construct_config_t cfg;
    dcr_construct_bench_result_t *result;
    dcr_construct_stats_t *stats; /* result's slot for this shuffle setting */
    int runs;
} bench_config_t;

static dcr_status_t run_config(const dcr_scenario_t *sc, const dcr_construct_bench_t *b,
                               bench_config_t *bc, dcr_storage_t *const *baseline,
                               dcr_storage_t *const *candidate, const uint8_t *xor_allowed)
{
    if (!bc->con) {
        DCR_CHECK(dcr_constructor_create(sc->layout, &bc->cfg, baseline, &bc->con));
        bc->result->baseline_bytes = dcr_constructor_baseline_bytes(bc->con);
        DCR_LOG_INFO("construct: mode %s, shuffle %s, baseline %.1f MiB",
                     dcr_construct_mode_name(bc->cfg.mode), bc->cfg.shuffle ? "on" : "off",
                     (double)bc->result->baseline_bytes / (1 << 20));
    }
    dcr_construct_stats_t st;
    DCR_CHECK(dcr_constructor_run(bc->con, candidate, 1, xor_allowed, false, b->sink, &st));
    if (bc->runs++ == 0 || st.construction_s < bc->stats->construction_s) *bc->stats = st;
    return DCR_OK;
}

/* Every configuration once per round, in the same order every round. A
 * single round frees each constructor after its run, so that only one
 * baseline is held at a time. */
static dcr_status_t run_rounds(const dcr_scenario_t *sc, const dcr_construct_bench_t *b,
                               bench_config_t *configs, int nconfigs,
                               dcr_storage_t *const *baseline, dcr_storage_t *const *candidate,
                               const uint8_t *xor_allowed)
{
    int rounds = b->rounds > 1 ? b->rounds : 1;
    dcr_status_t st = DCR_OK;
    for (int r = 0; r < rounds && st == DCR_OK; r++)
        for (int i = 0; i < nconfigs && st == DCR_OK; i++) {
            st = run_config(sc, b, &configs[i], baseline, candidate, xor_allowed);
            if (rounds == 1) {
                dcr_constructor_destroy(configs[i].con);
                configs[i].con = NULL;
            }
        }
    for (int i = 0; i < nconfigs; i++) dcr_constructor_destroy(configs[i].con);
    return st;
}

static dcr_status_t run_modes(const dcr_scenario_t *sc, const dcr_construct_bench_t *b,
                              const dcr_construct_mode_t *modes, int nmodes,
                              dcr_storage_t *const *baseline, dcr_storage_t *const *candidate,
                              const uint8_t *xor_allowed, dcr_construct_bench_result_t *results)
{
    if (nmodes < 1) return dcr_error_set(DCR_EINVAL, "construct bench without a mode");
    int per_mode = b->compare_shuffle ? 2 : 1, nconfigs = nmodes * per_mode;
    bench_config_t *configs = calloc((size_t)nmodes * (size_t)per_mode, sizeof(*configs));
    if (!configs) return dcr_error_set(DCR_ENOMEM, "construct bench configurations");
    for (int i = 0; i < nconfigs; i++) {
        int m = i / per_mode, other = i % per_mode;
        configs[i].cfg = b->cfg;
        configs[i].cfg.mode = modes[m];
        configs[i].cfg.shuffle = other ? !b->cfg.shuffle : b->cfg.shuffle;
        configs[i].result = &results[m];
        configs[i].stats = other ? &results[m].stats_other : &results[m].stats;
    }
    dcr_status_t st = run_rounds(sc, b, configs, nconfigs, baseline, candidate, xor_allowed);
    free(configs);
    return st;
}

dcr_status_t dcr_construct_bench_run(const dcr_scenario_t *sc, const dcr_construct_bench_t *b,
                                     const dcr_construct_mode_t *modes, int nmodes,
                                     dcr_construct_bench_result_t *results)
{
    size_t nc = dcr_inventory_count(sc->inventory), ns = (size_t)sc->layout->nshards;
    dcr_storage_t **canonical = NULL, **baseline = NULL, **candidate = NULL;
    uint8_t *xor_allowed = NULL;
    int64_t injected = 0;
    dcr_status_t st;
    DCR_CHECK_GOTO(dcr_scenario_check_memory(sc, "construct",
                                             &(dcr_run_shape_t){.canonical_copies = 1,
                                                                .shard_copies = 2,
                                                                .trackers = true,
                                                                .transient = true}),
                   st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_canonical(sc, &canonical), st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_shards(sc, &baseline), st, done);
    DCR_CHECK_GOTO(dcr_scenario_alloc_shards(sc, &candidate), st, done);
    /* A checkpoint that cannot start the weights fails before any progress line. */
    if (b->init) DCR_CHECK_GOTO(dcr_ckpt_init_canonical(sc, b->init, canonical), st, done);
    DCR_LOG_INFO("construct: %zu tensors, %lld bytes: %s", nc,
                 (long long)dcr_inventory_bytes(sc->inventory),
                 b->init ? "weights from the checkpoint" : "building weights");
    if (!b->init) dcr_scenario_init_weights(sc, b->seed, canonical);
    DCR_CHECK_GOTO(dcr_megatron_import(&sc->model, &sc->train, sc->layout, canonical, baseline), st,
                   done);
    for (size_t s = 0; s < ns; s++)
        memcpy(candidate[s]->data, baseline[s]->data, baseline[s]->bytes);
    DCR_CHECK_GOTO(dcr_scenario_step(sc, NULL, b->profile, b->change_rate, b->seed + 1, candidate,
                                     canonical, &injected),
                   st, done);
    /* Without receivers every tensor counts as XOR-eligible; residual ones still overwrite. */
    xor_allowed = malloc(nc + 1);
    if (!xor_allowed) {
        st = dcr_error_set(DCR_ENOMEM, "XOR policy");
        goto done;
    }
    memset(xor_allowed, 1, nc + 1);
    for (int i = 0; i < nmodes; i++) {
        memset(&results[i], 0, sizeof(results[i]));
        results[i].checkpoint_bytes = dcr_inventory_bytes(sc->inventory);
        results[i].injected_elements = injected;
    }
    st = run_modes(sc, b, modes, nmodes, baseline, candidate, xor_allowed, results);
done:
    free(xor_allowed);
    dcr_scenario_free_tensors(canonical, nc);
    dcr_scenario_free_tensors(baseline, ns);
    dcr_scenario_free_tensors(candidate, ns);
    return st;
}

typedef struct dcr_dir_sink_kept {
    int owner;
    uint64_t id;
    uint8_t *buf;
    size_t len;
} dcr_dir_sink_kept_t;

/* Timed path: a copy under a lock, no file system call. */
static dcr_status_t dir_submit(void *ctx, int owner, uint64_t id, const uint8_t *buf, size_t len)
{
    dcr_dir_sink_t *d = ctx;
    uint8_t *copy = malloc(len ? len : 1);
    pthread_mutex_lock(&d->lock);
    if (copy && d->nkept == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        dcr_dir_sink_kept_t *k = realloc(d->kept, cap * sizeof(*k));
        if (k) {
            d->kept = k;
            d->cap = cap;
        }
    }
    dcr_status_t st = DCR_OK;
    if (!copy || d->nkept == d->cap) {
        st = dcr_error_set(DCR_ENOMEM, "--keep-payloads: holding payload %llu of owner %d",
                           (unsigned long long)id, owner);
        d->held_status = st;
        free(copy);
    } else {
        memcpy(copy, buf, len);
        d->kept[d->nkept++] = (dcr_dir_sink_kept_t){owner, id, copy, len};
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

void dcr_dir_sink_init(dcr_dir_sink_t *d, const char *dir, uint64_t tau)
{
    memset(d, 0, sizeof(*d));
    d->dir = dir;
    d->tau = tau;
    d->sink.submit = dir_submit;
    d->sink.ctx = d;
    pthread_mutex_init(&d->lock, NULL);
}

static void dir_sink_forget(dcr_dir_sink_t *d)
{
    for (size_t i = 0; i < d->nkept; i++) free(d->kept[i].buf);
    d->nkept = 0;
}

dcr_status_t dcr_dir_sink_flush(dcr_dir_sink_t *d, size_t *written_p)
{
    size_t written = 0;
    dcr_status_t st = d->held_status;
    for (size_t i = 0; st == DCR_OK && i < d->nkept; i++) {
        const dcr_dir_sink_kept_t *k = &d->kept[i];
        char path[4096];
        snprintf(path, sizeof(path), "%s/tau%llu-owner%d-%llu.dcrp", d->dir,
                 (unsigned long long)d->tau, k->owner, (unsigned long long)k->id);
        st = dcr_outpath_write("payload", path, k->buf, k->len);
        if (st == DCR_OK) written++;
    }
    dir_sink_forget(d);
    d->held_status = DCR_OK;
    if (written_p) *written_p = written;
    return st;
}

void dcr_dir_sink_fini(dcr_dir_sink_t *d)
{
    if (d == NULL) return;
    dir_sink_forget(d);
    free(d->kept);
    d->kept = NULL;
    d->cap = 0;
    pthread_mutex_destroy(&d->lock);
}
