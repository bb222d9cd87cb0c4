/* Calibration files: validation, interpolation, JSON read and write. The
 * measurements themselves are in calibrate_measure.c. */
#include "sim/calibrate.h"
#include "sim/readfile.h"

#include "sim/cluster.h"

#include <stddef.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcr/outpath.h"

#define DCR__CAL_FORMAT  "dcr-calibration"
#define DCR__CAL_VERSION 1
/* A calibration file is a few kilobytes; anything far larger is not one. */
#define DCR__CAL_FILE_MAX ((long)1 << 20)

/* One scalar field: its JSON key and where it lives in the struct. */
typedef struct dcr__cal_field {
    const char *key;
    size_t offset;
} dcr__cal_field_t;

/* clang-format off */
#define DCR__CAL_SCALAR(name) {#name, offsetof(dcr_sim_calibration_t, name)}
/* clang-format on */
static const dcr__cal_field_t dcr__cal_scalars[] = {
    DCR__CAL_SCALAR(project_s_per_record),
    DCR__CAL_SCALAR(construct_s_per_item),
    DCR__CAL_SCALAR(residual_s_per_byte),
    DCR__CAL_SCALAR(copy_s_per_byte),
    DCR__CAL_SCALAR(bytes_per_item),
    DCR__CAL_SCALAR(decode_s_per_byte),
    DCR__CAL_SCALAR(decode_s_per_payload),
    DCR__CAL_SCALAR(apply_s_per_record),
    DCR__CAL_SCALAR(apply_s_per_item),
    DCR__CAL_SCALAR(apply_s_per_full_byte),
    DCR__CAL_SCALAR(ack_s),
    DCR__CAL_SCALAR(commit_s),
    DCR__CAL_SCALAR(store_put_s),
    DCR__CAL_SCALAR(relay_hop_s),
    DCR__CAL_SCALAR(relay_hop_s_per_byte),
};
#define DCR__CAL_NSCALARS (sizeof(dcr__cal_scalars) / sizeof(dcr__cal_scalars[0]))

const char *const dcr_sim_rollout_keys[DCR_SIM_ROLLOUT_NKEYS] = {
    "decode_s_per_byte",     "decode_s_per_payload", "apply_s_per_record",  "apply_s_per_item",
    "apply_s_per_full_byte", "relay_hop_s",          "relay_hop_s_per_byte"};

/* Bit of a rollout figure in rollout_measured, or -1 for an owner-side one. */
static int dcr__rollout_bit(const char *key)
{
    for (int i = 0; i < DCR_SIM_ROLLOUT_NKEYS; i++)
        if (!strcmp(dcr_sim_rollout_keys[i], key)) return i;
    return -1;
}

/* clang-format off */
#define DCR__GPU(name) {#name, offsetof(dcr_sim_rollout_gpu_t, name)}
/* clang-format on */
static const dcr__cal_field_t dcr__gpu_fields[] = {
    DCR__GPU(zstd_gbps_per_core), DCR__GPU(digest_gbps_per_core),
    DCR__GPU(expansion),          DCR__GPU(cores_per_receiver),
    DCR__GPU(h2d_gbps),           DCR__GPU(h2d_bytes_per_record),
    DCR__GPU(hbm_gbps),           DCR__GPU(rmw_bytes_per_record),
    DCR__GPU(loader_s_per_item),  DCR__GPU(payload_s),
    DCR__GPU(relay_hop_s),        DCR__GPU(relay_gbps_per_core),
};
#define DCR__NGPU (sizeof(dcr__gpu_fields) / sizeof(dcr__gpu_fields[0]))

static double *dcr__gpu_field(dcr_sim_rollout_gpu_t *g, size_t i)
{
    return (double *)((char *)g + dcr__gpu_fields[i].offset);
}

