"""What a sweep's records come to: the per-level choices, the recommendation, and the notes that
say what the numbers rest on. Pure: built from the folded state and the sweep's spec; the report,
the plot, recommendation.json and the CLI's summary table all read the same `Summary`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_utils.sglang_adaptive import default_adaptive_config

from ..data.records import DeployBestRecord, DeployRecord, SkipRecord, SweepState
from ..data.results import result_rows
from ..decide import adaptive_phase, analysis, confirm, schedule_phase
from ..decide import envelope as envelope_mod
from ..decide.analysis import LevelChoice, PointStats, Recommendation
from ..decide.crosscheck import CrossCheck, check_levels
from ..decide.schedule import Schedule
from ..decide.search.text import misfit_text
from ..spec import workload
from ..spec.configs import spec_plan
from ..spec.slo import Slo
from ..spec.sweepspec import SweepSpec
from .noise_text import noise_note, noise_summary
from .search_report import SearchSummary, search_summary


@dataclass
class TempView:
    """Everything chosen at one sampling temperature (the recommendation is per temperature)."""

    temperature: float
    stats: dict[tuple[str, int], PointStats]
    choices: dict[int, LevelChoice]
    unchosen: dict[int, str]  # levels measured without a choice, and why
    recommendation: Recommendation  # the static depth's, or the schedule's where it won beyond noise
    every: dict[tuple[str, int], PointStats] = field(default_factory=dict)  # static and adaptive cells
    verdict: schedule_phase.ScheduleVerdict | None = None  # the schedule against the best static depth
    static: Recommendation | None = None  # the best static depth (what the schedule had to beat)
    envelope: envelope_mod.Envelope | None = None  # the recommendation against the references, per level


@dataclass
class Summary:
    spec: SweepSpec
    state: SweepState
    rows: list[dict[str, Any]]  # results.csv
    stats: dict[tuple[str, int], PointStats]  # the primary temperature's (the first of --temperature)
    levels: list[int]
    choices: dict[int, LevelChoice]
    recommendation: Recommendation
    search: SearchSummary | None = None  # what the model-guided search did (`--search model`)
    notes: list[str] = field(default_factory=list)
    views: dict[float, TempView] = field(default_factory=dict)  # every temperature measured
    unchosen: dict[int, str] = field(default_factory=dict)
    checks: CrossCheck = field(default_factory=CrossCheck)

    @property
    def noise(self) -> dict[str, Any]:
        # every temperature's cells: the first temperature's alone spoke for a sweep of several; and
        # every configuration's, the schedule phase's adaptive ones too (they are in the report's
        # results table, and one of them may be the recommendation)
        if len(self.views) <= 1:
            view = self.primary_view
            stats = (view.every or view.stats) if view is not None else self.stats
        else:
            stats = {
                (f"{cid}@T{t:g}", c): p for t, v in self.views.items() for (cid, c), p in (v.every or v.stats).items()
            }
        out = noise_summary(stats)
        out["confirm"] = dict(confirm.cost(self.state, self.spec.repeat_deploys))
        return out

    @property
    def primary_view(self) -> TempView | None:
        """The first temperature's view: the one the plots draw and the schedule phase judged."""
        return self.views.get(self.temperatures[0]) if self.temperatures else None

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

    @property
    def slo(self) -> Slo | None:
        return self.spec.workload.slo

    @property
    def temperatures(self) -> list[float]:
        return list(self.views)


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


def summarize(state: SweepState, spec: SweepSpec, target: list[int] | None = None) -> Summary:
    levels = list(spec.workload.concurrency) or sorted({lv.concurrency for lv in state.levels()})
    # a temperature whose every request failed still gets its view: its levels say why
    measured = analysis.temperatures(state.levels(measured_only=False), failed=True)
    temps = [float(t) for t in spec.workload.temperature if float(t) in measured]
    temps += [t for t in measured if t not in temps]
    tgt = _target(spec, target)
    views = {t: view_for(state, spec, t, levels, tgt) for t in temps}
    primary = views[temps[0]] if temps else view_for(state, spec, float(spec.workload.temperature[0]), levels, tgt)
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


def _cfg_txt(rec: Any) -> str:
    return f"{rec.config_id} (spec_steps {rec.config.spec_steps})"


