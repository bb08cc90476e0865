#include "model/attention/attention_backend.h"

#include "model/attention/attention.h"
#include "model/kernels/packed_qkv_attention.h"

namespace sinklm {

torch::Tensor AttentionBackend::attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink) {
  const int64_t B = qkv.size(0), T = qkv.size(1), H = qkv.size(2), D = qkv.size(3) / 3;
  auto heads = qkv.permute({0, 2, 1, 3});  // [B, H, T, 3D]
  auto out = attend(layer, heads.narrow(-1, 0, D), heads.narrow(-1, D, D), heads.narrow(-1, 2 * D, D), sink);
  return out.transpose(1, 2).reshape({B, T, H * D});  // [B, H, T, D] -> [B, T, H * D]
}

CausalAttention::CausalAttention(const RotaryEmbedding& rotary, const torch::Tensor& positions, AttentionImpl impl)
    : impl_(impl) {
  std::tie(cos_, sin_) = rotary.cos_sin(positions);
}

torch::Tensor CausalAttention::attend(int64_t, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const SinkColumn& sink) {
  return causal_attention(apply_rotary(q, cos_, sin_), apply_rotary(k, cos_, sin_), v, sink, impl_);
}

torch::Tensor CausalAttention::attend_packed(int64_t layer, const torch::Tensor& qkv, const SinkColumn& sink) {
  if (impl_ == AttentionImpl::Fast && sink.softmax() && packed_qkv_attention_applies(qkv))
    return packed_qkv_attention(qkv, cos_, sin_, sink);
  // CPU bf16 autocast hands over a bf16 qkv. The fused kernel is fp32: widening qkv for it (one copy of
  // [B, T, H, 3D]) trains faster than ATen's bf16 attention, whose backward took 2.3x the fused kernel's
  // forward + backward on `small` (2026-12-03, train.trace_steps).
  if (impl_ == AttentionImpl::Fast && sink.softmax() && qkv.is_cpu() && qkv.scalar_type() == torch::kBFloat16) {
    const torch::Tensor wide = qkv.to(torch::kFloat32);
    if (packed_qkv_attention_applies(wide)) return packed_qkv_attention(wide, cos_, sin_, sink).to(torch::kBFloat16);
  }
  return AttentionBackend::attend_packed(layer, qkv, sink);
}

}  // namespace sinklm
