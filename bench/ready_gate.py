#!/usr/bin/env python3
"""Benchmark of the sglang_ready gate: how soon after the fact does it report ready, or failure?

Each run starts the SGLang emulator (``python -m tuner.emulator``) as a real process writing its log
to a file, then runs the ``sglang_ready`` module at once (in this process, through Ansible's
``patch_module_args`` helper, with ``log_path`` and ``pid`` as a plain host would use them). Beside
it, an observer thread polls ``/health`` every 10 ms and tails the log, so the bench knows when
``/health`` first answered 200, when the fatal line was written and when the process exited, all
on the same monotonic clock as the module's report.

- Ready delay: the module's report (its ``exit_json``) minus the first 200 the observer saw.
- Failure delay: the module's report (``fail_json``) minus the earlier of the fatal log line and
  the process exit (emulator fault ``kv-oom``).

The manual loop this replaces slept a fixed 100 s after each restart, so it reported ready
``100 - t_first_200`` after the fact and a failure ``100 - t_failure`` after it. Both are shown
side by side from the same runs (the machine is shared and noisy: compare within one run).

Every start is kept in bench/ready_gate/run.json before the page is written from it; `--render`
rebuilds the page from that file alone.

Usage: .venv/bin/python bench/ready_gate.py [--starts 10] [--failures 10] [--systemd 10] [--render] [--out bench/ready_gate.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "ready_gate"
MANUAL_SLEEP_S = 100.0  # the seed campaign's `sleep 100` after each restart

# The module is collection content; `make setup` links the repo in as sglang_tune.serving.
sys.path.insert(0, str(ROOT / ".ansible" / "collections"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))

from ansible.module_utils import basic  # noqa: E402
from ansible.module_utils.testing import patch_module_args  # noqa: E402
from ansible_collections.sglang_tune.serving.plugins.modules import sglang_ready  # noqa: E402
from benchlib import git_rev, kept  # noqa: E402
from emulator_proc import emulator_cmd, emulator_process, free_port  # noqa: E402
from podman_host import labelled_run  # noqa: E402

FATAL_RE = re.compile(r"Not enough memory|Traceback \(most recent call last\)|Scheduler hit an exception")


class Reported(Exception):
    def __init__(self, result, failed):
        super().__init__("reported")
        self.result, self.failed, self.at = result, failed, time.monotonic()


def _exit(self, **kw):
    raise Reported(kw, False)


def _fail(self, msg, **kw):
    kw["msg"] = msg
    raise Reported(kw, True)


basic.AnsibleModule.exit_json = _exit
basic.AnsibleModule.fail_json = _fail


class Observer(threading.Thread):
    """Polls /health every 10 ms and tails the log; records when things first happened."""

    def __init__(self, url: str, log: Path, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.url, self.log, self.proc = url, log, proc
        self.first_200 = self.fatal_line = self.exited = None
        self.stop = threading.Event()

    def run(self):
        offset = 0
        buf = ""
        while not self.stop.is_set():
            now = time.monotonic()
            if self.first_200 is None:
                try:
                    with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                        if r.status == 200:
                            self.first_200 = now
                except (urllib.error.URLError, OSError):
                    pass
            if self.fatal_line is None:
                try:
                    with open(self.log, errors="replace") as fh:
                        fh.seek(offset)
                        chunk = fh.read()
                        offset = fh.tell()
                    buf += chunk
                    if FATAL_RE.search(buf):
                        self.fatal_line = time.monotonic()
                    buf = buf[-500:]
                except OSError:
                    pass
            if self.exited is None and self.proc.poll() is not None:
                self.exited = time.monotonic()
            self.stop.wait(0.01)


def one_start(workdir: Path, startup_s: float, fault: str | None, interval: float):
    port = free_port()
    log = workdir / f"emu-{port}.log"
    args = emulator_cmd(
        "--tp-size",
        "4",
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
        "--emulator-startup-s",
        f"{startup_s:.2f}",
        port=port,
        model="/models/Qwen3.5-122B-A10B",
    )
    if fault:
        args += ["--emulator-fault", fault]
    url = f"http://127.0.0.1:{port}"
    t_start = time.monotonic()
    # the one helper (tests/helpers/emulator_proc.py), without its wait: the module under test waits
    with emulator_process(args, url, log=log, wait=False) as proc:
        obs = Observer(url, log, proc)
        obs.start()
        module_args = {
            "url": url,
            "unit": "",
            "log_path": str(log),
            "pid": proc.pid,
            "timeout": 120,
            "interval": interval,
        }
        try:
            with patch_module_args(module_args):
                try:
                    sglang_ready.main()
                    raise RuntimeError("module returned without reporting")
                except Reported as rep:
                    report = rep
        finally:
            time.sleep(0.05)
            obs.stop.set()
            obs.join(timeout=5)
    row = {
        "startup_s": startup_s,
        "failed": report.failed,
        "reported": report.at - t_start,
        "first_200": None if obs.first_200 is None else obs.first_200 - t_start,
        "fatal_line": None if obs.fatal_line is None else obs.fatal_line - t_start,
        "exited": None if obs.exited is None else obs.exited - t_start,
        "kind": report.result.get("failure_kind"),
        "capacity_ok": bool((report.result.get("capacity") or {}).get("max_total_num_tokens")),
    }
    return row


# ------------------------------------------------------------------------------------------
# Optional: the production path, a systemd unit read through its journal (podman container)
# ------------------------------------------------------------------------------------------

OBSERVER = r"""
import json, sys, time, urllib.request
first = None
end = time.monotonic() + 180
while time.monotonic() < end and first is None:
    try:
        with urllib.request.urlopen("http://127.0.0.1:30000/health", timeout=1) as r:
            if r.status == 200:
                first = time.time()
    except Exception:
        pass
    time.sleep(0.01)
