"""Recommendation and noise (pure functions over measured level records).

Every comparison goes through the intervals of tuner/measure/stats.py: a configuration wins a level only when its
95% interval of aggregate throughput lies above every other's; otherwise the level is *tied within noise* and a
documented tie-break chooses among the tied (docs/tuner.md "Choosing"). Per level: among those whose mean is within
`MIN_REL_TOL` (1%) of the best mean, more KV capacity (`max_total_num_tokens`: room for longer contexts and bursts),
then the cheaper setting (fewer steps, a narrower tree, fewer draft tokens); vLLM `tune_speculative_k` prefers the
smaller K within 1% of the best (docs/reference/peer-tools.md §1.2); a tied configuration further below the best
mean is not taken for being cheaper ("tied" says the data cannot separate them). A tie of the workload's scores
(`recommend`) is broken by tuner/decide/workload_tiebreak.py on the same reading.

Cells with a failed request are not compared as if complete, with an SLO only cells that meet it
compete (tuner/spec/slo.py), and a configuration that lost its server twice, failed the correctness
gate or, adaptive, ran static competes nowhere (`mark_outcomes`). It knows no machine's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.records import LevelRecord, SweepState
from ..measure import restarts
from ..measure import stats as st
from ..measure.stats import Interval
from ..spec.configs import SpecConfig
from ..spec.slo import Slo, SloResult, evaluate
from .workload_tiebreak import workload_choice

MIN_REL_TOL = st.FLOOR_REL  # the interval of a number whose noise nothing measured (+-1%)


@dataclass
class PointStats:
    """One configuration at one concurrency and temperature: a cell, over its repeats and
    deployments (the level records measured there)."""

    config: SpecConfig
    concurrency: int
    levels: list[LevelRecord] = field(default_factory=list)
    temperature: float = 0.0
    kv_tokens: int | None = None  # the deployment's max_total_num_tokens (the tie-break)
    slo: SloResult | None = None  # set by `apply_slo`
    failed_reason: str | None = None  # its server went away twice (`mark_outcomes`): not compared
    verify_failed: str | None = None  # it failed the correctness gate (`mark_outcomes`): never chosen
    static_fallback: bool = False  # an adaptive configuration SGLang ran static (`mark_outcomes`): not compared
    restart: restarts.RestartNoise | None = None  # the sweep's pooled deployment-to-deployment spread (`aggregate`)

    @property
    def config_id(self) -> str:
        return self.config.config_id

    @property
    def spec_steps(self) -> int:
        return self.config.spec_steps

    @property
    def spec_topk(self) -> int:
        return self.config.spec_topk

    @property
    def spec_draft_tokens(self) -> int | None:
        return self.config.spec_draft_tokens

    @property
    def spec_algorithm(self) -> str:
        return self.config.spec_algorithm

    @property
    def used(self) -> list[LevelRecord]:
        """The levels the numbers rest on: the complete ones when there are any (a level with a
        failed request, or lost with its server, is not compared as if complete)."""
        complete = [lv for lv in self.levels if lv.complete]
        return complete or [lv for lv in self.levels if not lv.server_lost] or list(self.levels)

    @property
    def partial(self) -> bool:
        """No level of this cell finished with every request: it does not compete."""
        return not any(lv.complete for lv in self.levels)

    @property
    def values(self) -> list[float]:
        """Aggregate output tok/s, one per level used."""
        return [lv.metrics.output_tok_s for lv in self.used if lv.metrics.output_tok_s is not None]

    def metric(self, name: str) -> list[float]:
        """One metric of the level records used (e.g. `ttft_ms_p50`), where they have it."""
        out = []
        for lv in self.used:
            v = getattr(lv.metrics, name)
            if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
                out.append(float(v))
        return out

    def metric_mean(self, name: str) -> float | None:
        vals = self.metric(name)
        return sum(vals) / len(vals) if vals else None

    @property
    def failed_requests(self) -> int:
        return sum(lv.metrics.requests_failed for lv in self.levels)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def deployments(self) -> int:
        return len({lv.deployment for lv in self.used})

    @property
    def repeats(self) -> int:
        """The most levels one deployment measured here (`--repeats`); `n` counts every deployment's."""
        deps = [lv.deployment for lv in self.used if lv.metrics.output_tok_s is not None]
        return max((deps.count(d) for d in set(deps)), default=0)

    @property
    def samples(self) -> int:
        """Successful requests the cell's numbers rest on."""
        return sum(lv.metrics.samples or lv.metrics.requests_ok for lv in self.used)

    @property
    def mean(self) -> float:
        """The cell's throughput: the mean over deployments of each deployment's mean over its
        repeats (equal weight per deployment)."""
        iv = self.ci95
        if iv is not None:
            return iv.estimate
        vals = self.values
        return sum(vals) / len(vals) if vals else 0.0

    @property
    def std(self) -> float:
        """Sample standard deviation across the levels used (0 with one: see ci95 instead)."""
        vals = self.values
        if len(vals) < 2:
            return 0.0
        m = sum(vals) / len(vals)
        return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))

    @property
    def sem(self) -> float:
        return self.std / math.sqrt(self.n) if self.n else 0.0

    def interval_rows(
        self, value: str, low: str = "", high: str = "", z: bool = False
    ) -> list[tuple[float, Interval | None, int]]:
        """(value, the level's own interval, deployment) per level used; with `z` the own interval is
        rescaled from its t quantile (t975 on windows - 1) to 1.96 standard errors (for pooling)."""
        low, high = low or f"{value}_ci_low", high or f"{value}_ci_high"
        rows: list[tuple[float, Interval | None, int]] = []
        for lv in self.used:
            v = getattr(lv.metrics, value)
            if v is None:
                continue
            lo, hi = getattr(lv.metrics, low), getattr(lv.metrics, high)
            k = restarts.Z975 / st.t975(max(1, lv.metrics.windows - 1)) if z and lv.metrics.windows >= 2 else 1.0
            own = (
                None
                if lo is None or hi is None
                else Interval(float(v), v - (v - lo) * k, v + (hi - v) * k, lv.metrics.samples, "requests")
            )
            rows.append((float(v), own, lv.deployment))
        return rows

    def _interval(self, value: str, low: str, high: str) -> Interval | None:
        return st.combine(self.interval_rows(value, low, high))

    @property
    def ci95(self) -> Interval | None:
        """95% interval of the aggregate output tok/s; its `noise` says what it covers. With a measured
        deployment-to-deployment spread (`restart`) it covers what a redeploy changes too (tuner/measure/restarts.py)."""
        rows = self.interval_rows("output_tok_s")
        return restarts.widen(rows, self.restart) if self.restart is not None and rows else st.combine(rows)

    @property
    def ttft_p50_ci95(self) -> Interval | None:
        return st.nonnegative(self._interval("ttft_ms_p50", "ttft_ms_p50_ci_low", "ttft_ms_p50_ci_high"))

    @property
    def tpot_p50_ci95(self) -> Interval | None:
        return st.nonnegative(self._interval("tpot_ms_p50", "tpot_ms_p50_ci_low", "tpot_ms_p50_ci_high"))

    @property
    def interval(self) -> Interval:
        """ci95, never None for a measured cell (a floor of +-1% when nothing measured noise)."""
        return self.ci95 or st.floor_interval(self.mean)

    @property
    def precision_pct(self) -> float | None:
        iv = self.ci95
        return None if iv is None or iv.rel_half_width is None else iv.rel_half_width * 100.0

    @property
    def per_request_mean(self) -> float | None:
        return self.metric_mean("per_request_tok_s")

    @property
    def accept_mean(self) -> float | None:
        return self.metric_mean("accept_length")

    @property
    def meets_slo(self) -> bool | None:
        return None if self.slo is None else self.slo.meets

    @property
    def order_key(self) -> tuple[int, int, int, str]:
        """Smaller is cheaper: fewer steps, then a narrower tree, then fewer draft tokens."""
        return self.config.order_key

    @property
    def tie_key(self) -> tuple[int, int, tuple[int, int, int, str]]:
        """The tie-break among configurations tied within noise: more KV capacity first (an
        unknown capacity last), then the cheaper setting."""
        return (0 if self.kv_tokens is not None else 1, -(self.kv_tokens or 0), self.order_key)

    def beats(self, other: PointStats) -> bool:
        """Higher throughput than `other` beyond noise (tuner/measure/stats.py `beats`)."""
        return st.beats(self.interval, other.interval)


