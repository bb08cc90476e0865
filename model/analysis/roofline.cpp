#include "model/analysis/roofline.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>

#include "core/system/cpu_features.h"
#include "model/kernels/avx512_math.h"
#include "model/kernels/few_row_matmul.h"
#include "model/projection.h"

namespace sinklm {
namespace {

// `work` / the fastest of 5 timed calls of run() on `device` (after one untimed call), waiting for the device.
double best_rate(torch::Device device, double work, const std::function<void()>& run) {
  auto timed = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed();
  double best = 0;
  for (int trial = 0; trial < 5; ++trial) best = std::max(best, work / timed());
  return best;
}

// Σ x[0, n), n a multiple of 64, in AVX-512 with four chains and each line asked for 4 KiB ahead: a read as the
// decode kernels read (model/kernels/cache_attention_loops.inc, few_row_tile.inc). LibTorch's sum runs AVX2 code
// without requests ahead: on one core of the machine of docs/benchmarks.md it read 11.3 GB/s where this reads
// 12.9, and decode steps with float32 K/V read faster than it, so its rate alone understated the bound.
__attribute__((target("avx512f"))) float requested_ahead_sum(const float* x, int64_t n) {
  __m512 sum[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t i = 0; i < n; i += 4 * kLanes) {
    _mm_prefetch(reinterpret_cast<const char*>(x + i) + 4096, _MM_HINT_T0);
    for (int c = 0; c < 4; ++c) sum[c] = _mm512_add_ps(sum[c], _mm512_loadu_ps(x + i + c * kLanes));
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3])));
}

}  // namespace

double measured_read_bandwidth(torch::Device device) {
  const auto src = torch::ones({64 << 20}, torch::TensorOptions().device(device));  // 256 MiB
  const double bytes = static_cast<double>(src.nbytes());
  const double rate = best_rate(device, bytes, [&] { src.sum(); });
  if (!device.is_cpu() || !cpu_has_avx512f()) return rate;
  const float* data = src.data_ptr<float>();
  volatile float sink = 0;  // the sum is used, so the reads are not dropped
  return std::max(rate, best_rate(device, bytes, [&] { sink = sink + requested_ahead_sum(data, src.numel()); }));
}

double measured_matmul_rate(torch::Device device, WeightFormat format) {
  const auto options = torch::TensorOptions().device(device);
  if (device.is_cpu() && few_row_kernel_available(format)) {
    const auto a = torch::randn({16, 256}, options), b = torch::randn({1024, 256}, options);
    const auto packed = pack_few_row_weight(b, format);
    constexpr int kCalls = 50;
    return best_rate(device, 2.0 * kCalls * 16 * 256 * 1024, [&] {
      for (int i = 0; i < kCalls; ++i) few_row_matmul(a, packed, {});
    });
  }
  const auto a = torch::randn({1024, 1024}, options), b = torch::randn({1024, 1024}, options);
  return best_rate(device, 2.0 * 1024 * 1024 * 1024, [&] { torch::mm(a, b); });
}

double decode_weight_bytes(GPTNeoXForCausalLM& model) {
  double bytes = 0;
  for (const auto& p : model->named_parameters())
    if (p.key().find("embed_in") == std::string::npos) bytes += p.value().nbytes();
  for (const auto& module : model->modules())
    if (const auto* projection = module->as<ProjectionImpl>())
      bytes += static_cast<double>(projection->few_row_bytes()) - static_cast<double>(projection->weight.nbytes()) -
               static_cast<double>(projection->bias.defined() ? projection->bias.nbytes() : 0);
  return bytes;
}

double decode_flops_per_token(GPTNeoXForCausalLM& model, double entries_per_head) {
  double weights = 0;
  for (const auto& p : model->named_parameters())
    if (p.value().dim() == 2 && p.key().find("embed_in") == std::string::npos) weights += p.value().numel();
  const auto& c = model->config();
  return 2.0 * weights + 4.0 * c.num_layers * c.hidden_size * entries_per_head;
}

std::map<WeightFormat, int64_t> weights_per_format(GPTNeoXForCausalLM& model) {
  std::map<WeightFormat, int64_t> weights;
  for (const auto& module : model->modules())
    if (const auto* projection = module->as<ProjectionImpl>()) weights[projection->weight_format()] += projection->weight.numel();
  return weights;
}

std::string format_names(const std::map<WeightFormat, int64_t>& weights) {
  std::string names;
  for (const auto& [format, count] : weights) names += (names.empty() ? "" : "+") + weight_format_name(format);
  return names;
}

WeightFormat main_format(const std::map<WeightFormat, int64_t>& weights) {
  return std::max_element(weights.begin(), weights.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
}

DecodeBounds decode_bounds(int64_t streams, double weight_bytes, double kv_bytes_per_stream, double read_bandwidth,
                           double flops_per_token, double matmul_rate) {
  return {streams * read_bandwidth / (weight_bytes + streams * kv_bytes_per_stream), matmul_rate / flops_per_token};
}

}  // namespace sinklm
