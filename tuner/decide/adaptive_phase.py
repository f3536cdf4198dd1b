"""The schedule phase's two stages (pure): what to deploy beyond the static sweep, within a budget.

Stage 1, the envelope: SGLang's default adaptive config, and a true no-speculation server
(spec_steps 0, its own deployment) when the static sweep did not measure one. Both are what a user
would run without this tool, so every recommendation is set against them in the same run
(tuner/decide/envelope.py).

Stage 2, the search: tuned adaptive configs (tuner/decide/adaptive_search.py) built from the static
depths and from what SGLang's default did at each level (the running batch the server reported,
the depth its accept length says it ran), as many as the budget leaves, best bet first.

The budget (`--schedule-budget`, default 4) counts every deployment of the phase: the default, the
no-speculation server when it is added, and the tuned configs. What was spent is counted from the
records, so `--resume` neither repeats nor exceeds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data.records import SweepState
from ..spec.configs import SpecConfig
from . import adaptive_search as search
from . import analysis, envelope
from .analysis import PointStats
from .capacity import kv_failures
from .schedule import sglang_spec_cuda_graph_bs
from .schedule_phase import is_chain, level_batch, server_version, unsupported


@dataclass
class StagePlan:
    configs: list[SpecConfig] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # what the stage decided, for the log and the report
    skipped: str | None = None
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (label, why) set aside for their KV cost


# Why the role refuses a configuration on every host for their settings, None when some host
# may run it (tuner/spec/configs.py ConfigPlan.refusal).
Refusal = Callable[[SpecConfig], str | None]


def role_refuses(refused: Refusal | None, algorithm: str) -> str | None:
    """Why the phase deploys nothing adaptive though the release has it: the role refuses SGLang's
    default adaptive config on every host for their settings (a flag SGLang would run a schedule
    static beside, plugins/module_utils/sglang_flags.py `adaptive_fallback_errors` and
    `adaptive_overlap_errors`; LoRA, `lora_spec_errors`). Those rules read only that a schedule is
    on, so they refuse every schedule alike: each deployment would fail in the play's preflight."""
    why = refused(SpecConfig.default_adaptive(algorithm)) if refused is not None else None
    return None if why is None else f"the role refuses an adaptive deployment on every host: {why}"


def phase_deployments(state: SweepState, static_ids: set[str]) -> list[str]:
    """The phase's deployments so far (attempted: started or failed), in record order: every
    adaptive config, and a no-speculation server that is not one of the static sweep's."""
    out: list[str] = []
    for cid, d in list(state.deploys.items()) + list(state.failed.items()):
        cfg = d.config
        if (cfg.is_schedule or (cfg.spec_steps == 0 and cid not in static_ids)) and cid not in out:
            out.append(cid)
    return out


def plan_envelope(
    state: SweepState, static_ids: set[str], algorithm: str, budget: int, refused: Refusal | None = None
) -> StagePlan:
    """Stage 1: SGLang's default adaptive config, then no speculation when the sweep lacks it
    (`refused`: what the role refuses on every host, `role_refuses`)."""
    why = unsupported(state, algorithm) or role_refuses(refused, algorithm)
    if why is not None:
        return StagePlan(skipped=why)
    if budget <= 0:
        return StagePlan(skipped="--schedule-budget 0")
    want = [SpecConfig.default_adaptive(algorithm)]
    if "k0" not in static_ids:
        want.append(SpecConfig(0, 1, None, algorithm))
    spent = phase_deployments(state, static_ids)
    room = budget - len([c for c in spent if c not in {w.config_id for w in want}])
    plan = StagePlan(configs=want[: max(0, room)])
    plan.lines.append(
        "envelope: "
        + ", ".join(c.label for c in plan.configs)
        + (f" (budget {budget})" if len(plan.configs) == len(want) else f" (budget {budget}: the rest left out)")
    )
    return plan


