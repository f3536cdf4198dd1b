#!/usr/bin/env python3
"""Benchmark: does the tuner's adaptive recommendation beat SGLang's own default, and never lose to the envelope?

For each emulated machine (the seed profile, bench/profiles/search-no-spec-high-load.yaml, and the
bench machines of the emulator realism work, bench/profiles/h200-*.yaml), one real
`python -m tuner sweep` with the tuner's default workload against an emulator of SGLang 0.5.23 (per-
batch-size adaptive speculation): the static depths, then the schedule phase
(tuner/decide/adaptive_phase.py): SGLang's default adaptive config and a no-speculation server (the
envelope), then tuned adaptive configs within the phase's budget (`--schedule-budget`, default 4).
Runs through ansible-runner against real emulator processes on this machine
(tests/tuner/fixtures/local_emulator_deploy.yml: the sglang_server role's contract with a plain
process instead of a systemd unit). The tuner never reads the profiles.

Each sweep uses the model-guided search (`--search model`), with each level's time cap at MAX_LEVEL_S.

The goal (issue #22), judged per machine on the workload's objective (the equal-weight mean of
throughput relative to each level's best, with the 95% intervals the recommendation itself uses,
scored over the recommendation and the references together):
  1. the recommendation is never worse than SGLang's default adaptive config beyond noise (its
     interval wholly below the default's) on any machine;
  2. it beats the default beyond noise (its interval wholly above) on at least two machines;
  3. on a machine where no speculation wins at high load (the no-speculation server beats every other
     reference beyond noise at the highest level), the recommendation does not lose to it there: at
     each high-load level no speculation wins, the recommendation's interval is not wholly below the
     no-speculation server's.
The machines are what they are: no profile is changed for the tuner.

Writes bench/schedule_vs_static.md (or --out) and keeps each sweep's report, plots, records and
recommendation under bench/schedule_vs_static/<machine>/, with the command, date and git revision.
Usage: .venv/bin/python bench/schedule_vs_static.py [--machines seed,no-spec-high-load] [--parallel]
       .venv/bin/python bench/schedule_vs_static.py --render
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from benchlib import git_rev  # noqa: E402  (bench/: the script's own directory)

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
# Each level stops sending after this many seconds (the tuner's default is 120): five machines are
# swept at once on a shared 2-CPU machine, and the page must be regenerated in well under an hour.
# High-load levels then end wider than +-2%, which makes "beyond noise" harder to reach, not easier.
MAX_LEVEL_S = 45

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
    # machines off the search's model (docs/emulator.md "Realism"), added by #18
    "h200-steep-acceptance": (
        ROOT / "bench" / "profiles" / "h200-steep-acceptance.yaml",
        "1-6",
        "the H200 8B (measured step table) with acceptance that falls steeply by position and a wide per-prompt "
        "spread, which an acceptance-driven controller can exploit",
    ),
    "h200-8b-1b-draft": (
        ROOT / "bench" / "profiles" / "h200-8b-1b-draft.yaml",
        "1-6",
        "the H200 8B drafted by a separate 1B model, built for shallow speculation at 1 client and none from "
        "16 up (what it measured is below)",
    ),
}
# Any other emulator realism bench machine (issue #18) found in bench/profiles/h200-*.yaml joins
# with steps 1-6 (no 0: the phase adds the no-speculation server itself) and the first sentence of
# its profile's comment; the machines described above keep their own lines.
for _path in sorted((ROOT / "bench" / "profiles").glob("h200-*.yaml")):
    _head = " ".join(line[2:] for line in _path.read_text().split("\n#\n")[0].splitlines() if line.startswith("# "))
    _what = _head.split(". ")[0].split(": ")[0]
    MACHINES.setdefault(_path.stem, (_path, "1-6", f"bench/profiles/{_path.name}: {_what}"))


def sweep(profile: Path, steps: str, inv: Path, out: Path) -> float:
    cmd = local_sweep_cmd(
        out,
        inv,
        "-e",
        f"local_emu_profile={profile}",
        "-e",
        f"local_emu_version={VERSION}",
        "--search",
        "model",
        "--steps",
        steps,
        "--max-level-s",
        str(MAX_LEVEL_S),
        "--quiet",
    )
    (out.parent / "command.txt").write_text(" ".join(str(c) for c in cmd) + "\n")
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def cell(c: dict | None, with_id: bool = False) -> str:
    if not c:
        return "-"
    lo, hi = c["output_tok_s_ci95"]
    head = f"{c['config_id']}: " if with_id else ""
    return f"{head}{c['output_tok_s']:.0f} [{lo:.0f}, {hi:.0f}], batch {c['running_batch']:g}"


def _iv(ci: list[float] | None) -> tuple[float, float] | None:
    return (float(ci[0]), float(ci[1])) if ci else None


def verdicts(rec: dict) -> dict:
    """The goal's three checks on one machine, from its kept recommendation.json (module docstring)."""
    r = rec["recommended"]
    scores = ((rec.get("envelope") or {}).get("objective") or {}).get("score_ci95") or {}
    env = (rec.get("envelope") or {}).get("per_level") or {}
    mine, default = _iv(scores.get(r.get("config_id"))), _iv(scores.get("adaptive-default"))
    out: dict = {"recommended": r.get("config_id"), "kind": r.get("kind")}
    if r.get("config_id") == "adaptive-default":
        out["vs_default"] = "is the default"
    elif mine is None or default is None:
        out["vs_default"] = "not scored together"
    elif mine[0] > default[1]:
        out["vs_default"] = "beats beyond noise"
    elif mine[1] < default[0]:
        out["vs_default"] = "worse beyond noise"
    else:
        out["vs_default"] = "tied within noise"
    out["objective"] = {"recommended": mine, "default": default}
    # 3: high-load levels where no speculation beats every other reference beyond noise
    levels = sorted(env, key=int)
    nospec_levels = []
    for c in reversed(levels):
        row = env[c]
        k0 = row.get("no_speculation")
        if not k0:
            break
        others = [
            v for k, v in row.items() if isinstance(v, dict) and k != "no_speculation" and v.get("config_id") != "k0"
        ]
        if others and all(k0["output_tok_s_ci95"][0] > o["output_tok_s_ci95"][1] for o in others):
            nospec_levels.append(c)
        else:
            break
    out["nospec_levels"] = sorted(nospec_levels, key=int)
    losses = []
    for c in nospec_levels:
        mine_c, k0 = env[c].get("recommended"), env[c]["no_speculation"]
        if mine_c and mine_c["config_id"] != "k0" and mine_c["output_tok_s_ci95"][1] < k0["output_tok_s_ci95"][0]:
            losses.append(c)
    out["loses_to_nospec_at"] = losses
    return out


