#include "data/tokenizers/bpe/merge_table.h"

namespace sinklm {

MergeTable::MergeTable(const std::vector<MergeRule>& rules) {
  size_t capacity = 16;
  while (capacity < rules.size() * 2) capacity *= 2;
  slots_.resize(capacity);
  mask_ = capacity - 1;
  for (const MergeRule& rule : rules) {
    uint64_t key = pack(rule.left, rule.right);
    size_t slot = hash(key) & mask_;
    while (slots_[slot].used && slots_[slot].key != key) slot = (slot + 1) & mask_;
    if (slots_[slot].used) continue;
    slots_[slot] = Slot{key, rule, true};
    ++count_;
  }
}

}  // namespace sinklm
