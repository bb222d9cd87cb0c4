/* The run configuration every process of a run shares, and what is derived
 * from it alone: the constructor configuration, the XOR policy, chunk and
 * bucket targets, the control plane's address and opening. */
#define _XOPEN_SOURCE 700
#include "workloads/harness/run_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dcr/inventory.h"
#include "dcr/log.h"
#include "dcr/receiver.h"

dcr_run_config_t dcr_run_config_default(void)
{
    dcr_run_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.scenario = dcr_scenario_spec_default();
    cfg.scenario.scale = 16;
    cfg.scenario.layers = 8;
    cfg.scenario.train =
        (dcr_train_config_t){2, 2, 2, 0, 1, 1, 0}; /* ETP follows TP for MoE models */
    cfg.serve = dcr_serve_config_default();
    cfg.serve.nodes = 2;
    cfg.serve.gpus_per_node = 2;
    cfg.serve.tp = 2;
    cfg.transport = "objstore";
    cfg.link = dcr_link_config_default();
    cfg.fanout = 2;
    cfg.change_rate = 0.03;
    cfg.lr = 1e-6;
    cfg.mode = DCR_MODE_X;
    cfg.shuffle = true; /* as in dcr_construct_config_default: a quarter fewer XOR bytes */
    cfg.rl = DCR_RL_SYNC;
    cfg.seed = 42;
    return cfg;
}

/* --anchor-every: rollout-node processes over the object store, within the
 * retention window (a join replays the versions after its anchor). */
static dcr_status_t anchor_check(const dcr_run_config_t *cfg, bool process_roles)
{
    if (cfg->anchor_every <= 0) return DCR_OK;
    if (!process_roles || strcmp(cfg->transport, "objstore"))
        return dcr_error_set(DCR_EINVAL,
                             "--anchor-every needs --processes and --transport objstore (got "
                             "%s%s)",
                             cfg->transport, process_roles ? "" : ", no --processes");
    if (cfg->anchor_every > cfg->retain)
        return dcr_error_set(DCR_EINVAL,
                             "--anchor-every %d is above the retention window (%d versions): a "
                             "join could not replay from its anchor",
                             cfg->anchor_every, cfg->retain);
    return DCR_OK;
}

dcr_status_t dcr_run_config_check(const dcr_run_config_t *cfg, bool process_roles)
{
    if (!cfg->transport || !dcr_transport_find(cfg->transport))
        return dcr_error_set(DCR_EINVAL, "--transport %s: expected objstore or relay",
                             cfg->transport ? cfg->transport : "(none)");
    if (cfg->adamw && !(cfg->lr > 0))
        return dcr_error_set(DCR_EINVAL, "--lr must be positive for --changes adamw");
    if (process_roles && cfg->rl != DCR_RL_SYNC)
        return dcr_error_set(DCR_EINVAL, "--processes needs --rl sync (got %s)",
                             dcr_rl_mode_name(cfg->rl));
    return anchor_check(cfg, process_roles);
}

void dcr_run_targets(const dcr_run_config_t *cfg, int64_t checkpoint_bytes, int owners,
                     size_t *chunk_p, size_t *bucket_p)
{
    /* The seed's 120B runs cut 482 payloads over 32 owners, about 15 each,
     * so that construction overlaps delivery; scaled checkpoints keep that
     * count per owner rather than the absolute 512 MiB target, which would
     * leave one payload per owner and nothing to overlap. */
    size_t bucket = (size_t)(checkpoint_bytes / (owners > 0 ? owners : 1) / 12);
    if (bucket < 4096) bucket = 4096;
    size_t chunk_seed =
        strcmp(cfg->transport, "relay") ? DCR_CHUNK_BYTES_OBJSTORE : DCR_CHUNK_BYTES_RELAY;
    size_t chunk =
        bucket / (DCR_BUCKET_BYTES / chunk_seed); /* the seed's chunk : bucket proportion */
    *bucket_p = cfg->bucket_bytes ? cfg->bucket_bytes : bucket;
    *chunk_p = cfg->chunk_bytes ? cfg->chunk_bytes : chunk > 0 ? chunk : 1;
}

dcr_status_t dcr_run_xor_policy(const dcr_scenario_t *sc, const dcr_serve_config_t *serve,
                                dcr_construct_mode_t mode, uint8_t **out_p)
{
    int nrecv = dcr_serve_receivers(serve);
    size_t nc = dcr_inventory_count(sc->inventory);
    dcr_receiver_t **probe = calloc((size_t)nrecv, sizeof(*probe));
    uint8_t *xor_allowed = calloc(nc + 1, 1);
    if (!probe || !xor_allowed) {
        free(probe);
        free(xor_allowed);
        return dcr_error_set(DCR_ENOMEM, "XOR policy");
    }
    dcr_receiver_config_t base = {.shape_only = true};
    dcr_status_t st = DCR_OK;
    for (int i = 0; st == DCR_OK && i < nrecv; i++) {
        st = dcr_serve_receiver_create(&sc->model, sc->inventory, serve, i, &base, &probe[i]);
        if (st == DCR_OK) st = dcr_receiver_prewarm(probe[i]);
    }
    for (size_t c = 0; st == DCR_OK && c < nc; c++)
        xor_allowed[c] = mode == DCR_MODE_X && dcr_serve_xor_allowed(probe, nrecv, c);
    for (int i = 0; i < nrecv; i++) dcr_receiver_destroy(probe[i]);
    free(probe);
    if (st != DCR_OK) {
        free(xor_allowed);
        return st;
    }
    *out_p = xor_allowed;
    return DCR_OK;
}