def aggregate(
    levels: Iterable[LevelRecord],
    *,
    temperature: float | None = None,
    capacity: Mapping[str, int | None] | None = None,
    pool: bool = True,
    failed: bool = False,
) -> dict[tuple[str, int], PointStats]:
    """Group measured level records by (config_id, concurrency), for one temperature (the first
    one seen when `temperature` is None, so levels of two temperatures never mix). `pool`: the
    deployment-to-deployment spread measured by redeploys is pooled over the cells and every cell
    carries it; `failed`: a level whose every request failed on a live server is a cell, no values."""
    out: dict[tuple[str, int], PointStats] = {}
    cap = capacity or {}
    want = temperature
    for lv in levels:
        if not (lv.measured or (failed and lv.all_failed)):
            continue
        temp = float(lv.temperature or 0.0)
        if want is None:
            want = temp
        if temp != want:
            continue
        key = (lv.config_id, int(lv.concurrency))
        ps = out.get(key)
        if ps is None:
            ps = out[key] = PointStats(
                config=lv.config, concurrency=key[1], temperature=temp, kv_tokens=cap.get(lv.config_id)
            )
        ps.levels.append(lv)
    noise = restarts.pool_stats(out) if pool else None
    for ps in out.values():
        ps.restart = noise
    return out


