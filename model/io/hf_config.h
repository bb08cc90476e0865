// Conversion between sinklm's `model.*` config and Hugging Face's GPT-NeoX `config.json`.
//
// config.json (written by sinklm): the fields transformers' GPTNeoXConfig reads — model_type "gpt_neox",
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, hidden_act "gelu",
// rope_parameters {rope_type, rope_theta, partial_rotary_factor} plus the legacy rotary_pct /
// rotary_emb_base for older readers, max_position_embeddings, layer_norm_eps, use_parallel_residual,
// tie_word_embeddings false, bos/eos/pad ids (null: unknown) — and an extra "sink" block:
//   "sink": {"mode": "none|token|softmax1|logit|kv|gated", "count": k, "tokenizer_vocab_size": n,
//            "token_ids": [...], "gate": "headwise|elementwise", "kv_init": "zero|normal",
//            "loads_in_transformers": bool}
// Hugging Face ignores the sink block; "none" and "token" checkpoints run unchanged in transformers
// (for "token", prepend the sink id(s)); the other modes need sinklm's attention (model/sink.h:
// loads_in_transformers), which `sinklm info` says.
#pragma once
#include <nlohmann/json.hpp>

#include "core/config/config.h"
#include "model/model_config.h"

namespace sinklm {

nlohmann::json hf_config_json(const ModelConfig& config);
// generation_config.json: {"_from_model_config": true, "bos_token_id", "eos_token_id", "pad_token_id"} (null:
// unknown), the ids transformers' generate() stops at and pads with.
nlohmann::json hf_generation_config_json(const ModelConfig& config);
// Reads a config.json (sinklm's or one saved by transformers) into a Config; errors name `path`.
Config config_from_hf_json(const nlohmann::json& json, const std::string& path);

}  // namespace sinklm
