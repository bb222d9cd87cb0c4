/* The stage costs of a calibration that a GPU changes (dcr calibrate
 * --device on a device the host cannot address). */
#ifndef DCR_SIM_CALIBRATE_DEVICE_H
#define DCR_SIM_CALIBRATE_DEVICE_H

#include <stdbool.h>

#include "dcr/device.h"
#include "sim/calibrate.h"

/* The owners' detection per source byte at each point's rate, and the
 * receivers' record application, per record and per byte of a full
 * scratch pass, measured on dev, replace the host figures of *cal (bench
 * sizes: a 256 MiB BF16 chunk, 64 MiB with quick). */
dcr_status_t dcr_sim_calibrate_device(dcr_device_t *dev, bool quick, dcr_sim_calibration_t *cal);

#endif
