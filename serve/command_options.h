// Command-line options shared by the serve module's subcommands (stream, serve, bench-decode).
#pragma once
#include <torch/cuda.h>
#include <torch/utils.h>

#include <vector>

#include "core/args.h"
#include "core/error.h"
#include "serve/kv_cache_policy.h"

namespace sinklm {

// --cache, --window, --sinks, --positions.
inline std::vector<FlagSpec> cache_flags() {
  return {{"cache", "POLICY", "full | window | sink_window (default) | recompute"},
          {"window", "W", "cache budget in entries, sinks included (default 1024; full: its limit)"},
          {"sinks", "S", "sink entries (default: the model's sink tokens for token models, else 4)"},
          {"positions", "RULE", "cache (positions inside the cache, default) | stream"}};
}

inline CacheOptions cache_options(const Args& args) {
  CacheOptions o;
  o.policy = args.get("cache", "sink_window");
  o.window = args.get_int("window", 1024);
  o.sinks = args.get_int("sinks", -1);
  o.positions = parse_position_rule(args.get("positions", "cache"), "--positions");
  return o;
}

// --device, --threads.
inline std::vector<FlagSpec> runtime_flags() {
  return {{"device", "DEV", "cpu (default) | cuda | auto"},
          {"threads", "N", "intra-op CPU threads for the model (default: LibTorch's choice)"}};
}

// Applies --threads and returns the --device to run on.
inline torch::Device apply_runtime_options(const Args& args) {
  if (args.has("threads")) {
    const int64_t threads = args.get_int("threads", 1);
    if (threads < 1) fail("--threads must be at least 1, got ", threads);
    torch::set_num_threads(static_cast<int>(threads));
  }
  const std::string name = args.get("device", "cpu");
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name == "auto") {
    if (torch::cuda::is_available()) return torch::kCUDA;
    if (name == "cuda") fail("--device cuda: no CUDA device is visible");
    return torch::kCPU;
  }
  fail("--device ", name, ": expected cpu, cuda or auto");
}

// `base` followed by the shared tables (cache_flags(), runtime_flags()).
inline std::vector<FlagSpec> with_flags(std::vector<FlagSpec> base, std::initializer_list<std::vector<FlagSpec>> shared) {
  for (const auto& extra : shared) base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

}  // namespace sinklm
