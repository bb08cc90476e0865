// Deterministic randomness that is the same on every platform and standard library (std::shuffle and the
// std distributions are not): a SplitMix64 hash and a Fisher-Yates permutation built on it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sinklm {

uint64_t splitmix64(uint64_t x);
// Stable 64-bit hash of (seed, text).
uint64_t seeded_hash(uint64_t seed, std::string_view text);
// A permutation of [0, n) determined by `seed` alone.
std::vector<uint64_t> seeded_permutation(uint64_t n, uint64_t seed);

// Uniform doubles in [0, 1) from a SplitMix64 sequence: the same on every platform.
class SeededUniform {
 public:
  explicit SeededUniform(uint64_t seed) : state_(splitmix64(seed)) {}
  double next() {
    state_ = splitmix64(state_);
    return static_cast<double>(state_ >> 11) * 0x1.0p-53;
  }
  // An integer in [0, n), n >= 1.
  uint64_t below(uint64_t n) { return std::min<uint64_t>(static_cast<uint64_t>(next() * static_cast<double>(n)), n - 1); }

 private:
  uint64_t state_;
};

}  // namespace sinklm
