#include "train/monitor/memory_report.h"

#include <cstdio>

#include "core/system/process_memory.h"

#ifdef SINKLM_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace sinklm {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, bytes >= 1 << 30 ? "%.2f GiB" : "%.0f MiB",
                bytes >= 1 << 30 ? bytes / (1 << 30) : bytes / (1 << 20));
  return text;
}

// Elements one layer keeps for backward per token (b = 1, s = 1): its input (both layer norms read it), the
// first norm's output, q/k/v, rotated q/k, the attention output, the second norm's output, and the MLP's
// pre- and post-activation [I] each. Layer norm statistics and SDPA's log-sum-exp are per-row scalars.
double layer_elements_per_token(const ModelConfig& m) { return 9.0 * m.hidden_size + 2.0 * m.intermediate_size; }

}  // namespace

MemoryPlan plan_memory(const ModelConfig& model, const TrainOptions& options, int64_t flat_numel,
                       int64_t optimizer_numel, bool bf16) {
  MemoryPlan plan;
  plan.parameters = 4.0 * flat_numel;  // float32 master weights (bf16 autocast casts per op, keeps none)
  plan.gradients = 4.0 * flat_numel;
  plan.optimizer = 2 * 4.0 * optimizer_numel;  // AdamW's two float32 moments
  const double tokens = static_cast<double>(options.micro_batch) * options.seq_len;
  const double element = bf16 ? 2.0 : 4.0;  // matmul outputs under autocast are bf16
  const double layers = options.activation_checkpointing
                            ? model.num_layers * model.hidden_size + layer_elements_per_token(model)  // inputs + 1 recomputed
                            : model.num_layers * layer_elements_per_token(model);
  if (bf16) {
    // Logits in the compute dtype, their float32 copy for the loss and its log-softmax.
    plan.activations = tokens * (layers * element + model.vocab_size * (element + 4.0 + 4.0));
  } else {
    // The fused projection + loss (train/linear_cross_entropy.h) keeps no logits, only the gradients it
    // computed in forward: [N, C] for the hidden states and [V, C] for the output weight.
    plan.activations = tokens * (layers * element + 4.0 * model.hidden_size) + 4.0 * model.vocab_size * model.hidden_size;
  }
  return plan;
}

std::string describe(const MemoryPlan& plan, const TrainOptions& options) {
  return "parameters " + gib(plan.parameters) + ", gradients " + gib(plan.gradients) + ", optimizer " +
         gib(plan.optimizer) + ", activations ~" + gib(plan.activations) + " (estimate for a micro-batch of " +
         std::to_string(options.micro_batch) + " x " + std::to_string(options.seq_len) +
         (options.activation_checkpointing ? ", activation checkpointing" : "") + "), total ~" +
         gib(plan.parameters + plan.gradients + plan.optimizer + plan.activations);
}

std::string measured_peak_memory(torch::Device device) {
  std::string text = "peak RSS " + gib(peak_rss_mib() * (1 << 20));
#ifdef SINKLM_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    text += ", CUDA peak allocated " + gib(static_cast<double>(stats.allocated_bytes[aggregate].peak)) +
            " (peak reserved " + gib(static_cast<double>(stats.reserved_bytes[aggregate].peak)) + ")";
  }
#else
  (void)device;
#endif
  return text;
}

}  // namespace sinklm
