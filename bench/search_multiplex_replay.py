#!/usr/bin/env python3
"""Replay a search that multiplexes its probes, offline, on kept grid sweeps: an experiment for
issue #18 (at most half the grid's deployments), not what the tuner does.

After the first round (the baseline and the anchor depths, deployed as bench/search_replay.py
deploys them), each further deployment is a *probe*: one server running a per-batch-size
schedule (SGLang's adaptive config, per-bs schema, 0.5.13+: one pinned `candidate_steps` per
bucket, tuner/decide/schedule_phase.py builds the same kind) whose buckets put a different depth
at each level, so that one deployment measures, at every level, the configuration the model gives
the best chance to win there beyond the noise (tuner/decide/search/decide.py `level_threat`). It
goes on while some level has a configuration with at least MIN_CHANCE; each probe reads the grid's
measurement of each cell it holds.

What it assumes, and the grid cannot show:
- a depth inside the probe runs as the static depth does at that level: the level's ramp and tail,
  whose batch falls into other buckets (other depths), and the schedule's one restart draw for all
  its cells are not modelled (each cell keeps its static deployment's draw). `--pinned` sets that
  against the kept sweeps of bench/schedule_vs_static/, whose tuned schedules pin one depth per
  bucket: a pinned speculative depth measured 0.96-1.02 of the static depth at the same level in
  the same sweep (17 cells of 5 machines, 0.99 on average: within two deployments' restart draws),
  but a bucket pinned to 0 steps 0.69-0.89 of the server without speculation (a drafting server
  running no draft is not one without a draft model), so no probe pins 0: the baseline is measured
  in the first round and never probed;
So its counts are a lower bound for a live run of the same policy, and the live sweeps of
bench/search_cost.md stay the measure that counts.

Usage: .venv/bin/python bench/search_multiplex_replay.py [--min-chance P] bench/search_cost/<machine>/grid [...]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from search_replay import PASS_SHARE, judge, load_grid, share_text  # noqa: E402

from tuner.data.records import DeployRecord, LevelRecord, Record, SweepState  # noqa: E402
from tuner.data.store import Store  # noqa: E402
from tuner.decide import analysis  # noqa: E402
from tuner.decide.search import decide as policy  # noqa: E402
from tuner.decide.search.model import fit_model  # noqa: E402
from tuner.decide.search.observe import MIN_CHANCE  # noqa: E402
from tuner.spec.configs import SpecConfig  # noqa: E402


@dataclass(frozen=True)
class MultiplexReplay:
    """What the multiplexed search did on a kept grid's measurements."""

    first_round: list[str]  # static deployments, in order
    probes: list[dict[int, str]]  # per probe: level -> the configuration measured there
    planned: int
    rows: list[tuple[int, str, str, float]]  # per level: (C, the grid's best, the pick, its share)
    left_out: int  # cells a probe left out for the widest depth's KV pool

    @property
    def deployments(self) -> int:
        return len(self.first_round) + len(self.probes)

    @property
    def passing(self) -> int:
        return sum(1 for *_, share in self.rows if share >= PASS_SHARE)