def temperatures(levels: Iterable[LevelRecord], failed: bool = False) -> list[float]:
    """The temperatures measured, in the order first seen (`failed`: or whose every request failed)."""
    out: list[float] = []
    for lv in levels:
        t = float(lv.temperature or 0.0)
        if (lv.measured or (failed and lv.all_failed)) and t not in out:
            out.append(t)
    return out


def mark_outcomes(stats: Mapping[tuple[str, int], PointStats], state: SweepState) -> None:
    """Mark each point whose configuration lost its server twice, failed the correctness gate or,
    adaptive, ran static (the gate read `speculative.adaptive` false: SGLang's fallback, with only a
    warning): `exclusions` keeps it out of every choice, never the bar nor judged as a schedule."""
    for p in stats.values():
        bf, vf = state.unstable.get(p.config_id), state.verify_failed.get(p.config_id)
        dep = state.deploys.get(p.config_id)
        p.failed_reason = None if bf is None else bf.reason
        p.verify_failed = None if vf is None else (vf.reasons or ["failed"])[0]
        p.static_fallback = p.config.is_schedule and dep is not None and dep.gate_speculative.adaptive is False


def apply_slo(stats: Mapping[tuple[str, int], PointStats], slo: Slo | None) -> None:
    """Set each cell's SLO result (goodput, meets) from its levels' per-request samples."""
    for p in stats.values():
        if slo is None:
            p.slo = None
            continue
        p.slo = evaluate(
            slo,
            [
                (lv.samples, lv.metrics.output_tok_s, lv.metrics.requests_failed)
                for lv in p.used
                if lv.samples is not None
            ],
        )


def tolerance(a: PointStats, b: PointStats, min_rel: float = MIN_REL_TOL) -> float:
    """Throughput difference worth telling a and b apart by: their intervals' half-widths summed (as
    `beats`), at least `min_rel` of the better mean, a floor `beats` lacks: the search's win margin
    deploys no gain under 1% even where intervals narrower than +-0.5% put it beyond noise."""
    floor = min_rel * max(a.mean, b.mean)
    return max(floor, a.interval.half_width + b.interval.half_width)


