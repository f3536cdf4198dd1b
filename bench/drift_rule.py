#!/usr/bin/env python3
"""Benchmark: how often does the gate's drift rule fail a healthy configuration, and what does it catch?

The correctness gate (plugins/module_utils/sglang_verify.py `acceptance_drift`, docs/tuner.md
"Pass rules") compares the acceptance of its four long prompts' second sends with their first and
fails a configuration whose second sends fall beyond DRIFT_Z standard errors of a noise it
estimates from the outputs themselves (and beyond DRIFT_MIN_DROP). A sweep judges every
speculative configuration it measures, so a rule that fails one healthy configuration in a few
hundred excludes a correct one (perhaps the best) in a few sweeps of every hundred.

This simulates the gate's long sends as the emulator serves them (tuner/emulator/engine.py: every
verify pass accepts a chain of drafts, position j accepted with probability a_j given the ones
before, drawn afresh each pass; 4 prompts x 384 tokens on each send), on four acceptance shapes,
with the second sends' acceptance moved down on the logit scale by 0 (healthy) or by a drift, and
counts how often the rule fires at z = 3 (the rule before 2026-12-03) and z = 4 (the rule since).
It also reports the drop over the noise estimate's mean and sd on the healthy runs: a calibrated
estimate gives about 0 and 1. Each run is judged twice, on the same draws, by the rule's two
noise estimates: from blocks of each output (a server that sends its verify count on every chunk)
and from each output's acceptance histogram (what real SGLang sends: its counts come on the
finished chunk only, so an output is one block). Seeded: the same arguments give the same table.

Writes bench/drift_rule.md and its counts to bench/drift_rule/counts.json (`--render` rebuilds the
table from them). Usage: .venv/bin/python bench/drift_rule.py [--healthy 6000] [--drifted 1500]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev  # noqa: E402  (bench/: the script's own directory)
from sglang_utils.sglang_verify import DRIFT_MIN_DROP, DRIFT_Z, acceptance_drift  # noqa: E402

from tuner.emulator.workload import shift_logit  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "helpers"))
from gate_draws import drawn_output  # noqa: E402  (the gate's long outputs, simulated; the drift test's too)

OUT = ROOT / "bench" / "drift_rule.md"
DATA = ROOT / "bench" / "drift_rule" / "counts.json"
SHAPES = {
    "flat 0.8 x4": [0.8] * 4,
    "falling 0.9..0.6 x7": [0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6],
    "flat 0.95 x7": [0.95] * 7,
    "flat 0.6 x3": [0.6] * 3,
}
DRIFTS = (0.0, 0.2, 0.4, 0.84)  # logit drop of the second sends
ZS = (3.0, 4.0)
METHODS = ("blocks", "histogram")  # the rule's two noise estimates (plugins/module_utils/sglang_verify.py)
PROMPTS, TOKENS = 4, 384


def as_sglang_reports(steps: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """An output as SGLang reports it: one (tokens, verify passes) step from the finished chunk, and
    its histogram of passes by drafts accepted (a pass of n tokens accepted n - 1)."""
    hist = [0] * max(n for n, _v in steps)
    for n, _v in steps:
        hist[n - 1] += 1
    return [(sum(n for n, _v in steps), len(steps))], hist


def simulate(runs: int, alphas: list[float], drop: float, seed: int) -> dict[str, object]:
    """`runs` gate runs: per noise estimate, the rule's firings at each z and the healthy z-scores'
    mean and sd."""
    rng = random.Random(seed)
    out: dict[str, object] = {"runs": runs}
    fired = {m: {f"{z:g}": 0 for z in ZS} for m in METHODS}
    zscores: dict[str, list[float]] = {m: [] for m in METHODS}
    after = [shift_logit(a, -drop) for a in alphas]  # the accept-drift fault's way: down on the logit scale
    for _run in range(runs):
        first = [drawn_output(rng, alphas, TOKENS) for _ in range(PROMPTS)]
        again = [drawn_output(rng, after, TOKENS) for _ in range(PROMPTS)]
        f_rep, a_rep = [as_sglang_reports(o) for o in first], [as_sglang_reports(o) for o in again]
        judged = {
            "blocks": acceptance_drift(first, again),
            "histogram": acceptance_drift(
                [s for s, _h in f_rep],
                [s for s, _h in a_rep],
                first_hists=[h for _s, h in f_rep],
                again_hists=[h for _s, h in a_rep],
            ),
        }
        for m, d in judged.items():
            if not d["noise"]:
                continue
            z = d["drop"] / d["noise"]
            zscores[m].append(z)
            for zz in ZS:
                fired[m][f"{zz:g}"] += int(z > zz and d["drop"] > DRIFT_MIN_DROP * d["first"])
    for m in METHODS:
        key = "" if m == "blocks" else "_" + m
        out["fired" + key] = fired[m]
        out["z_mean" + key] = statistics.fmean(zscores[m]) if zscores[m] else None
        out["z_sd" + key] = statistics.pstdev(zscores[m]) if zscores[m] else None
    return out


def render(data: dict) -> str:
    lines = [
        "# The correctness gate's drift rule: false alarms and power",
        "",
        f"Written by `bench/drift_rule.py` from `bench/drift_rule/counts.json` (run {data['when']}, "
        f"git {data['git']}, seeded simulation, {PROMPTS} long prompts x {TOKENS} tokens per send). "
        "Acceptance per verify pass as the emulator draws it; the second sends' acceptance moved down "
        "on the logit scale by the drift. A cell is the share of runs the rule failed: at drift 0 a "
        "false alarm, above it a catch.",
        "",
        "| acceptance by position | drift (logit) | runs | noise from | fails at z = 3 | fails at z = 4 | z mean, sd (healthy) |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    methods = [m for m in METHODS if ("fired" if m == "blocks" else "fired_" + m) in data["rows"][0]]
    healthy = {m: {f"{z:g}": [0, 0] for z in ZS} for m in methods}
    for row in data["rows"]:
        for m in methods:
            key = "" if m == "blocks" else "_" + m
            fired = row["fired" + key]
            calib = ""
            if row["drift"] == 0.0:
                calib = f"{row['z_mean' + key]:+.3f}, {row['z_sd' + key]:.3f}"
                for z in healthy[m]:
                    healthy[m][z][0] += fired[z]
                    healthy[m][z][1] += row["runs"]
            cells = " | ".join(f"{fired[f'{z:g}'] / row['runs']:.4f}" for z in ZS)
            lines.append(f"| {row['shape']} | {row['drift']:g} | {row['runs']} | {m} | {cells} | {calib} |")
    lines.append("")
    rates = {m: {z: f / n for z, (f, n) in healthy[m].items()} for m in methods}
    for m in methods:
        lines.append(
            f"Healthy runs over all shapes, noise from {m}: "
            + ", ".join(
                f"z = {z}: {f} of {n} failed (1 in {n / f:,.0f})" if f else f"z = {z}: 0 of {n} failed"
                for z, (f, n) in healthy[m].items()
            )
            + "."
        )
    rule = (
        f"the rule's z ({DRIFT_Z:g}) fails at most 1 healthy run in 2,000 over all shapes, with either noise estimate"
    )
    ok = all(rates[m][f"{DRIFT_Z:g}"] <= 1 / 2000 for m in methods)
    lines.append("")
    lines.append(
        f"**Result** (the rule it judges by: {rule}): {'MET' if ok else 'NOT met'} ("
        + ", ".join(f"{m} {rates[m][f'{DRIFT_Z:g}']:.5f}" for m in methods)
        + ")."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--healthy", type=int, default=6000, help="runs per shape without drift")
    ap.add_argument("--drifted", type=int, default=1500, help="runs per shape and drift")
    ap.add_argument("--render", action="store_true", help="rebuild the table from the kept counts")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    if not args.render:
        rows = []
        t0 = time.time()
        for i, (name, alphas) in enumerate(SHAPES.items()):
            for j, drop in enumerate(DRIFTS):
                runs = args.healthy if drop == 0.0 else args.drifted
                res = simulate(runs, alphas, drop, seed=1000 * i + j)
                rows.append({"shape": name, "alphas": alphas, "drift": drop, **res})
                print(f"{name} drift {drop:g}: {res['fired']} of {runs} ({time.time() - t0:.0f} s)", flush=True)
        DATA.parent.mkdir(parents=True, exist_ok=True)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        DATA.write_text(json.dumps({"when": when, "git": git_rev(), "rows": rows}, indent=1) + "\n")
    args.out.write_text(render(json.loads(DATA.read_text())))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
