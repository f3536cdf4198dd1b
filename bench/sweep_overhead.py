#!/usr/bin/env python3
"""Benchmark: what a sweep spends per configuration beyond the server's start-up and the benchmark.

On one emulator host (a podman container with systemd, made by playbooks/emulator_hosts.yml),
side by side in one run:
- a real `python -m tuner sweep` (steps 1-3 by default, one short level): per configuration,
  total time (deploy through last level) minus the server's own start-up (`ready_seconds` of the
  sglang_ready module) minus the benchmark (the levels' wall time) = the tuner's overhead;
- a one-task ansible-runner run (`ansible.builtin.command: /bin/true`) on the same host, before
  and after the sweep: the floor any Ansible-driven change costs there.
Target: overhead of a configuration after the host's first (full) run <= 2 x the one-task run.
The first configuration is the host's full run (it installs the engine) and is shown, not judged.

Writes bench/sweep_overhead.md (or --out) from the run it keeps in bench/sweep_overhead/run.json
(`--render` rebuilds the file from it); exits 1 when the target is missed.
Usage: .venv/bin/python bench/sweep_overhead.py [--index 201] [--steps 1-3] [--render]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "tuner"))
from benchlib import git_rev, kept, machine_text  # noqa: E402  (bench/: the script's own directory)
from tuner_testlib import sweep_cmd  # noqa: E402

VENV_BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
}


def make_inventory(path: Path, host: str, index: int) -> None:
    """The default inventory with one host of the ad-hoc index range and a 1 s emulated start-up."""
    import yaml

    inv = yaml.safe_load((ROOT / "inventory" / "emulator.yml").read_text())
    group = inv["all"]["children"]["emulator_hosts"]
    group["hosts"] = {host: {"emulator_host_index": index}}
    group.setdefault("vars", {})["sglang_server_emulator_startup_s"] = 1
    path.write_text(yaml.safe_dump(inv, sort_keys=False))


def hosts_play(inv: Path, state: str) -> None:
    subprocess.run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            str(inv),
            "playbooks/emulator_hosts.yml",
            "-e",
            f"emulator_hosts_state={state}",
        ],
        cwd=ROOT,
        env=ENV,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def one_task_run(inv: Path, host: str) -> float:
    import ansible_runner

    pdd = tempfile.mkdtemp(prefix="sgt-bench-")
    play = [
        {
            "name": "One task",
            "hosts": host,
            "gather_facts": False,
            "tasks": [{"name": "true", "ansible.builtin.command": "/bin/true", "changed_when": False}],
        }
    ]
    t0 = time.perf_counter()
    try:
        r = ansible_runner.run(
            private_data_dir=pdd,
            project_dir=str(ROOT),
            playbook=play,
            inventory=str(inv),
            quiet=True,
            envvars={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "PATH": ENV["PATH"]},
            suppress_env_files=True,
        )
        if r.status != "successful":
            raise SystemExit(f"the one-task run failed: {r.status}")
    finally:
        shutil.rmtree(pdd, ignore_errors=True)
    return time.perf_counter() - t0


DATA = ROOT / "bench" / "sweep_overhead"


def measure(args: argparse.Namespace) -> dict:
    """One run: the one-task runs around the sweep and the sweep's own timing records (kept)."""
    host = f"emu-bench{args.index}"
    work = Path(tempfile.mkdtemp(prefix="sgt-overhead-"))
    inv = work / "inventory.yml"
    make_inventory(inv, host, args.index)
    reached_by = connection(inv)
    try:
        hosts_play(inv, "present")
        before = [one_task_run(inv, host) for _ in range(args.runs)]
        out = work / "sweep"
        cmd = sweep_cmd(
            out,
            inv,
            "--steps",
            args.steps,
            "--concurrency",
            "1",
            "--requests-per-level",
            "2",
            "--output-len",
            "32",
            "--input-len",
            "32",
            "--warmup-requests",
            "1",
            "--no-early-stop",
            "--search",
            "grid",
            "--confirm",
            "0",
        )
        for e in args.extra_vars:
            cmd += ["-e", e]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
        sweep_s = time.perf_counter() - t0
        if p.returncode != 0:
            print(p.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"the sweep failed (rc {p.returncode})")
        after = [one_task_run(inv, host) for _ in range(args.runs)]
        recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    finally:
        try:
            hosts_play(inv, "absent")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    return {
        "run": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "revision": git_rev(),
        "machine": machine_text(),
        "load": [round(x, 2) for x in load],
        "steps": args.steps,
        "sweep_s": round(sweep_s, 2),
        "one_task_s": [round(x, 3) for x in before + after],
        "timings": [r for r in recs if r["type"] == "timing"],
        # the correctness gate's check of each configuration (it runs by default since issue 20)
        "gates": [r for r in recs if r["type"] == "verify" and r.get("role", "config") == "config"],
        "connection": reached_by,
    }


