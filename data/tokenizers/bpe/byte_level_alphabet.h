// GPT-2's byte-level alphabet: each of the 256 byte values is written as one printable Unicode character
// (printable Latin-1 bytes stand for themselves, the rest map to U+0100 onwards), so that vocab.json and
// tokenizer.json can store arbitrary byte strings as text. This is `bytes_to_unicode()` of GPT-2's encoder.py.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace sinklm {

// UTF-8 of the character that stands for each byte of `bytes`.
std::string bytes_to_alphabet(std::string_view bytes);
// The bytes that a byte-level token string stands for; nullopt when it has a character outside the alphabet.
std::optional<std::string> alphabet_to_bytes(std::string_view token);

}  // namespace sinklm
