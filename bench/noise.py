#!/usr/bin/env python3
"""Benchmark: do the tuner's statistics make its answer repeatable, and what does --precision cost?

On one local host (the emulator as a plain process, deployed through the real `python -m tuner
sweep` with the test play tests/tuner/fixtures/local_emulator_deploy.yml, which restarts the
server on every deploy), side by side in one run, interleaved so that machine drift hits both
alike:

- five sweeps **without the statistics**: the count the tuner used before issue #11 (max(4, 2 x C)
  requests per level, `--requests-per-level 2x`) and the rule it used then (the highest mean
  wins; within 1% the fewer steps);
- five sweeps **with them**: the precision loop (`--precision 2`), a winner named only beyond
  noise, else "tied within noise" and the tie-break (more KV capacity, then fewer steps).

It reports, per level, how often two sweeps named different winners (over the 10 pairs of
sweeps), and whether a winner named beyond noise in one sweep was ever beaten beyond noise in
another (it must never be). Then the cost: one more set of sweeps with a fixed count large enough
for every cell to reach the same interval width (the most the precision loop needed anywhere,
in requests per unit of concurrency: a fixed count must be chosen before knowing which cell is
noisy) against the precision loop's own time.

The profile: the seed profile with `noise` keys when the emulator has them (`--noise-run-pct`,
`--noise-restart-pct`), else the emulator's own noise (acceptance draws per step, a fresh random
seed per start, timing jitter of a shared machine). Levels: concurrency 4 (where depth 4 clearly
beats 3) and 32 (where depths 3 and 4 are within ~2%), 64 output tokens: bounded load, minutes.

Writes bench/noise.md (or --out); exits 1 when a confidently named winner is beaten beyond noise.
Usage: .venv/bin/python bench/noise.py [--sweeps 5] [--steps 2-4] [--concurrency 4,32]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from tuner_testlib import free_port, local_inventory, stop_local_emulators  # noqa: E402

from tuner.records import SweepState  # noqa: E402
from tuner.store import Store  # noqa: E402
from tuner.summary import summarize  # noqa: E402

PLAY = ROOT / "tests" / "tuner" / "fixtures" / "local_emulator_deploy.yml"
SEED = ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml"
VENV_BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
}


def noisy_profile(path: Path, run_pct: float, restart_pct: float) -> list[str]:
    """The seed profile, with the emulator's noise keys where it knows them; returns what was set."""
    prof = yaml.safe_load(SEED.read_text())
    prof["name"] = "seed-noisy"
    notes = []
    try:
        from tuner.emulator import profile as emu_profile

        known = set(getattr(emu_profile, "_OPTIONAL_DEFAULTS", {})) | set(getattr(emu_profile, "_REQUIRED", {}))
    except ImportError:  # pragma: no cover
        known = set()
    for key, value in (("noise_run_pct", run_pct), ("noise_restart_pct", restart_pct)):
        if key in known and value:
            prof[key] = value
            notes.append(f"{key}: {value}")
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return notes


def sweep(inv: Path, profile: Path, out: Path, args: argparse.Namespace, extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner",
            "sweep",
            "--inventory",
            str(inv),
            "--playbook",
            str(PLAY),
            "-e",
            f"project_dir={ROOT}",
            "-e",
            f"local_emu_profile={profile}",
            "--steps",
            args.steps,
            "--concurrency",
            args.concurrency,
            "--input-len",
            "64",
            "--output-len",
            str(args.output_len),
            "--warmup-requests",
            "2",
            "--no-early-stop",
            "--out",
            str(out),
            "--quiet",
            *extra,
        ],
        cwd=ROOT,
        env=ENV,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def old_rule(points: list) -> str:
    """The choice before issue #11: the highest mean; within 1% of it, the fewest steps."""
    best = max(points, key=lambda p: p.mean)
    near = [p for p in points if best.mean - p.mean <= 0.01 * best.mean]
    return min(near, key=lambda p: p.order_key).config_id


def analyse(out: Path) -> dict:
    st = Store(out)
    spec = st.read_spec()
    state: SweepState = st.state()
    s = summarize(state, spec)
    levels: dict[int, dict] = {}
    for c in s.levels:
        pts = [p for (cid, cc), p in s.stats.items() if cc == c]
        ch = s.choices.get(c)
        levels[c] = {
            "naive": old_rule(pts),
            "chosen": ch.chosen.config_id if ch else None,
            "best": ch.best.config_id if ch else None,
            "tied": bool(ch and ch.tied),
            "equivalent": list(ch.equivalent) if ch else [],
            "intervals": {p.config_id: (p.interval.low, p.interval.high, p.mean) for p in pts},
            "precision": {p.config_id: p.precision_pct for p in pts},
            "requests": {p.config_id: sum(lv.metrics.requests for lv in p.levels) for p in pts},
        }
    level_s = sum(lv.bench_s or 0.0 for lv in state.levels(measured_only=False))
    n_req = sum(lv.metrics.requests for lv in state.levels(measured_only=False))
    return {"levels": levels, "level_s": level_s, "requests": n_req}


