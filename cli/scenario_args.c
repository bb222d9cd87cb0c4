#include "scenario_args.h"

#include <stdio.h>
#include <string.h>

#include "dcr/objstore.h"
#include "dcr/outpath.h"
#include "dcr/recovery.h"
#include "workloads/harness/bench.h"
#include "workloads/change/budget.h"
#include "deploy/restorer.h"
#include "workloads/harness/workdir.h"

void dcr_cli_scenario_init(dcr_cli_scenario_t *o, const char *model, int64_t scale, int64_t layers)
{
    *o = (dcr_cli_scenario_t){model, "extended", NULL, scale, layers, 1, 1, 1, 1, 1, 1, 0, 0, NULL};
}

void dcr_cli_scenario_args(dcr_cli_scenario_t *o, dcr_arg_t *args)
{
    const dcr_arg_t table[DCR_CLI_SCENARIO_NARGS] = {
        {"--model", DCR_ARG_STRING, &o->model, 0, 0, "built-in model name or path of a config JSON",
         false},
        {"--scale", DCR_ARG_INT, &o->scale, 1, 4096,
         "divide hidden, intermediate, head_dim and vocab by S", false},
        {"--layers", DCR_ARG_INT, &o->layers, 0, 100000, "keep the first N layers (0: all)", false},
        {"--train-nodes", DCR_ARG_INT, &o->nodes, 1, 100000, "training nodes (default 1)", false},
        {"--gpus-per-node", DCR_ARG_INT, &o->gpus, 1, 1024, "training GPUs per node (default 1)",
         false},
        {"--tp", DCR_ARG_INT, &o->tp, 1, 1024, "training tensor parallel degree", false},
        {"--etp", DCR_ARG_INT, &o->etp, 1, 1024, "training expert tensor parallel degree", false},
        {"--ep", DCR_ARG_INT, &o->ep, 1, 1024, "training expert parallel degree", false},
        {"--pp", DCR_ARG_INT, &o->pp, 1, 1024, "training pipeline parallel degree", false},
        {"--dp", DCR_ARG_INT, &o->dp, 1, 1000000, "data parallel degree (default: ranks / (tp*pp))",
         false},
        {"--mapping", DCR_ARG_STRING, &o->mapping, 0, 0,
         "paper | extended mapping classes (default extended; paper: the seed's)", false},
        {"--fp8-layers", DCR_ARG_INT, &o->fp8_layers, 0, 100000,
         "export o_proj of the first N layers FP8 block-quantized", false},
        {"--max-memory", DCR_ARG_STRING, &o->max_memory, 0, 0,
         "memory budget, e.g. 8G (default: 50% of physical memory); larger runs are refused",
         false},
    };
    for (int i = 0; i < DCR_CLI_SCENARIO_NARGS; i++) args[i] = table[i];
    o->args = args;
}

dcr_status_t dcr_cli_scenario_spec(const dcr_cli_scenario_t *o, dcr_scenario_spec_t *out_p)
{
    dcr_scenario_spec_t spec = dcr_scenario_spec_default();
    DCR_CHECK(dcr_mapping_parse(o->mapping, &spec.mapping));
    spec.model = o->model;
    spec.scale = (int)o->scale;
    spec.layers = (int)o->layers;
    spec.layers_is_default = o->args && !dcr_args_seen(o->args, DCR_CLI_SCENARIO_NARGS, "--layers");
    spec.fp8_layers = (int)o->fp8_layers;
    if (o->max_memory) DCR_CHECK(dcr_size_parse("--max-memory", o->max_memory, &spec.max_memory));
    spec.train = (dcr_train_config_t){(int)o->nodes, (int)o->gpus, (int)o->tp, (int)o->etp,
                                      (int)o->ep,    (int)o->pp,   (int)o->dp};
    *out_p = spec;
    return DCR_OK;
}

dcr_status_t dcr_cli_payload_key(const char *command, const char *path, dcr_payload_key_t *out_p)
{
    dcr_payload_key_t key = {0};
    bool shared = false;
    if (path != NULL) DCR_CHECK(dcr_payload_key_load(path, &key, &shared));
    if (shared)
        fprintf(stderr,
                "dcr %s: warning: payload key %s is readable by group or others; anyone who "
                "reads it can sign payloads (chmod 600 it)\n",
                command, path);
    *out_p = key;
    return DCR_OK;
}

dcr_status_t dcr_cli_scenario_validate(const dcr_scenario_spec_t *spec,
                                       const dcr_serve_config_t *serve)
{
    dcr_scenario_t *sc = NULL;
    dcr_scenario_spec_t s = *spec;
    if (serve) s.align_extra = serve->tp;
    DCR_CHECK(dcr_scenario_create(&s, &sc));
    dcr_serve_config_t copy;
    dcr_status_t st = DCR_OK;
    if (serve) {
        copy = *serve;
        st = dcr_serve_config_validate(&sc->model, &copy);
    }
    dcr_scenario_destroy(sc);
    return st;
}

