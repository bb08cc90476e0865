// The negative log-likelihood of each target under its row of logits: -log softmax(logits[i])[target[i]].
// On an AVX-512 CPU per row one pass for the maximum and one for the normaliser, writing nothing
// (log_softmax wrote the whole [T, V] log-probabilities first: 51 MB per 256-token chunk of pythia-160m,
// read again by gather); elsewhere LibTorch's log_softmax and gather.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace sinklm {

// logits [T, V] (any float dtype, any device), targets: T ids in [0, V). Returns [T] float32 on the CPU.
torch::Tensor token_nll(const torch::Tensor& logits, const std::vector<int64_t>& targets);

}  // namespace sinklm
