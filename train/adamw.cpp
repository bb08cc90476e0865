#include "train/adamw.h"

#include <ATen/ops/_fused_adamw.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace sinklm {

FlatAdamW::FlatAdamW(const torch::Tensor& decay_mask, const torch::Tensor& lr_scale, AdamWOptions options)
    : options_(options),
      exp_avg_(torch::zeros_like(decay_mask)),
      exp_avg_sq_(torch::zeros_like(decay_mask)),
      step_tensor_(torch::zeros({}, decay_mask.options())) {
  SINKLM_ASSERT(lr_scale.numel() == decay_mask.numel(), "one learning-rate scale per element");
  auto mask = decay_mask.to(torch::kCPU).contiguous(), scale = lr_scale.to(torch::kCPU).contiguous();
  const float* m = mask.data_ptr<float>();
  const float* s = scale.data_ptr<float>();
  for (int64_t i = 0; i < mask.numel(); ++i) {
    bool decay = m[i] != 0.0f;
    if (runs_.empty() || runs_.back().decay != decay || runs_.back().lr_scale != s[i]) runs_.push_back({i, 0, decay, s[i]});
    ++runs_.back().numel;
  }
}

void FlatAdamW::set_steps_taken(int64_t steps) {
  steps_ = steps;
  step_tensor_.fill_(static_cast<double>(steps));
}

void FlatAdamW::step(const torch::Tensor& params, const torch::Tensor& grads, double lr) {
  SINKLM_ASSERT(params.numel() == exp_avg_.numel() && grads.numel() == exp_avg_.numel());
  torch::NoGradGuard no_grad;
  set_steps_taken(steps_ + 1);
  // One fused call per (weight decay, learning rate) group: the update is elementwise, so grouping does not
  // change a bit.
  std::vector<std::pair<bool, float>> groups;
  for (const auto& run : runs_)
    if (std::find(groups.begin(), groups.end(), std::make_pair(run.decay, run.lr_scale)) == groups.end())
      groups.emplace_back(run.decay, run.lr_scale);
  for (const auto& [decay, scale] : groups) {
    std::vector<torch::Tensor> p, g, m, v, steps;
    for (const auto& run : runs_) {
      if (run.decay != decay || run.lr_scale != scale) continue;
      p.push_back(params.narrow(0, run.offset, run.numel));
      g.push_back(grads.narrow(0, run.offset, run.numel));
      m.push_back(exp_avg_.narrow(0, run.offset, run.numel));
      v.push_back(exp_avg_sq_.narrow(0, run.offset, run.numel));
      steps.push_back(step_tensor_);  // read-only in the kernel: one shared count
    }
    at::_fused_adamw_(p, g, m, v, {}, steps, scale == 1.0f ? lr : lr * scale, options_.beta1, options_.beta2,
                      decay ? options_.weight_decay : 0.0, options_.eps, /*amsgrad=*/false, /*maximize=*/false);
  }
}

double learning_rate_at(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak, double min_ratio) {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
  const double floor = peak * min_ratio;
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace sinklm
