#include "model/analysis/kernel_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

namespace sinklm {
namespace {

namespace profiler = torch::profiler::impl;

struct Total {
  double ns = 0;
  int64_t calls = 0;
};

// Kernels on a GPU run one after another per stream, so their times add up to the device's busy time; CPU
// operators nest (a parent's time includes its children), so their table is inclusive time.
void write_top(const torch::autograd::profiler::ProfilerResult& result, bool cuda, int64_t steps, const std::string& path) {
  std::map<std::string, Total> by_name;
  double all_ns = 0;
  for (const auto& e : result.events()) {
    if ((e.deviceType() == c10::DeviceType::CUDA) != cuda) continue;
    auto& t = by_name[e.name()];
    t.ns += static_cast<double>(e.durationNs());
    ++t.calls;
    all_ns += static_cast<double>(e.durationNs());
  }
  std::vector<std::pair<std::string, Total>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::ofstream out(path);
  char line[512];
  std::snprintf(line, sizeof line, "%s per step over %lld traced steps; %s\n%10s %7s %9s  %s\n",
                cuda ? "CUDA kernels, copies and memsets" : "CPU operators (inclusive)", static_cast<long long>(steps),
                cuda ? "the shares add up to the device's busy time" : "nested: shares overlap", "ms/step", "share",
                "calls", "name");
  out << line;
  for (size_t i = 0; i < std::min<size_t>(rows.size(), 40); ++i) {
    const auto& [name, t] = rows[i];
    std::snprintf(line, sizeof line, "%10.3f %6.1f%% %9.1f  %.300s\n", t.ns / 1e6 / steps, 100 * t.ns / all_ns,
                  static_cast<double>(t.calls) / steps, name.c_str());
    out << line;
  }
  std::snprintf(line, sizeof line, "%10.3f %6.1f%% %9s  (all)\n", all_ns / 1e6 / steps, 100.0, "");
  out << line;
}

}  // namespace

KernelTrace::KernelTrace(int64_t steps, int64_t first_step, int64_t total_steps, std::string run_dir, torch::Device device)
    : first_(first_step + 1), last_(std::min(first_step + steps, total_steps - 1)), run_dir_(std::move(run_dir)), device_(device) {}

KernelTrace::~KernelTrace() {
  if (active_) torch::autograd::profiler::disableProfiler();
}

void KernelTrace::before_step(int64_t step) {
  if (step != first_ || first_ > last_) return;
  std::set<profiler::ActivityType> activities{profiler::ActivityType::CPU};
  if (device_.is_cuda()) activities.insert(profiler::ActivityType::CUDA);
  const profiler::ProfilerConfig config(profiler::ProfilerState::KINETO);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
  active_ = true;
}

void KernelTrace::after_step(int64_t step) {
  if (!active_ || step != last_) return;
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  auto result = torch::autograd::profiler::disableProfiler();
  active_ = false;
  result->save(run_dir_ + "/trace.json");
  write_top(*result, device_.is_cuda(), last_ - first_ + 1, run_dir_ + "/trace_top.txt");
}

}  // namespace sinklm
