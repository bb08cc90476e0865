#pragma once
#include <string>
#include <vector>

namespace sinklm {

// Levenshtein distance; used to suggest the closest valid name for a misspelt key or flag.
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `wrong`, or "" when nothing is reasonably close.
std::string closest_match(const std::string& wrong, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to an error message.
std::string did_you_mean(const std::string& wrong, const std::vector<std::string>& candidates);

}  // namespace sinklm
