#!/usr/bin/env python3
"""Benchmark: what `--search model` costs against the grid, and whether it finds the same answer.

For each emulated machine (the seed profile, the profiles under bench/profiles/ made for this bench,
and one whose step time bends with depth, where the model's straight line must be caught out and
refitted), side by side in one run: a grid sweep of every depth (`--search grid --no-early-stop`: the
full grid is the reference) and a model-guided sweep (`--search model`), both with the tuner's
default workload, both real `python -m tuner sweep` runs through ansible-runner against real
emulator processes on this machine (tests/tuner/fixtures/local_emulator_deploy.yml: the sglang_server
role's contract with a plain process instead of a systemd unit; the emulator, the client, the
records and the analysis are the same as on emulator hosts). The tuner never reads the profiles.

Per machine: deployments made, wall time, and, at every concurrency level, the model sweep's pick
against the grid's: the grid's measurement of the model's pick as a share of the grid's best there.
A level passes when that share is at least 97% (the issue's rule, #18: no "same pick as the grid"
clause, since the grid's own pick may itself fall short of its best mean). Target (#18 as written):
on every machine every level passes, and the model sweeps' deployments average at most half the
grid's (the mean over the machines of model deployments / grid deployments). Runs before
2026-12-02 18:00 UTC judged the share per machine; the issue says "on average".

Writes bench/search_cost.md (or --out) and keeps each sweep's report, recommendation and records
under bench/search_cost/; exits 1 when a machine misses the target. `--grid-from DIR` takes the grid
sweeps from an earlier run's kept directories (DIR/<machine>/grid: results.csv, recommendation.json,
report.md) instead of sweeping them again, and says so: the grid is the reference and does not
change with the search; the model sweeps are run afresh. bench/search_replay.py replays a kept grid's
records through the search offline, to judge a change before paying for live sweeps.
Usage: .venv/bin/python bench/search_cost.py [--machines seed,deep-draft,no-spec-high-load,bent-step]
       [--repeats 2] [--requests-per-level 2x] [--grid-from bench/search_cost]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
sys.path.insert(0, str(ROOT))
from tuner_testlib import (  # noqa: E402
    emulator_clock,
    free_port,
    local_inventory,
    local_sweep_cmd,
    stop_local_emulators,
)

sys.path.insert(0, str(ROOT / "bench"))
from benchlib import machine_kept, note_kept  # noqa: E402
from search_replay import replay, share_text  # noqa: E402

from tuner.data.store import Store  # noqa: E402
from tuner.decide import analysis  # noqa: E402
from tuner.present.summary import summarize  # noqa: E402

VENV_BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
ENV.pop("SGLANG_API_KEY", None)
KEEP = (
    "report.md",
    "recommendation.json",
    "results.csv",
    "throughput_vs_steps.png",
    "records.jsonl",
    "sweep.json",
    "emulator_clock.json",
)
CLOCK = "emulator_clock.json"
PASS_SHARE = 0.97


@dataclass(frozen=True)
class Machine:
    name: str
    profile: Path
    steps: str
    what: str
    judged: bool = True  # part of the target (every machine is, since #18: the bent one too)


MACHINES = {
    m.name: m
    for m in (
        Machine(
            "seed",
            ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml",
            "1-8",
            "the seed deployment (Qwen3.5-122B, 4 x RTX PRO 6000); depths 7 and 8 cannot start",
        ),
        Machine(
            "deep-draft",
            ROOT / "bench" / "profiles" / "search-deep-draft.yaml",
            "1-8",
            "a dense model with a strong, cheap draft: the deepest depth wins at low load",
        ),
        Machine(
            "no-spec-high-load",
            ROOT / "bench" / "profiles" / "search-no-spec-high-load.yaml",
            "0-8",
            "a small model whose verify is compute-bound: no speculation wins at high load",
        ),
        Machine(
            "bent-step",
            ROOT / "bench" / "profiles" / "search-bent-step.yaml",
            "1-8",
            "step time not linear in depth (the emulator's t_draft_quad_ms): the misfit check",
        ),
        # Machines off the search's model (docs/emulator.md "Realism"): a measured step table,
        # acceptance falling by position and varying per prompt, CUDA-graph padding.
        Machine(
            "h200-llama3-8b",
            ROOT / "bench" / "profiles" / "h200-llama3-8b.yaml",
            "0-8",
            "a dense 8B on one H200 (measured step table) with an EAGLE-3-style head",
        ),
        Machine(
            "h200-steep-acceptance",
            ROOT / "bench" / "profiles" / "h200-steep-acceptance.yaml",
            "0-8",
            "the H200 8B with acceptance that falls steeply by position and a wide per-prompt spread",
        ),
        Machine(
            "h200-8b-1b-draft",
            ROOT / "bench" / "profiles" / "h200-8b-1b-draft.yaml",
            "0-6",
            "the H200 8B drafted by a separate 1B model, built for no speculation to win from 16 clients up "
            "(what it measured is below)",
        ),
        Machine(
            "h200-moe-64x1536",
            ROOT / "bench" / "profiles" / "h200-moe-64x1536.yaml",
            "0-8",
            "a 64-expert MoE on one H200 (measured step table): verify is dear at low load, nearly free at high",
        ),
        Machine(
            "h100-qwen2.5-14b",
            ROOT / "bench" / "profiles" / "h100-qwen2.5-14b.yaml",
            "0-8",
            "a dense 14B on one H100 (step table measured 2026-12-07, docs/gpu-step-cost-h100.md): a quarter "
            "of the H200 8B's KV pool",
        ),
    )
}


@dataclass
class Run:
    wall_s: float
    deployments: int
    skipped: int
    by_level: dict[int, str]  # concurrency -> chosen config id
    means: dict[tuple[str, int], float]  # (config id, concurrency) -> mean aggregate tok/s
    inside: tuple[int, int] | None  # levels inside their predicted interval, of those predicted
    misfits: list[str]
    out: Path
    # whether the emulator kept its model's clock through the sweep (tuner_testlib.emulator_clock;
    # None: not recorded, a sweep kept before the clock line existed)
    clock: dict[str, float] | None = None

    @property
    def clock_lost(self) -> bool:
        return bool(self.clock and self.clock.get("lag_resets"))


def clock_text(run: Run) -> str:
    c = run.clock
    if not c or not c.get("servers"):
        return "not recorded"
    if c.get("lag_resets"):
        return f"NO: {int(c['lag_resets'])} lag reset(s), max lag {c['max_lag_ms']:,.0f} ms"
    return f"yes (max lag {c['max_lag_ms']:,.0f} ms)"


def sweep(machine: Machine, inv: Path, state: Path, search: str, out: Path, repeats: int, requests: str) -> Run:
    cmd = local_sweep_cmd(
        out,
        inv,
        "-e",
        f"local_emu_profile={machine.profile}",
        "--steps",
        machine.steps,
        "--search",
        search,
        "--repeats",
        str(repeats),
        "--requests-per-level",
        requests,
        "--confirm",
        "0",  # the search's own deployments (the confirmation round's cost: bench/coverage.md)
        "--no-verify-exact",  # nor the correctness gate's redeploys (their cost: bench/verify_cost.md)
        "--quiet",
    )
    if search == "grid":
        cmd.append("--no-early-stop")
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    # the last server of the sweep logs its clock line when it stops; each sweep reads its own
    stop_local_emulators(state)
    (out / CLOCK).write_text(json.dumps(emulator_clock(state), indent=2) + "\n")
    for log in [*state.glob("*/log.all"), *state.glob("*/log")]:
        log.rename(log.with_name(log.name + f".{search}"))
    return read_run(out, search, wall)


def keep_run(run: Run, dest: Path) -> None:
    """Copy a fresh sweep's kept outputs (KEEP) into `dest`, and point the run there."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in KEEP:
        if (run.out / f).exists():
            shutil.copy2(run.out / f, dest / f)
    run.out = dest


