/* Which implementation serves each side of the coordinator's parties
 * (coord-parties.h): the one place that reads remote_nodes and
 * remote_owners. */
#include "coord-parties.h"

dcr_status_t dcr__coord_parties_open(const dcr__nodes_env_t *nenv, const dcr__owners_env_t *oenv,
                                     dcr__nodes_t *nodes_p, dcr__owners_t *owners_p)
{
    const dcr_coord_config_t *cfg = nenv->cfg;
    /* Owner processes learn of an attempt from records that only the remote
     * rollout side writes (the coordinator's "opened"). */
    if (cfg->remote_owners && !cfg->remote_nodes)
        return dcr_error_set(DCR_EINVAL, "coordinator: owners as processes need rollout nodes as "
                                         "processes (remote_nodes)");
    dcr__nodes_t nodes = {cfg->remote_nodes ? &dcr__nodes_remote : &dcr__nodes_local, NULL};
    dcr__owners_t owners = {cfg->remote_owners ? &dcr__owners_remote : &dcr__owners_local, NULL};
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