@dataclass
class LevelChoice:
    concurrency: int
    chosen: PointStats
    best: PointStats  # the highest mean (may differ from chosen after the tie-break)
    runner_up: PointStats | None
    tolerance_pct: float
    equivalent: list[str]  # config_ids tied within noise with the best (chosen among these)
    tied_with: list[str] = field(default_factory=list)  # config_ids whose interval overlaps the chosen one's
    excluded: dict[str, str] = field(default_factory=dict)  # config_id -> why it did not compete
    temperature: float = 0.0
    min_rel: float = MIN_REL_TOL  # the tie-break's "near the best mean" (choose_for_level's argument)

    @property
    def tied(self) -> bool:
        """The best did not beat every other beyond noise: the choice is the tie-break's."""
        return len(self.equivalent) > 1

    @property
    def margin_pct(self) -> float | None:
        ru = self.runner_up
        return None if ru is None or ru.mean <= 0 else (self.chosen.mean - ru.mean) / ru.mean * 100.0

    @property
    def beyond(self) -> str:
        """How the winner is ahead: beyond noise, or past the +-1% floor standing in for an interval."""
        none = any(p is not None and p.interval.noise == "none" for p in (self.chosen, self.runner_up))
        return "by more than the +-1% assumed where no interval was measured" if none else "beyond noise"

    @property
    def verdict(self) -> str:
        if self.runner_up is None:
            # nothing to be beyond the noise of: say so, and what was measured but left out
            if self.excluded:
                left = "; ".join(f"{cid}: {why}" for cid, why in sorted(self.excluded.items()))
                return f"the only configuration that competes ({left})"
            return "only configuration measured"
        if not self.tied:
            return f"beats {self.runner_up.config_id} {self.beyond}"
        others = [c for c in self.equivalent if c != self.chosen.config_id]
        return f"tied within noise with {', '.join(others)}; tie-break: {tie_break_reason(self)}"

    def to_dict(self) -> dict[str, Any]:
        c, iv = self.chosen, self.chosen.interval
        ahead = "beyond noise" if self.beyond == "beyond noise" else "beyond assumed noise"
        out: dict[str, Any] = {
            "config_id": c.config_id,
            "spec_steps": c.spec_steps,
            "spec_topk": c.spec_topk,
            "spec_draft_tokens": c.spec_draft_tokens,
            "output_tok_s": round(c.mean, 2),
            "output_tok_s_std": round(c.std, 2) if c.n > 1 else None,
            "ci95": iv.as_list(),
            "noise": iv.noise,
            "precision_pct": None if c.precision_pct is None else round(c.precision_pct, 2),
            "samples": c.samples,
            "tied_with": self.tied_with,
            "verdict": "tied within noise" if self.tied else (ahead if self.runner_up else "alone"),
            "tie_break": tie_break_reason(self) if self.tied else None,
            "per_request_tok_s": None if c.per_request_mean is None else round(c.per_request_mean, 2),
            "accept_length": None if c.accept_mean is None else round(c.accept_mean, 3),
            "max_total_num_tokens": c.kv_tokens,
            "repeats": c.repeats,
            "deployments": c.deployments,
            "runner_up": None if self.runner_up is None else _brief(self.runner_up, ci=True),
            "margin_pct": None if self.margin_pct is None else round(self.margin_pct, 2),
            "tolerance_pct": round(self.tolerance_pct, 2),
            "within_tolerance": self.equivalent,
            "raw_best": None if self.best is c else _brief(self.best),
            "excluded": self.excluded or None,
        }
        if c.slo is not None:
            out["meets_slo"] = c.slo.meets
            out["goodput_tok_s"] = round(c.slo.goodput_tok_s, 2)
            out["slo_attainment"] = round(c.slo.attainment, 4)
        return out


def _brief(p: PointStats, ci: bool = False) -> dict[str, Any]:
    """A configuration beside the chosen one in a level's JSON: which, and its throughput."""
    out: dict[str, Any] = {"config_id": p.config_id, "spec_steps": p.spec_steps, "output_tok_s": round(p.mean, 2)}
    return {**out, "ci95": p.interval.as_list()} if ci else out


def near_best(value: float, best: float, min_rel: float = MIN_REL_TOL) -> bool:
    """Within `min_rel` of the best mean: close enough for the tie-break to prefer the cheaper one."""
    return value >= best * (1.0 - min_rel)