def replay(grid_dir: Path, *, min_chance: float = MIN_CHANCE, verbose: bool = False) -> MultiplexReplay:
    """Replay the multiplexed search on a kept grid sweep (module docstring)."""
    spec, full, plan = load_grid(grid_dir)
    workload = spec.workload
    levels = list(workload.concurrency)
    tokens = (workload.input_len or 0) + (workload.output_len or 0)

    def records(cid: str, only: set[int] | None = None) -> list[Record]:
        out: list[Record] = []
        for r in full.records:
            if r.config_id != cid:
                continue
            if isinstance(r, DeployRecord) or (isinstance(r, LevelRecord) and (only is None or r.concurrency in only)):
                out.append(r)
        return out

    timeline: list[Record] = []
    first: list[str] = []
    measured: set[tuple[str, int]] = set()
    while True:  # the first round, as the search deploys it
        d = policy.decide(SweepState.fold(timeline), plan.configs, workload, exclude=set(first))
        if d.deploy is None or d.deploy not in policy.first_round(plan.configs):
            break
        first.append(d.deploy.config_id)
        timeline += records(d.deploy.config_id)
        measured |= {(d.deploy.config_id, c) for c in levels}
        if verbose:
            print(f"  deploy {d.deploy.label}: {d.why}")

    def pool(cid: str) -> tuple[float, float]:
        dep = full.deploys.get(cid)
        kv = dep.max_total_num_tokens if dep is not None else None
        mr = dep.max_running_requests if dep is not None else None
        return (float(kv) if kv else float("inf"), float(mr) if mr else float("inf"))

    def holds(cid: str, c: int) -> bool:
        kv, mr = pool(cid)
        return kv >= c * tokens and mr >= c

    probes: list[dict[int, str]] = []
    left_out = 0
    while True:
        state = SweepState.fold(timeline)
        model = fit_model(state, workload)
        stats = analysis.aggregate(state.levels())
        analysis.mark_outcomes(stats, state)
        choices = analysis.by_concurrency(stats, levels)
        best: dict[int, tuple[float, SpecConfig]] = {}
        for cfg in plan.configs:
            pred = model.predict(cfg) if model.step is not None else None
            if pred is None or not pred.can_run:
                continue
            for lp in pred.levels:
                if (cfg.config_id, lp.concurrency) in measured:
                    continue
                chance = policy.level_threat(lp, choices.get(lp.concurrency)).chance
                if chance > best.get(lp.concurrency, (-1.0, cfg))[0]:
                    best[lp.concurrency] = (chance, cfg)
        # a probe is deployed while one level has a contender; its other levels measure their own
        # likeliest winner (a static deployment measures every level too)
        if not any(chance >= min_chance for chance, _ in best.values()):
            break
        probe = {c: cfg for c, (_, cfg) in best.items()}
        while True:
            widest = max(probe.values(), key=lambda cfg: cfg.spec_steps)
            short = [
                c
                for c, cfg in probe.items()
                if cfg is not widest and not holds(widest.config_id, c) and holds(cfg.config_id, c)
            ]
            if not short:
                break
            for c in short:
                probe.pop(c)
            left_out += len(short)
        probes.append({c: cfg.config_id for c, cfg in sorted(probe.items())})
        for c, cfg in probe.items():
            have_deploy = any(isinstance(r, DeployRecord) and r.config_id == cfg.config_id for r in timeline)
            timeline += [r for r in records(cfg.config_id, {c}) if isinstance(r, LevelRecord) or not have_deploy]
            measured.add((cfg.config_id, c))
        if verbose:
            print("  probe " + ", ".join(f"C={c}: {best[c][1].label} ({best[c][0]:.0%})" for c in sorted(probe)))
    rows = judge(full, SweepState.fold(timeline), levels)
    return MultiplexReplay(first, probes, len(plan.configs), rows, left_out)


def pinned_cells(sweeps: Path) -> list[tuple[str, str, int, int, float, float]]:
    """Per kept schedule sweep under `sweeps`, each pinned schedule's cell against the static depth
    its bucket pins at that level, in the same sweep: (machine, schedule, C, depth, pinned tok/s,
    static tok/s)."""
    out = []
    for d in sorted(p for p in sweeps.iterdir() if (p / "records.jsonl").exists()):
        stats = analysis.aggregate(Store(d).state().levels())
        static = {
            (p.config.spec_steps, c): p.mean
            for (_, c), p in stats.items()
            if not p.config.is_schedule and p.config.spec_topk == 1
        }
        for (cid, c), p in sorted(stats.items()):
            buckets = p.config.schedule
            if buckets is None:
                continue
            k = [steps for low, steps in buckets if low <= c][-1]
            if (k, c) in static:
                out.append((d.name, cid, c, k, p.mean, static[(k, c)]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid_dirs", nargs="*", type=Path)
    ap.add_argument(
        "--pinned",
        action="store_true",
        help="compare the kept schedule sweeps' pinned cells with the static depths (bench/schedule_vs_static/)",
    )
    ap.add_argument("--min-chance", type=float, default=MIN_CHANCE, help=f"default {MIN_CHANCE} (the search's)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every deployment")
    args = ap.parse_args()
    if args.pinned:
        cells = pinned_cells(ROOT / "bench" / "schedule_vs_static")
        for name, cid, c, k, pinned, static in cells:
            print(f"{name} {cid} C={c} k{k}: pinned {pinned:,.0f} tok/s, static {static:,.0f} ({pinned / static:.3f})")
        for label, keep in (("speculative depths", lambda k: k > 0), ("0 steps", lambda k: k == 0)):
            r = [pinned / static for _, _, _, k, pinned, static in cells if keep(k)]
            if r:
                print(f"{label}: {len(r)} cells, {min(r):.3f}-{max(r):.3f} of static, {sum(r) / len(r):.3f} on average")
    n = total = passing = rows = 0
    for g in args.grid_dirs:
        print(f"{g}:")
        r = replay(g, min_chance=args.min_chance, verbose=args.verbose)
        print(
            f"  {r.deployments} of {r.planned} deployed ({len(r.first_round)} static, {len(r.probes)} probes; "
            f"{r.left_out} cells left out for the widest depth's pool); levels within 3% of the grid's best: "
            f"{r.passing}/{len(r.rows)}"
        )
        for c, top, pick, share in r.rows:
            print(f"    C={c}: best {top}, pick {pick} ({share_text(share)})")
        n, total, passing, rows = n + r.deployments, total + r.planned, passing + r.passing, rows + len(r.rows)
    if len(args.grid_dirs) > 1:
        print(f"in all: {n} of {total} deployed ({n / total:.0%}); levels passing {passing}/{rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