def machine_section(name: str, what: str, steps: str, rec: dict, wall: float, meta: dict) -> list[str]:
    r = rec["recommended"]
    lines = [f"## {name} (`--steps {steps}`, {wall / 60:.1f} min)", "", what + ".", ""]
    lines.append(
        f"Command: `{meta.get('command', '-')}`; run {meta.get('date', '-')} at git revision {meta.get('git', '-')}"
        + (
            f"; outputs rebuilt from its records with `python -m tuner report` at {meta['report_git']}"
            if meta.get("report_git")
            else ""
        )
        + "."
    )
    if meta.get("interrupted"):
        lines.append("")
        lines.append(
            f"**Interrupted**: {meta['interrupted']}. What it measured until then is kept and shown; "
            "`python -m tuner sweep --resume` on the kept directory would finish it."
        )
    lines.append("")
    lines.append(f"Schedule phase: {rec.get('schedule_phase')}.")
    lines.append("")
    env = rec.get("envelope") or {}
    lines.append(
        "| C | recommendation | level's best static | best single static | SGLang default adaptive | no speculation | who wins, and what the server did |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for c, row in (env.get("per_level") or {}).items():
        lines.append(
            f"| {c} | {cell(row.get('recommended'), True)} | {cell(row.get('level_best_static'), True)} | "
            f"{cell(row.get('best_static'), True)} | {cell(row.get('default_adaptive'))} | "
            f"{cell(row.get('no_speculation'))} | {row.get('who_wins') or '-'} |"
        )
    lines.append("")
    lines.append(
        "Aggregate tok/s [95% CI] and the running batch the server reported (/metrics); the words are generated "
        "from the cells (running batch, accept length), by the tuner's report."
    )
    for line in env.get("summary") or []:
        lines.append(f"- {line}.")
    scores = (env.get("objective") or {}).get("score_ci95") or {}
    if scores:
        lines.append(
            "Objective (equal-weight mean of throughput relative to each level's best among the recommendation's "
            "candidates, 95% interval): "
            + ", ".join(f"{cid} [{lo:.3f}, {hi:.3f}]" for cid, (lo, hi) in scores.items())
            + "."
        )
    v = verdicts(rec)
    lines += [
        "",
        f"**Recommended: {r.get('kind')} {r.get('config_id')}** ({r.get('reason')}).",
        f"`schedule`: `{json.dumps(rec.get('schedule'))}`; "
        f"`vllm_num_speculative_tokens_per_batch_size`: `{json.dumps(rec.get('vllm_num_speculative_tokens_per_batch_size'))}`"
        + (f"; KV warning: {rec['kv_warning']}" if rec.get("kv_warning") else "")
        + ".",
        f"Against SGLang's default: **{v['vs_default']}**."
        + (
            f" No speculation wins beyond noise at C={', '.join(v['nospec_levels'])}; the recommendation "
            + (
                "loses to it beyond noise at C=" + ", ".join(v["loses_to_nospec_at"])
                if v["loses_to_nospec_at"]
                else "does not lose to it there"
            )
            + "."
            if v["nospec_levels"]
            else ""
        ),
        "",
        f"![{name}](schedule_vs_static/{name}/schedule_vs_static.png)",
        "",
    ]
    return lines


def goal_lines(results: dict[str, dict]) -> list[str]:
    """The goal's rule, applied as stated (module docstring), machine by machine."""
    rows, worse, beats, nospec_miss = [], [], [], []
    for name, rec in results.items():
        v = verdicts(rec)
        if v["vs_default"] == "worse beyond noise":
            worse.append(name)
        if v["vs_default"] == "beats beyond noise":
            beats.append(name)
        if v["loses_to_nospec_at"]:
            nospec_miss.append(name)
        o = v["objective"]
        fmt = lambda iv: "-" if iv is None else f"[{iv[0]:.3f}, {iv[1]:.3f}]"  # noqa: E731
        rows.append(
            f"| {name} | {v['kind']} {v['recommended']} | {fmt(o['recommended'])} | {fmt(o['default'])} | {v['vs_default']} | "
            + (", ".join(v["nospec_levels"]) or "-")
            + " | "
            + ((", ".join(v["loses_to_nospec_at"]) or "no") if v["nospec_levels"] else "-")
            + " |"
        )
    ok1, ok2, ok3 = not worse, len(beats) >= 2, not nospec_miss
    return [
        "## Goal",
        "",
        "Rule (issue #22), applied as stated: (1) on no machine is the recommendation worse than SGLang's default "
        "adaptive config beyond noise on the objective; (2) it beats the default beyond noise on at least two "
        "machines; (3) where no speculation wins at high load (beats every other reference beyond noise at the "
        "highest levels), the recommendation's interval is not wholly below no speculation's at those levels.",
        "",
        "| machine | recommendation | its objective | SGLang default's objective | against the default | no speculation wins at C= | recommendation loses to it there |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"- (1) never worse than the default beyond noise: **{'met' if ok1 else 'missed'}**"
        + (f" (worse on {', '.join(worse)})" if worse else "")
        + ".",
        f"- (2) beats the default beyond noise on at least two machines: **{'met' if ok2 else 'missed'}** "
        f"({len(beats)}: {', '.join(beats) or 'none'}).",
        f"- (3) does not lose to no speculation where it wins at high load: **{'met' if ok3 else 'missed'}**"
        + (f" (loses on {', '.join(nospec_miss)})" if nospec_miss else "")
        + ".",
        "",
    ]


def run_machine(name: str, tmp: Path, keep: Path) -> None:
    profile, steps, _ = MACHINES[name]
    state = tmp / name / "state"
    state.mkdir(parents=True)
    inv = local_inventory(tmp / name / "inventory.yml", {f"local-{name}": free_port()}, state)
    out = tmp / name / "out"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rev = git_rev()  # the code the sweep runs
    try:
        print(f"[{name}] sweeping --steps {steps} on SGLang {VERSION} (emulated)", flush=True)
        wall = sweep(profile, steps, inv, out)
    finally:
        stop_local_emulators(state)
    dest = keep / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in KEEP:
        if (out / f).exists():
            shutil.copy(out / f, dest / f)
    command = (tmp / name / "command.txt").read_text().strip().replace(str(tmp), "$TMP").replace(str(ROOT) + "/", "")
    meta = {"wall_s": round(wall, 1), "command": command, "date": when, "git": rev}
    (dest / "wall.json").write_text(json.dumps(meta) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", default=",".join(MACHINES))
    ap.add_argument("--out", default=str(ROOT / "bench" / "schedule_vs_static.md"))
    ap.add_argument("--keep", type=Path, default=None, help="where the sweeps are kept (default: --out without .md)")
    ap.add_argument("--render", action="store_true", help="rewrite the .md from the kept sweeps, running nothing")
    ap.add_argument("--parallel", action="store_true", help="sweep the machines at the same time (one process each)")
    ap.add_argument(
        "--refresh",
        action="store_true",
        help="with --render: rebuild each kept sweep's outputs from its records with this checkout's "
        "`python -m tuner report` first (the revision is kept as report_git)",
    )
    ap.add_argument("--note", help="a note on how this run went, kept beside the sweeps and shown on the page")
    args = ap.parse_args()
    names = [m for m in args.machines.split(",") if m]
    keep = args.keep or Path(args.out).with_suffix("")
    if args.render:
        # a machine added since the kept run (a new bench/profiles/h200-*.yaml) has nothing to render
        missing = [n for n in names if not (keep / n / "recommendation.json").is_file()]
        for n in missing:
            print(f"[{n}] no kept sweep under {keep / n}: left out of the rendered page", file=sys.stderr)
        names = [n for n in names if n not in missing]
    if args.render and args.refresh:
        for name in names:
            subprocess.run(
                [sys.executable, "-m", "tuner", "report", str(keep / name)],
                cwd=ROOT,
                env=ENV,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            meta_path = keep / name / "wall.json"
            meta = json.loads(meta_path.read_text())
            meta["report_git"] = git_rev()
            meta_path.write_text(json.dumps(meta) + "\n")
    if not args.render:
        with tempfile.TemporaryDirectory(prefix="sgt-schedule-") as tmp:
            if args.parallel:
                with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
                    for f in [pool.submit(run_machine, n, Path(tmp), keep) for n in names]:
                        f.result()
            else:
                for n in names:
                    run_machine(n, Path(tmp), keep)
    sections: list[str] = []
    results: dict[str, dict] = {}
    for name in names:
        profile, steps, what = MACHINES[name]
        rec = json.loads((keep / name / "recommendation.json").read_text())
        meta = json.loads((keep / name / "wall.json").read_text())
        results[name] = rec
        sections += machine_section(name, what, steps, rec, meta["wall_s"], meta)
    head = [
        "# Adaptive speculation: the tuner's recommendation against the envelope",
        "",
        f"Generated by `bench/schedule_vs_static.py` from the sweeps kept in `{keep.relative_to(ROOT) if keep.is_relative_to(ROOT) else keep}/<machine>/` "
        "(each with its command, date and git revision). Each machine: one `python -m tuner sweep` with the "
        "model-guided search (`--search model`) and the tuner's default workload (256 in / 256 out tokens, temperature 0, "
        f"concurrency 1, 4, 16, 32, 64, each level to +-2% or its cap; the time cap lowered to {MAX_LEVEL_S} s so "
        f"that five machines swept at once fit the hour) against an emulator of SGLang {VERSION}, through ansible-runner on local "
        "emulator processes (tests/tuner/fixtures/local_emulator_deploy.yml), on a shared 2-CPU machine. After the "
        "static depths the schedule phase measures SGLang's default adaptive config and a no-speculation server, "
        "then tuned adaptive configs, at most 4 deployments in all (`--schedule-budget`); the recommendation is "
        "whichever is best beyond noise on the objective, ties to the simpler (static, the default, a tuned config).",
        "",
    ]
    note = keep / "run_note.txt"
    if args.note:
        note.write_text(args.note.strip() + "\n")
    if note.exists():
        head += [f"**Note on this run**: {note.read_text().strip()}", ""]
    left = [m for m in MACHINES if m not in names]
    if left:
        head += [
            f"Machines in this run: {', '.join(names)}. Not in it: {', '.join(left)} (`--machines` adds them; "
            "left out of this run for time, not for its result).",
            "",
        ]
    Path(args.out).write_text("\n".join(head + goal_lines(results) + sections))
    print(Path(args.out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
