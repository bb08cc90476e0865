// Paired comparison of two evaluation runs that scored the same documents: the difference of a metric and
// the standard error of that difference computed from per-document pairs. Two models meet the same easy
// and hard documents, so their per-document outcomes are correlated; combining two independent stderrs
// ignores that and overstates the noise. Per-document values come from the results files
// (MetricResult::per_document, written by `sinklm eval --out`).
#pragma once
#include <string>
#include <vector>

#include "eval/zero_shot/task_metrics.h"

namespace sinklm {

struct PairedDifference {
  double difference = 0;      // B - A
  double standard_error = 0;  // of the difference, from the per-document pairs
  bool significant = false;   // |difference| > 2 standard errors (about 95%, two-sided)
};

// Metrics that are means of per-document values (acc, acc_norm): the sample standard deviation of
// b_i - a_i over sqrt(n).
PairedDifference paired_mean_difference(const std::vector<double>& a, const std::vector<double>& b);
// Perplexity exp(-mean log-prob) from per-document log-probs: the delta method on the pairs, i.e. the
// sample standard deviation of ppl_A * a_i - ppl_B * b_i over sqrt(n) (the per-run stderr uses the same
// linearisation, eval/zero_shot/task_metrics.h).
PairedDifference paired_perplexity_difference(const std::vector<double>& a_logprob,
                                              const std::vector<double>& b_logprob);

// Why two results of one task and metric cannot be paired, "" when they can: a file without per-document
// values, different numbers of documents, or different task data.
std::string unpaired_reason(const MetricResult& a, const MetricResult& b);
// The paired difference of two pairable results (unpaired_reason(a, b) == "").
PairedDifference paired_difference(const MetricResult& a, const MetricResult& b);

}  // namespace sinklm
