// Whether `s` ends with `suffix` (C++17 has no std::string::ends_with).
#pragma once
#include <string_view>

namespace sinklm {

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace sinklm
