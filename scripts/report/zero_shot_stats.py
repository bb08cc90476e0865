"""Zero-shot scores as a statistician reports them: against chance, and one model against another.

For one model and task (a result of `sinklm eval --out`, with its per-document 0/1 scores and choice counts):
  chance_test   the number right, k of n, against a uniform guess on every document. A guess is right with
                probability 1/choices of its document, so the count of a guesser is Poisson-binomial (binomial
                when every document has as many choices); its exact pmf is the convolution of one binomial per
                choice count. The p-value is two-sided by the minimum-likelihood rule (the sum of the pmf over
                every count no more likely than k), as scipy.stats.binomtest computes it for the binomial.
For two models on the same documents (the same task file, data_sha256 equal):
  paired        the per-document differences B - A: their mean, its standard error (sample sd / sqrt(n)) and
                the 95% Student-t interval (seed_stats.t_quantile, df = n - 1);
  equivalence   two one-sided tests at 5% with margin +-m: "equivalent within m" when the 90% interval lies
                inside (-m, m); "different" when the 95% interval excludes 0; else "undecided" (neither a
                difference nor its absence is shown).
tests/report/zero_shot_stats_test.py holds these to scipy.stats.binomtest and to brute-force enumeration.
"""
import math

from seed_stats import t_quantile


def _log_binomial_pmf(n, p):
    """[log P(X = j)] for X ~ Binomial(n, p), j = 0..n."""
    if p >= 1.0:
        return [-math.inf] * n + [0.0]
    log_p, log_q = math.log(p), math.log1p(-p)
    return [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * log_p + (n - j) * log_q
            for j in range(n + 1)]


def guess_pmf(choices):
    """P(a uniform guesser gets exactly j right), j = 0..len(choices), for per-document choice counts."""
    groups = {}
    for c in choices:
        if c < 1:
            raise ValueError(f"a document with {c} choices")
        groups[c] = groups.get(c, 0) + 1
    pmf = [1.0]
    for c, n in sorted(groups.items()):
        part = [math.exp(v) for v in _log_binomial_pmf(n, 1.0 / c)]
        joined = [0.0] * (len(pmf) + len(part) - 1)
        for i, a in enumerate(pmf):
            if a == 0.0:
                continue
            for j, b in enumerate(part):
                joined[i + j] += a * b
        pmf = joined
    return pmf


def chance_test(right, choices):
    """{"k", "n", "chance", "p_value"}: `right` correct of len(choices), two-sided against uniform guessing."""
    n = len(choices)
    if not 0 <= right <= n:
        raise ValueError(f"{right} right of {n} documents")
    pmf = guess_pmf(choices)
    # Counts no more likely than the observed one (a relative tolerance for equal terms, as scipy uses).
    threshold = pmf[right] * (1 + 1e-7)
    p_value = min(1.0, sum(v for v in pmf if v <= threshold))
    return {"k": right, "n": n, "chance": sum(1.0 / c for c in choices) / n, "p_value": p_value}


def paired(a, b, confidence=0.95):
    """Mean of b - a per document, its standard error and the two-sided `confidence` t interval."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"paired values need equal lengths of at least 2, got {len(a)} and {len(b)}")
    d = [y - x for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1) / n)
    half = t_quantile(0.5 + confidence / 2, n - 1) * se
    return {"n": n, "mean": mean, "stderr": se, "low": mean - half, "high": mean + half}


def equivalence(a, b, margin):
    """The paired difference with its 95% interval and the verdict of the two one-sided tests at +-margin."""
    wide, narrow = paired(a, b, 0.95), paired(a, b, 0.90)
    if -margin < narrow["low"] and narrow["high"] < margin:
        verdict = "equivalent"
    elif wide["low"] > 0 or wide["high"] < 0:
        verdict = "different"
    else:
        verdict = "undecided"
    return dict(wide, tost_low=narrow["low"], tost_high=narrow["high"], margin=margin, verdict=verdict)
