// train.trace_steps = N (0 = off): LibTorch's profiler (Kineto: CPU operators; on CUDA also every kernel,
// copy and memset through CUPTI) over N steps after the first. Writes <run>/trace.json (Chrome trace format:
// open it in Perfetto or chrome://tracing) and <run>/trace_top.txt: the operators (CPU) or kernels (CUDA)
// with the most total time per step, the table to compare against another stack's (e.g. torch.profiler's
// key_averages of scripts/gpu/gpu_python_baseline.py --trace). Rank 0 only; the window costs what the profiler
// costs, so keep it short and out of timed runs.
#pragma once
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace sinklm {

class KernelTrace {
 public:
  KernelTrace(int64_t steps, int64_t first_step, int64_t total_steps, std::string run_dir, torch::Device device);
  ~KernelTrace();
  void before_step(int64_t step);  // starts the profiler at the window's first step
  void after_step(int64_t step);   // stops it after the window's last step and writes both files

 private:
  int64_t first_, last_;  // 0-based steps [first_, last_] are traced
  std::string run_dir_;
  torch::Device device_;
  bool active_ = false;
};

}  // namespace sinklm
