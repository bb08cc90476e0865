// GPT-2's pre-tokenization: the text is cut into pieces by the regular expression of GPT-2's encoder.py
// (also Hugging Face's ByteLevel pre-tokenizer and tiktoken's r50k/p50k pattern), then BPE runs on each
// piece separately:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// \s is spelled out as Unicode White_Space, the set Rust's regex (tiktoken) and Oniguruma (Hugging Face)
// use, rather than left to PCRE2's UCP \s (documented as \p{Z}, \h and \v, a different definition).
// Matched with PCRE2 (UTF + UCP, JIT when available).
// Invalid UTF-8: each byte that is not part of a valid sequence counts as one character that is neither a
// letter, a number nor white space (like a lone surrogate from Python's errors="surrogateescape").
#pragma once
#include <string_view>
#include <vector>

namespace sinklm {

class Gpt2PreTokenizer {
 public:
  Gpt2PreTokenizer();
  ~Gpt2PreTokenizer();
  Gpt2PreTokenizer(const Gpt2PreTokenizer&) = delete;
  Gpt2PreTokenizer& operator=(const Gpt2PreTokenizer&) = delete;

  // The pieces of `text`, in order; they concatenate to `text`. Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  // True when cutting `text` at `pos` cannot change the pieces: an ASCII non-space byte followed by ASCII
  // white space is always a piece boundary (no alternative matches across it).
  static bool is_safe_cut(std::string_view text, size_t pos);

 private:
  void split_valid_utf8(std::string_view text, std::vector<std::string_view>& pieces) const;
  struct Compiled;
  Compiled* compiled_;
};

}  // namespace sinklm
