"""What a sweep's records come to: the per-level choices, the recommendation, and the notes that
say what the numbers rest on. Pure: built from the folded state and the sweep's spec; the report,
the plot, recommendation.json and the CLI's summary table all read the same `Summary`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import analysis
from .analysis import LevelChoice, PointStats, Recommendation
from .records import DeployRecord, SkipRecord, SweepState
from .results import result_rows
from .search import misfit_text
from .search_report import SearchSummary, search_summary
from .sweepspec import SweepSpec


@dataclass
class Summary:
    spec: SweepSpec
    state: SweepState
    rows: list[dict[str, Any]]  # results.csv
    stats: dict[tuple[str, int], PointStats]
    levels: list[int]
    choices: dict[int, LevelChoice]
    recommendation: Recommendation
    search: SearchSummary | None = None  # what the model-guided search did (`--search model`)
    notes: list[str] = field(default_factory=list)

    @property
    def noise(self) -> dict[str, Any]:
        return analysis.noise_summary(self.stats)

    @property
    def server(self) -> dict[str, Any]:
        return self.state.server

    @property
    def deploys(self) -> dict[str, DeployRecord]:
        return self.state.deploys

    @property
    def failed(self) -> dict[str, DeployRecord]:
        return self.state.failed

    @property
    def skipped(self) -> dict[str, SkipRecord]:
        return self.state.skipped


def _target(spec: SweepSpec, override: list[int] | None) -> list[int] | None:
    if override is not None:
        return override
    t = spec.workload.target_concurrency
    return list(t) if t else None


def summarize(state: SweepState, spec: SweepSpec, target: list[int] | None = None) -> Summary:
    levels = list(spec.workload.concurrency) or sorted({lv.concurrency for lv in state.levels()})
    stats = analysis.aggregate(state.levels())
    s = Summary(
        spec=spec,
        state=state,
        rows=result_rows(state, spec.workload),
        stats=stats,
        levels=levels,
        choices=analysis.by_concurrency(stats, levels),
        recommendation=analysis.recommend(stats, levels, _target(spec, target)),
        search=search_summary(state, spec),
    )
    s.notes = notes_for(s)
    return s


def _cfg_txt(rec: Any) -> str:
    return f"{rec.config_id} (spec_steps {rec.config.spec_steps})"


def notes_for(s: Summary) -> list[str]:
    """Plain statements of what the numbers rest on; never silent about a gap."""
    notes: list[str] = []
    predicted = [r for r in s.state.skipped.values() if r.kind == "predicted"]
    if predicted:
        notes.append(
            f"The model-guided search did not deploy {len(predicted)} configuration(s) "
            f"({', '.join(r.config_id for r in predicted)}): each was predicted not to win any level beyond "
            'the noise, or not to start; the predictions are under "Model-guided search". '
            "`--resume --search grid` measures them."
        )
    if s.search is not None:
        for miss in s.search.misfits:
            notes.append(
                f"Misfit: {miss.config.config_id} {misfit_text(miss)}; the search refitted and widened its intervals."
            )
    for skip in s.state.skipped.values():
        if skip.kind == "predicted":
            continue
        if skip.kind == "early_stop":
            notes.append(
                f"Early stop: {_cfg_txt(skip)} was not measured: {skip.reason}. "
                "`--no-early-stop` sweeps every configuration."
            )
        elif skip.kind == "capacity":
            notes.append(f"{_cfg_txt(skip)} was not deployed: {skip.reason}. `--no-early-stop` tries it anyway.")
        else:
            notes.append(f"{_cfg_txt(skip)} was not deployed: {skip.reason}.")
    for dep in s.state.failed.values():
        after = dep.rollback or "The role rolls a host whose new configuration fails back to its last good one."
        notes.append(f"{_cfg_txt(dep)} failed to deploy on {dep.host}: {dep.reason}. {after}")
    for bf in s.state.bench_failures:
        notes.append(f"{_cfg_txt(bf)}: benchmark stopped on {bf.host}: {bf.reason}.")
    for m in s.state.measured:
        lv = m.level
        if lv.metrics.status in ("partial", "failed"):
            errors = "; ".join(f"{n}x {k}" for k, n in lv.metrics.errors.items())
            notes.append(
                f"{lv.config_id} C={lv.concurrency} repeat {lv.repeat}: {lv.metrics.requests_failed} of "
                f"{lv.metrics.requests_ok + lv.metrics.requests_failed} requests failed ({errors}); the "
                "throughput counts successful tokens only."
            )
    noise = s.noise
    if noise["repeats"] <= 1:
        notes.append(
            "Each point was measured once, so the noise is unknown: throughputs within 1% "
            "count as equal and the smaller spec_steps wins (`--repeats 3` measures the spread)."
        )
    elif noise["max_rel_std_pct"] is not None:
        notes.append(
            f"Spread over {noise['repeats']} repeats (std/mean): median "
            f"{noise['median_rel_std_pct']}%, max {noise['max_rel_std_pct']}%. Differences "
            "within two standard errors (or 1%) count as equal; the smaller spec_steps wins."
        )
    swept = sorted({p.spec_steps for p in s.stats.values()})
    if len(swept) > 1:
        deepest = swept[-1]
        planned = list(s.spec.steps) if s.spec.command == "sweep" else []
        at_edge = [c for c, ch in s.choices.items() if ch.chosen.spec_steps == deepest]
        early = any(r.kind == "early_stop" for r in s.state.skipped.values())
        if at_edge and not early:
            levels_txt = ", ".join(map(str, at_edge))
            if planned and deepest < max(planned):
                notes.append(
                    f"At concurrency {levels_txt} the best setting is the deepest one measured "
                    f"(spec_steps {deepest}); the deeper ones planned did not come up or were "
                    "skipped (see above)."
                )
            else:
                notes.append(
                    f"At concurrency {levels_txt} the best setting is the deepest swept "
                    f"(spec_steps {deepest}); deeper settings were not measured and may be "
                    "faster still (widen --steps to find out)."
                )
    w = s.spec.workload
    if w.temperature == 0 and w.ignore_eos:
        notes.append(
            "Greedy decoding (temperature 0) with ignore_eos gives the draft an easy job: "
            "acceptance, and with it the best depth, can be lower on real sampled traffic "
            "(`--temperature 0.7` measures that workload)."
        )
    queued = []
    for cid, d in s.state.deploys.items():
        mrr = d.max_running_requests
        over = [c for c in s.levels if mrr and c > mrr]
        if over:
            queued.append(f"{cid} runs {mrr} at once (C={', '.join(map(str, over))})")
    if queued:
        notes.append(
            "Where concurrency exceeds max_running_requests the other requests queue: TTFT "
            "includes the wait, per-request tok/s does not. " + "; ".join(queued) + "."
        )
    return notes


def recommendation_json(s: Summary) -> dict[str, Any]:
    w = s.spec.workload
    best = s.state.deploy_best
    return {
        "by_concurrency": {str(c): ch.to_dict() for c, ch in sorted(s.choices.items())},
        "recommended": s.recommendation.to_dict(),
        "notes": s.notes,
        "skipped": [{"config_id": r.config_id, "reason": r.reason, "kind": r.kind} for r in s.state.skipped.values()],
        "failed": [{"config_id": cid, "host": r.host, "reason": r.reason} for cid, r in s.state.failed.items()],
        "noise": s.noise,
        "search": None if s.search is None else s.search.to_json(),
        "deploy_best": None
        if best is None
        else {
            "config": best.config.to_json(),
            "host": best.host,
            "status": best.status,
            "reason": best.reason,
            "verified": best.verified,
        },
        "server": s.server,
        "workload": {
            "temperature": w.temperature,
            "input_len": w.input_len,
            "output_len": w.output_len,
            "ignore_eos": w.ignore_eos,
            "endpoint": w.endpoint,
            "concurrency": list(w.concurrency),
            "requests_per_level": w.requests_per_level,
            "repeats": w.repeats,
        },
    }


def title(s: Summary) -> str:
    name = s.server.get("served_model_name") or "SGLang"
    w = s.spec.workload
    return (
        f"{name}: throughput vs speculative steps (temperature {w.temperature}, "
        f"{w.input_len} in / {w.output_len} out tokens)"
    )


def capacity_by_config(s: Summary) -> dict[str, dict[str, Any]]:
    return {
        cid: {
            **d.config.to_json(),
            "max_total_num_tokens": d.max_total_num_tokens,
            "max_running_requests": d.max_running_requests,
        }
        for cid, d in s.state.deploys.items()
    }
