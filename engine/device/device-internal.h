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

/* Tests: one more backend, found by dcr_device_find and opened by
 * dcr_device_open under its own name (never by "auto", never listed by
 * dcr_device_backend_count), so that a run configured by device name
 * (dcr bench, the constructor, the receivers) can run on a table whose
 * props differ from the registered ones, such as a host-memory table that
 * says host_addressable false. NULL removes it. Not thread-safe: call
 * before anything opens a device. */
void dcr__device_register_extra(const dcr_device_ops_t *ops);

#ifdef __cplusplus
}
#endif
#endif
