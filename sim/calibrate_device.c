/* A calibration's GPU-side costs (calibrate_device.h). */
#include "sim/calibrate_device.h"

#include "workloads/harness/microbench.h"

dcr_status_t dcr_sim_calibrate_device(dcr_device_t *dev, bool quick, dcr_sim_calibration_t *cal)
{
    size_t bytes = (size_t)(quick ? 64 : 256) << 20;
    int repeats = quick ? 3 : 7;
    for (int i = 0; i < cal->npoints; i++) {
        dcr_device_detect_bench_t d;
        DCR_CHECK(dcr_microbench_device_detect(dev, bytes, cal->points[i].rate, repeats, &d));
        cal->points[i].detect_s_per_byte = d.detect_s / (double)d.bytes;
    }
    dcr_device_apply_bench_t a;
    DCR_CHECK(dcr_microbench_device_apply(dev, bytes, 0.01, repeats, &a));
    cal->apply_s_per_record = a.sparse_s / (double)(a.records ? a.records : 1);
    cal->apply_s_per_full_byte = a.full_s / (double)a.bytes;
    return DCR_OK;
}
