// Strict UTF-8 (Unicode 15, table 3-7): no overlong forms, no surrogates, nothing above U+10FFFF.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sinklm {

// Length of the valid UTF-8 sequence starting at text[pos], or 0 when the byte there starts none.
size_t valid_sequence_length(std::string_view text, size_t pos);
// Decode the character at text[pos] and advance pos past it; nullopt (pos unchanged) when invalid.
std::optional<uint32_t> next_codepoint(std::string_view text, size_t& pos);
void append_utf8(std::string& out, uint32_t codepoint);
bool is_valid_utf8(std::string_view text);
// Byte offset of the first byte that starts no valid sequence; npos when the whole text is valid.
size_t first_invalid_utf8(std::string_view text);

}  // namespace sinklm
