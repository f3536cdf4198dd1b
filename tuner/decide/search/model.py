"""The search's model (pure): the fits combined into a closed-loop account of each benchmark level,
calibrated on the measured configurations, with misfit detection; predicts every configuration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from ...data.prediction import Band, LevelPrediction, Prediction
from ...data.records import DeployRecord, LevelRecord, SweepState
from ...measure.stats import LEVEL
from ...spec.configs import SpecConfig
from ...spec.sweepspec import WorkloadSpec
from .. import analysis
from ..analysis import PointStats
from ..capacity import is_capacity_failure
from .fits import (
    AcceptanceFit,
    CapacityFit,
    FirstToken,
    draw_noise,
    expected_max,
    fit_acceptance,
    fit_capacity,
    fit_first_token,
    fit_positions,
    histogram_positions,
)
from .observe import (
    CALIBRATION_SD_ONE,
    DEPLOY_REL_SD,
    MAX_WIDEN,
    TAU_REL_FLOOR,
    ConfigObs,
    Z,
    noise_rel_sd,
    observe,
    queued,
    request_lengths,
    running_batch,
    verify_width,
)
from .step import StepFit, StepRow, fit_step_time


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
    loop stopped sending (tuner/measure/metrics.py `level_windows`: the completion after which fewer than C
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
    # the measured speculative configurations the gain was taken over: (k, running batch, verify
    # width, queued); a prediction is relative to them, so only errors that differ between them
    # and the predicted configuration count (`StepFit.t_relative`)
    refs: tuple[tuple[int, float, int, bool], ...] = ()


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


def family_z(levels: int) -> float:
    """The z of a 95% band that holds all `levels` measured levels of one deployment at once
    (Bonferroni: each level at 1 - 5%/levels). One deployment's levels are checked together, and
    five levels each at 95% flag a right model one deployment in four or five by chance alone: a
    misfit must mean the model is contradicted, since from it on the search skips nothing."""
    if levels <= 1:
        return Z
    return NormalDist().inv_cdf(1.0 - (1.0 - LEVEL) / (2.0 * levels))


def measured_band(band: Band, levels: int = 1) -> Band:
    """Where one deployment's measurement of a predicted level is expected to land: the
    prediction's interval with that deployment's own draw (DEPLOY_REL_SD, which moves all its
    levels together) added in quadrature on each side, both at the z that holds the deployment's
    `levels` measured levels together (`family_z`; Z for one level). A measurement outside the
    prediction but inside this is the restart's luck, not the model's error: it must not widen every later
    interval as a misfit (on the bench machines, whose restarts vary as real servers' do, one
    fresh deployment's level in seven fell outside the prediction alone: bench/search_cost.md)."""
    z = family_z(levels)
    scale = z / Z
    extra = z * DEPLOY_REL_SD * abs(band.mean)

    def side(half: float) -> float:
        return math.sqrt((half * scale) ** 2 + extra * extra) if math.isfinite(half) else half

    return Band(band.mean, band.mean - side(band.mean - band.lo), band.mean + side(band.hi - band.mean))


def checked_levels(
    cid: str, pred: Prediction, stats: Mapping[tuple[str, int], PointStats]
) -> Iterator[tuple[LevelPrediction, Band, float]]:
    """Each level of a prediction measured since, with the band its measurement is held to and the
    measurement: what the misfit check and the report's "Predicted vs measured" table read. The band
    holds every level the deployment is to measure together, not those measured so far (a
    deployment still in flight, its first level checked alone at 95%, was called a misfit its
    finished levels then cleared, after the search had stopped skipping)."""
    for lp in pred.levels:
        p = stats.get((cid, lp.concurrency))
        if p is not None and p.n:
            yield lp, measured_band(lp.output_tok_s, len(pred.levels)), p.mean


def find_misfits(state: SweepState) -> list[Misfit]:
    """Every prediction the measurements that followed it contradict: a level measured outside
    `measured_band` of its prediction (the deployment's measured levels held together), a capacity
    outside its predicted interval."""
    stats = analysis.aggregate(state.levels())
    out: list[Misfit] = []
    for cid, rec in state.predictions.items():
        pred = rec.prediction
        for lp, where, measured in checked_levels(cid, pred, stats):
            if not where.contains(measured):
                out.append(Misfit(rec.config, f"C={lp.concurrency} aggregate tok/s", lp.concurrency, where, measured))
        dep = state.deploys.get(cid)
        failed = state.failed.get(cid)
        if dep is None and failed is not None and pred.can_run and is_capacity_failure(failed.reason or ""):
            # predicted to fit its KV pool, it did not start for lack of memory: the capacity fit missed
            pool = pred.max_total_num_tokens or Band(1.0, 1.0, 1.0)
            out.append(
                Misfit(rec.config, "max_total_num_tokens (it failed to start for lack of KV memory)", None, pool, 0.0)
            )
        if dep is None:
            continue
        for name, band, got in (
            ("max_running_requests", pred.max_running_requests, dep.max_running_requests),
            ("max_total_num_tokens", pred.max_total_num_tokens, dep.max_total_num_tokens),
        ):
            if band is not None and name == "max_running_requests":
                # a whole number SGLang gets by floor division from the pool: one off the line is
                # rounding, not a contradicted model (the demo's k5: 8 where the band was 8.5-9.5)
                # (an end the capacity fit leaves open, one depth measured on that side, stays open)
                lo = math.floor(band.lo) if math.isfinite(band.lo) else band.lo
                band = Band(band.mean, lo, math.ceil(band.hi) if math.isfinite(band.hi) else band.hi)
            if band is not None and got is not None and not band.contains(float(got)):
                out.append(Misfit(rec.config, name, None, band, float(got)))
    return out


def last_search_record(state: SweepState) -> dict[str, int]:
    """Each configuration's last record of the search round (deployment 1) in `state.records`: its
    last level, or its failed start. When a misfit became known, and when a proof landed."""
    last: dict[str, int] = {}
    for i, r in enumerate(state.records):
        if isinstance(r, (LevelRecord, DeployRecord)) and (r.deployment or 1) == 1:
            last[r.config_id] = i
    return last


def vouched_by(state: SweepState, misfits: Sequence[Misfit], running: Iterable[str] = ()) -> str | None:
    """The deployment that proved the refitted model after its last misfit, or None.

    A misfit says the model that predicted it was wrong, so from it on the search skips nothing on
    that model. The model is refitted with the miss (its intervals widened by it, its step-time forms
    weighed afresh: `fit_model`), and the refit is a new model, unproven: it earns the right to skip
    again only out of sample, by a prediction made after the last misfit was recorded (its record
    follows the misfit's last measurement) of a deployment then measured whole (every predicted
    level complete, its benchmark not stopped, not still `running`), each level inside the band that
    holds the deployment's levels together, its capacity inside its interval too. Until one does,
    every configuration left is measured, the refit only ordering them; a later misfit needs a later
    proof. Only the search's own deployments count (`deployment` 1): a later round that deploys a
    configuration again (`--confirm`, `--repeat-deploys`) neither moves the misfit nor proves the
    refit. Of several proofs the first finished is the one the search acted on. Replayed on the
    bench machines' kept grids, a misfit that skipped nothing for the rest of the sweep measured
    everything on the bent-step machine, whose refit then predicted each of the five depths it
    measured inside its band (bench/search_cost.md)."""
    if not misfits:
        return None
    missed = {m.config.config_id for m in misfits}
    busy = set(running)
    search_round = [
        (i, r)
        for i, r in enumerate(state.records)
        if isinstance(r, (LevelRecord, DeployRecord)) and (r.deployment or 1) == 1
    ]
    # when the last misfit was known: its configuration's last level, or its failed start
    last = last_search_record(state)
    known = max((last[cid] for cid in missed if cid in last), default=-1)
    at = {id(r): i for i, r in enumerate(state.records)}
    stopped = {b.config_id for b in state.bench_failures if (b.deployment or 1) == 1}
    stats = analysis.aggregate(state.levels())
    proofs: list[tuple[int, str]] = []
    for cid, rec in state.predictions.items():
        if cid in missed or cid in busy or cid in stopped or cid not in state.deploys or at.get(id(rec), -1) <= known:
            continue
        pred = rec.prediction
        mine = [(i, r) for i, r in search_round if r.config_id == cid and isinstance(r, LevelRecord)]
        whole = {r.concurrency for _, r in mine if r.complete}
        if not (pred.can_run and pred.levels) or any(lp.concurrency not in whole for lp in pred.levels):
            continue
        if len(list(checked_levels(cid, pred, stats))) == len(pred.levels):
            proofs.append((max(i for i, _ in mine), cid))
    return min(proofs)[1] if proofs else None


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
    capacity: dict[tuple[int, int | None, str], CapacityFit]  # per series (fits.py `fit_capacity`)
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
            if "m" in co:
                text += f" + {co['m'] * 1000:.4f} ms x batch"
            text += f" + {co['c'] * 1000:.4f} ms x batch x verified tokens"
            if "knee" in co:
                text += f" + {co['c2'] * 1000:.4f} ms x (batch x verified tokens - {co['knee']:.0f}) past it"
            if "scale" in co:
                text += f" + {co['e'] * 1000:.3f} ms x (1 - exp(-batch x verified tokens / {co['scale']:.3g}))"
            if len(self.step.forms) > 1:
                text += f" ({self.step.main.weight:.0%} of the weight of {len(self.step.forms)} forms)"
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
        capacity = self.capacity.get(_series(cfg)) or fit_capacity(self.obs, _series(cfg))
        kv = capacity.kv(k)
        mrr = capacity.max_running(k)

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
        # a verify pass emits at most its path and the bonus token, and no more than the tree's
        # draft tokens (SGLang's eagle_info.py reads the accepted path out of those N): a trend
        # carried on in depth for a tree of a fixed budget would pass that
        tau = min(tau, float(min(k + 1, verify_width(cfg))))
        levels = []
        for c in self.workload.concurrency:
            shape = self.shapes.get(c)
            if shape is not None:
                spread = fit.spread(k, shape.tokens) * self.straggler
                levels.append(
                    self._level(k, verify_width(cfg), tau, tau_sd, fit.relative_sd(k), spread, kv, mrr, shape)
                )
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
        tau_sd_relative: float,
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

        q_mean = queued(c, shape.requests, b_mean)
        if shape.refs:
            # relative to the configurations measured here: what they share with this one (the
            # level's prompts, the step time's level at this batch) is in the gain already
            t_rel = step.t_relative(k, b_mean, n, q_mean, shape.refs)
            tau_rel = tau_sd_relative
        else:
            t_mean, t_sd = step.t(k, b_mean, n, q_mean)
            t_rel, tau_rel = t_sd / max(t_mean, 1e-9), tau_sd / tau
        rel_rate = math.sqrt(tau_rel**2 + t_rel**2)
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
    refs: dict[int, list[tuple[int, float, int, bool]]] = {}
    for c in workload.concurrency:
        requests = workload.requests_for(c)
        here = [o for o in obs if c in o.levels]
        tokens_seen = [t for o in here if (t := o.levels[c].tokens)]
        tokens = tokens_at[c] = float(np.median(tokens_seen)) if tokens_seen else float(output_len)
        rows[c] = []
        refs[c] = []
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
            # the acceptance the prediction will use (pooled over levels), not this level's own:
            # a level's prompts are the same for every configuration, so how much easier or harder
            # they draft than the pool is part of what the level's gain carries to the others
            tau = fit.tau(o.k)[0] if fit is not None else lv.tau
            accounts = [
                closed_loop_tok_s(c, requests, tokens, b_obs, first, tau / max(t_fit, 1e-9), spread * f)
                for f in STRAGGLER_FACTORS
            ]
            rows[c].append((lv.tok_s, accounts))
            refs[c].append((o.k, float(b_obs), o.verify_tokens, queued(c, requests, b_obs)))

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
        shapes[c] = LevelShape(
            c, workload.requests_for(c), tokens_at[c], gain, gain_sd, noise_rel_sd(points), tuple(refs[c])
        )
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
    # step time, shared by every series (the verify width carries the difference); the baseline's
    # decode steps pin how a forward grows with the batch at one token per request
    rows = []
    for o in obs:
        for c, lv in o.levels.items():
            if lv.rate and lv.tau and lv.rate > 0:
                req = workload.requests_for(c)
                b = max(running_batch(c, req, o.max_running, o.kv_tokens, need), 1.0)
                rows.append(StepRow(o.k, b, o.verify_tokens, queued(c, req, b), lv.tau / lv.rate))
    noise = noise_rel_sd(stats.values())
    step = fit_step_time(rows, quadratic=True, noise_rel=noise)
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
        capacity={key: fit_capacity(obs, key) for key in {_series(o.config) for o in obs if o.k > 0}},
        first=first,
        straggler=calibration.straggler,
        shapes=calibration.shapes,
        widen=widen,
        basis=tuple(o.config.config_id for o in obs),
        kv_need=need,
    )
