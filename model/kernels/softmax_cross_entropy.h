// The softmax cross-entropy of one chunk of logits, in place, for the fused output projection
// (train/linear_cross_entropy.h): per row one pass for the maximum, one for the normaliser and, when a gradient
// is wanted, one that overwrites the logits with softmax - one-hot. LibTorch's log_softmax, gather, exp_ and
// scatter_add_ made five passes over the chunk and wrote it twice more.
#pragma once
#include <torch/types.h>

namespace sinklm {

// Whether the kernel takes these logits: an AVX-512 CPU, float32 [r, V] contiguous on the CPU.
bool softmax_cross_entropy_applies(const torch::Tensor& logits);

// logits [r, V], target [r] int64 (valid indices), keep [r] float32 (1 where the row counts, 0 where ignored).
// Returns sum_i keep_i * -log softmax(logits_i)[target_i] (accumulated in double, in row order). With
// write_gradient, logits become d/d logits of that sum for kept rows: softmax - one-hot(target); ignored rows
// get the softmax (the caller zeroes what they feed).
double softmax_cross_entropy(torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& keep,
                             bool write_gradient);

}  // namespace sinklm
