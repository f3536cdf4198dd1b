"""What a sweep's records come to: the per-level choices, the recommendation, and the notes that
say what the numbers rest on. Pure: built from the folded state and the sweep's spec; the report,
the plot, recommendation.json and the CLI's summary table all read the same `Summary`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from sglang_utils.sglang_adaptive import default_adaptive_config

from ..data.records import DeployBestRecord, SweepState
from ..data.results import result_rows
from ..decide import adaptive_phase, analysis, schedule_phase
from ..decide import envelope as envelope_mod
from ..decide.crosscheck import check_levels
from ..decide.schedule import Schedule
from ..spec import workload
from ..spec.sweepspec import SweepSpec
from .notes import notes_for, plan_configs_of
from .search_report import search_summary
from .views import Summary, TempView


def _target(spec: SweepSpec, override: list[int] | None) -> list[int] | None:
    if override is not None:
        return override
    t = spec.workload.target_concurrency
    return list(t) if t else None


def _failed_cells(
    levels: list[Any], measured: Mapping[tuple[str, int], analysis.PointStats], temperature: float
) -> dict[tuple[str, int], analysis.PointStats]:
    """The cells where a configuration ran a level and every request failed, and nothing else was
    measured there: each choice names them among those that did not compete (`excluded`), and a
    level where nothing else was measured is reported as chosen from nothing, with the reason,
    instead of vanishing from the choice and the recommendation."""
    cells = analysis.aggregate(levels, temperature=temperature, pool=False, failed=True)
    return {k: p for k, p in cells.items() if k not in measured and p.n == 0}


def view_for(
    state: SweepState, spec: SweepSpec, temperature: float, levels: list[int], target: list[int] | None
) -> TempView:
    capacity = {cid: d.max_total_num_tokens for cid, d in state.deploys.items()}
    every = analysis.aggregate(state.levels(), temperature=temperature, capacity=capacity)
    analysis.mark_outcomes(every, state)
    analysis.apply_slo(every, spec.workload.slo)
    # The static depths are chosen among themselves; an adaptive configuration (the schedule phase,
    # tuner/decide/schedule_phase.py) then has to beat the best of them beyond noise.
    stats = {k: p for k, p in every.items() if not p.config.is_schedule}
    # the choices also see the levels where every request failed (nothing to plot or tabulate:
    # they are named among those that did not compete, `_failed_cells`)
    failed = _failed_cells(state.levels(measured_only=False), stats, temperature)
    analysis.mark_outcomes(failed, state)
    chosen_from = {**stats, **{k: p for k, p in failed.items() if not p.config.is_schedule}}
    static = analysis.recommend(chosen_from, levels, target)
    # the recommendation among the kinds (tuner/decide/envelope.py): a static depth (no speculation
    # included), SGLang's default adaptive config or a tuned adaptive config, best beyond noise on
    # the objective, ties to the simpler
    pick = envelope_mod.choose(every, static, levels, target)
    tuned_best = max(
        (
            cid
            for cid in pick.scores
            if cid in {p.config_id for p in every.values() if p.config.is_schedule and not p.config.adaptive}
        ),
        key=lambda cid: pick.scores[cid],
        default=None,
    )
    verdict = schedule_phase.judge(every, static, levels, target, capacity, tuned=tuned_best)
    rec = static
    if pick.chosen is not None and pick.chosen.config_id != (static.chosen.config_id if static.chosen else None):
        rec = analysis.Recommendation(
            pick.chosen,
            pick.scores.get(pick.chosen.config_id),
            pick.reason,
            static.workload,
            pick.scores,
            pick.score_ci,
            pick.tied_with,
            kind=pick.kind,
        )
    elif static.chosen is not None:
        rec = dataclasses.replace(static, kind=pick.kind, reason=pick.reason)
    env = envelope_mod.build(every, stats, rec.chosen, static.chosen, levels)
    env.objective = {
        "chosen": None if pick.chosen is None else pick.chosen.config_id,
        "kind": pick.kind,
        "scores": {k: round(v, 4) for k, v in pick.scores.items()},
        "score_ci95": pick.score_ci,
        "tied_with": pick.tied_with,
    }
    return TempView(
        temperature=temperature,
        stats=stats,
        choices=analysis.by_concurrency(chosen_from, levels),
        unchosen=analysis.unchosen(chosen_from, levels),
        recommendation=rec,
        every=every,
        verdict=verdict,
        static=static,
        envelope=env,
    )


def judged_levels(state: SweepState, spec: SweepSpec) -> list[int]:
    """The concurrency levels the choices are made at: the spec's, else those measured."""
    return list(spec.workload.concurrency) or sorted({lv.concurrency for lv in state.levels()})


