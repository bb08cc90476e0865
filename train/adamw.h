// AdamW (decoupled weight decay, PyTorch semantics) over a contiguous range of the flat buffers. With ZeRO-1
// each rank owns one range and its moments; without it every rank updates the whole buffer identically.
#pragma once
#include <torch/types.h>

namespace sinklm {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class FlatAdamW {
 public:
  FlatAdamW(int64_t numel, AdamWOptions options, torch::Device device);

  // params, grads, decay_mask: [numel] views of this optimizer's range.
  void step(const torch::Tensor& params, const torch::Tensor& grads, const torch::Tensor& decay_mask, double lr);

  int64_t steps_taken() const { return steps_; }
  // State for checkpoints: exp_avg [numel], exp_avg_sq [numel], and the step count.
  torch::Tensor& exp_avg() { return exp_avg_; }
  torch::Tensor& exp_avg_sq() { return exp_avg_sq_; }
  void set_steps_taken(int64_t steps) { steps_ = steps; }

 private:
  AdamWOptions options_;
  torch::Tensor exp_avg_, exp_avg_sq_;
  int64_t steps_ = 0;
};

// Linear warmup to `peak` over `warmup_steps`, then cosine decay to peak * min_ratio at `total_steps`.
double learning_rate_at(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak, double min_ratio);

}  // namespace sinklm
