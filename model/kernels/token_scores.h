// What each row of logits says of its target: the negative log-likelihood -log softmax(logits[i])[target[i]],
// and the id ranked first (the first index of the row's largest logit, as torch.argmax). On an AVX-512 CPU
// per row one pass for the maximum, a search for its first index while the row is still in cache, and one
// pass for the normaliser, writing nothing (log_softmax wrote the whole [T, V] log-probabilities first: 51 MB
// per 256-token chunk of pythia-160m, read again by gather, and argmax read the logits once more); elsewhere
// LibTorch's log_softmax, gather and argmax.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace sinklm {

struct TokenScores {
  torch::Tensor nll;   // [T] float32 on the CPU
  torch::Tensor top1;  // [T] int64 on the CPU
};

// logits [T, V] (any float dtype, any device), targets: T ids in [0, V).
TokenScores token_scores(const torch::Tensor& logits, const std::vector<int64_t>& targets);

// The id a row of logits [V] (leading dims of size 1 allowed) ranks first, as torch.argmax (greedy decoding's
// pick): the two passes above on a float32 CPU row, LibTorch's argmax elsewhere. LibTorch's reduction runs
// AVX2 code here and tracks an index per lane: 66 us for pythia-160m's 50,304 logits, where reading them takes
// a few.
int64_t top_token(const torch::Tensor& logits);

}  // namespace sinklm
