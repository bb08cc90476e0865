#include "eval/zero_shot/paired_comparison.h"

#include <cmath>

#include "core/error.h"

namespace sinklm {
namespace {

// `combined[i]` is the per-document term whose mean linearises the difference.
PairedDifference from_terms(double difference, const std::vector<double>& combined) {
  PairedDifference out;
  out.difference = difference;
  out.standard_error = mean_and_error(combined).standard_error;
  out.significant = std::abs(difference) > 2 * out.standard_error;
  return out;
}

double mean(const std::vector<double>& xs) { return mean_and_error(xs).mean; }

}  // namespace

PairedDifference paired_mean_difference(const std::vector<double>& a, const std::vector<double>& b) {
  SINKLM_ASSERT(a.size() == b.size() && !a.empty());
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = b[i] - a[i];
  return from_terms(mean(b) - mean(a), d);
}

PairedDifference paired_perplexity_difference(const std::vector<double>& a_logprob,
                                              const std::vector<double>& b_logprob) {
  SINKLM_ASSERT(a_logprob.size() == b_logprob.size() && !a_logprob.empty());
  const double ppl_a = std::exp(-mean(a_logprob)), ppl_b = std::exp(-mean(b_logprob));
  // d(ppl_B - ppl_A) = ppl_A * d(mean a) - ppl_B * d(mean b)
  std::vector<double> terms(a_logprob.size());
  for (size_t i = 0; i < terms.size(); ++i) terms[i] = ppl_a * a_logprob[i] - ppl_b * b_logprob[i];
  return from_terms(ppl_b - ppl_a, terms);
}

std::string unpaired_reason(const MetricResult& a, const MetricResult& b) {
  if (a.per_document.empty() || b.per_document.empty())
    return "no per-document values in " + std::string(a.per_document.empty() ? "A" : "B") + " (rerun sinklm eval --out)";
  if (a.per_document.size() != b.per_document.size())
    return str("n ", a.per_document.size(), " vs ", b.per_document.size());
  if (!a.data_sha256.empty() && !b.data_sha256.empty() && a.data_sha256 != b.data_sha256)
    return "different task data";
  return "";
}

PairedDifference paired_difference(const MetricResult& a, const MetricResult& b) {
  SINKLM_ASSERT(unpaired_reason(a, b).empty(), unpaired_reason(a, b));
  return a.metric == "perplexity" ? paired_perplexity_difference(a.per_document, b.per_document)
                                  : paired_mean_difference(a.per_document, b.per_document);
}

}  // namespace sinklm
