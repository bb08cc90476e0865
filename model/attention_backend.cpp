#include "model/attention_backend.h"

#include "model/attention.h"

namespace sinklm {

CausalAttention::CausalAttention(const RotaryEmbedding& rotary, const torch::Tensor& positions, AttentionImpl impl)
    : impl_(impl) {
  std::tie(cos_, sin_) = rotary.cos_sin(positions);
}

torch::Tensor CausalAttention::attend(int64_t, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& sink_logit) {
  return causal_attention(apply_rotary(q, cos_, sin_), apply_rotary(k, cos_, sin_), v, sink_logit, impl_);
}

}  // namespace sinklm