dcr_status_t dcr_sim_rollout_gpu_costs(const dcr_sim_rollout_gpu_t *g, dcr_sim_calibration_t *cal)
{
    dcr_sim_rollout_gpu_t c = *g;
    for (size_t i = 0; i < DCR__NGPU; i++) {
        double v = *dcr__gpu_field(&c, i);
        if (!(isfinite(v) && v > 0))
            return dcr_error_set(DCR_EINVAL, "calibration: rollout_gpu.%s is %g, expected > 0",
                                 dcr__gpu_fields[i].key, v);
    }
    const double G = 1e9;
    double derived[DCR_SIM_ROLLOUT_NKEYS] = {
        (1 / (c.digest_gbps_per_core * G) + c.expansion / (c.zstd_gbps_per_core * G)) /
            c.cores_per_receiver,
        c.payload_s,
        c.h2d_bytes_per_record / (c.h2d_gbps * G) + c.rmw_bytes_per_record / (c.hbm_gbps * G),
        c.loader_s_per_item,
        2 / (c.hbm_gbps * G),
        c.relay_hop_s,
        1 / (c.relay_gbps_per_core * G),
    };
    double *dst[DCR_SIM_ROLLOUT_NKEYS] = {&cal->decode_s_per_byte,     &cal->decode_s_per_payload,
                                          &cal->apply_s_per_record,    &cal->apply_s_per_item,
                                          &cal->apply_s_per_full_byte, &cal->relay_hop_s,
                                          &cal->relay_hop_s_per_byte};
    for (int i = 0; i < DCR_SIM_ROLLOUT_NKEYS; i++)
        if (!(cal->rollout_measured & (1u << i))) *dst[i] = derived[i];
    cal->has_rollout_gpu = true;
    cal->rollout_gpu = c;
    return DCR_OK;
}

/* clang-format off */
#define DCR__CAL_POINT(name) {#name, offsetof(dcr_sim_cal_point_t, name)}
/* clang-format on */
static const dcr__cal_field_t dcr__cal_point_fields[] = {
    DCR__CAL_POINT(rate),
    DCR__CAL_POINT(detect_s_per_byte),
    DCR__CAL_POINT(encode_s_per_record),
    DCR__CAL_POINT(xor_value_bytes),
    DCR__CAL_POINT(overwrite_value_bytes),
    DCR__CAL_POINT(gap8_bytes),
    DCR__CAL_POINT(gap16_bytes),
};
#define DCR__CAL_NPOINT_FIELDS (sizeof(dcr__cal_point_fields) / sizeof(dcr__cal_point_fields[0]))

static double *dcr__cal_scalar(dcr_sim_calibration_t *cal, size_t i)
{
    return (double *)((char *)cal + dcr__cal_scalars[i].offset);
}

static double dcr__cal_scalar_get(const dcr_sim_calibration_t *cal, size_t i)
{
    return *(const double *)((const char *)cal + dcr__cal_scalars[i].offset);
}

static double *dcr__cal_point_field(dcr_sim_cal_point_t *p, size_t i)
{
    return (double *)((char *)p + dcr__cal_point_fields[i].offset);
}

static double dcr__cal_point_get(const dcr_sim_cal_point_t *p, size_t i)
{
    return *(const double *)((const char *)p + dcr__cal_point_fields[i].offset);
}

/* ---- interpolation and validation ----------------------------------------- */

static double dcr__lerp(double a, double b, double t)
{
    return a + (b - a) * t;
}

dcr_sim_cal_point_t dcr_sim_cal_at(const dcr_sim_calibration_t *cal, double rate)
{
    dcr_sim_cal_point_t out;
    memset(&out, 0, sizeof(out));
    int n = cal->npoints, i = 1;
    if (n <= 0) {
        out.rate = rate;
        return out;
    }
    while (i < n && cal->points[i].rate < rate) i++;
    /* Outside the measured rates the nearest point holds. */
    const dcr_sim_cal_point_t *a = &cal->points[i < n ? i - 1 : n - 1],
                              *b = &cal->points[i < n ? i : n - 1];
    double t = rate <= cal->points[0].rate
                   ? 0
                   : (b->rate > a->rate ? (rate - a->rate) / (b->rate - a->rate) : 1);
    if (rate <= cal->points[0].rate) b = a;
    for (size_t f = 0; f < DCR__CAL_NPOINT_FIELDS; f++) {
        *dcr__cal_point_field(&out, f) =
            dcr__lerp(dcr__cal_point_get(a, f), dcr__cal_point_get(b, f), t);
    }
    out.rate = rate;
    return out;
}

