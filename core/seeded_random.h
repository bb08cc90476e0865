// Deterministic randomness that is the same on every platform and standard library (std::shuffle and the
// std distributions are not): a SplitMix64 hash and a Fisher-Yates permutation built on it.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace sinklm {

uint64_t splitmix64(uint64_t x);
// Stable 64-bit hash of (seed, text).
uint64_t seeded_hash(uint64_t seed, std::string_view text);
// A permutation of [0, n) determined by `seed` alone.
std::vector<uint64_t> seeded_permutation(uint64_t n, uint64_t seed);

}  // namespace sinklm
