// Causal attention with optional sink logit, in two implementations that tests hold equal:
//  - reference: softmax(QK^T / sqrt(D) + mask) V, written out in full (also yields the probabilities);
//  - fast: torch's scaled_dot_product_attention (flash / memory-efficient kernels where available).
//
// Shapes: q [B, H, Tq, D]; k, v [B, H, Tk, D] with Tk >= Tq. Query i sits at key index Tk - Tq + i and sees
// keys 0 .. Tk - Tq + i (bottom-right aligned causal mask: Tq == Tk is training, Tq < Tk is a KV cache).
//
// sink: the extra softmax column of the model's sink mode (model/sink.h: SinkColumn), absent for vanilla and
// sink-token models. Both implementations take every form of the column (logit, key, value).
#pragma once
#include <torch/types.h>

#include "model/model_config.h"

namespace sinklm {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const SinkColumn& sink, AttentionImpl impl);

// The reference's probabilities, [B, H, Tq, Tk] float32 (sink column already dropped: rows sum to <= 1).
// hidden: undefined, or [Tq, Tk] bool, true where a key is hidden from a query besides the causal mask
// (`sinklm analyze` masking a sink, eval/sinks/sink_interventions.h).
torch::Tensor causal_attention_probabilities(const torch::Tensor& q, const torch::Tensor& k, const SinkColumn& sink,
                                             const torch::Tensor& hidden = {});

}  // namespace sinklm