double dcr_sim_cal_size_factor(const dcr_sim_calibration_t *cal, double bytes)
{
    int n = cal->nsizes;
    if (n <= 0) return 1.0;
    const dcr_sim_cal_size_t *z = cal->sizes;
    if (bytes <= z[0].bytes) return z[0].factor;
    if (bytes >= z[n - 1].bytes) return 1.0 + (z[n - 1].factor - 1.0) * (z[n - 1].bytes / bytes);
    int i = 1;
    while (z[i].bytes < bytes) i++;
    double t = log(bytes / z[i - 1].bytes) / log(z[i].bytes / z[i - 1].bytes);
    return dcr__lerp(z[i - 1].factor, z[i].factor, t);
}

/* The largest value a figure named `key` may take: far above any machine,
 * far below what would overflow a simulated clock (a typo such as 1e300
 * must fail here, not as a simulation that never ends). Seconds per byte or
 * record: 1 ms (1 KB/s); seconds per event: 60 s; bytes: 1 MB. */
static double dcr__cal_max(const char *key)
{
    if (strstr(key, "_s_per_")) return 1e-3;
    size_t n = strlen(key);
    if (n >= 2 && !strcmp(key + n - 2, "_s")) return 60;
    if (!strcmp(key, "rate")) return 1;
    return 1e6;
}

static bool dcr__cal_ok(double v, const char *key)
{
    return isfinite(v) && v >= 0 && v <= dcr__cal_max(key);
}

static dcr_status_t dcr__cal_check_points(const dcr_sim_calibration_t *cal)
{
    if (cal->npoints < 1 || cal->npoints > DCR_SIM_CAL_POINTS_MAX)
        return dcr_error_set(DCR_EINVAL, "calibration: points has %d entries, expected 1..%d",
                             cal->npoints, DCR_SIM_CAL_POINTS_MAX);
    for (int i = 0; i < cal->npoints; i++) {
        dcr_sim_cal_point_t p = cal->points[i];
        for (size_t f = 0; f < DCR__CAL_NPOINT_FIELDS; f++)
            if (!dcr__cal_ok(dcr__cal_point_get(&p, f), dcr__cal_point_fields[f].key))
                return dcr_error_set(DCR_EINVAL, "calibration: points[%d].%s is %g, expected 0..%g",
                                     i, dcr__cal_point_fields[f].key, dcr__cal_point_get(&p, f),
                                     dcr__cal_max(dcr__cal_point_fields[f].key));
        if (p.rate <= 0 || p.rate > 1)
            return dcr_error_set(DCR_EINVAL, "calibration: points[%d].rate is %g, expected (0, 1]",
                                 i, p.rate);
        if (i > 0 && p.rate <= cal->points[i - 1].rate)
            return dcr_error_set(DCR_EINVAL, "calibration: points[%d].rate %g does not increase", i,
                                 p.rate);
        if (p.xor_value_bytes <= 0 || p.overwrite_value_bytes <= 0)
            return dcr_error_set(DCR_EINVAL, "calibration: points[%d]: value bytes must be > 0", i);
    }
    return DCR_OK;
}

static dcr_status_t dcr__cal_check_sizes(const dcr_sim_calibration_t *cal)
{
    if (cal->nsizes < 0 || cal->nsizes > DCR_SIM_CAL_POINTS_MAX)
        return dcr_error_set(DCR_EINVAL,
                             "calibration: payload_factors has %d entries, expected 0..%d",
                             cal->nsizes, DCR_SIM_CAL_POINTS_MAX);
    for (int i = 0; i < cal->nsizes; i++) {
        dcr_sim_cal_size_t z = cal->sizes[i];
        if (!isfinite(z.bytes) || z.bytes <= 0 || (i > 0 && z.bytes <= cal->sizes[i - 1].bytes))
            return dcr_error_set(
                DCR_EINVAL, "calibration: payload_factors[%d].bytes %g must be > 0 and increase", i,
                z.bytes);
        if (!isfinite(z.factor) || z.factor < 0.5 || z.factor > 10)
            return dcr_error_set(DCR_EINVAL,
                                 "calibration: payload_factors[%d].factor %g is outside [0.5, 10]",
                                 i, z.factor);
    }
    return DCR_OK;
}

