#!/usr/bin/env python3
"""Benchmark: do the sweep's 95% intervals cover what another start of the machine measures?

Independent sweeps of one emulated machine with restart-to-restart variation on (the seed profile
with the emulator's `noise_restart_cv`, docs/emulator.md "Noise": a factor on every batch's duration
drawn once per server start, as a real server's clocks and memory placement differ between two
starts), each a real `python -m tuner sweep` through ansible-runner against a local emulator
process (tests/tuner/fixtures/local_emulator_deploy.yml restarts it on every deploy), with the
confirmation round on (`--confirm`, docs/tuner.md "Verdicts across restarts").

Both methods are judged on the same runs:
- **today's**: the first deployment of every configuration, each cell's interval from its own
  requests (what a sweep reported before the confirmation round);
- **pooled**: every deployment, the confirmation round's redeploys included, each interval widened by
  the deployment-to-deployment component pooled over the redeployed configurations.

Per method: the share of reported 95% intervals that contain the pooled mean of that cell (the mean
of every deployment of it in every sweep; goal >= 90%), the "beyond noise" verdicts (A above B at a
level) and how many another sweep reverses beyond noise (goal 0), each level's pick; and the cost:
wall time per sweep, the confirmation round's share of it (goal <= 25%).

Raw data is kept in bench/coverage/ (one directory per sweep: records.jsonl, sweep.json, and
runs.json with each sweep's wall time); `--render` rebuilds bench/coverage.md from it without
sweeping. `make bench` runs it from scratch (the old sweeps are removed first).
Usage: .venv/bin/python bench/coverage.py [--sweeps 8] [--steps 2-4] [--concurrency 4,32]
       [--confirm 2] [--restart-cv 0.015] [--run-cv 0.005] [--parallel 3] [--render]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import git_rev, machine_text  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from tuner_testlib import free_port, local_inventory, local_sweep_cmd, stop_local_emulators  # noqa: E402

from tuner.data.store import Store  # noqa: E402
from tuner.decide import analysis  # noqa: E402
from tuner.measure import restarts  # noqa: E402

SEED = ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml"
DATA = ROOT / "bench" / "coverage"
VENV_BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
}
ENV.pop("SGLANG_API_KEY", None)
KEEP = ("records.jsonl", "sweep.json", "recommendation.json")
GOAL_COVERAGE = 0.90
GOAL_COST = 0.25


def code_rev() -> str:
    """The revision, marked when the tuner, the tests' helpers or this script differ from it."""
    return git_rev("tuner", "tests/tuner", "bench/coverage.py")


def profile_with_noise(path: Path, restart_cv: float, run_cv: float) -> None:
    prof = yaml.safe_load(SEED.read_text())
    prof["name"] = "seed-restart-noise"
    prof["noise_restart_cv"] = restart_cv
    prof["noise_run_cv"] = run_cv
    path.write_text(yaml.safe_dump(prof, sort_keys=False))