def machine_names(ap: argparse.ArgumentParser, text: str) -> list[str]:
    """The --machines list, each checked against MACHINES (an argparse error names the known ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        if n not in MACHINES:
            ap.error(f"--machines: unknown machine {n!r} (known: {', '.join(MACHINES)})")
    return names


def read_run(out: Path, search: str, wall: float | None = None) -> Run:
    """A sweep's outcome from its output directory (a fresh one, or one kept by an earlier run:
    then its wall time is its records' first to last time stamp)."""
    store = Store(out)
    state = store.state()
    stats = analysis.aggregate(state.levels())
    rec = json.loads((out / "recommendation.json").read_text())
    # each level's pick as today's tuner makes it from the kept records (`python -m tuner report`):
    # a sweep kept from before a change of the choice's rule (the tie-break of 2026-12-02 17:51)
    # is judged by the rule the tool applies now, not by the words its run wrote then
    spec = store.read_spec()
    by_level = (
        {c: ch.chosen.config_id for c, ch in summarize(state, spec).choices.items()}
        if spec is not None
        else {int(c): v["config_id"] for c, v in rec["by_concurrency"].items()}
    )
    search_block = rec.get("search") or {}
    checked = search_block.get("predicted_vs_measured") or []
    if wall is None:
        stamps = [datetime.fromisoformat(r["time"]) for r in Store(out).records() if r.get("time")]
        wall = (max(stamps) - min(stamps)).total_seconds() if stamps else 0.0
    return Run(
        wall_s=wall,
        deployments=sum(1 for r in state.records if r.TYPE == "deploy"),
        skipped=sum(1 for r in state.skipped.values() if r.kind != "infeasible"),
        by_level=by_level,
        means={key: p.mean for key, p in stats.items()},
        inside=(sum(1 for c in checked if c["inside"]), len(checked)) if search == "model" else None,
        misfits=[
            f"{m['config_id']} {m['what']}: measured {m['measured']:,.0f}, predicted {m['predicted']['mean']:,.0f} "
            f"({_end(m['predicted']['lo'])}-{_end(m['predicted']['hi'])})"
            for m in search_block.get("misfits") or []
        ],
        out=out,
        clock=json.loads((out / CLOCK).read_text()) if (out / CLOCK).exists() else None,
    )


