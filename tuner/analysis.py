"""Recommendation, early stop and noise (pure functions over measured level records).

The rules follow vLLM's `tune_speculative_k` where it fits (docs/reference/peer-tools.md §1.2): repeated
measurements are summarised by their mean and spread, and among configurations whose
throughput is within the measured noise (or 1%) of the best, the smaller `spec_steps` wins —
deeper speculation costs KV capacity (docs/reference/seed-campaign.md) for no measured gain.

Nothing here knows any machine's numbers: every decision is relative to what was measured.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .configs import SpecConfig
from .records import LevelRecord

MIN_REL_TOL = 0.01  # "prefer smaller K within 1%" (tune_speculative_k's default)
NOISE_Z = 2.0  # two standard errors: a difference smaller than this is noise


@dataclass
class PointStats:
    """One configuration at one concurrency, over its repeats (the level records measured there)."""

    config: SpecConfig
    concurrency: int
    levels: list[LevelRecord] = field(default_factory=list)

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
    def values(self) -> list[float]:
        """Aggregate output tok/s, one per repeat."""
        return [lv.metrics.output_tok_s for lv in self.levels if lv.metrics.output_tok_s is not None]

    def metric(self, name: str) -> list[float]:
        """One metric of the level records (e.g. `ttft_ms_p50`), where they have it."""
        out = []
        for lv in self.levels:
            v = getattr(lv.metrics, name)
            if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v)):
                out.append(float(v))
        return out

    def metric_mean(self, name: str) -> float | None:
        vals = self.metric(name)
        return sum(vals) / len(vals) if vals else None

    @property
    def per_request(self) -> list[float]:
        return self.metric("per_request_tok_s")

    @property
    def accept(self) -> list[float]:
        return self.metric("accept_length")

    @property
    def failed_requests(self) -> int:
        return sum(lv.metrics.requests_failed for lv in self.levels)

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        vals = self.values
        return sum(vals) / len(vals) if vals else 0.0

    @property
    def std(self) -> float:
        """Sample standard deviation across repeats (0 with one repeat: noise unknown)."""
        vals = self.values
        if len(vals) < 2:
            return 0.0
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))

    @property
    def sem(self) -> float:
        return self.std / math.sqrt(self.n) if self.n else 0.0

    @property
    def per_request_mean(self) -> float | None:
        return self.metric_mean("per_request_tok_s")

    @property
    def accept_mean(self) -> float | None:
        return self.metric_mean("accept_length")

    @property
    def order_key(self) -> tuple[int, int, int, str]:
        """Smaller is cheaper: fewer steps, then a narrower tree, then fewer draft tokens."""
        return self.config.order_key


def aggregate(levels: Iterable[LevelRecord]) -> dict[tuple[str, int], PointStats]:
    """Group measured level records by (config_id, concurrency)."""
    out: dict[tuple[str, int], PointStats] = {}
    for lv in levels:
        if not lv.measured:
            continue
        key = (lv.config_id, int(lv.concurrency))
        ps = out.get(key)
        if ps is None:
            ps = out[key] = PointStats(config=lv.config, concurrency=key[1])
        ps.levels.append(lv)
    return out


def tolerance(a: PointStats, b: PointStats, min_rel: float = MIN_REL_TOL) -> float:
    """Absolute throughput difference below which a and b count as equal.

    The larger of `min_rel` of the better mean and NOISE_Z standard errors of the difference
    (when repeats give a spread); with one repeat only the relative floor applies.
    """
    floor = min_rel * max(a.mean, b.mean)
    noise = NOISE_Z * math.sqrt(a.sem**2 + b.sem**2)
    return max(floor, noise)


@dataclass
class LevelChoice:
    concurrency: int
    chosen: PointStats
    best: PointStats  # the raw highest mean (may differ from chosen)
    runner_up: PointStats | None
    tolerance_pct: float
    equivalent: list[str]  # config_ids within tolerance of the best

    @property
    def margin_pct(self) -> float | None:
        if self.runner_up is None or self.runner_up.mean <= 0:
            return None
        return (self.chosen.mean - self.runner_up.mean) / self.runner_up.mean * 100.0

    def to_dict(self) -> dict[str, Any]:
        c = self.chosen
        return {
            "config_id": c.config_id,
            "spec_steps": c.spec_steps,
            "spec_topk": c.spec_topk,
            "spec_draft_tokens": c.spec_draft_tokens,
            "output_tok_s": round(c.mean, 2),
            "output_tok_s_std": round(c.std, 2) if c.n > 1 else None,
            "per_request_tok_s": None if c.per_request_mean is None else round(c.per_request_mean, 2),
            "accept_length": None if c.accept_mean is None else round(c.accept_mean, 3),
            "repeats": c.n,
            "runner_up": None
            if self.runner_up is None
            else {
                "config_id": self.runner_up.config_id,
                "spec_steps": self.runner_up.spec_steps,
                "output_tok_s": round(self.runner_up.mean, 2),
            },
            "margin_pct": None if self.margin_pct is None else round(self.margin_pct, 2),
            "tolerance_pct": round(self.tolerance_pct, 2),
            "within_tolerance": self.equivalent,
            "raw_best": None
            if self.best is c
            else {
                "config_id": self.best.config_id,
                "spec_steps": self.best.spec_steps,
                "output_tok_s": round(self.best.mean, 2),
            },
        }


def choose_for_level(points: Sequence[PointStats], min_rel: float = MIN_REL_TOL) -> LevelChoice | None:
    """Best configuration at one level, preferring the cheapest one within noise of the best."""
    pts = [p for p in points if p.n > 0]
    if not pts:
        return None
    best = max(pts, key=lambda p: (p.mean, [-x for x in p.order_key[:3]]))
    equivalent = sorted(
        (p for p in pts if best.mean - p.mean <= tolerance(best, p, min_rel)), key=lambda p: p.order_key
    )
    chosen = equivalent[0]
    others = [p for p in pts if p is not chosen]
    runner_up = max(others, key=lambda p: p.mean) if others else None
    tol = (
        tolerance(best, chosen, min_rel)
        if chosen is not best
        else (tolerance(best, runner_up, min_rel) if runner_up else min_rel * best.mean)
    )
    return LevelChoice(
        concurrency=best.concurrency,
        chosen=chosen,
        best=best,
        runner_up=runner_up,
        tolerance_pct=(tol / best.mean * 100.0) if best.mean else 0.0,
        equivalent=[p.config_id for p in equivalent],
    )


def by_concurrency(
    stats: dict[tuple[str, int], PointStats], levels: Sequence[int], min_rel: float = MIN_REL_TOL
) -> dict[int, LevelChoice]:
    out: dict[int, LevelChoice] = {}
    for c in levels:
        choice = choose_for_level([p for (cid, cc), p in stats.items() if cc == c], min_rel)
        if choice is not None:
            out[c] = choice
    return out


@dataclass
class Recommendation:
    chosen: PointStats | None  # the chosen configuration's stats at one level (for ids)
    score: float | None
    reason: str
    workload: dict[str, Any]
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        c = self.chosen
        return {
            "config_id": None if c is None else c.config_id,
            "spec_steps": None if c is None else c.spec_steps,
            "spec_topk": None if c is None else c.spec_topk,
            "spec_draft_tokens": None if c is None else c.spec_draft_tokens,
            "spec_algorithm": None if c is None else c.spec_algorithm,
            "score": None if self.score is None else round(self.score, 4),
            "reason": self.reason,
            "workload": self.workload,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
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
    absolute size; only configurations measured at every target level compete. Among scores
    within tolerance of the top, the cheapest configuration wins, as per level.
    """
    tlevels = list(target) if target else list(levels)
    workload = {
        "concurrency": tlevels,
        "weighting": "single level"
        if len(tlevels) == 1
        else "equal weight per level, throughput relative to the level's best",
    }
    per_level = by_concurrency(stats, tlevels, min_rel)
    if len(tlevels) == 1:
        choice = per_level.get(tlevels[0])
        if choice is None:
            return Recommendation(None, None, f"nothing was measured at concurrency {tlevels[0]}", workload)
        c = choice.chosen
        reason = (
            f"highest aggregate throughput at concurrency {tlevels[0]}: "
            f"{c.mean:.1f} tok/s with spec_steps {c.spec_steps}"
        )
        if choice.best is not c:
            reason += (
                f" ({choice.best.config_id} measured {choice.best.mean:.1f} tok/s, within "
                f"{choice.tolerance_pct:.1f}%: the smaller setting is preferred)"
            )
        elif choice.runner_up is not None and choice.margin_pct is not None:
            reason += f", {choice.margin_pct:.1f}% above {choice.runner_up.config_id}"
        return Recommendation(c, 1.0, reason, workload, {c.config_id: 1.0})
    if not per_level:
        return Recommendation(None, None, "no level was measured", workload)
    configs: dict[str, dict[int, PointStats]] = {}
    for (cid, level), p in stats.items():
        if level in tlevels:
            configs.setdefault(cid, {})[level] = p
    scores: dict[str, float] = {}
    rel_noise: dict[str, float] = {}
    for cid, pts in configs.items():
        if any(c not in pts or c not in per_level for c in tlevels):
            continue
        rel = [pts[c].mean / per_level[c].best.mean for c in tlevels if per_level[c].best.mean > 0]
        if len(rel) != len(tlevels):
            continue
        scores[cid] = sum(rel) / len(rel)
        rel_noise[cid] = sum(
            tolerance(per_level[c].best, pts[c], min_rel) / per_level[c].best.mean for c in tlevels
        ) / len(tlevels)
    if not scores:
        return Recommendation(None, None, "no configuration was measured at every target level", workload)
    top = max(scores, key=lambda k: scores[k])
    first = {cid: configs[cid][tlevels[0]] for cid in scores}
    equivalent = sorted(
        (cid for cid in scores if scores[top] - scores[cid] <= rel_noise[cid]), key=lambda cid: first[cid].order_key
    )
    chosen = equivalent[0]
    ranked = sorted(scores, key=lambda k: -scores[k])
    others = [k for k in ranked if k != chosen]
    levels_txt = ", ".join(str(c) for c in tlevels)
    reason = (
        f"best mean relative throughput over concurrency {levels_txt} "
        f"(each level weighted equally): {chosen} scores {scores[chosen]:.3f}"
    )
    if others:
        reason += f", next {others[0]} {scores[others[0]]:.3f}"
    if chosen != top:
        reason += f"; {top} scores {scores[top]:.3f}, within noise, so the smaller setting is preferred"
    return Recommendation(first[chosen], scores[chosen], reason, workload, scores)