def evidence(
    every: Mapping[tuple[str, int], PointStats],
    static_stats: Mapping[tuple[str, int], PointStats],
    state: SweepState,
    levels: Sequence[int],
    algorithm: str,
    tokens_per_request: int,
    max_steps: int,
) -> search.Evidence:
    """What the static depths and SGLang's default measured, in the ladder generator's terms."""
    choices = analysis.by_concurrency(dict(static_stats), levels)
    caps = [d.max_running_requests for d in state.deploys.values() if d.ok and d.max_running_requests]
    max_running = min(caps) if caps else None
    dp_size = max((d.dp_size for d in state.deploys.values() if d.ok), default=1)
    drafts = envelope.drafts_curve(static_stats, 16)
    default = {c: p for (cid, c), p in every.items() if p.config.adaptive}
    out: list[search.LevelEvidence] = []
    for c in levels:
        ch = choices.get(c)
        if ch is None:
            continue
        best = ch.chosen
        if not is_chain(best.config, algorithm):
            chains = [
                p
                for (_, cc), p in static_stats.items()
                if cc == c and is_chain(p.config, algorithm) and p.mean > 0 and analysis.competes(p)
            ]
            if not chains:
                continue
            best = max(chains, key=lambda p: p.mean)
        batch, _ = level_batch(best, max_running, dp_size)
        tied = tuple(
            sorted(
                {
                    p.spec_steps
                    for (_, cc), p in static_stats.items()
                    if cc == c and is_chain(p.config, algorithm) and analysis.competes(p) and not ch.best.beats(p)
                }
            )
        )
        d = default.get(c)
        depth = search.infer_depth(envelope.accept_length(d), drafts) if d is not None else None
        wins = bool(d is not None and analysis.competes(d) and d.beats(ch.chosen))
        out.append(search.LevelEvidence(c, batch, best.spec_steps, tied, depth, wins))
    started = sorted(
        {
            d.config.spec_steps
            for d in state.deploys.values()
            if d.ok and not d.config.is_schedule and d.config.spec_steps > 0
        }
    )
    # the chains only (tuner/decide/capacity.py): a tree's deeper draft holds more KV than the
    # ladder's chain of the same depth, so its failure says nothing of the chain's
    kv_failed = sorted({steps for steps, _ in kv_failures(state, lambda cfg: is_chain(cfg, algorithm))})
    widest = [adaptive_widest(d.config) for d in state.deploys.values() if d.ok and d.config.is_schedule]
    pools = {
        d.config.spec_steps: int(d.max_total_num_tokens)
        for d in state.deploys.values()
        if d.ok and not d.config.is_schedule and d.max_total_num_tokens
    }
    running_caps = {
        d.config.spec_steps: int(d.max_running_requests)
        for d in state.deploys.values()
        if d.ok and not d.config.is_schedule and d.config.spec_steps > 0 and d.max_running_requests
    }
    swing: dict[int, float] = {}
    for cell in static_stats.values():
        cfg = cell.config
        if not is_chain(cfg, algorithm) or cfg.spec_steps <= 0 or cfg.spec_steps in swing:
            continue
        hists = [lv.metrics.accept_hist for lv in cell.used if lv.metrics.accept_hist]
        if hists:
            width = max(len(h) for h in hists)
            total = [sum(h[i] if i < len(h) else 0 for h in hists) for i in range(width)]
            sw = search.ema_swing(total)
            if sw is not None:
                swing[cfg.spec_steps] = sw
    return search.Evidence(
        levels=out,
        swing=swing,
        drafts=drafts,
        max_depth=search.depth_bound(started, kv_failed, [w for w in widest if w is not None], max_steps),
        sizes=sglang_spec_cuda_graph_bs(max_running or max(levels or [1])),
        default_widest=max(
            c
            for e in search.AdaptiveConfig.from_sglang(default_doc(server_version(state))).buckets
            for c in e.candidates
        ),
        deepest_static=max(started or [0]),
        pools=pools,
        running_caps=running_caps,
        tokens_per_request=tokens_per_request,
    )


def default_doc(version: str | None = None) -> dict[str, Any]:
    """SGLang's built-in adaptive table of the server's release (the newest where unknown)."""
    from sglang_utils.sglang_adaptive import default_adaptive_config

    return default_adaptive_config(version)


def adaptive_widest(cfg: SpecConfig) -> int | None:
    """The widest candidate of an adaptive configuration (SGLang's default: its built-in table)."""
    doc = cfg.adaptive_document()
    if doc is None:
        return None
    return search.AdaptiveConfig.from_sglang(doc).widest


def plan_tuned(
    every: Mapping[tuple[str, int], PointStats],
    static_stats: Mapping[tuple[str, int], PointStats],
    state: SweepState,
    levels: Sequence[int],
    algorithm: str,
    budget: int,
    tokens_per_request: int,
    max_steps: int,
    launch_steps: Any,
    static_ids: set[str],
    refused: Refusal | None = None,
) -> StagePlan:
    """Stage 2: the tuned configs already deployed (a resumed sweep finishes them), then as many
    new ones as the budget leaves, from the evidence; none where the role refuses them (`refused`)."""
    why = unsupported(state, algorithm) or role_refuses(refused, algorithm)
    if why is not None:
        return StagePlan(skipped=why)
    spent = phase_deployments(state, static_ids)
    tried = [cid for cid in spent if (state.deploys.get(cid) or state.failed[cid]).config.is_schedule]
    tuned_done = [cid for cid in tried if cid != "adaptive-default"]
    room = budget - len(spent)
    plan = StagePlan()
    for cid in tuned_done:
        rec = state.deploys.get(cid) or state.failed.get(cid)
        if rec is not None and cid in state.deploys:
            plan.configs.append(rec.config)
    if room <= 0:
        plan.lines.append(f"search: no room left in the budget of {budget} ({len(spent)} deployed: {', '.join(spent)})")
        return plan
    ev = evidence(every, static_stats, state, levels, algorithm, tokens_per_request, max_steps)
    if not ev.levels:
        plan.skipped = "no level had a chain configuration (topk 1) measured"
        return plan
    exclude = []
    for cid in tuned_done:
        rec = state.deploys.get(cid) or state.failed.get(cid)
        doc = rec.config.adaptive_document() if rec is not None else None
        if doc is not None:
            exclude.append(search.AdaptiveConfig.from_sglang(doc).to_json_text())
    cands, dropped = search.generate(ev, room, exclude=exclude, launch_steps=launch_steps)
    for lv in ev.levels:
        plan.lines.append(
            f"C={lv.concurrency}: static winner spec_steps {lv.winner} at a running batch of {lv.batch:g}"
            + (
                f"; SGLang's default ran depth {lv.default_depth:.1f} there"
                + (" and beat it beyond noise" if lv.default_wins else "")
                if lv.default_depth is not None
                else ""
            )
        )
    plan.lines.append(f"deepest candidate offered: {ev.max_depth} (two past the deepest any deployment started)")
    for c, why_not in dropped:
        plan.dropped.append((c.config.label, why_not))
        plan.lines.append(f"set aside {c.config.label}: {why_not}")
    for c in cands:
        # the launch depth the generator checked the KV cost at (`launch_depth`), not the role's rule
        # afresh: where the rule's depth cannot start, the config names a candidate that can
        launch = c.launch if c.launch is not None else int(launch_steps(c.config.to_sglang()))
        plan.configs.append(SpecConfig.for_adaptive(c.config.to_sglang(), algorithm, launch))
        plan.lines.append(f"tuned: {c.config.label} ({c.why})")
    return plan
