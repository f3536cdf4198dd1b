"""One way for tests and benches to run the SGLang emulator as a real process on loopback: a free
port, the `python -m tuner.emulator` command line, and the wait for /health.

Importable by tests (tests/conftest.py puts this directory on sys.path) and by bench/ scripts
(`sys.path.insert(0, str(ROOT / "tests" / "helpers"))`). Standard library only.
"""

from __future__ import annotations

import os
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

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    cmd += list(extra)
    out = open(log, "wb") if log else subprocess.DEVNULL
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        if wait:
            wait_for_health(url, proc, timeout=60)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if log:
            out.close()