def notes_for(s: Summary) -> list[str]:
    """Plain statements of what the numbers rest on; never silent about a gap."""
    notes: list[str] = []
    pending = unfinished(s)
    if pending:
        notes.append(
            f"The sweep is not finished: {len(pending)} planned configuration(s) were neither measured nor "
            f"decided ({', '.join(pending)}); the recommendation is among the ones measured. "
            "`sweep --resume` on this directory measures the rest."
        )
    partial = partly_measured(s)
    if partial:
        notes.append(
            f"The sweep is not finished: {len(partial)} configuration(s) lack levels ("
            + "; ".join(f"{cid}: {', '.join(levels)}" for cid, levels in partial.items())
            + "); the per-level choices compare them where they were measured, the workload recommendation "
            "leaves them out. `sweep --resume` on this directory measures the rest."
        )
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
            unproven = s.search.skipped_unproven
            notes.append(
                f"Misfit: {miss.config.config_id} {misfit_text(miss)}; the search refitted, widened its intervals and "
                + (
                    f"still skipped {', '.join(unproven)} on its predictions (recorded before a misfit stopped the "
                    "skips)"
                    + (f", the refit proven by {s.search.vouched}." if s.search.vouched else ", no refit proven.")
                    if unproven
                    else f"skipped nothing until the refit predicted {s.search.vouched} inside its band."
                    if s.search.vouched
                    else "skipped nothing after it."
                )
            )
    for skip in s.state.skipped.values():
        if skip.kind == "predicted":
            continue
        if skip.kind == "early_stop":
            notes.append(
                f"Early stop: {_cfg_txt(skip)} was not measured: {skip.reason}. "
                "`--no-early-stop` sweeps every configuration (in a new `--out`: a resumed sweep keeps its skips)."
            )
        elif skip.kind == "capacity":
            notes.append(
                f"{_cfg_txt(skip)} was not deployed: {skip.reason}. `--no-early-stop` tries it anyway "
                "(in a new `--out`: a resumed sweep keeps its skips)."
            )
        else:
            notes.append(f"{_cfg_txt(skip)} was not deployed: {skip.reason}.")
    for dep in s.state.failed.values():
        after = dep.rollback or "The role rolls a host whose new configuration fails back to its last good one."
        notes.append(f"{_cfg_txt(dep)} failed to deploy on {dep.host}: {dep.reason}. {after}")
    for dep in s.state.redeploy_failures:
        notes.append(
            f"{_cfg_txt(dep)} failed to start again on {dep.host} (deployment {dep.deployment}): {dep.reason}. "
            "Its measurements from the start that came up stand; a configuration that fails a start may fail "
            "the next: check it before relying on it."
        )
    for bf in s.state.bench_failures:
        if bf.kind != "server_lost":  # said once below, with what it means for the recommendation
            notes.append(f"{_cfg_txt(bf)}: benchmark stopped on {bf.host}: {bf.reason}.")
    for m in s.state.measured:
        lv = m.level
        where = f"{lv.config_id} C={lv.concurrency} T={lv.temperature:g} repeat {lv.repeat}"
        if lv.deployment > 1:
            where += f" deployment {lv.deployment}"
        if lv.server_lost:
            notes.append(
                f"{where}: the server went away during the level ({lv.metrics.requests_failed} of "
                f"{lv.metrics.requests} requests failed); the level was not compared"
                + (" and was measured again once the server answered /health." if _remeasured(s, lv) else ".")
            )
        elif lv.metrics.status in ("partial", "failed"):
            errors = "; ".join(f"{n}x {k}" for k, n in lv.metrics.errors.items())
            notes.append(
                f"{where}: {lv.metrics.requests_failed} of "
                f"{lv.metrics.requests_ok + lv.metrics.requests_failed} requests failed ({errors}); the level is "
                "marked and its throughput is not compared as if complete."
            )
        if lv.attempt > 1 and not lv.server_lost:
            notes.append(f"{where}: measured again (attempt {lv.attempt}) after the server came back.")
    for bf in s.state.unstable.values():
        notes.append(f"{_cfg_txt(bf)} failed during its benchmark on {bf.host}: {bf.reason}. It is not recommended.")
    for vf in s.state.verify_failed.values():
        where = (
            "'s exact round (redeployed with --enable-deterministic-inference)"
            if vf.role == "exact"
            else " on its measurement deployment"
        )
        notes.append(
            f"{_cfg_txt(vf)} failed the correctness gate{where} on {vf.host}: {(vf.reasons or ['?'])[0]}. "
            'It is not recommended (see "Correctness gate").'
        )
    if s.spec.command == "sweep" and not s.spec.verify:
        notes.append(
            "The outputs were not checked (--no-verify): no configuration's greedy text or acceptance drift was compared."
        )
    notes.append(noise_note(s.noise))
    for t, v in s.views.items():
        for c, why in sorted(v.unchosen.items()):
            notes.append(f"Concurrency {c}, temperature {t:g}: no configuration is recommended: {why}.")
    if s.checks.warnings:
        notes.append(
            f"Cross-checks: {len(s.checks.warnings)} disagreement(s) above 1% between the client's, the "
            "server's and /metrics' counts (see \"Cross-checks\")."
        )
    if s.views:
        for t, view in s.views.items():
            notes += _deepest_note(s, view.stats, view.choices, t if len(s.views) > 1 else None)
    else:
        notes += _deepest_note(s, s.stats, s.choices, None)
    w = s.spec.workload
    if s.temperatures and max(s.temperatures) == 0:
        notes.append(
            "Warning: only greedy decoding (temperature 0) was measured. Greedy decoding gives the draft an "
            "easy job: acceptance, and with it the best depth, can be lower on real sampled traffic "
            "(`--temperature 0,0.7` measures both)."
        )
    if w.dataset is None:
        notes.append(
            "Prompts were synthetic (random words / token ids), which drafts differently from real text: "
            '`--dataset FILE` measures your own prompts (docs/tuner.md "Datasets").'
        )
    queued = []
    for cid, d in s.state.deploys.items():
        cap = d.gate_capacity
        mrr = cap.admits
        over = [c for c in s.levels if mrr and c > mrr]
        if over:
            ranks = f", {cap.max_running_requests} on each of {cap.ranks} DP ranks" if cap.ranks > 1 else ""
            queued.append(f"{cid} runs {mrr} at once{ranks} (C={', '.join(map(str, over))})")
    if queued:
        notes.append(
            "Where concurrency exceeds max_running_requests the other requests queue: TTFT "
            "includes the wait, per-request tok/s does not. " + "; ".join(queued) + "."
        )
    return notes


