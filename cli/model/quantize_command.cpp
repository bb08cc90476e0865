// sinklm quantize: a checkpoint's projections stored as int8 rows (or every parameter in bf16), written as a
// new checkpoint that stream, serve, eval and bench-decode load in that format (--weights auto).
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/inference_model.h"
#include "core/config/args.h"
#include "core/error.h"
#include "data/tokenizers/tokenizer_files.h"
#include "model/io/checkpoint.h"
#include "model/projection.h"
#include "export/hf_tokenizer_files.h"

namespace sinklm {
namespace {

// The parameter names of every projection's weight, the LM head's unless it is kept.
std::set<std::string> projection_weights(GPTNeoXForCausalLM& model, bool keep_lm_head) {
  std::set<std::string> names;
  for (const auto& item : model->named_modules()) {
    const auto* projection = item.value()->as<ProjectionImpl>();
    if (projection && !(keep_lm_head && projection == model->embed_out.get())) names.insert(item.key() + ".weight");
  }
  return names;
}

}  // namespace

int run_quantize_command(const std::vector<std::string>& argv) {
  ModelFlags model;
  std::string out, weights = "int8";
  bool keep_lm_head = false;
  Args args("quantize", "--checkpoint DIR --out DIR [--weights int8|bf16] [--keep-lm-head]",
            {flag(&model.checkpoint, "checkpoint", "DIR", "checkpoint to convert (sinklm or Hugging Face GPT-NeoX)"),
             flag(&model.tokenizer, "tokenizer", "PATH", "tokenizer to copy into the output (default: the checkpoint's, as stream finds it)"),
             flag(&out, "out", "DIR", "checkpoint directory to write (replaced atomically if it exists)"),
             flag(&weights, "weights", "T",
                  "int8: every projection's weight as int8 in blocks of 32 with float32 scales, the rest float32; bf16: every parameter in bf16"),
             flag(&keep_lm_head, "keep-lm-head", "int8: keep the LM head (embed_out) in float32")},
            argv);
  if (args.print_help_if_requested()) return 0;
  args.require("checkpoint");
  args.require("out");
  const WeightFormat format = parse_weight_format(weights, "--weights");
  if (format == WeightFormat::Fp32) fail("--weights fp32: nothing to quantize; give int8 or bf16");
  LoadedModel loaded = load_checkpoint(model.checkpoint);
  const std::string tokenizer = tokenizer_source(model, loaded);
  CheckpointWriter writer(out);
  const auto int8 = format == WeightFormat::Int8 ? projection_weights(loaded.model, keep_lm_head) : std::set<std::string>{};
  writer.add_model(loaded.config, loaded.model, format == WeightFormat::Bf16 ? torch::kBFloat16 : torch::kFloat32, int8);
  if (!tokenizer.empty())
    add_tokenizer_files(writer, checkpoint_tokenizer(tokenizer_files(tokenizer, "--tokenizer"), loaded.config,
                                                     loaded.model->config(), HfView::Optional));
  writer.commit();
  std::cout << "quantized " << model.checkpoint << " -> " << out << ": "
            << (format == WeightFormat::Int8 ? std::to_string(int8.size()) + " projection weights int8" +
                                                   (keep_lm_head ? " (LM head kept float32)" : " (LM head included)")
                                             : std::string("every parameter bf16"))
            << (tokenizer.empty() ? "; no tokenizer (bytes)" : "; tokenizer " + tokenizer) << "\n";
  return 0;
}

}  // namespace sinklm
