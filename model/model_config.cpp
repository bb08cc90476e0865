#include "model/model_config.h"

#include "core/error.h"

namespace sinklm {

ModelConfig ModelConfig::from(const Config& config) {
  const std::string& where = config.source();
  ModelConfig m;
  m.vocab_size = config.get_int("model.vocab_size");
  m.hidden_size = config.get_int("model.hidden_size");
  m.num_layers = config.get_int("model.num_layers");
  m.num_heads = config.get_int("model.num_heads");
  m.intermediate_size = config.get_int("model.intermediate_size");
  m.rotary_pct = config.get_float("model.rotary_pct");
  m.rotary_base = config.get_float("model.rotary_base");
  m.max_position_embeddings = config.get_int("model.max_position_embeddings");
  m.layer_norm_eps = config.get_float("model.layer_norm_eps");
  m.parallel_residual = config.get_bool("model.parallel_residual");
  m.bos_token_id = config.get_int("model.bos_token_id");
  m.eos_token_id = config.get_int("model.eos_token_id");
  m.pad_token_id = config.get_int("model.pad_token_id");
  m.init_seed = config.get_int("model.init_seed");
  m.attention = config.get_string("model.attention") == "fast" ? AttentionImpl::Fast : AttentionImpl::Reference;
  m.sink_mode = parse_sink_mode(config.get_string("model.sink.mode"));
  m.sink_count = m.sink_mode == SinkMode::Token ? config.get_int("model.sink.count") : 0;
  m.sink_gate_elementwise = config.get_string("model.sink.gate") == "elementwise";
  m.sink_kv_init = config.get_string("model.sink.kv_init") == "normal" ? SinkInit::Normal : SinkInit::Zero;

  if (m.hidden_size % m.num_heads != 0)
    fail(where, ": model.hidden_size (", m.hidden_size, ") must be divisible by model.num_heads (", m.num_heads, ")");
  const int64_t tokenizer_vocab = config.get_int("model.tokenizer_vocab_size");
  if (m.vocab_size < 0 && tokenizer_vocab < 0)
    fail(where, ": model.vocab_size and model.tokenizer_vocab_size follow the tokenizer (-1), and none is known "
         "here; set them, or let `sinklm train` take them from the tokenizer of data.shards");
  constexpr int64_t kVocabMultiple = 128;  // embedding rows padded for matmul tiles, as GPT-NeoX pads 50277 to 50304
  if (m.vocab_size < 0) m.vocab_size = (tokenizer_vocab + m.sink_count + kVocabMultiple - 1) / kVocabMultiple * kVocabMultiple;
  m.tokenizer_vocab_size = tokenizer_vocab < 0 ? m.vocab_size - m.sink_count : tokenizer_vocab;
  if (m.tokenizer_vocab_size + m.sink_count > m.vocab_size)
    fail(where, ": model.tokenizer_vocab_size (", m.tokenizer_vocab_size, ") + model.sink.count (", m.sink_count,
         ") exceeds model.vocab_size (", m.vocab_size, "); sink token rows live inside the padded vocabulary, so "
         "raise model.vocab_size");
  if (m.tokenizer_vocab_size < 1) fail(where, ": model.tokenizer_vocab_size must leave at least one real token");
  for (const auto& [key, id] : {std::pair{"model.bos_token_id", m.bos_token_id}, {"model.eos_token_id", m.eos_token_id},
                                 {"model.pad_token_id", m.pad_token_id}})
    if (id >= m.tokenizer_vocab_size)
      fail(where, ": ", key, " (", id, ") must be < the tokenizer vocabulary (", m.tokenizer_vocab_size, ")");
  return m;
}

int64_t ModelConfig::start_of_text_id() const {
  if (bos_token_id >= 0) return bos_token_id;
  if (eos_token_id >= 0) return eos_token_id;
  fail("the model's config names no beginning- or end-of-text id (model.bos_token_id, model.eos_token_id); set "
       "one, or train it with `sinklm train`, which takes them from the tokenizer");
}

int64_t ModelConfig::rotary_dims() const {
  auto dims = static_cast<int64_t>(static_cast<double>(head_dim()) * rotary_pct);  // HF: int(head_dim * pct)
  return dims - dims % 2;
}

ParameterCount count_parameters(const ModelConfig& c) {
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  const int64_t layer_norm = 2 * h;
  const int64_t attention = (h * 3 * h + 3 * h) + (h * h + h) + sink_parameter_count(c);
  const int64_t mlp = (h * i + i) + (i * h + h);
  ParameterCount count;
  count.embedding = 2 * c.vocab_size * h;  // untied embed_in and embed_out
  count.total = count.embedding + c.num_layers * (2 * layer_norm + attention + mlp) + layer_norm;
  return count;
}

}  // namespace sinklm
