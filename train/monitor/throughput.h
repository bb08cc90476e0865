// Training throughput as the progress line and metrics.jsonl report it: tokens/s over the steps since the
// last report, model FLOP utilisation against the device's peak, and the time left.
//
// FLOPs per token: 6 x non-embedding-input parameters (forward + backward of every matmul, the output
// projection included) + 12 x layers x width x seq_len (attention scores and values). Peak: train.peak_tflops
// if set; the dense bf16 tensor-core peak on H100/H200 (989 TFLOP/s) and A100 (312); on a CPU the float32
// matmul rate this process reaches (best of several short trials at start-up). Summed over ranks.
#pragma once
#include <torch/types.h>

#include <string>

#include "model/model_config.h"
#include "train/train_options.h"

namespace sinklm {

class ThroughputMeter {
 public:
  ThroughputMeter(const ModelConfig& model, const TrainOptions& options, torch::Device device, int world_size);

  void add_step(double seconds);  // one optimizer step of tokens_per_step() tokens
  double tokens_per_step() const { return tokens_per_step_; }
  // Over the steps since the last take_window(); resets the window.
  struct Window {
    double tokens_per_s = 0, mfu = 0, seconds_per_token = 0;
  };
  Window take_window();
  double peak_flops() const { return peak_flops_; }

 private:
  double tokens_per_step_ = 0, flops_per_token_ = 0, peak_flops_ = 0;
  double window_tokens_ = 0, window_seconds_ = 0;
};

// "1h02m" or "3m07s".
std::string duration_text(double seconds);

}  // namespace sinklm