@dataclass
class EarlyStop:
    stop: bool
    detail: str
    below: dict[int, tuple[str, float, float]] = field(default_factory=dict)


def early_stop(
    series: Sequence[dict[int, PointStats]], levels: Sequence[int], min_rel: float = MIN_REL_TOL
) -> EarlyStop:
    """Whether every level is past its peak at the newest (deepest) configuration of a series.

    `series` holds, ascending in steps, each measured configuration's points by concurrency.
    The newest is "past the peak" at a level when its throughput is below the best of the
    shallower configurations by more than the tolerance; a level it did not measure counts as
    unknown, which never stops the sweep.
    """
    if len(series) < 2:
        return EarlyStop(False, "fewer than two configurations measured")
    newest = series[-1]
    below: dict[int, tuple[str, float, float]] = {}
    for c in levels:
        new = newest.get(c)
        prev = [pts[c] for pts in series[:-1] if c in pts and pts[c].n]
        if new is None or not new.n or not prev:
            return EarlyStop(False, f"concurrency {c} not comparable")
        best = max(prev, key=lambda p: p.mean)
        if best.mean - new.mean <= tolerance(best, new, min_rel):
            return EarlyStop(False, f"concurrency {c} still at or near its best")
        below[c] = (best.config_id, best.mean, new.mean)
    parts = [f"C={c}: {new:.0f} < {b:.0f} ({cid})" for c, (cid, b, new) in below.items()]
    return EarlyStop(True, "throughput fell past its peak at every level: " + "; ".join(parts), below)


