"""The confirmation round: redeploy the close contenders, so that verdicts survive a restart.

After the static depths (docs/tuner.md "Verdicts across restarts"), the sweep spends at most
`--confirm N` extra server starts on the configurations whose verdicts are in doubt
(tuner/measure/restarts.py `contenders`: at each target level the best and every configuration tied
with it, or, before any redeploy has measured the deployment component, the runner-up), the
least redeployed first so that two contenders take turns (one at a time, or with several hosts the
most urgent at once, one per host). Each redeploy measures one
level, the sweep's most precise target level (tuner/measure/restarts.py `precise_level`): a
restart moves every level of a deployment alike, and the precise level measures it best. What the
redeploys measure is pooled into the
deployment-to-deployment spread every cell's interval then carries (tuner/decide/analysis.py
`aggregate`). Pure planning over the records; tuner/run/sweep.py runs the deployments.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..data.records import DeployRecord, SweepState, TimingRecord
from ..measure import restarts
from ..spec.configs import SpecConfig
from ..spec.sweepspec import WorkloadSpec
from . import analysis


@dataclass(frozen=True)
class Confirmation:
    """One redeploy of the round: which configuration, as which deployment, at which levels, why."""

    config: SpecConfig
    deployment: int
    levels: tuple[int, ...]
    why: str


def _finished_starts(state: SweepState) -> set[tuple[str, int]]:
    """(configuration, deployment) of the starts past the first that count: measured (their level
    is recorded: the measurement is kept and pooled, whether or not the timing record after the
    correctness check made it to disk) or failed to start. A start a run was stopped in before its
    level (its deploy record, nothing after it) is not one: `--resume` makes it again, under its
    number."""
    done = {(r.config_id, int(r.deployment or 1)) for r in state.records if isinstance(r, TimingRecord)}
    done |= {(r.config_id, int(r.deployment or 1)) for r in state.records if isinstance(r, DeployRecord) and not r.ok}
    done |= {(lv.config_id, int(lv.deployment or 1)) for lv in state.levels(measured_only=False)}
    return {key for key in done if key[1] > 1}


def spent(state: SweepState) -> int:
    """Confirmation starts already made (deployments past the first that finished: a resumed sweep
    keeps them; one it was stopped in is made again and counted once)."""
    return len(_finished_starts(state))


def next_confirmations(state: SweepState, workload: WorkloadSpec, n: int) -> tuple[list[Confirmation], str]:
    """The next `n` redeploys at most, of distinct configurations, most urgent first (a sweep with
    several hosts makes them at once); none, and why the round is over. Every temperature's verdicts
    count (a redeploy measures each): a configuration in doubt at several has its closest margin."""
    temps: list[float | None] = [float(t) for t in workload.temperature] or [None]
    targets = list(workload.target_concurrency or workload.concurrency)
    best: dict[str, restarts.Contender] = {}
    deps: dict[str, int] = {}
    rows: dict[tuple[str, int], Any] = {}
    requests: dict[tuple[str, int], int] = {}
    measured = False
    for temp in temps:
        stats = analysis.aggregate(state.levels(), temperature=temp)
        if not stats:
            continue
        measured = True
        analysis.mark_outcomes(stats, state)  # a configuration that failed is in doubt nowhere
        analysis.apply_slo(stats, workload.slo)  # nor one that misses the SLO, at that level
        cells = []
        for (cid, c), p in stats.items():
            # the choice's rule, cell by cell as each level's choice applies it: a cell that lost
            # requests at one level still competes at the others
            competes = analysis.competes(p) and cid not in state.failed and not p.config.is_schedule
            cells.append(restarts.CellView(cid, c, p.mean, p.interval, p.deployments, competes))
            deps[cid] = max(deps.get(cid, 1), p.deployments)
        at = f" at temperature {temp:g}" if len(temps) > 1 and temp is not None else ""
        for cand in restarts.contenders(cells, targets, restarts.pool_stats(stats)):
            prev = best.get(cand.config_id)
            if prev is None or cand.margin_pct < prev.margin_pct:
                best[cand.config_id] = dataclasses.replace(cand, why=cand.why + at)
        for (cid, c), p in stats.items():
            if not p.partial:
                rows[(f"{cid}@T{temp}", c)] = p.interval_rows("output_tok_s")
                requests[(f"{cid}@T{temp}", c)] = sum(lv.metrics.requests_ok for lv in p.used)
    if not measured:
        return [], "nothing was measured"
    # most urgent first, as restarts.contenders orders one temperature's
    cands = sorted(
        best.values(), key=lambda c: (deps.get(c.config_id, 1), round(c.margin_pct, 6), -len(c.levels), c.config_id)
    )
    if not cands:
        return [], "no verdict is in doubt at any target level"
    # One level, the sweep's most precise target level, not those in doubt: a restart moves every
    # level of a deployment alike, so the precise level measures it best (the contested one may be
    # the noisiest), and the verdicts everywhere read the spread it measures.
    level = restarts.precise_level(rows, targets, requests)
    if level is None:
        return [], "no target level was measured"
    plans = []
    for pick in cands[: max(1, n)]:
        cfg = state.configs[pick.config_id]
        deployments = {
            int(lv.deployment or 1) for lv in state.levels(measured_only=False) if lv.config_id == cfg.config_id
        }
        finished = _finished_starts(state)
        deployments |= {
            int(r.deployment or 1)
            for r in state.records
            if isinstance(r, DeployRecord)
            and r.config_id == cfg.config_id
            and (int(r.deployment or 1) == 1 or (cfg.config_id, int(r.deployment or 1)) in finished)
        }
        why = f"{pick.why}; in doubt at C={','.join(str(c) for c in pick.levels)}"
        plans.append(Confirmation(cfg, max(deployments, default=1) + 1, (level,), why))
    return plans, ""


def cost(state: SweepState, repeat_deploys: int = 1) -> dict[str, float | int]:
    """The round's starts and seconds, and its share of the sweep's deployments' time. Starts up to
    `--repeat-deploys` are the sweep's own (the round does not run then), not the round's."""
    timings = [r for r in state.records if isinstance(r, TimingRecord)]
    conf = [r for r in timings if int(r.deployment or 1) > max(1, int(repeat_deploys))]
    total = sum(float(r.total_s or 0.0) for r in timings)
    conf_s = sum(float(r.total_s or 0.0) for r in conf)
    base = total - conf_s
    # the starts spent() counts past the sweep's own: a start whose level is kept but whose timing
    # record a stop cut off counts as made
    starts = {key for key in _finished_starts(state) if key[1] > max(1, int(repeat_deploys))}
    return {
        "starts": len(starts),
        "seconds": round(conf_s, 1),
        "share_pct": round(100.0 * conf_s / base, 1) if base > 0 else 0.0,
    }
