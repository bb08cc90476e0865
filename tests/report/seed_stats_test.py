#!/usr/bin/env python3
"""The seed statistics of the reports (scripts/report/seed_stats.py, label unit) against independent values.

  - the Student-t quantile against scipy.stats.t.ppf (when SciPy is installed: lm-eval brings it) and against
    a printed table's t(0.975, df) (to its 3 decimals);
  - mean_interval against the interval computed by hand from the textbook formula with scipy's quantile;
  - ratio_interval: symmetric on the log scale (2x and 0.5x seeds give geometric mean 1), and equal to
    exp of the log interval;
  - one seed gives no interval (nan), a non-positive ratio is refused.
"""
import math
import os
import sys

from sinklm_test import SOURCE, check, finish

sys.path.insert(0, os.path.join(SOURCE, "scripts", "report"))
import seed_stats  # noqa: E402

# t(0.975, df), two-sided 95%, as printed in every statistics table.
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 19: 2.093, 29: 2.045}
for df, printed in TABLE.items():
    got = seed_stats.t_quantile(0.975, df)
    check(abs(got - printed) < 6e-4, f"t(0.975, {df}) matches the printed table", f"{got:.5f} vs {printed}")

try:
    from scipy import stats
except ImportError:
    stats = None
if stats is not None:
    worst = 0.0
    for df in (1, 2, 3, 4, 7, 15, 30, 120):
        for p in (0.005, 0.025, 0.1, 0.5, 0.8, 0.975, 0.995):
            expected = stats.t.ppf(p, df)
            worst = max(worst, abs(seed_stats.t_quantile(p, df) - expected) / max(1.0, abs(expected)))
    check(worst < 1e-8, "t_quantile equals scipy.stats.t.ppf over df 1..120 and p 0.005..0.995",
          f"max |diff| / max(1, |t|) {worst:.2e}")
    values = [1.2, 1.9, 2.4, 1.6, 2.1]
    n, mean = len(values), sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    got = seed_stats.mean_interval(values)
    check(max(abs(got[0] - mean), abs(got[1] - (mean - half)), abs(got[2] - (mean + half))) < 1e-9,
          "mean_interval is mean +- t(0.975, n-1) sd/sqrt(n)", f"{got} vs ({mean}, {mean - half}, {mean + half})")
    scipy_low, scipy_high = stats.t.interval(0.95, n - 1, loc=mean, scale=stats.sem(values))
    check(abs(got[1] - scipy_low) < 1e-9 and abs(got[2] - scipy_high) < 1e-9,
          "mean_interval equals scipy.stats.t.interval", f"({scipy_low}, {scipy_high})")
else:
    print("note: SciPy not installed; checked against the printed table only")

g, low, high = seed_stats.ratio_interval([2.0, 0.5])
check(abs(g - 1.0) < 1e-12 and abs(low * high - 1.0) < 1e-9, "ratio_interval is symmetric on the log scale",
      f"{g}, [{low}, {high}]")
ratios = [1.5, 2.0, 1.8]
logs = seed_stats.mean_interval([math.log(r) for r in ratios])
got = seed_stats.ratio_interval(ratios)
check(all(abs(a - math.exp(b)) < 1e-12 for a, b in zip(got, logs)), "ratio_interval is exp of the log interval",
      f"{got}")
one = seed_stats.mean_interval([3.0])
check(one[0] == 3.0 and math.isnan(one[1]) and math.isnan(one[2]), "one seed: its value and no interval", f"{one}")
check(seed_stats.format_interval(one) == "3.00", "one seed is printed without an interval",
      seed_stats.format_interval(one))
try:
    seed_stats.ratio_interval([1.0, 0.0])
    check(False, "a zero ratio is refused")
except ValueError as e:
    check("positive" in str(e), "a zero ratio is refused, saying ratios must be positive", str(e))

# Wilson's interval: against the root of its defining equation |p - q| = z sqrt(q (1 - q) / n), solved here by
# bisection on each side of p (an independent computation), with the normal quantile 1.959963984540054.
z = 1.959963984540054
for k, n in ((0, 48), (1, 48), (24, 48), (47, 48), (48, 48), (3, 10)):
    p = k / n
    def root(lo, hi, below):
        for _ in range(200):
            mid = (lo + hi) / 2
            inside = abs(p - mid) <= z * math.sqrt(mid * (1 - mid) / n)
            lo, hi = (lo, mid) if inside == below else (mid, hi)
        return (lo + hi) / 2
    want_low = 0.0 if k == 0 else root(0.0, p, below=True)
    want_high = 1.0 if k == n else root(p, 1.0, below=False)
    got = seed_stats.wilson_interval(k, n)
    check(abs(got[1] - want_low) < 1e-7 and abs(got[2] - want_high) < 1e-7 and got[0] == p,
          f"wilson_interval({k}, {n}) solves Wilson's equation", f"{got} vs ({want_low}, {want_high})")
# Shares (attention masses) on the logit scale: the interval stays inside (0, 1) where the plain Student-t one
# leaves it, and equals mean_interval of the logits mapped back (computed here from the logits directly).
masses = [0.01, 0.30, 0.02]
plain = seed_stats.mean_interval(masses)
share = seed_stats.share_interval(masses)
logits = [math.log(m / (1 - m)) for m in masses]
centre = sum(logits) / 3
half = seed_stats.t_quantile(0.975, 2) * math.sqrt(sum((v - centre) ** 2 for v in logits) / 2) / math.sqrt(3)
expit = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
check(plain[1] < 0 < share[1] < share[0] < share[2] < 1, "a share's interval stays inside (0, 1)",
      f"plain {plain}, logit {share}")
check(all(abs(a - b) < 1e-12 for a, b in zip(share, (expit(centre), expit(centre - half), expit(centre + half)))),
      "share_interval is the logit-scale interval mapped back", f"{share}")
check(seed_stats.share_interval([0.0, 0.0, 0.0])[0] > 0, "a mass of 0 is held at the floor, not log(0)",
      f"{seed_stats.share_interval([0.0, 0.0, 0.0])}")
finish()
