/* Cluster descriptions: read, resolved and echoed (sim/description.h). */
#include "sim/description.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/readfile.h"
#include "workloads/model/model.h"

#define DCR__DESC_FILE_MAX (1 << 20)

static bool dcr__is_path(const char *what)
{
    size_t n = strlen(what);
    return strchr(what, '/') || (n > 5 && !strcmp(what + n - 5, ".json"));
}

static dcr_status_t dcr__preset_name_ok(const char *kind, const char *name)
{
    if (!*name || strlen(name) > 64)
        return dcr_error_set(DCR_EINVAL, "%s \"%s\": bad name", kind, name);
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
            return dcr_error_set(DCR_EINVAL,
                                 "%s \"%s\": a preset name is [a-z0-9-], a file needs a '/' or "
                                 ".json",
                                 kind, name);
    return DCR_OK;
}

dcr_status_t dcr_sim_data_path(const char *env, const char *sub, const char *name, char *buf,
                               size_t len)
{
    const char *dir = getenv(env);
    char rel[64], data[4096];
    snprintf(rel, sizeof(rel), "sim/%s", sub);
    if (!dir || !*dir) dir = dcr_data_dir(rel, rel, data, sizeof(data));
    int n = dir ? snprintf(buf, len, "%s/%s.json", dir, name) : -1;
    if (n < 0 || (size_t)n >= len)
        return dcr_error_set(DCR_EINVAL, "sim: path longer than %zu bytes", len);
    return DCR_OK;
}

dcr_status_t dcr_sim_description_preset_path(const char *name, char *buf, size_t len)
{
    DCR_CHECK(dcr__preset_name_ok("cluster", name));
    return dcr_sim_data_path("DCR_SIM_CLUSTERS_DIR", "clusters", name, buf, len);
}

dcr_status_t dcr_sim_description_load(const char *what, dcr_sim_description_t *d)
{
    char path[4096];
    if (dcr__is_path(what)) {
        if (strlen(what) >= sizeof(path))
            return dcr_error_set(DCR_EINVAL, "cluster: path longer than %zu bytes", sizeof(path));
        snprintf(path, sizeof(path), "%s", what);
    } else {
        DCR_CHECK(dcr_sim_description_preset_path(what, path, sizeof(path)));
    }
    char *text = NULL;
    DCR_CHECK(dcr_sim_read_regular("cluster", path, DCR__DESC_FILE_MAX, &text));
    dcr_status_t st = dcr_sim_description_parse(text, path, d);
    free(text);
    if (st == DCR_OK) snprintf(d->source, sizeof(d->source), "%s", path);
    return st;
}

/* ---- parsing ------------------------------------------------------------------ */

static dcr_status_t dcr__field_index(const char *key, size_t *i_p)
{
    for (size_t i = 0; i < dcr_sim_cluster_nfields(); i++)
        if (!strcmp(dcr_sim_cluster_field_name(i), key)) {
            *i_p = i;
            return DCR_OK;
        }
    return DCR_EINVAL;
}

static dcr_status_t dcr__parse_assumptions(json_t *a, const char *origin, dcr_sim_description_t *d)
{
    if (!json_is_object(a))
        return dcr_error_set(DCR_EPARSE, "%s: \"assumptions\" must be an object", origin);
    const char *key;
    json_t *v;
    json_object_foreach(a, key, v)
    {
        size_t i;
        bool known = dcr__field_index(key, &i) == DCR_OK || !strcmp(key, "calibration") ||
                     !strcmp(key, "ack_rtt") || !strcmp(key, "general");
        if (!known)
            return dcr_error_set(DCR_EPARSE, "%s: assumptions: \"%s\" is not a field", origin, key);
        if (!json_is_string(v))
            return dcr_error_set(DCR_EPARSE, "%s: assumptions.%s must be a string", origin, key);
        if (d->nnotes >= DCR_SIM_DESC_NOTES)
            return dcr_error_set(DCR_EPARSE, "%s: more than %d assumptions", origin,
                                 DCR_SIM_DESC_NOTES);
        snprintf(d->note_key[d->nnotes], sizeof(d->note_key[0]), "%s", key);
        snprintf(d->note[d->nnotes], sizeof(d->note[0]), "%s", json_string_value(v));
        d->nnotes++;
    }
    return DCR_OK;
}

