// Unicode NFC normalisation (ICU), for tokenizer.json files whose normalizer is NFC (GPT-NeoX).
// Bytes that are not valid UTF-8 are kept as they are; the valid runs around them are normalised.
#pragma once
#include <string>
#include <string_view>

namespace sinklm {

std::string nfc_normalize(std::string_view text);

}  // namespace sinklm
