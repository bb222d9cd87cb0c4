/* The loader registry and the wrappers through which the engine calls a
 * backend (DESIGN.md section 4): create, destroy and load. A loader that
 * fails or delays loads (a test's) is a registered backend of its own that
 * calls another's slots, as every backend is reached only through here. */

#include "core/core-internal.h"
#include "loader-internal.h"

/* Loaders are all registered at run time (workloads/ registers its own). */
static dcr__registry_t dcr__registry = DCR__REGISTRY_INIT("loader", NULL, 0);

dcr_status_t dcr_loader_register(const dcr_loader_ops_t *ops)
{
    if (ops == NULL || ops->hdr.name == NULL || ops->hdr.name[0] == '\0' || ops->create == NULL ||
        ops->destroy == NULL || ops->load == NULL)
        return dcr_error_set(DCR_EINVAL,
                             "loader_register: a loader needs a name, create, destroy and load");
    if (ops->hdr.version != DCR_LOADER_OPS_VERSION)
        return dcr_error_set(DCR_EINVAL,
                             "loader_register: loader %s has ops version %u, expected %d",
                             ops->hdr.name, ops->hdr.version, DCR_LOADER_OPS_VERSION);
    return dcr__registry_add(&dcr__registry, ops);
}

const dcr_loader_ops_t *dcr_loader_find(const char *name)
{
    return dcr__registry_find(&dcr__registry, name);
}

dcr_status_t dcr_loader_create(const char *name, const void *config, bool shape_only,
                               dcr_loader_t **out_p)
{
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "loader_create: out_p is NULL");
    const dcr_loader_ops_t *ops = dcr_loader_find(name);
    if (ops == NULL)
        return dcr_error_set(DCR_ENOTFOUND, "no loader named %s is registered",
                             name ? name : "(null)");
    dcr_params_t *params = NULL;
    dcr_loader_t *l = NULL;
    dcr_status_t st = dcr_params_create(shape_only, &params);
    if (st == DCR_OK) st = ops->create(ops, config, params, &l);
    if (st != DCR_OK) {
        dcr_error_prefix("loader %s: ", name);
        dcr_params_destroy(params);
        return st;
    }
    l->ops = ops;
    l->params = params;
    *out_p = l;
    return DCR_OK;
}

void dcr_loader_destroy(dcr_loader_t *loader)
{
    if (loader == NULL) return;
    dcr_params_t *params = loader->params;
    loader->ops->destroy(loader);
    dcr_params_destroy(params);
}

const char *dcr_loader_name(const dcr_loader_t *loader)
{
    return loader->ops->hdr.name;
}

dcr_params_t *dcr_loader_params(dcr_loader_t *loader)
{
    return loader->params;
}

dcr_status_t dcr_loader_load(dcr_loader_t *loader, dcr_load_ctx_t *ctx, const char *name,
                             const dcr_view_t *tensor)
{
    if (loader == NULL || ctx == NULL || name == NULL || tensor == NULL)
        return dcr_error_set(DCR_EINVAL, "loader_load: NULL argument");
    DCR_CHECK(dcr__load_ctx_begin(ctx, loader->params, name, tensor));
    dcr_status_t st = loader->ops->load(loader, ctx, name, tensor);
    dcr_status_t est = dcr__load_ctx_end(ctx);
    return st != DCR_OK ? st : est;
}
