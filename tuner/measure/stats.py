"""Confidence intervals and "beyond noise": the statistics every comparison of the tuner uses.

Pure functions, standard library only. The rest of the tuner (and the model-guided search and the
per-batch-size schedule built on it) asks two questions, both answered here:

- *How well is this number known?* An `Interval`: a 95% confidence interval around an estimate,
  with the number of samples it rests on and which noise it covers (`noise`):
  - `"requests"`: one level's own requests (batch means over the level's windows, or order
    statistics of its per-request latencies): the noise *within one run*;
  - `"repeats"`: the spread of `--repeats` runs on one deployment (run-to-run noise);
  - `"deployments"`: the spread over `--repeat-deploys` deployments (restart-to-restart noise,
    which includes the other two);
  - `"none"`: nothing measured the noise; the interval is a stated floor (`FLOOR_REL`), so that
    old records still compare, never as if they were exact.
  An interval from repeats or deployments is never narrower than what the requests alone say.
- *Is A better than B?* `beats(a, b)`: A's interval lies wholly above B's. Otherwise they are
  tied within noise (`tied(a, b)`). Non-overlapping 95% intervals are a conservative test (the
  difference is significant at well below 5%), which is what a recommendation needs: a winner is
  named only when a repeat of the sweep would not reverse it.

The interval of a level's aggregate throughput (tokens over the span the loop was sending) comes
from batch means (Law & Kelton, "Simulation Modeling and Analysis", output analysis of steady-state simulations):
the level is cut into windows at every C-th completion, each window's tokens (by arrival time) and
duration are a pair, and the ratio estimator sum(tokens) / sum(seconds), which *is* the level's
aggregate, gets a delta-method standard error over the windows with a Student t quantile. One
window of C completions is about one generation of the closed loop, so windows are nearly
independent; fewer than two windows give no interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

LEVEL = 0.95
FLOOR_REL = 0.01  # the interval assumed when nothing measured the noise (vLLM tune_speculative_k's 1%)
NOISE_KINDS = ("requests", "repeats", "deployments", "none")


# -- Student t and binomial quantiles (no SciPy at run time) ----------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with df degrees of freedom (bisection on the CDF)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("need 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


_T975: dict[int, float] = {}


def t975(df: int) -> float:
    """The two-sided 95% multiplier (cached: the precision loop asks often)."""
    if df not in _T975:
        _T975[df] = t_quantile(0.975, df)
    return _T975[df]


def binom_cdfs(n: int, p: float) -> list[float]:
    """[P(X <= k) for k in 0..n], X ~ Binomial(n, p), from the pmf in log space."""
    lp, lq = math.log(p), math.log1p(-p)
    out, total = [], 0.0
    for i in range(n + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
        out.append(min(1.0, total))
    return out


# -- the interval ------------------------------------------------------------------------------
def fixed(value: float, decimals: int = 1, grouping: bool = False) -> str:
    """A number with `decimals` decimals (`grouping`: thousands separated), except one that would
    read 0 at that precision although it is not (a server at 0.02 tok/s): two significant figures,
    so a sentence's or a table's margins follow from the numbers it shows."""
    if decimals > 0 and value != 0 and math.isfinite(value) and round(value, decimals) == 0:
        return f"{value:.2g}"
    return f"{value:,.{decimals}f}" if grouping else f"{value:.{decimals}f}"


def readable(value: float, *alongside: float) -> str:
    """A measured number in words, with as many decimals as it needs to keep three figures (1,658;
    95.7; 9.57), or as the smallest of the numbers printed `alongside` it needs (one interval's
    ends alike): rounded to whole numbers, 9.57 ms read as a 10 beside a 9.6 ms limit it meets,
    and a measured 8 as outside an interval printed 8-10 that was 8.5-9.5."""
    a = min(abs(v) for v in (value, *alongside))
    return f"{value:,.0f}" if a >= 100 else f"{value:,.1f}" if a >= 10 else f"{value:,.2f}"


def percentile(values: Sequence[float], q: float) -> float | None:
    """The point estimate of a quantile (metrics and intervals alike): linear interpolation between closest ranks (numpy's default method); None when empty."""
    if not values:
        return None
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


@dataclass(frozen=True)
class Interval:
    """A 95% confidence interval around `estimate`; `n` is how many samples it rests on."""

    estimate: float
    low: float
    high: float
    n: int = 0
    noise: str = "none"
    # the part of the relative half-width a deployment's levels share (the restart band's,
    # tuner/measure/restarts.py `widen`): it moves them together; the rest is each level's own
    shared_rel: float = 0.0

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0

    @property
    def rel_half_width(self) -> float | None:
        """Half-width relative to the estimate (the precision `--precision` asks for)."""
        if not self.estimate:
            return None
        return self.half_width / abs(self.estimate)

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def above(self, other: Interval) -> bool:
        """Wholly above `other`: better beyond noise, for a larger-is-better quantity."""
        return self.low > other.high

    def as_list(self, nd: int = 2) -> list[float]:
        return [round(self.low, nd), round(self.high, nd)]


def score_half_width(levels: Sequence[tuple[Interval, float]]) -> float:
    """Half-width of a workload score, the mean over levels of each level's value scaled to its
    yardstick ((its interval, the scale) per level): the restart band's part of each level's width
    (`Interval.shared_rel`: a deployment's levels move together, tuner/measure/restarts.py) adds up
    over the levels, the rest of each (the requests' or repeats' noise, each level's own) in
    quadrature, and the two in quadrature. Summing whole widths once a restart spread was measured
    read a band below every level's own noise as doubling the score's interval (two starts made a
    tie of a pick beyond noise); the band in quadrature read identical configurations as apart."""
    shared = own = 0.0
    for iv, scale in levels:
        hw = (iv.rel_half_width or 0.0) * scale
        part = min(iv.shared_rel * scale, hw)
        shared += part
        own += hw * hw - part * part
    return math.sqrt(shared * shared + max(own, 0.0)) / len(levels)


def beats(a: Interval, b: Interval) -> bool:
    """A is larger than B beyond noise (their 95% intervals do not overlap, A above)."""
    return a.above(b)


def tied(a: Interval, b: Interval) -> bool:
    """Neither beats the other: the measurements cannot tell them apart."""
    return a.overlaps(b)


def compare(a: Interval, b: Interval) -> int:
    """1 when A beats B, -1 when B beats A, 0 when tied within noise."""
    return 1 if beats(a, b) else (-1 if beats(b, a) else 0)


def floor_interval(value: float, n: int = 1) -> Interval:
    """What a single number without any measured noise is taken to mean: +-FLOOR_REL."""
    hw = abs(value) * FLOOR_REL
    return Interval(value, value - hw, value + hw, n, "none")


def mean_interval(values: Sequence[float], noise: str) -> Interval | None:
    """Student t interval of the mean of independent values (repeats, deployments); None for < 2."""
    vals = [float(v) for v in values]
    n = len(vals)
    if n < 2:
        return None
    m = sum(vals) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (n - 1))
    hw = t975(n - 1) * sd / math.sqrt(n)
    return Interval(m, m - hw, m + hw, n, noise)


