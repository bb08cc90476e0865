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

#include "eval/zero_shot/loglikelihood_scorer.h"
#include "eval/zero_shot/tasks/task_formats.h"

namespace sinklm {

struct MetricResult {
  std::string task;
  std::string metric;  // acc, acc_norm, perplexity
  double value = 0;
  double standard_error = 0;
  int64_t n = 0;
  bool proxy = false;
  bool official = false;    // scored on the verified official split shipped with sinklm
  std::string data_sha256;  // of the task file (ZeroShotTask::data_sha256)
  // Per document, the value whose mean is the metric: acc and acc_norm 1 (right) or 0; perplexity the word's
  // log-prob (the metric is exp(-mean)). `sinklm eval --compare` pairs them between two runs.
  std::vector<double> per_document;
  // Per document, how many choices a guess picks from (multiple-choice and partial-scoring tasks: a uniform
  // guess is right with probability 1/choices, so chance = their mean of 1/choices); empty for last-word tasks,
  // whose greedy word has no fixed chance.
  std::vector<int64_t> choices;
};

struct MeanAndError {
  double mean = 0, standard_error = 0;
};
// lm-eval's mean and mean_stderr: sample standard deviation (n - 1) over sqrt(n); 0 below two values.
MeanAndError mean_and_error(const std::vector<double>& xs);

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