def _end(x: float | None) -> str:
    """An interval's end as kept: null where the capacity fit left it open."""
    return "open" if x is None else f"{x:,.0f}"


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


def sweeps_span(runs: Iterable[Run]) -> str | None:
    """When kept sweeps ran, from their records' stamps ("FIRST to LAST UTC"); None without any."""
    stamps = sorted(r["time"] for run in runs for r in Store(run.out).records() if r.get("time"))
    if not stamps:
        return None
    first, last = stamps[0], stamps[-1]
    return f"{first[:10]} {first[11:16]} to {last[:10]} {last[11:16]} UTC"


def page_dated(started: str, render: bool, runs: Iterable[Run]) -> str:
    """When a page's sweeps ran, for its header: "on STARTED" for a fresh run; a page rendered from
    kept sweeps is dated by their records' stamps ("run FIRST to LAST UTC"), not by the render."""
    span = sweeps_span(runs) if render else None
    return f"with `--render` from the kept sweeps, run {span}" if span else f"on {started}"


def startup_s(profile: Path) -> float:
    import yaml

    return float(yaml.safe_load(profile.read_text())["startup_s"])


def compare(grid: Run, model: Run) -> list[tuple[int, str, str, str, float, bool]]:
    """Per level: (C, grid's best, grid's pick, model's pick, model pick's share of the grid's best, pass)."""
    rows = []
    for c, g_pick in sorted(grid.by_level.items()):
        here = {cid: v for (cid, cc), v in grid.means.items() if cc == c}
        best = max(here, key=lambda k: here[k])
        m_pick = model.by_level.get(c, "-")
        share = here.get(m_pick, 0.0) / here[best] if here[best] else 0.0
        rows.append((c, best, g_pick, m_pick, share, share >= PASS_SHARE))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", default=",".join(MACHINES), help="comma-separated: " + ", ".join(MACHINES))
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="--repeats of both sweeps (default 1: with 2 the cells' intervals rest on one degree of freedom "
        "(t = 12.7) and nearly every level ends tied within noise, in the grid as in the search)",
    )
    ap.add_argument(
        "--requests-per-level",
        default="2x",
        help="--requests-per-level of both sweeps (default 2x: max(4, 2 x C) requests, the seed's count; "
        "the tuner's own default, the precision loop, costs about 3 times the level time)",
    )
    ap.add_argument(
        "--grid-from",
        type=Path,
        default=None,
        help="take the grid sweeps from the kept directories of an earlier run (DIR/<machine>/grid, with "
        "records.jsonl) instead of sweeping them again; the model sweeps run now",
    )
    ap.add_argument(
        "--render",
        action="store_true",
        help="sweep nothing: rebuild the tables (and the replays) from the kept directories",
    )
    ap.add_argument(
        "--note",
        default="",
        help="a paragraph printed under the header, e.g. the state of the machine the sweeps ran on (kept as "
        "note.md beside the sweeps: a later --render shows it)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "search_cost.md"))
    ap.add_argument("--keep", type=Path, default=None, help="where the sweeps are kept (default: --out without .md)")
    args = ap.parse_args()
    names = machine_names(ap, args.machines)
    keep_dir = args.keep or Path(args.out).with_suffix("")
    if args.render:
        args.grid_from = keep_dir
        missing = [n for n in names if not (keep_dir / n / "model").is_dir()]
        for n in missing:
            print(f"[{n}] no kept sweeps under {keep_dir / n}: left out of the rendered table", file=sys.stderr)
        names = [n for n in names if n not in missing]
    results: dict[str, tuple[Run, Run]] = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="sgt-search-cost-") as tmp:
        for name in names:
            machine = MACHINES[name]
            state = Path(tmp) / name / "state"
            state.mkdir(parents=True)
            inv = local_inventory(Path(tmp) / name / "inventory.yml", {f"local-{name}": free_port()}, state)
            try:
                runs = {}
                if args.grid_from is not None:
                    src = args.grid_from / name / "grid"
                    runs["grid"] = read_run(src, "grid")
                    dest = keep_dir / name / "grid"
                    if src.resolve() != dest.resolve():
                        shutil.copytree(src, dest, dirs_exist_ok=True)
                if args.render:
                    runs["model"] = read_run(keep_dir / name / "model", "model")
                for search in ("grid", "model"):
                    if search in runs:
                        continue
                    out = Path(tmp) / name / search
                    print(f"[{name}] --search {search} ...", file=sys.stderr, flush=True)
                    runs[search] = sweep(machine, inv, state, search, out, args.repeats, args.requests_per_level)
                    keep_run(runs[search], keep_dir / name / search)
                results[name] = (runs["grid"], runs["model"])
            finally:
                stop_local_emulators(state)
    dated = page_dated(started, args.render, (run for pair in results.values() for run in pair))
    replays = {name: replay(grid.out) for name, (grid, _) in results.items()}
    where, note = machine_kept(keep_dir, not args.render), note_kept(keep_dir, args.note)

    lines = [
        "# Model-guided search vs the grid",
        "",
        f"Generated by `bench/search_cost.py` {dated} ({where}, shared "
        "machine). Each machine: `python -m tuner sweep --search grid --no-early-stop` (every depth: the "
        "reference) and `--search model` on the same host, with the tuner's default "
        f"workload (256 in / 256 out tokens, temperature 0, concurrency 1, 4, 16, 32, 64) at "
        f"`--requests-per-level {args.requests_per_level}` and {args.repeats} repeat(s). "
        + (
            f"**The grid sweeps are the ones kept from an earlier run** (`--grid-from {_rel(args.grid_from)}`: "
            "the reference does not change with the search; their wall times are that run's); the model "
            "sweeps ran now. "
            if args.grid_from is not None and not args.render
            else ""
        )
        + "Where: **local emulator processes** through ansible-runner "
        "(tests/tuner/fixtures/local_emulator_deploy.yml, 0.2 s emulated start-up), not podman hosts: the same "
        "emulator, client and analysis, minutes faster per sweep. A level passes when the model's pick, as the "
        f"grid measured it, is within {100 - PASS_SHARE * 100:.0f}% of the grid's best there (the grid's own pick "
        "gets no pass of its own). Each sweep's report and recommendation are kept in "
        f"`{_rel(keep_dir)}/<machine>/<search>/`.",
        "",
        "Two sweeps of the same machine differ by the noise of their measurements as well as by their "
        "search: with "
        + ("one repeat" if args.repeats == 1 else f"{args.repeats} repeats")
        + (
            " of max(4, 2C) requests"
            if args.requests_per_level == "2x"
            else f" at `--requests-per-level {args.requests_per_level}`"
        )
        + " a level's throughput moves by a few percent between "
        "runs, so a level can fail although both sweeps measured the same configurations. The last two "
        "columns take that noise out: bench/search_replay.py replays the search on **the grid's own "
        "measurements** (each configuration it deploys reads the grid's records of it) and judges its picks "
        "the same way: the search's decisions alone.",
        "",
        *([note, ""] if note else []),
        "| machine | depths | grid deployments | model deployments | share | grid wall | model wall | "
        "with the profile's start-up (grid / model) | levels passing | predictions inside their interval | "
        "every level passes | replayed on the grid's measurements: deployments | replay: levels passing | "
        "the emulator kept its clock (grid / model) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok_all = replay_all = True
    shares: list[float] = []
    replay_shares: list[float] = []
    lost: list[str] = []
    details = []
    for name, (grid, model) in results.items():
        machine = MACHINES[name]
        rows = compare(grid, model)
        passing = sum(1 for r in rows if r[5])
        valid = not (grid.clock_lost or model.clock_lost)
        ok = passing == len(rows) and valid
        if not valid:
            lost.append(name)
        if machine.judged:
            ok_all &= ok
        st = startup_s(machine.profile)
        inside = f"{model.inside[0]}/{model.inside[1]}" if model.inside and model.inside[1] else "-"
        rp = replays[name]
        r_n, r_total, r_rows, r_pass = len(rp.deployed), rp.planned, rp.rows, rp.passing
        replay_ok = r_pass == len(r_rows) and not grid.clock_lost
        if machine.judged:
            replay_all &= replay_ok
            shares.append(model.deployments / grid.deployments)
            replay_shares.append(r_n / r_total)
        lines.append(
            f"| {name} | {machine.steps} | {grid.deployments} | {model.deployments} | "
            f"{model.deployments / grid.deployments:.0%} | {grid.wall_s / 60:.1f} min | {model.wall_s / 60:.1f} min | "
            f"{(grid.wall_s + grid.deployments * st) / 60:.0f} / {(model.wall_s + model.deployments * st) / 60:.0f} min "
            f"({st:.0f} s each) | {passing}/{len(rows)} | {inside} | "
            f"{('yes' if ok else ('NO' if valid else 'NO: not a valid measurement')) if machine.judged else 'n/a'} | "
            f"{r_n} of {r_total} ({r_n / r_total:.0%}) | {r_pass}/{len(r_rows)} | "
            f"{clock_text(grid)} / {clock_text(model)} |"
        )
        details += [
            "",
            f"## {name}: {machine.what}",
            "",
            f"Profile `{_rel(machine.profile)}`, `--steps {machine.steps}`. The model sweep deployed "
            f"{model.deployments} configuration(s) and skipped {model.skipped} on its predictions "
            f"(`{_rel(keep_dir)}/{name}/model/report.md` lists each with its prediction).",
            "",
            "| concurrency | grid's best (tok/s) | grid's pick | model's pick | model's pick in the grid run | passes |",
            "|---|---|---|---|---|---|",
        ]
        for c, best, g_pick, m_pick, share, passed in rows:
            details.append(
                f"| {c} | {best} ({grid.means[(best, c)]:.0f}) | {g_pick} | {m_pick} | {share_text(share)} of best | "
                f"{'yes' if passed else 'NO'} |"
            )
        details += [
            "",
            f"Replayed on the grid's measurements: {r_n} of {r_total} deployed"
            + (
                f" ({len(rp.misfits)} level(s) of {', '.join(dict.fromkeys(m.config.config_id for m in rp.misfits))} "
                "measured outside their predicted interval: misfits)"
                if rp.misfits
                else ""
            )
            + "; picks "
            + ", ".join(f"C={c} {pick} ({share_text(share)})" for c, _best, pick, share in r_rows)
            + ".",
        ]
    lines += details
    for name, (_grid, model) in results.items():
        if model.misfits:
            lines += ["", f"Misfits the model sweep on {name} caught (and refitted after):", ""]
            lines += [f"- {m}" for m in model.misfits]
    if lost:
        lines += [
            "",
            "**Not valid measurements of their profiles: "
            + ", ".join(lost)
            + ".** The emulator fell behind its own clock more than its limit allows during these sweeps (lag "
            "resets: the model's time was lost, tuner/emulator/engine.py), so their throughputs measure this "
            "machine's CPU at that moment, not the profile: they count as not met and must be re-run on a quiet "
            "machine.",
        ]
    mean_share = sum(shares) / len(shares) if shares else 1.0
    replay_mean = sum(replay_shares) / len(replay_shares) if replay_shares else 1.0
    met = ok_all and mean_share <= 0.5
    replay_met = replay_all and replay_mean <= 0.5
    lines += [
        "",
        "Result, by the rule stated before the run (on every machine every level's pick within 3% of the grid's "
        "best; the model sweeps' deployments at most half the grid's on average over the machines; every machine "
        "judged, the misfit check included): live sweeps: "
        f"{'every level passes on every machine' if ok_all else 'NOT every level passes on every machine'}, "
        f"{mean_share:.0%} of the grid's deployments on average, so **the target is {'met' if met else 'NOT met'}**; "
        f"replayed on the grid's own measurements: "
        f"{'every level passes on every machine' if replay_all else 'NOT every level passes on every machine'}, "
        f"{replay_mean:.0%} on average, **{'met' if replay_met else 'NOT met'}**.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