def _levels_and_temperatures(state: SweepState, spec: SweepSpec) -> tuple[list[int], list[float]]:
    """The levels judged and the temperatures measured, the spec's order first."""
    levels = judged_levels(state, spec)
    # a temperature whose every request failed still gets its view: its levels say why
    measured = analysis.temperatures(state.levels(measured_only=False), failed=True)
    temps = [float(t) for t in spec.workload.temperature if float(t) in measured]
    return levels, temps + [t for t in measured if t not in temps]


def _first_temperature(spec: SweepSpec, temps: list[float]) -> float:
    """The primary temperature: the first measured, else the spec's first (nothing measured yet)."""
    return temps[0] if temps else float(spec.workload.temperature[0])


def first_view(state: SweepState, spec: SweepSpec, target: list[int] | None = None) -> TempView:
    """The first temperature's view alone (the `Summary.primary_view` of `summarize`): the choices and
    the recommendation without the other temperatures, the search's refit or the notes (the
    schedule phase plans from it mid-sweep, tuner/run/sweep.py)."""
    levels, temps = _levels_and_temperatures(state, spec)
    return view_for(state, spec, _first_temperature(spec, temps), levels, _target(spec, target))


def summarize(state: SweepState, spec: SweepSpec, target: list[int] | None = None) -> Summary:
    levels, temps = _levels_and_temperatures(state, spec)
    tgt = _target(spec, target)
    views = {t: view_for(state, spec, t, levels, tgt) for t in temps}
    first = _first_temperature(spec, temps)
    primary = views[first] if first in views else view_for(state, spec, first, levels, tgt)
    s = Summary(
        spec=spec,
        state=state,
        rows=result_rows(state, spec.workload),
        stats=primary.stats,
        levels=levels,
        choices=primary.choices,
        recommendation=primary.recommendation,
        search=search_summary(state, spec),
        views=views,
        unchosen=primary.unchosen,
        checks=check_levels(state.levels(measured_only=False)),
    )
    s.notes = notes_for(s)
    return s


def _unchosen_json(s: Summary, view: TempView, c: int, why: str) -> dict[str, Any]:
    pts = [p for (cid, cc), p in view.stats.items() if cc == c]
    best = max(pts, key=lambda p: p.mean) if pts else None
    return {
        "config_id": None,
        "meets_slo": False if s.slo is not None and "SLO" in why else None,
        "goodput_tok_s": None,
        "reason": why,
        "best_measured": None
        if best is None
        else {
            "config_id": best.config_id,
            "output_tok_s": round(best.mean, 2),
            "ci95": best.interval.as_list(),
            "goodput_tok_s": None if best.slo is None else round(best.slo.goodput_tok_s, 2),
        },
    }


def by_concurrency_json(s: Summary, view: TempView) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in s.levels:
        if c in view.choices:
            out[str(c)] = view.choices[c].to_dict()
        elif c in view.unchosen:
            out[str(c)] = _unchosen_json(s, view, c, view.unchosen[c])
    return out


