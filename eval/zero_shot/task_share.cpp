#include "eval/zero_shot/task_share.h"

#include <cmath>

#include "eval/zero_shot/task_metrics.h"

namespace sinklm {

std::vector<MetricSum> score_task_share(LoglikelihoodScorer& scorer, const ZeroShotTask& task, int rank, int world) {
  ZeroShotTask share = task;
  share.docs.clear();
  for (size_t d = static_cast<size_t>(rank); d < task.docs.size(); d += static_cast<size_t>(world))
    share.docs.push_back(task.docs[d]);
  std::vector<LoglikelihoodRequest> requests;
  for (const auto& doc : share.docs) requests.insert(requests.end(), doc.requests.begin(), doc.requests.end());
  const std::vector<ContinuationScore> flat = scorer.score(requests);
  std::vector<std::vector<ContinuationScore>> per_doc;
  size_t next = 0;
  for (const auto& doc : share.docs) {
    per_doc.emplace_back(flat.begin() + next, flat.begin() + next + doc.requests.size());
    next += doc.requests.size();
  }
  // An empty share still names every metric (task_metrics of a one-document task), so every rank's list agrees.
  std::vector<MetricSum> sums;
  if (task.docs.empty()) return sums;
  if (share.docs.empty()) {
    ZeroShotTask one = task;
    one.docs.assign(1, task.docs[0]);
    for (const auto& r : task_metrics(one, {std::vector<ContinuationScore>(task.docs[0].requests.size())}))
      sums.push_back({task.name, r.metric, 0, 0});
    return sums;
  }
  for (const auto& r : task_metrics(share, per_doc)) {
    MetricSum s{task.name, r.metric, 0, static_cast<double>(r.per_document.size())};
    for (double v : r.per_document) s.sum += v;
    sums.push_back(s);
  }
  return sums;
}

nlohmann::json score_tasks_over_ranks(LoglikelihoodScorer& scorer, const std::vector<ZeroShotTask>& tasks, int rank,
                                      int world, const std::function<void(std::vector<double>&)>& sum_over_ranks) {
  std::vector<MetricSum> all;
  for (const auto& task : tasks)
    for (auto& s : score_task_share(scorer, task, rank, world)) all.push_back(std::move(s));
  std::vector<double> parts;
  for (const auto& s : all) {
    parts.push_back(s.sum);
    parts.push_back(s.n);
  }
  sum_over_ranks(parts);
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < all.size(); ++i) {
    const double sum = parts[2 * i], n = parts[2 * i + 1];
    const double mean = n > 0 ? sum / n : std::nan("");
    out[all[i].task + "/" + all[i].metric] = all[i].metric == "perplexity" ? std::exp(-mean) : mean;
    out[all[i].task + "/n"] = n;
  }
  return out;
}

}  // namespace sinklm
