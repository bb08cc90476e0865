// The output projection and the summed cross-entropy fused over chunks of rows, so the [N, V] logits of a
// micro-batch never exist at once: each chunk's logits become log-probabilities, its loss, and, when a
// gradient is wanted, its gradient (softmax - one-hot) right away, which the two backward GEMMs consume while
// the chunk is still in cache. Backward then only scales the stored gradients by the incoming one.
// Against projection + cross_entropy: no [N, V] logits, log-probabilities or their gradients (3 x 134 MB for
// `small`, 3 x 3.3 GB for pythia-160m at seq 2048), a third fewer passes over the vocabulary axis; the same
// values up to float summation order (chunks are summed one after another).
// For float32 hidden states and weights (the CPU path; bf16 autocast keeps the plain projection).
#pragma once
#include <torch/types.h>

namespace sinklm {

// hidden [N, C], weight [V, C] (logits = hidden @ weight^T), target [N] int64; rows whose target is
// `ignore_index` add nothing. Returns the scalar sum of -log softmax(logits)[target] over the other rows.
torch::Tensor linear_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                       const torch::Tensor& target, int64_t ignore_index);

}  // namespace sinklm
