#!/usr/bin/env python3
"""Replay a kept grid sweep through the model-guided search, offline, in seconds.

A grid sweep (`--search grid --no-early-stop`) measured every configuration. The search, given
those same measurements one deployment at a time, decides what it would have deployed next and
when it would have stopped; this replays that, deterministically, from the grid's own
`records.jsonl` and `sweep.json` (bench/search_cost.py keeps both per machine). It is how a
change to the search's model or its rule is judged across machines before paying for live
sweeps: deployments it would make, and whether each level's pick (as the grid measured it) is
within 3% of the grid's best. The live sweeps in bench/search_cost.md stay the measure that
counts: a replayed configuration reads the grid's measurement of it, not a fresh one.

Usage: .venv/bin/python bench/search_replay.py bench/search_cost/<machine>/grid [...]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.data.records import DeployRecord, LevelRecord, PredictionRecord, Record, SkipRecord, SweepState  # noqa: E402
from tuner.data.store import Store  # noqa: E402
from tuner.decide import analysis  # noqa: E402
from tuner.decide.search import decide as policy  # noqa: E402
from tuner.decide.search import text  # noqa: E402
from tuner.decide.search.model import Misfit, find_misfits  # noqa: E402
from tuner.spec.configs import ConfigPlan, spec_plan  # noqa: E402
from tuner.spec.sweepspec import SweepSpec  # noqa: E402

PASS_SHARE = 0.97


def share_text(share: float) -> str:
    """A share of the best, rounded down to 0.1%: 96.96% is not shown as the 97.0% it misses."""
    return f"{math.floor(share * 1000 + 1e-9) / 10:.1f}%"


@dataclass(frozen=True)
class Replay:
    """What the search did on a kept grid's measurements."""

    deployed: list[str]  # in the order the search deployed them
    planned: int  # configurations planned
    rows: list[tuple[int, str, str, float]]  # per level: (C, the grid's best, the search's pick, its share)
    predicted: list[str]  # the deployed configurations it predicted first (all but the first round)
    misfits: list[Misfit]  # the measurements those predictions missed, as the live sweep would report them

    @property
    def passing(self) -> int:
        """Levels whose pick is worth at least PASS_SHARE of the grid's best there."""
        return sum(1 for *_, share in self.rows if share >= PASS_SHARE)


def load_grid(grid_dir: Path) -> tuple[SweepSpec, SweepState, ConfigPlan]:
    """A kept grid sweep: its spec, every record folded, and its plan."""
    store = Store(grid_dir)
    spec = store.read_spec()
    if spec is None:
        raise SystemExit(f"{grid_dir}: no sweep.json")
    return spec, store.state(), spec_plan(spec)


def judge(full: SweepState, replayed: SweepState, levels: list[int]) -> list[tuple[int, str, str, float]]:
    """Per level, the grid's best, the replayed search's pick and the pick's share of the best, as
    the grid measured both: (C, best, pick, share)."""
    mine = analysis.by_concurrency(analysis.aggregate(replayed.levels()), levels)
    grid = analysis.aggregate(full.levels())
    rows = []
    for c in levels:
        here = {cid: p.mean for (cid, cc), p in grid.items() if cc == c}
        best = max(here, key=lambda k: here[k])
        ch = mine.get(c)
        pick = ch.chosen.config_id if ch is not None and ch.chosen is not None else "-"
        # the real share, also where the pick is the grid's own (a tie-break may choose below the best mean)
        rows.append((c, best, pick, here.get(pick, 0.0) / here[best]))
    return rows


def replay(grid_dir: Path, *, verbose: bool = False) -> Replay:
    """Replay the search on a kept grid sweep (module docstring)."""
    spec, full, plan = load_grid(grid_dir)
    workload = spec.workload
    target = list(workload.target_concurrency) if workload.target_concurrency else None
    deployed: list[str] = []
    # the replayed sweep's records in the order the live sweep writes them: each decision's skips,
    # then the deployed configuration's prediction (tuner/run/planner.py records it before the
    # deploy: the misfit check sets the measurement against it, and a refit proves itself only on a
    # prediction made after the last misfit) and the grid's records of it
    timeline: list[Record] = []
    while True:
        state = SweepState.fold(timeline)
        d = policy.decide(state, plan.configs, workload, exclude=set(deployed), target=target)
        for cfg, pred, why in d.skips:
            timeline.append(SkipRecord(config=cfg, kind="predicted", reason=why, prediction=pred))
            if verbose:
                print(f"  skip {cfg.label}: {why}")
        if d.model and verbose:
            print(f"  model: {d.model}")
        if d.deploy is None:
            if verbose:
                print(f"  done: {d.why}")
            break
        cid = d.deploy.config_id
        deployed.append(cid)
        if d.prediction is not None:
            timeline.append(PredictionRecord(config=d.deploy, prediction=d.prediction))
        timeline += [r for r in full.records if isinstance(r, (DeployRecord, LevelRecord)) and r.config_id == cid]
        if verbose:
            for m in d.misfits:
                print(f"  misfit: {m.config.label} {text.misfit_text(m)}")
            print(f"  deploy {d.deploy.label}: {d.why}{text.prediction_text(d.prediction)}")
    # `state` is the last decision's: every deployed configuration's records and its prediction
    rows = judge(full, state, list(workload.concurrency))
    return Replay(deployed, len(plan.configs), rows, list(state.predictions), find_misfits(state))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid_dirs", nargs="+", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every decision")
    args = ap.parse_args()
    ok = True
    for g in args.grid_dirs:
        print(f"{g}:")
        r = replay(g, verbose=args.verbose)
        n, total, rows, passing = len(r.deployed), r.planned, r.rows, r.passing
        print(
            f"  {n} of {total} deployed ({n / total:.0%}); levels within 3% of the grid's best: {passing}/{len(rows)}"
        )
        for c, best, pick, share in rows:
            print(f"    C={c}: best {best}, pick {pick} ({share_text(share)})")
        ok = ok and passing == len(rows) and 2 * n <= total
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
