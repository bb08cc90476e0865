// Pre-tokenization by a regular expression: the text is cut into pieces, then BPE runs on each piece
// separately. The pattern is GPT-2's (its encoder.py; Hugging Face's ByteLevel pre-tokenizer with use_regex,
// tiktoken's r50k/p50k):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// or the one a tokenizer.json's `Split` pre-tokenizer names (Llama-3, Qwen2, GPT-4's cl100k:
// (?i:'s|'t|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+), with
// behaviour Isolated: every match is a piece, and so is any text between two matches.
// \s is spelled out as Unicode White_Space, the set Rust's regex (tiktoken) and Oniguruma (Hugging Face)
// use, rather than left to PCRE2's UCP \s (documented as \p{Z}, \h and \v, a different definition).
// Matched with PCRE2 (UTF + UCP, JIT when available).
// Invalid UTF-8: each byte that is not part of a valid sequence counts as one character that is neither a
// letter, a number nor white space (like a lone surrogate from Python's errors="surrogateescape").
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sinklm {

class RegexPreTokenizer {
 public:
  // GPT-2's pattern.
  RegexPreTokenizer();
  // A pattern in Hugging Face's (Oniguruma's) syntax; UserError naming `where` when PCRE2 cannot compile it.
  RegexPreTokenizer(const std::string& pattern, const std::string& where);
  ~RegexPreTokenizer();
  RegexPreTokenizer(const RegexPreTokenizer&) = delete;
  RegexPreTokenizer& operator=(const RegexPreTokenizer&) = delete;

  // The pieces of `text`, in order; they concatenate to `text`. Thread-safe.
  std::vector<std::string_view> split(std::string_view text) const;

  // True when cutting `text` at `pos` cannot change the pieces, so a long text may be encoded in parts:
  // for GPT-2's pattern, an ASCII non-space byte followed by ASCII white space (no alternative matches across
  // it); never for another pattern (its text is encoded whole).
  bool is_safe_cut(std::string_view text, size_t pos) const;

 private:
  void split_valid_utf8(std::string_view text, std::vector<std::string_view>& pieces) const;
  struct Compiled;
  Compiled* compiled_;
  bool gpt2_ = false;
};

}  // namespace sinklm