dcr_status_t dcr_cli_changes_check(const dcr_arg_t *args, int nargs, const char *changes,
                                   bool profiles)
{
    bool adamw = !strcmp(changes, "adamw");
    bool profile = profiles && !strncmp(changes, "profile:", 8);
    if (!adamw && !profile && strcmp(changes, "uniform"))
        return dcr_error_set(DCR_EINVAL, "--changes %s: expected uniform, adamw%s", changes,
                             profiles ? " or profile:FILE" : "");
    if (profile && dcr_args_seen(args, nargs, "--change-rate"))
        return dcr_error_set(DCR_EINVAL,
                             "--change-rate applies to --changes uniform only (a profile's "
                             "rates are its own)");
    if (!adamw && dcr_args_seen(args, nargs, "--lr"))
        return dcr_error_set(DCR_EINVAL, "--lr applies to --changes adamw only");
    if (adamw && dcr_args_seen(args, nargs, "--change-rate"))
        return dcr_error_set(DCR_EINVAL,
                             "--change-rate applies to --changes uniform only (AdamW's change "
                             "rate follows from --lr)");
    return DCR_OK;
}

dcr_status_t dcr_cli_paths_check(const char *out, const char *trace, const char *keep,
                                 const char *workdir, const char *control)
{
    if (keep && workdir)
        return dcr_error_set(DCR_EINVAL,
                             "--keep-payloads and --workdir both name the work folder; give one");
    if (out) DCR_CHECK(dcr_outpath_check("--out", out));
    if (trace) DCR_CHECK(dcr_outpath_check("--trace", trace));
    if (out && trace && !strcmp(out, trace))
        return dcr_error_set(DCR_EINVAL, "--out and --trace name the same file %s", out);
    if (keep) DCR_CHECK(dcr_workdir_check("--keep-payloads", keep));
    if (workdir) DCR_CHECK(dcr_workdir_check("--workdir", workdir));
    if (control && !dcr_run_control_is_etcd(control)) {
        /* SQLite writes PATH-journal (or -wal and -shm) beside the file; an
         * etcd URL names no local file. */
        static const char *const side[] = {"", "-journal", "-wal", "-shm"};
        for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
            char path[4200];
            if (snprintf(path, sizeof(path), "%s%s", control, side[i]) >= (int)sizeof(path))
                return dcr_error_set(DCR_EINVAL, "--control: path too long");
            DCR_CHECK(dcr_outpath_check("--control", path));
        }
    }
    return DCR_OK;
}

dcr_status_t dcr_cli_store_check(const char *store, const char *s3_endpoint)
{
    if (s3_endpoint && !store)
        return dcr_error_set(DCR_EINVAL, "--s3-endpoint needs --store s3://BUCKET/PREFIX");
    if (!store) return DCR_OK;
    const dcr_objstore_ops_t *ops = dcr_objstore_for_url(store);
    if (ops == NULL) {
        dcr_error_prefix("--store: ");
        return DCR_EINVAL;
    }
    bool s3 = !strcmp(ops->hdr.name, "s3");
    /* Before any setup: `--store dir:` names no folder. */
    if (!strcmp(store, "dir:"))
        return dcr_error_set(DCR_EINVAL, "--store dir: names no folder (expected dir:PATH)");
    if (s3 && !s3_endpoint)
        return dcr_error_set(DCR_EINVAL,
                             "--store %s needs --s3-endpoint http[s]://HOST[:PORT] (the S3 "
                             "service; requests are path-style ENDPOINT/BUCKET/KEY)",
                             store);
    if (!s3 && s3_endpoint)
        return dcr_error_set(DCR_EINVAL, "--s3-endpoint is for s3:// stores, not %s", store);
    if (s3 && strncmp(s3_endpoint, "http://", 7) && strncmp(s3_endpoint, "https://", 8))
        return dcr_error_set(DCR_EINVAL,
                             "--s3-endpoint %s: expected http://HOST[:PORT] or https://HOST[:PORT]",
                             s3_endpoint);
    /* A folder of the user's is refused before any setup, by the store's
     * own rule (not a link; new, empty or marked by dcr). */
    if (dcr_objstore_dir_check(store) != DCR_OK) {
        dcr_error_prefix("--store: ");
        return DCR_EINVAL;
    }
    return DCR_OK;
}

/* The transports that keep a window of committed versions: the object
 * store (in the store) and the relay tree (on the root's disk, served to the
 * nodes over the network: dcr/recovery.h). */
static bool retains(const char *transport)
{
    return !strcmp(transport, "objstore") || !strcmp(transport, "relay");
}

dcr_status_t dcr_cli_retain(const dcr_arg_t *args, int nargs, int64_t k, const char *transport,
                            bool processes, int *out_p)
{
    if (!dcr_args_seen(args, nargs, "--retain")) {
        *out_p = processes && retains(transport) ? DCR_RETAIN_DEFAULT : 0;
        return DCR_OK;
    }
    if (!retains(transport))
        return dcr_error_set(DCR_EINVAL, "--retain needs --transport objstore or relay (got %s)",
                             transport);
    *out_p = (int)k;
    return DCR_OK;
}

dcr_arg_t dcr_cli_device_arg(const char **name)
{
    return (dcr_arg_t){"--device",
                       DCR_ARG_STRING,
                       name,
                       0,
                       0,
                       "cpu | cuda | auto: where resident storage and device stages live (default "
                       "cpu; auto: cuda when a GPU is found)",
                       false};
}

int dcr_cli_device_open(const char *command, const char *name, dcr_device_t **out_p)
{
    if (!dcr_device_name_valid(name))
        return dcr_cli_usage(
            command, dcr_error_set(DCR_EINVAL, "--device %s: expected cpu, cuda or auto", name));
    dcr_status_t st = dcr_device_create(name, out_p);
    if (st == DCR_EUNSUPPORTED || st == DCR_ENOTFOUND) return dcr_cli_usage(command, st);
    return st == DCR_OK ? 0 : dcr_cli_fail(command, st);
}
