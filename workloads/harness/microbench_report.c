/* What dcr microbench prints (microbench_report.h). */
#include "workloads/harness/microbench_report.h"

#include <jansson.h>
#include <stdio.h>

#include "dcr/device.h"

static void dump(json_t *j)
{
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}

void dcr_microbench_detect_report(const dcr_detect_bench_t *rows, int n, size_t bytes, bool json)
{
    if (!json) {
        printf("kernel: %s\n", dcr_detect_kernel());
        printf("%-8s %12s %12s %10s %12s\n", "rate", "read_s", "detect_s", "ratio", "read_GB/s");
        for (int i = 0; i < n; i++)
            printf("%-8.2f %12.5f %12.5f %10.3f %12.2f\n", rows[i].change_rate, rows[i].read_s,
                   rows[i].detect_s, rows[i].ratio, rows[i].read_gbps);
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const dcr_detect_bench_t *r = &rows[i];
        json_array_append_new(arr, json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "change_rate",
                                             r->change_rate, "read_s", r->read_s, "detect_s",
                                             r->detect_s, "ratio", r->ratio, "read_gbps",
                                             r->read_gbps, "changed", (json_int_t)r->changed));
    }
    dump(json_pack("{s:s,s:s,s:I,s:o}", "bench", "detect", "kernel", dcr_detect_kernel(), "bytes",
                   (json_int_t)bytes, "rows", arr));
}

void dcr_microbench_device_detect_report(const char *place, const dcr_device_detect_bench_t *rows,
                                         int n, size_t bytes, bool json)
{
    if (!json) {
        printf("device: %s\n%-8s %12s %12s %10s %12s\n", place, "rate", "d2d_copy_s", "detect_s",
               "ratio", "copy_GB/s");
        for (int i = 0; i < n; i++)
            printf("%-8.2f %12.6f %12.6f %10.3f %12.2f\n", rows[i].change_rate, rows[i].copy_s,
                   rows[i].detect_s, rows[i].ratio, rows[i].copy_gbps);
        printf("baseline: a device-to-device copy of one buffer (reads and writes the bytes "
               "detection reads)\n");
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const dcr_device_detect_bench_t *r = &rows[i];
        json_array_append_new(arr, json_pack("{s:f,s:f,s:f,s:f,s:f,s:I}", "change_rate",
                                             r->change_rate, "copy_s", r->copy_s, "detect_s",
                                             r->detect_s, "ratio", r->ratio, "copy_gbps",
                                             r->copy_gbps, "changed", (json_int_t)r->changed));
    }
    dump(json_pack("{s:s,s:s,s:I,s:o}", "bench", "detect", "device", place, "bytes",
                   (json_int_t)bytes, "rows", arr));
}

void dcr_microbench_device_apply_report(const char *place, const dcr_device_apply_bench_t *rows,
                                        int n, size_t bytes, int repeats, bool json)
{
    if (!json) {
        printf("device: %s, %.1f MB resident, best of %d\n%-6s %10s %10s %10s %8s %10s %10s\n",
               place, (double)bytes / 1e6, repeats, "rate", "records", "dense_s", "apply_s",
               "ratio", "full_s", "full_ratio");
        for (int i = 0; i < n; i++)
            printf("%-6.3f %10zu %10.6f %10.6f %8.4f %10.6f %10.4f\n", rows[i].rate,
                   rows[i].records, rows[i].dense_s, rows[i].sparse_s, rows[i].ratio,
                   rows[i].full_s, rows[i].full_ratio);
        printf("baseline: a dense host-to-device reload of the same bytes from staging\n");
        return;
    }
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const dcr_device_apply_bench_t *r = &rows[i];
        json_array_append_new(arr, json_pack("{s:f,s:I,s:f,s:f,s:f,s:f,s:f}", "rate", r->rate,
                                             "records", (json_int_t)r->records, "dense_s",
                                             r->dense_s, "apply_s", r->sparse_s, "ratio", r->ratio,
                                             "full_s", r->full_s, "full_ratio", r->full_ratio));
    }
    dump(json_pack("{s:s,s:s,s:I,s:I,s:o}", "bench", "apply", "device", place, "resident_bytes",
                   (json_int_t)bytes, "repeats", (json_int_t)repeats, "rows", arr));
}

