"""Helpers for the sglang_ready module tests (imported by name; conftest.py holds the fixtures).

The module is collection content: it imports its parsers as
``ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_log``. ``make setup`` links the
repo into ``.ansible/collections/ansible_collections/sglang_tune/serving``; with that directory on
``sys.path`` the in-process tests import the module and its module_utils under the very names
Ansible gives them (``ansible_collections`` is a namespace package).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

COLLECTIONS = ROOT / ".ansible" / "collections"
MODULE_NAME = "ansible_collections.sglang_tune.serving.plugins.modules.sglang_ready"

if not (COLLECTIONS / "ansible_collections" / "sglang_tune" / "serving" / "galaxy.yml").is_file():
    raise RuntimeError(f"{COLLECTIONS} does not hold the repo as sglang_tune.serving: run `make setup`")
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))


def import_sglang_ready() -> Any:
    """The module under test, imported by its collection name (as Ansible imports it)."""
    import importlib

    return importlib.import_module(MODULE_NAME)


def load_fixture(name: str) -> list[str]:
    """A fixture's log lines, without its leading ``#`` citation header."""
    lines = (FIXTURES / name).read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    body = lines[i:]
    if body and body[-1] == "":
        body.pop()
    return body


# ------------------------------------------------------------------------------------------
# A scripted stand-in for SGLang's HTTP side (real sockets on loopback)
# ------------------------------------------------------------------------------------------


class FakeSGLang:
    """HTTP server on 127.0.0.1 whose /health answers follow a script.

    ``health`` is a callable ``(elapsed_s) -> status`` so tests can say "503 for 1.5 s, then
    200"; ``server_info``/``get_server_info``/``models`` are JSON bodies or ``None`` for 404.
    """

    def __init__(self):
        self.health: Callable[[float], int] = lambda t: 200
        self.health_delay_s = 0.0
        self.server_info: dict[str, Any] | None = None
        self.get_server_info: dict[str, Any] | None = None
        self.models: dict[str, Any] | None = None
        self.requests: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self.first_200_at: float | None = None
        # set at the first /health request: the gate reads the log before it probes, so a writer
        # that waits for this appends after the gate's first read of the file
        self.probed = threading.Event()
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                now = time.monotonic()
                with fake.lock:
                    fake.requests.append({"path": self.path, "t": now, "auth": self.headers.get("Authorization")})
                if self.path == "/health":
                    fake.probed.set()
                    if fake.health_delay_s:
                        time.sleep(fake.health_delay_s)
                    status = fake.health(now - fake.t0)
                    if status == 200 and fake.first_200_at is None:
                        fake.first_200_at = now
                    self._send(status, b"" if status == 200 else b"starting")
                    return
                body = {
                    "/server_info": fake.server_info,
                    "/get_server_info": fake.get_server_info,
                    "/v1/models": fake.models,
                }.get(self.path)
                if body is None:
                    self._send(404, b'{"detail":"Not Found"}')
                else:
                    self._send(200, json.dumps(body).encode())

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def restart_clock(self):
        self.t0 = time.monotonic()
        self.first_200_at = None

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ------------------------------------------------------------------------------------------
# Running the module in-process with Ansible's supported test helper
# ------------------------------------------------------------------------------------------


class ModuleExit(Exception):
    def __init__(self, result: dict[str, Any], failed: bool):
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


def exit_json_raises(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise ModuleExit(kwargs, failed=False)


def fail_json_raises(self, msg, **kwargs):
    kwargs["msg"] = msg
    kwargs["failed"] = True
    raise ModuleExit(kwargs, failed=True)


@contextmanager
def appending_writer(
    path: Path,
    lines: list[str],
    delay_s: float = 0.0,
    start_after_s: float = 0.0,
    after: threading.Event | None = None,
):
    """Append ``lines`` to ``path`` from a thread, ``delay_s`` apart (a server writing its log),
    ``start_after_s`` after ``after`` is set (when given: e.g. FakeSGLang.probed, for lines that must
    arrive after the gate's first read; a fixed delay alone loses that race on a loaded machine)."""
    stop = threading.Event()

    def work():
        if after is not None:
            while not after.wait(0.05):
                if stop.is_set():
                    return
        if start_after_s and stop.wait(start_after_s):
            return
        with open(path, "a", encoding="utf-8") as fh:
            for line in lines:
                if stop.is_set():
                    return
                fh.write(line + "\n")
                fh.flush()
                if delay_s and stop.wait(delay_s):
                    return

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=5)
