"""Helpers for the tuner's tests: real emulator processes on loopback (imported by name)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

# tests/helpers is on sys.path under pytest (tests/conftest.py); the benches import this file directly
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "helpers"))
from emulator_proc import emulator, emulator_cmd, free_port, wait_for_health  # noqa: E402,F401
from tuner_cli import sweep_cmd  # noqa: E402,F401

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def local_inventory(path: Path, hosts: dict[str, int], state_dir: Path) -> Path:
    """An inventory of local hosts for fixtures/local_emulator_deploy.yml (one port each)."""
    lines = ["---", "all:", "  children:", "    sglang_servers:", "      hosts:"]
    for name, port in hosts.items():
        lines += [
            f"        {name}:",
            f"          local_emu_port: {port}",
            f"          local_emu_dir: {state_dir / name}",
        ]
    lines += [
        "      vars:",
        "        ansible_connection: local",
        '        ansible_python_interpreter: "{{ ansible_playbook_python }}"',
        "",
    ]
    path.write_text("\n".join(lines))
    return path


def local_target_args(out: Path, inventory: Path) -> list[str]:
    """`tuner sweep`'s output folder and target: the local hosts of `local_inventory`, deployed
    through fixtures/local_emulator_deploy.yml (the sweep tests pass these to `cli.main` with their
    own options)."""
    return ["--out", str(out), "--inventory", str(inventory), *local_deploy_args()]


def local_deploy_args() -> list[str]:
    """The playbook that deploys to `local_inventory`'s hosts, and the checkout it runs from."""
    return ["--playbook", str(FIXTURES / "local_emulator_deploy.yml"), "-e", f"project_dir={ROOT}"]


def local_sweep_cmd(out: Path, inventory: Path, *args: str) -> list[str]:
    """`sweep_cmd` on the local hosts of `local_inventory` (`local_deploy_args`)."""
    return sweep_cmd(out, inventory, *local_deploy_args(), *args)


def stop_local_emulators(state_dir: Path, wait_s: float = 5.0) -> None:
    """Stop what fixtures/local_emulator_deploy.yml started (its pid files name process groups),
    waiting up to `wait_s` for them to leave (their last log line is the emulator's clock line)."""
    groups = []
    for pidfile in state_dir.glob("*/pid"):
        try:
            pgid = int(pidfile.read_text().strip())
            os.killpg(pgid, signal.SIGTERM)
            groups.append(pgid)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait_s
    while groups and time.monotonic() < deadline:
        alive = []
        for pgid in groups:
            try:
                os.killpg(pgid, 0)
                alive.append(pgid)
            except (ProcessLookupError, PermissionError):
                pass
        groups = alive
        if groups:
            time.sleep(0.1)


def emulator_clock(state_dir: Path) -> dict[str, float]:
    """Whether the local emulators of a sweep kept their model's clock, from the clock line each
    one logs when it stops (tuner/emulator/logs.py CLOCK_LINE; the fixture keeps every deployment's
    log in log.all): servers seen, the largest lag behind the clock (ms) and the lag resets (each
    one lost model time: the CPU, not the profile, set the pace)."""
    from tuner.emulator.logs import parse_clock_lines

    lines: list[dict[str, float]] = []
    for log in sorted([*state_dir.glob("*/log.all"), *state_dir.glob("*/log")]):
        lines += parse_clock_lines(log.read_text(encoding="utf-8", errors="replace"))
    return {
        "servers": len(lines),
        "max_lag_ms": max((c["max_lag_ms"] for c in lines), default=0.0),
        "lag_resets": sum(int(c["lag_resets"]) for c in lines),
    }


def grep_tree(root: Path, needle: str) -> list[Path]:
    """Every file under root that contains needle (bytes), for secret-leak checks."""
    hits = []
    for p in root.rglob("*"):
        if p.is_file() and needle.encode() in p.read_bytes():
            hits.append(p)
    return hits


