#include "cli/commands.h"

#include <nlohmann/json.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "cli/inference_model.h"
#include "core/config/args.h"
#include "core/error.h"
#include "model/io/checkpoint.h"
#include "model/analysis/model_summary.h"
#include "model/io/safetensors.h"
#include "core/system/cpu_features.h"
#include "train/distributed/cuda_versions.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

// `sinklm info` without a path: what this build runs with (LibTorch, the CUDA runtime, the driver, NCCL, the
// CPU kernels' instruction set). Exit 1 when the driver cannot run the CUDA runtime, naming both.
int print_system(bool as_json) {
  const CudaVersions cuda = cuda_versions();
  nlohmann::json system = to_json(cuda);
  system["libtorch"] = TORCH_VERSION;
  system["cuda_devices"] = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  system["cpu_kernels"] = cpu_has_avx512f() ? "avx512" : cpu_has_avx2_fma() ? "avx2" : "none (LibTorch only)";
  system["threads"] = at::get_num_threads();
  const std::string mismatch = driver_mismatch(cuda);
  if (as_json) {
    std::cout << system.dump(2) << "\n";
  } else {
    std::cout << "sinklm info: this build\n"
              << "  libtorch      " << TORCH_VERSION << "\n"
              << "  cuda runtime  " << cuda_version_text(cuda.runtime) << "\n"
              << "  nvidia driver " << (cuda.driver ? "supports CUDA " + cuda_version_text(cuda.driver) : std::string("none loaded"))
              << (cuda.driver_release.empty() ? "" : ", release " + cuda.driver_release) << "\n"
              << "  nccl          " << nccl_version_text(cuda.nccl) << "\n"
              << "  cuda devices  " << system["cuda_devices"] << "\n"
              << "  cpu kernels   " << system["cpu_kernels"].get<std::string>() << ", " << system["threads"] << " threads\n";
  }
  if (mismatch.empty()) return 0;
  std::cerr << "sinklm info: error: " << mismatch << "\n";
  return 1;
}

Config config_from_path(const std::string& path, const std::vector<std::string>& overrides) {
  Config config = fs::is_directory(path) ? load_checkpoint_config(path) : Config::load_file(path);
  config.apply_overrides(overrides);
  return config;
}

// Bytes per stream and streams per GiB of the cache `options` ask for, in each K/V format it can store.
nlohmann::json kv_memory_by_format(CacheOptions options, const ModelConfig& model) {
  nlohmann::json rows = nlohmann::json::array();
  for (auto format : {KvFormat::Fp32, KvFormat::Bf16, KvFormat::Int8, KvFormat::Int8All}) {
    options.kv_format = format;
    std::unique_ptr<KvCachePolicy> policy;
    try {
      policy = make_cache_policy(options, model);
    } catch (const UserError&) {
      continue;  // e.g. int8 for a cache without sink slots
    }
    auto row = kv_memory_json(*policy, model);
    rows.push_back({{"kv_dtype", kv_format_name(format)}, {"kv_bytes_per_stream", row["kv_bytes_per_stream"]},
                    {"streams_per_gib", row["streams_per_gib"]}});
  }
  return rows;
}

}  // namespace

int run_info_command(const std::vector<std::string>& argv) {
  std::vector<std::string> overrides;
  bool json = false;
  CacheFlags cache_flag_values;
  Args args("info", "[<config.yaml | checkpoint-dir> [--set KEY=VALUE ...] [--cache POLICY --window W ...]] [--json]  (no path: this build's LibTorch, CUDA runtime, driver and NCCL)",
            with_flags({set_flag(&overrides), flag(&json, "json", "print one JSON object instead of text")},
                       {cache_flags(cache_flag_values)}),
            argv);
  if (args.print_help_if_requested()) return 0;
  if (args.positionals().empty()) return print_system(json);
  if (args.positionals().size() != 1) {
    std::cout << args.usage();
    return 2;
  }
  const std::string path = args.positionals()[0];
  Config config = config_from_path(path, overrides);
  ModelConfig model = ModelConfig::from(config);
  nlohmann::json summary = model_summary_json(model);
  summary["source"] = path;
  WeightFormat stored_format = WeightFormat::Fp32;  // what --kv-dtype auto follows: bf16 for an all-bf16 checkpoint
  if (fs::is_directory(path)) {
    int64_t stored = 0;
    std::set<std::string> dtypes;
    SafetensorsFile weights(path + "/model.safetensors");
    for (const auto& [name, entry] : weights.entries()) {
      int64_t n = 1;
      for (int64_t d : entry.shape) n *= d;
      stored += n;
      dtypes.insert(entry.dtype);
    }
    summary["checkpoint"] = {{"tensors", weights.entries().size()},
                             {"stored_parameters", stored},
                             {"dtypes", dtypes},
                             {"verified", fs::exists(path + "/manifest.json")}};
    if (dtypes == std::set<std::string>{"BF16"}) stored_format = WeightFormat::Bf16;
  }
  // With cache flags: the K/V memory one stream of that cache holds once its budgets are full.
  std::unique_ptr<KvCachePolicy> cache;
  if (args.has("cache") || args.has("window")) {
    const CacheOptions options = cache_options(cache_flag_values, model, trained_positions(config, path), stored_format);
    cache = make_cache_policy(options, model, "--cache/--window/--sinks");
    summary["kv_cache"] = kv_memory_json(*cache, model);
    summary["kv_cache"].update({{"cache", cache->name()}, {"config", cache->label()}, {"kv_dtype", kv_format_name(cache->kv_format())},
                                {"by_format", kv_memory_by_format(options, model)}});
  }
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return 0;
  }
  std::cout << "sinklm info " << path << "\n" << model_summary_text(model);
  if (summary.contains("checkpoint")) {
    const auto& ck = summary["checkpoint"];
    std::cout << "  checkpoint    " << ck["tensors"] << " tensors, " << ck["stored_parameters"] << " values stored as "
              << ck["dtypes"].dump() << "; "
              << (ck["verified"] ? "manifest verified (size + sha256 of every file)" : "no manifest (Hugging Face export)")
              << "\n";
  }
  if (cache) {
    const auto& kv = summary["kv_cache"];
    std::cout << "  kv cache      " << cache->name() << " " << cache->label() << " (" << kv["kv_dtype"].get<std::string>()
              << "): " << kv["kv_bytes_per_stream"] << " bytes per stream; per layer " << kv["kv_bytes_per_layer"].dump() << "\n";
    for (const auto& row : kv["by_format"])
      std::cout << "    --kv-dtype " << row["kv_dtype"].get<std::string>() << ": " << row["kv_bytes_per_stream"]
                << " bytes per stream, " << row["streams_per_gib"] << " streams per GiB\n";
  }
  return 0;
}

}  // namespace sinklm
