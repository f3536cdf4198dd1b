"""sglang_ready against the SGLang emulator run by real systemd in a podman container.

One container (systemd as PID 1, no network, label io.sglang-tune=1, name sgt-test-ready-*) gets
the emulator installed from the project's wheelhouse, exactly as an air-gapped host would; each
test writes a unit, (re)starts it and runs the module through Ansible's podman connection, the
way the role does. The container is removed at the end, also when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from podman_host import labelled_run

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = [pytest.mark.systemd, pytest.mark.cost(30)]

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("SGLANG_EMU_IMAGE", "localhost/sglang-emulator-host:bookworm")
VENV = "/opt/sglang-emu"
UNIT = "sglang-qwen.service"
MODEL_ARGS = (
    "--model-path /models/Qwen3.5-122B-A10B --served-model-name qwen3.5-122b --host 127.0.0.1 --port 30000 --tp-size 4"
)
SPEC_ARGS = (
    "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 6"
)
API_KEY = "sk-integration-secret"


def _run(cmd, check=True, timeout=300, **kw):
    return subprocess.run(cmd, check=check, timeout=timeout, capture_output=True, text=True, **kw)


class Host:
    def __init__(self, name: str):
        self.name = name

    def sh(self, script: str, check: bool = True, timeout: int = 120) -> str:
        res = _run(["podman", "exec", self.name, "sh", "-c", script], check=False, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"in {self.name}: {script}\nrc={res.returncode}\n{res.stdout}{res.stderr}")
        return res.stdout

    def write_unit(self, emulator_args: str, restart: str = "no", extra: str = "") -> None:
        unit = (
            "[Unit]\nDescription=SGLang emulator (sglang_ready integration test)\n"
            "[Service]\nType=simple\n"
            f"ExecStart={VENV}/bin/python -m tuner.emulator {emulator_args}\n"
            f"Restart={restart}\nRestartSec=1\n{extra}\n"
        )
        self.sh(f"cat > /etc/systemd/system/{UNIT} <<'EOF'\n{unit}EOF\nsystemctl daemon-reload")

    def restart(self) -> None:
        self.sh(f"systemctl reset-failed {UNIT} 2>/dev/null; systemctl restart {UNIT}")

    def prop(self, name: str) -> str:
        return self.sh(f"systemctl show -p {name} --value {UNIT}").strip()

    def wait_failed(self, timeout: float = 60.0) -> str:
        """Poll until the unit's start has failed (its ActiveState), up to `timeout` s; the last
        state seen. A fixed sleep was not enough under a loaded test run: the emulator's Python
        start-up in the container took longer than 2.5 s (make test of 2026-12-03)."""
        deadline = time.monotonic() + timeout
        state = self.prop("ActiveState")
        while state != "failed" and time.monotonic() < deadline:
            time.sleep(0.2)
            state = self.prop("ActiveState")
        return state

    def module(self, args: dict, check_mode: bool = False) -> dict:
        """Run sglang_ready on the host via Ansible (podman connection); returns the host's result."""
        env = dict(os.environ)
        env.update(
            ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
            ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
            ANSIBLE_STDOUT_CALLBACK="json",
            PATH=str(ROOT / ".venv" / "bin") + os.pathsep + env.get("PATH", ""),
        )
        cmd = [
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
            json.dumps(args),
        ]
        if check_mode:
            cmd.append("--check")
        res = _run(cmd, check=False, cwd=str(ROOT), env=env, timeout=600)
        try:
            out = json.loads(res.stdout)
            return out["plays"][0]["tasks"][0]["hosts"][self.name]
        except (ValueError, KeyError, IndexError):
            raise AssertionError(
                f"ansible did not return a result:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            ) from None


def _podman_ready() -> str:
    if shutil.which("podman") is None:
        return "podman is not installed"
    if _run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        return f"image {IMAGE} is missing (make setup builds it)"
    return ""


@pytest.fixture(scope="module")
def host():
    why = _podman_ready()
    if why:
        pytest.skip(why)
    # the role installs from the wheelhouse; rebuild it (a no-op when the sources are unchanged)
    _run([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "scripts" / "build_wheelhouse.py"), "--quiet"])
    name = f"sgt-test-ready-{uuid.uuid4().hex[:8]}"
    try:
        _run(["podman", *labelled_run(name, IMAGE, "/sbin/init", systemd=True)])
        h = Host(name)
        deadline = time.monotonic() + 60
        state = ""
        while time.monotonic() < deadline:
            state = h.sh("systemctl is-system-running || true", check=False).strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.2)
        assert state in ("running", "degraded"), f"systemd did not boot: {state!r}"
        _run(["podman", "cp", str(ROOT / "build" / "wheelhouse"), f"{name}:/opt/wheelhouse"])
        h.sh(
            f"python3 -m venv {VENV} && {VENV}/bin/pip install -q --no-index --find-links /opt/wheelhouse sglang-tune",
            timeout=300,
        )
        yield h
    finally:
        _run(["podman", "rm", "-f", "-t", "0", name], check=False)