json.dump({"first_200": first}, open("/tmp/obs.json", "w"))
"""


class SystemdHost:
    """One emulator host container (systemd as PID 1), removed on close()."""

    IMAGE = os.environ.get("SGLANG_EMU_IMAGE", "localhost/sglang-emulator-host:bookworm")

    def __init__(self):
        self.name = f"sgt-test-ready-bench-{os.getpid()}"
        subprocess.run([sys.executable, str(ROOT / "scripts" / "build_wheelhouse.py"), "--quiet"], check=True)
        subprocess.run(
            ["podman", *labelled_run(self.name, self.IMAGE, "/sbin/init", systemd=True)],
            check=True,
            capture_output=True,
        )
        for _ in range(300):
            state = self.sh("systemctl is-system-running || true", check=False).strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.2)
        subprocess.run(["podman", "cp", str(ROOT / "build" / "wheelhouse"), self.name + ":/opt/wheelhouse"], check=True)
        self.sh(
            "python3 -m venv /opt/emu && /opt/emu/bin/pip install -q --no-index --find-links /opt/wheelhouse "
            "sglang-tune"
        )
        self.sh(f"cat > /tmp/observer.py <<'EOF'\n{OBSERVER}EOF")

    def sh(self, script, check=True):
        res = subprocess.run(["podman", "exec", self.name, "sh", "-c", script], capture_output=True, text=True)
        if check and res.returncode:
            raise RuntimeError(f"{script}: {res.stdout} {res.stderr}")
        return res.stdout

    def close(self):
        subprocess.run(["podman", "rm", "-f", "-t", "0", self.name], capture_output=True)

    def run(self, startup_s, fault):
        args = (
            "--model-path /models/Qwen3.5-122B-A10B --served-model-name qwen3.5-122b --host 127.0.0.1 "
            "--port 30000 --tp-size 4 --speculative-algorithm NEXTN --speculative-num-steps 3 "
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --emulator-startup-s {startup_s:.2f}"
        )
        if fault:
            args += " --emulator-fault " + fault
        self.sh(
            "systemctl stop sglang-qwen.service 2>/dev/null; systemctl reset-failed sglang-qwen.service "
            "2>/dev/null; rm -f /tmp/obs.json; cat > /etc/systemd/system/sglang-qwen.service <<'EOF'\n"
            f"[Service]\nExecStart=/opt/emu/bin/python -m tuner.emulator {args}\nEOF\nsystemctl daemon-reload",
            check=False,
        )
        if not fault:
            subprocess.run(["podman", "exec", "-d", self.name, "python3", "/tmp/observer.py"], check=True)
        self.sh("systemctl start sglang-qwen.service")
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
            ANSIBLE_STDOUT_CALLBACK="json",
            PATH=str(ROOT / ".venv" / "bin") + os.pathsep + os.environ["PATH"],
        )
        res = subprocess.run(
            [
                "ansible",
                "all",
                "-i",
                self.name + ",",
                "-c",
                "containers.podman.podman",
                "-e",
                "ansible_python_interpreter=/usr/bin/python3",
                "-m",
                "sglang_tune.serving.sglang_ready",
                "-a",
                json.dumps({"timeout": 120}),
            ],
            capture_output=True,
            text=True,
            cwd=str(ROOT),
            env=env,
        )
        t_end = time.time()  # the task result is back on the controller (the container shares the clock)
        result = json.loads(res.stdout)["plays"][0]["tasks"][0]["hosts"][self.name]
        row = {
            "startup_s": startup_s,
            "failed": bool(result.get("failed")),
            "kind": result.get("failure_kind"),
            "t_end": t_end,
            "reported_at": result.get("reported_at"),
            "first_200": None,
            "exited": None,
        }
        if fault:
            mono = self.sh("systemctl show -p ExecMainExitTimestampMonotonic --value sglang-qwen.service").strip()
            if mono and mono != "0":  # CLOCK_MONOTONIC (shared with the container) -> epoch
                row["exited"] = time.time() - (time.monotonic() - int(mono) / 1e6)
        else:
            for _ in range(100):
                out = self.sh("cat /tmp/obs.json 2>/dev/null || true", check=False)
                if out.strip():
                    row["first_200"] = json.loads(out)["first_200"]
                    break
                time.sleep(0.1)
        self.sh("systemctl stop sglang-qwen.service", check=False)
        return row


def measure_systemd(n, rng):
    """N ready and N failing starts of the unit in one systemd container: the rows as measured."""
    host = SystemdHost()
    ok, bad = [], []
    try:
        for _ in range(n):
            ok.append(host.run(round(rng.uniform(8.0, 12.0), 2), None))
            print(json.dumps(ok[-1]), flush=True)
        for _ in range(n):
            bad.append(host.run(round(rng.uniform(8.0, 12.0), 2), "kv-oom"))
            print(json.dumps(bad[-1]), flush=True)
    finally:
        host.close()
    return {"ok": ok, "bad": bad}


def systemd_section(runs, lines):
    """The journal path's table (appended to `lines`) and its two verdicts, from kept rows."""
    ok, bad = runs["ok"], runs["bad"]
    n = len(ok)
    lines += [
        "",
        "## The production path: systemd unit + journal, module run by Ansible (podman connection)",
        "",
        "Same gate, run as an Ansible task (`ansible -m sglang_tune.serving.sglang_ready`, default `interval`) against the emulator "
        "as `sglang-qwen.service` in a systemd container; the log is the unit invocation's journal. "
        '"module" is the module\'s own report time (`reported_at`); "task result" is when the result was '
        "back on the controller, i.e. it adds Ansible's return overhead. Failure time: systemd's "
        "`ExecMainExitTimestampMonotonic`; first 200: an observer in the container polling every 10 ms "
        "(the container shares the host's clocks).",
        "",
        "| run | start-up (s) | outcome | delay, module (s) | delay, task result (s) |",
        "|---:|---:|:---|---:|---:|",
    ]
    rd, fd, rt, ft = [], [], [], []

    def delays(r, t_event):
        if t_event is None or r["reported_at"] is None:
            return None, None
        return r["reported_at"] - t_event, r["t_end"] - t_event

    for i, r in enumerate(ok, 1):
        d, t = delays(r, None if r["failed"] else r["first_200"])
        if d is not None:
            rd.append(d)
            rt.append(t)
        lines.append(
            "| {} | {:.2f} | {} | {} | {} |".format(
                i, r["startup_s"], "ready" if not r["failed"] else r["kind"], fmt(d, 3), fmt(t, 3)
            )
        )
    for i, r in enumerate(bad, 1):
        d, t = delays(r, r["exited"] if r["failed"] else None)
        if d is not None:
            fd.append(d)
            ft.append(t)
        lines.append(
            "| {} | {:.2f} | failed: {} | {} | {} |".format(n + i, r["startup_s"], r["kind"], fmt(d, 3), fmt(t, 3))
        )
    lines += [
        "",
        "| measure | module median (s) | module max (s) | task result median (s) | task result max (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    if rd:
        lines.append(
            f"| ready ({len(rd)} starts) | {statistics.median(rd):.3f} | {max(rd):.3f} | {statistics.median(rt):.3f} | {max(rt):.3f} |"
        )
    if fd:
        lines.append(
            f"| failure ({len(fd)} starts) | {statistics.median(fd):.3f} | {max(fd):.3f} | {statistics.median(ft):.3f} | {max(ft):.3f} |"
        )
    return (
        bool(rd) and len(rd) == n and statistics.median(rd) < 1.0,
        bool(fd) and len(fd) == len(bad) and max(fd) < 3.0,
    )


def fmt(x, nd=2):
    return "—" if x is None else f"{x:.{nd}f}"


def measure(a) -> dict:
    """Every start of the run, as measured, with what the page says about the machine and the gate."""
    rng = random.Random(a.seed)
    ok_rows, fail_rows = [], []
    with tempfile.TemporaryDirectory(prefix="ready-gate-") as tmp:
        work = Path(tmp)
        plan = [(False, i) for i in range(a.starts)] + [(True, i) for i in range(a.failures)]
        for is_fail, _ in plan:
            startup = round(rng.uniform(a.min_startup, a.max_startup), 2)
            row = one_start(work, startup, "kv-oom" if is_fail else None, a.interval)
            (fail_rows if is_fail else ok_rows).append(row)
            print(json.dumps(row), flush=True)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "git": git_rev(),
        "platform": platform.platform(),
        "cpus": os.cpu_count() or 0,
        "python": platform.python_version(),
        "fatal_settle_s": sglang_ready.FATAL_SETTLE_S,
        "args": {k: getattr(a, k) for k in ("starts", "failures", "interval", "min_startup", "max_startup", "seed")},
        "command": " ".join(a.argv),
        "ok_rows": ok_rows,
        "fail_rows": fail_rows,
        "systemd": measure_systemd(a.systemd, rng) if a.systemd else None,
    }


