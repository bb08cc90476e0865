// Picks the next token from a row of logits: greedy (temperature 0) or sampling with temperature, top-k and
// top-p, reproducible from a seed. Ids outside [0, allowed_vocab) (sink tokens, vocabulary padding) are
// never picked.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <random>
#include <vector>

namespace sinklm {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no limit
  double top_p = 1.0;        // nucleus mass kept, (0, 1]
  uint64_t seed = 0;
};

class TokenSampler {
 public:
  TokenSampler(const SamplingParams& params, int64_t allowed_vocab);
  int64_t next(const torch::Tensor& logits);  // logits: [V] (any leading dims of size 1)
  // The k most likely pickable ids, most likely first, equal logits in id order. Greedy decoding takes the
  // first, so a greedy token always heads its own list of alternatives.
  std::vector<int64_t> most_likely(const torch::Tensor& logits, int64_t k) const;
  int64_t allowed_vocab() const { return allowed_vocab_; }  // ids [0, allowed_vocab) can be picked

 private:
  torch::Tensor pickable(const torch::Tensor& logits) const;  // [allowed_vocab] float64 on the CPU

  SamplingParams params_;
  int64_t allowed_vocab_;
  std::mt19937_64 random_;
};

}  // namespace sinklm
