/* Backends of engine/device, seen only by the registry in device.c. */
#ifndef DCR_DEVICE_INTERNAL_H
#define DCR_DEVICE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * dcr_device_create under its own name (never by "auto", never listed by
 * dcr_device_backend_count), so that a run configured by device name
 * (dcr bench, the constructor, the receivers) can run on a table whose
 * props differ from the registered ones, such as a host-memory table that
 * says host_addressable false. NULL removes it. Not thread-safe: call
 * before anything opens a device. */
void dcr__device_register_extra(const dcr_device_ops_t *ops);

/* ---- change detection kernels (detect.c) ---------------------------------- */

/* Detection kernels (detect.c), named so that tests can run every
 * kernel the CPU supports against the naive comparison; not part of the
 * public interface. */
typedef enum dcr__detect_kernel {
    DCR__DETECT_SCALAR = 0, /* memcmp per element: the reference and the tail */
    DCR__DETECT_SSE2 = 1,   /* 16-byte compares, table-driven extraction */
    DCR__DETECT_AVX2 = 2,   /* 32-byte compares, 8 positions per table lookup */
    DCR__DETECT_AVX512 = 3, /* 64-byte compares, positions by vpcompressd */
    DCR__DETECT_KERNEL_COUNT
} dcr__detect_kernel_t;

/* Whether this build and this CPU can run the kernel. */
bool dcr__detect_kernel_supported(dcr__detect_kernel_t kernel);

const char *dcr__detect_kernel_name(dcr__detect_kernel_t kernel);

/* dcr_detect_changes with the given kernel, which must be supported; same
 * contract otherwise. */
size_t dcr__detect_changes_with(dcr__detect_kernel_t kernel, const void *a, const void *b, size_t n,
                                size_t elem_size, uint32_t *out);

#ifdef __cplusplus
}
#endif

#endif