static dcr_status_t dcr__parse_fields(json_t *root, const char *origin, dcr_sim_description_t *d)
{
    for (size_t i = 0; i < dcr_sim_cluster_nfields(); i++) {
        const char *key = dcr_sim_cluster_field_name(i);
        json_t *v = json_object_get(root, key);
        if (!v) return dcr_error_set(DCR_EPARSE, "%s: missing field \"%s\"", origin, key);
        if (!json_is_number(v))
            return dcr_error_set(DCR_EPARSE, "%s: \"%s\" must be a number", origin, key);
        dcr_status_t st = dcr_sim_cluster_set(&d->cluster, key, json_number_value(v));
        if (st != DCR_OK) {
            dcr_error_prefix("%s: ", origin);
            return st;
        }
    }
    json_t *ack = json_object_get(root, "ack_rtt");
    if (!json_is_boolean(ack))
        return dcr_error_set(DCR_EPARSE, "%s: \"ack_rtt\" must be true or false", origin);
    d->cluster.ack_rtt = json_is_true(ack);
    return DCR_OK;
}

static dcr_status_t dcr__parse_root(json_t *root, const char *origin, dcr_sim_description_t *d)
{
    if (!json_is_object(root)) return dcr_error_set(DCR_EPARSE, "%s: not a JSON object", origin);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        size_t i;
        bool known = dcr__field_index(key, &i) == DCR_OK;
        static const char *const other[] = {"format",      "version", "name",
                                            "calibration", "ack_rtt", "assumptions"};
        for (size_t k = 0; !known && k < sizeof(other) / sizeof(other[0]); k++)
            known = !strcmp(key, other[k]);
        if (!known) return dcr_error_set(DCR_EPARSE, "%s: unknown key \"%s\"", origin, key);
    }
    const char *format = json_string_value(json_object_get(root, "format"));
    if (!format || strcmp(format, "dcr-cluster") ||
        json_integer_value(json_object_get(root, "version")) != 1)
        return dcr_error_set(DCR_EPARSE,
                             "%s: expected \"format\": \"dcr-cluster\" and \"version\": 1", origin);
    const char *name = json_string_value(json_object_get(root, "name"));
    const char *cal = json_string_value(json_object_get(root, "calibration"));
    if (!cal || !*cal)
        return dcr_error_set(DCR_EPARSE, "%s: \"calibration\" must name the stage costs", origin);
    snprintf(d->name, sizeof(d->name), "%s", name ? name : "(unnamed)");
    snprintf(d->calibration, sizeof(d->calibration), "%s", cal);
    DCR_CHECK(dcr__parse_fields(root, origin, d));
    json_t *a = json_object_get(root, "assumptions");
    if (a) DCR_CHECK(dcr__parse_assumptions(a, origin, d));
    dcr_status_t st = dcr_sim_cluster_validate(&d->cluster);
    if (st != DCR_OK) dcr_error_prefix("%s: ", origin);
    return st;
}

dcr_status_t dcr_sim_description_parse(const char *text, const char *origin,
                                       dcr_sim_description_t *d)
{
    memset(d, 0, sizeof(*d));
    d->cluster = dcr_sim_cluster_default();
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dcr_error_set(DCR_EPARSE, "%s: line %d: %s", origin, err.line, err.text);
    dcr_status_t st = dcr__parse_root(root, origin, d);
    json_decref(root);
    return st;
}

dcr_status_t dcr_sim_description_calibration_path(const dcr_sim_description_t *d, char *buf,
                                                  size_t len)
{
    const char *cal = d->calibration;
    if (!dcr__is_path(cal)) {
        DCR_CHECK(dcr__preset_name_ok("calibration", cal));
        return dcr_sim_data_path("DCR_SIM_CALIBRATIONS_DIR", "calibrations", cal, buf, len);
    }
    int n;
    const char *slash = strrchr(d->source, '/');
    if (cal[0] == '/' || !slash)
        n = snprintf(buf, len, "%s", cal);
    else /* relative to the description's own folder */
        n = snprintf(buf, len, "%.*s/%s", (int)(slash - d->source), d->source, cal);
    if (n < 0 || (size_t)n >= len)
        return dcr_error_set(DCR_EINVAL, "cluster: calibration path longer than %zu bytes", len);
    return DCR_OK;
}

