// Causal self-attention on the CPU for training and evaluation, from the query_key_value projection's output
// to the dense projection's input, in one kernel per direction (forward, backward):
//
//   qkv [B, T, H, 3D] float32 (GPT-NeoX: per head q | k | v) -> out [B, T, H * D]
//
// with rotary on the first R dims of q and k (cos, sin from RotaryEmbedding::cos_sin: [T, R] or [B, T, R])
// and the optional sink column (model/sink.h: SinkColumn: logit, key, value). The same function as
// apply_rotary + causal_attention + merging the heads (tested to rounding, gradients included).
//
// Why: at head size 32 LibTorch's CPU flash attention ran at about a tenth of the matmul rate (23% of a
// `small` training step), and the split / rotary / head-merge views around it cost a dozen copies per layer
// plus a zero-filled [B, H, T, 3D] gradient per slice in backward. Here each (batch row, head) is one task:
// its rotated q, k and v are packed once into cache-resident panels, scores and products run in AVX-512
// register tiles of 8 query rows, the softmax is exact per row (a tile's score rows fit in L2 up to T of
// many thousands), and backward recomputes the probabilities from the saved log-sum-exp (FlashAttention-2's
// recipe) and writes d(qkv) in place. Tasks are independent, so results do not depend on the thread count.
#pragma once
#include <torch/types.h>

#include "model/sink.h"

namespace sinklm {

// Whether the kernel takes this input: an AVX-512 CPU, qkv float32 contiguous [B, T, H, 3D] on the CPU,
// D a multiple of 16 (any sink column). Elsewhere callers split q, k, v and use model/attention/attention.h.
bool packed_qkv_attention_applies(const torch::Tensor& qkv);

// The attention above, differentiable in qkv and the sink column's logit, key and value (float32 CPU).
torch::Tensor packed_qkv_attention(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin,
                                   const SinkColumn& sink);

}  // namespace sinklm
