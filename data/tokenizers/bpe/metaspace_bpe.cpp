#include "data/tokenizers/bpe/metaspace_bpe.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "data/tokenizers/bpe/tokenizer_json.h"
#include "data/tokenizers/nfc.h"
#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

using json = nlohmann::json;

// A component and the steps of a Sequence alike: [] for null.
std::vector<json> steps_of(const json& component, const char* list_key) {
  std::vector<json> steps;
  if (component.is_object() && component.value("type", "") == "Sequence")
    for (const json& step : component.value(list_key, json::array())) steps.push_back(step);
  else if (!component.is_null())
    steps.push_back(component);
  return steps;
}

std::string byte_token_name(int b) {
  char name[8];
  std::snprintf(name, sizeof name, "<0x%02X>", b);  // tokenizers: format!("<{:#04X}>", b)
  return name;
}

}  // namespace

std::unique_ptr<MetaspaceBpe> MetaspaceBpe::from_tokenizer_json(const json& root, const std::string& path) {
  return std::unique_ptr<MetaspaceBpe>(new MetaspaceBpe(root, path));
}

MetaspaceBpe::MetaspaceBpe(const json& root, const std::string& path) : source_(path) {
  const json& model = root.value("model", json());
  check_bpe_model(model, path);
  read_pipeline(root);
  added_tokens_ = read_added_tokens(root, path);
  read_vocabulary(model);
  special_ = special_ids_by_name(added_tokens_);
  if (special_.end_of_text < 0)
    fail(path, ": no </s> (or <|endoftext|>, <|end_of_text|>) added token; the end-of-text id separates documents "
         "in token shards");
  merges_ = std::make_unique<MergeTable>(merge_rules_);
  added_ = std::make_unique<AddedTokenMatcher>(added_tokens_);
}

// normalizer: null, NFC, or Llama-2's legacy Prepend("▁") + Replace(" ", "▁"); pre_tokenizer: Metaspace (or
// null with the legacy normalizer).
void MetaspaceBpe::read_pipeline(const json& root) {
  bool legacy_prepend = false, legacy_replace = false;
  for (const json& step : steps_of(root.value("normalizer", json()), "normalizers")) {
    const std::string type = step.value("type", "");
    if (type == "NFC") {
      nfc_ = true;
    } else if (type == "Prepend") {
      replacement_ = step.value("prepend", replacement_);
      legacy_prepend = true;
    } else if (type == "Replace" && step.value("pattern", json()).value("String", "") == " " &&
               step.value("content", "") == replacement_) {
      legacy_replace = true;
    } else {
      fail(source_, ": normalizer component ", step.dump(), " is not supported (sinklm reads NFC, and Llama-2's "
           "Prepend(\"\u2581\") + Replace(\" \", \"\u2581\"))");
    }
  }
  if (legacy_prepend != legacy_replace)
    fail(source_, ": normalizer has ", legacy_prepend ? "Prepend without Replace" : "Replace without Prepend",
         "; sinklm reads the pair Llama-2 writes, Prepend(\"\u2581\") then Replace(\" \", \"\u2581\")");
  const std::vector<json> pre = steps_of(root.value("pre_tokenizer", json()), "pretokenizers");
  if (legacy_prepend) {
    if (!pre.empty()) fail(source_, ": pre_tokenizer ", pre.front().dump(), " after the Prepend/Replace normalizer is "
                           "not supported (Llama-2's files have none)");
    prepend_ = Prepend::AlwaysUnconditional;
    split_ = false;
    return;
  }
  if (pre.size() != 1 || pre.front().value("type", "") != "Metaspace")
    fail(source_, ": pre_tokenizer component ", pre.empty() ? std::string("null") : pre.front().value("type", pre.front().dump()),
         " is not supported with this model (a SentencePiece-style BPE reads Metaspace alone)");
  const json& metaspace = pre.front();
  replacement_ = metaspace.value("replacement", replacement_);
  if (metaspace.contains("prepend_scheme")) {
    const std::string scheme = metaspace["prepend_scheme"].get<std::string>();
    if (scheme != "always" && scheme != "first" && scheme != "never")
      fail(source_, ": pre_tokenizer Metaspace prepend_scheme '", scheme, "' is not always, first or never");
    prepend_ = scheme == "always" ? Prepend::Always : scheme == "first" ? Prepend::First : Prepend::Never;
  } else {  // files written before prepend_scheme
    prepend_ = metaspace.value("add_prefix_space", true) ? Prepend::Always : Prepend::Never;
  }
  split_ = metaspace.value("split", true);
}

