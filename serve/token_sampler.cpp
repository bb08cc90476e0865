#include "serve/token_sampler.h"

#include <torch/torch.h>

#include "core/error.h"

namespace sinklm {

TokenSampler::TokenSampler(const SamplingParams& params, int64_t allowed_vocab)
    : params_(params), allowed_vocab_(allowed_vocab), random_(params.seed) {
  if (params.temperature < 0) fail("temperature must be >= 0, got ", params.temperature);
  if (params.top_k < 0) fail("top_k must be >= 0, got ", params.top_k);
  if (!(params.top_p > 0 && params.top_p <= 1)) fail("top_p must be in (0, 1], got ", params.top_p);
}

int64_t TokenSampler::next(const torch::Tensor& logits) {
  auto row = logits.reshape({-1}).narrow(0, 0, allowed_vocab_).to(torch::kCPU, torch::kFloat64);  // [V']
  if (params_.temperature == 0) return row.argmax().item<int64_t>();
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
