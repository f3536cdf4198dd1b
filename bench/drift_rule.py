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
estimate gives about 0 and 1. Seeded: the same arguments give the same table.

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
PROMPTS, TOKENS = 4, 384


def simulate(runs: int, alphas: list[float], drop: float, seed: int) -> dict[str, object]:
    """`runs` gate runs: the rule's firings at each z and the healthy z-scores' mean and sd."""
    rng = random.Random(seed)
    fired = {f"{z:g}": 0 for z in ZS}
    zscores = []
    after = [shift_logit(a, -drop) for a in alphas]  # the accept-drift fault's way: down on the logit scale
    for _run in range(runs):
        first = [drawn_output(rng, alphas, TOKENS) for _ in range(PROMPTS)]
        again = [drawn_output(rng, after, TOKENS) for _ in range(PROMPTS)]
        d = acceptance_drift(first, again)
        if not d["noise"]:
            continue
        z = d["drop"] / d["noise"]
        zscores.append(z)
        for zz in ZS:
            fired[f"{zz:g}"] += int(z > zz and d["drop"] > DRIFT_MIN_DROP * d["first"])
    return {
        "runs": runs,
        "fired": fired,
        "z_mean": statistics.fmean(zscores) if zscores else None,
        "z_sd": statistics.pstdev(zscores) if zscores else None,
    }


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
        "| acceptance by position | drift (logit) | runs | fails at z = 3 | fails at z = 4 | z mean, sd (healthy) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    healthy = {f"{z:g}": [0, 0] for z in ZS}
    for row in data["rows"]:
        calib = ""
        if row["drift"] == 0.0:
            calib = f"{row['z_mean']:+.3f}, {row['z_sd']:.3f}"
            for z in healthy:
                healthy[z][0] += row["fired"][z]
                healthy[z][1] += row["runs"]
        cells = " | ".join(f"{row['fired'][f'{z:g}'] / row['runs']:.4f}" for z in ZS)
        lines.append(f"| {row['shape']} | {row['drift']:g} | {row['runs']} | {cells} | {calib} |")
    lines.append("")
    rates = {z: f / n for z, (f, n) in healthy.items()}
    lines.append(
        "Healthy runs over all shapes: "
        + ", ".join(
            f"z = {z}: {f} of {n} failed (1 in {n / f:,.0f})" if f else f"z = {z}: 0 of {n} failed"
            for z, (f, n) in healthy.items()
        )
        + "."
    )
    rule = f"the rule's z ({DRIFT_Z:g}) fails at most 1 healthy run in 2,000 over all shapes"
    ok = rates[f"{DRIFT_Z:g}"] <= 1 / 2000
    lines.append("")
    lines.append(
        f"**Result** (the rule it judges by: {rule}): {'MET' if ok else 'NOT met'} ({rates[f'{DRIFT_Z:g}']:.5f})."
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