dcr_status_t dcr_sim_cal_validate(const dcr_sim_calibration_t *cal)
{
    DCR_CHECK(dcr__cal_check_points(cal));
    DCR_CHECK(dcr__cal_check_sizes(cal));
    for (size_t i = 0; i < DCR__CAL_NSCALARS; i++)
        if (!dcr__cal_ok(dcr__cal_scalar_get(cal, i), dcr__cal_scalars[i].key))
            return dcr_error_set(DCR_EINVAL, "calibration: %s is %g, expected 0..%g",
                                 dcr__cal_scalars[i].key, dcr__cal_scalar_get(cal, i),
                                 dcr__cal_max(dcr__cal_scalars[i].key));
    if (cal->cores < 1 || cal->cores > 4096)
        return dcr_error_set(DCR_EINVAL, "calibration: cores is %d, expected 1..4096", cal->cores);
    return DCR_OK;
}

/* ---- JSON in ---------------------------------------------------------------- */

static dcr_status_t dcr__cal_number(json_t *obj, const char *key, const char *where, double *out_p)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return dcr_error_set(DCR_EPARSE, "%s: missing key \"%s\"", where, key);
    if (!json_is_number(v))
        return dcr_error_set(DCR_EPARSE, "%s: \"%s\" must be a number", where, key);
    *out_p = json_number_value(v);
    return DCR_OK;
}

/* Rejects keys the format does not define: a misspelled key would otherwise
 * leave a figure at its default without a word. */
static dcr_status_t dcr__cal_known_keys(json_t *obj, const char *where,
                                        const dcr__cal_field_t *fields, size_t n,
                                        const char *const *extra)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool known = false;
        for (size_t i = 0; i < n && !known; i++) known = !strcmp(key, fields[i].key);
        for (size_t i = 0; extra && extra[i] && !known; i++) known = !strcmp(key, extra[i]);
        if (!known) return dcr_error_set(DCR_EPARSE, "%s: unknown key \"%s\"", where, key);
    }
    return DCR_OK;
}

static dcr_status_t dcr__cal_parse_points(json_t *arr, const char *origin,
                                          dcr_sim_calibration_t *cal)
{
    char where[512];
    if (!json_is_array(arr))
        return dcr_error_set(DCR_EPARSE, "%s: \"points\" must be an array", origin);
    size_t n = json_array_size(arr);
    if (n < 1 || n > DCR_SIM_CAL_POINTS_MAX)
        return dcr_error_set(DCR_EPARSE, "%s: \"points\" has %zu entries, expected 1..%d", origin,
                             n, DCR_SIM_CAL_POINTS_MAX);
    cal->npoints = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(arr, i);
        snprintf(where, sizeof(where), "%s: points[%zu]", origin, i);
        if (!json_is_object(p)) return dcr_error_set(DCR_EPARSE, "%s must be an object", where);
        DCR_CHECK(
            dcr__cal_known_keys(p, where, dcr__cal_point_fields, DCR__CAL_NPOINT_FIELDS, NULL));
        for (size_t f = 0; f < DCR__CAL_NPOINT_FIELDS; f++)
            DCR_CHECK(dcr__cal_number(p, dcr__cal_point_fields[f].key, where,
                                      dcr__cal_point_field(&cal->points[i], f)));
    }
    return DCR_OK;
}

static const dcr__cal_field_t dcr__cal_size_fields[] = {
    {"bytes", offsetof(dcr_sim_cal_size_t, bytes)},
    {"factor", offsetof(dcr_sim_cal_size_t, factor)},
};

static dcr_status_t dcr__cal_parse_sizes(json_t *arr, const char *origin,
                                         dcr_sim_calibration_t *cal)
{
    char where[512];
    cal->nsizes = 0;
    if (!arr) return DCR_OK;
    if (!json_is_array(arr))
        return dcr_error_set(DCR_EPARSE, "%s: \"payload_factors\" must be an array", origin);
    size_t n = json_array_size(arr);
    if (n > DCR_SIM_CAL_POINTS_MAX)
        return dcr_error_set(DCR_EPARSE, "%s: \"payload_factors\" has %zu entries, at most %d",
                             origin, n, DCR_SIM_CAL_POINTS_MAX);
    for (size_t i = 0; i < n; i++) {
        json_t *z = json_array_get(arr, i);
        snprintf(where, sizeof(where), "%s: payload_factors[%zu]", origin, i);
        if (!json_is_object(z)) return dcr_error_set(DCR_EPARSE, "%s must be an object", where);
        DCR_CHECK(dcr__cal_known_keys(z, where, dcr__cal_size_fields, 2, NULL));
        DCR_CHECK(dcr__cal_number(z, "bytes", where, &cal->sizes[i].bytes));
        DCR_CHECK(dcr__cal_number(z, "factor", where, &cal->sizes[i].factor));
    }
    cal->nsizes = (int)n;
    return DCR_OK;
}

