#include "train/monitor/throughput.h"

#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>

namespace sinklm {
namespace {

// Float32 matmul throughput this process reaches: the CPU's practical peak for MFU. The best of several short
// trials, so a neighbour process busy at start-up does not make the peak look low (and MFU above 100%).
double measured_cpu_matmul_flops() {
  const int64_t n = 1024;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::mm(a, b);
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) {
    auto start = std::chrono::steady_clock::now();
    int reps = 0;
    double seconds = 0;
    while (seconds < 0.08) {
      torch::mm(a, b);
      ++reps;
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    best = std::max(best, 2.0 * n * n * n * reps / seconds);
  }
  return best;
}

double device_peak_flops(const TrainOptions& o, torch::Device device) {
  if (o.peak_tflops > 0) return o.peak_tflops * 1e12;
  if (!device.is_cuda()) return measured_cpu_matmul_flops();
  std::string name = at::cuda::getDeviceProperties(device.index())->name;  // dense bf16 tensor-core peaks
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) return 989e12;
  if (name.find("A100") != std::string::npos) return 312e12;
  return 0;  // unknown: MFU is not shown
}

}  // namespace

ThroughputMeter::ThroughputMeter(const ModelConfig& model, const TrainOptions& options, torch::Device device,
                                 int world_size)
    : tokens_per_step_(static_cast<double>(options.global_batch_samples * options.seq_len)) {
  ParameterCount params = count_parameters(model);
  flops_per_token_ = 6.0 * static_cast<double>(params.total - model.vocab_size * model.hidden_size) +
                     12.0 * model.num_layers * model.hidden_size * options.seq_len;
  peak_flops_ = device_peak_flops(options, device) * world_size;  // tokens/s counts every rank
}

void ThroughputMeter::add_step(double seconds) {
  window_tokens_ += tokens_per_step_;
  window_seconds_ += seconds;
}

ThroughputMeter::Window ThroughputMeter::take_window() {
  Window w;
  w.tokens_per_s = window_tokens_ / window_seconds_;
  w.mfu = peak_flops_ > 0 ? w.tokens_per_s * flops_per_token_ / peak_flops_ : 0;
  w.seconds_per_token = window_seconds_ / window_tokens_;
  window_tokens_ = window_seconds_ = 0;
  return w;
}

std::string duration_text(double seconds) {
  char buf[32];
  long s = std::lround(seconds);
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

}  // namespace sinklm
