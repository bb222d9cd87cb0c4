/* The layout table of dcr/abi.h. A structure is listed here when a binding
 * mirrors it (python/dcr/_lib.py); its fields are listed in declaration
 * order, all of them, so a mirror that misses one is caught by name. */
#include "dcr/abi.h"

#include "dcr/codec.h"
#include "dcr/control.h"
#include "dcr/objstore.h"
#include "dcr/recovery.h"
#include "dcr/tensor.h"

#define DCR__SIZE(T)                                                                               \
    {                                                                                              \
#T, NULL, 0, sizeof(T)                                                                     \
    }
#define DCR__FIELD(T, f)                                                                           \
    {                                                                                              \
#T, #f, offsetof(T, f), sizeof(((T *)0)->f)                                                \
    }
#define DCR__CONST(c)                                                                              \
    {                                                                                              \
        "constant", #c, 0, (size_t)(c)                                                             \
    }

static const dcr_abi_row_t dcr__layout[] = {
    DCR__CONST(DCR_MAX_DIMS),
    DCR__CONST(DCR_CODEC_KEY_SIZE),
    DCR__CONST(DCR_OBJSTORE_KEY_MAX),
    DCR__CONST(DCR_OBJSTORE_VERSION_MAX),
    DCR__CONST(DCR_CONTROL_BASELINE_BYTES),
    DCR__CONST(DCR_RETAIN_NAME_MAX),
    DCR__CONST(DCR_RETAIN_DIGEST_BYTES),

    DCR__SIZE(dcr_payload_key_t),
    DCR__FIELD(dcr_payload_key_t, set),
    DCR__FIELD(dcr_payload_key_t, bytes),

    DCR__SIZE(dcr_payload_policy_t),
    DCR__FIELD(dcr_payload_policy_t, key),
    DCR__FIELD(dcr_payload_policy_t, max_raw),

    DCR__SIZE(dcr_payload_header_t),
    DCR__FIELD(dcr_payload_header_t, version),
    DCR__FIELD(dcr_payload_header_t, flags),
    DCR__FIELD(dcr_payload_header_t, tau),
    DCR__FIELD(dcr_payload_header_t, payload_id),
    DCR__FIELD(dcr_payload_header_t, owner),
    DCR__FIELD(dcr_payload_header_t, item_count),
    DCR__FIELD(dcr_payload_header_t, raw_len),
    DCR__FIELD(dcr_payload_header_t, compressed_len),
    DCR__FIELD(dcr_payload_header_t, digest),

    DCR__SIZE(dcr_codec_item_t),
    DCR__FIELD(dcr_codec_item_t, name),
    DCR__FIELD(dcr_codec_item_t, ndim),
    DCR__FIELD(dcr_codec_item_t, shape),
    DCR__FIELD(dcr_codec_item_t, dtype),
    DCR__FIELD(dcr_codec_item_t, encoding),
    DCR__FIELD(dcr_codec_item_t, count),
    DCR__FIELD(dcr_codec_item_t, indices),
    DCR__FIELD(dcr_codec_item_t, run_start),
    DCR__FIELD(dcr_codec_item_t, values),

    DCR__SIZE(dcr_encode_params_t),
    DCR__FIELD(dcr_encode_params_t, tau),
    DCR__FIELD(dcr_encode_params_t, owner),
    DCR__FIELD(dcr_encode_params_t, payload_id),
    DCR__FIELD(dcr_encode_params_t, level),
    DCR__FIELD(dcr_encode_params_t, shuffle),

    DCR__SIZE(dcr_payload_item_t),
    DCR__FIELD(dcr_payload_item_t, name),
    DCR__FIELD(dcr_payload_item_t, ndim),
    DCR__FIELD(dcr_payload_item_t, shape),
    DCR__FIELD(dcr_payload_item_t, numel),
    DCR__FIELD(dcr_payload_item_t, dtype),
    DCR__FIELD(dcr_payload_item_t, encoding),
    DCR__FIELD(dcr_payload_item_t, location),
    DCR__FIELD(dcr_payload_item_t, gap_bytes),
    DCR__FIELD(dcr_payload_item_t, rice_k),
    DCR__FIELD(dcr_payload_item_t, value_coding),
    DCR__FIELD(dcr_payload_item_t, location_bytes),
    DCR__FIELD(dcr_payload_item_t, value_bytes),
    DCR__FIELD(dcr_payload_item_t, count),
    DCR__FIELD(dcr_payload_item_t, first),
    DCR__FIELD(dcr_payload_item_t, last),
    DCR__FIELD(dcr_payload_item_t, values),

    DCR__SIZE(dcr_objstore_config_t),
    DCR__FIELD(dcr_objstore_config_t, url),
    DCR__FIELD(dcr_objstore_config_t, s3_endpoint),
    DCR__FIELD(dcr_objstore_config_t, timeout_ms),
    DCR__FIELD(dcr_objstore_config_t, retries),
    DCR__FIELD(dcr_objstore_config_t, multipart_threshold),
    DCR__FIELD(dcr_objstore_config_t, part_bytes),

    DCR__SIZE(dcr_objstore_entry_t),
    DCR__FIELD(dcr_objstore_entry_t, key),
    DCR__FIELD(dcr_objstore_entry_t, size),
    DCR__FIELD(dcr_objstore_entry_t, version),

    DCR__SIZE(dcr_control_config_t),
    DCR__FIELD(dcr_control_config_t, address),
    DCR__FIELD(dcr_control_config_t, timeout_ms),

    DCR__SIZE(dcr_commit_record_t),
    DCR__FIELD(dcr_commit_record_t, version),
    DCR__FIELD(dcr_commit_record_t, baseline),
    DCR__FIELD(dcr_commit_record_t, attempt),
    DCR__FIELD(dcr_commit_record_t, committed_ns),

    DCR__SIZE(dcr_control_prepare_t),
    DCR__FIELD(dcr_control_prepare_t, coordinator),
    DCR__FIELD(dcr_control_prepare_t, from_version),
    DCR__FIELD(dcr_control_prepare_t, receivers),
    DCR__FIELD(dcr_control_prepare_t, n_receivers),
    DCR__FIELD(dcr_control_prepare_t, deadline_ms),

    DCR__SIZE(dcr_retain_entry_t),
    DCR__FIELD(dcr_retain_entry_t, name),
    DCR__FIELD(dcr_retain_entry_t, bytes),
    DCR__FIELD(dcr_retain_entry_t, digest),

    DCR__SIZE(dcr_retain_manifest_t),
    DCR__FIELD(dcr_retain_manifest_t, version),
    DCR__FIELD(dcr_retain_manifest_t, from),
    DCR__FIELD(dcr_retain_manifest_t, tau),
    DCR__FIELD(dcr_retain_manifest_t, covers_from),
    DCR__FIELD(dcr_retain_manifest_t, n),
    DCR__FIELD(dcr_retain_manifest_t, entries),

    DCR__SIZE(dcr_retain_stats_t),
    DCR__FIELD(dcr_retain_stats_t, payloads),
    DCR__FIELD(dcr_retain_stats_t, bytes),
    DCR__FIELD(dcr_retain_stats_t, pruned),
    DCR__FIELD(dcr_retain_stats_t, seconds),

    DCR__SIZE(dcr_restore_state_t),
    DCR__FIELD(dcr_restore_state_t, held),
    DCR__FIELD(dcr_restore_state_t, from),
    DCR__FIELD(dcr_restore_state_t, untouched),
    DCR__FIELD(dcr_restore_state_t, repair_in_retry),
    DCR__FIELD(dcr_restore_state_t, retry_refused),

    DCR__SIZE(dcr_restore_choice_t),
    DCR__FIELD(dcr_restore_choice_t, kind),
    DCR__FIELD(dcr_restore_choice_t, action),
};

const dcr_abi_row_t *dcr_abi_layout(size_t *count_p)
{
    if (count_p) *count_p = sizeof(dcr__layout) / sizeof(dcr__layout[0]);
    return dcr__layout;
}
