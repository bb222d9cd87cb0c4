/* Which implementation serves each side of the coordinator's parties
 * (coord-parties.h): the one place that reads the config's nodes and
 * owners, and picks the tables by their names. */
#include "coord-parties.h"

#include <string.h>

/* Each side's implementations, found by their header's name; NULL names
 * the first ("local"). */
static const dcr__nodes_ops_t *const nodes_impls[] = {&dcr__nodes_local, &dcr__nodes_remote};
static const dcr__owners_ops_t *const owners_impls[] = {&dcr__owners_local, &dcr__owners_remote};
#define N_IMPLS(a) (sizeof(a) / sizeof((a)[0]))

static const dcr__nodes_ops_t *find_nodes(const char *name)
{
    if (name == NULL) return nodes_impls[0];
    for (size_t i = 0; i < N_IMPLS(nodes_impls); i++)
        if (strcmp(nodes_impls[i]->hdr.name, name) == 0) return nodes_impls[i];
    return NULL;
}

static const dcr__owners_ops_t *find_owners(const char *name)
{
    if (name == NULL) return owners_impls[0];
    for (size_t i = 0; i < N_IMPLS(owners_impls); i++)
        if (strcmp(owners_impls[i]->hdr.name, name) == 0) return owners_impls[i];
    return NULL;
}

dcr_status_t dcr__coord_parties_open(const dcr__nodes_env_t *nenv, const dcr__owners_env_t *oenv,
                                     dcr__nodes_t *nodes_p, dcr__owners_t *owners_p)
{
    const dcr_coord_config_t *cfg = nenv->cfg;
    dcr__nodes_t nodes = {find_nodes(cfg->nodes), NULL};
    dcr__owners_t owners = {find_owners(cfg->owners), NULL};
    if (nodes.ops == NULL || owners.ops == NULL)
        return dcr_error_set(DCR_EINVAL,
                             "coordinator: rollout nodes \"%s\", owners \"%s\": expected "
                             "\"local\" or \"remote\" for each",
                             cfg->nodes ? cfg->nodes : "local",
                             cfg->owners ? cfg->owners : "local");
    /* Owner processes learn of an attempt from records that only the remote
     * rollout side writes (the coordinator's "opened"). */
    if (owners.ops == &dcr__owners_remote && nodes.ops != &dcr__nodes_remote)
        return dcr_error_set(DCR_EINVAL, "coordinator: owners as processes need rollout nodes as "
                                         "processes (nodes \"remote\")");
    DCR_CHECK(owners.ops->create(oenv, &owners.impl));
    dcr_status_t st = nodes.ops->create(nenv, &nodes.impl);
    if (st != DCR_OK) {
        owners.ops->destroy(owners.impl);
        return st;
    }
    *nodes_p = nodes;
    *owners_p = owners;
    return DCR_OK;
}

void dcr__coord_parties_close(dcr__nodes_t *nodes, dcr__owners_t *owners)
{
    if (nodes->ops) nodes->ops->destroy(nodes->impl);
    if (owners->ops) owners->ops->destroy(owners->impl);
    nodes->ops = NULL;
    owners->ops = NULL;
}
