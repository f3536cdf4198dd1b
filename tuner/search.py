"""Model-guided search: which configuration to deploy next, and when to stop (pure).

Every configuration costs a server start, so `sweep --search model` deploys only those that could
still change an answer. After each measurement it fits, from what the tuner itself measured
(never from the emulator's profile), three trends that speculative decoding is known to follow,
predicts every configuration not yet measured at every level with an interval, and deploys the
one with the best chance to win a level beyond the noise (or to top the recommendation). It stops
when no configuration left has a fair chance to. docs/tuner.md "Model-guided search" states the
model and its assumptions; in short:

- Acceptance per position. A verify step of a depth-k chain emits 1 + sum_{i<=k} P_i tokens on
  average, where P_i is the chance that the first i drafts are all accepted, P_i = a_1 ... a_i.
  The per-position acceptance a_j is fitted as logit(a_j) = u + v (j - 1), so a draft that gets
  worse further out (v < 0) is not assumed away; with one measured depth v has a prior centred on 0.
  Where the server sends per-request acceptance histograms (verify steps that accepted exactly n
  drafts), P_i up to the deepest measured chain is read from them and the trend only carries on
  beyond it; else the fit is to the measured tokens per verify step, from SGLang's `spec_verify_ct`
  (completion tokens / verify steps, the first token, which comes from prefill, taken out).
- Step time. A decode step of depth k with b running requests, each verifying n tokens, takes
  t = t0 + t_k k + c b n (after a misfit, with three or more depths measured: + t_kk k^2), fitted
  by least squares on the measured tokens-per-step / per-request decode rate.
- Capacity. The KV pool and the running-request limit that the server printed at start-up
  (the deploy records) are close to linear in k; a depth whose pool (or limit) is predicted empty
  is not deployed.

Per level, the aggregate throughput follows from those through a closed-loop account of the
benchmark (C clients, the server running min(C, limit) at a time, over the span the client
measures: up to the moment the loop stops sending), scaled by how the measured
configurations at that level compared with the same account. Intervals combine the fits'
uncertainties, that calibration's spread and the measurement noise. A measurement outside the
interval predicted for it is a misfit: it is reported, later intervals are widened by the miss in
units of the interval, and the step-time model gains a k^2 term when the data support one.

A configuration is deployed while it has a fair chance to win a level beyond the noise, to top the
workload recommendation beyond its own margin, or, when a per-batch-size schedule follows the
sweep, to change the chain that schedule would pin at a level a tree wins.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from . import analysis, schedule_sweep
from .analysis import LevelChoice, PointStats
from .configs import SpecConfig
from .metrics import sum_histograms
from .prediction import Band, LevelPrediction, Prediction
from .records import SweepState
from .sweepspec import DEFAULT_LEN, WorkloadSpec

Z = 1.96  # the model's bands are 95% intervals, as the measured cells' are (tuner/stats.py LEVEL)
TAU_PRIOR_SD = 0.3  # prior sd of the per-position slope v of logit(acceptance) with one measured depth
CALIBRATION_SD_ONE = 0.03  # relative spread assumed for a level's calibration with one configuration there
TAU_REL_FLOOR = 0.005  # tokens per verify step are never known better than 0.5% (draw noise)
STEP_REL_FLOOR = 0.01  # nor a step time better than 1%
MIN_CHANCE = 0.1  # a configuration is deployed while it has at least this chance to win a level
MAX_WIDEN = 10.0  # the most a misfit widens the intervals by
REFIT_CHI2 = 4.0  # a misfit adds the k^2 term when it lowers chi^2 by this much (two standard errors)
FloatArray = npt.NDArray[np.float64]


# -- noise: one place, so a better statistic of the measurements slots in here --------------------


def win_margin(best: PointStats) -> float:
    """How much a configuration must beat the level's best by to win beyond the noise: the choice's
    own tolerance (tuner/analysis.py: the two 95% intervals apart), taken as if the newcomer were
    measured as precisely as the best."""
    return analysis.tolerance(best, best)


def point_sd(p: PointStats) -> float:
    """Standard deviation of a cell's throughput estimate, read off its 95% interval."""
    return p.interval.half_width / Z


