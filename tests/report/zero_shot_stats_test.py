#!/usr/bin/env python3
"""The zero-shot statistics of the report (scripts/report/zero_shot_stats.py, label unit) against independent values.

  - guess_pmf and chance_test against brute-force enumeration of every right/wrong pattern of 10 documents
    with 2..5 choices (the Poisson-binomial by definition), and against scipy.stats.binomtest (two-sided, when
    SciPy is installed: lm-eval brings it) for documents of equal choice counts, near and far from chance;
  - paired: the interval by hand from the textbook formula with scipy's t quantile; b - a, not a - b;
  - equivalence: a 1.3-point difference on 4,000 documents is equivalent within 2 points, a shift of 5 points is
    different, and 20 documents decide nothing; bad input is refused.
"""
import itertools
import math
import os
import sys

from sinklm_test import SOURCE, check, finish

sys.path.insert(0, os.path.join(SOURCE, "scripts", "report"))
import zero_shot_stats as z  # noqa: E402

try:
    from scipy import stats
except ImportError:
    stats = None

# Brute force: every pattern of right (1) / wrong (0) over the documents, with its probability.
choices = [2, 3, 4, 4, 5, 2, 3, 4, 5, 4]
brute = [0.0] * (len(choices) + 1)
for pattern in itertools.product((0, 1), repeat=len(choices)):
    p = 1.0
    for right, c in zip(pattern, choices):
        p *= 1 / c if right else 1 - 1 / c
    brute[sum(pattern)] += p
pmf = z.guess_pmf(choices)
check(max(abs(a - b) for a, b in zip(pmf, brute)) < 1e-12 and len(pmf) == len(brute),
      "guess_pmf equals enumeration of all 2^10 patterns (2..5 choices)", f"{[round(v, 5) for v in pmf]}")
worst = 0.0
for k in range(len(choices) + 1):
    expected = sum(v for v in brute if v <= brute[k] * (1 + 1e-7))
    worst = max(worst, abs(z.chance_test(k, choices)["p_value"] - min(1.0, expected)))
check(worst < 1e-12, "chance_test's two-sided p equals the enumerated minimum-likelihood sum for every k", f"{worst:.1e}")
check(abs(z.chance_test(3, choices)["chance"] - sum(1 / c for c in choices) / len(choices)) < 1e-15,
      "chance is the mean of 1/choices")

if stats is not None:
    worst, cases = 0.0, [(1000, 4, k) for k in (180, 240, 250, 262, 300, 400)] + [(1267, 2, k) for k in (600, 634, 700)]
    for n, c, k in cases:
        expected = stats.binomtest(k, n, 1 / c).pvalue
        got = z.chance_test(k, [c] * n)["p_value"]
        worst = max(worst, abs(got - expected) / max(expected, 1e-300))
    check(worst < 1e-6, "chance_test equals scipy.stats.binomtest (two-sided) for equal choice counts",
          f"max relative diff {worst:.1e} over {len(cases)} cases")
    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    b = [1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1]
    d = [y - x for x, y in zip(a, b)]
    n, mean = len(d), sum(d) / len(d)
    se = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1)) / math.sqrt(n)
    got = z.paired(a, b)
    t = stats.t.ppf(0.975, n - 1)
    check(abs(got["low"] - (mean - t * se)) < 1e-9 and abs(got["high"] - (mean + t * se)) < 1e-9 and got["mean"] > 0,
          "paired: mean of b - a +- t(0.975, n-1) * sd / sqrt(n)", f"{got}")
else:
    print("(scipy not installed: the scipy comparisons are not run)")

same = [i % 3 == 0 for i in range(4000)]
flipped = list(same)
for i in range(0, 4000, 50):  # 160 documents change: a 1.3-point difference
    flipped[i] = not flipped[i]
    flipped[i + 1] = not flipped[i + 1]
check(z.equivalence(same, flipped, 0.02)["verdict"] == "equivalent", "a 1.3-point difference on 4,000 documents "
      "is equivalent within 2 points", str(z.equivalence(same, flipped, 0.02)))
better = [True if i % 20 == 1 else v for i, v in enumerate(same)]  # +5 points
check(z.equivalence(same, better, 0.02)["verdict"] == "different", "a 5-point gain is different",
      str(z.equivalence(same, better, 0.02)))
check(z.equivalence(same[:20], flipped[:20], 0.02)["verdict"] == "undecided", "20 documents decide nothing")
for bad, what in ((lambda: z.paired([1], [1]), "one document"), (lambda: z.chance_test(11, choices), "k > n"),
                  (lambda: z.guess_pmf([0]), "0 choices")):
    try:
        bad()
        check(False, f"{what} is refused")
    except ValueError:
        check(True, f"{what} is refused")
finish()
