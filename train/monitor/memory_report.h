// What a training rank holds in memory, for the first lines of the training log: the exact sizes of what the
// trainer allocates itself (parameters, gradients, optimizer moments) and an estimate of the activations one
// micro-batch keeps for backward; then, after the first step, the measured high-water marks (peak RSS on the
// CPU, the CUDA caching allocator's peak allocated bytes on a GPU).
#pragma once
#include <torch/types.h>

#include <string>

#include "model/model_config.h"
#include "train/train_options.h"

namespace sinklm {

struct MemoryPlan {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0;  // bytes per rank
};

// `flat_numel`: the flat parameter buffer's length (float32 values and gradients); `optimizer_numel`: the
// elements this rank keeps AdamW moments for (all of them, or its ZeRO-1 shard).
MemoryPlan plan_memory(const ModelConfig& model, const TrainOptions& options, int64_t flat_numel,
                       int64_t optimizer_numel, bool bf16);
std::string describe(const MemoryPlan& plan, const TrainOptions& options);
// "peak RSS 1.2 GiB" (+ ", CUDA peak allocated 3.4 GiB of 140 GiB" on a GPU).
std::string measured_peak_memory(torch::Device device);

}  // namespace sinklm