/* a / b, 0 when b is not positive (a figure not measured). */
static double dcr__over(double a, double b)
{
    return b > 0 ? a / b : 0;
}

void dcr_microbench_apply_report(const dcr_serve_bench_result_t *res, int n, int repeats, bool json)
{
    if (!json) {
        printf("receiver: %.1f MB resident, best of %lld\n", (double)res[0].resident_bytes / 1e6,
               (long long)repeats);
        printf("%-6s %10s %10s %10s %8s %10s %10s %10s %8s %10s %11s %10s %12s %12s %12s "
               "%11s\n",
               "rate", "records", "dense_s", "apply_s", "ratio", "ingest_s", "full_s", "full_ratio",
               "sparse", "floor_s", "floor_ratio", "loader_s", "apply/floor", "loader/floor",
               "floor_cold_s", "apply/cold");
        for (int i = 0; i < n; i++)
            printf("%-6.3f %10lld %10.5f %10.5f %8.3f %10.5f %10.5f %10.3f %8lld %10.5f %11.3f "
                   "%10.5f %12.3f %12.3f %12.5f %11.3f\n",
                   res[i].rate, (long long)res[i].records, res[i].dense_s, res[i].apply_s,
                   res[i].ratio, res[i].ingest_s, res[i].full_apply_s, res[i].full_ratio,
                   (long long)res[i].items_sparse, res[i].floor_s, res[i].floor_ratio,
                   res[i].loader_apply_s, dcr__over(res[i].apply_s, res[i].floor_s),
                   dcr__over(res[i].loader_apply_s, res[i].floor_s), res[i].floor_cold_s,
                   dcr__over(res[i].apply_s, res[i].floor_cold_s));
        printf("floor: the same records by a bare prefetching loop into huge-page memory of the "
               "same bytes (no decode, loader or checks), written just before the loop\n");
        printf("floor_cold_s: the same loop, its memory given the held version where the "
               "receiver got it (at the dense reload) and run right after the apply, so it "
               "starts as cold\n");
        printf("loader_s: a receiver that runs the native loader for every item (the apply "
               "replays the copies its prewarm intercepted from it)\n");
        return;
    }
    json_t *rows = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(
            rows,
            json_pack("{s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
                      "rate", res[i].rate, "records", (json_int_t)res[i].records, "payload_bytes",
                      (json_int_t)res[i].payload_bytes, "dense_s", res[i].dense_s, "apply_s",
                      res[i].apply_s, "ratio", res[i].ratio, "ingest_s", res[i].ingest_s,
                      "full_apply_s", res[i].full_apply_s, "full_ratio", res[i].full_ratio,
                      "items_sparse", (json_int_t)res[i].items_sparse, "items_full",
                      (json_int_t)res[i].items_full, "floor_s", res[i].floor_s, "floor_ratio",
                      res[i].floor_ratio, "loader_apply_s", res[i].loader_apply_s, "apply_floor",
                      dcr__over(res[i].apply_s, res[i].floor_s), "loader_floor",
                      dcr__over(res[i].loader_apply_s, res[i].floor_s), "floor_cold_s",
                      res[i].floor_cold_s, "apply_floor_cold",
                      dcr__over(res[i].apply_s, res[i].floor_cold_s)));
    json_t *j =
        json_pack("{s:s,s:I,s:I,s:o}", "bench", "apply", "resident_bytes",
                  (json_int_t)res[0].resident_bytes, "repeats", (json_int_t)repeats, "rows", rows);
    json_dumpf(j, stdout, JSON_INDENT(2));
    printf("\n");
    json_decref(j);
}