def _remeasured(s: Summary, lost: Any) -> bool:
    return any(
        m.level.key == lost.key and m.level.attempt > lost.attempt and not m.level.server_lost for m in s.state.measured
    )


def _deepest_note(
    s: Summary,
    stats: Mapping[tuple[str, int], PointStats],
    choices: Mapping[int, LevelChoice],
    temperature: float | None,
) -> list[str]:
    """The note that the best setting sits at the deepest depth measured at some levels (of one
    temperature's choices, named where the sweep has several)."""
    swept = sorted({p.spec_steps for p in stats.values()})
    if len(swept) < 2:
        return []
    deepest = swept[-1]
    planned = list(s.spec.steps) if s.spec.command == "sweep" else []
    at_edge = [c for c, ch in choices.items() if ch.chosen.spec_steps == deepest]
    early = any(r.kind == "early_stop" for r in s.state.skipped.values())
    if not at_edge or early:
        return []
    levels_txt = ", ".join(map(str, at_edge)) + ("" if temperature is None else f" (temperature {temperature:g})")
    if planned and deepest < max(planned):
        return [
            f"At concurrency {levels_txt} the best setting is the deepest one measured "
            f"(spec_steps {deepest}); the deeper ones planned did not come up or were "
            "skipped (see above)."
        ]
    return [
        f"At concurrency {levels_txt} the best setting is the deepest swept "
        f"(spec_steps {deepest}); deeper settings were not measured and may be "
        "faster still (widen --steps to find out)."
    ]


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
        warning = envelope_mod.kv_warning(cfg, static, pools, adaptive_phase.adaptive_widest(cfg))
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


def unfinished(s: Summary) -> list[str]:
    """The sweep's planned configurations (its static plan) that nothing measured, skipped or
    failed: an interrupted sweep's gap, which a report read later must name."""
    if s.spec.command != "sweep":
        return []
    st = s.state
    done = set(st.deploys) | set(st.failed) | set(st.skipped) | {m.level.config_id for m in st.measured}
    return [c.config_id for c in plan_configs_of(s) if c.config_id not in done]


def partly_measured(s: Summary) -> dict[str, list[str]]:
    """The planned configurations the sweep deployed but left before all their levels (first
    deployment; none at all when it was stopped during the warm-up), none of them failed or
    decided: per configuration, the levels it lacks. An interrupted sweep's other gap: the workload
    recommendation scores only configurations measured at every target level (it names these)."""
    if s.spec.command != "sweep":
        return {}
    st = s.state
    w = s.spec.workload
    decided = set(st.failed) | set(st.skipped) | {bf.config_id for bf in st.bench_failures}
    done = st.done
    out: dict[str, list[str]] = {}
    for cfg in plan_configs_of(s):
        cid = cfg.config_id
        if cid not in st.deploys or cid in decided:
            continue  # (deployed and stopped before its first level: every level is missing)
        missing = [
            (f"T={t:g} " if len(w.temperature) > 1 else "") + f"C={c}" + (f" rep {r}" if w.repeats > 1 else "")
            for t in w.temperature
            for r in range(1, w.repeats + 1)
            for c in w.concurrency
            if (cid, float(t), int(c), r, 1) not in done
        ]
        if missing:
            out[cid] = missing
    return out


def plan_configs_of(s: Summary) -> list[Any]:
    """The static sweep's configurations (--steps x --topk x --draft-tokens), less those the sweep
    set aside as the play would refuse them (its plan read the inventory's limits; this one cannot)."""
    aside = s.state.set_aside
    return [c for c in spec_plan(s.spec).configs if c.config_id not in aside]


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