def deploy_best_json(best: Mapping[str, DeployBestRecord]) -> dict[str, Any] | None:
    """`--deploy-best` in recommendation.json: the recommendation deployed on every host of the
    sweep, `ok` and `verified` only where every host's deploy was, with each host's own outcome in
    `hosts`. `host` and `reason` read as they did for one host: the first host by name, and the
    failures' reasons (each named by its host where there are several)."""
    if not best:
        return None
    recs = [best[h] for h in sorted(best)]
    failed = [r for r in recs if r.status != "ok"]
    reason = None
    if failed:
        reason = failed[0].reason if len(recs) == 1 else "; ".join(f"{r.host}: {r.reason}" for r in failed)
    return {
        "config": recs[0].config.to_json(),
        "host": recs[0].host,
        "status": "failed" if failed else "ok",
        "reason": reason,
        "verified": all(r.verified for r in recs),
        "hosts": [{"host": r.host, "status": r.status, "reason": r.reason, "verified": r.verified} for r in recs],
    }


def recommendation_json(s: Summary) -> dict[str, Any]:
    w = s.spec.workload
    primary = s.primary_view
    return {
        "by_concurrency": by_concurrency_json(s, primary)
        if primary
        else {str(c): ch.to_dict() for c, ch in sorted(s.choices.items())},
        "recommended": s.recommendation.to_dict(),
        "temperature": s.temperatures[0] if s.temperatures else None,
        "by_temperature": {
            f"{t:g}": {"by_concurrency": by_concurrency_json(s, v), "recommended": v.recommendation.to_dict()}
            # with several temperatures, each one's schedule as deployed (the top-level one is the first's)
            | (
                {k: x for k, x in schedule_json(s, v).items() if k in ("schedule", "kv_warning")}
                if len(s.views) > 1
                else {}
            )
            for t, v in s.views.items()
        },
        "slo": None if s.slo is None else s.slo.to_json(),
        "dataset": None if w.dataset is None else w.dataset.to_json(),
        "cross_checks": {
            "levels": s.checks.levels,
            "comparisons": s.checks.comparisons,
            "max_diff_pct": s.checks.max_diff_pct,
            "warnings": s.checks.warnings,
        },
        "notes": s.notes,
        "skipped": [{"config_id": r.config_id, "reason": r.reason, "kind": r.kind} for r in s.state.skipped.values()],
        "failed": [{"config_id": cid, "host": r.host, "reason": r.reason} for cid, r in s.state.failed.items()],
        "noise": s.noise,
        "search": None if s.search is None else s.search.to_json(),
        **schedule_json(s, primary),
        "deploy_best": deploy_best_json(s.state.deploy_best),
        "server": s.server,
        "verify": verify_json(s),
        "workload": {
            "temperature": list(w.temperature),
            "top_p": w.top_p,
            "input_len": w.input_len,
            "output_len": w.output_len,
            "ignore_eos": w.ignore_eos,
            "endpoint": w.endpoint,
            "concurrency": list(w.concurrency),
            "requests_per_level": w.requests_per_level,
            "precision_pct": w.precision if w.adaptive else None,
            "repeats": w.repeats,
            "repeat_deploys": s.spec.repeat_deploys,
            "prompts": workload.describe(w.dataset, w.dataset_sample),
        },
    }


def verify_json(s: Summary) -> dict[str, Any] | None:
    """The correctness gate's part of recommendation.json: on or off, the rule the recommendation was
    judged by, and the exact round's deploys and seconds (tuner/present/verify_text.py)."""
    if s.spec.command != "sweep":
        return None
    from .verify_text import exact_json, judged_by

    chosen = s.recommendation.chosen
    return {
        "on": bool(s.spec.verify),
        "recommended_judged_by": None
        if chosen is None or chosen.config.spec_steps == 0
        else judged_by(s.state, chosen.config_id),
        "exact_round": exact_json(s.state) if s.spec.verify else None,
    }


