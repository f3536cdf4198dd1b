#!/usr/bin/env python3
"""Benchmark: does a per-batch-size schedule beat the best static depth, and what does it cost?

For each emulated machine (the seed profile, and bench/profiles/search-no-spec-high-load.yaml, a
machine whose best depth differs strongly between low load and high load), one real
`python -m tuner sweep` with the tuner's default workload against an emulator of SGLang 0.5.23 (the
first emulated release with per-batch-size adaptive speculation): the static depths, then the
schedule phase (tuner/decide/schedule_phase.py) builds a schedule from the per-level winners at the
batch sizes the server ran, and measures it and SGLang's default adaptive config at every level.
Runs through ansible-runner against real emulator processes on this machine
(tests/tuner/fixtures/local_emulator_deploy.yml: the sglang_server role's contract with a plain
process instead of a systemd unit, which passes --speculative-adaptive, the config file and
--speculative-num-steps of the high-load bucket as the role does). The tuner never reads the
profiles.

Per machine and level: the best static depth, the tuner's schedule, SGLang's default adaptive
config (aggregate tok/s with 95% intervals, the running batch the server reported), the workload
objective for each, the KV capacity each deployment had, and the verdict.

Writes bench/schedule_vs_static.md (or --out) and keeps each sweep's report, plots and
recommendation under bench/schedule_vs_static/<machine>/.
Usage: .venv/bin/python bench/schedule_vs_static.py [--machines seed,no-spec-high-load]
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from tuner_testlib import free_port, local_inventory, local_sweep_cmd, stop_local_emulators  # noqa: E402

VENV_BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
ENV.pop("SGLANG_API_KEY", None)
KEEP = (
    "report.md",
    "recommendation.json",
    "results.csv",
    "records.jsonl",
    "sweep.json",
    "throughput_vs_steps.png",
    "schedule_vs_static.png",
)
VERSION = "0.5.23"

MACHINES = {
    "seed": (
        ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml",
        "1-5",
        "the seed deployment (Qwen3.5-122B, 4 x RTX PRO 6000): of the depths the seed measured (1-4), 4 wins at "
        "low load and 3 at high load; depth 5, which the seed never tried, wins at low load here",
    ),
    "no-spec-high-load": (
        ROOT / "bench" / "profiles" / "search-no-spec-high-load.yaml",
        "0-6",
        "a small dense model whose verify is compute-bound: deep speculation at low load, none at high load",
    ),
}


def sweep(profile: Path, steps: str, inv: Path, out: Path) -> float:
    cmd = local_sweep_cmd(
        out,
        inv,
        "-e",
        f"local_emu_profile={profile}",
        "-e",
        f"local_emu_version={VERSION}",
        "--search",
        "grid",
        "--steps",
        steps,
        "--quiet",
    )
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def cell(c: dict | None) -> str:
    if not c:
        return "-"
    lo, hi = c["output_tok_s_ci95"]
    return f"{c['output_tok_s']:.0f} [{lo:.0f}, {hi:.0f}], batch {c['running_batch']:g}"


def machine_section(name: str, what: str, steps: str, rec: dict, wall: float, joint: bool = True) -> list[str]:
    """`joint`: the kept recommendation scored the three configurations together (sweeps kept
    before that scored each pair on its own; their pairwise verdicts below still hold)."""
    comp = rec.get("schedule_comparison") or {}
    lines = [f"## {name} (`--steps {steps}`, {wall / 60:.1f} min)", "", what + ".", ""]
    lines.append(f"Schedule phase: {rec.get('schedule_phase')}.")
    lines.append("")
    winners = ", ".join(f"C={c}: {v.get('config_id')}" for c, v in rec["by_concurrency"].items())
    lines += [f"Static winners per level: {winners}.", ""]
    best = comp.get("best_static") or "-"
    lines.append(
        f"| C | the level's best static depth | recommended static ({best}) | tuner's schedule | SGLang default adaptive |"
    )
    lines.append("|---|---|---|---|---|")
    for c, row in (comp.get("per_level") or {}).items():
        w = rec["by_concurrency"].get(c) or {}
        wlo, whi = w.get("ci95") or [0.0, 0.0]
        winner = (
            f"{w.get('config_id')}: {w.get('output_tok_s', 0):.0f} [{wlo:.0f}, {whi:.0f}]"
            if w.get("config_id")
            else "-"
        )
        lines.append(
            f"| {c} | {winner} | {cell(row.get('best_static'))} | {cell(row.get('schedule'))} | "
            f"{cell(row.get('default_adaptive'))} |"
        )
    lines.append("")
    lines.append(
        f"Aggregate tok/s [95% CI] and the running batch the server reported; {best} is the static depth the "
        "tuner recommends for the whole workload (one depth must serve every level), the one an adaptive "
        "configuration has to beat."
    )
    scores = comp.get("score_ci95") or {}
    if scores and joint:
        lines.append(
            "Objective (equal-weight mean of throughput relative to each level's best among these three, 95% "
            "interval): " + ", ".join(f"{cid} [{lo:.3f}, {hi:.3f}]" for cid, (lo, hi) in scores.items()) + "."
        )
    caps = comp.get("capacity_max_total_num_tokens") or {}
    shown = {best, comp.get("schedule_config_id"), "adaptive-default"}
    lines.append(
        "KV capacity (max_total_num_tokens): " + ", ".join(f"{k} {v}" for k, v in caps.items() if k in shown) + "."
    )
    for cid, text in (comp.get("comparisons") or {}).items():
        lines.append(f"- {cid}: {text}.")
    r = rec["recommended"]
    lines += [
        "",
        f"**Recommended: {r.get('kind')} {r.get('config_id')}** ({comp.get('reason') or r.get('reason')}).",
        f"`schedule` in recommendation.json: `{json.dumps(rec.get('schedule'))}`; "
        f"`vllm_num_speculative_tokens_per_batch_size`: `{json.dumps(rec.get('vllm_num_speculative_tokens_per_batch_size'))}`.",
        "",
        f"![{name}](schedule_vs_static/{name}/schedule_vs_static.png)",
        "",
    ]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", default=",".join(MACHINES))
    ap.add_argument("--out", default=str(ROOT / "bench" / "schedule_vs_static.md"))
    ap.add_argument("--render", action="store_true", help="rewrite the .md from the kept sweeps, running nothing")
    args = ap.parse_args()
    names = [m for m in args.machines.split(",") if m]
    keep = Path(args.out).with_suffix("")
    sections: list[str] = []
    if args.render:
        for name in names:
            profile, steps, what = MACHINES[name]
            rec = json.loads((keep / name / "recommendation.json").read_text())
            wall = json.loads((keep / name / "wall.json").read_text())["wall_s"]
            joint = (keep / name / "records.jsonl").exists()
            sections += machine_section(name, what, steps, rec, wall, joint)
    with tempfile.TemporaryDirectory(prefix="sgt-schedule-") as tmp:
        for name in names if not args.render else []:
            profile, steps, what = MACHINES[name]
            state = Path(tmp) / name / "state"
            state.mkdir(parents=True)
            inv = local_inventory(Path(tmp) / name / "inventory.yml", {f"local-{name}": free_port()}, state)
            out = Path(tmp) / name / "out"
            try:
                print(f"[{name}] sweeping --steps {steps} on SGLang {VERSION} (emulated)", flush=True)
                wall = sweep(profile, steps, inv, out)
            finally:
                stop_local_emulators(state)
            rec = json.loads((out / "recommendation.json").read_text())
            dest = keep / name
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for f in KEEP:
                if (out / f).exists():
                    shutil.copy(out / f, dest / f)
            (dest / "wall.json").write_text(json.dumps({"wall_s": round(wall, 1)}) + "\n")
            sections += machine_section(name, what, steps, rec, wall)
    kept = [keep / n / "recommendation.json" for n in names]
    when = max(p.stat().st_mtime for p in kept) if args.render else time.time()
    head = [
        "# Per-batch-size schedule against the best static depth",
        "",
        f"Generated by `bench/schedule_vs_static.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(when))} "
        f"({platform.node()}, 2 CPUs, shared machine). Each machine: one `python -m tuner sweep` with the "
        "tuner's default workload (256 in / 256 out tokens, temperature 0, concurrency 1, 4, 16, 32, 64, each "
        f"level to +-2% or its cap) against an emulator of SGLang {VERSION}; after the static depths the schedule "
        "phase builds a schedule from the per-level winners at the running batch the server reported "
        "(/metrics num_running_reqs), deploys it and SGLang's default adaptive config, and measures both at every "
        "level. Where: local emulator processes through ansible-runner "
        "(tests/tuner/fixtures/local_emulator_deploy.yml), not podman hosts. The recommendation is a schedule only "
        "where it beats the best static depth beyond noise on the objective. Each sweep's report, plots and "
        f"recommendation are kept in `{keep.relative_to(ROOT)}/<machine>/`.",
        "",
    ]
    Path(args.out).write_text("\n".join(head + sections))
    print(Path(args.out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
