/* The seeded world of a run, rebuilt by every role from the configuration. */
#include "deploy/world.h"

#include <stdlib.h>
#include <string.h>

#include "workloads/change/change_profile.h"
#include "workloads/change/ckpt_init.h"
#include "workloads/serve/vllm_layout.h"
#include "workloads/train/megatron.h"

static dcr_status_t export_canonical(dcr_role_world_t *w)
{
    /* An FP8 export re-quantizes the masters: the committed canonical
     * version is the export of the shards, as in dcr bench. */
    return dcr_megatron_export(&w->sc->model, &w->sc->train, w->sc->layout, w->shards,
                               w->canonical);
}

static dcr_status_t world_init(dcr_role_world_t *w)
{
    dcr_scenario_spec_t spec = w->cfg.scenario;
    spec.align_extra = w->serve.tp;
    DCR_CHECK(dcr_scenario_create(&spec, &w->sc));
    DCR_CHECK(dcr_serve_config_validate(&w->sc->model, &w->serve));
    DCR_CHECK(dcr_serve_register_loaders());
    w->nc = dcr_inventory_count(w->sc->inventory);
    w->ns = (size_t)w->sc->layout->nshards;
    DCR_CHECK(dcr_scenario_alloc_canonical(w->sc, &w->canonical));
    DCR_CHECK(dcr_scenario_alloc_shards(w->sc, &w->shards));
    /* The same initial weights as dcr bench: a checkpoint's (--init) or seeded. */
    if (w->cfg.init)
        DCR_CHECK(dcr_ckpt_init_canonical(w->sc, w->cfg.init, w->canonical));
    else
        dcr_scenario_init_weights(w->sc, w->cfg.seed, w->canonical);
    DCR_CHECK(
        dcr_megatron_import(&w->sc->model, &w->sc->train, w->sc->layout, w->canonical, w->shards));
    DCR_CHECK(export_canonical(w));
    if (w->cfg.adamw)
        DCR_CHECK(dcr_adamw_create(w->sc, w->shards, w->cfg.lr, w->cfg.seed + 7, &w->adamw));
    return DCR_OK;
}

dcr_status_t dcr_role_world_create(const dcr_run_config_t *cfg, dcr_role_world_t **out_p)
{
    if (cfg == NULL || out_p == NULL) return dcr_error_set(DCR_EINVAL, "role world: NULL argument");
    dcr_role_world_t *w = calloc(1, sizeof(*w));
    if (w == NULL) return dcr_error_set(DCR_ENOMEM, "role world");
    w->cfg = *cfg;
    w->serve = cfg->serve;
    dcr_status_t st = world_init(w);
    if (st != DCR_OK) {
        dcr_role_world_destroy(w);
        return st;
    }
    *out_p = w;
    return DCR_OK;
}

void dcr_role_world_destroy(dcr_role_world_t *w)
{
    if (w == NULL) return;
    dcr_adamw_destroy(w->adamw);
    dcr_scenario_free_tensors(w->canonical, w->nc);
    dcr_scenario_free_tensors(w->shards, w->ns);
    dcr_scenario_destroy(w->sc);
    free(w);
}

/* Moves the world one version on: the step's changes go into the shards in
 * place, as dcr bench injects them. */
static dcr_status_t world_step(dcr_role_world_t *w)
{
    dcr_storage_t *const *shards = w->shards;
    int64_t injected = 0;
    /* The injections rebuild the canonical tensors too; the export below
     * replaces them with what a dense reload loads. */
    DCR_CHECK(dcr_scenario_step(w->sc, w->adamw, w->cfg.profile, w->cfg.change_rate,
                                dcr_scenario_step_seed(w->cfg.seed, w->version), shards,
                                w->canonical, &injected));
    w->version++;
    return export_canonical(w);
}

dcr_status_t dcr_role_world_advance(dcr_role_world_t *w, uint64_t version)
{
    if (version < w->version)
        return dcr_error_set(DCR_EINVAL,
                             "role world: version %llu is behind the world's %llu (replays only "
                             "go forward)",
                             (unsigned long long)version, (unsigned long long)w->version);
    while (w->version < version) DCR_CHECK(world_step(w));
    return DCR_OK;
}

dcr_status_t dcr_role_world_receiver(dcr_role_world_t *w, int receiver, dcr_receiver_t **out_p)
{
    if (receiver < 0 || receiver >= dcr_serve_receivers(&w->serve))
        return dcr_error_set(DCR_EINVAL, "role world: receiver %d of %d", receiver,
                             dcr_serve_receivers(&w->serve));
    dcr_receiver_t *r = NULL;
    DCR_CHECK(
        dcr_serve_receiver_create(&w->sc->model, w->sc->inventory, &w->serve, receiver, NULL, &r));
    /* It verifies payloads with the run's key, as the in-process receivers do. */
    dcr_receiver_set_payload_key(r, &w->cfg.payload_key);
    dcr_status_t st = dcr_receiver_load_dense_all(r, w->canonical);
    if (st == DCR_OK) st = dcr_receiver_prewarm(r);
    if (st != DCR_OK) {
        dcr_receiver_destroy(r);
        return st;
    }
    *out_p = r;
    return DCR_OK;
}

dcr_status_t dcr_role_world_expected_digests(dcr_role_world_t *w, uint64_t version, int receiver,
                                             dcr_param_digests_t *out_p)
{
    DCR_CHECK(dcr_role_world_advance(w, version));
    if (receiver < 0 || receiver >= dcr_serve_receivers(&w->serve))
        return dcr_error_set(DCR_EINVAL, "verifier: receiver %d of %d", receiver,
                             dcr_serve_receivers(&w->serve));
    dcr_receiver_t *dense = NULL;
    DCR_CHECK(dcr_serve_receiver_create(&w->sc->model, w->sc->inventory, &w->serve, receiver, NULL,
                                        &dense));
    dcr_status_t st = dcr_receiver_load_dense_all(dense, w->canonical);
    if (st == DCR_OK) st = dcr_receiver_digests(dense, out_p);
    dcr_receiver_destroy(dense);
    return st;
}
