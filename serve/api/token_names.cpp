#include "serve/api/token_names.h"

#include <map>
#include <set>

#include "data/tokenizers/utf8.h"

namespace sinklm {
namespace {

constexpr std::string_view kBytesPrefix = "bytes:", kIdPrefix = "token_id:";

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

std::string token_name(std::string_view bytes) {
  if (is_valid_utf8(bytes) && !starts_with(bytes, kBytesPrefix) && !starts_with(bytes, kIdPrefix))
    return std::string(bytes);
  static const char* digits = "0123456789abcdef";
  std::string name(kBytesPrefix);
  for (unsigned char b : bytes) {
    name += "\\x";
    name += digits[b >> 4];
    name += digits[b & 15];
  }
  return name;
}

std::vector<std::string> position_names(const std::vector<std::pair<int64_t, std::string>>& tokens) {
  std::map<int64_t, std::string> by_id;
  std::set<std::string> taken;
  std::vector<std::string> names;
  for (const auto& [id, bytes] : tokens) {
    auto named = by_id.find(id);
    if (named == by_id.end()) {
      std::string name = token_name(bytes);
      if (taken.count(name)) name = std::string(kIdPrefix) + std::to_string(id);  // no text name has this form
      taken.insert(name);
      named = by_id.emplace(id, name).first;
    }
    names.push_back(named->second);
  }
  return names;
}

}  // namespace sinklm
