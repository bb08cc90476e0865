// Where a decoder layer's attention is computed. The GPT-NeoX layer (model/gpt_neox.h) exists once: it
// projects q, k, v and hands them to a back-end, which owns positions and keys:
//   - CausalAttention (here): the whole sequence at once, rotary at given positions; training and eval;
//   - ProbingAttention (model/analysis/attention_probe.h): the same, and it records each layer's probabilities;
//   - the stream caches (decode/cached_decoder.cpp): many streams packed in one batch, each against its own
//     bounded KV cache with positions assigned inside the cache.
// A new cache policy or attention variant is a new back-end; the layer does not change.
#pragma once
#include <torch/types.h>

#include "model/model_config.h"
#include "model/attention/rotary.h"

namespace sinklm {

class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  // Layer `layer`'s attention. q, k, v: [B, H, T, D] before rotary; sink: the layer's extra softmax column
  // (model/sink.h: SinkColumn, absent for modes without one). Returns [B, H, T, D]. Called once per layer, in
  // layer order.
  virtual torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const SinkColumn& sink) = 0;
  // The layer's entry: qkv [B, T, H, 3D], the query_key_value projection's output (per head q | k | v) ->
  // [B, T, H * D], the dense projection's input. By default: split into q, k, v views, attend(), merge the
  // heads. A back-end with a fused kernel for the packed layout overrides it.
  virtual torch::Tensor attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink);
  // Layer `layer`'s output gate (mode gated), [B, T, width] after the sigmoid, right after attend_packed();
  // a probe records it (model/analysis/attention_probe.h), other back-ends ignore it.
  virtual void observe_output_gate(int64_t /*layer*/, const torch::Tensor& /*gate*/) {}
};

// Causal attention over the whole sequence; rotary at `positions` ([T] or [B, T] int64).
class CausalAttention : public AttentionBackend {
 public:
  CausalAttention(const RotaryEmbedding& rotary, const torch::Tensor& positions, AttentionImpl impl);
  torch::Tensor attend(int64_t layer, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const SinkColumn& sink) override;
  // The fast implementation on an AVX-512 CPU in float32: rotary and attention in one kernel
  // (model/kernels/packed_qkv_attention.h); else attend().
  torch::Tensor attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink) override;

 protected:
  torch::Tensor cos_, sin_;  // [T, R] or [B, T, R]
  AttentionImpl impl_;
};

}  // namespace sinklm