def ratio_interval(windows: Sequence[tuple[float, float]], n: int | None = None) -> Interval | None:
    """Batch-means interval of sum(tokens) / sum(seconds) over (tokens, seconds) windows.

    The delta method for a ratio of sums: with R the ratio and d_j = tokens_j - R * seconds_j,
    se(R) = sqrt(sum d_j^2 / (B - 1) / B) / mean(seconds). `n` is reported as the sample count
    (the level's requests); None when fewer than two windows or no time.
    """
    ws = [(float(y), float(x)) for y, x in windows if x > 0]
    b = len(ws)
    if b < 2:
        return None
    sy, sx = sum(y for y, _ in ws), sum(x for _, x in ws)
    if sx <= 0:
        return None
    r = sy / sx
    s2 = sum((y - r * x) ** 2 for y, x in ws) / (b - 1)
    se = math.sqrt(s2 / b) / (sx / b)
    hw = t975(b - 1) * se
    return Interval(r, r - hw, r + hw, n if n is not None else b, "requests")


def quantile_interval(samples: Sequence[float], q: float = 0.5) -> Interval | None:
    """Distribution-free interval of the q-quantile from order statistics (binomial ranks).

    The ranks l < u are the widest-inside pair with P(l <= B < u) >= 95%, B ~ Binomial(n, q); with
    too few samples for 95% the interval is the whole sample range (its coverage is then lower).
    """
    xs = sorted(float(v) for v in samples)
    n = len(xs)
    if n == 0:
        return None
    est = percentile(xs, q * 100.0)
    assert est is not None
    if n < 2:
        return Interval(est, xs[0], xs[0], n, "requests")
    alpha = (1.0 - LEVEL) / 2.0
    cdf = binom_cdfs(n, q)  # cdf[k] = P(B <= k)
    # x_(l) <= xi_q < x_(u) exactly when l <= B <= u - 1: equal tails of alpha each
    lo_rank = 1
    while lo_rank < n and cdf[lo_rank] <= alpha:
        lo_rank += 1
    hi_rank = n
    while hi_rank > 1 and cdf[hi_rank - 2] >= 1.0 - alpha:
        hi_rank -= 1
    hi_rank = max(hi_rank, lo_rank)
    low, high = xs[lo_rank - 1], xs[hi_rank - 1]
    return Interval(est, min(low, est), max(high, est), n, "requests")


