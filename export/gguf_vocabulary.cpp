#include "export/gguf_vocabulary.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/ends_with.h"
#include "core/error.h"
#include "data/tokenizers/hf_tokenizer_json.h"
#include "data/tokenizers/sentencepiece_tokenizer.h"
#include "data/tokenizers/tokenizer.h"
#include "export/hf_tokenizer_files.h"
#include "model/sink.h"

namespace fs = std::filesystem;

namespace sinklm {
namespace {

using json = nlohmann::json;

enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUnused = 5, kByte = 6 };

// llama.cpp's names for the byte-level pre-tokenizer patterns it implements (llama-vocab.cpp).
const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;  // SentencePiece only
};

// Rows past the tokenizer: the sinks, then padding rows, up to the model's vocabulary.
void add_rows_past_tokenizer(Vocabulary& v, const ModelConfig& model, bool scored) {
  const std::vector<int64_t> sinks = sink_prefix(model);
  for (int64_t id = static_cast<int64_t>(v.tokens.size()); id < model.vocab_size; ++id) {
    const auto sink = std::find(sinks.begin(), sinks.end(), id);
    const size_t index = static_cast<size_t>(sink - sinks.begin());
    v.tokens.push_back(sink == sinks.end() ? "[PAD" + std::to_string(id) + "]" : sink_token_text(index, sinks.size()));
    v.types.push_back(sink == sinks.end() ? kUnused : kControl);
    if (scored) v.scores.push_back(-1000.0f);
  }
}

std::string pre_tokenizer_name(const json& pre, const std::string& path) {
  if (pre.value("type", "") == "ByteLevel") return "gpt-2";
  for (const json& step : pre.value("pretokenizers", json::array())) {
    if (step.value("type", "") != "Split") continue;
    const std::string pattern = step.value("pattern", json()).value("Regex", "");
    if (pattern == kLlama3Pattern) return "llama-bpe";
    if (pattern == kQwen2Pattern) return "qwen2";
    fail(path, ": its pre-tokenizer pattern is none llama.cpp names (GPT-2's, Llama-3's, Qwen2's): ", pattern);
  }
  fail(path, ": pre_tokenizer ", pre.dump(), " has no llama.cpp equivalent");
}

void add_byte_level(GgufFile& file, const ModelConfig& model, const std::string& path) {
  const json tokenizer = hf_tokenizer_json(path);
  if (tokenizer["model"].value("byte_fallback", false) || tokenizer.value("normalizer", json()).is_object())
    fail(path, ": a SentencePiece-style tokenizer.json (Metaspace, byte fallback, a normalizer) has no scores for "
         "llama.cpp's vocabulary; export from the SentencePiece .model it came from");
  Vocabulary v;
  v.tokens.resize(model.tokenizer_vocab_size);
  v.types.assign(model.tokenizer_vocab_size, kUnused);
  for (const auto& [text, id] : tokenizer["model"]["vocab"].items()) {
    if (id.get<int64_t>() >= model.tokenizer_vocab_size) continue;
    v.tokens[id.get<size_t>()] = text;
    v.types[id.get<size_t>()] = kNormal;
  }
  for (const json& t : tokenizer["added_tokens"]) {
    const int64_t id = t["id"].get<int64_t>();
    if (id >= model.tokenizer_vocab_size) continue;
    v.tokens[id] = t["content"].get<std::string>();
    v.types[id] = t.value("special", false) ? kControl : kNormal;
  }
  for (size_t id = 0; id < v.tokens.size(); ++id)
    if (v.tokens[id].empty()) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
  add_rows_past_tokenizer(v, model, false);
  std::vector<std::string> merges;
  for (const json& m : tokenizer["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  file.add_string("tokenizer.ggml.model", "gpt2");
  file.add_string("tokenizer.ggml.pre", pre_tokenizer_name(tokenizer.value("pre_tokenizer", json()), path));
  file.add_strings("tokenizer.ggml.tokens", v.tokens);
  file.add_i32s("tokenizer.ggml.token_type", v.types);
  file.add_strings("tokenizer.ggml.merges", merges);
}

void add_sentencepiece(GgufFile& file, const ModelConfig& model, const std::string& path) {
  const SentencePieceModel spm = read_sentencepiece_model(path);
  if (!spm.bpe) fail(path, ": a unigram SentencePiece model; sinklm exports SentencePiece BPE models");
  using Kind = SentencePiece::Kind;
  Vocabulary v;
  for (const SentencePiece& p : spm.pieces) {
    v.tokens.push_back(p.text);
    v.scores.push_back(p.score);
    v.types.push_back(p.kind == Kind::Unknown ? kUnknown : p.kind == Kind::Control ? kControl
                      : p.kind == Kind::Unused ? kUnused : p.kind == Kind::Byte ? kByte : kNormal);
  }
  add_rows_past_tokenizer(v, model, true);
  file.add_string("tokenizer.ggml.model", "llama");
  file.add_string("tokenizer.ggml.pre", "default");
  file.add_strings("tokenizer.ggml.tokens", v.tokens);
  file.add_f32s("tokenizer.ggml.scores", v.scores);
  file.add_i32s("tokenizer.ggml.token_type", v.types);
  file.add_bool("tokenizer.ggml.add_space_prefix", spm.dummy_prefix);
  if (spm.unknown_id >= 0) file.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(spm.unknown_id));
}

}  // namespace

void add_gguf_vocabulary(GgufFile& file, const ModelConfig& model, const std::string& tokenizer_file) {
  // The file's vocabulary is llama.cpp's tokenizer: one of another size is another tokenizer (its missing ids
  // would be written as padding, its extra ones dropped), not the one the model was trained with.
  const int64_t ids = load_tokenizer(tokenizer_file)->vocab_size();
  if (ids != model.tokenizer_vocab_size)
    fail("--tokenizer ", tokenizer_file, ": ", ids, " ids, but the model's tokenizer has ", model.tokenizer_vocab_size,
         " (model.tokenizer_vocab_size; ", model.vocab_size, " embedding rows); pass the tokenizer it was trained with");
  if (ends_with(fs::path(tokenizer_file).filename().string(), ".model"))
    add_sentencepiece(file, model, tokenizer_file);
  else
    add_byte_level(file, model, tokenizer_file);
  const std::vector<int64_t> sinks = sink_prefix(model);
  const int64_t bos = sinks.empty() ? model.bos_token_id : sinks.front();
  if (bos >= 0) file.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  if (model.eos_token_id >= 0) file.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(model.eos_token_id));
  if (model.pad_token_id >= 0) file.add_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(model.pad_token_id));
  file.add_bool("tokenizer.ggml.add_bos_token", !sinks.empty());
  file.add_bool("tokenizer.ggml.add_eos_token", false);
}

}  // namespace sinklm