def tie_break_reason(ch: LevelChoice) -> str:
    c = ch.chosen
    best = ch.best.mean
    near = [
        p
        for p in (ch.best, ch.runner_up)
        if p is not None and p is not c and p.config_id in ch.equivalent and near_best(p.mean, best, ch.min_rel)
    ]
    if not near:
        return f"the highest mean (the others tied are more than {ch.min_rel:.0%} below it)"
    if c.kv_tokens is not None and any(p.kv_tokens is not None and p.kv_tokens < c.kv_tokens for p in near):
        return f"more KV capacity ({c.kv_tokens} tokens) within {ch.min_rel:.0%} of the best mean"
    if c.kv_tokens is not None and any(p.kv_tokens is None for p in near):
        return f"a known KV capacity ({c.kv_tokens} tokens; not reported for the others) within {ch.min_rel:.0%} of the best mean"
    return f"fewer steps / cheaper setting (spec_steps {c.spec_steps}) within {ch.min_rel:.0%} of the best mean"


def exclusions(points: Sequence[PointStats]) -> dict[str, str]:
    """Who does not compete, and why (every choice, the search's bar and the confirmation round read it)."""
    out: dict[str, str] = {}
    for p in points:
        if p.verify_failed:
            out[p.config_id] = "failed the correctness gate (the notes say why)"
        elif p.failed_reason:
            out[p.config_id] = "failed during its benchmark (the notes say why)"
        elif p.static_fallback:
            out[p.config_id] = "the server ran it without adaptive speculation (SGLang turned it off: see its warnings)"
        elif p.partial and (p.n or p.failed_requests):  # (every request of a level may have failed)
            out[p.config_id] = f"requests failed ({p.failed_requests}): not compared as if complete"
        elif p.n == 0:
            out[p.config_id] = "nothing measured"
        elif p.slo is not None and not p.slo.meets:
            out[p.config_id] = "misses the SLO (" + _slo_misses(p) + ")"
    return out


def competes(p: PointStats) -> bool:
    """Whether a cell is compared at all: the one rule behind every verdict, bar and word."""
    return not exclusions([p])


def _slo_misses(p: PointStats) -> str:
    if p.slo is None:
        return ""
    return ", ".join(f"{key} {'-' if val is None else st.readable(val)}" for key, val in p.slo.observed.items())


def choose_for_level(points: Sequence[PointStats], min_rel: float = MIN_REL_TOL) -> LevelChoice | None:
    """The best configuration at one level, named only beyond noise; else the tie-break among the
    configurations tied with the best. None when no configuration competes (see `why_none`)."""
    excluded = exclusions(points)
    pts = [p for p in points if p.config_id not in excluded]
    if not pts:
        return None
    best = max(pts, key=lambda p: (p.mean, [-x for x in p.order_key[:3]]))
    tied = [p for p in pts if not best.beats(p)]
    # ties do not chain: one the best does not beat may still be beaten beyond noise by another of
    # them, and then it is not the tie-break's to take (as the workload tie-break drops such ones)
    equivalent = sorted((p for p in tied if not any(q.beats(p) for q in tied)), key=lambda p: p.tie_key)
    chosen = next(p for p in equivalent if near_best(p.mean, best.mean, min_rel))
    others = [p for p in pts if p is not chosen]
    runner_up = max(others, key=lambda p: p.mean) if others else None
    tol = tolerance(best, runner_up, min_rel) if runner_up else min_rel * best.mean
    return LevelChoice(
        concurrency=best.concurrency,
        chosen=chosen,
        best=best,
        runner_up=runner_up,
        tolerance_pct=(tol / best.mean * 100.0) if best.mean else 0.0,
        equivalent=[p.config_id for p in equivalent],
        tied_with=[p.config_id for p in pts if p is not chosen and p.interval.overlaps(chosen.interval)],
        excluded=excluded,
        temperature=best.temperature,
        min_rel=min_rel,
    )


def why_none(points: Sequence[PointStats]) -> str:
    """Why a level has no choice: what excluded each configuration."""
    ex = exclusions(points)
    if not ex:
        return "nothing was measured"
    slo = [cid for cid, why in ex.items() if why.startswith("misses the SLO")]
    if slo and len(slo) == len(ex):
        return "no configuration meets the SLO: " + "; ".join(f"{cid} {ex[cid]}" for cid in slo)
    return "no configuration competes: " + "; ".join(f"{cid}: {why}" for cid, why in ex.items())


