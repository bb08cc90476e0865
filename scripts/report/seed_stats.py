"""Statistics over seeds: a measurement's mean with its 95% interval, and how often an effect appears.

A claim over N seeds (N independent initialisation + data seeds) is reported as its per-seed values, the mean
and a two-sided Student-t interval, mean +- t(0.975, N-1) * sd / sqrt(N) with the sample standard deviation
(N - 1 in the denominator). A ratio (an eviction penalty, ppl_a / ppl_b) is averaged on the log scale: its
geometric mean and exp(interval of the logs), so 2x and 0.5x are equally far from 1. The t quantile is computed
here (regularised incomplete beta by its continued fraction, then bisection), so no SciPy is needed;
tests/report/seed_stats_test.py holds it to scipy.stats.t.ppf.
"""
import math


def _incomplete_beta_fraction(a, b, x):
    """The continued fraction of the regularised incomplete beta I_x(a, b) (modified Lentz), x < (a+1)/(a+b+2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < eps:
            break
    return result


def regularized_incomplete_beta(a, b, x):
    """I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - front * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom."""
    # P(T > |t|) = I_x(df/2, 1/2) / 2 with x = df / (df + t^2); near t = 0, x is close to 1 and 1 - x loses its
    # digits, so there the same tail comes from the complement in y = t^2 / (df + t^2).
    y = t * t / (df + t * t)
    if y < 0.5:
        tail = 0.5 * (1.0 - regularized_incomplete_beta(0.5, df / 2.0, y))
    else:
        tail = 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p, df):
    """The t with t_cdf(t, df) = p, 0 < p < 1 (bisection to 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: p must lie in (0, 1), got {p}")
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > p:
        lo *= 2.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    while hi - lo > 1e-12 * max(1.0, abs(hi)):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def mean_interval(values, level=0.95):
    """(mean, low, high): the mean and its two-sided Student-t interval; low = high = nan for one value."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_interval: no values")
    mean = sum(values) / n
    if n == 1:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(0.5 + level / 2.0, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def ratio_interval(ratios, level=0.95):
    """(geometric mean, low, high) of positive ratios: mean_interval of their logs, mapped back by exp."""
    if any(r <= 0 for r in ratios):
        raise ValueError(f"ratio_interval: ratios must be positive, got {ratios}")
    mean, low, high = mean_interval([math.log(r) for r in ratios], level)
    return math.exp(mean), math.exp(low), math.exp(high)


def share_interval(shares, level=0.95, floor=1e-4):
    """(centre, low, high) of shares in [0, 1] (attention masses): mean_interval on the logit scale, mapped back,
    so the interval stays inside (0, 1) (as ratio_interval does on the log scale). Shares are held inside
    [floor, 1 - floor] first, so a mass of exactly 0 does not send the logit to minus infinity."""
    if any(not 0.0 <= x <= 1.0 for x in shares):
        raise ValueError(f"share_interval: shares must lie in [0, 1], got {shares}")
    logits = [math.log(x / (1.0 - x)) for x in (min(max(v, floor), 1.0 - floor) for v in shares)]
    return tuple(z if math.isnan(z) else 1.0 / (1.0 + math.exp(-z)) for z in mean_interval(logits, level))


def wilson_interval(successes, n, level=0.95):
    """(proportion, low, high): Wilson's score interval of a proportion, which stays inside [0, 1] and is not
    empty at 0 or n successes (unlike p +- z sqrt(p(1-p)/n)); z is the normal quantile (the t quantile's limit)."""
    if n <= 0:
        raise ValueError("wilson_interval: no trials")
    z = t_quantile(0.5 + level / 2.0, 1e9)
    p = successes / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, center - half), min(1.0, center + half)


def format_interval(summary, digits=2, suffix=""):
    """'1.89x [1.52, 2.35]' (or '1.89x' for one seed)."""
    mean, low, high = summary
    if math.isnan(low):
        return f"{mean:.{digits}f}{suffix}"
    return f"{mean:.{digits}f}{suffix} [{low:.{digits}f}, {high:.{digits}f}]"
