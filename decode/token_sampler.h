// Picks the next token from a row of logits: greedy (temperature 0) or sampling with temperature, top-k and
// top-p, reproducible from a seed. Ids outside [0, allowed_vocab) (sink tokens, vocabulary padding) are
// never picked. Before either, OpenAI's adjustments: logit_bias adds its value to its id's logit, and each
// token this sampler already picked (the completion so far) loses frequency_penalty x its count plus
// presence_penalty once: logit[j] - c[j] * frequency - (c[j] > 0) * presence.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sinklm {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no limit
  double top_p = 1.0;        // nucleus mass kept, (0, 1]
  uint64_t seed = 0;
  std::vector<std::pair<int64_t, double>> logit_bias;  // (id, added to its logit)
  double presence_penalty = 0, frequency_penalty = 0;
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
  int64_t pick(const torch::Tensor& logits);
  bool penalised() const { return params_.presence_penalty != 0 || params_.frequency_penalty != 0; }
  bool adjusts() const { return !params_.logit_bias.empty() || (penalised() && !picked_.empty()); }  // the next row
  torch::Tensor pickable(const torch::Tensor& logits) const;  // [allowed_vocab] float64 on the CPU, adjusted

  SamplingParams params_;
  int64_t allowed_vocab_;
  std::mt19937_64 random_;
  // Picks so far, for the penalties. The latest pick is counted when the next one starts, so most_likely()
  // between two picks (a pick's alternatives) ranks as that pick did and the pick heads its own list.
  std::unordered_map<int64_t, int64_t> picked_;
  int64_t last_pick_ = -1;
};

}  // namespace sinklm
