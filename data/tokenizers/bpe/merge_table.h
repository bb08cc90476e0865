// The merge rules of a BPE as an open-addressing hash table: (left id, right id) -> the merged token and its
// priority (lower merges first). Built once, then read-only and shared by all threads. merge_symbols() is
// BPE itself, the same for byte-level vocabularies (symbols start as bytes) and SentencePiece-style ones
// (symbols start as characters or byte-fallback tokens).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace sinklm {

struct MergeRule {
  uint32_t left, right;  // ids of the two adjacent tokens
  uint32_t result;       // id of their concatenation
  uint32_t rank;         // merge priority: lower first
};

class MergeTable {
 public:
  explicit MergeTable(const std::vector<MergeRule>& rules);  // the first rule for a pair wins

  // nullptr when the pair never merges.
  const MergeRule* find(uint32_t left, uint32_t right) const {
    uint64_t key = pack(left, right);
    for (size_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
      const Slot& s = slots_[slot];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.rule;
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t key = 0;
    MergeRule rule{};
    bool used = false;
  };
  static uint64_t pack(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// The rule merging tokens `left` and `right` (their texts, as a vocabulary file writes them) into left + right,
// looked up in `ids`; UserError naming `where` and the rule when a token is not in the vocabulary.
MergeRule merge_rule(const std::string& left, const std::string& right, size_t rank,
                     const std::unordered_map<std::string, uint32_t>& ids, const std::string& where);

// BPE on one piece: repeatedly merges the adjacent pair with the lowest rank (the leftmost on ties) until no
// pair merges; appends the resulting ids to `out`.
void merge_symbols(const std::vector<uint32_t>& symbols, const MergeTable& merges, std::vector<uint32_t>& out);

}  // namespace sinklm
