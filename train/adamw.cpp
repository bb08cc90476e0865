#include "train/adamw.h"

#include <torch/torch.h>

#include <cmath>

namespace sinklm {

FlatAdamW::FlatAdamW(int64_t numel, AdamWOptions options, torch::Device device)
    : options_(options),
      exp_avg_(torch::zeros({numel}, torch::TensorOptions().dtype(torch::kFloat32).device(device))),
      exp_avg_sq_(torch::zeros({numel}, torch::TensorOptions().dtype(torch::kFloat32).device(device))) {}

void FlatAdamW::step(const torch::Tensor& params, const torch::Tensor& grads, const torch::Tensor& decay_mask,
                     double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  params.mul_(1.0 - lr * options_.weight_decay * decay_mask);
  exp_avg_.mul_(options_.beta1).add_(grads, 1.0 - options_.beta1);
  exp_avg_sq_.mul_(options_.beta2).addcmul_(grads, grads, 1.0 - options_.beta2);
  auto denominator = (exp_avg_sq_.sqrt() / std::sqrt(bias2)).add_(options_.eps);
  params.addcdiv_(exp_avg_, denominator, -lr / bias1);
}

double learning_rate_at(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak, double min_ratio) {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  const double floor = peak * min_ratio;
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace sinklm