void dcr_sim_description_overridden(dcr_sim_description_t *d, const char *field)
{
    /* A flag's name (cross-gbps) is written as its field's (cross_gbps). */
    char name[128];
    snprintf(name, sizeof(name), "%s", field);
    for (char *c = name; *c && *c != ' '; c++)
        if (*c == '-') *c = '_';
    char key[128];
    snprintf(key, sizeof(key), "%.*s", (int)strcspn(name, " "), name);
    if (strstr(d->overridden, key)) return; /* already named */
    size_t n = strlen(d->overridden);
    snprintf(d->overridden + n, sizeof(d->overridden) - n, "%s%s", n ? ", " : "", name);
}

/* ---- the echo ---------------------------------------------------------------- */

json_t *dcr_sim_description_json(const dcr_sim_description_t *d)
{
    json_t *j =
        json_pack("{s:s,s:i,s:s,s:s,s:s}", "format", "dcr-cluster", "version", 1, "name", d->name,
                  "calibration", d->calibration, "source", d->source[0] ? d->source : "(built in)");
    for (size_t i = 0; i < dcr_sim_cluster_nfields(); i++) {
        double v = dcr_sim_cluster_get(&d->cluster, i);
        json_object_set_new(j, dcr_sim_cluster_field_name(i),
                            dcr_sim_cluster_field_is_int(i) ? json_integer((json_int_t)v)
                                                            : json_real(v));
    }
    json_object_set_new(j, "ack_rtt", json_boolean(d->cluster.ack_rtt));
    if (d->cluster.platform_xml)
        json_object_set_new(j, "platform_xml", json_string(d->cluster.platform_xml));
    json_t *a = json_object();
    for (int i = 0; i < d->nnotes; i++)
        json_object_set_new(a, d->note_key[i], json_string(d->note[i]));
    json_object_set_new(j, "assumptions", a);
    json_object_set_new(j, "overridden", json_string(d->overridden));
    return j;
}

void dcr_sim_description_print(const dcr_sim_description_t *d, FILE *out)
{
    const dcr_sim_cluster_t *c = &d->cluster;
    fprintf(out, "cluster: %s (%s; calibration %s)%s%s\n", d->name,
            d->source[0] ? d->source : "built in", d->calibration,
            d->overridden[0] ? "; overridden: " : "", d->overridden);
    fprintf(out,
            "  %d x %d training, %d x %d rollout; cross %.4g Gbps per node, %.4g per flow, local "
            "%.4g, fabric %.4g, relay root %.4g (0: none); latency %.4g ms (local %.4g)\n",
            c->train_nodes, c->train_gpus, c->rollout_nodes, c->rollout_gpus, c->cross_gbps,
            c->flow_gbps, c->local_gbps, c->fabric_gbps, c->relay_gbps, c->latency_ms,
            c->local_latency_ms);
    fprintf(out,
            "  store: %.4g Gbps (0: unlimited), %d downloads per node, %.4g ms per request, "
            "listing %.4g ms, PUT %.4g ms, %.4g GET/s and %.4g PUT/s per prefix x %d prefixes "
            "(0: unlimited); reference objects %.4g MiB\n",
            c->store_gbps, c->store_flows, c->store_latency_ms, c->store_list_ms, c->store_put_ms,
            c->store_get_rps, c->store_put_rps, c->store_prefixes, c->ref_object_mib);
    fprintf(out,
            "  queues: relay fanout %d, hop queue %d, staging %d, owner queue %d; startup %.4g ms; "
            "shared cores %d; ack rtt %s\n",
            c->fanout, c->queue_payloads, c->staging_payloads, c->owner_queue, c->startup_ms,
            c->shared_cores, c->ack_rtt ? "yes" : "no");
    for (int i = 0; i < d->nnotes; i++)
        fprintf(out, "  assumed %s: %s\n", d->note_key[i], d->note[i]);
}
