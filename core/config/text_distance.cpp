#include "core/config/text_distance.h"

#include <algorithm>

namespace sinklm {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_match(const std::string& wrong, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, wrong.size() / 2) + 1;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(wrong, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& wrong, const std::vector<std::string>& candidates) {
  std::string best = closest_match(wrong, candidates);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace sinklm
