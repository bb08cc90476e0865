#include "eval/model_under_test.h"

#include <torch/torch.h>

#include <filesystem>

#include "core/error.h"

namespace sinklm {
namespace {

torch::Device eval_device(const std::string& name) {
  if (name == "cpu") return torch::kCPU;
  if (name == "auto") return torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  if (name == "cuda" && torch::cuda::is_available()) return torch::kCUDA;
  if (name == "cuda") fail("--device cuda: no CUDA device is visible");
  fail("--device ", name, ": expected cpu, cuda or auto");
}

}  // namespace

std::vector<FlagSpec> with_model_flags(const std::vector<FlagSpec>& own) {
  std::vector<FlagSpec> flags = {
      {"checkpoint", "DIR", "checkpoint directory (sinklm or Hugging Face GPT-NeoX)"},
      {"tokenizer", "PATH", "tokenizer file (default: data.tokenizer of the checkpoint's config)"},
      {"device", "DEV", "cpu (default) | cuda | auto"},
      {"set", "KEY=VALUE", "override a run-time config key, e.g. model.attention=reference"}};
  flags.insert(flags.end(), own.begin(), own.end());
  return flags;
}

ModelUnderTest load_model_under_test(const Args& args) {
  const std::string checkpoint = args.require("checkpoint");
  ModelUnderTest m{checkpoint, load_checkpoint(checkpoint, eval_device(args.get("device", "cpu")), args.get_all("set")),
                   nullptr};
  m.loaded.model->eval();
  std::string path = args.get("tokenizer");
  if (path.empty()) {
    path = m.loaded.config.get_string("data.tokenizer");
    if (!path.empty() && !std::filesystem::exists(path))
      fail(checkpoint, ": the training tokenizer data.tokenizer = ", path,
           " does not exist here; pass --tokenizer PATH");
  }
  m.codec = load_text_codec(path, checkpoint, m.loaded.model->config());
  return m;
}

}  // namespace sinklm
