#include "train/training_checkpoint.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/files/atomic_dir.h"
#include "core/error.h"
#include "data/io/read_file.h"
#include "data/shards/shard_directory.h"
#include "train/train_options.h"
#include "data/tokenizers/tokenizer_files.h"
#include "model/io/checkpoint.h"
#include "model/io/safetensors.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

// Complete-looking checkpoint directories (step_<8 digits>), newest first.
std::vector<fs::path> step_directories(const std::string& run_dir) {
  std::vector<fs::path> out;
  fs::path root = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(root)) return out;
  for (const auto& entry : fs::directory_iterator(root)) {
    std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.size() == 13 && name.rfind("step_", 0) == 0 &&
        name.find_first_not_of("0123456789", 5) == std::string::npos)
      out.push_back(entry.path());
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

}  // namespace

std::string checkpoint_dir_for_step(const std::string& run_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return (fs::path(run_dir) / "checkpoints" / name).string();
}

std::optional<std::string> newest_complete_checkpoint(const std::string& run_dir) {
  for (const auto& dir : step_directories(run_dir)) {
    try {
      if (!fs::exists(dir / "manifest.json") || !fs::exists(dir / "trainer_state.json"))
        fail(dir.string(), ": no manifest.json or trainer_state.json");
      verify_checkpoint_files(dir.string());
      return dir.string();
    } catch (const UserError& e) {
      std::cerr << "sinklm train: skipping damaged checkpoint: " << e.what() << "\n";
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& run_dir, int64_t keep) {
  auto dirs = step_directories(run_dir);
  for (size_t i = static_cast<size_t>(keep); i < dirs.size(); ++i) fs::remove_all(dirs[i]);
}

nlohmann::json read_trainer_state(const std::string& checkpoint_dir) {
  std::string path = checkpoint_dir + "/trainer_state.json";
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open");
  nlohmann::json state;
  try {
    state = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
  if (state.value("format", "") != "sinklm-train-state") fail(path, ": not a sinklm trainer state");
  for (const char* key : {"step", "adam_steps", "flat_numel", "loader"})
    if (!state.contains(key)) fail(path, ": missing field '", key, "'");
  return state;
}

OptimizerState read_optimizer_state(const std::string& checkpoint_dir, int64_t flat_numel) {
  std::vector<std::string> files;
  if (fs::exists(checkpoint_dir + "/optimizer.safetensors")) {
    files.push_back(checkpoint_dir + "/optimizer.safetensors");
  } else {
    for (int r = 0; fs::exists(checkpoint_dir + "/optimizer.rank" + std::to_string(r) + ".safetensors"); ++r)
      files.push_back(checkpoint_dir + "/optimizer.rank" + std::to_string(r) + ".safetensors");
  }
  if (files.empty()) fail(checkpoint_dir, ": no optimizer.safetensors or optimizer.rank0.safetensors");
  std::vector<torch::Tensor> avg, avg_sq;
  for (const auto& path : files) {
    SafetensorsFile file(path);
    for (const char* name : {"exp_avg", "exp_avg_sq"})
      if (!file.contains(name)) fail(path, ": missing tensor '", name, "'");
    avg.push_back(file.view("exp_avg").clone());
    avg_sq.push_back(file.view("exp_avg_sq").clone());
  }
  OptimizerState state{torch::cat(avg), torch::cat(avg_sq)};
  if (state.exp_avg.numel() < flat_numel)
    fail(checkpoint_dir, ": optimizer state holds ", state.exp_avg.numel(), " values but the model has ", flat_numel,
         " parameters (another model, or a rank's shard is missing)");
  state.exp_avg = state.exp_avg.narrow(0, 0, flat_numel);
  state.exp_avg_sq = state.exp_avg_sq.narrow(0, 0, flat_numel);
  return state;
}

std::vector<std::string> run_tokenizer_files(const Config& config) {
  const std::vector<MixtureSource> sources = shard_sources(config);
  const ShardTokenizer shards = read_shard_tokenizer(sources.front().shards);
  for (size_t i = 1; i < sources.size(); ++i) {  // one model, one vocabulary: every source's ids mean the same
    const ShardTokenizer other = read_shard_tokenizer(sources[i].shards);
    if (other.sha256 != shards.sha256 || other.vocab_size != shards.vocab_size)
      fail(config.source(), ": data.mixture: ", sources[i].shards, " was made with another tokenizer (",
           other.description, ") than ", sources.front().shards, " (", shards.description,
           "); prepare every source with the same tokenizer");
  }
  const std::string named = config.get_string("data.tokenizer");
  if (named.empty()) return shards.files;
  std::vector<std::string> files = tokenizer_files(named, config.source() + ": data.tokenizer");
  if (!shards.files.empty() && tokenizer_sha256(files) != shards.sha256)
    fail(config.source(), ": data.tokenizer ", named, " is not the tokenizer ",
         sources.size() > 1 ? "data.mixture's first source " : "data.shards ", sources.front().shards, " was made with (", shards.description, "; sha256 differs); drop data.tokenizer to use the shards' copy");
  return files;
}

}  // namespace sinklm
