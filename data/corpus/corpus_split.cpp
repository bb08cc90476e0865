#include "data/corpus/corpus_split.h"

#include <algorithm>

#include "core/error.h"
#include "data/prepare/hash_split.h"

namespace sinklm {

const char* split_name(Split split) {
  switch (split) {
    case Split::Train: return "train";
    case Split::Validation: return "validation";
    case Split::Test: return "test";
  }
  SINKLM_ASSERT(false, "unknown split");
}

const std::vector<Split>& all_splits() {
  static const std::vector<Split> splits = {Split::Train, Split::Validation, Split::Test};
  return splits;
}

std::vector<Split> split_documents(const std::vector<std::string>& ids, uint64_t seed, SplitFractions fractions) {
  if (fractions.validation < 0 || fractions.test < 0 || fractions.validation + fractions.test >= 1)
    fail("split fractions: validation ", fractions.validation, " and test ", fractions.test,
         " must be >= 0 and leave some documents for training");
  std::vector<double> u(ids.size());
  std::vector<Split> splits(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    u[i] = split_draw(seed, ids[i]);
    splits[i] = split_of_draw(u[i], fractions);
  }
  if (ids.size() < 3) return splits;
  // A tiny corpus may leave validation or test empty: move the training document whose draw is closest.
  for (Split wanted : {Split::Validation, Split::Test}) {
    if (std::count(splits.begin(), splits.end(), wanted) > 0) continue;
    double target = wanted == Split::Validation ? 0 : fractions.validation;
    size_t best = ids.size();
    for (size_t i = 0; i < ids.size(); ++i)
      if (splits[i] == Split::Train && (best == ids.size() || std::abs(u[i] - target) < std::abs(u[best] - target)))
        best = i;
    if (best < ids.size() && std::count(splits.begin(), splits.end(), Split::Train) > 1) splits[best] = wanted;
  }
  return splits;
}

}  // namespace sinklm
