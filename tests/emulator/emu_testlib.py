"""Test helpers: real emulator processes on loopback, with their log output captured to files."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from emulator_proc import emulator_cmd, free_port, start_process, stop_process

ROOT = Path(__file__).resolve().parents[2]
MODEL = "/shared/models/Qwen3.5-122B-A10B"


def spec_flags(k: int) -> list[str]:
    if not k:
        return []
    return [
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        str(k),
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        str(k + 1),
    ]


def start_mtp_with_metrics(emulator: Any, version: str, *extra: str) -> Any:
    """An emulator of SGLang `version` with depth-3 MTP and /metrics, its start-up short and its
    seed fixed, up and ready; `extra`: more flags (the parallel layout, say)."""
    return emulator(
        "--emulator-sglang-version",
        version,
        *extra,
        *spec_flags(3),
        "--disable-radix-cache",  # 0.5.10-0.5.12 refuse speculation with the hybrid model's radix cache
        "--enable-metrics",
        "--emulator-startup-s",
        "0.2",
        "--random-seed",
        "7",
    ).wait_ready()


# How long a start-up that must fail may take to exit: the wait includes the interpreter's start and
# imports, seconds on a loaded 2-core machine (one such wait of 10 s ran out, 2026-12-04).
START_FAILURE_EXIT_S = 60.0


class Emulator:
    """One `python -m tuner.emulator` process; stderr (SGLang's log) and stdout (access log) to files."""

    def __init__(
        self,
        tmp: Path,
        args: list[str],
        port: int | None = None,
        env: dict[str, str] | None = None,
        with_defaults: bool = True,
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = (
            emulator_cmd(*args, port=self.port, model=MODEL)
            if with_defaults
            else emulator_cmd(*args, model=None, served=None)
        )
        self.err_path = tmp / f"emu-{self.port}.err"
        self.out_path = tmp / f"emu-{self.port}.out"
        self._err = open(self.err_path, "wb")
        self._out = open(self.out_path, "wb")
        self.proc = start_process(self.cmd, stdout=self._out, stderr=self._err, env=env)

    # ---- observation ----------------------------------------------------------------------------
    def log(self) -> str:
        return self.err_path.read_text(errors="replace")

    def access(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait_for_line(self, text: str, timeout: float = 15.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"emulator exited ({self.proc.returncode}) before {text!r}:\n{self.log()[-3000:]}")
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {text!r}:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float = 60.0) -> Emulator:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"emulator exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            try:
                if self.get("/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.03)
        raise AssertionError(f"emulator not ready after {timeout}s:\n{self.log()[-3000:]}")

    def wait_exit(self, timeout: float = 15.0) -> int:
        """The exit status, within `timeout` s. A wait that includes the process's start (a start-up
        that must fail) gives START_FAILURE_EXIT_S."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"emulator still running after {timeout}s:\n{self.log()[-3000:]}") from None

    # ---- HTTP (standard library: the tests check the server, not a client library) -------------------
    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 30.0
    ) -> tuple[int, bytes, dict[str, str]]:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers or {})

    def get(self, path: str, **kw: Any) -> tuple[int, bytes]:
        status, body, _ = self.request("GET", path, **kw)
        return status, body

    def get_json(self, path: str, **kw: Any) -> Any:
        status, body = self.get(path, **kw)
        assert status == 200, (status, body[:300])
        return json.loads(body)

    def post_json(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        status, raw, _ = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(raw)
        except json.JSONDecodeError:
            return status, raw

    def stream(self, path: str, body: Any, headers: dict[str, str] | None = None) -> list[Any]:
        """SSE events of a streamed response: parsed JSON objects, and the string '[DONE]'."""
        status, raw, _ = self.request("POST", path, body, headers=headers)
        assert status == 200, (status, raw[:300])
        return parse_sse(raw)

    # ---- teardown -------------------------------------------------------------------------------------
    def terminate(self, timeout: float = 10.0) -> int:
        code = stop_process(self.proc, timeout)
        self._err.close()
        self._out.close()
        return code if code is not None else self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self._err.close()
        self._out.close()


def parse_sse(raw: bytes) -> list[Any]:
    events: list[Any] = []
    for block in raw.split(b"\n\n"):
        block = block.strip()
        if not block.startswith(b"data: "):
            continue
        data = block[6:]
        events.append("[DONE]" if data == b"[DONE]" else json.loads(data))
    return events


def run_cli(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`python -m tuner.emulator ARGV` to its end (the argument and version tests: exit codes and
    messages), through the one command helper (tests/helpers/emulator_proc.py)."""
    cmd = emulator_cmd(*argv, model=None, served=None)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