static dcr_status_t dcr__cal_parse_header(json_t *root, const char *origin,
                                          dcr_sim_calibration_t *cal)
{
    json_t *format = json_object_get(root, "format"), *version = json_object_get(root, "version");
    if (!json_is_string(format) || strcmp(json_string_value(format), DCR__CAL_FORMAT))
        return dcr_error_set(DCR_EPARSE, "%s: \"format\" must be \"%s\"", origin, DCR__CAL_FORMAT);
    if (!json_is_integer(version) || json_integer_value(version) != DCR__CAL_VERSION)
        return dcr_error_set(DCR_EPARSE, "%s: \"version\" must be %d", origin, DCR__CAL_VERSION);
    json_t *machine = json_object_get(root, "machine");
    if (machine && !json_is_string(machine))
        return dcr_error_set(DCR_EPARSE, "%s: \"machine\" must be a string", origin);
    snprintf(cal->machine, sizeof(cal->machine), "%s", machine ? json_string_value(machine) : "");
    json_t *cores = json_object_get(root, "cores");
    if (!json_is_integer(cores))
        return dcr_error_set(DCR_EPARSE, "%s: \"cores\" must be an integer", origin);
    json_int_t c = json_integer_value(cores);
    if (c < 1 || c > 4096)
        return dcr_error_set(DCR_EINVAL, "%s: \"cores\" is %lld, expected 1..4096", origin,
                             (long long)c);
    cal->cores = (int)c;
    return DCR_OK;
}

/* "cluster": fitted cluster figures, each key a field dcr_sim_cluster_set knows. */
static dcr_status_t dcr__cal_parse_cluster(json_t *obj, const char *origin,
                                           dcr_sim_calibration_t *cal)
{
    cal->ncluster = 0;
    if (!obj) return DCR_OK;
    if (!json_is_object(obj))
        return dcr_error_set(DCR_EPARSE, "%s: \"cluster\" must be an object", origin);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (cal->ncluster == DCR_SIM_CAL_NOTES_MAX)
            return dcr_error_set(DCR_EPARSE, "%s: \"cluster\" has more than %d keys", origin,
                                 DCR_SIM_CAL_NOTES_MAX);
        if (!json_is_number(v))
            return dcr_error_set(DCR_EPARSE, "%s: cluster.%s must be a number", origin, key);
        dcr_sim_cluster_t probe = dcr_sim_cluster_default();
        dcr_status_t st = dcr_sim_cluster_set(&probe, key, json_number_value(v));
        if (st == DCR_OK) st = dcr_sim_cluster_validate(&probe);
        if (st != DCR_OK) {
            dcr_error_prefix("%s: cluster: ", origin);
            return DCR_EPARSE;
        }
        dcr_sim_cal_cluster_value_t *c = &cal->cluster[cal->ncluster++];
        snprintf(c->key, sizeof(c->key), "%s", key);
        c->value = json_number_value(v);
    }
    return DCR_OK;
}

/* "provenance": one line of text per fitted figure. */
static dcr_status_t dcr__cal_parse_provenance(json_t *arr, const char *origin,
                                              dcr_sim_calibration_t *cal)
{
    cal->nprovenance = 0;
    if (!arr) return DCR_OK;
    if (!json_is_array(arr) || json_array_size(arr) > DCR_SIM_CAL_NOTES_MAX)
        return dcr_error_set(DCR_EPARSE,
                             "%s: \"provenance\" must be an array of at most %d strings", origin,
                             DCR_SIM_CAL_NOTES_MAX);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *line = json_array_get(arr, i);
        if (!json_is_string(line) || json_string_length(line) >= DCR_SIM_CAL_NOTE_LEN)
            return dcr_error_set(DCR_EPARSE,
                                 "%s: provenance[%zu] must be a string of at most %d bytes", origin,
                                 i, DCR_SIM_CAL_NOTE_LEN - 1);
        snprintf(cal->provenance[i], DCR_SIM_CAL_NOTE_LEN, "%s", json_string_value(line));
    }
    cal->nprovenance = (int)json_array_size(arr);
    return DCR_OK;
}

/* "rollout_gpu" (every key) and "rollout_measured" (rollout figures that
 * replace derived ones). Sets has_rollout_gpu when present. */