def connection(inv: Path) -> str:
    """How the inventory reaches the emulator hosts (its `ansible_connection`)."""
    import yaml

    group = yaml.safe_load(inv.read_text())["all"]["children"]["emulator_hosts"]
    return str((group.get("vars") or {}).get("ansible_connection", "ssh"))


def render(data: dict | None) -> tuple[str, bool]:
    head = "# Per-configuration overhead of a sweep (bench/sweep_overhead.py)\n\n"
    if not data:
        return (
            head + "No kept data: the runs this file once showed (2026-11-30, and a side-by-side table typed in by "
            "hand) kept no raw records, so their figures are not repeated here. Regenerate: "
            "`scripts/bench.sh sweep_overhead` (an emulator host; it keeps the run in "
            "`bench/sweep_overhead/run.json`, and `--render` rebuilds this file from it).\n",
            False,
        )
    floor = statistics.median(data["one_task_s"])
    rows, judged = [], []
    gates = {(g["config"]["config_id"], int(g.get("deployment") or 1)): g for g in data.get("gates", [])}
    for r in data["timings"]:
        overhead = r["total_s"] - (r["ready_s"] or 0) - r["bench_s"]
        gate = gates.get((r["config"]["config_id"], int(r.get("deployment") or 1)))
        ratio = overhead / floor
        tuner_own = r["total_s"] - r["deploy_s"] - r["warmup_s"] - r["bench_s"]
        rows.append(
            (
                r["config"]["config_id"],
                "full" if r["full_run"] else "configure+run",
                r["total_s"],
                r["deploy_s"],
                r["ready_s"] or 0,
                r["warmup_s"],
                r["bench_s"],
                tuner_own,
                None if gate is None or gate.get("seconds") is None else float(gate["seconds"]),
                overhead,
                ratio,
            )
        )
        if not r["full_run"]:
            judged.append(ratio)
    ok = bool(judged) and max(judged) <= 2.0
    load = data["load"]
    ones = data["one_task_s"]
    lines = [
        head.rstrip("\n"),
        "",
        f"- run: {data['run']} (code revision {data['revision']}), {data['machine']}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; kept in `bench/sweep_overhead/run.json` "
        "(`--render` rebuilds this file from it)",
        f"- host: one emulator host (podman + systemd, {data.get('connection', 'podman')} connection), "
        "emulated start-up 1 s; "
        f"sweep --steps {data['steps']}, one level (C=1, 2 requests of 32 tokens), 1 warm-up request; "
        f"whole sweep {data['sweep_s']:.1f} s",
        f"- one-task ansible-runner run on the same host (`command: /bin/true`), {len(ones)} runs "
        f"around the sweep: median **{floor:.2f} s** (min {min(ones):.2f}, max {max(ones):.2f})",
        "- overhead = total - server start-up (sglang_ready's ready_seconds) - benchmark (levels' wall time)",
        "",
        "- deploy s: the ansible-runner run of the deploy play (it includes the server's start-up); "
        "outside the play: total - deploy - warm-up - benchmark (the tuner's own work between them), of it "
        "the correctness gate's check (`verify` record; - where the run kept none)",
        "",
        "| config | deploy run | total s | deploy s | server start-up s | warm-up s | benchmark s | "
        "outside the play s | of it, the gate s | overhead s | overhead / one-task run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cid, kind, total, dep, ready, warm, bench, own, gate_s, over, ratio in rows:
        lines.append(
            f"| {cid} | {kind} | {total:.2f} | {dep:.2f} | {ready:.2f} | {warm:.2f} | {bench:.2f} | "
            f"{own:.2f} | {'-' if gate_s is None else f'{gate_s:.2f}'} | {over:.2f} | {ratio:.2f}x |"
        )
    lines += [
        "",
        f"Target (configure+run configurations: overhead <= 2 x one-task run): **{'met' if ok else 'MISSED'}**",
        "",
    ]
    return "\n".join(lines), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=int, default=201, help="emulator host index (200-254: ad hoc)")
    ap.add_argument("--steps", default="1-3")
    ap.add_argument("--runs", type=int, default=3, help="one-task runs before and after the sweep")
    ap.add_argument("--render", action="store_true", help="measure nothing: rebuild from bench/sweep_overhead/")
    ap.add_argument("--out", default=str(ROOT / "bench" / "sweep_overhead.md"))
    ap.add_argument("-e", "--extra-vars", action="append", default=[], help="passed to the sweep")
    args = ap.parse_args()
    data = kept(DATA / "run.json", args.render, lambda: measure(args))
    text, ok = render(data)
    Path(args.out).write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
