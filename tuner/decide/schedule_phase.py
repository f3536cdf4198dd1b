"""The schedule phase of a sweep (pure): after the static depths are measured, which adaptive
configurations to deploy (the tuner's per-batch-size schedule and SGLang's default adaptive
config), and afterwards whether the schedule earns the recommendation.

Why measure instead of assume: a schedule gives every level its own winner, but SGLang sizes its
buffers for the union of the candidates (0.5.23 `resolve_candidate_steps_from_config`, the
initial steps from `--speculative-num-steps`), so a deep low-load bucket can cost the high-load
levels KV capacity, and the routing itself has a cost. Only the schedule's own measurement, at
every level, against the best static depth, with intervals, says whether it is worth running.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_utils.sglang_releases import ADAPTIVE_PER_BS_SINCE, ADAPTIVE_ZERO_STEPS_SINCE, release_key

from ..data.records import SweepState
from ..measure import stats as st
from ..spec.configs import SpecConfig
from . import analysis
from .analysis import PointStats, Recommendation

# Algorithms SGLang runs adaptive speculation with: the EAGLE worker family (0.5.23
# speculative_hook.py `_maybe_disable_adaptive` turns it off, with a warning, for the others).
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")


def server_version(state: SweepState) -> str | None:
    """The SGLang version the static deployments reported (their gate's /server_info)."""
    for d in state.deploys.values():
        v = (d.server or {}).get("version")
        if d.ok and v:
            return str(v)
    return None


def unsupported(state: SweepState, algorithm: str) -> str | None:
    """Why this server cannot run a per-batch-size schedule, or None."""
    version = server_version(state)
    if version is None:
        return "no static deployment reported the SGLang version"
    if release_key(version) < release_key(ADAPTIVE_PER_BS_SINCE):
        return (
            f"SGLang {version} has no per-batch-size adaptive config (--speculative-adaptive-config with "
            f"batch-size buckets arrived in {ADAPTIVE_PER_BS_SINCE})"
        )
    if release_key(version) < release_key(ADAPTIVE_ZERO_STEPS_SINCE):
        # the schedules built here pin 0 steps where no speculation wins, and SGLang's own default
        # of this release is not the one the comparison is made against
        return (
            f"SGLang {version} refuses a bucket that does not draft (0 steps: 'candidate_steps must be a list of "
            f"positive ints'), which the schedules use where no speculation wins; it loads from {ADAPTIVE_ZERO_STEPS_SINCE}"
        )
    return algorithm_unsupported(algorithm)


def algorithm_unsupported(algorithm: str) -> str | None:
    """Why SGLang cannot run `algorithm` adaptively, whatever the release; None when it can."""
    if algorithm.upper() not in ADAPTIVE_ALGORITHMS:
        return f"SGLang runs adaptive speculation only with {', '.join(ADAPTIVE_ALGORITHMS)}, not {algorithm}"
    return None


def _chain(p: PointStats, algorithm: str) -> bool:
    return is_chain(p.config, algorithm)


def is_chain(c: SpecConfig, algorithm: str) -> bool:
    """A configuration a schedule bucket can pin: a chain (topk 1, draft tokens = steps + 1) of the
    sweep's algorithm, or no speculation (steps 0)."""
    if c.is_schedule:
        return False
    if c.spec_steps == 0:
        return True
    return (
        c.spec_topk == 1
        and c.spec_draft_tokens in (None, c.spec_steps + 1)
        and c.spec_algorithm.upper() == algorithm.upper()
    )


# A level's gauge read fewer times than this says little: SGLang sets it at every prefill to the
# batch before the new requests join, so one or two samples of a short level can read a fraction
# of the decode batch (a C=32 level with room for 48 read "batch 6" from 2 samples).
MIN_GAUGE_SAMPLES = 5


def level_batch(p: PointStats, max_running: int | None, dp_size: int = 1) -> tuple[float, str]:
    """The batch size the server ran a cell at: the median of its levels' sampled running-request
    gauge; without /metrics, the client's concurrency spread over the DP ranks (a rank's batch is
    what an adaptive bucket keys on) and capped by a rank's admission limit."""
    seen = sorted(
        lv.metrics.running_reqs_p90
        for lv in p.used
        if lv.metrics.running_reqs_p90 is not None and lv.metrics.running_reqs_samples >= MIN_GAUGE_SAMPLES
    )
    if seen:
        # at least one: requests were in flight (a gauge last set by a prefill can read 0 at C=1)
        return max(1.0, seen[len(seen) // 2]), "server /metrics num_running_reqs (90th percentile over the level)"
    per_rank = -(-p.concurrency // max(1, dp_size))
    cap = per_rank if not max_running else min(per_rank, max_running)
    return float(cap), (
        f"concurrency capped by max_running_requests (/metrics gave no running-request gauge, or fewer "
        f"than {MIN_GAUGE_SAMPLES} samples in a level)"
    )


@dataclass
class ScheduleVerdict:
    """The adaptive configurations against the best static depth, on the workload's objective."""

    recommended: bool  # `chosen` beats the best static depth beyond noise
    reason: str
    schedule: SpecConfig | None  # the tuner's schedule, when one was built and measured
    best_static: PointStats | None
    default_adaptive: SpecConfig | None
    chosen: SpecConfig | None = None  # the adaptive configuration recommended (schedule or SGLang's default)
    # per level: {"best_static": cell, "schedule": cell, "default_adaptive": cell} (cells may be absent)
    per_level: dict[int, dict[str, PointStats]] = field(default_factory=dict)
    capacity: dict[str, int | None] = field(default_factory=dict)  # config_id -> max_total_num_tokens
    score_ci: dict[str, list[float]] = field(default_factory=dict)
    each: dict[str, str] = field(default_factory=dict)  # config_id -> its comparison with the best static

    def to_dict(self) -> dict[str, Any]:
        def cell(p: PointStats | None) -> dict[str, Any] | None:
            if p is None:
                return None
            return {
                "config_id": p.config_id,
                "output_tok_s": round(p.mean, 2),
                "output_tok_s_ci95": p.interval.as_list(2),
                "running_batch": level_batch(p, None)[0],
            }

        return {
            "recommended": self.recommended,
            "chosen": None if self.chosen is None else self.chosen.config_id,
            "reason": self.reason,
            "schedule_config_id": None if self.schedule is None else self.schedule.config_id,
            "best_static": None if self.best_static is None else self.best_static.config_id,
            "comparisons": self.each,
            "per_level": {str(c): {k: cell(v) for k, v in row.items()} for c, row in sorted(self.per_level.items())},
            "capacity_max_total_num_tokens": self.capacity,
            "score_ci95": self.score_ci or None,
        }


def _compare(
    all_stats: Mapping[tuple[str, int], PointStats],
    cand: SpecConfig,
    best: PointStats,
    levels: Sequence[int],
    target: Sequence[int] | None,
) -> tuple[int, float, str, dict[str, list[float]]] | str:
    """One adaptive configuration against the best static depth: (-1/0/1 as tuner/measure/stats.py
    `compare`, its difference in %, the objective's name, score intervals), or why it cannot be
    compared. The objective is the recommendation's own (analysis.recommend): one level's
    throughput, or the equal-weight relative mean over the target levels, with its interval."""
    tlevels = list(target) if target else list(levels)
    pair = {k: p for k, p in all_stats.items() if k[0] in (cand.config_id, best.config_id)}
    missing = [c for c in tlevels if (cand.config_id, c) not in pair]
    if missing:
        return f"not measured at concurrency {', '.join(map(str, missing))}"
    if len(tlevels) == 1:
        a, b = pair[(cand.config_id, tlevels[0])], pair[(best.config_id, tlevels[0])]
        out = analysis.exclusions([a])
        if out:
            return f"does not compete at concurrency {tlevels[0]}: {out[a.config_id]}"
        ia, ib = a.interval, b.interval
        name, cis = "throughput", {}
    else:
        rec = analysis.recommend(pair, levels, target)
        if cand.config_id not in rec.score_ci or best.config_id not in rec.score_ci:
            return f"does not compete at every target level ({rec.reason})"
        sa, sb = rec.score_ci[cand.config_id], rec.score_ci[best.config_id]
        ia = st.Interval(rec.scores[cand.config_id], sa[0], sa[1], 0, "requests")
        ib = st.Interval(rec.scores[best.config_id], sb[0], sb[1], 0, "requests")
        name, cis = "objective (mean relative throughput)", dict(rec.score_ci)
    diff = (ia.estimate - ib.estimate) / ib.estimate * 100.0 if ib.estimate else 0.0
    return st.compare(ia, ib), diff, name, cis


def judge(
    all_stats: dict[tuple[str, int], PointStats],
    static: Recommendation,
    levels: Sequence[int],
    target: Sequence[int] | None,
    capacity: Mapping[str, int | None],
    tuned: str | None = None,
) -> ScheduleVerdict | None:
    """Each adaptive configuration (`tuned`, the best-scoring tuned config, and SGLang's default
    adaptive config) against the best static depth on the workload's objective, pairwise, with the
    per-level cells side by side. None when no adaptive configuration was measured. (Which
    configuration is recommended is tuner/decide/envelope.py `choose`'s.)"""
    adaptive = {p.config.config_id: p.config for p in all_stats.values() if p.config.is_schedule}
    if not adaptive:
        return None
    sched = adaptive.get(tuned) if tuned else None
    if sched is None:
        sched = next((c for c in adaptive.values() if not c.adaptive), None)
    default = next((c for c in adaptive.values() if c.adaptive), None)
    best = static.chosen
    v = ScheduleVerdict(False, "", sched, best, default, capacity=dict(capacity))
    for c in levels:
        row: dict[str, PointStats] = {}
        if best is not None and (best.config_id, c) in all_stats:
            row["best_static"] = all_stats[(best.config_id, c)]
        for name, cfg in (("schedule", sched), ("default_adaptive", default)):
            if cfg is not None and (cfg.config_id, c) in all_stats:
                row[name] = all_stats[(cfg.config_id, c)]
        if row:
            v.per_level[c] = row
    if best is None:
        v.reason = "no static depth was recommended to compare with"
        return v
    winners: list[tuple[float, SpecConfig]] = []
    for cand in (sched, default):
        if cand is None:
            continue
        what = "the tuned config" if cand is sched else "SGLang's default adaptive config"
        got = _compare(all_stats, cand, best, levels, target)
        if isinstance(got, str):
            v.each[cand.config_id] = f"{what} {got}"
            continue
        sign, diff, name, cis = got
        v.score_ci.update(cis)
        verdict = {1: "beyond noise", -1: "worse beyond noise", 0: "tied within noise"}[sign]
        v.each[cand.config_id] = (
            f"{what}'s {name} is {diff:+.1f}% against {best.config_id}, {verdict}"
            + _capacity_cost(capacity, cand.config_id, best.config_id)
        )
        if sign > 0:
            winners.append((diff, cand))
    # the objective's intervals shown side by side: one scoring of the three together (the verdicts
    # above compare each pair on its own, as a two-way choice between them would)
    trio = {c.config_id for c in (sched, default) if c is not None} | {best.config_id}
    joint = analysis.recommend({k: p for k, p in all_stats.items() if k[0] in trio}, levels, target)
    if joint.score_ci:
        v.score_ci = dict(joint.score_ci)
    if winners:
        diff, v.chosen = max(winners, key=lambda w: w[0])
        v.recommended = True
        v.reason = v.each[v.chosen.config_id]
    else:
        parts = [v.each[c.config_id] for c in (sched, default) if c is not None and c.config_id in v.each]
        v.reason = "; ".join(parts) + f"; the static depth {best.config_id} stays (no routing, no adaptive buffers)"
    return v


def _capacity_cost(capacity: Mapping[str, int | None], sched: str, static: str) -> str:
    a, b = capacity.get(sched), capacity.get(static)
    if not a or not b or a == b:
        return ""
    return f"; its KV pool holds {a} tokens against {b} ({(a - b) / b * 100:+.1f}%)"
