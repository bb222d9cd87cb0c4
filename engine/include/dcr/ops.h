/* The header every backend ops table opens with (DESIGN.md section 4, one
 * pattern; libuv's UV_HANDLE_FIELDS, SQLite's iVersion and pAppData): the
 * transport, object store, control plane, group, native loader and device
 * tables all start with a dcr_ops_header_t named hdr, followed by their
 * kind's properties struct (what the backend guarantees; a kind's own type,
 * since the guarantees differ by kind) and their slots. Every kind says
 * create and destroy.
 *
 * A wrapping backend (faults/'s "faulty:<name>") sets parent to the table
 * it wraps and finds it there, the way SQLite's test VFS finds its real VFS
 * through pAppData: the slots that run without a handle (create, and an
 * object store's claims, a device's count) receive the table they were
 * found in as `self`, and a handle's slots reach it through the handle's
 * ops. No table needs an extra slot for wrappers. */
#ifndef DCR_OPS_H
#define DCR_OPS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dcr_ops_header {
    /* The layout the table was written for (the kind's DCR_<KIND>_OPS_VERSION);
     * registries and wrappers refuse any other. */
    uint32_t version;
    /* The registry key ("objstore", "faulty:sqlite", "vllm.qwen3_moe"). */
    const char *name;
    /* A wrapper's wrapped table, of the same kind (cast to its type); NULL
     * for a backend that wraps nothing. */
    const void *parent;
} dcr_ops_header_t;

#ifdef __cplusplus
}
#endif
#endif
