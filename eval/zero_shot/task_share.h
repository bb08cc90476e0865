// Zero-shot scores computed by several ranks together (`train.eval_tasks`: scoring during training): each rank
// scores its share of a task's documents (document d on rank d mod R), turns every metric into a sum and a count
// of per-document values (task_metrics.h: acc and acc_norm 1 or 0, perplexity the word's log-prob), the ranks add
// those up, and the values follow: acc = sum / n, perplexity = exp(-sum / n). The same documents and values as
// `sinklm eval --limit N` on one process.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

#include "eval/zero_shot/loglikelihood_scorer.h"
#include "eval/zero_shot/tasks/task_formats.h"

namespace sinklm {

struct MetricSum {
  std::string task, metric;
  double sum = 0;
  double n = 0;
};

// This rank's sums for every metric of `task`: the same list (names, order) on every rank.
std::vector<MetricSum> score_task_share(LoglikelihoodScorer& scorer, const ZeroShotTask& task, int rank, int world);

// Scores `tasks` on this rank's share, adds the sums over ranks with `sum_over_ranks` (a collective: every rank
// calls it once, with vectors of the same length) and returns {"<task>/<metric>": value, ..., "<task>/n": docs}.
nlohmann::json score_tasks_over_ranks(LoglikelihoodScorer& scorer, const std::vector<ZeroShotTask>& tasks, int rank,
                                      int world, const std::function<void(std::vector<double>&)>& sum_over_ranks);

}  // namespace sinklm
