/* The layout of the public structures, as this build of libdcr compiled them.
 *
 * Bindings that mirror C structures field by field (the Python package's
 * ctypes declarations) read this table when they load the library and refuse
 * to run when a mirror disagrees with it: a structure that gained, lost or
 * moved a field would otherwise be read at wrong offsets, silently. Every
 * structure a binding mirrors has a row for its size and one per field, in
 * declaration order; the constants that size their arrays have rows too. */
#ifndef DCR_ABI_H
#define DCR_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row. A structure's size row has field == NULL and size = sizeof(type);
 * a field row has the member's name, its offsetof and its sizeof. A
 * constant's row has type "constant", field the macro's name, size its value. */
typedef struct dcr_abi_row {
    const char *type;  /* "dcr_payload_item_t", or "constant" */
    const char *field; /* member or macro name; NULL on a size row */
    size_t offset;
    size_t size;
} dcr_abi_row_t;

/* The table (static storage) and its row count in *count_p. */
const dcr_abi_row_t *dcr_abi_layout(size_t *count_p);

#ifdef __cplusplus
}
#endif

#endif /* DCR_ABI_H */
