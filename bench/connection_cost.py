#!/usr/bin/env python3
"""Benchmark: what one Ansible task costs on an emulator host, by connection.

Why: the systemd test stage and every deploy are Ansible plays against emulator hosts, and the
podman connection (`containers.podman.podman`) cannot pipeline: each task is a `podman mount` and
several `podman exec`. inventory/emulator.yml reaches the hosts over SSH instead (sshd in the
image, pipelining, one shared connection per host). This measures both, side by side in one run,
on one emulator host made by playbooks/emulator_hosts.yml:
- a play of `--tasks` trivial tasks (`ansible.builtin.command: "true"`) over `local` (the floor:
  Ansible's own work), SSH with the shared connection (the inventory's settings), SSH without it
  (`ControlMaster=no`) and the podman connection, interleaved, `--runs` times each;
- the deploy play run again with nothing changed (the role's whole task list, the gate included),
  over SSH and over podman, interleaved, `--runs` times each.
Each run's wall time and the machine's CPU time in it (all processes, containers included:
/proc/stat's busy jiffies). Medians are compared.
Target, stated before the run: over SSH with the shared connection, the trivial play costs at most
half the CPU time it costs over the podman connection.

Writes bench/connection_cost.md (or --out) from the run it keeps in bench/connection_cost/run.json
(`--render` rebuilds the file from it); exits 1 when the target is missed.
Usage: .venv/bin/python bench/connection_cost.py [--index 205] [--tasks 20] [--runs 3] [--render]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import git_rev, kept  # noqa: E402  (bench/: the script's own directory)
from sweep_overhead import ENV, ROOT, VENV_BIN, hosts_play, make_inventory  # noqa: E402  (one host recipe)

DATA = ROOT / "bench" / "connection_cost"
HOST = "conn-cost"

# name -> what the inventory's emulator_hosts vars become for it (None: the inventory as it is)
CONNECTIONS: dict[str, dict[str, Any] | None] = {
    "ssh, shared connection (inventory/emulator.yml)": None,
    "ssh, no shared connection": {"ansible_ssh_args": "-o ControlMaster=no"},
    "podman (containers.podman.podman)": {"ansible_connection": "containers.podman.podman"},
}
SSH, PODMAN = "ssh, shared connection (inventory/emulator.yml)", "podman (containers.podman.podman)"
LOCAL = "local (Ansible's own work, no host)"


def busy_jiffies() -> int:
    """All CPUs' non-idle time so far (user, nice, system, irq, softirq, steal), in jiffies."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return user + nice + system + irq + softirq + steal


def inventory(path: Path, index: int, override: dict[str, Any] | None) -> Path:
    """The bench host's inventory (sweep_overhead.make_inventory), with `override` on its vars."""
    make_inventory(path, HOST, index)
    inv = yaml.safe_load(path.read_text())
    v = inv["all"]["children"]["emulator_hosts"]["vars"]
    v["sglang_server_client_host"] = f"10.213.{index}.2"
    if override:
        v.update(override)
        if override.get("ansible_connection", "ssh") != "ssh":
            v.pop("ansible_host", None)  # the podman connection takes the container's name
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def play(args: list[str], what: str) -> tuple[float, float]:
    """Run ansible-playbook; (wall s, machine CPU s) of it. Fails loudly: a failed run is no timing."""
    hz = os.sysconf("SC_CLK_TCK")
    c0, t0 = busy_jiffies(), time.perf_counter()
    r = subprocess.run([str(VENV_BIN / "ansible-playbook"), *args], cwd=ROOT, env=ENV, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, (busy_jiffies() - c0) / hz
    if r.returncode != 0:
        raise SystemExit(f"{what} failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
    return wall, cpu


def measure(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="sgt-conn-cost-"))
    invs = {name: inventory(tmp / f"inv{i}.yml", args.index, o) for i, (name, o) in enumerate(CONNECTIONS.items())}
    trivial = tmp / "trivial.yml"
    tasks = [{"name": f"t{i}", "ansible.builtin.command": "true", "changed_when": False} for i in range(args.tasks)]
    trivial.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], sort_keys=False))
    local_inv = tmp / "local.yml"
    local_inv.write_text(
        yaml.safe_dump(
            {"all": {"hosts": {"loc": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}
        )
    )
    base = invs[SSH]
    out: dict[str, Any] = {"trivial": {n: [] for n in [LOCAL, *CONNECTIONS]}, "deploy": {SSH: [], PODMAN: []}}
    hosts_play(base, "present")
    try:
        print("[connection_cost] first deploy (installs the emulator; not timed)", flush=True)
        play(["-i", str(base), "playbooks/deploy.yml"], "the first deploy")
        for run in range(args.runs):
            for name in [LOCAL, *CONNECTIONS]:
                inv = local_inv if name == LOCAL else invs[name]
                wall, cpu = play(["-i", str(inv), str(trivial)], f"{args.tasks} tasks over {name}")
                out["trivial"][name].append({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)})
                print(f"[connection_cost] run {run + 1}: {args.tasks} tasks over {name}: {wall:.2f} s, {cpu:.2f} CPU-s")
            for name in (SSH, PODMAN):
                wall, cpu = play(["-i", str(invs[name]), "playbooks/deploy.yml"], f"the unchanged deploy over {name}")
                out["deploy"][name].append({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)})
                print(f"[connection_cost] run {run + 1}: unchanged deploy over {name}: {wall:.2f} s, {cpu:.2f} CPU-s")
    finally:
        hosts_play(base, "absent")
    return {
        "run": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "revision": git_rev(),
        "machine": f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs",
        "load": list(os.getloadavg()),
        "tasks": args.tasks,
        "runs": args.runs,
        **out,
    }