def test_ready_report_from_this_invocations_journal(host):
    # a failed start first: its fatal lines are in the journal, but not in the next invocation's
    host.write_unit(f"{MODEL_ARGS} {SPEC_ARGS} --emulator-startup-s 1 --emulator-fault kv-oom")
    host.restart()
    assert host.wait_failed() == "failed"

    host.write_unit(f"{MODEL_ARGS} {SPEC_ARGS} --emulator-startup-s 4 --api-key {API_KEY}")
    host.restart()
    res = host.module({"timeout": 120, "api_key": API_KEY, "log_lines": 400})
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    assert res["log_source"] == "journal"
    assert res["invocation_id"] == host.prop("InvocationID")
    assert res["health_status"] == 200
    assert res["ready_seconds"] >= 3.0  # measured from the unit's start, not from the module's
    cap = res["capacity"]
    for key in (
        "max_total_num_tokens",
        "max_running_requests",
        "max_prefill_tokens",
        "chunked_prefill_size",
        "context_len",
    ):
        assert isinstance(cap[key], int) and cap[key] != 0, key
    assert isinstance(cap["available_gpu_mem_gb"], float)
    spec = res["speculative"]
    assert (spec["algorithm"], spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"]) == ("EAGLE", 3, 1, 4)
    assert spec["draft_tokens_adjusted"] is True  # 6 given with topk 1: SGLang uses steps + 1
    assert spec["max_running_requests_reset"] is True
    assert res["server"]["served_model_name"] == "qwen3.5-122b" and res["server"]["version"]
    assert len(res["kv_pools"]) == 2 and res["kv_pools"][0]["tokens"] == cap["max_total_num_tokens"]
    assert res["mamba_cache"]["max_mamba_cache_size"] > 0
    assert any(w.startswith("Max running requests is reset to 48") for w in res["sglang_warnings"])
    tail = "\n".join(res["log_tail"])
    assert "Not enough memory" not in tail  # the previous invocation is not read
    assert "server_args=" in tail and API_KEY not in json.dumps(res)
    # the capacity agrees with what the server itself says
    info = json.loads(
        host.sh(
            "python3 -c \"import urllib.request as u; r=u.Request('http://127.0.0.1:30000/server_info',"
            f" headers={{'Authorization': 'Bearer {API_KEY}'}}); print(u.urlopen(r).read().decode())\""
        )
    )
    assert info["max_total_num_tokens"] == cap["max_total_num_tokens"]


def test_check_mode_reports_the_running_server(host):
    res = host.module({"timeout": 60, "api_key": API_KEY}, check_mode=True)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False and res["capacity"]["max_total_num_tokens"]


def test_kv_pool_failure_fails_fast_with_reason_and_tail(host):
    # the fault fires during start-up, while the module is already waiting
    host.write_unit(f"{MODEL_ARGS} {SPEC_ARGS} --emulator-startup-s 10 --emulator-fault kv-oom")
    host.restart()
    res = host.module({"timeout": 120, "log_lines": 12})
    assert res.get("failed")
    assert res["failure_kind"] == "kv_pool_oom"
    assert res["reason"].startswith("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static")
    assert res["msg"].startswith(res["reason"])
    assert "Last 12 log lines:" in res["msg"] and len(res["log_tail"]) == 12
    assert res["waited_seconds"] < 30  # the unit's failure, not the 120 s timeout, ended the wait
    assert res["unit_state"]["ActiveState"] in ("failed", "inactive", "deactivating")


def test_crash_loop_is_reported_with_its_first_reason(host):
    # an argument SGLang rejects, under Restart=on-failure: systemd keeps restarting it
    host.write_unit(f"{MODEL_ARGS} --speculative-num-stepz 3", restart="on-failure")
    host.restart()
    res = host.module({"timeout": 120})
    host.sh(f"systemctl stop {UNIT}")
    assert res.get("failed")
    assert res["failure_kind"] == "bad_arguments", res["msg"]
    assert "unrecognized arguments: --speculative-num-stepz" in res["reason"]
    assert res["waited_seconds"] < 30


def test_log_file_mode_reads_only_the_latest_launch(host):
    extra = "StandardOutput=append:/var/log/sglang/emu.log\nStandardError=inherit"
    host.sh("mkdir -p /var/log/sglang && : > /var/log/sglang/emu.log")
    host.write_unit(f"{MODEL_ARGS} {SPEC_ARGS} --emulator-startup-s 1 --emulator-fault kv-oom", extra=extra)
    host.restart()
    assert host.wait_failed() == "failed"  # its fatal lines are in the file before the next launch
    host.write_unit(f"{MODEL_ARGS} --emulator-startup-s 3", extra=extra)  # no speculation this time
    host.restart()
    res = host.module({"timeout": 120, "log_path": "/var/log/sglang/emu.log", "log_lines": 500})
    host.sh(f"systemctl stop {UNIT}")
    assert not res.get("failed"), res.get("msg")
    assert res["log_source"] == "file"
    assert "Not enough memory" in host.sh("cat /var/log/sglang/emu.log")  # the earlier launch is in the file...
    assert not any("Not enough memory" in ln for ln in res["log_tail"])  # ...but not in this start's lines
    assert res["speculative"]["enabled"] is False and res["speculative"]["draft_tokens_adjusted"] is False
    assert res["capacity"]["max_total_num_tokens"] > 0
