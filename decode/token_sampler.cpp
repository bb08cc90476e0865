#include "decode/token_sampler.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"
#include "model/kernels/token_scores.h"

namespace sinklm {

TokenSampler::TokenSampler(const SamplingParams& params, int64_t allowed_vocab)
    : params_(params), allowed_vocab_(allowed_vocab), random_(params.seed) {
  if (params.temperature < 0) fail("temperature must be >= 0, got ", params.temperature);
  if (params.top_k < 0) fail("top_k must be >= 0, got ", params.top_k);
  if (!(params.top_p > 0 && params.top_p <= 1)) fail("top_p must be in (0, 1], got ", params.top_p);
}

torch::Tensor TokenSampler::pickable(const torch::Tensor& logits) const {
  auto row = logits.reshape({-1}).narrow(0, 0, allowed_vocab_).to(torch::kCPU, torch::kFloat64);
  if (!adjusts()) return row;
  row = row.clone();  // never the caller's logits
  double* r = row.data_ptr<double>();
  for (const auto& [id, bias] : params_.logit_bias)
    if (id >= 0 && id < allowed_vocab_) r[id] += bias;
  if (penalised())
    for (const auto& [id, count] : picked_)
      r[id] -= static_cast<double>(count) * params_.frequency_penalty + params_.presence_penalty;
  return row;
}

// Ranked on the logits as sampled, not on log-probs (a float32 log_softmax can round two different logits to
// one value), and with ties broken explicitly: topk leaves the order of equal values unspecified.
std::vector<int64_t> TokenSampler::most_likely(const torch::Tensor& logits, int64_t k) const {
  const auto row = pickable(logits);
  k = std::min(k, row.size(0));
  if (k <= 0) return {};
  const auto cut = std::get<0>(row.topk(k))[k - 1];             // the k-th largest logit
  const auto tied = (row >= cut).nonzero().reshape({-1});        // in id order, every tie at the cut included
  const auto order = std::get<1>(row.index_select(0, tied).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  const auto ids = tied.index_select(0, order.narrow(0, 0, k)).contiguous();
  return {ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + k};
}

int64_t TokenSampler::next(const torch::Tensor& logits) {
  if (penalised() && last_pick_ >= 0) ++picked_[last_pick_];
  last_pick_ = pick(logits);
  return last_pick_;
}

int64_t TokenSampler::pick(const torch::Tensor& logits) {
  if (params_.temperature == 0)  // the first of the largest logits, read in place where nothing adjusts them
    return adjusts() ? most_likely(logits, 1)[0] : top_token(logits.reshape({-1}).narrow(0, 0, allowed_vocab_));
  auto row = pickable(logits);  // [V']
  auto [sorted, order] = torch::sort(row / params_.temperature, /*dim=*/0, /*descending=*/true);
  int64_t keep = params_.top_k > 0 ? std::min(params_.top_k, sorted.size(0)) : sorted.size(0);
  auto probs = torch::softmax(sorted.narrow(0, 0, keep), 0).contiguous();
  const double* p = probs.data_ptr<double>();
  if (params_.top_p < 1) {  // smallest prefix whose mass reaches top_p
    double mass = 0;
    int64_t n = 0;
    while (n < keep && mass < params_.top_p) mass += p[n++];
    keep = std::max<int64_t>(n, 1);
  }
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) total += p[i];
  double u = std::uniform_real_distribution<double>(0, total)(random_);
  int64_t pick = 0;
  for (; pick < keep - 1; ++pick) {
    u -= p[pick];
    if (u < 0) break;
  }
  return order[pick].item<int64_t>();
}

}  // namespace sinklm
