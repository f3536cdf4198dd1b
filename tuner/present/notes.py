"""The report's and recommendation.json's notes: plain statements of what a sweep's numbers rest
on (its gaps, skips, failures, noise and workload), never silent about one. Pure, from a `Summary`
(tuner/present/summary.py builds it and calls `notes_for` last).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..decide.analysis import LevelChoice, PointStats
from ..decide.search.text import misfit_text
from ..spec.configs import spec_plan
from .noise_text import noise_note
from .views import Summary


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