def disagreement(names: list[str | None]) -> tuple[int, int]:
    pairs = list(itertools.combinations(names, 2))
    return sum(1 for a, b in pairs if a != b), len(pairs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("--steps", default="2-4")
    ap.add_argument("--concurrency", default="4,32")
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--precision", default="2")
    ap.add_argument("--noise-run-pct", type=float, default=2.0, help="run-to-run noise, when the emulator has it")
    ap.add_argument("--noise-restart-pct", type=float, default=3.0, help="restart noise, when the emulator has it")
    ap.add_argument("--out", default=str(ROOT / "bench" / "noise.md"))
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="sgt-noise-") as tmp:
        tmpd = Path(tmp)
        state = tmpd / "state"
        state.mkdir()
        profile = tmpd / "seed-noisy.yaml"
        noise_keys = noisy_profile(profile, args.noise_run_pct, args.noise_restart_pct)
        inv = local_inventory(tmpd / "inventory.yml", {"noise-a": free_port()}, state)
        stats_runs: list[dict] = []
        naive_runs: list[dict] = []
        stats_s: list[float] = []
        naive_s: list[float] = []
        try:
            for i in range(args.sweeps):
                for mode in ("stats", "naive"):
                    out = tmpd / f"{mode}-{i + 1}"
                    extra = ["--precision", args.precision] if mode == "stats" else ["--requests-per-level", "2x"]
                    took = sweep(inv, profile, out, args, extra)
                    res = analyse(out)
                    (stats_runs if mode == "stats" else naive_runs).append(res)
                    (stats_s if mode == "stats" else naive_s).append(took)
                    print(f"{mode} sweep {i + 1}: {took:.0f} s, levels {res['level_s']:.0f} s", file=sys.stderr)
            # the fixed count that gives every cell the precision loop's width: the most requests per
            # unit of concurrency the loop needed in any cell of any sweep
            need = max(
                math.ceil(n / c) for r in stats_runs for c, lv in r["levels"].items() for n in lv["requests"].values()
            )
            fixed_runs: list[dict] = []
            fixed_s: list[float] = []
            for i in range(2):
                out = tmpd / f"fixed-{i + 1}"
                took = sweep(inv, profile, out, args, ["--requests-per-level", f"{need}x"])
                fixed_runs.append(analyse(out))
                fixed_s.append(took)
                print(f"fixed sweep {i + 1} ({need}x): {took:.0f} s", file=sys.stderr)
        finally:
            stop_local_emulators(state)
    text = report(args, levels, stats_runs, naive_runs, fixed_runs, need, noise_keys, started)
    Path(args.out).write_text(text)
    print(text)
    beaten = confident_beaten(stats_runs, levels)
    return 1 if beaten else 0


def confident_beaten(runs: list[dict], levels: list[int]) -> list[str]:
    """Winners named beyond noise in one sweep that another sweep shows beaten beyond noise."""
    out = []
    for i, r in enumerate(runs):
        for c in levels:
            lv = r["levels"][c]
            if lv["tied"] or lv["chosen"] is None:
                continue
            w = lv["chosen"]
            for j, other in enumerate(runs):
                ivs = other["levels"][c]["intervals"]
                if w not in ivs:
                    continue
                for cid, (lo, _hi, _m) in ivs.items():
                    if cid != w and lo > ivs[w][1]:
                        out.append(f"C={c}: {w} named in sweep {i + 1}, beaten by {cid} in sweep {j + 1}")
    return out


