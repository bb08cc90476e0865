// Deterministic train / validation / test split by whole documents: a document's split depends only on the
// seed and its id (so adding a source does not move the others' documents), and each split gets at least
// one document when there are three or more.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sinklm {

enum class Split { Train, Validation, Test };
const char* split_name(Split split);
const std::vector<Split>& all_splits();

struct SplitFractions {
  double validation = 0.01;
  double test = 0.01;
};

// result[i] is the split of document ids[i].
std::vector<Split> split_documents(const std::vector<std::string>& ids, uint64_t seed, SplitFractions fractions);

}  // namespace sinklm