def by_concurrency(
    stats: dict[tuple[str, int], PointStats], levels: Sequence[int], min_rel: float = MIN_REL_TOL
) -> dict[int, LevelChoice]:
    out: dict[int, LevelChoice] = {}
    for c in levels:
        choice = choose_for_level([p for (cid, cc), p in stats.items() if cc == c], min_rel)
        if choice is not None:
            out[c] = choice
    return out


def unchosen(stats: dict[tuple[str, int], PointStats], levels: Sequence[int]) -> dict[int, str]:
    """Levels without a choice, and why (nothing measured, none met the SLO, every one lost requests)."""
    out: dict[int, str] = {}
    for c in levels:
        pts = [p for (cid, cc), p in stats.items() if cc == c]
        if not pts or choose_for_level(pts) is None:
            out[c] = why_none(pts)
    return out


@dataclass
class Recommendation:
    chosen: PointStats | None  # the chosen configuration's stats at one level (for ids)
    score: float | None
    reason: str
    workload: dict[str, Any]
    scores: dict[str, float] = field(default_factory=dict)
    score_ci: dict[str, list[float]] = field(default_factory=dict)
    tied_with: list[str] = field(default_factory=list)
    # static | no_speculation | adaptive_default | adaptive_tuned (tuner/decide/envelope.py `kind_of`)
    kind: str = "static"

    def to_dict(self) -> dict[str, Any]:
        c = self.chosen
        return {
            "kind": self.kind,
            "config_id": None if c is None else c.config_id,
            "spec_steps": None if c is None else c.spec_steps,
            "spec_topk": None if c is None else c.spec_topk,
            "spec_draft_tokens": None if c is None else c.spec_draft_tokens,
            "spec_algorithm": None if c is None else c.spec_algorithm,
            # the role's spec_schedule for it (`default` for SGLang's default: the built-in table
            # given as a file would launch at another depth, sglang_adaptive.launch_steps)
            "spec_schedule": None if c is None else c.config.schedule_value,
            "temperature": None if c is None else c.temperature,
            "score": None if self.score is None else round(self.score, 4),
            "reason": self.reason,
            "workload": self.workload,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
            "score_ci95": self.score_ci or None,
            "tied_with": self.tied_with,
        }


