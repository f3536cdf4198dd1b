#!/usr/bin/env python3
"""Benchmark: what the correctness gate costs a sweep, per configuration (issue 20).

One real `python -m tuner sweep` with the tuner's default workload and search (nothing but
`--out`, the inventory, the play and the machine's profile; the page names the search the kept
sweep ran, read from its sweep.json: the default changes with the tuner's revision), through ansible-runner against real
emulator processes on this machine (tests/tuner/fixtures/local_emulator_deploy.yml: the
sglang_server role's contract with a plain process; the emulator, client, records and analysis are
those of emulator hosts). The gate runs by default: the no-speculation baseline is deployed once,
then every speculative configuration is checked on its own deployment after its levels.

Rule (docs/tuner.md "Verify"): for every configuration the gate checked, the gate's seconds are at
most 10% of that configuration's measurement time (its levels' wall time, `bench_s` of its
`timing` records, warm-up excluded), summed over its deployments (a confirmation start redeploys
a configuration, measures the levels in doubt and checks it again); each check is also shown against
its own deployment's levels. The baseline's one
deploy per campaign is shown apart (it is not a configuration's cost). So is the exact round
(the release has --enable-deterministic-inference: after the sweep the configurations about to be
recommended are redeployed with it and held to exact parity with a deterministic baseline): its
extra deployments and seconds are a cost of the sweep, reported against the sweep's wall time.

The sweep's records.jsonl and sweep.json are kept in bench/verify_cost/ with meta.json (command,
date, git revision, machine); the table bench/verify_cost.md is written from those files only, so
`--render` rebuilds it without sweeping. Exits 1 when a configuration breaks the rule.
Usage: .venv/bin/python bench/verify_cost.py [--profile PATH] [--steps 1-5] [--render]
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
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from benchlib import git_rev, machine_text  # noqa: E402  (bench/: the script's own directory)

sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from tuner_testlib import free_port, local_inventory, local_sweep_cmd, stop_local_emulators  # noqa: E402

DATA = ROOT / "bench" / "verify_cost"
TABLE = ROOT / "bench" / "verify_cost.md"
SEED = ROOT / "tuner" / "emulator" / "profiles" / "seed-qwen35-122b-4x-rtxpro6000.yaml"
LIMIT = 0.10
VENV_BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}
ENV.pop("SGLANG_API_KEY", None)


def sweep(profile: Path, steps: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="sgt-verify-cost-"))
    state = work / "state"
    state.mkdir()
    inv = local_inventory(work / "inventory.yml", {"local-verify": free_port()}, state)
    out = work / "out"
    extra = ["--steps", steps, "-e", f"local_emu_profile={profile}"]
    cmd = local_sweep_cmd(out, inv, *extra)
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=3600)
    finally:
        stop_local_emulators(state)
    wall = time.monotonic() - t0
    if r.returncode not in (0, 1) or not (out / "records.jsonl").exists():
        sys.exit(f"the sweep failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    if DATA.exists():
        shutil.rmtree(DATA)
    DATA.mkdir(parents=True)
    for name in ("records.jsonl", "sweep.json", "report.md", "recommendation.json"):
        if (out / name).exists():
            shutil.copy(out / name, DATA / name)
    shown = [str(Path(c).relative_to(ROOT)) if c.startswith(str(ROOT)) else c for c in cmd]
    meta = {
        "command": "python -m tuner " + " ".join(shown[3:]),
        "profile": str(profile.relative_to(ROOT)) if profile.is_relative_to(ROOT) else str(profile),
        "date": started,
        "git": git_rev(),
        "machine": machine_text(),
        "load": [round(x, 2) for x in os.getloadavg()],
        "sweep_rc": r.returncode,
        "wall_s": round(wall, 1),
    }
    (DATA / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)


def render(out: Path = TABLE) -> bool:
    meta = json.loads((DATA / "meta.json").read_text())
    search = json.loads((DATA / "sweep.json").read_text())["params"].get("search", "?")
    recs = [json.loads(line) for line in (DATA / "records.jsonl").read_text().splitlines() if line.strip()]
    # one timing record per deployment: a confirmation start redeploys a configuration and measures
    # again (its levels only), so (configuration, deployment) is the key
    timing = {(r["config"]["config_id"], r.get("deployment", 1)): r for r in recs if r["type"] == "timing"}
    verify = [r for r in recs if r["type"] == "verify"]
    base = [r for r in verify if r.get("role") == "baseline"]
    checks = [v for v in verify if v.get("role", "config") == "config"]
    rows, per_config, over = [], {}, 0
    for v in checks:
        cid, dep = v["config"]["config_id"], v.get("deployment", 1)
        bench_s = (timing.get((cid, dep)) or {}).get("bench_s")
        tot = per_config.setdefault(cid, {"gate": 0.0, "bench": 0.0, "deployments": 0, "missing": False})
        tot["deployments"] += 1
        if v.get("seconds") is None or not bench_s:
            tot["missing"] = True
            rows.append(f"| {cid} | {dep} | {v.get('requests')} | - | - | - | not measured |")
            continue
        tot["gate"] += v["seconds"]
        tot["bench"] += bench_s
        over += v["seconds"] / bench_s > LIMIT
        verdict = "passed" if v["passed"] else "failed: " + (v.get("reasons") or ["?"])[0][:80]
        rows.append(
            f"| {cid} | {dep} | {v.get('requests')} | {v['seconds']:.1f} | {bench_s:.1f} | "
            f"{100 * v['seconds'] / bench_s:.1f}% | {verdict} |"
        )
    summary, ok = [], bool(per_config)
    for cid, t in per_config.items():
        share = None if t["missing"] or not t["bench"] else t["gate"] / t["bench"]
        meets = share is not None and share <= LIMIT
        ok = ok and meets
        summary.append(
            f"| {cid} | {t['deployments']} | {t['gate']:.1f} | {t['bench']:.1f} | "
            + (f"{100 * share:.1f}% | {'yes' if meets else 'NO'} |" if share is not None else "- | NO |")
        )
    lines = [
        "# What the correctness gate costs a sweep",
        "",
        f"Generated by `bench/verify_cost.py` from the data in `bench/verify_cost/` (sweep started {meta['date']}, "
        f"git {meta['git']}, {meta['machine']}; the sweep took {meta['wall_s']:.0f} s). Command: `{meta['command']}` "
        f"(profile `{meta['profile']}`): the tuner's default workload and its default search at that revision "
        f"(`--search {search}`), the gate on by default, "
        "**local emulator processes** through ansible-runner (tests/tuner/fixtures/local_emulator_deploy.yml).",
        "",
        "Read with care: the emulator, the tuner and anything else running share the machine's cores"
        + (
            f" (load average {' '.join(f'{x:.2f}' for x in meta['load'])} at the end of the sweep)"
            if "load" in meta
            else ""
        )
        + ", so both the measurement and the gate run slower under load; the rule is a ratio of the two, "
        "measured in the same sweep, on the same host.",
        "",
        f'Rule (docs/tuner.md "Verify"): per configuration the gate checked, its seconds are at most '
        f"{LIMIT:.0%} of that configuration's measurement time (the wall time of its levels, `bench_s` of its "
        "`timing` record), over all of its deployments (a confirmation start redeploys it and measures again). "
        + ("**Every configuration meets it.**" if ok else "**A configuration misses it.**"),
        "",
        "| configuration | deployments | gate s | measurement s | gate / measurement | within 10% |",
        "|---|---|---|---|---|---|",
        *summary,
        "",
        "Each check, against its own deployment's levels:",
        "",
        "| configuration | deployment | gate requests | gate s | measurement s | gate / measurement | verdict |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    if over:
        lines += [
            f"{over} check(s) above {LIMIT:.0%} of their own deployment's levels: a confirmation start "
            "measures only the levels in doubt, and its gate is the whole gate. The rule is per configuration "
            "and holds there; per deployment it does not.",
            "",
        ]
    for b in base:
        lines.append(
            f"The no-speculation baseline was deployed once for the campaign: {b.get('requests')} requests in "
            f"{b.get('seconds') or 0:.1f} s after a {b.get('deploy_s') or 0:.1f} s deploy (not a configuration's cost)."
        )
    lines += ["", *exact_lines(verify, timing, meta)]
    out.write_text("\n".join(lines) + "\n")
    print(out.read_text())
    return ok


def exact_lines(verify: list[dict], timing: dict[tuple[str, int], dict], meta: dict) -> list[str]:
    """The exact round's part: one row per redeploy, and its total against the sweep's wall time."""
    rnd = [r for r in verify if r.get("role") == "exact_round"]
    runs = [r for r in verify if r.get("role") in ("exact_baseline", "exact")]
    out = ["## The exact round", ""]
    if not rnd:
        return out + ["The kept sweep predates the exact round: its cost is not measured here."]
    why = rnd[-1]["verdict"].get("why")
    if not runs:
        return out + [f"The exact round did not run: {why}."]
    total = sum(float(r.get("deploy_s") or 0) + float(r.get("seconds") or 0) for r in runs)
    out += [
        f"{why}. Each redeploy with `--enable-deterministic-inference` below; the gate's seconds against the "
        "configuration's measurement time as above, all its deployments (the deploy is the round's fixed cost, not "
        "the gate's).",
        "",
        "| redeploy | deploy s | gate requests | gate s | gate / measurement | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in runs:
        cid = r["config"]["config_id"]
        bench_s = sum(float(t.get("bench_s") or 0) for (c, _d), t in timing.items() if c == cid)
        share = f"{100 * r['seconds'] / bench_s:.1f}%" if r.get("seconds") and bench_s else "-"
        name = "k0 (the deterministic baseline)" if r["role"] == "exact_baseline" else cid
        verdict = "passed" if r["passed"] else "failed: " + (r.get("reasons") or ["?"])[0][:80]
        out.append(
            f"| {name} | {r.get('deploy_s') or 0:.1f} | {r.get('requests')} | {r.get('seconds') or 0:.1f} | "
            f"{share if r['role'] == 'exact' else '-'} | {verdict if r['role'] == 'exact' else 'captured'} |"
        )
    out += [
        "",
        f"In all: {len(runs)} extra deployment(s), {total:.0f} s, {100 * total / meta['wall_s']:.1f}% of the "
        f"sweep's {meta['wall_s']:.0f} s (`--no-verify-exact` leaves it out).",
        "",
        "The 10% rule above is the gate's (its requests against the configuration's measurement), and each "
        "redeploy's gate keeps it; the round's deploys are not held to it: they are the price of the exact rule, "
        "one no-speculation deploy plus one per distinct pick (at most 4), paid once per sweep. Here a deploy starts "
        "an emulator process; on a GPU a deploy loads the model, as each of the sweep's own deploys does (not "
        "measured here).",
    ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default=str(SEED), help="the emulated machine (default: the seed profile)")
    ap.add_argument("--steps", default="1-5", help="the sweep's --steps (default: the tuner's default, 1-5)")
    ap.add_argument("--render", action="store_true", help="rebuild the table from bench/verify_cost/ only")
    ap.add_argument("--out", type=Path, default=TABLE)
    a = ap.parse_args()
    if not a.render:
        sweep(Path(a.profile).resolve(), a.steps)
    return 0 if render(a.out) else 1


if __name__ == "__main__":
    sys.exit(main())