def run_sweeps(args: argparse.Namespace) -> None:
    if DATA.exists():
        shutil.rmtree(DATA)  # from scratch: no stale sweep stays beside the new ones
    DATA.mkdir(parents=True)
    runs: dict[str, Any] = {
        "started": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "revision": code_rev(),
        "args": {k: v for k, v in vars(args).items() if k not in ("render", "out")},
        "machine": machine_text(),
        "sweeps": [],
    }
    with tempfile.TemporaryDirectory(prefix="sgt-coverage-") as tmp:
        tmpd = Path(tmp)
        profile = tmpd / "seed-restart-noise.yaml"
        profile_with_noise(profile, args.restart_cv, args.run_cv)
        # `--parallel` hosts (local emulator processes on their own ports), a sweep on each at a time
        workers = max(1, min(args.parallel, args.sweeps))
        invs = [
            (local_inventory(tmpd / f"inv{w}.yml", {f"cov{w}": free_port()}, tmpd / f"state{w}"), tmpd / f"state{w}")
            for w in range(workers)
        ]
        queue = list(range(1, args.sweeps + 1))
        lock = threading.Lock()

        def worker(inv: Path) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    i = queue.pop(0)
                out = tmpd / f"sweep-{i}"
                cmd = local_sweep_cmd(
                    out,
                    inv,
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
                    "--max-requests-per-level",
                    str(args.max_requests),
                    "--max-level-s",
                    "15",
                    "--search",
                    "grid",
                    "--no-early-stop",
                    "--no-schedule",
                    "--confirm",
                    str(args.confirm),
                )
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
                wall = time.perf_counter() - t0
                keep = DATA / f"sweep-{i}"
                keep.mkdir()
                for name in KEEP:
                    if (out / name).exists():
                        shutil.copy2(out / name, keep / name)
                (keep / "progress.log").write_text(proc.stderr)
                with lock:
                    runs["sweeps"].append({"dir": keep.name, "wall_s": round(wall, 2), "rc": proc.returncode})
                print(f"sweep {i}/{args.sweeps}: rc {proc.returncode}, {wall:.0f} s", flush=True)

        try:
            threads = [threading.Thread(target=worker, args=(inv,)) for inv, _state in invs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for _inv, state_dir in invs:
                stop_local_emulators(state_dir)
    runs["sweeps"].sort(key=lambda r: int(r["dir"].split("-")[1]))
    runs["ended"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    runs["load"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    (DATA / "runs.json").write_text(json.dumps(runs, indent=2) + "\n")


# -- analysis ---------------------------------------------------------------------------------------
def sweep_view(d: Path, pooled: bool) -> dict[str, Any]:
    """One sweep as one method sees it: per (config, level) the interval, per level the pick and
    the beyond-noise verdicts (A above B)."""
    state = Store(d).state()
    levels = state.levels()
    if not pooled:
        levels = [lv for lv in levels if int(lv.deployment or 1) == 1]
    stats = analysis.aggregate(levels, pool=pooled)
    cells = {k: (p.interval.low, p.interval.high, p.mean) for k, p in stats.items() if not p.partial}
    picks: dict[int, str] = {}
    verdicts: set[tuple[int, str, str]] = set()
    for lv in sorted({c for _cid, c in stats}):
        pts = [p for (_cid, c), p in stats.items() if c == lv and not p.partial]
        ch = analysis.choose_for_level(pts)
        if ch is not None:
            picks[lv] = ch.chosen.config_id + (" (tied)" if ch.tied else "")
        for a, b in itertools.permutations(pts, 2):
            if a.beats(b):
                verdicts.add((lv, a.config_id, b.config_id))
    noise = next((p.restart for p in stats.values() if getattr(p, "restart", None) is not None), None)
    component: dict[tuple[str, int], tuple[float, float, float]] = {}
    if pooled and noise is not None:
        for k, p in stats.items():
            if not p.partial:
                component[k] = component_interval(p.interval_rows("output_tok_s"), noise)
    return {"cells": cells, "picks": picks, "verdicts": verdicts, "noise": noise, "component": component}


def component_interval(rows: list[Any], noise: Any) -> tuple[float, float, float]:
    """(low, high, mean) as the confirmation round's first version built it: the restart component
    alone (the deployments' spread minus what the levels' own intervals explain, truncated at 0), t on
    the extra starts, added to the levels' own half-widths: sqrt((t sd_d)^2 / n + sum h_j^2 / n^2).
    Kept here to show, on the same runs, why tuner/measure/restarts.py no longer does so."""
    deps = restarts._by_deployment(rows)  # deployment -> (its mean, its relative own sd)
    n = len(deps)
    est = sum(m for m, _ in deps.values()) / n
    own_hw = [sd * restarts.Z975 for _, sd in deps.values()]
    rel = ((noise.t * noise.rel_sd) ** 2 / n + sum(h * h for h in own_hw) / (n * n)) ** 0.5
    return est * (1 - rel), est * (1 + rel), est


def confirm_cost(d: Path) -> tuple[float, float, int]:
    """(seconds of the confirmation round's deployments, of the whole sweep's deployments, starts)."""
    conf = total = 0.0
    starts = 0
    for line in (d / "records.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") != "timing":
            continue
        t = float(rec.get("total_s") or 0.0)
        total += t
        if int(rec.get("deployment") or 1) > 1:
            conf += t
            starts += 1
    return conf, total, starts


def pooled_means(dirs: list[Path]) -> dict[tuple[str, int], float]:
    """Each cell's mean over every deployment of every sweep (each deployment's mean weighs one)."""
    vals: dict[tuple[str, int], list[float]] = {}
    for d in dirs:
        per: dict[tuple[str, int, int], list[float]] = {}
        for lv in Store(d).state().levels():
            if lv.complete and lv.metrics.output_tok_s is not None:
                per.setdefault((lv.config_id, int(lv.concurrency), int(lv.deployment or 1)), []).append(
                    float(lv.metrics.output_tok_s)
                )
        for (cid, c, _dep), v in per.items():
            vals.setdefault((cid, c), []).append(sum(v) / len(v))
    return {k: sum(v) / len(v) for k, v in vals.items()}


def judge(views: list[dict[str, Any]], truth: dict[tuple[str, int], float]) -> dict[str, Any]:
    inside = total = 0
    for v in views:
        for k, (lo, hi, _m) in v["cells"].items():
            if k in truth:
                total += 1
                inside += lo <= truth[k] <= hi
    verdicts = sum(len(v["verdicts"]) for v in views)
    reversed_ = 0
    examples: list[str] = []
    for i, v in enumerate(views):
        for lv, a, b in sorted(v["verdicts"]):
            others = [j for j, w in enumerate(views) if j != i and (lv, b, a) in w["verdicts"]]
            if others:
                reversed_ += 1
                if len(examples) < 6:
                    examples.append(
                        f"sweep {i + 1}: C={lv} {a} above {b}, reversed in sweep(s) {', '.join(str(j + 1) for j in others)}"
                    )
    # the price of wider intervals: a level tied within noise goes to the tie-break, which may take a
    # slower configuration; each pick against the level's best pooled mean
    best = {lv: max(m for (_cid, c), m in truth.items() if c == lv) for _cid, lv in truth}
    shares = [
        truth[(pick.split(" ")[0], lv)] / best[lv]
        for v in views
        for lv, pick in v["picks"].items()
        if (pick.split(" ")[0], lv) in truth
    ]
    return {
        "inside": inside,
        "total": total,
        "verdicts": verdicts,
        "reversed": reversed_,
        "examples": examples,
        "picks": len(shares),
        "picks_best": sum(1 for x in shares if x >= 0.9999),
        "worst_share": min(shares, default=float("nan")),
        "mean_share": sum(shares) / len(shares) if shares else float("nan"),
    }


def render(out_md: Path) -> int:
    runs = json.loads((DATA / "runs.json").read_text())
    dirs = [DATA / s["dir"] for s in runs["sweeps"] if (DATA / s["dir"] / "records.jsonl").exists()]
    if not dirs:
        out_md.write_text("# Coverage\n\nNo kept sweeps in bench/coverage/: run `bench/coverage.py`.\n")
        return 1
    truth = pooled_means(dirs)
    old = [sweep_view(d, pooled=False) for d in dirs]
    new = [sweep_view(d, pooled=True) for d in dirs]
    jo, jn = judge(old, truth), judge(new, truth)
    jc = judge([{"cells": v["component"], "verdicts": set(), "picks": {}} for v in new], truth)
    costs = [confirm_cost(d) for d in dirs]
    walls = {s["dir"]: s["wall_s"] for s in runs["sweeps"]}
    wall = [walls.get(d.name, 0.0) for d in dirs]
    conf_s = sum(c for c, _t, _n in costs)
    starts = sum(n for _c, _t, n in costs)
    today_s = sum(wall) - conf_s
    extra = conf_s / today_s if today_s > 0 else float("nan")
    a = runs["args"]

    def pct(x: int, n: int) -> str:
        return f"{x} of {n} ({100.0 * x / n:.0f}%)" if n else "-"

    lines = [
        "# Coverage: do the intervals hold across restarts?",
        "",
        f"Generated by `bench/coverage.py` (sweeps {runs['started']} to {runs.get('ended', '?')}, code revision "
        f"{runs['revision']}; {runs['machine']}, load {runs.get('load', '?')} at the end). Regenerate: "
        f"`.venv/bin/python bench/coverage.py --sweeps {a['sweeps']} --steps {a['steps']} --concurrency "
        f"{a['concurrency']} --confirm {a['confirm']} --restart-cv {a['restart_cv']} --run-cv {a['run_cv']} "
        f"--max-requests {a['max_requests']} --parallel {a.get('parallel', 1)}`; "
        "from the kept data alone: `.venv/bin/python bench/coverage.py --render`. Raw data: `bench/coverage/` "
        "(each sweep's records.jsonl, sweep.json, recommendation.json, progress.log; runs.json)."
        + (f" runs.json: {runs['note']}." if runs.get("note") else ""),
        "",
        f"{len(dirs)} independent sweeps of one machine: a local emulator process (the seed profile with "
        f"`noise_restart_cv` {a['restart_cv']} and `noise_run_cv` {a['run_cv']}: a factor on every batch's duration "
        'drawn per server start and per level, docs/emulator.md "Noise"), each sweep a real `python -m tuner '
        f"sweep --search grid --no-early-stop --steps {a['steps']} --concurrency {a['concurrency']}` (64 in / "
        f"{a['output_len']} out tokens, the precision loop at +-2% capped at {a['max_requests']} requests or 15 s a "
        f'level) with `--confirm {a["confirm"]}` (docs/tuner.md "Verdicts across restarts"). The tuner reads only '
        "what the server serves; the profile's noise settings are for this bench's own description.",
        "",
        "Both methods on the same runs. **Today's**: each configuration's first deployment, intervals from its "
        "own requests. **Pooled**: every deployment including the confirmation round's, each interval the "
        "deployments' spread pooled over the redeployed configurations, t on the extra starts, never narrower "
        "than the levels' own (tuner/measure/restarts.py). The truth a cell's "
        "interval is judged against is its pooled mean: the mean of every deployment of it in every sweep.",
        "",
        "| method | intervals containing the pooled mean (goal >= 90%) | beyond-noise verdicts (A above B at a level) "
        "| of those, reversed beyond noise by another sweep (goal 0) | levels' picks that are the best pooled cell "
        "(their mean share of the best; the worst) | wall time per sweep (mean) |",
        "|---|---|---|---|---|---|",
        f"| today's | {pct(jo['inside'], jo['total'])} | {jo['verdicts']} | {jo['reversed']} | "
        f"{pct(jo['picks_best'], jo['picks'])} ({100 * jo['mean_share']:.1f}%; {100 * jo['worst_share']:.1f}%) | "
        f"{today_s / len(dirs):.0f} s (without the confirmation round) |",
        f"| pooled | {pct(jn['inside'], jn['total'])} | {jn['verdicts']} | {jn['reversed']} | "
        f"{pct(jn['picks_best'], jn['picks'])} ({100 * jn['mean_share']:.1f}%; {100 * jn['worst_share']:.1f}%) | "
        f"{sum(wall) / len(dirs):.0f} s (+{100 * extra:.0f}%: {starts} confirmation starts in all, "
        f"{conf_s / len(dirs):.0f} s a sweep) |",
        "",
        f"The restart component alone (the spread minus what the levels' own intervals explain, truncated at 0, "
        f"t on the extra starts, added to the levels' own half-widths: how the round built its intervals before) "
        f"on the same deployments: {pct(jc['inside'], jc['total'])} of intervals contain the pooled mean; the "
        f"component came out at 0 in {sum(1 for v in new if v['noise'] is not None and v['noise'].rel_sd == 0.0)} "
        f"of {len(new)} sweeps.",
        "",
        "A level whose intervals overlap is tied within noise and the tie-break chooses (among the tied within 1% "
        'of the best mean, more KV capacity, then fewer steps; else the highest mean: docs/tuner.md "Choosing", '
        "the rule since 2026-12-02, which a render applies to the kept records): wider intervals hold the truth more "
        "often and call more levels ties, so a pick may be a slower configuration; the picks column counts that price "
        "against the pooled means.",
        "",
    ]
    for name, j in (("today's", jo), ("pooled", jn)):
        for ex in j["examples"]:
            lines.append(f"- {name}: {ex}")
    lines += ["", "## Sweep by sweep", ""]
    levels = sorted({c for _cid, c in truth})
    head = (
        "| sweep | wall s | confirmation s | "
        + " | ".join(f"C={c} today's | C={c} pooled" for c in levels)
        + " | deployments' spread (pooled; beyond the levels' own noise) |"
    )
    lines += [head, "|" + "---|" * (3 + 2 * len(levels) + 1)]
    for i in range(len(dirs)):
        n = new[i]["noise"]
        cells = [f"{old[i]['picks'].get(c, '-')} | {new[i]['picks'].get(c, '-')}" for c in levels]
        spread = "-" if n is None else f"{n.raw_rel_sd * 100:.2f}% (t {n.t:.2f}, df {n.df}; {n.rel_sd * 100:.2f}%)"
        lines.append(f"| {i + 1} | {wall[i]:.0f} | {costs[i][0]:.0f} | " + " | ".join(cells) + f" | {spread} |")
    lines += ["", "## Pooled means (the truth of the table above)", "", "| cell | pooled mean tok/s |", "|---|---|"]
    for (cid, c), m in sorted(truth.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(f"| {cid} C={c} | {m:.1f} |")
    cov_ok = jn["total"] and jn["inside"] / jn["total"] >= GOAL_COVERAGE
    cost_ok = extra <= GOAL_COST
    lines += [
        "",
        "Result (the rule: pooled intervals contain the pooled mean in >= 90% of cells, no beyond-noise verdict "
        "reversed beyond noise by another sweep, confirmation round <= 25% of today's sweep time): coverage "
        f"**{100.0 * jn['inside'] / max(1, jn['total']):.0f}%** ({'met' if cov_ok else 'MISSED'}; today's "
        f"{100.0 * jo['inside'] / max(1, jo['total']):.0f}%), reversed verdicts **{jn['reversed']}** "
        f"({'met' if jn['reversed'] == 0 else 'MISSED'}; today's {jo['reversed']}), cost **+{100 * extra:.0f}%** "
        f"({'met' if cost_ok else 'MISSED'}).",
        "",
    ]
    out_md.write_text("\n".join(lines))
    print(out_md.read_text())
    return 0 if (cov_ok and jn["reversed"] == 0 and cost_ok) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=8)
    ap.add_argument("--steps", default="2-4")
    ap.add_argument("--concurrency", default="4,32")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--max-requests", type=int, default=192)
    ap.add_argument("--parallel", type=int, default=3, help="sweeps at a time, each on its own local host")
    ap.add_argument("--confirm", type=int, default=2, help="the sweeps' --confirm (extra starts)")
    ap.add_argument("--restart-cv", type=float, default=0.015, help="the profile's noise_restart_cv")
    ap.add_argument("--run-cv", type=float, default=0.005, help="the profile's noise_run_cv")
    ap.add_argument("--render", action="store_true", help="rebuild the table from bench/coverage/ only")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "coverage.md")
    args = ap.parse_args()
    if not args.render:
        run_sweeps(args)
    return render(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