def noise_rel_sd(points: Iterable[PointStats]) -> float:
    """Relative standard deviation of one measured cell: the median over the cells of their 95%
    intervals' half-width (tuner/stats.py) read as Z standard deviations, at least the choice's
    1% floor read the same way."""
    rel = sorted(point_sd(p) / p.mean for p in points if p.mean > 0)
    measured = rel[len(rel) // 2] if rel else 0.0
    return max(measured, analysis.MIN_REL_TOL / Z)


def request_lengths(workload: WorkloadSpec, state: SweepState) -> tuple[int, int]:
    """A request's prompt and output tokens: the workload's fixed lengths, or with a dataset what
    the levels measured (the server's prompt count, tokens per request); before any level, the
    synthetic default."""
    levels = [lv for lv in state.levels() if lv.metrics.requests_ok]
    prompt = workload.input_len
    if prompt is None:
        seen = [lv.metrics.prompt_tokens_mean for lv in levels if lv.metrics.prompt_tokens_mean]
        prompt = int(np.median(seen)) if seen else DEFAULT_LEN
    output = workload.output_len
    if output is None:
        seen = [lv.metrics.output_tokens / lv.metrics.requests_ok for lv in levels]
        output = int(np.median(seen)) if seen else DEFAULT_LEN
    return int(prompt), int(output)


# -- what was measured ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelObs:
    """One configuration at one level, over its repeats."""

    concurrency: int
    tok_s: float
    sem: float
    rate: float | None  # per-request decode rate, tok/s
    tau: float | None  # decode tokens per verify step (1 without speculation)
    tokens: float | None  # output tokens per request
    ttft_s: float | None


@dataclass(frozen=True)
class ConfigObs:
    """A deployed configuration: what the server said at start-up and what its levels measured."""

    config: SpecConfig
    verify_tokens: int
    kv_tokens: int | None
    max_running: int | None
    levels: Mapping[int, LevelObs]
    # Verify steps that accepted exactly n drafts, over every measured level (None unless each
    # level carried one): the acceptance at each draft position, not only their sum.
    hist: tuple[int, ...] | None = None

    @property
    def k(self) -> int:
        return self.config.spec_steps

    def tau(self) -> tuple[float, float] | None:
        """Tokens per verify step, the mean over the levels (acceptance does not depend on the
        concurrency), and its standard error from their spread."""
        vals = [lv.tau for lv in self.levels.values() if lv.tau is not None]
        if not vals:
            return None
        mean = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
        return mean, max(sd / math.sqrt(len(vals)), TAU_REL_FLOOR * mean)


def verify_width(cfg: SpecConfig, resolved: int | None = None) -> int:
    """Tokens each request verifies per step: the server's resolved draft tokens, else the flag,
    else steps + 1 (a chain)."""
    if cfg.spec_steps == 0:
        return 1
    if resolved:
        return int(resolved)
    if cfg.spec_draft_tokens:
        return int(cfg.spec_draft_tokens)
    return cfg.spec_steps + 1


def running_batch(concurrency: int, requests: int, max_running: float | None, kv: float | None, need: int) -> float:
    """Requests decoding together at a level: the clients, capped by the server's limit and by how
    many prompts + outputs its KV pool holds."""
    b = float(min(concurrency, requests))
    if max_running is not None and math.isfinite(max_running):
        b = min(b, max_running)
    if kv is not None and need > 0 and math.isfinite(kv):
        b = min(b, math.floor(kv / need))
    return max(b, 0.0)


def queued(concurrency: int, requests: int, batch: float) -> bool:
    """Whether requests wait for a slot at this level (fewer run than the clients send)."""
    return batch < min(concurrency, requests)


def observe(state: SweepState, workload: WorkloadSpec) -> list[ConfigObs]:
    """The measured configurations (successful deploy, at least one measured level)."""
    stats = analysis.aggregate(state.levels())
    by_cfg: dict[str, dict[int, PointStats]] = {}
    for (cid, c), p in stats.items():
        by_cfg.setdefault(cid, {})[c] = p
    out = []
    for cid, pts in by_cfg.items():
        dep = state.deploys.get(cid)
        cfg = state.configs[cid]
        if cfg.is_schedule:
            continue  # an adaptive server changes depth with the batch: not a point of these trends
        levels = {}
        hist = sum_histograms([lv.metrics.accept_hist for p in pts.values() for lv in p.levels])
        for c, p in pts.items():
            ok = sum(lv.metrics.requests_ok for lv in p.levels)
            toks = sum(lv.metrics.output_tokens for lv in p.levels)
            per_req = toks / ok if ok else None
            acc = p.accept_mean
            tau: float | None
            if cfg.spec_steps == 0:
                tau = 1.0
            elif acc is not None and per_req and per_req > 1:
                tau = acc * (per_req - 1.0) / per_req  # the first token comes from prefill
            else:
                tau = None
            ttft = p.metric_mean("ttft_ms_p50")
            levels[c] = LevelObs(
                concurrency=c,
                tok_s=p.mean,
                sem=p.sem,
                rate=p.per_request_mean,
                tau=tau,
                tokens=per_req,
                ttft_s=None if ttft is None else ttft / 1000.0,
            )
        out.append(
            ConfigObs(
                config=cfg,
                verify_tokens=verify_width(cfg, dep.resolved_draft_tokens if dep else None),
                kv_tokens=dep.max_total_num_tokens if dep else None,
                max_running=dep.max_running_requests if dep else None,
                levels=levels,
                hist=None if hist is None or cfg.spec_steps == 0 else tuple(hist),
            )
        )
    out.sort(key=lambda o: o.config.order_key)
    return out


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
    when it accepted at least j - 1 drafts."""
    h = list(hist[: k + 1])
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
    pts = [(k, t, s) for k, t, s in points if k > 0 and t > 1.0]
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


# -- step time ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepRow:
    k: int
    b: float
    n: int
    queued: bool  # requests waited for a slot at this level
    t: float  # seconds per verify step, as the decode rate shows it


@dataclass(frozen=True)
class StepFit:
    """t(k, b, n) = (t0 + t_k k [+ t_kk k^2] + c b n) x (1 + q while requests queue).

    q is the share of decode time lost to the prefills of requests admitted while others decode:
    when requests queue, every request that ends lets a waiting one in, whose prefill pauses the
    running batch. It is fitted as one number (by scanning it), the rest by least squares.
    """

    beta: FloatArray
    cov: FloatArray
    quadratic: bool
    queue_share: float
    rows: int
    chi2: float

    @staticmethod
    def features(k: float, b: float, n: float, quadratic: bool) -> FloatArray:
        f = [1.0, float(k), float(b) * float(n)]
        if quadratic:
            f.insert(2, float(k) ** 2)
        return np.array(f)

    def t(self, k: int, b: float, n: int, queued: bool = False) -> tuple[float, float]:
        """Seconds per step and its standard deviation."""
        x = self.features(k, b, n, self.quadratic)
        mean = float(x @ self.beta)
        sd = math.sqrt(max(float(x @ self.cov @ x), 0.0))
        f = 1.0 + self.queue_share if queued else 1.0
        return mean * f, max(sd, STEP_REL_FLOOR * abs(mean)) * f

    @property
    def form(self) -> str:
        fixed = "t0 + t_k k + t_kk k^2" if self.quadratic else "t0 + t_k k"
        return f"({fixed} + c b n) x (1 + q queued)"

    def coefficients(self) -> dict[str, float]:
        names = ["t0", "t_k", "t_kk", "c"] if self.quadratic else ["t0", "t_k", "c"]
        out = {name: float(v) for name, v in zip(names, self.beta, strict=True)}
        out["q"] = self.queue_share
        return out


QUEUE_SHARES = tuple(i / 100 for i in range(0, 51))


def _solve_step(
    rows: Sequence[StepRow], quadratic: bool, noise_rel: float, share: float
) -> tuple[FloatArray, FloatArray, float]:
    """Weighted least squares of the step time at one queue share: (beta, covariance, chi^2)."""
    depths = sorted({r.k for r in rows})
    x = np.array([StepFit.features(r.k, r.b, r.n, quadratic) for r in rows])
    t = np.array([r.t / (1.0 + share) if r.queued else r.t for r in rows])
    sigma = max(noise_rel, STEP_REL_FLOOR)
    w = 1.0 / (sigma * t)
    a = x * w[:, None]
    y = t * w
    p = x.shape[1]
    scale = float(np.median(t))
    prior_rows: list[FloatArray] = []
    prior_y: list[float] = []
    for col in range(p):
        nonzero = np.abs(x[:, col])[np.abs(x[:, col]) > 0]
        typical = float(np.median(nonzero)) if nonzero.size else 1.0
        e = np.zeros(p)
        e[col] = typical / (10.0 * scale)
        prior_rows.append(e)
        prior_y.append(0.0)
    if len(depths) == 1:
        k1 = depths[0]
        # the fixed cost at k1: the intercept of t against b n at that depth
        bn = np.array([r.b * r.n for r in rows])
        fixed = float(np.polyfit(bn, t, 1)[1]) if len(set(bn.tolist())) > 1 else float(np.mean(t)) / 2
        fixed = max(fixed, 1e-6)
        m = fixed / (2 * k1)
        sd = fixed / (2 * math.sqrt(3) * k1)
        e = np.zeros(p)
        e[1] = 1.0 / sd
        prior_rows.append(e)
        prior_y.append(m / sd)
    aa = np.vstack([a, np.array(prior_rows)])
    yy = np.concatenate([y, np.array(prior_y)])
    solution = np.linalg.lstsq(aa, yy, rcond=None)
    beta: FloatArray = np.asarray(solution[0], dtype=np.float64)
    cov: FloatArray = np.asarray(np.linalg.inv(aa.T @ aa), dtype=np.float64)
    resid = a @ beta - y
    return beta, cov, float(resid @ resid)


def fit_step_time(rows: Sequence[StepRow], *, quadratic: bool, noise_rel: float) -> StepFit | None:
    """Least squares on relative residuals, with priors only where the data say nothing.

    With one measured depth, t0 and t_k are not separable: the prior puts t_k uniformly between 0
    and the whole fixed cost over k (both costs are non-negative). Every coefficient also has a very
    weak prior (ten times its typical size), so a direction the data never explored keeps a wide
    interval instead of a confident zero.
    """
    if not rows:
        return None
    if quadratic and len({r.k for r in rows}) < 3:
        quadratic = False
    shares = QUEUE_SHARES if any(r.queued for r in rows) and any(not r.queued for r in rows) else (0.0,)
    best: tuple[float, float, FloatArray, FloatArray] | None = None
    for share in shares:
        beta, cov, chi2 = _solve_step(rows, quadratic, noise_rel, share)
        if best is None or chi2 < best[0]:
            best = (chi2, share, beta, cov)
    assert best is not None
    chi2, share, beta, cov = best
    dof = len(rows) - len(beta) - (1 if len(shares) > 1 else 0)
    if dof > 0:
        cov = cov * max(1.0, chi2 / dof)
    return StepFit(beta=beta, cov=cov, quadratic=quadratic, queue_share=share, rows=len(rows), chi2=chi2)


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
        line = _line(points)
        if line is None:
            mean = upper if math.isfinite(upper) else lower
            return Band(mean, lower, upper)
        b0, b1, rms = line
        mean = b0 + b1 * k
        slack = Z * rms + rel_slack * abs(mean) + abs_slack
        return Band(mean, max(mean - slack, lower), min(mean + slack, upper))

    def kv(self, k: int) -> Band | None:
        return self._band(self.kv_points, k, rel_slack=0.02, abs_slack=0.0)

    def max_running(self, k: int) -> Band | None:
        if k == 0:
            return self._band([p for p in self.mrr_points if p[0] == 0], k, rel_slack=0.0, abs_slack=0.5)
        return self._band([p for p in self.mrr_points if p[0] > 0], k, rel_slack=0.0, abs_slack=0.5)


def fit_capacity(obs: Sequence[ConfigObs]) -> CapacityFit:
    kv: dict[int, int] = {}
    mrr: dict[int, int] = {}
    for o in obs:
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


def closed_loop_tok_s(
    concurrency: int,
    requests: int,
    tokens: float,
    running: int,
    first: FirstToken,
    rate: float,
    spread: float = 0.0,
) -> float:
    """Aggregate tok/s of a closed-loop level (C clients, each sending its next request when its last
    one ends) on a server that runs `running` requests at a time, each decoding at `rate` tok/s, as
    the client measures it: over the level's measured span, from the first send to the moment the
    loop stopped sending (tuner/metrics.py `level_windows`: the completion after which fewer than C
    requests remain, the (n - C + 1)-th of n), so the drain at the end, when fewer than C run, is
    not in it.

    With fixed-length outputs the requests go through in rounds: those admitted together decode
    together and end together. A round starts with the prefill of its prompts (`first`); when
    requests queue, only the first round also waits for the requests to reach the server, later
    ones find them waiting (the per-prompt part of `first`). The span holds the rounds up to the one
    in which the (n - C + 1)-th request completes. A round lasts as long as its slowest request:
    with `spread` the relative standard deviation of one request's decode time, about
    1 + spread x E[max of b normals] times the average.
    """
    b = max(1, min(concurrency, requests, running))
    rounds = math.ceil(max(requests - concurrency + 1, 1) / b)
    decode = max(tokens - 1.0, 0.0) / max(rate, 1e-9) * (1.0 + spread * expected_max(b))
    if b >= min(concurrency, requests):
        wall = rounds * (first.at(b) + decode)
    else:
        wall = first.at(b) + decode + (rounds - 1) * (first.s * b + decode)
    counted = min(rounds * b, requests)
    return counted * tokens / wall if wall > 0 else 0.0


@dataclass(frozen=True)
class LevelShape:
    """What a level's aggregate rests on besides the per-request rate."""

    concurrency: int
    requests: int
    tokens: float
    gain: float  # measured / closed-loop account, over the configurations measured here
    gain_sd: float  # relative
    noise: float  # relative sd of one measurement here


# -- misfits -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Misfit:
    """A measurement outside the interval predicted for it before it was made."""

    config: SpecConfig
    what: str  # "C=4 aggregate tok/s", "max_running_requests", ...
    concurrency: int | None
    predicted: Band
    measured: float

    @property
    def rel_error(self) -> float:
        return (self.measured - self.predicted.mean) / self.predicted.mean if self.predicted.mean else 0.0

    @property
    def miss_ratio(self) -> float:
        """How far off the measurement was, in units of the interval's half-width on its side:
        the factor by which intervals must widen to have held it."""
        b = self.predicted
        half = (b.hi - b.mean) if self.measured >= b.mean else (b.mean - b.lo)
        return min(abs(self.measured - b.mean) / half, MAX_WIDEN) if half > 0 else MAX_WIDEN

    @property
    def throughput(self) -> bool:
        return self.concurrency is not None


def find_misfits(state: SweepState) -> list[Misfit]:
    """Every prediction the measurements that followed it contradict."""
    stats = analysis.aggregate(state.levels())
    out: list[Misfit] = []
    for cid, rec in state.predictions.items():
        pred = rec.prediction
        for lp in pred.levels:
            p = stats.get((cid, lp.concurrency))
            if p is not None and p.n and not lp.output_tok_s.contains(p.mean):
                out.append(
                    Misfit(rec.config, f"C={lp.concurrency} aggregate tok/s", lp.concurrency, lp.output_tok_s, p.mean)
                )
        dep = state.deploys.get(cid)
        if dep is None:
            continue
        for name, band, got in (
            ("max_running_requests", pred.max_running_requests, dep.max_running_requests),
            ("max_total_num_tokens", pred.max_total_num_tokens, dep.max_total_num_tokens),
        ):
            if band is not None and got is not None and not band.contains(float(got)):
                out.append(Misfit(rec.config, name, None, band, float(got)))
    return out


# -- the model -----------------------------------------------------------------------------------


def _series(cfg: SpecConfig) -> tuple[int, int | None, str]:
    return cfg.series


@dataclass
class Model:
    """The fits of one moment of the sweep, and what they predict."""

    workload: WorkloadSpec
    obs: list[ConfigObs]
    acceptance: dict[tuple[int, int | None, str], AcceptanceFit]
    step: StepFit | None
    capacity: CapacityFit
    first: FirstToken
    straggler: float
    shapes: dict[int, LevelShape]
    widen: float  # every interval's half-width is scaled by this after misfits (1: none)
    basis: tuple[str, ...]
    notes: list[str] = field(default_factory=list)

    kv_need: int = 0  # KV tokens a running request holds: its prompt and its whole output

    def describe(self) -> str:
        """The fit in one line, for the progress log."""
        parts = [f"fitted on {', '.join(self.basis) or 'nothing'}"]
        for (topk, draft, _alg), fit in self.acceptance.items():
            accept = ", ".join(f"{fit.acceptance(j):.2f}" for j in (1, 2, 4, 8))
            label = "" if topk == 1 and draft is None else f" (topk {topk}, draft {draft or 'auto'})"
            if fit.measured:
                label += f", read from histograms up to position {len(fit.measured)}"
            parts.append(f"acceptance at positions 1,2,4,8{label}: {accept}")
        if self.step is not None:
            co = self.step.coefficients()
            text = f"step {co['t0'] * 1000:.2f} ms + {co['t_k'] * 1000:.3f} ms x k"
            if "t_kk" in co:
                text += f" + {co['t_kk'] * 1000:.4f} ms x k^2"
            text += f" + {co['c'] * 1000:.4f} ms x batch x verified tokens"
            if co["q"]:
                text += f", +{co['q']:.0%} while requests queue"
            parts.append(text)
        if self.widen > 1:
            parts.append(f"intervals widened x{self.widen:.2f} after misfits")
        return "; ".join(parts)

    def predictable(self, cfg: SpecConfig) -> str | None:
        """Why this configuration cannot be predicted yet (None: it can)."""
        if cfg.spec_steps == 0:
            return "the baseline without speculation is measured, not predicted"
        if self.step is None:
            return "no depth measured yet"
        if _series(cfg) not in self.acceptance:
            return "no depth of its (topk, draft tokens) series measured yet"
        return None

    def predict(self, cfg: SpecConfig) -> Prediction | None:
        """Every level of `cfg`, with intervals; None while it cannot be predicted."""
        if self.predictable(cfg) is not None:
            return None
        assert self.step is not None
        k = cfg.spec_steps
        kv = self.capacity.kv(k)
        mrr = self.capacity.max_running(k)

        base = Prediction(
            max_total_num_tokens=kv,
            max_running_requests=mrr,
            basis=self.basis,
            step_model=self.step.form,
            widened=self.widen,
        )
        if kv is not None and kv.hi <= 0:
            why = f"KV pool predicted empty ({kv.mean:,.0f} tokens, at most {kv.hi:,.0f})"
            return dataclasses.replace(base, can_run=False, reason=why)
        if mrr is not None and mrr.hi < 1:
            why = f"no running slot predicted (max_running_requests {mrr.mean:.1f}, at most {mrr.hi:.1f})"
            return dataclasses.replace(base, can_run=False, reason=why)
        fit = self.acceptance[_series(cfg)]
        tau, tau_sd = fit.tau(k)
        levels = []
        for c in self.workload.concurrency:
            shape = self.shapes.get(c)
            if shape is not None:
                spread = fit.spread(k, shape.tokens) * self.straggler
                levels.append(self._level(k, verify_width(cfg), tau, tau_sd, spread, kv, mrr, shape))
        accept = Band(tau, max(tau - Z * tau_sd, 1.0), tau + Z * tau_sd)
        return dataclasses.replace(base, levels=tuple(levels), accept_length=accept)

    def _widened(self, mean: float, lo: float, hi: float) -> Band:
        """The interval, scaled about its mean by the widening factor earlier misfits called for."""
        f = self.widen
        return Band(mean, max(mean - f * (mean - lo), 0.0), mean + f * (hi - mean))

    def _level(
        self,
        k: int,
        n: int,
        tau: float,
        tau_sd: float,
        spread: float,
        kv: Band | None,
        mrr: Band | None,
        shape: LevelShape,
    ) -> LevelPrediction:
        assert self.step is not None
        step = self.step
        c = shape.concurrency

        def batch(m: float | None, pool: float | None) -> int:
            return max(int(running_batch(c, shape.requests, m, pool, self.kv_need)), 1)

        def low(x: float) -> float:
            return x if math.isfinite(x) else 1.0  # an unbounded lower limit: as bad as one slot

        b_mean = batch(None if mrr is None else mrr.mean, None if kv is None else kv.mean)
        b_lo = batch(None if mrr is None else low(mrr.lo), None if kv is None else low(kv.lo))
        b_hi = batch(None if mrr is None else mrr.hi, None if kv is None else kv.hi)

        def rate(b: int) -> float:
            return tau / max(step.t(k, b, n, queued(c, shape.requests, b))[0], 1e-9)

        def agg(b: int, scale: float = 1.0) -> float:
            account = closed_loop_tok_s(c, shape.requests, shape.tokens, b, self.first, rate(b) * scale, spread)
            return shape.gain * account

        t_mean, t_sd = step.t(k, b_mean, n, queued(c, shape.requests, b_mean))
        rel_rate = math.sqrt((tau_sd / tau) ** 2 + (t_sd / max(t_mean, 1e-9)) ** 2)
        mean = agg(b_mean)
        elasticity = math.log(max(agg(b_mean, 1.01), 1e-9) / max(mean, 1e-9)) / math.log(1.01) if mean > 0 else 1.0
        noise = max(shape.noise, draw_noise(spread / max(self.straggler, 1e-9), c, shape.requests, b_mean))
        rel = math.sqrt((elasticity * rel_rate) ** 2 + shape.gain_sd**2 + noise**2)
        ends = [agg(b_lo), agg(b_hi), mean]
        r_mean = rate(b_mean)
        r_rel = math.sqrt(rel_rate**2 + noise**2)
        rates = [rate(b_lo), rate(b_hi), r_mean]
        return LevelPrediction(
            concurrency=c,
            output_tok_s=self._widened(mean, min(ends) * (1 - Z * rel), max(ends) * (1 + Z * rel)),
            per_request_tok_s=self._widened(r_mean, min(rates) * (1 - Z * r_rel), max(rates) * (1 + Z * r_rel)),
            running=Band(b_mean, min(b_lo, b_hi), max(b_lo, b_hi)),
        )


STRAGGLER_FACTORS = tuple(i / 20 for i in range(0, 31))


@dataclass(frozen=True)
class Calibration:
    """How the measured aggregates compare with the closed-loop account of the fitted decode rates:
    the straggler factor (scaling the slowest-request term, scanned to make the comparison most
    alike across configurations) and, per level, what remains."""

    straggler: float
    shapes: dict[int, LevelShape]


def _calibrate(
    obs: Sequence[ConfigObs],
    workload: WorkloadSpec,
    step: StepFit | None,
    first: FirstToken,
    acceptance: Mapping[tuple[int, int | None, str], AcceptanceFit],
    stats: Mapping[tuple[str, int], PointStats],
    need: int,
    output_len: int,
) -> Calibration:
    tokens_at: dict[int, float] = {}
    # per level, per measured speculative configuration: (measured, account at each straggler factor)
    rows: dict[int, list[tuple[float, list[float]]]] = {}
    for c in workload.concurrency:
        requests = workload.requests_for(c)
        here = [o for o in obs if c in o.levels]
        tokens_seen = [t for o in here if (t := o.levels[c].tokens)]
        tokens = tokens_at[c] = float(np.median(tokens_seen)) if tokens_seen else float(output_len)
        rows[c] = []
        if step is None:
            continue
        for o in here:
            lv = o.levels[c]
            if o.k == 0 or lv.tau is None:
                continue
            b_obs = max(int(running_batch(c, requests, o.max_running, o.kv_tokens, need)), 1)
            # the step-time fit at this configuration's measured acceptance
            t_fit = step.t(o.k, b_obs, o.verify_tokens, queued(c, requests, b_obs))[0]
            fit = acceptance.get(_series(o.config))
            spread = fit.spread(o.k, tokens) if fit is not None else 0.0
            accounts = [
                closed_loop_tok_s(c, requests, tokens, b_obs, first, lv.tau / max(t_fit, 1e-9), spread * f)
                for f in STRAGGLER_FACTORS
            ]
            rows[c].append((lv.tok_s, accounts))

    def scatter(i: int) -> float:
        total = 0.0
        for pts in rows.values():
            logs = [math.log(m / acc[i]) for m, acc in pts if acc[i] > 0 and m > 0]
            if len(logs) > 1:
                mu = sum(logs) / len(logs)
                total += sum((x - mu) ** 2 for x in logs)
        return total

    best = min(range(len(STRAGGLER_FACTORS)), key=lambda i: (scatter(i), abs(STRAGGLER_FACTORS[i] - 1.0)))
    shapes: dict[int, LevelShape] = {}
    for c in workload.concurrency:
        gains = [m / acc[best] for m, acc in rows[c] if acc[best] > 0]
        if gains:
            gain = float(np.mean(gains))
            gain_sd = float(np.std(gains, ddof=1)) / gain if len(gains) > 1 else CALIBRATION_SD_ONE
        else:
            gain, gain_sd = 1.0, 0.1
        points = [p for (cid, cc), p in stats.items() if cc == c]
        shapes[c] = LevelShape(c, workload.requests_for(c), tokens_at[c], gain, gain_sd, noise_rel_sd(points))
    return Calibration(STRAGGLER_FACTORS[best], shapes)


def fit_model(state: SweepState, workload: WorkloadSpec) -> Model:
    """Fit every trend to what the sweep measured so far."""
    obs = observe(state, workload)
    stats = analysis.aggregate(state.levels())
    misfits = find_misfits(state)
    widen = max([1.0] + [m.miss_ratio for m in misfits if m.throughput])
    prompt_len, output_len = request_lengths(workload, state)
    need = prompt_len + output_len  # KV tokens a running request holds: its prompt and whole output
    # acceptance per series
    series: dict[tuple[int, int | None, str], list[tuple[int, float, float]]] = {}
    for o in obs:
        if o.k == 0:
            continue
        t = o.tau()
        if t is not None:
            series.setdefault(_series(o.config), []).append((o.k, t[0], t[1]))
    acceptance = {key: fit for key, pts in series.items() if (fit := fit_acceptance(pts)) is not None}
    # Where the servers sent acceptance histograms, a chain's per-position acceptance is read, not
    # inferred from the tokens per step (a tree's positions depend on its shape, which changes with
    # depth at a fixed draft-token budget).
    chains: dict[tuple[int, int | None, str], list[ConfigObs]] = {}
    for o in obs:
        if o.k > 0 and o.hist is not None and o.config.spec_topk == 1 and o.verify_tokens == o.k + 1:
            chains.setdefault(_series(o.config), []).append(o)
    for key, members in chains.items():
        positions = [p for o in members for p in histogram_positions(o.hist or (), o.k)]
        rel = sorted(t[1] / t[0] for o in members if (t := o.tau()) is not None and t[0] > 0)
        fit = fit_positions(positions, rel[len(rel) // 2] if rel else TAU_REL_FLOOR)
        if fit is not None:
            acceptance[key] = fit
    # step time, shared by every series (the verify width carries the difference)
    rows = []
    for o in obs:
        if o.k == 0:
            continue
        for c, lv in o.levels.items():
            if lv.rate and lv.tau and lv.rate > 0:
                req = workload.requests_for(c)
                b = max(running_batch(c, req, o.max_running, o.kv_tokens, need), 1.0)
                rows.append(StepRow(o.k, b, o.verify_tokens, queued(c, req, b), lv.tau / lv.rate))
    noise = noise_rel_sd(stats.values())
    step = fit_step_time(rows, quadratic=False, noise_rel=noise)
    if misfits and step is not None:
        # Refit: the measurements contradicted the model; let the fixed cost bend with depth when
        # three or more depths are measured and the bend explains the data clearly better.
        bent = fit_step_time(rows, quadratic=True, noise_rel=noise)
        if bent is not None and bent.quadratic and step.chi2 - bent.chi2 > REFIT_CHI2:
            step = bent
    first = fit_first_token(
        [
            (float(min(c, workload.requests_for(c))), lv.ttft_s)
            for o in obs
            for c, lv in o.levels.items()
            if lv.ttft_s is not None
            and running_batch(c, workload.requests_for(c), o.max_running, o.kv_tokens, need)
            >= min(c, workload.requests_for(c))
        ]
    )
    calibration = _calibrate(obs, workload, step, first, acceptance, stats, need, output_len)
    return Model(
        workload=workload,
        obs=obs,
        acceptance=acceptance,
        step=step,
        capacity=fit_capacity(obs),
        first=first,
        straggler=calibration.straggler,
        shapes=calibration.shapes,
        widen=widen,
        basis=tuple(o.config.config_id for o in obs),
        kv_need=need,
    )


# -- deciding ------------------------------------------------------------------------------------


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _band_sd(band: Band) -> float:
    return max((band.hi - band.lo) / (2 * Z), 1e-9)


@dataclass(frozen=True)
class Threat:
    """How likely a configuration is to win one level beyond the noise."""

    concurrency: int
    threshold: float  # what it must exceed
    chance: float


def level_threat(lp: LevelPrediction, choice: LevelChoice | None) -> Threat:
    """The chance this configuration beats the best measured at the level by more than the choice's
    tolerance. One that could at most tie is not worth a deployment: among equals the choice takes
    the cheapest measured one, and the throughput is the same."""
    if choice is None:
        return Threat(lp.concurrency, 0.0, 1.0)
    return beat_chance(lp, choice.best)


def beat_chance(lp: LevelPrediction, best: PointStats) -> Threat:
    """The chance the predicted level beats a measured one by more than the choice's tolerance."""
    threshold = best.mean + win_margin(best)
    sd = math.sqrt(_band_sd(lp.output_tok_s) ** 2 + point_sd(best) ** 2)
    return Threat(lp.concurrency, threshold, 1.0 - _phi((threshold - lp.output_tok_s.mean) / sd))


def mix_chance(pred: Prediction, choices: Mapping[int, LevelChoice], target: Sequence[int], top: TopScore) -> float:
    """The chance this configuration tops the workload recommendation beyond the noise (each
    target level's throughput relative to the level's best, averaged), its levels' errors taken
    as one. The margin is the recommendation's own (tuner/analysis.py `recommend`: two scores whose
    intervals overlap are tied), taken as if the newcomer were measured as precisely as the top:
    one that could at most tie would only hand the choice to the tie-break."""
    rel, sds = [], []
    for c in target:
        lp = pred.level(c)
        ch = choices.get(c)
        if lp is None or ch is None or ch.best.mean <= 0:
            return 1.0
        rel.append(min(1.0, lp.output_tok_s.mean / ch.best.mean))
        sds.append(_band_sd(lp.output_tok_s) / ch.best.mean)
    score, sd = sum(rel) / len(rel), max(sum(sds) / len(sds), 1e-9)
    return 1.0 - _phi((top.score + top.margin - score) / sd)


@dataclass(frozen=True)
class TopScore:
    """The best workload score measured so far and what a newcomer must beat it by."""

    score: float
    margin: float


def top_score(rec: analysis.Recommendation | None) -> TopScore | None:
    """The highest score of the recommendation (not the tie-break's pick) and its margin: the sum
    of two of its interval's half-widths, at least the choice's 1% floor."""
    if rec is None or not rec.scores:
        return None
    cid = max(rec.scores, key=lambda k: rec.scores[k])
    score = rec.scores[cid]
    ci = rec.score_ci.get(cid)
    half = (ci[1] - ci[0]) / 2 if ci and len(ci) == 2 else 0.0
    return TopScore(score, max(2 * half, analysis.MIN_REL_TOL * score))


@dataclass(frozen=True)
class Decision:
    """What to do next: deploy a configuration (with what the model predicts for it, when it
    predicts it), wait for configurations in flight, or stop. `skips` are configurations decided
    against now, each with the prediction that justified it and why."""

    deploy: SpecConfig | None = None
    prediction: Prediction | None = None
    why: str = ""
    skips: tuple[tuple[SpecConfig, Prediction, str], ...] = ()
    wait: bool = False
    misfits: tuple[Misfit, ...] = ()
    model: str = ""  # the fit in a line, for the log

    @property
    def done(self) -> bool:
        return self.deploy is None and not self.wait


def anchors(configs: Sequence[SpecConfig]) -> list[SpecConfig]:
    """The depths of a series that are measured before any of it is predicted: at a third and two
    thirds of its range (one, the middle, for three depths or fewer). Two depths pin the trends in
    depth (acceptance further out, the cost of a draft step, the capacity lines); spread out, they
    leave the least to extrapolate on either side."""
    ordered = sorted(configs, key=lambda c: c.spec_steps)
    n = len(ordered)
    if n <= 3:
        return [ordered[(n - 1) // 2]] if ordered else []
    picks = [ordered[round((n - 1) / 3)], ordered[round(2 * (n - 1) / 3)]]
    return list(dict.fromkeys(picks))


def _closest(pred: Prediction, threats: Sequence[Threat]) -> str:
    """The level where the configuration came nearest to winning, in words."""

    def nearness(t: Threat) -> tuple[float, float]:
        lp = pred.level(t.concurrency)
        return (t.chance, lp.output_tok_s.mean / t.threshold if lp is not None and t.threshold > 0 else 0.0)

    th = max(threats, key=nearness, default=None)
    lp = None if th is None else pred.level(th.concurrency)
    if th is None or lp is None:
        return "no level could change"
    return (
        f"closest at C={th.concurrency}: predicted {lp.output_tok_s.mean:,.0f} tok/s "
        f"({lp.output_tok_s.lo:,.0f}-{lp.output_tok_s.hi:,.0f}), {th.threshold:,.0f} needed to win, "
        f"{th.chance:.0%} chance"
    )


def decide(
    state: SweepState,
    configs: Sequence[SpecConfig],
    workload: WorkloadSpec,
    *,
    exclude: Iterable[str] = (),
    target: Sequence[int] | None = None,
    measure_all: bool = False,
    schedule_algorithm: str | None = None,
) -> Decision:
    """The next step of a model-guided sweep over `configs` (the plan's feasible configurations).

    `exclude`: configurations in flight or already handled in this run. `target`: the levels of
    the workload recommendation. With `measure_all` (--no-early-stop) nothing is skipped; the
    model only orders the deployments. `schedule_algorithm`: the sweep builds a per-batch-size
    schedule afterwards (tuner/schedule_sweep.py) for this algorithm; the schedule is made of the
    levels' winners, so winning a level is what changes it, except where a tree wins: the schedule
    pins the best chain there, and a chain that could beat that one is deployed too.
    """
    excluded = set(exclude)
    done = set(state.deploys) | set(state.failed) | set(state.skipped)
    done |= {m.level.config_id for m in state.measured}
    open_ = [c for c in configs if c.config_id not in done and c.config_id not in excluded]
    in_flight = [c for c in configs if c.config_id in excluded and c.config_id not in done]
    misfits = tuple(find_misfits(state))
    if not open_:
        return Decision(wait=bool(in_flight), why="every configuration is measured or decided", misfits=misfits)

    # Measured, not predicted: the baseline, then the anchor depths of every series.
    for cfg in open_:
        if cfg.spec_steps == 0:
            return Decision(
                deploy=cfg, why="the baseline without speculation is measured, not predicted", misfits=misfits
            )
    flying = {c.config_id for c in in_flight}
    measured = {m.level.config_id for m in state.measured if m.level.measured}
    settling: set[tuple[int, int | None, str]] = set()  # series whose anchors are still in flight
    for key in dict.fromkeys(c.series for c in configs if c.spec_steps > 0):
        members = [c for c in configs if c.series == key and c.spec_steps > 0]
        wanted = anchors(members)
        have = [c for c in members if c.config_id in measured]
        pending = [c for c in members if c.config_id in flying]
        if len(have) + len(pending) >= len(wanted):
            if len(have) < len(wanted):
                settling.add(key)
            continue
        candidates = [c for c in members if c in open_ and _capacity_failure_below(c, state) is None]
        if not candidates:
            continue
        # the anchors not yet tried; when one failed, the open depth nearest to it
        missing = [a for a in wanted if a.config_id not in measured]
        pick = min(candidates, key=lambda c: (min(abs(c.spec_steps - a.spec_steps) for a in missing), c.spec_steps))
        why = (
            "an anchor depth of its series, measured before predicting"
            if pick in wanted
            else "the depth nearest to an anchor that could not be measured, measured before predicting"
        )
        return Decision(deploy=pick, why=why, misfits=misfits)

    model = fit_model(state, workload)
    if model.step is None:
        return Decision(wait=bool(in_flight), why="waiting for a first measured depth", misfits=misfits)
    stats = analysis.aggregate(state.levels())
    # With --slo a configuration that misses it does not compete (tuner/analysis.py), so the bar
    # to beat at a level is the best that meets it; at a level where none measured does, every
    # configuration left could be the first to. The latencies an SLO limits are not predicted:
    # nothing is skipped for them.
    analysis.apply_slo(stats, workload.slo)
    chain_best = schedule_chains(stats, state, schedule_algorithm)
    levels = list(workload.concurrency)
    choices = analysis.by_concurrency(stats, levels)
    tlevels = list(target) if target else levels
    top = top_score(analysis.recommend(stats, levels, tlevels)) if len(tlevels) > 1 else None

    scored: list[tuple[float, SpecConfig, Prediction, list[Threat]]] = []
    skips: list[tuple[SpecConfig, Prediction, str]] = []
    unknown: list[SpecConfig] = []
    for cfg in open_:
        failed = _capacity_failure_below(cfg, state)
        if cfg.series in settling:
            unknown.append(cfg)
            continue
        pred = Prediction(can_run=False, reason=failed, basis=model.basis) if failed else model.predict(cfg)
        if pred is None:
            unknown.append(cfg)  # its series' anchors are in flight
            continue
        if not pred.can_run:
            if measure_all:
                scored.append((0.0, cfg, pred, []))
            else:
                skips.append((cfg, pred, f"not deployed: {pred.reason}"))
            continue
        threats = [level_threat(lp, choices.get(lp.concurrency)) for lp in pred.levels]
        if chain_best is not None and schedule_sweep.is_chain(cfg, schedule_algorithm or ""):
            # where a tree wins a level, the schedule pins the best chain there instead: a chain
            # that could beat that one changes the schedule without winning the level
            threats += [
                beat_chance(lp, chain_best[lp.concurrency])
                for lp in pred.levels
                if lp.concurrency in chain_best
                and lp.concurrency in choices
                and not schedule_sweep.is_chain(choices[lp.concurrency].chosen.config, schedule_algorithm or "")
            ]
        chance = max([t.chance for t in threats] + [1.0 if any(pred.level(c) is None for c in levels) else 0.0])
        if top is not None:
            chance = max(chance, mix_chance(pred, choices, tlevels, top))
        scored.append((chance, cfg, _with_chances(pred, threats, chance), threats))

    if unknown and in_flight and not any(s[0] >= MIN_CHANCE for s in scored):
        return Decision(wait=True, skips=tuple(skips), why="the anchors of a series are in flight", misfits=misfits)
    contenders = [s for s in scored if s[0] >= MIN_CHANCE or measure_all]
    if contenders:
        chance, cfg, pred, _ = max(contenders, key=lambda s: (s[0], [-x for x in s[1].order_key[:3]]))
        return Decision(
            deploy=cfg,
            prediction=pred,
            why=f"the best chance to win a level beyond the noise ({chance:.0%})",
            skips=tuple(skips),
            misfits=misfits,
            model=model.describe(),
        )
    if in_flight:
        return Decision(
            wait=True, skips=tuple(skips), why="configurations in flight may change the model", misfits=misfits
        )
    for _, cfg, pred, threats in scored:
        why = f"predicted not to win any level beyond the noise (under {MIN_CHANCE:.0%} chance); "
        skips.append((cfg, pred, why + _closest(pred, threats)))
    return Decision(
        skips=tuple(skips),
        why="no configuration left has a chance to win a level",
        misfits=misfits,
        model=model.describe(),
    )


def schedule_chains(
    stats: Mapping[tuple[str, int], PointStats], state: SweepState, algorithm: str | None
) -> dict[int, PointStats] | None:
    """Per level, the best chain measured (what a schedule bucket would pin there), when the sweep
    builds a schedule and the server can run one; else None."""
    if algorithm is None or schedule_sweep.unsupported(state, algorithm) is not None:
        return None
    best: dict[int, PointStats] = {}
    for (_cid, c), p in stats.items():
        if schedule_sweep.is_chain(p.config, algorithm) and p.mean > 0 and (c not in best or p.mean > best[c].mean):
            best[c] = p
    return best


def _capacity_failure_below(cfg: SpecConfig, state: SweepState) -> str | None:
    """A shallower depth of the same series failed to start for lack of KV memory: a deeper one
    needs more of it (the grid's own rule)."""
    for cid, dep in state.failed.items():
        other = state.configs.get(cid)
        if other is None or other.series != cfg.series or not 0 < other.spec_steps < cfg.spec_steps:
            continue
        if analysis.is_capacity_failure(f"{dep.reason}\n{dep.detail or ''}"):
            return f"spec_steps {other.spec_steps} could not start for lack of KV memory ({(dep.reason or '')[:160]})"
    return None


def _with_chances(pred: Prediction, threats: Sequence[Threat], chance: float) -> Prediction:
    by_level: dict[int, float] = {}
    for t in threats:
        by_level[t.concurrency] = max(by_level.get(t.concurrency, 0.0), t.chance)
    levels = tuple(dataclasses.replace(lp, chance=by_level.get(lp.concurrency, 0.0)) for lp in pred.levels)
    return dataclasses.replace(pred, levels=levels, chance=chance)


# -- in words --------------------------------------------------------------------------------------


def prediction_text(pred: Prediction | None) -> str:
    """The prediction behind a deployment, for the progress log: the level it is most likely to win."""
    if pred is None or not pred.levels:
        return ""
    lp = max(pred.levels, key=lambda x: (x.chance, -x.concurrency))
    b = lp.output_tok_s
    return f"; predicted at C={lp.concurrency}: {b.mean:,.0f} tok/s ({b.lo:,.0f}-{b.hi:,.0f})"


def misfit_text(m: Misfit) -> str:
    b = m.predicted
    return (
        f"{m.what} measured {m.measured:,.0f}, outside its predicted interval {b.lo:,.0f}-{b.hi:,.0f} "
        f"(predicted {b.mean:,.0f}, {m.rel_error:+.1%})"
    )
