#include "core/seeded_random.h"

#include <numeric>

namespace sinklm {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t seeded_hash(uint64_t seed, std::string_view text) {
  uint64_t h = splitmix64(seed) ^ 0xcbf29ce484222325ULL;  // FNV-1a over the bytes, then mixed
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ULL;
  return splitmix64(h);
}

std::vector<uint64_t> seeded_permutation(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  uint64_t state = splitmix64(seed);
  for (uint64_t i = n; i > 1; --i) {
    // Unbiased draw from [0, i) by rejection.
    uint64_t limit = UINT64_MAX - UINT64_MAX % i, r;
    do {
      state = splitmix64(state);
      r = state;
    } while (r >= limit);
    std::swap(order[i - 1], order[r % i]);
  }
  return order;
}

}  // namespace sinklm
