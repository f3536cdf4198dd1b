"""The search's fits (pure): acceptance per draft position, KV capacity and first-token time, each
from what the tuner measured (the decode step time's forms are step.py's);
tuner/decide/search/__init__.py states the model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ...data.prediction import Band
from .observe import TAU_PRIOR_SD, TAU_REL_FLOOR, ConfigObs, FloatArray, Z

# -- acceptance per position ---------------------------------------------------------------------


def tau_of(u: float, v: float, k: int) -> float:
    """1 + sum_{i<=k} prod_{j<=i} a_j with logit(a_j) = u + v (j - 1)."""
    total, p = 1.0, 1.0
    for j in range(1, k + 1):
        x = u + v * (j - 1)
        a = 1.0 / (1.0 + math.exp(-x)) if x > -40 else 0.0
        p *= a
        total += p
    return total


def accept_sd(u: float, v: float, k: int) -> float:
    """Standard deviation of the tokens one verify step emits: with P_i the chance that the first i
    drafts are accepted, E[(X-1)^2] = sum (2i - 1) P_i."""
    probs, p = [], 1.0
    for i in range(1, k + 1):
        x = u + v * (i - 1)
        p *= 1.0 / (1.0 + math.exp(-x)) if x > -40 else 0.0
        probs.append(p)
    return steps_sd(probs)


def steps_sd(probs: Sequence[float]) -> float:
    """The same from P_1 .. P_k however they were obtained (a trend, or read off histograms)."""
    first = sum(probs)
    second = sum((2 * i - 1) * p for i, p in enumerate(probs, start=1))
    return math.sqrt(max(second - first * first, 0.0))


def _tau_grad(u: float, v: float, k: int) -> FloatArray:
    h = 1e-5
    return np.array(
        [
            (tau_of(u + h, v, k) - tau_of(u - h, v, k)) / (2 * h),
            (tau_of(u, v + h, k) - tau_of(u, v - h, k)) / (2 * h),
        ]
    )


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -40 else 0.0


@dataclass(frozen=True)
class AcceptanceFit:
    """Per-position acceptance of one (topk, draft tokens, algorithm) series.

    `measured` holds P_1 .. P_K read off the servers' acceptance histograms (the chance that the
    first i drafts are all accepted, K the deepest depth measured): within it nothing is
    extrapolated. Beyond it, and for every position when no histogram came, the trend
    logit(a_j) = u + v (j - 1) carries on.
    """

    u: float
    v: float
    cov: FloatArray
    depths: tuple[int, ...]
    measured: tuple[float, ...] = ()
    measured_rel_sd: float = TAU_REL_FLOOR

    def _probs(self, k: int, u: float | None = None, v: float | None = None) -> list[float]:
        """P_1 .. P_k: measured where the histograms reach, the trend after."""
        u = self.u if u is None else u
        v = self.v if v is None else v
        out, p = [], 1.0
        for i in range(1, k + 1):
            p = self.measured[i - 1] if i <= len(self.measured) else p * _sigmoid(u + v * (i - 1))
            out.append(p)
        return out

    def _tau(self, k: int, u: float | None = None, v: float | None = None) -> float:
        return 1.0 + sum(self._probs(k, u, v))

    def tau(self, k: int) -> tuple[float, float]:
        """Tokens per verify step at depth k and its standard deviation."""
        if k <= 0:
            return 1.0, 0.0
        mean = self._tau(k)
        floor = max(TAU_REL_FLOOR, self.measured_rel_sd if k <= len(self.measured) else 0.0) * mean
        if k <= len(self.measured):
            return mean, floor
        h = 1e-5
        g = np.array(
            [
                (self._tau(k, self.u + h, self.v) - self._tau(k, self.u - h, self.v)) / (2 * h),
                (self._tau(k, self.u, self.v + h) - self._tau(k, self.u, self.v - h)) / (2 * h),
            ]
        )
        var = float(g @ self.cov @ g)
        return mean, max(math.sqrt(max(var, 0.0)), floor)

    def relative_sd(self, k: int) -> float:
        """Relative standard deviation of tau(k) against the measured depths of the series at one
        level. Within the histograms' reach the pooled P_i are counts over every level; what a
        level's own prompts add to them is common to every depth there (and a level's gain carries
        it), so only the draw floor remains; beyond it the trend's own uncertainty."""
        if k <= 0:
            return 0.0
        mean, sd = self.tau(k)
        if self.measured and k <= len(self.measured):
            return TAU_REL_FLOOR
        return sd / mean

    def spread(self, k: int, tokens: float) -> float:
        """Relative standard deviation of one request's decode time: the steps needed for
        tokens - 1 tokens vary with the acceptance draws (a renewal count: sd / sqrt(tau (tokens - 1)))."""
        if k <= 0 or tokens <= 1:
            return 0.0
        probs = self._probs(k)
        return steps_sd(probs) / math.sqrt((1.0 + sum(probs)) * (tokens - 1.0))

    def acceptance(self, j: int) -> float:
        """a_j, the chance the j-th draft is accepted once the ones before it were."""
        if j <= len(self.measured):
            before = self.measured[j - 2] if j > 1 else 1.0
            return self.measured[j - 1] / before if before > 0 else 0.0
        return _sigmoid(self.u + self.v * (j - 1))