def schedule_json(s: Summary, view: TempView | None) -> dict[str, Any]:
    """`schedule` (SGLang's JSON exactly as deployed when the recommendation is adaptive, SGLang's
    built-in table for its default; else null), its vLLM form where one depth per bucket expresses
    it, `schedule_comparison` (each adaptive configuration against the best static depth),
    `envelope` (per level: the recommendation, the level's best static depth, the best single static
    depth, SGLang's default adaptive config, no speculation; who wins and why), `kv_warning` and
    `schedule_phase` (what the phase deployed, counted against its budget)."""
    verdict = view.verdict if view is not None else None
    rec = view.recommendation if view is not None else s.recommendation  # the view's own temperature
    cfg = rec.chosen.config if rec.chosen is not None and rec.chosen.config.is_schedule else None
    vllm = None
    deployed: Any = None
    warning = None
    if cfg is not None:
        dep = s.state.deploys.get(cfg.config_id)
        top = int((dep.max_running_requests if dep else None) or max(s.levels or [1]))
        if cfg.adaptive:  # SGLang's default adaptive config: no file; what the server ran is its built-in table
            deployed = default_adaptive_config(schedule_phase.server_version(s.state))
        else:
            deployed = json.loads(cfg.schedule_value or "null")
        if cfg.schedule is not None:
            vllm = Schedule(cfg.schedule).to_vllm(top)
        pools = {
            d.config.spec_steps: d.max_total_num_tokens
            for d in s.state.deploys.values()
            if d.ok and not d.config.is_schedule and d.config.spec_topk == 1
        }
        static = view.static.chosen if view is not None and view.static is not None else None
        own = dep.max_total_num_tokens if dep is not None and dep.ok else None
        warning = envelope_mod.kv_warning(cfg, static, pools, adaptive_phase.adaptive_widest(cfg), own)
    return {
        "schedule": deployed,
        "vllm_num_speculative_tokens_per_batch_size": vllm,
        "schedule_comparison": None if verdict is None else verdict.to_dict(),
        "envelope": None if view is None or view.envelope is None else view.envelope.to_dict(),
        "kv_warning": warning,
        "schedule_phase": schedule_phase_text(s),
    }


def schedule_phase_text(s: Summary) -> str:
    """What the schedule phase did, in one line: what it deployed, against its budget."""
    if not s.spec.schedule:
        return "off (--no-schedule)"
    why = schedule_phase.unsupported(s.state, s.spec.algorithm)
    if why is not None:
        return f"not run: {why}"
    static_ids = {c.config_id for c in plan_configs_of(s)}
    spent = adaptive_phase.phase_deployments(s.state, static_ids)
    parts = [
        f"{len(spent)} of at most {s.spec.schedule_budget} deployments beyond the static sweep"
        + (f": {', '.join(spent)}" if spent else "")
    ]
    for cid in spent:
        d = s.state.deploys.get(cid)
        if d is None:
            parts.append(f"{cid} failed to start: {s.state.failed[cid].reason}")
        elif d.config.is_schedule and (d.speculative or {}).get("adaptive") is False:
            # SGLang turns adaptive off (with a warning) where it cannot run it, and serves the launch depth
            parts.append(f"the server ran {cid} without adaptive speculation (SGLang turned it off: see its warnings)")
    return "; ".join(parts)


def title(s: Summary) -> str:
    name = s.server.get("served_model_name") or "SGLang"
    w = s.spec.workload
    temps = f"{(s.temperatures or list(w.temperature))[0]:g}"
    if len(s.temperatures) > 1:
        temps += " (of " + ", ".join(f"{t:g}" for t in s.temperatures) + ": report.md has each)"
    shape = (
        f"{w.dataset.name}"
        if w.dataset is not None
        else f"{w.input_len or 'auto'} in / {w.output_len or 'auto'} out tokens"
    )
    return f"{name}: throughput vs speculative steps (temperature {temps}, {shape})"
