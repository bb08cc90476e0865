#include "data/tokenizers/bpe/byte_level_alphabet.h"

#include <array>
#include <unordered_map>

#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

struct Alphabet {
  std::array<uint32_t, 256> codepoint_of_byte{};
  std::unordered_map<uint32_t, uint8_t> byte_of_codepoint;

  Alphabet() {
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      codepoint_of_byte[b] = printable(b) ? static_cast<uint32_t>(b) : next_extra++;
      byte_of_codepoint[codepoint_of_byte[b]] = static_cast<uint8_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

std::string bytes_to_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, alphabet().codepoint_of_byte[b]);
  return out;
}

std::optional<std::string> alphabet_to_bytes(std::string_view token) {
  std::string out;
  size_t pos = 0;
  while (pos < token.size()) {
    std::optional<uint32_t> cp = next_codepoint(token, pos);
    if (!cp) return std::nullopt;
    auto it = alphabet().byte_of_codepoint.find(*cp);
    if (it == alphabet().byte_of_codepoint.end()) return std::nullopt;
    out.push_back(static_cast<char>(it->second));
  }
  return out;
}

}  // namespace sinklm
