#include "data/prepare/hash_split.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/seeded_random.h"

namespace sinklm {

double split_draw(uint64_t seed, std::string_view key) {
  return static_cast<double>(seeded_hash(seed, key) >> 11) / static_cast<double>(1ULL << 53);
}

Split split_of_draw(double u, const SplitFractions& fractions) {
  return u < fractions.validation                    ? Split::Validation
         : u < fractions.validation + fractions.test ? Split::Test
                                                     : Split::Train;
}

uint64_t parse_count(const std::string& text, const std::string& flag, bool binary) {
  const std::string units = "KMGT";
  std::string digits = text;
  uint64_t scale = 1;
  if (!digits.empty()) {
    size_t unit = units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back()))));
    if (unit != std::string::npos) {
      for (size_t i = 0; i <= unit; ++i) scale *= binary ? 1024 : 1000;
      digits.pop_back();
    }
  }
  char* end = nullptr;
  const unsigned long long value = digits.empty() ? 0 : std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || *end != '\0' || digits[0] == '-' || value == 0)
    fail(flag, ": '", text, "' is not a positive count (e.g. 5000000, 64K, 256M, 2G)");
  return static_cast<uint64_t>(value) * scale;
}

SplitSize SplitSize::parse(const std::string& text, const std::string& flag) {
  SplitSize size;
  if (text.find('.') != std::string::npos || text == "0") {
    char* end = nullptr;
    size.fraction = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(size.fraction >= 0 && size.fraction < 1))
      fail(flag, ": '", text, "' is neither a fraction in [0, 1) (e.g. 0.01) nor a token count (e.g. 5M)");
    return size;
  }
  size.tokens = parse_count(text, flag);
  return size;
}

std::string SplitSize::to_string() const { return is_tokens() ? str(tokens, " tokens") : str(fraction); }

HashSplitter::HashSplitter(uint64_t seed, SplitFractions fractions) : seed_(seed), fractions_(fractions) {
  if (fractions.validation < 0 || fractions.test < 0 || fractions.validation + fractions.test >= 1)
    fail("split sizes: validation ", fractions.validation, " and test ", fractions.test,
         " must be >= 0 and leave some documents for training");
}

}  // namespace sinklm
