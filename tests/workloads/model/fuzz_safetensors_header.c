/* ctest-labels: fuzz */
/* libFuzzer target for the safetensors parser: every input is a whole file
 * image (8-byte header length, JSON header, data). On success every tensor's
 * bytes are read, so the sanitizers see any offset the validation let
 * through outside the input, and the invariants the reader promises
 * (contiguous, sizes equal shape x dtype) are checked. */
#include <stdint.h>
#include <stdlib.h>

#include "workloads/model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dcr_st_tensor_t *t = NULL;
    size_t n = 0;
    json_t *meta = NULL;
    if (dcr_st_parse(data, size, "fuzz", &t, &n, &meta) != DCR_OK) return 0;
    uint64_t at = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = t[i].elem_size;
        if (t[i].dtype != DCR_DTYPE_COUNT && dcr_dtype_size(t[i].dtype) != bytes) abort();
        for (int d = 0; d < t[i].ndim; d++) bytes *= (uint64_t)t[i].shape[d];
        if (t[i].begin != at || t[i].end - t[i].begin != bytes) abort();
        for (uint64_t k = 0; k < bytes; k++) sum += t[i].data[k];
        at = t[i].end;
    }
    dcr_st_tensors_free(t, n);
    json_decref(meta);
    return sum == 1 ? 0 : 0;
}
