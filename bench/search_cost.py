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
A level passes when that share is at least 97% (or the model picked what the grid picked). Target:
every level passes with at most half the grid's deployments.

Writes bench/search_cost.md (or --out) and keeps each sweep's report and recommendation under
bench/search_cost/; exits 1 when a machine misses the target.
Usage: .venv/bin/python bench/search_cost.py [--machines seed,deep-draft,no-spec-high-load,bent-step] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
sys.path.insert(0, str(ROOT))
from tuner_testlib import free_port, local_inventory, local_sweep_cmd, stop_local_emulators  # noqa: E402

from tuner import analysis  # noqa: E402
from tuner.store import Store  # noqa: E402

VENV_BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
ENV.pop("SGLANG_API_KEY", None)
KEEP = ("report.md", "recommendation.json", "results.csv", "throughput_vs_steps.png")
PASS_SHARE = 0.97


@dataclass(frozen=True)
class Machine:
    name: str
    profile: Path
    steps: str
    what: str
    judged: bool = True  # part of the target (the bent machine checks misfits instead)


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
            judged=False,
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


def sweep(machine: Machine, inv: Path, search: str, out: Path, repeats: int) -> Run:
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
        "--quiet",
    )
    if search == "grid":
        cmd.append("--no-early-stop")
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    state = Store(out).state()
    stats = analysis.aggregate(state.levels())
    rec = json.loads((out / "recommendation.json").read_text())
    search_block = rec.get("search") or {}
    checked = search_block.get("predicted_vs_measured") or []
    return Run(
        wall_s=wall,
        deployments=sum(1 for r in state.records if r.TYPE == "deploy"),
        skipped=sum(1 for r in state.skipped.values() if r.kind != "infeasible"),
        by_level={int(c): v["config_id"] for c, v in rec["by_concurrency"].items()},
        means={key: p.mean for key, p in stats.items()},
        inside=(sum(1 for c in checked if c["inside"]), len(checked)) if search == "model" else None,
        misfits=[
            f"{m['config_id']} {m['what']}: measured {m['measured']:,.0f}, predicted {m['predicted']['mean']:,.0f} "
            f"({m['predicted']['lo']:,.0f}-{m['predicted']['hi']:,.0f})"
            for m in search_block.get("misfits") or []
        ],
        out=out,
    )


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


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
        rows.append((c, best, g_pick, m_pick, share, m_pick == g_pick or share >= PASS_SHARE))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", default=",".join(MACHINES), help="comma-separated: " + ", ".join(MACHINES))
    ap.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="--repeats of both sweeps (default 2: one run of a level at low concurrency varies by a few "
        "percent with the acceptance draws alone, and the grid is the reference)",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "search_cost.md"))
    args = ap.parse_args()
    names = [n.strip() for n in args.machines.split(",") if n.strip()]
    for n in names:
        if n not in MACHINES:
            ap.error(f"--machines: unknown machine {n!r} (known: {', '.join(MACHINES)})")
    keep_dir = Path(args.out).with_suffix("")
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
                for search in ("grid", "model"):
                    out = Path(tmp) / name / search
                    print(f"[{name}] --search {search} ...", file=sys.stderr, flush=True)
                    runs[search] = sweep(machine, inv, search, out, args.repeats)
                    dest = keep_dir / name / search
                    dest.mkdir(parents=True, exist_ok=True)
                    for f in KEEP:
                        if (out / f).exists():
                            shutil.copy2(out / f, dest / f)
                results[name] = (runs["grid"], runs["model"])
            finally:
                stop_local_emulators(state)

    lines = [
        "# Model-guided search vs the grid",
        "",
        f"Generated by `bench/search_cost.py` on {started} ({platform.node()}, {os.cpu_count()} CPUs, shared "
        "machine). Each machine: `python -m tuner sweep --search grid --no-early-stop` (every depth: the "
        "reference) and `--search model`, one after the other on the same host, with the tuner's default "
        f"workload (256 in / 256 out tokens, temperature 0, concurrency 1, 4, 16, 32, 64, max(4, 2C) requests "
        f"per level, {args.repeats} repeat(s)). Where: **local emulator processes** through ansible-runner "
        "(tests/tuner/fixtures/local_emulator_deploy.yml, 0.2 s emulated start-up), not podman hosts: the same "
        "emulator, client and analysis, minutes faster per sweep. A level passes when the model's pick, as the "
        f"grid measured it, is within {100 - PASS_SHARE * 100:.0f}% of the grid's best there (or is the grid's own "
        "pick). Each sweep's report and recommendation are kept in "
        f"`{_rel(keep_dir)}/<machine>/<search>/`.",
        "",
        "| machine | depths | grid deployments | model deployments | share | grid wall | model wall | "
        "with the profile's start-up (grid / model) | levels passing | predictions inside their interval | target met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ok_all = True
    details = []
    for name, (grid, model) in results.items():
        machine = MACHINES[name]
        rows = compare(grid, model)
        passing = sum(1 for r in rows if r[5])
        half = model.deployments <= grid.deployments / 2
        ok = half and passing == len(rows)
        if machine.judged:
            ok_all &= ok
        st = startup_s(machine.profile)
        inside = f"{model.inside[0]}/{model.inside[1]}" if model.inside and model.inside[1] else "-"
        lines.append(
            f"| {name} | {machine.steps} | {grid.deployments} | {model.deployments} | "
            f"{model.deployments / grid.deployments:.0%} | {grid.wall_s / 60:.1f} min | {model.wall_s / 60:.1f} min | "
            f"{(grid.wall_s + grid.deployments * st) / 60:.0f} / {(model.wall_s + model.deployments * st) / 60:.0f} min "
            f"({st:.0f} s each) | {passing}/{len(rows)} | {inside} | "
            f"{('yes' if ok else 'NO') if machine.judged else 'n/a (misfit check)'} |"
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
                f"| {c} | {best} ({grid.means[(best, c)]:.0f}) | {g_pick} | {m_pick} | {share:.1%} of best | "
                f"{'yes' if passed else 'NO'} |"
            )
    lines += details
    for name, (_grid, model) in results.items():
        if model.misfits:
            lines += ["", f"Misfits the model sweep on {name} caught (and refitted after):", ""]
            lines += [f"- {m}" for m in model.misfits]
    lines += [
        "",
        f"Result: **{'the target is met on every machine' if ok_all else 'the target is NOT met on every machine'}**"
        " (every level's pick within 3% of the grid's best, with at most half the grid's deployments; the "
        "misfit check is not judged by it).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