@contextmanager
def supervised_emulator(
    first: list[str], then: list[str] | None = None, *, steps: int = 3, restart_s: float = 0.5
) -> Iterator[tuple[str, list[int]]]:
    """An emulator restarted whenever it exits, as systemd's Restart=on-failure does: the first
    process gets `first` as extra flags, every later one `then` (default: the same). Yields the URL
    and the list of exit codes seen so far."""
    import threading

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exits: list[int] = []
    stop = threading.Event()
    current: list[subprocess.Popen[bytes]] = []

    def cmd(extra: list[str]) -> list[str]:
        c = emulator_cmd("--tp-size", "4", "--emulator-startup-s", "0.2", "--enable-metrics", port=port)
        if steps:
            c += ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps)]
        return c + extra

    def loop() -> None:
        extra = first
        while not stop.is_set():
            proc = subprocess.Popen(
                cmd(extra), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            current[:] = [proc]
            while proc.poll() is None and not stop.is_set():
                time.sleep(0.05)
            if stop.is_set():
                break
            exits.append(proc.returncode)
            extra = then if then is not None else first
            stop.wait(restart_s)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        wait_for_health(url, None, timeout=60)  # no one process to watch: the loop restarts it
        yield url, exits
    finally:
        stop.set()
        for proc in current:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        t.join(timeout=10)


# -- the correctness gate's phase with fakes for the sweep's log and progress ---------------------
class PhaseLog:
    """The sweep's record log for a VerifyPhase: each record folded into a SweepState."""

    def __init__(self) -> None:
        from tuner.data.records import SweepState

        self.state = SweepState()

    def append(self, record: Any) -> dict[str, Any]:
        self.state.add(record)
        return {}


class PhaseProgress:
    """The sweep's progress log for a VerifyPhase: the lines it said."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)


def verify_phase(baseline_path: Path, **options: Any) -> tuple[Any, PhaseLog, PhaseProgress]:
    """A VerifyPhase over the shipped prompt set with its baseline at `baseline_path`, recording
    into fresh fakes; `options` as the sweep passes them (exact, extra_flags, recover_timeout)."""
    from tuner.verify.phase import VerifyPhase
    from tuner.verify.prompts import prompt_set, settings

    log, progress = PhaseLog(), PhaseProgress()
    phase = VerifyPhase(
        baseline_path=baseline_path,
        prompts=prompt_set(None, settings()),
        log=log,
        progress=progress,
        api_key=None,
        tool="test",
        **options,
    )
    return phase, log, progress


# -- real emulator hosts (podman + systemd) for the tuner's end-to-end tests ------------------------
SYSTEMD_ENV = {
    **{k: v for k, v in os.environ.items() if k not in ("SGLANG_API_KEY", "OPENAI_API_KEY")},
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    "ANSIBLE_NOCOLOR": "1",
}


def emulator_image_present() -> bool:
    """Whether podman and the emulator-host image `make setup` builds are here."""
    if not shutil.which("podman"):
        return False
    cmd = ["podman", "image", "exists", "localhost/sglang-emulator-host:bookworm"]
    return subprocess.run(cmd, capture_output=True).returncode == 0


@contextmanager
def emulator_host_inventory(tmp_dir: Path, host: str, index: int, startup_s: float = 1) -> Iterator[Path]:
    """One emulator host (`host`, 10.213.`index`.x) made by playbooks/emulator_hosts.yml from the
    repo's inventory/emulator.yml, and removed afterwards whatever happens; yields the inventory.
    Each test file has its own host name and index (the systemd stage runs files in parallel)."""
    if os.geteuid() != 0 or not emulator_image_present():
        import pytest

        pytest.skip("needs root, podman and the emulator-host image (make setup)")
    inv = yaml.safe_load((ROOT / "inventory" / "emulator.yml").read_text())
    group = inv["all"]["children"]["emulator_hosts"]
    group["hosts"] = {host: {"emulator_host_index": index}}
    group.setdefault("vars", {})["sglang_server_emulator_startup_s"] = startup_s
    path = tmp_dir / "inventory.yml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False))

    def hosts(state: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(path), "playbooks/emulator_hosts.yml"]
        return subprocess.run(
            [*cmd, "-e", f"emulator_hosts_state={state}"],
            cwd=ROOT,
            env=SYSTEMD_ENV,
            capture_output=True,
            text=True,
            timeout=300,  # as roles_testlib's: a stuck play fails the test rather than hold the stage
        )

    try:
        made = hosts("present")
        assert made.returncode == 0, made.stdout[-3000:]
        yield path
    finally:
        gone = hosts("absent")
        assert gone.returncode == 0, gone.stdout[-3000:]