def combine(
    levels: Sequence[tuple[float, Interval | None, int]],
    *,
    floor: bool = True,
) -> Interval | None:
    """One cell's interval from its levels: (value, the level's own interval, deployment).

    - two or more deployments: t interval over the deployments' means (`deployments`);
    - else two or more repeats: t interval over the repeats (`repeats`);
    - else the level's own interval (`requests`), or, with `floor`, +-FLOOR_REL (`none`).
    A between-runs interval is widened, never narrowed, to what the requests alone say of its
    estimate (the root-sum-square of the levels' own half-widths over the number of levels, or,
    over deployments, of each deployment's mean's own half-width over the number of deployments).
    """
    if not levels:
        return None
    by_dep: dict[int, list[float]] = {}
    for value, _iv, dep in levels:
        by_dep.setdefault(int(dep), []).append(float(value))
    values = [float(v) for v, _iv, _d in levels]
    own = [iv for _v, iv, _d in levels if iv is not None]
    if len(by_dep) >= 2:
        between = mean_interval([sum(v) / len(v) for v in by_dep.values()], "deployments")
    elif len(values) >= 2:
        between = mean_interval(values, "repeats")
    else:
        between = None
    n_samples = sum(iv.n for iv in own) or len(values)
    if between is None:
        if own and len(own) == len(levels) == 1:
            iv = own[0]
            return Interval(iv.estimate, iv.low, iv.high, iv.n, iv.noise)
        return floor_interval(values[0], n_samples) if floor and len(values) == 1 else None
    est = between.estimate
    lo_w = hi_w = 0.0
    if own and len(own) == len(levels):
        # the requests' own noise of `est`: a mean of the levels (repeats), or of the deployments'
        # means, each the mean of its levels (deployments with other numbers of repeats weigh alike)
        groups: dict[int, list[Interval]] = {}
        for i, ((_v, _iv, dep), mine) in enumerate(zip(levels, own, strict=True)):
            groups.setdefault(int(dep) if len(by_dep) >= 2 else i, []).append(mine)

        def rss(width: Callable[[Interval], float]) -> float:
            return math.sqrt(sum(sum(width(iv) ** 2 for iv in g) / len(g) ** 2 for g in groups.values())) / len(groups)

        lo_w, hi_w = rss(lambda iv: iv.estimate - iv.low), rss(lambda iv: iv.high - iv.estimate)
    low = min(between.low, est - lo_w)
    high = max(between.high, est + hi_w)
    return Interval(est, low, high, n_samples, between.noise)


def nonnegative(iv: Interval | None) -> Interval | None:
    """An interval of a quantity that is never negative (a latency) held at 0 from below: a t
    interval over two deployments (one degree of freedom, t = 12.7) reaches below zero where they
    differ (591 ms [-187, 1,369] from 652 and 530)."""
    return iv if iv is None or iv.low >= 0 else replace(iv, low=0.0)
