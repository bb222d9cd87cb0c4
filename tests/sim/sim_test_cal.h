/* A calibration with round numbers (not measured) for simulator tests whose
 * assertions are relations (bounds, scaling, monotonicity), not timings:
 * 1 ns per compared byte, 10 ns per record, 1 us per item, 2 B per XOR
 * record, 3 B per overwrite. */
#ifndef DCR_TESTS_SIM_TEST_CAL_H
#define DCR_TESTS_SIM_TEST_CAL_H

#include <stdio.h>
#include <string.h>

#include "sim/calibrate.h"

static inline dcr_sim_calibration_t test_cal(void)
{
    dcr_sim_calibration_t c;
    memset(&c, 0, sizeof(c));
    snprintf(c.machine, sizeof(c.machine), "test");
    c.npoints = 2;
    c.points[0] = (dcr_sim_cal_point_t){0.01, 1e-9, 20e-9, 1.0, 2.0, 1.0, 1.5};
    c.points[1] = (dcr_sim_cal_point_t){0.05, 1e-9, 20e-9, 1.0, 2.0, 0.8, 1.0};
    c.project_s_per_record = 10e-9;
    c.construct_s_per_item = 1e-6;
    c.residual_s_per_byte = 1e-9;
    c.copy_s_per_byte = 0.1e-9;
    c.bytes_per_item = 10;
    c.decode_s_per_byte = 2e-9;
    c.apply_s_per_record = 5e-9;
    c.apply_s_per_item = 1e-6;
    c.ack_s = 1e-4;
    c.commit_s = 2e-4;
    c.cores = 2;
    return c;
}

#endif
