// The one list of configuration keys sinklm understands. Each module reads its section through
// sinklm::Config; adding a key here is what makes it valid in YAML files and in --set.
#include "core/config.h"

namespace sinklm {
namespace {

KeySpec integer(std::string key, int64_t value, double min, double max, std::string help) {
  return {std::move(key), ValueType::Int, std::to_string(value), std::move(help), min, max, {}};
}
KeySpec number(std::string key, std::string value, double min, double max, std::string help) {
  return {std::move(key), ValueType::Float, std::move(value), std::move(help), min, max, {}};
}
KeySpec boolean(std::string key, bool value, std::string help) {
  return {std::move(key), ValueType::Bool, value ? "true" : "false", std::move(help)};
}
KeySpec choice(std::string key, std::vector<std::string> choices, std::string help) {
  std::string first = choices.front();
  return {std::move(key), ValueType::Choice, first, std::move(help), 0, 0, std::move(choices)};
}

std::vector<KeySpec> build_schema() {
  return {
      // model: a GPT-NeoX decoder (defaults are Pythia-160M)
      integer("model.vocab_size", 50304, 2, 1 << 24, "embedding rows, padded vocabulary"),
      integer("model.tokenizer_vocab_size", -1, -1, 1 << 24,
              "real vocabulary of the tokenizer; sink ids follow it; -1 = vocab_size - sink.count"),
      integer("model.hidden_size", 768, 8, 65536, "model width"),
      integer("model.num_layers", 12, 1, 1024, "decoder layers"),
      integer("model.num_heads", 12, 1, 1024, "attention heads; hidden_size must divide evenly"),
      integer("model.intermediate_size", 3072, 1, 1 << 20, "MLP width"),
      number("model.rotary_pct", "0.25", 0, 1, "fraction of each head's dims that get rotary embedding"),
      number("model.rotary_base", "10000", 1, 1e12, "rotary base (theta)"),
      integer("model.max_position_embeddings", 2048, 1, 1 << 24, "trained context length"),
      number("model.layer_norm_eps", "1e-5", 1e-12, 1, "LayerNorm epsilon"),
      boolean("model.parallel_residual", true, "x + attn(ln1(x)) + mlp(ln2(x)) instead of sequential"),
      integer("model.bos_token_id", 0, 0, 1 << 24, "beginning-of-text id (config.json)"),
      integer("model.eos_token_id", 0, 0, 1 << 24, "end-of-text id (config.json)"),
      integer("model.init_seed", 1234, 0, 1e15, "seed for the GPT-NeoX initialisation"),
      choice("model.attention", {"fast", "reference"},
             "fast = scaled_dot_product_attention; reference = plain softmax(QK^T)V"),
      choice("model.sink.mode", {"none", "token", "softmax1", "logit"},
             "none = vanilla; token = learnable sink token(s); softmax1 = zero sink; logit = learned per-head "
             "sink logit"),
      integer("model.sink.count", 1, 1, 64, "number of learnable sink tokens (mode token)"),
  };
}

}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

}  // namespace sinklm
