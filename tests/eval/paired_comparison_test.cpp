// The paired difference of two runs (eval/zero_shot/paired_comparison.h) against values computed by hand and with numpy.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/zero_shot/paired_comparison.h"

using namespace sinklm;

namespace {

MetricResult result(const std::string& metric, std::vector<double> per_document) {
  MetricResult r;
  r.task = "arc_easy";
  r.metric = metric;
  r.n = static_cast<int64_t>(per_document.size());
  r.data_sha256 = "same";
  r.per_document = std::move(per_document);
  return r;
}

}  // namespace

TEST(PairedComparison, AccuracyDifferenceAndItsStandardError) {
  // d = b - a = [0, 1, 0, -1, 1]: mean 0.2, squared deviations sum to 2.8, so
  // SE = sqrt(2.8 / 4 / 5) = sqrt(0.14); numpy: (b - a).std(ddof=1) / sqrt(5) = 0.3741657386773941.
  PairedDifference p = paired_mean_difference({1, 0, 1, 1, 0}, {1, 1, 1, 0, 1});
  EXPECT_NEAR(p.difference, 0.2, 1e-15);
  EXPECT_NEAR(p.standard_error, std::sqrt(0.14), 1e-15);
  EXPECT_NEAR(p.standard_error, 0.3741657386773941, 1e-15);
  EXPECT_FALSE(p.significant);
}

TEST(PairedComparison, SignificantBeyondTwoStandardErrors) {
  // d = [1 x 8, 0, 0]: mean 0.8, SE = sqrt((8 * 0.04 + 2 * 0.64) / 9 / 10) = 0.13333..., 0.8 > 2 SE.
  PairedDifference p = paired_mean_difference({0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 1});
  EXPECT_NEAR(p.difference, 0.8, 1e-15);
  EXPECT_NEAR(p.standard_error, std::sqrt(1.6 / 90), 1e-15);
  EXPECT_TRUE(p.significant);
}

TEST(PairedComparison, PairingRemovesTheNoiseBothRunsShare) {
  // Two runs that agree on 99 of 100 documents: independent stderrs would call a 1-point difference noise
  // of ~7 points; the paired SE is 1 point.
  std::vector<double> a(100), b(100);
  for (int i = 0; i < 100; ++i) a[i] = b[i] = i % 2;
  b[0] = 1;
  PairedDifference p = paired_mean_difference(a, b);
  const double independent =
      std::hypot(mean_and_error(a).standard_error, mean_and_error(b).standard_error);
  EXPECT_NEAR(p.difference, 0.01, 1e-15);
  EXPECT_NEAR(p.standard_error, 0.01, 1e-15);  // sd of one 1 among 99 zeros = 0.1, over sqrt(100)
  EXPECT_GT(independent, 0.07);
}

TEST(PairedComparison, PerplexityByTheDeltaMethod) {
  // numpy: pa, pb = exp(-mean(la)), exp(-mean(lb)); t = pa * la - pb * lb; t.std(ddof=1) / sqrt(4), and the
  // same from the 2x2 covariance of the two means: g = [pa, -pb], sqrt(g @ cov @ g) = 1.5839125888524.
  const std::vector<double> la = {-1.0, -2.0, -0.5, -3.0}, lb = {-0.8, -2.5, -0.4, -2.0};
  PairedDifference p = paired_perplexity_difference(la, lb);
  EXPECT_NEAR(p.difference, -0.9205611944240752, 1e-12);
  EXPECT_NEAR(p.standard_error, 1.5839125888524, 1e-12);
  EXPECT_FALSE(p.significant);
  EXPECT_NEAR(paired_difference(result("perplexity", la), result("perplexity", lb)).standard_error, 1.5839125888524,
              1e-12);
}

TEST(PairedComparison, IdenticalRunsDifferByNothing) {
  PairedDifference p = paired_mean_difference({1, 0, 1}, {1, 0, 1});
  EXPECT_EQ(p.difference, 0);
  EXPECT_EQ(p.standard_error, 0);
  EXPECT_FALSE(p.significant);
}

TEST(PairedComparison, OnlyTheSameDocumentsPair) {
  MetricResult a = result("acc", {1, 0, 1}), b = result("acc", {0, 0, 1});
  EXPECT_EQ(unpaired_reason(a, b), "");
  EXPECT_EQ(unpaired_reason(a, result("acc", {1, 0})), "n 3 vs 2");
  MetricResult other = b;
  other.data_sha256 = "other";
  EXPECT_EQ(unpaired_reason(a, other), "different task data");
  MetricResult old = b;
  old.per_document.clear();
  EXPECT_NE(unpaired_reason(a, old).find("no per-document values in B"), std::string::npos);
}
