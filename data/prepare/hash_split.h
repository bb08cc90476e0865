// Document-level train / validation / test split by a seeded hash of the document's text: a document's split
// depends only on the seed and its bytes, never on its position, its file or the number of workers, so a
// re-run (or a run over more ranks) puts every document where it went before, and exact duplicates never
// straddle two splits. One pass: no document needs to see any other.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "data/corpus/corpus_split.h"

namespace sinklm {

// A uniform draw in [0, 1) from (seed, key); the split of corpus documents uses the same draw on their ids.
double split_draw(uint64_t seed, std::string_view key);
// Validation for u < validation, test for u < validation + test, train otherwise.
Split split_of_draw(double u, const SplitFractions& fractions);

// A held-out split's size: a fraction of the documents ("0.01") or a number of tokens ("5000000", "5M").
struct SplitSize {
  double fraction = 0;
  uint64_t tokens = 0;  // > 0: a token count, turned into a fraction once the total is estimated
  bool is_tokens() const { return tokens > 0; }
  // UserError naming the flag on anything else.
  static SplitSize parse(const std::string& text, const std::string& flag);
  std::string to_string() const;
};

// "123", "64K", "256M", "2G", "1T" (powers of 1000 for counts, `binary` = powers of 1024 for byte sizes).
// UserError naming the flag when the text is not a positive count.
uint64_t parse_count(const std::string& text, const std::string& flag, bool binary = false);

class HashSplitter {
 public:
  HashSplitter(uint64_t seed, SplitFractions fractions);
  Split operator()(std::string_view text) const { return split_of_draw(split_draw(seed_, text), fractions_); }
  const SplitFractions& fractions() const { return fractions_; }

 private:
  uint64_t seed_;
  SplitFractions fractions_;
};

}  // namespace sinklm
