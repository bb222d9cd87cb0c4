/* The generated SimGrid platform of a cluster description. */
#include "sim/platform.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/outpath.h"

void dcr_sim_host_train(char *buf, size_t cap, int node, int gpu)
{
    snprintf(buf, cap, "train-%d-%d", node, gpu);
}

void dcr_sim_host_rollout(char *buf, size_t cap, int node)
{
    snprintf(buf, cap, "rollout-%d", node);
}

int dcr_sim_relay_parent(int node, int fanout)
{
    return node == 0 ? -1 : (node - 1) / fanout;
}

/* Gbps to SimGrid's bytes per second; 0 is unlimited. */
static double dcr__bps(double gbps)
{
    return gbps > 0 ? gbps * 1e9 / 8.0 : DCR_SIM_UNLIMITED_BPS;
}

static void dcr__link(FILE *out, const char *id, double gbps, double latency_ms, const char *policy)
{
    fprintf(out, "    <link id=\"%s\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"%s%s%s/>\n", id,
            dcr__bps(gbps), latency_ms / 1e3, policy ? " sharing_policy=\"" : "",
            policy ? policy : "", policy ? "\"" : "");
}

static void dcr__route(FILE *out, const char *src, const char *dst, const char *const *links, int n)
{
    fprintf(out, "    <route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", src, dst);
    for (int i = 0; i < n; i++) fprintf(out, "<link_ctn id=\"%s\"/>", links[i]);
    fprintf(out, "</route>\n");
}

static void dcr__hosts(const dcr_sim_cluster_t *c, FILE *out)
{
    char name[64];
    for (int n = 0; n < c->train_nodes; n++)
        for (int g = 0; g < c->train_gpus; g++) {
            dcr_sim_host_train(name, sizeof(name), n, g);
            /* Two cores: the owner's constructor thread and its sender. */
            fprintf(out, "    <host id=\"%s\" speed=\"1Gf\" core=\"2\"/>\n", name);
        }
    for (int i = 0; i < c->rollout_nodes; i++) {
        dcr_sim_host_rollout(name, sizeof(name), i);
        fprintf(out, "    <host id=\"%s\" speed=\"1Gf\" core=\"%d\"/>\n", name, c->rollout_gpus);
    }
    fprintf(out, "    <host id=\"store\" speed=\"1Gf\" core=\"1\"/>\n");
    if (c->shared_cores > 0)
        fprintf(out, "    <host id=\"cpu\" speed=\"1Gf\" core=\"%d\"/>\n", c->shared_cores);
}

static void dcr__links(const dcr_sim_cluster_t *c, FILE *out)
{
    char id[64];
    for (int n = 0; n < c->train_nodes; n++) {
        snprintf(id, sizeof(id), "tx-%d", n);
        dcr__link(out, id, c->cross_gbps, 0, NULL);
        snprintf(id, sizeof(id), "fab-out-%d", n);
        dcr__link(out, id, c->shared_cores > 0 ? 0 : c->fabric_gbps, 0, NULL);
        snprintf(id, sizeof(id), "fab-in-%d", n);
        dcr__link(out, id, c->shared_cores > 0 ? 0 : c->fabric_gbps, 0, NULL);
    }
    for (int i = 0; i < c->rollout_nodes; i++) {
        snprintf(id, sizeof(id), "rx-%d", i);
        dcr__link(out, id, c->cross_gbps, 0, NULL);
        snprintf(id, sizeof(id), "lo-out-%d", i);
        /* The fast path's chain: a node's one simulated child gets the share
         * of the local link that each of its children gets in the full tree. */
        int kids = c->agg_chain ? dcr_sim_cluster_chain_kids(c, i) : 1;
        double local = c->local_gbps > 0 && kids > 1 ? c->local_gbps / kids : c->local_gbps;
        dcr__link(out, id, local, c->local_latency_ms, NULL);
        snprintf(id, sizeof(id), "lo-in-%d", i);
        dcr__link(out, id, c->local_gbps, 0, NULL);
    }
    /* The store's ingress (uploads) and egress (downloads), each direction
     * at store_gbps, only when the store has a rate: an unlimited shared
     * link never binds, yet would tie every store flow of the cluster into
     * one max-min system (each flow's end re-solving all of them). The fast
     * path's nodes get their share of the egress. */
    if (c->store_gbps > 0) {
        double egress = c->store_gbps;
        if (c->agg_nodes > 0) egress *= (double)c->rollout_nodes / c->agg_nodes;
        dcr__link(out, "store-in", c->store_gbps, 0, NULL);
        dcr__link(out, "store-out", egress, 0, NULL);
    }
    /* Only owners' streams to the relay root cross it; the reference's
     * downloads to node 0 do not. */
    dcr__link(out, "relay-in", c->relay_gbps, 0, NULL);
}

/* Per-flow caps: FATPIPE links, on which every flow gets the full rate on
 * its own (a cap, not a shared pipe), carrying the one-way latency (and the
 * store's per-request latency on store routes). One per node and route
 * kind rather than one for the cluster: the caps and latencies are the
 * same, and flows of different nodes stay independent in the solver. */
static void dcr__flow_caps(const dcr_sim_cluster_t *c, FILE *out)
{
    char id[64];
    double store_ms = c->latency_ms + c->store_latency_ms;
    for (int n = 0; n < c->train_nodes; n++) {
        snprintf(id, sizeof(id), "xflow-tx-%d", n);
        dcr__link(out, id, c->flow_gbps, c->latency_ms, "FATPIPE");
        snprintf(id, sizeof(id), "xstore-tx-%d", n);
        dcr__link(out, id, c->flow_gbps, store_ms, "FATPIPE");
        snprintf(id, sizeof(id), "nvlink-%d", n);
        dcr__link(out, id, 0, 0, "FATPIPE");
    }
    for (int i = 0; i < c->rollout_nodes; i++) {
        snprintf(id, sizeof(id), "xstore-rx-%d", i);
        dcr__link(out, id, c->flow_gbps, store_ms, "FATPIPE");
    }
}

