#include "data/tokenizers/bpe/byte_level_bpe_files.h"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "data/tokenizers/bpe/byte_level_alphabet.h"
#include "data/tokenizers/bpe/tokenizer_json.h"
#include "data/io/read_file.h"

namespace sinklm {
namespace {

using json = nlohmann::json;


// token string (byte-level alphabet) -> id, as in vocab.json and tokenizer.json's model.vocab.
// Entries that are added tokens (by id) may be plain text and are skipped here.
void read_alphabet_vocab(const json& vocab, const std::string& where, const std::unordered_set<uint32_t>& added,
                         ByteLevelBpeVocab& out, std::unordered_map<std::string, uint32_t>& id_of_string) {
  if (!vocab.is_object()) fail(where, ": expected an object of token -> id");
  for (const auto& [token, value] : vocab.items()) {
    if (!value.is_number_unsigned()) fail(where, ": token '", token, "' has no non-negative integer id");
    uint32_t id = value.get<uint32_t>();
    id_of_string.emplace(token, id);
    if (added.count(id)) continue;
    std::optional<std::string> bytes = alphabet_to_bytes(token);
    if (!bytes)
      fail(where, ": token '", token, "' (id ", id, ") is not in GPT-2's byte-level alphabet; is this a "
           "byte-level BPE vocabulary?");
    out.tokens.emplace_back(std::move(*bytes), id);
  }
}

void add_merge(const std::string& left, const std::string& right, const std::string& where, size_t rank,
               const std::unordered_map<std::string, uint32_t>& id_of_string, ByteLevelBpeVocab& out) {
  out.merges.push_back(merge_rule(left, right, rank, id_of_string, where));
}

// Split's pattern: {"Regex": "..."} (Llama-3, Qwen2) or {"String": "..."} (a literal).
std::string split_pattern(const json& split, const std::string& path) {
  const json& pattern = split.value("pattern", json());
  if (pattern.contains("Regex")) return pattern["Regex"].get<std::string>();
  if (pattern.contains("String")) return "\\Q" + pattern["String"].get<std::string>() + "\\E";
  fail(path, ": pre_tokenizer Split has no pattern (Regex or String): ", split.dump());
}

// The pre-tokenizers of byte-level files: ByteLevel with use_regex (GPT-2's pattern), or a Split (behaviour
// Isolated, not inverted) followed by ByteLevel without its regex (Llama-3, Qwen2, cl100k exports).
void read_byte_level_pre_tokenizer(const json& pre, const std::string& path, ByteLevelBpeVocab& out) {
  std::vector<json> steps;
  if (pre.value("type", "") == "Sequence")
    for (const json& step : pre.value("pretokenizers", json::array())) steps.push_back(step);
  else if (!pre.is_null())
    steps.push_back(pre);
  auto unsupported = [&](const json& step) {
    fail(path, ": pre_tokenizer component ", step.value("type", step.dump()), " is not supported here (sinklm "
         "reads ByteLevel with use_regex, Split (Isolated) then ByteLevel, or Metaspace), got ", pre.dump());
  };
  if (steps.empty() || steps.back().value("type", "") != "ByteLevel") unsupported(steps.empty() ? pre : steps.back());
  const json& byte_level = steps.back();
  out.add_prefix_space = byte_level.value("add_prefix_space", false);
  const bool gpt2_regex = byte_level.value("use_regex", true);
  if (steps.size() == 1) {
    if (!gpt2_regex) fail(path, ": pre_tokenizer ByteLevel without use_regex and no Split before it: nothing cuts "
                          "the text into pieces; got ", pre.dump());
    return;
  }
  const json& split = steps.front();
  if (steps.size() != 2 || split.value("type", "") != "Split") unsupported(split);
  if (gpt2_regex) fail(path, ": pre_tokenizer Split followed by ByteLevel with use_regex splits twice; sinklm reads "
                       "ByteLevel with use_regex false after a Split");
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false))
    fail(path, ": pre_tokenizer Split with behavior ", split.value("behavior", json()).dump(), " and invert ",
         split.value("invert", false), " is not supported (Isolated, invert false)");
  out.split_pattern = split_pattern(split, path);
}

}  // namespace