# Start-up failures that deeper speculation can only make worse: every extra step takes more KV
# memory (docs/reference/performance-model.md "Admission and KV capacity"; the failure strings of
# docs/reference/sglang.md §5.3).
_CAPACITY_PATTERNS = (
    r"not enough memory",
    r"kv (cache )?pool",
    r"mem[-_]fraction[-_]static",
    r"out of memory",
    r"outofmemory",
    r"cannot be allocated",
    r"kv[- ]oom",
    r"max_total_num_tokens\S* (is )?(<=|0|negative)",
)


def is_capacity_failure(reason: str | None) -> bool:
    """A deploy failure that says the KV pool (memory) was too small."""
    text = (reason or "").lower()
    return any(re.search(p, text) for p in _CAPACITY_PATTERNS)


def noise_summary(stats: dict[tuple[str, int], PointStats]) -> dict[str, Any]:
    """Relative spread (std / mean) across repeats, where repeats exist."""
    rel = {f"{cid}@C{c}": p.std / p.mean for (cid, c), p in stats.items() if p.n > 1 and p.mean > 0}
    if not rel:
        return {
            "repeats": max((p.n for p in stats.values()), default=0),
            "rel_std": {},
            "max_rel_std_pct": None,
            "median_rel_std_pct": None,
        }
    vals = sorted(rel.values())
    mid = vals[len(vals) // 2] if len(vals) % 2 else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    return {
        "repeats": max(p.n for p in stats.values()),
        "rel_std": {k: round(v * 100, 2) for k, v in rel.items()},
        "max_rel_std_pct": round(max(vals) * 100, 2),
        "median_rel_std_pct": round(mid * 100, 2),
    }
