// SentencePiece-style BPE read from a tokenizer.json (Llama-2 and Mistral exports, SentencePiece BPE models
// converted by transformers, `tokenizers`' Metaspace pipelines), as Hugging Face `tokenizers` encodes it:
//   1. added tokens are cut out (added_tokens.h); each stretch of text between them is a segment;
//   2. the segment is NFC-normalised where the file says so, every ' ' becomes the replacement character
//      (U+2581 "▁"), and "▁" is prepended: Metaspace prepend_scheme "always" (each segment that does not
//      already start with it), "first" (only the segment at the start of the input), "never"; Llama-2's
//      legacy normalizer Prepend("▁") + Replace(" ", "▁") prepends to every non-empty segment unconditionally;
//   3. Metaspace split: true cuts the segment before every "▁" (merged with the next word), false keeps it whole;
//   4. each piece starts as its characters' tokens; a character outside the vocabulary becomes the tokens of
//      its UTF-8 bytes, <0x00> .. <0xFF> (byte_fallback), else the unknown token (consecutive ones fused when
//      fuse_unk), else nothing; then BPE merges by rank (merge_table.h); with ignore_merges a piece that is a
//      token is that token.
// Decoding: "▁" back to ' ', byte tokens to their bytes, added tokens to their text, and one leading space
// dropped where a prefix was prepended (the Metaspace / Strip decoders).
// An invalid UTF-8 byte in the input counts as a character of its own (its byte token, with byte fallback).
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/bpe/added_tokens.h"
#include "data/tokenizers/bpe/merge_table.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {

class MetaspaceBpe : public Tokenizer {
 public:
  // UserError naming `path` and the component that is not supported.
  static std::unique_ptr<MetaspaceBpe> from_tokenizer_json(const nlohmann::json& root, const std::string& path);

  TokenIds encode(std::string_view text) const override;
  std::string decode(const TokenIds& ids) const override;
  uint32_t vocab_size() const override { return static_cast<uint32_t>(id_text_.size()); }
  uint32_t end_of_text_id() const override { return static_cast<uint32_t>(special_.end_of_text); }
  uint32_t begin_of_text_id() const override;
  int64_t padding_id() const override { return special_.padding; }
  std::string description() const override;

 private:
  enum class Prepend { Never, First, Always, AlwaysUnconditional };
  MetaspaceBpe(const nlohmann::json& root, const std::string& path);
  void read_pipeline(const nlohmann::json& root);
  void read_vocabulary(const nlohmann::json& model);
  void encode_segment(std::string_view text, bool at_input_start, TokenIds& out) const;
  void encode_piece(std::string_view piece, TokenIds& out) const;

  std::string source_;
  std::string replacement_ = "\u2581";
  Prepend prepend_ = Prepend::Always;
  bool split_ = true;
  bool nfc_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool whole_piece_first_ = false;  // model.ignore_merges
  int64_t unk_id_ = -1;
  std::unordered_map<std::string, uint32_t> id_of_token_;  // token text (with "▁") -> id
  std::vector<std::string> id_text_;                       // id -> the bytes it decodes to
  std::vector<bool> id_known_;
  int64_t byte_token_[256];  // <0xNN> -> id, -1 when absent
  std::vector<MergeRule> merge_rules_;
  std::unique_ptr<MergeTable> merges_;
  std::vector<AddedToken> added_tokens_;
  std::unique_ptr<AddedTokenMatcher> added_;
  SpecialTokenIds special_;
};

}  // namespace sinklm