dcr_construct_config_t dcr_run_construct_config(const dcr_run_config_t *cfg,
                                                const dcr_scenario_t *sc)
{
    dcr_construct_config_t cc = dcr_construct_config_default();
    cc.mode = cfg->mode;
    cc.shuffle = cfg->shuffle;
    cc.payload_key = cfg->payload_key;
    cc.device = cfg->device;
    dcr_run_targets(cfg, dcr_inventory_bytes(sc->inventory), sc->layout->world, &cc.chunk_bytes,
                    &cc.bucket_bytes);
    return cc;
}

/* ---- control plane ------------------------------------------------------- */

static const char dcr__etcd_scheme[] = "etcd://";

bool dcr_run_control_is_etcd(const char *address)
{
    return address != NULL && strncmp(address, dcr__etcd_scheme, sizeof dcr__etcd_scheme - 1) == 0;
}

dcr_status_t dcr_run_control_check(const char *flag, const char *address)
{
    if (address == NULL || address[0] == '\0')
        return dcr_error_set(DCR_EINVAL, "%s: expected a SQLite file or etcd://HOST:PORT[/PREFIX]",
                             flag);
    if (!dcr_run_control_is_etcd(address)) {
        if (strstr(address, "://") != NULL)
            return dcr_error_set(DCR_EINVAL,
                                 "%s %s: unknown scheme (expected etcd://HOST:PORT[/PREFIX] or a "
                                 "SQLite file path)",
                                 flag, address);
        return DCR_OK;
    }
    const char *host = address + sizeof dcr__etcd_scheme - 1;
    const char *slash = strchr(host, '/');
    size_t hp_len = slash ? (size_t)(slash - host) : strlen(host);
    const char *colon = memrchr(host, ':', hp_len);
    size_t digits = colon ? hp_len - (size_t)(colon - host) - 1 : 0;
    long port = 0;
    for (size_t i = 0; colon && i < digits && i < 6; i++)
        port = colon[1 + i] >= '0' && colon[1 + i] <= '9' ? port * 10 + (colon[1 + i] - '0') : -1;
    bool ok = colon && colon > host && digits >= 1 && digits <= 5 && port >= 1 && port <= 65535;
    for (const char *c = slash; ok && c && *c; c++) {
        bool seg = *c == '/' ? c[1] != '/' : (isalnum((unsigned char)*c) || strchr("._~-", *c));
        ok = seg;
    }
    if (!ok)
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: expected etcd://HOST:PORT[/PREFIX] (port 1..65535, prefix of "
                             "[A-Za-z0-9._~-] segments)",
                             flag, address);
    return DCR_OK;
}

dcr_status_t dcr_run_control_fresh(const char *flag, const char *address)
{
    struct stat sb;
    if (address == NULL || dcr_run_control_is_etcd(address) || stat(address, &sb) != 0)
        return DCR_OK; /* absent: the run creates it empty (an unusable path fails at open) */
    dcr_control_config_t cfg = {address, 0};
    dcr_control_t *c = NULL;
    DCR_CHECK(dcr_control_create("sqlite", &cfg, &c));
    dcr_commit_record_t rec, empty;
    memset(&empty, 0, sizeof empty);
    dcr_status_t st = dcr_control_read(c, &rec);
    dcr_control_destroy(c);
    DCR_CHECK(st);
    if (!dcr_commit_record_equal(&rec, &empty))
        return dcr_error_set(DCR_EINVAL,
                             "%s %s: already holds an earlier run's commit record (version %llu, "
                             "attempt %llu); a run starts its receivers at version 0 and needs an "
                             "empty control plane: give a new file or remove this one",
                             flag, address, (unsigned long long)rec.version,
                             (unsigned long long)rec.attempt);
    return DCR_OK;
}

dcr_status_t dcr_run_control_url(const char *address, const char *run, char *url, size_t cap)
{
    int len;
    if (run == NULL) {
        len = snprintf(url, cap, "%s", address);
    } else {
        size_t n = strlen(address);
        while (n > sizeof dcr__etcd_scheme - 1 && address[n - 1] == '/') n--;
        bool has_prefix = memchr(address + sizeof dcr__etcd_scheme - 1, '/',
                                 n - (sizeof dcr__etcd_scheme - 1)) != NULL;
        len = snprintf(url, cap, "%.*s%s/%s", (int)n, address, has_prefix ? "" : "/dcr", run);
    }
    if (len < 0 || (size_t)len >= cap)
        return dcr_error_set(DCR_EINVAL, "control plane address %.200s: too long", address);
    return DCR_OK;
}

dcr_status_t dcr_run_control_open(const char *address, const char *default_path, const char *run,
                                  dcr_control_t **out_p)
{
    return dcr_run_control_open_as("", address, default_path, run, out_p);
}

dcr_status_t dcr_run_control_open_as(const char *prefix, const char *address,
                                     const char *default_path, const char *run,
                                     dcr_control_t **out_p)
{
    dcr_control_config_t cfg = {address ? address : default_path, 0};
    bool etcd = dcr_run_control_is_etcd(address);
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, etcd ? "etcd" : "sqlite");
    if (!etcd) return dcr_control_create(name, &cfg, out_p);
    char url[1024];
    DCR_CHECK(dcr_run_control_url(address, run, url, sizeof url));
    cfg.address = url;
    if (run != NULL) DCR_LOG_INFO("control plane: %s", url);
    return dcr_control_create(name, &cfg, out_p);
}
