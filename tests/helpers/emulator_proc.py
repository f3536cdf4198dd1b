"""One way for tests and benches to run the SGLang emulator as a real process on loopback: a free
port, the `python -m tuner.emulator` command line, the wait for /health, and the process itself
(`start_process` / `stop_process`, and `emulator_process` around them: started in a session of its
own, stopped with everything it started). tests/emulator/emu_testlib.py's `Emulator` (its log and
access log apart, the HTTP helpers the emulator's own tests use) starts and stops through them too.

Importable by tests (tests/conftest.py puts this directory on sys.path) and by bench/ scripts
(`sys.path.insert(0, str(ROOT / "tests" / "helpers"))`). Standard library only.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


_PORTS_LOW = 10000  # the lowest port handed out (above the well-known and registered services' usual ones)
_PORTS_PER_PROCESS = 1000
_handed: set[int] = set()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, for a server a test starts next.

    Not bind(0): the kernel draws those from its ephemeral range, the range every outgoing
    connection's local port comes from too, and between this call and the server's own bind (a
    second of Python start-up) a test's HTTP client can take the port ("address already in use":
    tests/emulator/test_multinode.py, unit stage on 8 workers, 2026-12-04). So ports come from below
    that range, each xdist worker (PYTEST_XDIST_WORKER gwN; any other process by its pid) from a
    slice of its own, in turn from a random start, never the same one twice in a process, each
    checked free with a bind.
    """
    span = max(_ephemeral_low() - _PORTS_LOW, _PORTS_PER_PROCESS)
    slices = max(span // _PORTS_PER_PROCESS, 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else os.getpid()
    base = _PORTS_LOW + (index % slices) * _PORTS_PER_PROCESS
    start = random.randrange(_PORTS_PER_PROCESS)
    for i in range(_PORTS_PER_PROCESS):
        port = base + (start + i) % _PORTS_PER_PROCESS
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no free port in {base}-{base + _PORTS_PER_PROCESS - 1}")


def emulator_cmd(
    *args: str,
    port: int | None = None,
    model: str | None = "/models/x",
    served: str | None = "qwen3.5-122b",
    host: str = "127.0.0.1",
    python: str = sys.executable,
) -> list[str]:
    """`python -m tuner.emulator` with the model, served name, host and port given first (each left
    out when None), then `args` as they are."""
    cmd = [python, "-m", "tuner.emulator"]
    if model is not None:
        cmd += ["--model-path", model]
    if served is not None:
        cmd += ["--served-model-name", served]
    if port is not None:
        cmd += ["--host", host, "--port", str(port)]
    return cmd + list(args)


def wait_for_health(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 60.0) -> None:
    """Until GET url/health answers 200; RuntimeError when the process ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"emulator exited with {proc.returncode}: {' '.join(map(str, proc.args))}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"emulator at {url} did not become healthy within {timeout:g} s")
        time.sleep(0.1)


def start_process(
    cmd: list[str],
    *,
    stdout: Any = subprocess.DEVNULL,
    stderr: Any = subprocess.STDOUT,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `cmd` (an `emulator_cmd` line) from the repository root in a session of its own, with
    this process's environment less SGLANG_EMULATOR_PROFILE (a profile the caller does not name
    is not the test's), then `env` over it."""
    e = {k: v for k, v in os.environ.items() if k != "SGLANG_EMULATOR_PROFILE"}
    e.update(env or {})
    return subprocess.Popen(cmd, cwd=ROOT, stdout=stdout, stderr=stderr, env=e, start_new_session=True)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGTERM to the process (its own handler drains and exits), SIGKILL to its whole session after
    `timeout` s; its exit status (negative: the signal that ended it)."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return proc.returncode


@contextmanager
def emulator_process(
    cmd: list[str], url: str, *, log: Path | None = None, wait: bool = True, timeout: float = 60.0
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` (an `emulator_cmd` line serving `url`) as `start_process` does, its output to `log`
    (else discarded); with `wait`, until /health answers (an emulator that exits first says so at
    once). Yields the process; on leaving, `stop_process`."""
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = start_process(cmd, stdout=out)
    try:
        if wait:
            wait_for_health(url, proc, timeout=timeout)
        yield proc
    finally:
        stop_process(proc)
        if log:
            out.close()


@contextmanager
def emulator(
    *extra: str, steps: int = 3, startup_s: float = 0.2, log: Path | None = None, wait: bool = True
) -> Iterator[str]:
    """A real `python -m tuner.emulator` process on a free loopback port; yields its URL."""
    port = free_port()
    cmd = emulator_cmd("--tp-size", "4", "--emulator-startup-s", str(startup_s), "--enable-metrics", port=port)
    if steps:
        cmd += [
            "--speculative-algorithm",
            "NEXTN",
            "--speculative-num-steps",
            str(steps),
            "--speculative-eagle-topk",
            "1",
        ]
    url = f"http://127.0.0.1:{port}"
    with emulator_process(cmd + list(extra), url, log=log, wait=wait):
        yield url
