/* The group registry and wrappers. Every call from the engine reaches a
 * backend through one wrapper here: it validates arguments once for all
 * backends (so a slot can trust them). Backends registered from outside the
 * engine (faults/'s "faulty:<name>", which wraps the table its header's
 * parent names) join the built-in ones in the registry. */
#include "group-internal.h"

#include "core/core-internal.h"

#include <string.h>

/* Adding a backend is one line here (and one in group-internal.h). */
static const void *const dcr__group_backends[] = {
    &dcr__group_inproc_ops,
#ifdef DCR_HAVE_MPI
    &dcr__group_mpi_ops,
#endif
};
/* The built-in backends, then those registered at run time
 * (dcr_group_register). */
static dcr__registry_t dcr__registry =
    DCR__REGISTRY_INIT("group backend", dcr__group_backends,
                       sizeof dcr__group_backends / sizeof dcr__group_backends[0]);

size_t dcr_group_backend_count(void)
{
    return dcr__registry_count(&dcr__registry);
}

const char *dcr_group_backend_name(size_t i)
{
    const dcr_group_ops_t *ops = dcr__registry_at(&dcr__registry, i);
    return ops != NULL ? ops->hdr.name : NULL;
}

const dcr_group_ops_t *dcr_group_find(const char *name)
{
    return dcr__registry_find(&dcr__registry, name);
}

dcr_status_t dcr_group_register(const dcr_group_ops_t *o)
{
    if (o == NULL || o->hdr.version != DCR_GROUP_OPS_VERSION || o->hdr.name == NULL ||
        o->hdr.name[0] == '\0' || o->create == NULL || o->rank == NULL || o->size == NULL ||
        o->send == NULL || o->recv == NULL || o->release == NULL || o->destroy == NULL) {
        return dcr_error_set(DCR_EINVAL,
                             "group_register: a backend needs version %d, a name and every slot",
                             DCR_GROUP_OPS_VERSION);
    }
    return dcr__registry_add(&dcr__registry, o);
}

dcr_status_t dcr_group_create(const char *backend, int size, dcr_group_t **endpoints, int *count_p)
{
    if (backend == NULL || endpoints == NULL || count_p == NULL) {
        return dcr_error_set(DCR_EINVAL,
                             "group_create: backend, endpoints and count_p are required");
    }
    const dcr_group_ops_t *ops = dcr_group_find(backend);
    if (ops == NULL) {
        if (strcmp(backend, "mpi") == 0) {
            return dcr_error_set(DCR_ENOTFOUND, "group backend 'mpi' is not compiled into this "
                                                "build (CMake found no MPI; DCR_WITH_MPI=ON)");
        }
        return dcr__registry_not_found(&dcr__registry, backend);
    }
    if (ops->hdr.version != DCR_GROUP_OPS_VERSION) {
        return dcr_error_set(DCR_EUNSUPPORTED, "group backend '%s' has ops version %u, expected %d",
                             backend, ops->hdr.version, DCR_GROUP_OPS_VERSION);
    }
    if (size < 0 || (size == 0 && !ops->props.cross_process)) {
        return dcr_error_set(DCR_EINVAL, "group backend '%s': size %d, expected %s", backend, size,
                             ops->props.cross_process ? ">= 0" : ">= 1");
    }
    int count = 0;
    DCR_CHECK(ops->create(ops, size, endpoints, &count));
    *count_p = count;
    return DCR_OK;
}

int dcr_group_rank(const dcr_group_t *g)
{
    return g->ops->rank(g);
}

int dcr_group_size(const dcr_group_t *g)
{
    return g->ops->size(g);
}

const dcr_group_ops_t *dcr_group_backend(const dcr_group_t *g)
{
    return g->ops;
}

static dcr_status_t dcr__check_tag(const dcr_group_t *g, const char *op, int tag)
{
    if (tag < 0 || tag > g->ops->props.max_tag) {
        return dcr_error_set(DCR_EINVAL, "group %s on rank %d: tag %d, expected 0..%d", op,
                             g->ops->rank(g), tag, g->ops->props.max_tag);
    }
    return DCR_OK;
}

dcr_status_t dcr_group_send(dcr_group_t *g, int dst, int tag, const void *buf, size_t len)
{
    int size = g->ops->size(g);
    if (dst < 0 || dst >= size) {
        return dcr_error_set(DCR_EINVAL, "group send from rank %d to rank %d: expected 0..%d",
                             g->ops->rank(g), dst, size - 1);
    }
    DCR_CHECK(dcr__check_tag(g, "send", tag));
    if (len > g->ops->props.max_message) {
        return dcr_error_set(DCR_EINVAL, "group send of %zu bytes: backend '%s' takes at most %zu",
                             len, g->ops->hdr.name, g->ops->props.max_message);
    }
    if (buf == NULL && len > 0) {
        return dcr_error_set(DCR_EINVAL, "group send of %zu bytes from a NULL buffer", len);
    }
    return g->ops->send(g, dst, tag, buf, len);
}

dcr_status_t dcr_group_recv(dcr_group_t *g, int tag, int timeout_ms, dcr_group_msg_t *out_p)
{
    DCR_CHECK(dcr__check_tag(g, "recv", tag));
    if (out_p == NULL) return dcr_error_set(DCR_EINVAL, "group recv: out_p is required");
    return g->ops->recv(g, tag, timeout_ms, out_p);
}

void dcr_group_release(dcr_group_t *g, dcr_group_msg_t *msg)
{
    if (msg && msg->data) g->ops->release(g, msg);
}

void dcr_group_destroy(dcr_group_t *g)
{
    if (g) g->ops->destroy(g);
}
