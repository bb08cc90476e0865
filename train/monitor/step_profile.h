// Where a training step's wall-clock time goes (train.profile_steps = N, 0 = off). The trainer marks the end
// of each phase with lap(phase), which charges the time since the previous mark to that phase, so the phases
// add up to the whole step:
//   data        the loader's next batch and its tensor on the device
//   forward     forward passes and the loss, all micro-steps (fp32: with the output projection's gradient,
//               which the fused loss forms in forward, train/linear_cross_entropy.h)
//   backward    backward passes, all micro-steps (with data parallelism: starting bucket all-reduces inside)
//   allreduce   time blocked waiting for the gradient all-reduce after backward (ZeRO-1: the reduce-scatter)
//   host_sync   the loss brought to the host and summed over ranks
//   optimizer   gradient norm, clipping, AdamW, zeroing gradients (ZeRO-1: the weight all-gather)
// The first step after a start or resume warms up (allocator, thread pool, MPI connections) and is not
// measured; the next N are (fewer when the run ends first). On CUDA each lap first waits for the device, so kernels count in the phase that
// launched them; those waits slow the profiled steps, which is why profiling is off by default. On the CPU a
// lap costs one clock read.
// Report: per-step mean milliseconds per phase for every rank and their mean over ranks, written to
// <run>/profile.json by rank 0 and printed as a table.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <array>
#include <chrono>
#include <cstdint>

#include "train/distributed/communicator.h"

namespace sinklm {

enum class StepPhase { Data, Forward, Backward, AllReduce, HostSync, Optimizer };
constexpr size_t kStepPhases = 6;

class StepProfile {
 public:
  // Measures steps [first_step + 1, first_step + 1 + steps) of a run of total_steps (0-based step numbers),
  // fewer if the run ends first; steps = 0: never.
  StepProfile(int64_t steps, int64_t first_step, int64_t total_steps, torch::Device device);

  void begin_step(int64_t step);
  void lap(StepPhase phase);
  // True once the last measured step has ended: time for report().
  bool window_complete(int64_t step) const { return measuring_ && step == last_step_; }
  // A collective (every rank calls it): the per-step means of every rank, and over ranks.
  nlohmann::json report(const Communicator& communicator, double tokens_per_step);

 private:
  using Clock = std::chrono::steady_clock;
  int64_t first_step_, last_step_;
  torch::Device device_;
  bool measuring_ = false;
  Clock::time_point mark_;
  std::array<double, kStepPhases> seconds_{};  // summed over the measured steps
};

// The report as an aligned table, one row per phase, a column per rank and the mean.
std::string profile_table(const nlohmann::json& report);

}  // namespace sinklm
