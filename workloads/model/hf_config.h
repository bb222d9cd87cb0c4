/* Hugging Face config.json as --model input.
 *
 * dcr_model_parse() reads the keys of a Hugging Face config.json directly
 * (workloads/models/README.md). What a real config.json adds on top is
 * handled here, before that parse: a directory holding config.json, the
 * multimodal Gemma 3 config whose text tower sits in a nested "text_config"
 * with HF's class defaults for the keys it leaves out, and model types or
 * layer options the inventory builder does not model, refused by name
 * instead of giving a silently wrong inventory. */
#ifndef DCR_WORKLOADS_HF_CONFIG_H
#define DCR_WORKLOADS_HF_CONFIG_H

#include <stddef.h>

#include <jansson.h>

#include "dcr/status.h"

/* The file to read for --model PATH: PATH/config.json when PATH is a
 * directory, else PATH itself, into buf (len bytes). DCR_EINVAL when the
 * result does not fit. */
dcr_status_t dcr_hf_config_path(const char *path, char *buf, size_t len);

/* Turns a parsed config object into the object dcr_model_parse reads.
 * A config with a "family" key (dcr's own format) passes unchanged. One whose
 * "model_type" names a supported Hugging Face type is checked for options the
 * builder does not model; "gemma3" is replaced by its "text_config" (as
 * "gemma3_text"); "gemma3_text" gets Gemma3TextConfig's defaults for
 * vocab_size, num_attention_heads, num_key_value_heads and head_dim; a
 * config read from DIR/config.json without "name" is named DIR. An unknown
 * model_type or a malformed nested config is DCR_EPARSE naming origin and the
 * key. *out_p receives a new reference (the caller decrefs it) and is set
 * only on success; root is not modified. */
dcr_status_t dcr_hf_config_normalize(json_t *root, const char *origin, json_t **out_p);

#endif