void MetaspaceBpe::read_vocabulary(const json& model) {
  byte_fallback_ = model.value("byte_fallback", false);
  fuse_unk_ = model.value("fuse_unk", false);
  whole_piece_first_ = model.value("ignore_merges", false);
  const json& vocab = model.value("vocab", json());
  if (!vocab.is_object()) fail(source_, ": model.vocab is not an object of token -> id");
  uint32_t size = 0;
  for (const auto& [token, value] : vocab.items()) {
    if (!value.is_number_unsigned()) fail(source_, ": model.vocab token '", token, "' has no non-negative integer id");
    id_of_token_.emplace(token, value.get<uint32_t>());
    size = std::max(size, value.get<uint32_t>() + 1);
  }
  for (const auto& t : added_tokens_) size = std::max(size, t.id + 1);
  id_text_.resize(size);
  id_known_.resize(size);
  for (const auto& [token, id] : id_of_token_) {
    std::string& text = id_text_[id];
    for (size_t pos = 0; pos < token.size();) {  // "▁" back to ' '
      if (token.compare(pos, replacement_.size(), replacement_) == 0) {
        text += ' ';
        pos += replacement_.size();
      } else {
        text += token[pos++];
      }
    }
    id_known_[id] = true;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = id_of_token_.find(byte_token_name(b));
    byte_token_[b] = it == id_of_token_.end() ? -1 : it->second;
    if (it != id_of_token_.end()) id_text_[it->second] = std::string(1, static_cast<char>(b));
  }
  for (const auto& t : added_tokens_) {
    id_text_[t.id] = t.content;
    id_known_[t.id] = true;
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    auto it = id_of_token_.find(model["unk_token"].get<std::string>());
    if (it == id_of_token_.end())
      fail(source_, ": model.unk_token ", model["unk_token"].dump(), " is not in model.vocab");
    unk_id_ = it->second;
  }
  const json& merges = model.value("merges", json::array());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = merge_pair(merges[rank], source_, rank);
    merge_rules_.push_back(merge_rule(left, right, rank, id_of_token_, source_));
  }
}

uint32_t MetaspaceBpe::begin_of_text_id() const {
  return static_cast<uint32_t>(special_.begin_of_text >= 0 ? special_.begin_of_text : special_.end_of_text);
}

std::string MetaspaceBpe::description() const {
  return str("SentencePiece-style BPE (Metaspace", byte_fallback_ ? ", byte fallback" : "", "), ", vocab_size(),
             " ids, ", merge_rules_.size(), " merges, from ", source_);
}

TokenIds MetaspaceBpe::encode(std::string_view text) const {
  TokenIds out;
  for (const TextSpan& span : added_->split(text)) {
    if (span.added_id >= 0) out.push_back(static_cast<uint32_t>(span.added_id));
    else encode_segment(span.text, span.text.data() == text.data(), out);
  }
  return out;
}

void MetaspaceBpe::encode_segment(std::string_view text, bool at_input_start, TokenIds& out) const {
  const std::string normalized = nfc_ ? nfc_normalize(text) : std::string(text);
  std::string s;
  s.reserve(normalized.size() + 8);
  for (char c : normalized) {
    if (c == ' ') s += replacement_;
    else s += c;
  }
  const bool starts_with_replacement = s.compare(0, replacement_.size(), replacement_) == 0;
  if ((prepend_ == Prepend::Always && !starts_with_replacement) ||
      (prepend_ == Prepend::First && at_input_start && !starts_with_replacement) ||
      (prepend_ == Prepend::AlwaysUnconditional && !s.empty()))
    s.insert(0, replacement_);
  if (!split_) return encode_piece(s, out);
  size_t begin = 0;  // a piece starts at every "▁" but the first character: merged with the word after it
  for (size_t next; (next = s.find(replacement_, begin + 1)) != std::string::npos; begin = next)
    encode_piece(std::string_view(s).substr(begin, next - begin), out);
  encode_piece(std::string_view(s).substr(begin), out);
}

void MetaspaceBpe::encode_piece(std::string_view piece, TokenIds& out) const {
  if (piece.empty()) return;
  if (whole_piece_first_) {
    auto it = id_of_token_.find(std::string(piece));
    if (it != id_of_token_.end()) return out.push_back(it->second);
  }
  std::vector<uint32_t> symbols;
  bool unk_pending = false;  // tokenizers adds an unknown character's token once the next known one comes
  for (size_t pos = 0; pos < piece.size();) {
    const size_t len = std::max<size_t>(1, valid_sequence_length(piece, pos));
    const std::string_view c = piece.substr(pos, len);
    pos += len;
    auto it = id_of_token_.find(std::string(c));
    if (it != id_of_token_.end()) {
      if (unk_pending) symbols.push_back(static_cast<uint32_t>(unk_id_));
      unk_pending = false;
      symbols.push_back(it->second);
      continue;
    }
    const bool bytes_known = byte_fallback_ && std::all_of(c.begin(), c.end(), [&](char b) {
      return byte_token_[static_cast<unsigned char>(b)] >= 0;
    });
    if (bytes_known) {
      for (char b : c) symbols.push_back(static_cast<uint32_t>(byte_token_[static_cast<unsigned char>(b)]));
      continue;
    }
    if (unk_id_ < 0) continue;  // no unknown token: the character is dropped, as tokenizers does
    if (unk_pending && !fuse_unk_) symbols.push_back(static_cast<uint32_t>(unk_id_));
    unk_pending = true;
  }
  if (unk_pending) symbols.push_back(static_cast<uint32_t>(unk_id_));
  merge_symbols(symbols, *merges_, out);
}

std::string MetaspaceBpe::decode(const TokenIds& ids) const {
  std::string out;
  for (uint32_t id : ids) {
    if (id >= id_text_.size() || !id_known_[id])
      fail("token id ", id, " is not in the vocabulary of ", source_, " (", vocab_size(), " ids)");
    out += id_text_[id];
  }
  if (prepend_ != Prepend::Never && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace sinklm