def render(data: dict) -> tuple[str, bool]:
    """The page and whether every target is met, from the kept run only."""
    a = data["args"]
    ok_rows, fail_rows = data["ok_rows"], data["fail_rows"]
    lines = ["# sglang_ready: how soon it reports", ""]
    lines.append(
        f"Generated by `bench/ready_gate.py` on {data['date']} (code {data['git']}; {data['platform']}, "
        f"{data['cpus']} CPUs, Python {data['python']}; shared, noisy machine). Raw data: `bench/ready_gate/run.json`; "
        "`.venv/bin/python bench/ready_gate.py --render` rebuilds this page from it."
    )
    lines.append(
        "Emulator started as a real process per run (`python -m tuner.emulator`, TP 4, NEXTN 3/1/4, "
        f"start-up drawn uniformly in [{a['min_startup']:.1f}, {a['max_startup']:.1f}] s); module run with `log_path`, "
        f"`pid`, `interval={a['interval']:.2f}`. "
        "Times are seconds since the process was started; an observer polled `/health` every 10 ms."
    )
    lines += [
        "",
        "## Ready: module report vs `/health` first answering 200",
        "",
        "| run | start-up (s) | /health first 200 (s) | module reported (s) | delay (s) | `sleep 100` delay (s) | capacity read |",
        "|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    ready_delays, manual_ready = [], []
    for i, r in enumerate(ok_rows, 1):
        delay = None if (r["failed"] or r["first_200"] is None) else r["reported"] - r["first_200"]
        manual = None if r["first_200"] is None else MANUAL_SLEEP_S - r["first_200"]
        if delay is not None:
            ready_delays.append(delay)
        if manual is not None:
            manual_ready.append(manual)
        lines.append(
            "| {} | {:.2f} | {} | {} | {} | {} | {} |".format(
                i,
                r["startup_s"],
                fmt(r["first_200"]),
                fmt(r["reported"]),
                fmt(delay, 3),
                fmt(manual, 1),
                "yes" if r["capacity_ok"] else ("FAILED: {}".format(r["kind"]) if r["failed"] else "no"),
            )
        )
    lines += [
        "",
        "## Failure during start-up (`--emulator-fault kv-oom`): module report vs the failure",
        "",
        "| run | start-up (s) | fatal line (s) | process exit (s) | module reported (s) | delay (s) | kind | `sleep 100` delay (s) |",
        "|---:|---:|---:|---:|---:|---:|:---|---:|",
    ]
    fail_delays, manual_fail = [], []
    for i, r in enumerate(fail_rows, 1):
        marks = [t for t in (r["fatal_line"], r["exited"]) if t is not None]
        t_fail = min(marks) if marks else None
        delay = None if (t_fail is None or not r["failed"]) else r["reported"] - t_fail
        manual = None if t_fail is None else MANUAL_SLEEP_S - t_fail
        if delay is not None:
            fail_delays.append(delay)
        if manual is not None:
            manual_fail.append(manual)
        lines.append(
            "| {} | {:.2f} | {} | {} | {} | {} | {} | {} |".format(
                i,
                r["startup_s"],
                fmt(r["fatal_line"]),
                fmt(r["exited"]),
                fmt(r["reported"]),
                fmt(delay, 3),
                r["kind"] or "(reported ready!)",
                fmt(manual, 1),
            )
        )

    def stats(xs):
        return (f"{statistics.median(xs):.3f}", f"{max(xs):.3f}") if xs else ("—", "—")

    rm, rx = stats(ready_delays)
    fm, fx = stats(fail_delays)
    mrm, mrx = stats(manual_ready)
    mfm, mfx = stats(manual_fail)
    lines += [
        "",
        "## Summary",
        "",
        "| measure | target | sglang_ready median | sglang_ready max | `sleep 100` median | `sleep 100` max |",
        "|---|---|---:|---:|---:|---:|",
        f"| ready reported after /health first 200 ({len(ready_delays)} starts) | median < 1 s | {rm} | {rx} | {mrm} | {mrx} |",
        f"| failure reported after it happened ({len(fail_delays)} starts) | < 3 s | {fm} | {fx} | {mfm} | {mfx} |",
        "",
    ]
    ready_ok = bool(ready_delays) and statistics.median(ready_delays) < 1.0 and len(ready_delays) == len(ok_rows)
    fail_ok = bool(fail_delays) and max(fail_delays) < 3.0 and len(fail_delays) == len(fail_rows)
    lines.append("Targets met: ready {}, failure {}.".format("yes" if ready_ok else "NO", "yes" if fail_ok else "NO"))
    lines.append("")
    lines.append(
        "The ready delay is mostly the poll interval (a 200 is seen at the next poll, on average half an "
        "interval later) plus reading `/server_info` and parsing the log for the report; the failure delay "
        f"is the next poll plus up to {data['fatal_settle_s']:.1f} s of reading on, so that the exception line that ends a traceback "
        "is what the message reports."
    )
    sd_ok = True
    if data["systemd"]:
        sd_ready, sd_fail = systemd_section(data["systemd"], lines)
        lines.append("")
        lines.append(
            "Targets met on the journal path: ready {}, failure {}.".format(
                "yes" if sd_ready else "NO", "yes" if sd_fail else "NO"
            )
        )
        sd_ok = sd_ready and sd_fail
    lines += ["", f"Command: `.venv/bin/python bench/ready_gate.py {data['command']}`"]
    return "\n".join(lines) + "\n", ready_ok and fail_ok and sd_ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--starts", type=int, default=10, help="healthy starts (default 10)")
    ap.add_argument("--failures", type=int, default=10, help="starts that fail with kv-oom (default 10)")
    ap.add_argument("--interval", type=float, default=0.5, help="the module's interval (default: its default 0.5)")
    ap.add_argument("--min-startup", type=float, default=2.0)
    ap.add_argument("--max-startup", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--systemd",
        type=int,
        default=0,
        metavar="N",
        help="also N ready + N failing starts of a systemd unit in a podman container (journal path)",
    )
    ap.add_argument(
        "--render", action="store_true", help="measure nothing: rebuild the page from bench/ready_gate/run.json"
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "ready_gate.md"))
    a = ap.parse_args(argv)
    a.argv = argv if argv is not None else sys.argv[1:]
    data = kept(DATA / "run.json", a.render, lambda: measure(a))
    if data is None:
        raise SystemExit(f"{DATA / 'run.json'}: no kept run (run the script without --render)")
    text, ok = render(data)
    Path(a.out).write_text(text)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