ByteLevelBpeVocab read_hf_tokenizer_json(const json& root, const std::string& path) {
  ByteLevelBpeVocab out;
  out.source = path;
  const json& model = root.value("model", json());
  check_bpe_model(model, path);
  out.whole_piece_first = model.value("ignore_merges", false);

  read_byte_level_pre_tokenizer(root.value("pre_tokenizer", json()), path, out);

  const json& normalizer = root.value("normalizer", json());
  if (!normalizer.is_null()) {
    if (normalizer.value("type", "") != "NFC")
      fail(path, ": normalizer ", normalizer.dump(), " is not supported (null or NFC)");
    out.nfc = true;
  }

  out.added_tokens = read_added_tokens(root, path);
  std::unordered_set<uint32_t> added_ids;
  for (const auto& t : out.added_tokens) added_ids.insert(t.id);

  std::unordered_map<std::string, uint32_t> id_of_string;
  read_alphabet_vocab(model.value("vocab", json()), path + " model.vocab", added_ids, out, id_of_string);
  const json& merges = model.value("merges", json::array());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_pair(merges[rank], path, rank);
    add_merge(left, right, path, rank, id_of_string, out);
  }
  return out;
}

ByteLevelBpeVocab read_vocab_and_merges(const std::string& vocab_json_path, const std::string& merges_txt_path) {
  ByteLevelBpeVocab out;
  out.source = vocab_json_path;
  json vocab = read_json_file_for_tokenizer(vocab_json_path);
  std::unordered_set<uint32_t> added_ids;
  if (vocab.contains("<|endoftext|>")) {
    uint32_t id = vocab["<|endoftext|>"].get<uint32_t>();
    out.added_tokens.push_back(AddedToken{"<|endoftext|>", id, true});
    added_ids.insert(id);
  }
  std::unordered_map<std::string, uint32_t> id_of_string;
  read_alphabet_vocab(vocab, vocab_json_path, added_ids, out, id_of_string);
  std::istringstream lines(read_file(merges_txt_path));
  std::string line;
  size_t rank = 0, line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos)
      fail(merges_txt_path, ":", line_number, ": expected 'left right', got '", line, "'");
    add_merge(line.substr(0, space), line.substr(space + 1), merges_txt_path, rank++, id_of_string, out);
  }
  return out;
}

ByteLevelBpeVocab read_tiktoken_ranks(const std::string& path) {
  ByteLevelBpeVocab out;
  out.source = path;
  out.whole_piece_first = true;
  std::unordered_map<std::string, uint32_t> id_of_bytes;
  std::istringstream lines(read_file(path));
  std::string line;
  size_t line_number = 0;
  uint32_t next_id = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (line.empty()) continue;
    size_t space = line.find(' ');
    std::string encoded = line.substr(0, space);
    uint32_t rank = 0;
    try {
      if (space == std::string::npos) throw std::invalid_argument("no rank");
      rank = static_cast<uint32_t>(std::stoul(line.substr(space + 1)));
    } catch (const std::exception&) {
      fail(path, ":", line_number, ": expected '<base64 token> <rank>'");
    }
    std::string bytes(encoded.size() / 4 * 3 + 3, '\0');
    int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                  reinterpret_cast<const unsigned char*>(encoded.data()), static_cast<int>(encoded.size()));
    if (decoded < 0 || encoded.size() % 4 != 0) fail(path, ":", line_number, ": '", encoded, "' is not base64");
    size_t padding = encoded.empty() ? 0 : (encoded.back() == '=') + (encoded.size() > 1 && encoded[encoded.size() - 2] == '=');
    bytes.resize(static_cast<size_t>(decoded) - padding);
    id_of_bytes.emplace(bytes, rank);
    out.tokens.emplace_back(std::move(bytes), rank);
    next_id = std::max(next_id, rank + 1);
  }
  // Every split of a token into two tokens is a merge whose priority is the token's rank.
  for (const auto& [bytes, rank] : out.tokens)
    for (size_t k = 1; k < bytes.size(); ++k) {
      auto left = id_of_bytes.find(bytes.substr(0, k));
      if (left == id_of_bytes.end()) continue;
      auto right = id_of_bytes.find(bytes.substr(k));
      if (right != id_of_bytes.end()) out.merges.push_back(MergeRule{left->second, right->second, rank, rank});
    }
  out.added_tokens.push_back(AddedToken{"<|endoftext|>", next_id, true});
  return out;
}

}  // namespace sinklm