def recommend(
    stats: dict[tuple[str, int], PointStats],
    levels: Sequence[int],
    target: Sequence[int] | None,
    min_rel: float = MIN_REL_TOL,
) -> Recommendation:
    """The choice for the stated workload.

    One target level: that level's choice. Several (or the default, every level): each
    configuration's throughput relative to the best at each level, averaged with equal weight —
    a configuration 10% off the best everywhere scores 0.9 — so no level dominates by its
    absolute size; only configurations that compete (complete, meeting the SLO) at every target
    level where any does are scored (the others named). A score's interval carries each level's
    relative half-width (`stats.score_half_width`); the top score wins beyond noise, else the
    tie-break as per level. A target level where none competes is left out and said in the reason."""
    tlevels = list(target) if target else list(levels)
    workload: dict[str, Any] = {
        "concurrency": tlevels,
        "weighting": "single level"
        if len(tlevels) == 1
        else "equal weight per level, throughput relative to the level's best",
    }
    per_level = by_concurrency(stats, tlevels, min_rel)
    missing = unchosen(stats, tlevels)
    if len(tlevels) == 1:
        choice = per_level.get(tlevels[0])
        if choice is None:
            why = missing.get(tlevels[0], "nothing was measured")
            return Recommendation(None, None, f"at concurrency {tlevels[0]}: {why}", workload)
        c, highest = choice.chosen, choice.best
        among = " among those that compete" if choice.excluded else ""
        reason = (
            f"highest aggregate throughput{among} at concurrency {tlevels[0]}: {st.fixed(c.mean)} tok/s with spec_steps {c.spec_steps}"
            if c is highest or highest.mean <= 0
            else f"at concurrency {tlevels[0]}: {st.fixed(c.mean)} tok/s with spec_steps {c.spec_steps}, "
            f"{(highest.mean - c.mean) / highest.mean * 100:.1f}% below the highest ({highest.config_id}, {st.fixed(highest.mean)} tok/s)"
        )
        if choice.tied:
            reason += f" ({choice.verdict})"
        elif choice.runner_up is not None and choice.margin_pct is not None:
            reason += f", {choice.margin_pct:.1f}% above {choice.runner_up.config_id}, {choice.beyond}"
        elif choice.excluded:
            reason += f" ({choice.verdict})"
        return Recommendation(c, 1.0, reason, workload, {c.config_id: 1.0}, tied_with=choice.tied_with)
    zero = "no throughput measured (0 tok/s)"  # no yardstick there: left out and named, as a level not measured
    missing |= {c: zero for c in tlevels if c in per_level and per_level[c].best.mean <= 0}
    scored_levels = [c for c in tlevels if c in per_level and c not in missing]
    if not scored_levels:
        why = "; ".join(f"C={c}: {w}" for c, w in missing.items()) or "no level was measured"
        return Recommendation(None, None, why, workload)
    configs: dict[str, dict[int, PointStats]] = {}
    for (cid, level), p in stats.items():
        if level in scored_levels:
            configs.setdefault(cid, {})[level] = p
    # the scored: those that compete at every target level; the yardstick is the best of them (a
    # cell measured at some levels only, or missing the SLO at one, rescaled the others' scores)
    scored = {
        cid: pts
        for cid, pts in configs.items()
        if not any(c not in pts or pts[c].config_id in per_level[c].excluded for c in scored_levels)
    }
    # named, not dropped without a word: those a stopped sweep measured at some levels only
    unmeasured = {cid: cs for cid, pts in configs.items() if (cs := [c for c in scored_levels if c not in pts])}
    yard = {c: max((pts[c].mean for pts in scored.values()), default=0.0) for c in scored_levels}
    if missing:
        workload["left_out"] = {str(c): w for c, w in missing.items()}
    scores: dict[str, float] = {}
    half: dict[str, float] = {}
    for cid, pts in scored.items() if all(yard[c] > 0 for c in scored_levels) else ():
        scores[cid] = sum(pts[c].mean / yard[c] for c in scored_levels) / len(scored_levels)
        half[cid] = st.score_half_width([(pts[c].interval, pts[c].mean / yard[c]) for c in scored_levels])
    if not scores:
        return Recommendation(None, None, "no configuration competes at every target level", workload)
    ivs = {
        cid: Interval(v, v - max(half[cid], min_rel * v / 2), v + max(half[cid], min_rel * v / 2))
        for cid, v in scores.items()
    }
    top = max(scores, key=lambda k: scores[k])
    first = {cid: configs[cid][scored_levels[0]] for cid in scores}
    # where the scores cannot be told apart (docs/tuner.md "Choosing"; tuner/decide/workload_tiebreak.py)
    chosen, tie = workload_choice(scores, ivs, configs, scored_levels, min_rel)
    ranked = sorted(scores, key=lambda k: -scores[k])
    others = [k for k in ranked if k != chosen]
    levels_txt = ", ".join(str(c) for c in scored_levels)
    # where the tie-break took a lower mean, the reason names the highest (not "best ... next")
    reason = (
        f"{'best ' if chosen == top else ''}mean relative throughput over concurrency {levels_txt} "
        f"(each level weighted equally): {chosen} scores {scores[chosen]:.3f}"
    )
    if chosen != top:
        reason += f", the highest {top} {scores[top]:.3f}"
    elif others:
        reason += f", next {others[0]} {scores[others[0]]:.3f}"
    reason += tie
    if missing:
        reason += "; left out: " + "; ".join(f"C={c} ({w})" for c, w in missing.items())
    if unmeasured:
        workload["unscored"] = {cid: [f"C={c}" for c in cs] for cid, cs in unmeasured.items()}
        reason += "; not scored, not measured at every target level: " + "; ".join(
            f"{cid} (no C={', C='.join(map(str, cs))})" for cid, cs in unmeasured.items()
        )
    return Recommendation(
        first[chosen],
        scores[chosen],
        reason,
        workload,
        scores,
        {cid: ivs[cid].as_list(4) for cid in scores},
        [c for c in scores if c != chosen and ivs[c].overlaps(ivs[chosen])],
    )
