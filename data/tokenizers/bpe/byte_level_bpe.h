// Byte-level BPE (GPT-2, GPT-NeoX, tiktoken's r50k/p50k rank files; Llama-3, Qwen2 and cl100k tokenizer.json
// files, whose Split pre-tokenizer names its own pattern).
// Encoding: cut out added tokens (leftmost-longest match), optionally NFC-normalise and prefix a space,
// split with GPT-2's pattern or the file's (RegexPreTokenizer), then merge each piece's bytes by BPE: repeatedly the
// adjacent pair with the lowest merge rank, the leftmost on ties. Every byte value is a token, so any
// byte string encodes and decode(encode(x)) == x whenever no normalizer is configured.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/bpe/added_tokens.h"
#include "data/tokenizers/bpe/regex_pretokenizer.h"
#include "data/tokenizers/bpe/merge_table.h"
#include "data/tokenizers/tokenizer.h"

namespace sinklm {

// What a vocabulary file describes; filled by the readers in byte_level_bpe_files.h.
struct ByteLevelBpeVocab {
  std::vector<std::pair<std::string, uint32_t>> tokens;  // raw bytes -> id
  std::vector<MergeRule> merges;
  std::vector<AddedToken> added_tokens;
  bool whole_piece_first = false;  // tiktoken, HF ignore_merges: a piece that is itself a token is that token
  bool add_prefix_space = false;   // HF ByteLevel add_prefix_space
  bool nfc = false;                // HF normalizer NFC
  std::string split_pattern;       // HF Split pre-tokenizer's regex (behaviour Isolated); empty: GPT-2's
  std::string source;              // the file, for messages
};

class ByteLevelBpe : public Tokenizer {
 public:
  explicit ByteLevelBpe(ByteLevelBpeVocab vocab);

  TokenIds encode(std::string_view text) const override;
  TokenIds encode_large(std::string_view text, int threads) const override;
  std::string decode(const TokenIds& ids) const override;
  uint32_t vocab_size() const override { return static_cast<uint32_t>(id_bytes_.size()); }
  uint32_t end_of_text_id() const override { return end_of_text_id_; }
  uint32_t begin_of_text_id() const override { return begin_of_text_id_; }
  int64_t padding_id() const override { return padding_id_; }
  std::string description() const override;

 private:
  // A stretch of input: an added token, or text to pre-tokenize (segment_start: an added token or the
  // start of input comes right before it, which is where add_prefix_space applies).
  struct Part {
    std::string_view text;
    int64_t added_id = -1;
    bool segment_start = true;
  };
  std::vector<Part> parts(std::string_view text, size_t max_text_bytes) const;
  void encode_part(const Part& part, TokenIds& out) const;
  void encode_piece(std::string_view piece, TokenIds& out) const;
  void merge_bytes(std::string_view piece, TokenIds& out) const;

  ByteLevelBpeVocab vocab_;
  std::unique_ptr<RegexPreTokenizer> pretokenizer_;
  MergeTable merges_;
  std::vector<std::string> id_bytes_;
  std::vector<bool> id_known_;
  std::unordered_map<std::string, uint32_t> id_of_bytes_;
  uint32_t byte_id_[256];
  AddedTokenMatcher added_;
  uint32_t end_of_text_id_ = 0;
  uint32_t begin_of_text_id_ = 0;
  int64_t padding_id_ = -1;
  uint64_t instance_ = 0;  // keys the per-thread piece cache
};

}  // namespace sinklm
