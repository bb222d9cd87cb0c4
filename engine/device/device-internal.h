/* Backends of engine/device, seen only by the registry in device.c. */
#ifndef DCR_DEVICE_INTERNAL_H
#define DCR_DEVICE_INTERNAL_H

#include "dcr/device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Host memory, synchronous (device_host.c). */
extern const dcr_device_ops_t dcr__device_cpu_ops;
#ifdef DCR_HAVE_CUDA
/* CUDA device memory, kernels on CUDA streams (device_cuda.cu). */
extern const dcr_device_ops_t dcr__device_cuda_ops;
#endif

#ifdef __cplusplus
}
#endif
#endif
