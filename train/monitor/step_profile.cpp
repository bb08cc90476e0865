#include "train/monitor/step_profile.h"

#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace sinklm {
namespace {

constexpr const char* kPhaseNames[kStepPhases] = {"data", "forward", "backward", "allreduce", "host_sync", "optimizer"};

}  // namespace

StepProfile::StepProfile(int64_t steps, int64_t first_step, int64_t total_steps, torch::Device device)
    : first_step_(first_step + 1),
      last_step_(std::min(first_step + steps, total_steps - 1)),
      device_(device) {}

void StepProfile::begin_step(int64_t step) {
  measuring_ = step >= first_step_ && step <= last_step_;
  if (!measuring_) return;
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  mark_ = Clock::now();
}

void StepProfile::lap(StepPhase phase) {
  if (!measuring_) return;
  if (device_.is_cuda()) torch::cuda::synchronize(device_.index());
  const auto now = Clock::now();
  seconds_[static_cast<size_t>(phase)] += std::chrono::duration<double>(now - mark_).count();
  mark_ = now;
}

nlohmann::json StepProfile::report(const Communicator& communicator, double tokens_per_step) {
  const int ranks = communicator.world_size();
  const double steps = static_cast<double>(last_step_ - first_step_ + 1);
  // Every rank fills its own row of a [ranks, phases] table; the sum over ranks gathers them all.
  std::vector<double> table(static_cast<size_t>(ranks) * kStepPhases, 0.0);
  for (size_t p = 0; p < kStepPhases; ++p) table[communicator.rank() * kStepPhases + p] = seconds_[p];
  communicator.allreduce_sum_host(table, "step profile");
  nlohmann::json per_rank = nlohmann::json::array(), mean = nlohmann::json::object();
  double mean_total = 0;
  for (int r = 0; r < ranks; ++r) {
    nlohmann::json row = nlohmann::json::object();
    double total = 0;
    for (size_t p = 0; p < kStepPhases; ++p) {
      const double ms = 1e3 * table[r * kStepPhases + p] / steps;
      row[kPhaseNames[p]] = ms;
      mean[kPhaseNames[p]] = mean.value(kPhaseNames[p], 0.0) + ms / ranks;
      total += ms;
    }
    row["total"] = total;
    mean_total += total / ranks;
    per_rank.push_back(row);
  }
  mean["total"] = mean_total;
  return {{"steps", last_step_ - first_step_ + 1},
          {"first_step", first_step_ + 1},  // 1-based, as the log counts steps
          {"ranks", ranks},
          {"tokens_per_step", tokens_per_step},
          {"tokens_per_s", tokens_per_step / (mean_total / 1e3)},
          {"ms_per_step", mean},
          {"ms_per_step_by_rank", per_rank}};
}

std::string profile_table(const nlohmann::json& report) {
  const auto& ranks = report["ms_per_step_by_rank"];
  std::string out;
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-10s", "ms/step");
  out += cell;
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::snprintf(cell, sizeof cell, " %9s", ("rank " + std::to_string(r)).c_str());
    out += cell;
  }
  out += "      mean      %\n";
  const double total = report["ms_per_step"]["total"].get<double>();
  std::vector<std::string> rows(kPhaseNames, kPhaseNames + kStepPhases);
  rows.push_back("total");
  for (const auto& name : rows) {
    std::snprintf(cell, sizeof cell, "%-10s", name.c_str());
    out += cell;
    for (const auto& rank : ranks) {
      std::snprintf(cell, sizeof cell, " %9.2f", rank[name].get<double>());
      out += cell;
    }
    const double mean = report["ms_per_step"][name].get<double>();
    std::snprintf(cell, sizeof cell, " %9.2f %5.1f%%\n", mean, 100 * mean / total);
    out += cell;
  }
  return out;
}

}  // namespace sinklm
