#include "eval/zero_shot/task_metrics.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace sinklm {
namespace {

int first_argmax(const std::vector<double>& values) {
  int best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[best]) best = static_cast<int>(i);
  return best;
}

size_t code_points(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

MeanAndError mean_and_error(const std::vector<double>& xs) {
  MeanAndError r;
  const double n = static_cast<double>(xs.size());
  for (double x : xs) r.mean += x;  // sum, then divide: lm-eval's mean, to the last bit
  r.mean /= n;
  if (xs.size() < 2) return r;
  double squares = 0;
  for (double x : xs) squares += (x - r.mean) * (x - r.mean);
  r.standard_error = std::sqrt(squares / (n - 1)) / std::sqrt(n);
  return r;
}

DocumentOutcome document_outcome(const ZeroShotTask& task, size_t doc, const std::vector<ContinuationScore>& scores) {
  const TaskDocument& d = task.docs[doc];
  SINKLM_ASSERT(scores.size() == d.requests.size());
  DocumentOutcome out;
  if (task.scoring == TaskScoring::LastWord) {
    out.pred = out.pred_norm = scores[0].greedy ? d.gold : -1;
    return out;
  }
  std::vector<double> lls, normalised;
  for (size_t i = 0; i < scores.size(); ++i) {
    lls.push_back(scores[i].logprob);
    if (task.scoring == TaskScoring::MultipleChoice)
      normalised.push_back(scores[i].logprob / static_cast<double>(std::max<size_t>(1, code_points(d.choices[i]))));
  }
  out.pred = first_argmax(lls);
  out.pred_norm = normalised.empty() ? out.pred : first_argmax(normalised);
  return out;
}

std::vector<MetricResult> task_metrics(const ZeroShotTask& task,
                                       const std::vector<std::vector<ContinuationScore>>& scores) {
  SINKLM_ASSERT(scores.size() == task.docs.size());
  std::vector<double> acc, acc_norm, word_logprob;
  std::vector<int64_t> choices;
  for (size_t d = 0; d < scores.size(); ++d) {
    if (task.scoring != TaskScoring::LastWord) choices.push_back(static_cast<int64_t>(scores[d].size()));
    DocumentOutcome o = document_outcome(task, d, scores[d]);
    acc.push_back(o.pred == task.docs[d].gold);
    acc_norm.push_back(o.pred_norm == task.docs[d].gold);
    word_logprob.push_back(scores[d][0].logprob);
  }
  const int64_t n = static_cast<int64_t>(scores.size());
  auto metric = [&](const char* name, MeanAndError m, const std::vector<double>& per_document) {
    const bool guessable = std::string(name) != "perplexity";
    return MetricResult{task.name,        name, m.mean, m.standard_error, n, task.proxy, task.official,
                        task.data_sha256, per_document, guessable ? choices : std::vector<int64_t>{}};
  };
  std::vector<MetricResult> out{metric("acc", mean_and_error(acc), acc)};
  if (task.scoring == TaskScoring::MultipleChoice)
    out.push_back(metric("acc_norm", mean_and_error(acc_norm), acc_norm));
  if (task.scoring == TaskScoring::LastWord) {
    MeanAndError ll = mean_and_error(word_logprob);
    const double perplexity = std::exp(-ll.mean);
    out.push_back(metric("perplexity", {perplexity, perplexity * ll.standard_error}, word_logprob));
  }
  return out;
}

}  // namespace sinklm