static void dcr__cross_routes(const dcr_sim_cluster_t *c, FILE *out)
{
    char t[64], r[64], tx[64], rx[64], xf[64], xs[64], rx0[64] = "rx-0";
    bool store_rate = c->store_gbps > 0;
    for (int n = 0; n < c->train_nodes; n++) {
        snprintf(tx, sizeof(tx), "tx-%d", n);
        snprintf(xf, sizeof(xf), "xflow-tx-%d", n);
        snprintf(xs, sizeof(xs), "xstore-tx-%d", n);
        for (int g = 0; g < c->train_gpus; g++) {
            dcr_sim_host_train(t, sizeof(t), n, g);
            const char *up[] = {tx, xs, "store-in"}, *root[] = {tx, xf, rx0, "relay-in"};
            dcr__route(out, t, "store", up, store_rate ? 3 : 2);
            dcr__route(out, t, "rollout-0", root, 4);
        }
    }
    for (int i = 0; i < c->rollout_nodes; i++) {
        dcr_sim_host_rollout(r, sizeof(r), i);
        snprintf(rx, sizeof(rx), "rx-%d", i);
        snprintf(xs, sizeof(xs), "xstore-rx-%d", i);
        const char *down[] = {"store-out", xs, rx};
        dcr__route(out, "store", r, store_rate ? down : down + 1, store_rate ? 3 : 2);
    }
}

static void dcr__tree_routes(const dcr_sim_cluster_t *c, FILE *out)
{
    char from[64], to[64], lo[64], li[64];
    for (int i = 1; i < c->rollout_nodes; i++) {
        int p = c->agg_chain ? i - 1 : dcr_sim_relay_parent(i, c->fanout);
        dcr_sim_host_rollout(from, sizeof(from), p);
        dcr_sim_host_rollout(to, sizeof(to), i);
        snprintf(lo, sizeof(lo), "lo-out-%d", p);
        snprintf(li, sizeof(li), "lo-in-%d", i);
        const char *links[] = {lo, li};
        dcr__route(out, from, to, links, 2);
    }
}

static void dcr__part_routes(const dcr_sim_cluster_t *c, const uint8_t *pairs, FILE *out)
{
    int world = c->train_nodes * c->train_gpus;
    char a[64], b[64], fo[64], fi[64];
    for (int s = 0; pairs && s < world; s++) {
        for (int d = 0; d < world; d++) {
            if (s == d || !pairs[(size_t)s * (size_t)world + (size_t)d]) continue;
            int sn = s / c->train_gpus, dn = d / c->train_gpus;
            dcr_sim_host_train(a, sizeof(a), sn, s % c->train_gpus);
            dcr_sim_host_train(b, sizeof(b), dn, d % c->train_gpus);
            snprintf(fo, sizeof(fo), "fab-out-%d", sn);
            snprintf(fi, sizeof(fi), "fab-in-%d", dn);
            char nv[64];
            snprintf(nv, sizeof(nv), "nvlink-%d", sn);
            const char *inter[] = {fo, fi}, *intra[] = {nv};
            if (sn == dn)
                dcr__route(out, a, b, intra, 1);
            else
                dcr__route(out, a, b, inter, 2);
        }
    }
}

dcr_status_t dcr_sim_platform_write(const dcr_sim_cluster_t *c, const uint8_t *part_pairs,
                                    FILE *out)
{
    DCR_CHECK(dcr_sim_cluster_validate(c));
    fprintf(
        out,
        "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n");
    fprintf(out, "<!-- generated by dcr sim: %d x %d training, %d x %d rollout -->\n",
            c->train_nodes, c->train_gpus, c->rollout_nodes, c->rollout_gpus);
    fprintf(out, "<platform version=\"4.1\">\n  <zone id=\"dcr\" routing=\"Full\">\n");
    dcr__hosts(c, out);
    dcr__links(c, out);
    dcr__flow_caps(c, out);
    dcr__cross_routes(c, out);
    dcr__tree_routes(c, out);
    dcr__part_routes(c, part_pairs, out);
    fprintf(out, "  </zone>\n</platform>\n");
    if (ferror(out))
        return dcr_error_set(DCR_EIO, "sim platform: write failed: %s", strerror(errno));
    return DCR_OK;
}

dcr_status_t dcr_sim_platform_tmpfile(const dcr_sim_cluster_t *c, const uint8_t *part_pairs,
                                      char **path_p)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char path[4096];
    /* The pid in the name lets the next run remove a killed run's file. */
    dcr_outpath_sweep(tmp, "dcr-platform-");
    snprintf(path, sizeof(path), "%s/dcr-platform-%ld-XXXXXX", tmp, (long)getpid());
    int fd = mkstemp(path);
    if (fd < 0) return dcr_error_set(DCR_EIO, "sim platform: %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return dcr_error_set(DCR_EIO, "sim platform: %s: %s", path, strerror(errno));
    }
    dcr_status_t st = dcr_sim_platform_write(c, part_pairs, f);
    if (fclose(f) != 0 && st == DCR_OK)
        st = dcr_error_set(DCR_EIO, "sim platform: closing %s", path);
    char *copy = st == DCR_OK ? strdup(path) : NULL;
    if (st == DCR_OK && !copy) st = dcr_error_set(DCR_ENOMEM, "sim platform path");
    if (st != DCR_OK) {
        unlink(path);
        return st;
    }
    *path_p = copy;
    return DCR_OK;
}