def report(args, levels, stats_runs, naive_runs, fixed_runs, need, noise_keys, started) -> str:  # noqa: ANN001
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    lines = [
        "# Noise: repeatable answers with the statistics, and what the precision loop costs",
        "",
        f"Generated by `bench/noise.py` on {now} ({platform.node() or 'host'}, {os.cpu_count()} CPUs, load "
        f"{load[0]:.1f} at the end; {(time.time() - started) / 60:.1f} min). One local host: the emulator as a "
        "plain process, deployed by `python -m tuner sweep` through tests/tuner/fixtures/local_emulator_deploy.yml "
        f"(a restart per deploy), seed profile"
        + (f" with {', '.join(noise_keys)}" if noise_keys else " and the emulator's own noise (no noise keys yet)")
        + f"; steps {args.steps}, concurrency {args.concurrency}, 64 input / {args.output_len} output tokens, "
        "temperature 0. Sweeps of the two kinds alternate.",
        "",
        "- **without the statistics**: `--requests-per-level 2x` (the count before issue #11) and the rule "
        "then: highest mean, within 1% the fewer steps;",
        f"- **with them**: `--precision {args.precision}` (the default), winner only beyond noise, else tied "
        "within noise and the tie-break (more KV capacity, then fewer steps).",
        "",
        "## Named winners, sweep by sweep",
        "",
    ]
    header = ["sweep"] + [f"C={c} without" for c in levels] + [f"C={c} with (verdict)" for c in levels]
    rows = []
    for i, (n, s) in enumerate(zip(naive_runs, stats_runs, strict=True)):
        cells = [n["levels"][c]["naive"] for c in levels]
        for c in levels:
            lv = s["levels"][c]
            lo, hi, _m = lv["intervals"][lv["chosen"]]
            v = "tied: " + "/".join(lv["equivalent"]) if lv["tied"] else "beyond noise"
            cells.append(f"{lv['chosen']} ({v}; [{lo:.0f}, {hi:.0f}])")
        rows.append([str(i + 1)] + cells)
    lines += _table(header, rows)
    lines += ["", "## How often two sweeps disagree", ""]
    hdr = [
        "level",
        "without: pairs naming different winners",
        "with: pairs choosing differently",
        "with: winners named beyond noise",
        "with: of those, beaten beyond noise in another sweep",
    ]
    beaten = confident_beaten(stats_runs, levels)
    rows = []
    for c in levels:
        d0, n0 = disagreement([r["levels"][c]["naive"] for r in naive_runs])
        d1, n1 = disagreement([r["levels"][c]["chosen"] for r in stats_runs])
        named = sum(1 for r in stats_runs if not r["levels"][c]["tied"])
        b = sum(1 for x in beaten if x.startswith(f"C={c}:"))
        rows.append([f"C={c}", f"{d0} of {n0}", f"{d1} of {n1}", f"{named} of {len(stats_runs)}", str(b)])
    lines += _table(hdr, rows)
    lines += [""] + (
        [f"- {x}" for x in beaten] or ["No winner named beyond noise was beaten beyond noise in another sweep."]
    )
    # cost
    prec = [r for r in stats_runs]
    lines += [
        "",
        "## What --precision costs, against a fixed count for the same interval width",
        "",
        f"A fixed count must be chosen before the noise is known, so to give every cell the width the "
        f"precision loop reached it must be the most the loop needed anywhere: {need} x C requests per level "
        f"(`--requests-per-level {need}x`). Level time is the levels' own time (deploys excluded).",
        "",
    ]
    hdr = [
        "",
        "sweeps",
        "requests per sweep (mean)",
        "level time per sweep (mean, s)",
        "cells within the target width",
        "widest cell (+-%)",
    ]

    def cells_ok(runs: list[dict]) -> tuple[str, float]:
        tot = ok = 0
        widest = 0.0
        for r in runs:
            for lv in r["levels"].values():
                for p in lv["precision"].values():
                    if p is None:
                        continue
                    tot += 1
                    ok += p <= float(args.precision) + 1e-9
                    widest = max(widest, p)
        return f"{ok} of {tot}", widest

    rows = []
    for name, runs in (
        (f"precision loop (+-{args.precision}%)", prec),
        (f"fixed {need} x C", fixed_runs),
        ("fixed 2 x C (before #11)", naive_runs),
    ):
        within, widest = cells_ok(runs)
        rows.append(
            [
                name,
                str(len(runs)),
                f"{sum(r['requests'] for r in runs) / len(runs):.0f}",
                f"{sum(r['level_s'] for r in runs) / len(runs):.1f}",
                within,
                f"{widest:.1f}",
            ]
        )
    lines += _table(hdr, rows)
    p_s = sum(r["level_s"] for r in prec) / len(prec)
    f_s = sum(r["level_s"] for r in fixed_runs) / len(fixed_runs)
    lines += [
        "",
        f"The precision loop took {p_s / f_s:.2f} x the fixed count's level time ({(1 - p_s / f_s) * 100:.0f}% saved).",
    ]
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


if __name__ == "__main__":
    sys.exit(main())
