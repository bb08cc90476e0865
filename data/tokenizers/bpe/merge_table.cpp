#include "data/tokenizers/bpe/merge_table.h"

#include <functional>
#include <queue>

#include "core/error.h"

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

MergeRule merge_rule(const std::string& left, const std::string& right, size_t rank,
                     const std::unordered_map<std::string, uint32_t>& ids, const std::string& where) {
  auto id = [&](const std::string& token) {
    auto it = ids.find(token);
    if (it == ids.end()) fail(where, ": merge ", rank, " ('", left, " ", right, "') uses unknown token '", token, "'");
    return it->second;
  };
  return MergeRule{id(left), id(right), id(left + right), static_cast<uint32_t>(rank)};
}

void merge_symbols(const std::vector<uint32_t>& ids, const MergeTable& merges, std::vector<uint32_t>& out) {
  constexpr uint32_t kDead = UINT32_MAX;
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
  };
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    uint32_t left, right, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n == 0) return;
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) symbols[i] = Symbol{ids[i], i - 1, i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    uint32_t left = symbols[pos].id, right = symbols[symbols[pos].next].id;
    if (const MergeRule* rule = merges.find(left, right)) queue.push(Candidate{rule->rank, pos, left, right, rule->result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (left.id != c.left || left.next < 0 || symbols[left.next].id != c.right) continue;  // stale
    Symbol& right = symbols[left.next];
    left.id = c.result;
    right.id = kDead;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.pos;
    consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace sinklm
