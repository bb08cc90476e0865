// sinklm export <hf | gguf>: a checkpoint for the tools people already run. hf: a directory transformers (and
// lm-eval's hf backend) loads whole; gguf: one GGUF v3 file for llama.cpp. Both keep the sink token first
// (export/hf_tokenizer_files.h, export/gguf_vocabulary.h) and refuse the modes the other tool cannot compute.
#include <filesystem>
#include <iostream>

#include "cli/command_steps.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "core/config/args.h"
#include "core/error.h"
#include "data/tokenizers/tokenizer_files.h"
#include "export/gguf_export.h"
#include "export/hf_export.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

std::vector<FlagSpec> export_flags(ModelFlags& model, std::string& out, const char* out_help) {
  return {flag(&model.checkpoint, "checkpoint", "DIR", "checkpoint to export (sinklm or Hugging Face GPT-NeoX)"),
          flag(&model.tokenizer, "tokenizer", "PATH", "its tokenizer (default: the checkpoint's, as stream finds it)"),
          flag(&out, "out", "PATH", out_help)};
}

// Parses a step's flags: false when --help was asked (and printed); else --checkpoint and --out are given.
bool parse_export_step(const std::string& step, const std::string& synopsis, const std::vector<FlagSpec>& flags,
                       const std::vector<std::string>& argv) {
  Args args("export " + step, synopsis, flags, argv);
  if (args.print_help_if_requested()) return false;
  args.require("checkpoint");
  args.require("out");
  return true;
}

int export_hf_step(const std::vector<std::string>& argv) {
  ModelFlags model;
  std::string out, dtype = "f32";
  std::vector<FlagSpec> flags = export_flags(model, out, "directory to write (replaced atomically if it exists)");
  flags.push_back(flag(&dtype, "dtype", "T", "f32 or bf16: the weights' type in model.safetensors"));
  if (!parse_export_step("hf", "--checkpoint DIR --out DIR [--dtype f32|bf16] [--tokenizer PATH]", flags, argv)) return 0;
  if (dtype != "f32" && dtype != "bf16") fail("--dtype ", dtype, ": expected f32 or bf16");
  LoadedModel loaded = load_checkpoint(model.checkpoint);
  const std::string tokenizer = tokenizer_source(model, loaded);
  export_hf(loaded, tokenizer.empty() ? std::vector<std::string>{} : tokenizer_files(tokenizer, "--tokenizer"), out,
            dtype == "bf16" ? torch::kBFloat16 : torch::kFloat32);
  std::cout << "exported " << model.checkpoint << " -> " << out << " (" << dtype << " weights; "
            << (tokenizer.empty() ? "no tokenizer" : "tokenizer.json from " + tokenizer) << ")\n";
  return 0;
}

int export_gguf_step(const std::vector<std::string>& argv) {
  ModelFlags model;
  std::string out, type = "f32";
  std::vector<FlagSpec> flags = export_flags(model, out, "GGUF file to write (replaced atomically if it exists)");
  flags.push_back(flag(&type, "type", "T", "f32, bf16 or q8_0: the matrices' type (norms and biases stay f32)"));
  if (!parse_export_step("gguf", "--checkpoint DIR --out FILE [--type f32|bf16|q8_0] [--tokenizer PATH]", flags, argv))
    return 0;
  const GgufTensorType tensor_type = parse_gguf_type(type, "--type");
  const LoadedModel loaded = load_checkpoint(model.checkpoint);
  const std::string tokenizer = tokenizer_source(model, loaded);
  const std::string name = fs::path(model.checkpoint).lexically_normal().filename().string();
  const size_t tensors = export_gguf(loaded, name.empty() ? "sinklm" : name, tokenizer, tensor_type, out);
  std::cout << "exported " << model.checkpoint << " -> " << out << " (GGUF v3, " << tensors << " tensors, "
            << gguf_type_name(tensor_type) << ")\n";
  return 0;
}

}  // namespace

int run_export_command(const std::vector<std::string>& args) {
  static const std::vector<CommandStep> steps = {
      {"hf", "a checkpoint as a directory transformers loads whole, the sink token in its tokenizer", export_hf_step},
      {"gguf", "a checkpoint as a GGUF file for llama.cpp (f32, bf16, q8_0), the sink token as its BOS", export_gguf_step},
  };
  return run_command_steps("export", steps, args);
}

}  // namespace sinklm