def histogram_positions(hist: Sequence[int], k: int) -> list[tuple[int, int, int]]:
    """(position j, verify steps that reached it, steps that accepted it) for j = 1 .. k, from a
    depth-k histogram (index n: steps that accepted exactly n drafts). A step reaches position j
    when it accepted at least j - 1 drafts. SGLang's histogram is only as long as the most drafts a
    step accepted plus one (schedule_batch.py `update_spec_acceptance_histogram` extends it on
    demand): the positions past its end were reached by steps that accepted none of them, so it is
    read padded with zeros to depth k."""
    h = list(hist[: k + 1]) + [0] * max(0, k + 1 - len(hist))
    at_least = [sum(h[n:]) for n in range(len(h) + 1)]
    return [(j, at_least[j - 1], at_least[j]) for j in range(1, min(k, len(h) - 1) + 1) if at_least[j - 1] > 0]


def fit_positions(positions: Sequence[tuple[int, int, int]], tau_rel_sd: float = TAU_REL_FLOOR) -> AcceptanceFit | None:
    """Acceptance from per-position counts (`histogram_positions`, pooled over a series' depths).

    P_i within the deepest measured position is the pooled product of the measured a_j; the trend
    beyond it is a weighted least-squares line in logit(a_j) (binomial weights, scaled up by the
    residuals when more than two positions were seen: requests differ, so counts overdisperse), with
    the prior on its slope that `fit_acceptance` uses.
    """
    reached: dict[int, int] = {}
    accepted: dict[int, int] = {}
    for j, n, passed in positions:
        reached[j] = reached.get(j, 0) + n
        accepted[j] = accepted.get(j, 0) + passed
    depth = 0
    while depth + 1 in reached and reached[depth + 1] > 0:
        depth += 1
    if depth == 0:
        return None
    measured, p = [], 1.0
    rows, ys, ws = [], [], []
    for j in range(1, depth + 1):
        p *= accepted[j] / reached[j]
        measured.append(p)
        smooth = (accepted[j] + 0.5) / (reached[j] + 1.0)  # keeps the logit finite at 0 or 1
        rows.append([1.0, float(j - 1)])
        ys.append(math.log(smooth / (1 - smooth)))
        ws.append((reached[j] + 1.0) * smooth * (1 - smooth))  # 1 / var of the logit
    x = np.array(rows)
    w = np.array(ws)
    y = np.array(ys)
    prior = np.diag([0.0, 1.0 / TAU_PRIOR_SD**2])
    h = x.T @ (x * w[:, None]) + prior
    theta = np.linalg.solve(h + 1e-9 * np.eye(2), x.T @ (w * y))
    cov = np.linalg.inv(h + 1e-9 * np.eye(2))
    dof = depth - 2
    if dof > 0:
        r = y - x @ theta
        cov = cov * max(1.0, float(r @ (w * r)) / dof)
    return AcceptanceFit(
        float(theta[0]),
        float(theta[1]),
        cov,
        tuple(range(1, depth + 1)),
        measured=tuple(measured),
        measured_rel_sd=max(tau_rel_sd, TAU_REL_FLOOR),
    )