static dcr_status_t dcr__cal_parse_gpu(json_t *root, const char *origin, dcr_sim_calibration_t *cal)
{
    json_t *gpu = json_object_get(root, "rollout_gpu");
    json_t *meas = json_object_get(root, "rollout_measured");
    if (!gpu && !meas) return DCR_OK;
    if (!json_is_object(gpu))
        return dcr_error_set(DCR_EPARSE, "%s: \"rollout_gpu\" must be an object%s", origin,
                             gpu ? "" : " (rollout_measured replaces its derived figures)");
    char where[600];
    snprintf(where, sizeof(where), "%s: rollout_gpu", origin);
    DCR_CHECK(dcr__cal_known_keys(gpu, where, dcr__gpu_fields, DCR__NGPU, NULL));
    dcr_sim_rollout_gpu_t g;
    for (size_t i = 0; i < DCR__NGPU; i++)
        DCR_CHECK(dcr__cal_number(gpu, dcr__gpu_fields[i].key, where, dcr__gpu_field(&g, i)));
    if (meas && !json_is_object(meas))
        return dcr_error_set(DCR_EPARSE, "%s: \"rollout_measured\" must be an object", origin);
    const char *key;
    json_t *v;
    json_object_foreach(meas, key, v)
    {
        int bit = dcr__rollout_bit(key);
        if (bit < 0 || !json_is_number(v))
            return dcr_error_set(DCR_EPARSE,
                                 "%s: rollout_measured.%s: expected a number for one of the "
                                 "rollout figures (decode_s_per_byte ... relay_hop_s_per_byte)",
                                 origin, key);
        for (size_t i = 0; i < DCR__CAL_NSCALARS; i++)
            if (!strcmp(dcr__cal_scalars[i].key, key))
                *dcr__cal_scalar(cal, i) = json_number_value(v);
        cal->rollout_measured |= 1u << bit;
    }
    dcr_status_t st = dcr_sim_rollout_gpu_costs(&g, cal);
    if (st != DCR_OK) dcr_error_prefix("%s: ", origin);
    return st == DCR_OK ? DCR_OK : DCR_EPARSE;
}

static dcr_status_t dcr__cal_parse_root(json_t *root, const char *origin,
                                        dcr_sim_calibration_t *cal)
{
    static const char *const extra[] = {
        "format", "version", "machine",    "points",      "payload_factors",
        "cores",  "cluster", "provenance", "rollout_gpu", "rollout_measured",
        NULL};
    if (!json_is_object(root))
        return dcr_error_set(DCR_EPARSE, "%s: expected a JSON object", origin);
    DCR_CHECK(dcr__cal_known_keys(root, origin, dcr__cal_scalars, DCR__CAL_NSCALARS, extra));
    DCR_CHECK(dcr__cal_parse_header(root, origin, cal));
    DCR_CHECK(dcr__cal_parse_points(json_object_get(root, "points"), origin, cal));
    DCR_CHECK(dcr__cal_parse_sizes(json_object_get(root, "payload_factors"), origin, cal));
    DCR_CHECK(dcr__cal_parse_cluster(json_object_get(root, "cluster"), origin, cal));
    DCR_CHECK(dcr__cal_parse_provenance(json_object_get(root, "provenance"), origin, cal));
    DCR_CHECK(dcr__cal_parse_gpu(root, origin, cal));
    for (size_t i = 0; i < DCR__CAL_NSCALARS; i++) {
        const char *key = dcr__cal_scalars[i].key;
        if (cal->has_rollout_gpu && dcr__rollout_bit(key) >= 0) {
            if (json_object_get(root, key))
                return dcr_error_set(DCR_EPARSE,
                                     "%s: \"%s\" is derived from rollout_gpu; a measured value "
                                     "goes in rollout_measured",
                                     origin, key);
            continue;
        }
        DCR_CHECK(dcr__cal_number(root, key, origin, dcr__cal_scalar(cal, i)));
    }
    dcr_status_t st = dcr_sim_cal_validate(cal);
    if (st != DCR_OK) dcr_error_prefix("%s: ", origin);
    return st;
}

