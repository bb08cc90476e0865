// AdamW (decoupled weight decay, PyTorch semantics) over a contiguous range of the flat buffers, on torch's
// fused multi-tensor kernel (one pass over parameters, gradients and moments; ~16x faster on a CPU than
// composing the update from tensor ops). With ZeRO-1 each rank owns one range and its moments; without it
// every rank updates the whole buffer identically.
#pragma once
#include <torch/types.h>

#include <vector>

namespace sinklm {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class FlatAdamW {
 public:
  // decay_mask: [numel], 1 where weight decay applies, 0 where not (LayerNorms, biases, sink logits);
  // lr_scale: [numel], each element's learning rate as a multiple of step()'s (a sink parameter's
  // lr_multiplier, model/sink.h; 1 elsewhere).
  FlatAdamW(const torch::Tensor& decay_mask, const torch::Tensor& lr_scale, AdamWOptions options);

  // params, grads: [numel] views of this optimizer's range.
  void step(const torch::Tensor& params, const torch::Tensor& grads, double lr);

  int64_t steps_taken() const { return steps_; }
  // State for checkpoints: exp_avg [numel], exp_avg_sq [numel], and the step count.
  torch::Tensor& exp_avg() { return exp_avg_; }
  torch::Tensor& exp_avg_sq() { return exp_avg_sq_; }
  const torch::Tensor& exp_avg() const { return exp_avg_; }
  const torch::Tensor& exp_avg_sq() const { return exp_avg_sq_; }
  void set_steps_taken(int64_t steps);

 private:
  struct Run {
    int64_t offset, numel;
    bool decay;
    float lr_scale;
  };
  AdamWOptions options_;
  std::vector<Run> runs_;  // maximal stretches of the range with one weight-decay setting and learning rate
  torch::Tensor exp_avg_, exp_avg_sq_;
  torch::Tensor step_tensor_;  // [] float32 on the device: the fused kernel reads the step count from it
  int64_t steps_ = 0;
};

// Linear warmup to `peak` over `warmup_steps`, then cosine decay to peak * min_ratio at `total_steps`.
double learning_rate_at(int64_t step, int64_t total_steps, int64_t warmup_steps, double peak, double min_ratio);

}  // namespace sinklm