def fit_acceptance(points: Sequence[tuple[int, float, float]]) -> AcceptanceFit | None:
    """Fit (u, v) to measured (depth, tokens per step, its sd) by Gauss-Newton with a prior on v.

    The prior (v ~ N(0, TAU_PRIOR_SD^2)) decides only what one measured depth cannot: whether
    acceptance falls or holds further out; with two or more depths the data outweigh it.
    """
    # tokens per step of 1 is a draft that accepts nothing: a fit (acceptance near 0), not no data; the
    # estimate of it can land an ulp below 1 (observe.py's ratio of ratios), so it is held at 1
    pts = [(k, max(t, 1.0), s) for k, t, s in points if k > 0 and t >= 1.0 - 1e-9]
    if not pts:
        return None
    # Start from a constant a matching the deepest point: tau = (1 - a^(k+1)) / (1 - a).
    k0, t0, _ = max(pts)
    lo, hi = 1e-4, 1 - 1e-6
    for _ in range(60):
        mid = (lo + hi) / 2
        if tau_of(math.log(mid / (1 - mid)), 0.0, k0) < t0:
            lo = mid
        else:
            hi = mid
    a0 = (lo + hi) / 2
    theta = np.array([math.log(a0 / (1 - a0)), 0.0])
    prior = np.diag([0.0, 1.0 / TAU_PRIOR_SD**2])
    for _ in range(50):
        r = np.array([(t - tau_of(theta[0], theta[1], k)) / s for k, t, s in pts])
        j = np.array([_tau_grad(theta[0], theta[1], k) / s for k, _, s in pts])
        h = j.T @ j + prior
        g = j.T @ r - prior @ theta
        step = np.linalg.solve(h + 1e-9 * np.eye(2), g)
        # damp: keep the logit slope and level in a sane range
        step = np.clip(step, -2.0, 2.0)
        theta = theta + step
        if float(np.max(np.abs(step))) < 1e-7:
            break
    j = np.array([_tau_grad(theta[0], theta[1], k) / s for k, _, s in pts])
    r = np.array([(t - tau_of(theta[0], theta[1], k)) / s for k, t, s in pts])
    cov = np.linalg.inv(j.T @ j + prior + 1e-9 * np.eye(2))
    dof = len(pts) - 2
    if dof > 0:
        cov = cov * max(1.0, float(r @ r) / dof)
    return AcceptanceFit(float(theta[0]), float(theta[1]), cov, tuple(sorted({k for k, _, _ in pts})))


# -- capacity ------------------------------------------------------------------------------------


def _line(points: Sequence[tuple[int, float]]) -> tuple[float, float, float] | None:
    """Least-squares line (intercept, slope, rms residual) through (k, value); None below 2 depths."""
    ks = sorted({k for k, _ in points})
    if len(ks) < 2:
        return None
    x = np.array([float(k) for k, _ in points])
    y = np.array([float(v) for _, v in points])
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    dof = max(len(points) - 2, 1)
    return float(intercept), float(slope), math.sqrt(float(resid @ resid) / dof)


