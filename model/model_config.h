// The typed, cross-checked view of the `model.*` config section.
#pragma once
#include <cstdint>
#include <string>

#include "core/config/config.h"
#include "model/sink.h"

namespace sinklm {

enum class AttentionImpl { Fast, Reference };

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t tokenizer_vocab_size = 0;  // resolved: ids >= this are sinks or padding
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  double rotary_pct = 0;
  double rotary_base = 0;
  int64_t max_position_embeddings = 0;
  double layer_norm_eps = 0;
  bool parallel_residual = true;
  int64_t bos_token_id = -1;  // -1: unknown (a config never resolved against a tokenizer)
  int64_t eos_token_id = -1;  // -1: unknown; generation then never stops at end-of-text
  int64_t pad_token_id = -1;  // -1: none
  int64_t init_seed = 0;
  AttentionImpl attention = AttentionImpl::Fast;
  SinkMode sink_mode = SinkMode::None;
  int64_t sink_count = 0;  // learnable sink tokens (mode token), else 0
  bool sink_gate_elementwise = false;        // mode gated: model.sink.gate
  SinkInit sink_kv_init = SinkInit::Zero;    // mode kv: model.sink.kv_init

  // Validates relations between keys; errors name the keys and `config.source()`.
  static ModelConfig from(const Config& config);

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t rotary_dims() const;  // even number of leading dims of each head that are rotated
  int64_t sink_token_id(int64_t i) const { return tokenizer_vocab_size + i; }
  // Where a context without text starts (lm-eval's prefix token): bos, else eos; UserError when neither is known.
  int64_t start_of_text_id() const;
};

// Parameter counts derived from the architecture alone (no model is built).
struct ParameterCount {
  int64_t total = 0;
  int64_t embedding = 0;  // embed_in + embed_out
  int64_t non_embedding() const { return total - embedding; }
};
ParameterCount count_parameters(const ModelConfig& config);

}  // namespace sinklm
