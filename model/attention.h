// Causal attention with optional sink logit, in two implementations that tests hold equal:
//  - reference: softmax(QK^T / sqrt(D) + mask) V, written out in full (also yields the probabilities);
//  - fast: torch's scaled_dot_product_attention (flash / memory-efficient kernels where available).
//
// Shapes: q [B, H, Tq, D]; k, v [B, H, Tk, D] with Tk >= Tq. Query i sits at key index Tk - Tq + i and sees
// keys 0 .. Tk - Tq + i (bottom-right aligned causal mask: Tq == Tk is training, Tq < Tk is a KV cache).
//
// sink_logit: undefined, or [H]: an extra softmax column whose logit is that value for every query, dropped
// after the softmax: out_i = sum_j p_ij v_j with p_ij = exp(s_ij) / (exp(b_h) + sum_j exp(s_ij)).
// b_h = 0 is softmax-off-by-one (the zero sink, same as attending to an all-zero key and value);
// a learned b_h is the per-head sink logit. Vanilla is b_h = -inf.
#pragma once
#include <torch/types.h>

#include "model/model_config.h"

namespace sinklm {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& sink_logit, AttentionImpl impl);

// The reference's probabilities, [B, H, Tq, Tk] float32 (sink column already dropped: rows sum to <= 1).
torch::Tensor causal_attention_probabilities(const torch::Tensor& q, const torch::Tensor& k,
                                             const torch::Tensor& sink_logit);

}  // namespace sinklm