@dataclass(frozen=True)
class CapacityFit:
    """KV pool tokens and running-request limit against depth, from the deploy records."""

    kv_points: tuple[tuple[int, int], ...]
    mrr_points: tuple[tuple[int, int], ...]

    def _band(self, points: Sequence[tuple[int, int]], k: int, *, rel_slack: float, abs_slack: float) -> Band | None:
        known = dict(points)
        if k in known:
            v = float(known[k])
            return Band(v, v, v)
        if not points:
            return None
        # Deeper speculation never frees memory: bounded by the nearest measured depths.
        shallower = [v for kk, v in points if kk < k]
        deeper = [v for kk, v in points if kk > k]
        upper = float(min(shallower)) if shallower else math.inf
        lower = float(max(deeper)) if deeper else -math.inf
        if lower > upper:  # measured pools that rise with depth (a flat pool's jitter): no order to lean on
            lower, upper = upper, lower
        line = _line(points)
        if line is None:
            mean = upper if math.isfinite(upper) else lower
            return Band(mean, lower, upper)
        b0, b1, rms = line
        mean = b0 + b1 * k
        slack = Z * rms + rel_slack * abs(mean) + abs_slack
        mean = min(max(mean, lower), upper)
        return Band(mean, max(mean - slack, lower), min(mean + slack, upper))

    def kv(self, k: int) -> Band | None:
        return self._band(self.kv_points, k, rel_slack=0.02, abs_slack=0.0)

    def max_running(self, k: int) -> Band | None:
        if k == 0:
            return self._band([p for p in self.mrr_points if p[0] == 0], k, rel_slack=0.0, abs_slack=0.5)
        return self._band([p for p in self.mrr_points if p[0] > 0], k, rel_slack=0.0, abs_slack=0.5)


def fit_capacity(obs: Sequence[ConfigObs], series: tuple[int, int | None, str] | None = None) -> CapacityFit:
    """The capacity lines of one series (`series`: SpecConfig.series) and the baseline without
    speculation: a draft tree and a chain of the same depth hold different memory (the draft
    tokens per request size the hybrid models' speculative state: SGLang's
    model_runner_kv_cache_mixin.py `handle_max_mamba_cache`), so one's pool is not the other's."""
    kv: dict[int, int] = {}
    mrr: dict[int, int] = {}
    for o in obs:
        if series is not None and o.k > 0 and o.config.series != series:
            continue
        if o.kv_tokens is not None:
            kv.setdefault(o.k, o.kv_tokens)
        if o.max_running is not None:
            mrr.setdefault(o.k, o.max_running)
    return CapacityFit(tuple(sorted(kv.items())), tuple(sorted(mrr.items())))


# -- from per-request rate to a level's aggregate --------------------------------------------------


@dataclass(frozen=True)
class FirstToken:
    """Time to first token when nobody queues, against the number of prompts that arrive together
    (one prefill batch): a + s x prompts, from the measured TTFTs of levels where every client ran."""

    a: float
    s: float

    def at(self, prompts: float) -> float:
        return max(self.a + self.s * prompts, 0.0)


def fit_first_token(points: Sequence[tuple[float, float]]) -> FirstToken:
    if not points:
        return FirstToken(0.0, 0.0)
    xs = sorted({b for b, _ in points})
    if len(xs) < 2:
        return FirstToken(float(np.median([t for _, t in points])), 0.0)
    slope, intercept = np.polyfit([b for b, _ in points], [t for _, t in points], 1)
    return FirstToken(float(intercept), max(float(slope), 0.0))


def expected_max(n: int) -> float:
    """E[max of n standard normals] (Blom's approximation); 0 for one."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def max_normal_var(n: int) -> float:
    """Variance of the maximum of n standard normals (1 for one; about 0.49 for 4, 0.3 for 16)."""
    if n <= 1:
        return 1.0
    return 1.0 / (1.0 + 0.74 * math.log(n))


def draw_noise(spread: float, concurrency: int, requests: int, running: int) -> float:
    """Relative sd of one measured level that the acceptance draws alone cause, without repeats to
    show it: a round lasts as long as its slowest request, so between the requests' own spread over
    the square root of their number and that of the rounds' maxima over the number of rounds."""
    if spread <= 0 or requests <= 0:
        return 0.0
    b = max(1, min(concurrency, requests, running))
    rounds = max(requests / b, 1.0)
    per_request = spread / math.sqrt(requests)
    per_round = spread * math.sqrt(max_normal_var(b) / rounds)
    return (per_request + per_round) / 2
