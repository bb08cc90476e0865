// lm-evaluation-harness metrics from per-request scores:
//   acc       MultipleChoice/PartialScoring: argmax of summed log-probs is gold; LastWord: greedy decode
//   acc_norm  MultipleChoice: argmax of logprob / (characters of the choice text) is gold (lm-eval divides by
//             len() of the Python string: code points, the byte length for ASCII text)
//   perplexity LastWord: exp(-mean over documents of the word's summed log-prob)
// Ties go to the first choice (numpy argmax). stderr: sample standard deviation / sqrt(n) for means
// (lm-eval's mean_stderr); for perplexity the delta method, ppl * stderr(mean log-prob) (lm-eval bootstraps).
#pragma once
#include <string>
#include <vector>

#include "eval/loglikelihood_scorer.h"
#include "eval/task_formats.h"

namespace sinklm {

struct MetricResult {
  std::string task;
  std::string metric;  // acc, acc_norm, perplexity
  double value = 0;
  double standard_error = 0;
  int64_t n = 0;
  bool proxy = false;
};

// Per document: the prediction under each metric (for --samples logs).
struct DocumentOutcome {
  int pred = 0;       // acc
  int pred_norm = 0;  // acc_norm (MultipleChoice)
};
DocumentOutcome document_outcome(const ZeroShotTask& task, size_t doc, const std::vector<ContinuationScore>& scores);

// scores[d][r]: request r of document d.
std::vector<MetricResult> task_metrics(const ZeroShotTask& task,
                                       const std::vector<std::vector<ContinuationScore>>& scores);

}  // namespace sinklm