dcr_status_t dcr_sim_cal_parse(const char *text, const char *origin, dcr_sim_calibration_t *out_p)
{
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dcr_error_set(DCR_EPARSE, "%s: line %d: %s", origin, err.line, err.text);
    dcr_sim_calibration_t cal;
    memset(&cal, 0, sizeof(cal));
    dcr_status_t st = dcr__cal_parse_root(root, origin, &cal);
    json_decref(root);
    if (st == DCR_OK) *out_p = cal;
    return st;
}

static dcr_status_t dcr__cal_read_file(const char *path, char **text_p)
{
    return dcr_sim_read_regular("calibration", path, (size_t)DCR__CAL_FILE_MAX, text_p);
}

dcr_status_t dcr_sim_cal_load(const char *path, dcr_sim_calibration_t *out_p)
{
    char *text = NULL;
    DCR_CHECK(dcr__cal_read_file(path, &text));
    dcr_status_t st = dcr_sim_cal_parse(text, path, out_p);
    free(text);
    return st;
}

/* ---- JSON out --------------------------------------------------------------- */

static json_t *dcr__cal_points_json(const dcr_sim_calibration_t *cal)
{
    json_t *arr = json_array();
    for (int i = 0; i < cal->npoints; i++) {
        json_t *p = json_object();
        for (size_t f = 0; f < DCR__CAL_NPOINT_FIELDS; f++)
            json_object_set_new(p, dcr__cal_point_fields[f].key,
                                json_real(dcr__cal_point_get(&cal->points[i], f)));
        json_array_append_new(arr, p);
    }
    return arr;
}

char *dcr_sim_cal_to_json(const dcr_sim_calibration_t *cal)
{
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string(DCR__CAL_FORMAT));
    json_object_set_new(root, "version", json_integer(DCR__CAL_VERSION));
    json_object_set_new(root, "machine", json_string(cal->machine));
    json_object_set_new(root, "cores", json_integer(cal->cores));
    json_object_set_new(root, "points", dcr__cal_points_json(cal));
    json_t *sizes = json_array();
    for (int i = 0; i < cal->nsizes; i++)
        json_array_append_new(sizes, json_pack("{s:f,s:f}", "bytes", cal->sizes[i].bytes, "factor",
                                               cal->sizes[i].factor));
    json_object_set_new(root, "payload_factors", sizes);
    json_t *meas = json_object();
    for (size_t i = 0; i < DCR__CAL_NSCALARS; i++) {
        int bit = dcr__rollout_bit(dcr__cal_scalars[i].key);
        json_t *to = root;
        if (cal->has_rollout_gpu && bit >= 0) {
            if (!(cal->rollout_measured & (1u << bit))) continue; /* derived on load */
            to = meas;
        }
        json_object_set_new(to, dcr__cal_scalars[i].key, json_real(dcr__cal_scalar_get(cal, i)));
    }
    if (cal->has_rollout_gpu) {
        json_t *gpu = json_object();
        dcr_sim_rollout_gpu_t g = cal->rollout_gpu;
        for (size_t i = 0; i < DCR__NGPU; i++)
            json_object_set_new(gpu, dcr__gpu_fields[i].key, json_real(*dcr__gpu_field(&g, i)));
        json_object_set_new(root, "rollout_gpu", gpu);
        if (json_object_size(meas) > 0) json_object_set(root, "rollout_measured", meas);
    }
    json_decref(meas);
    if (cal->ncluster > 0) {
        json_t *cluster = json_object();
        for (int i = 0; i < cal->ncluster; i++)
            json_object_set_new(cluster, cal->cluster[i].key, json_real(cal->cluster[i].value));
        json_object_set_new(root, "cluster", cluster);
    }
    if (cal->nprovenance > 0) {
        json_t *lines = json_array();
        for (int i = 0; i < cal->nprovenance; i++)
            json_array_append_new(lines, json_string(cal->provenance[i]));
        json_object_set_new(root, "provenance", lines);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    json_decref(root);
    return text;
}

dcr_status_t dcr_sim_cal_save(const dcr_sim_calibration_t *cal, const char *path)
{
    char *text = dcr_sim_cal_to_json(cal);
    if (!text) return dcr_error_set(DCR_ENOMEM, "calibration JSON");
    /* The output-path rule (dcr/outpath.h); the text ends in a newline. */
    size_t len = strlen(text);
    text[len] = '\n';
    dcr_status_t st = dcr_outpath_write("calibration", path, text, len + 1);
    free(text);
    return st;
}
