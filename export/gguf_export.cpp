#include "export/gguf_export.h"

#include <torch/torch.h>

#include <map>

#include "core/error.h"
#include "export/gguf_vocabulary.h"
#include "model/sink.h"

namespace sinklm {
namespace {

// Hugging Face GPT-NeoX names (after "gpt_neox.layers.N.") -> llama.cpp's (after "blk.N.").
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> names = {
      {"input_layernorm", "attn_norm"},   {"attention.query_key_value", "attn_qkv"},
      {"attention.dense", "attn_output"}, {"post_attention_layernorm", "ffn_norm"},
      {"mlp.dense_h_to_4h", "ffn_up"},    {"mlp.dense_4h_to_h", "ffn_down"}};
  return names;
}

std::string gguf_name(const std::string& hf_name) {
  if (hf_name == "gpt_neox.embed_in.weight") return "token_embd.weight";
  if (hf_name == "embed_out.weight") return "output.weight";
  const std::string final_norm = "gpt_neox.final_layer_norm.";
  if (hf_name.rfind(final_norm, 0) == 0) return "output_norm." + hf_name.substr(final_norm.size());
  const std::string layers = "gpt_neox.layers.";
  SINKLM_ASSERT(hf_name.rfind(layers, 0) == 0, "unexpected parameter ", hf_name);
  const size_t dot = hf_name.find('.', layers.size());
  const std::string block = hf_name.substr(layers.size(), dot - layers.size());
  const std::string rest = hf_name.substr(dot + 1);
  const size_t last = rest.rfind('.');
  const auto it = layer_names().find(rest.substr(0, last));
  SINKLM_ASSERT(it != layer_names().end(), "unexpected parameter ", hf_name);
  return "blk." + block + "." + it->second + rest.substr(last);
}

// query_key_value rows (weight [3 * hidden, hidden] or bias [3 * hidden]) from per-head [H, 3, D] to [3, H, D].
torch::Tensor queries_keys_values(const torch::Tensor& t, int64_t heads) {
  const int64_t rows = t.size(0);
  std::vector<int64_t> grouped = {heads, 3, rows / (3 * heads)};
  if (t.dim() == 2) grouped.push_back(t.size(1));
  return t.reshape(grouped).transpose(0, 1).reshape(t.sizes());
}

uint32_t file_type(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: return 0;
    case GgufTensorType::Q8_0: return 7;
    case GgufTensorType::BF16: return 32;
  }
  SINKLM_ASSERT(false, "unknown GGUF type");
}

void check_expressible(const ModelConfig& model) {
  if (model.sink_mode != SinkMode::None && model.sink_mode != SinkMode::Token)
    fail("model.sink.mode ", sink_mode_name(model.sink_mode), ": llama.cpp's gptneox attention has no such sink; "
         "GGUF export covers the modes none and token");
  if (model.sink_mode == SinkMode::Token && model.sink_count != 1)
    fail("model.sink.count ", model.sink_count, ": llama.cpp prepends one BOS token, so a GGUF file carries one sink "
         "token; this model has ", model.sink_count);
}

void add_hyperparameters(GgufFile& file, const ModelConfig& c, const std::string& name, GgufTensorType type) {
  file.add_string("general.architecture", "gptneox");
  file.add_string("general.name", name);
  file.add_u32("general.file_type", file_type(type));
  if (type == GgufTensorType::Q8_0) file.add_u32("general.quantization_version", 2);
  file.add_u32("gptneox.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  file.add_u32("gptneox.embedding_length", static_cast<uint32_t>(c.hidden_size));
  file.add_u32("gptneox.block_count", static_cast<uint32_t>(c.num_layers));
  file.add_u32("gptneox.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  file.add_u32("gptneox.attention.head_count", static_cast<uint32_t>(c.num_heads));
  file.add_f32("gptneox.attention.layer_norm_epsilon", static_cast<float>(c.layer_norm_eps));
  file.add_u32("gptneox.rope.dimension_count", static_cast<uint32_t>(c.rotary_dims()));
  file.add_f32("gptneox.rope.freq_base", static_cast<float>(c.rotary_base));
  file.add_bool("gptneox.use_parallel_residual", c.parallel_residual);
}

}  // namespace

GgufTensorType parse_gguf_type(const std::string& name, const std::string& flag) {
  if (name == "f32") return GgufTensorType::F32;
  if (name == "bf16") return GgufTensorType::BF16;
  if (name == "q8_0") return GgufTensorType::Q8_0;
  fail(flag, " ", name, ": expected f32, bf16 or q8_0");
}

const char* gguf_type_name(GgufTensorType type) {
  switch (type) {
    case GgufTensorType::F32: return "f32";
    case GgufTensorType::Q8_0: return "q8_0";
    case GgufTensorType::BF16: return "bf16";
  }
  SINKLM_ASSERT(false, "unknown GGUF type");
}

size_t export_gguf(const LoadedModel& loaded, const std::string& name, const std::string& tokenizer_file,
                   GgufTensorType type, const std::string& out) {
  const ModelConfig& c = loaded.model->config();
  check_expressible(c);
  if (tokenizer_file.empty())
    fail("no tokenizer: llama.cpp needs the vocabulary in the GGUF file; pass --tokenizer PATH");
  GgufFile file;
  add_hyperparameters(file, c, name, type);
  add_gguf_vocabulary(file, c, tokenizer_file);
  size_t count = 0;
  torch::NoGradGuard no_grad;
  for (const auto& item : loaded.model->named_parameters()) {
    torch::Tensor t = item.value().detach().to(torch::kFloat32);
    if (item.key().find("attention.query_key_value") != std::string::npos) t = queries_keys_values(t, c.num_heads);
    const bool matrix = t.dim() == 2 && (type != GgufTensorType::Q8_0 || t.size(1) % 32 == 0);
    file.add_tensor(gguf_name(item.key()), t, matrix ? type : GgufTensorType::F32);
    ++count;
  }
  file.write(out);
  return count;
}

}  // namespace sinklm