def render(data: dict[str, Any] | None) -> tuple[str, bool]:
    head = "# What one Ansible task costs on an emulator host, by connection (bench/connection_cost.py)\n"
    if not data:
        return head + "\nNo kept data. Regenerate: `scripts/bench.sh connection_cost`.\n", False

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    n = data["tasks"]
    load = data["load"]
    lines = [
        head,
        f"- run: {data['run']} (code revision {data['revision']}), {data['machine']}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; kept in `bench/connection_cost/run.json` "
        "(`--render` rebuilds this file from it)",
        f"- one emulator host (podman + systemd + sshd, playbooks/emulator_hosts.yml); each row "
        f"{data['runs']} runs, interleaved; CPU = the whole machine's busy time during the run "
        "(controller, podman, the container), from /proc/stat",
        "",
        f'## A play of {n} trivial tasks (`ansible.builtin.command: "true"`)',
        "",
        "| connection | wall s (median) | CPU s (median) | CPU s per task | runs (wall / CPU) |",
        "|---|---|---|---|---|",
    ]
    for name, rows in data["trivial"].items():
        runs = ", ".join(f"{r['wall_s']:.2f}/{r['cpu_s']:.2f}" for r in rows)
        lines.append(
            f"| {name} | {med(rows, 'wall_s'):.2f} | {med(rows, 'cpu_s'):.2f} | {med(rows, 'cpu_s') / n:.3f} | {runs} |"
        )
    lines += [
        "",
        "## The deploy play again, nothing changed (the role's task list and the gate)",
        "",
        "| connection | wall s (median) | CPU s (median) | runs (wall / CPU) |",
        "|---|---|---|---|",
    ]
    for name, rows in data["deploy"].items():
        runs = ", ".join(f"{r['wall_s']:.2f}/{r['cpu_s']:.2f}" for r in rows)
        lines.append(f"| {name} | {med(rows, 'wall_s'):.2f} | {med(rows, 'cpu_s'):.2f} | {runs} |")
    ssh_cpu, podman_cpu = med(data["trivial"][SSH], "cpu_s"), med(data["trivial"][PODMAN], "cpu_s")
    ok = ssh_cpu <= 0.5 * podman_cpu
    lines += [
        "",
        f"Target (the trivial play's median CPU over SSH with the shared connection <= 0.5 x over podman): "
        f"{ssh_cpu:.2f} against {podman_cpu:.2f} CPU-s ({ssh_cpu / podman_cpu:.2f}x): **{'met' if ok else 'MISSED'}**",
        "",
    ]
    return "\n".join(lines), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=int, default=205, help="emulator host index (200-254: ad hoc)")
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--render", action="store_true", help="measure nothing: rebuild from bench/connection_cost/")
    ap.add_argument("--out", default=str(ROOT / "bench" / "connection_cost.md"))
    args = ap.parse_args()
    data = kept(DATA / "run.json", args.render, lambda: measure(args))
    text, ok = render(data)
    Path(args.out).write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
