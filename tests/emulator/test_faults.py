"""Faults for the reliability tests (docs/reference/performance-model.md "Faults"; docs/architecture.md names them)."""

from __future__ import annotations

import http.client
import signal
import time
from pathlib import Path

import pytest
import yaml
from emu_testlib import START_FAILURE_EXIT_S, spec_flags
from sglang_utils import sglang_log

from tuner.emulator.profile import DEFAULT_PROFILE_NAME, PROFILE_DIR

NOT_ENOUGH = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: self.server_args.mem_fraction_static="
)
SIGQUIT = "Received sigquit from a child process. It usually means the child failed."


def _assert_startup_failure(e, text: str) -> str:
    rc = e.wait_exit(START_FAILURE_EXIT_S)
    log = e.log()
    assert rc == -signal.SIGKILL, (rc, log[-2000:])  # SGLang kills its own process tree
    assert text in log and SIGQUIT in log
    assert log.index("server_args=") < log.index("Load weight end.") < log.index(text) < log.index(SIGQUIT)
    assert "Uvicorn running" not in log and "max_total_num_tokens=" not in log
    return log


def test_kv_oom_fault(emulator):
    e = emulator("--tp-size", "2", "--emulator-fault", "kv-oom", "--emulator-startup-s", "0.2")
    log = _assert_startup_failure(e, NOT_ENOUGH + "0.8")
    assert "[" in log and " TP1] Scheduler hit an exception: Traceback (most recent call last):" in log


def test_too_many_steps_for_the_memory_fails_at_startup(emulator):
    e = emulator(*spec_flags(7), "--max-running-requests", "4", "--emulator-startup-s", "0.2")
    _assert_startup_failure(e, NOT_ENOUGH)


def test_too_little_static_memory_fails_at_startup(emulator):
    e = emulator("--mem-fraction-static", "0.5", "--emulator-startup-s", "0.2")
    _assert_startup_failure(e, NOT_ENOUGH + "0.5")


def test_inconsistent_tree_fails_at_draft_graph_capture(emulator):
    e = emulator(
        "--speculative-algorithm",
        "EAGLE",
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "2",
        "--speculative-num-draft-tokens",
        "8",
        "--emulator-startup-s",
        "0.2",
    )
    rc = e.wait_exit(START_FAILURE_EXIT_S)
    log = e.log()
    assert rc == -signal.SIGKILL
    assert "RuntimeError: selected index k out of range" in log and SIGQUIT in log
    assert log.index("Capture draft cuda graph begin") < log.index("selected index k out of range")


def test_a_host_address_the_machine_lacks_fails_as_uvicorn_says_it(emulator):
    """uvicorn's own line, once (uvicorn/server.py `logger.error(exc)`): the parser reads it as
    bind_failed, whose reason names the --host to change."""
    e = emulator("--host", "192.0.2.1", "--emulator-startup-s", "0.1")
    assert e.wait_exit(START_FAILURE_EXIT_S) != 0
    log = e.log()
    line = (
        f"ERROR:    [Errno 99] error while attempting to bind on address ('192.0.2.1', {e.port}): "
        "cannot assign requested address\n"
    )
    assert line in log, log[-2000:]
    fatal = sglang_log.find_fatal(sglang_log.split_lines(log))
    assert fatal is not None and fatal["kind"] == "bind_failed" and "--host 192.0.2.1" in fatal["reason"], fatal


def test_crash_after_ready(emulator):
    e = emulator("--emulator-fault", "crash-after-ready=0.5", "--emulator-startup-s", "0.1").wait_ready()
    rc = e.wait_exit(10)
    # after ready by the log's order, not by this test's clock: under load its readiness poll saw
    # the server ready late, and the crash came 0.28 s after it looked (make test, 2026-12-06)
    assert rc == -signal.SIGKILL
    log = e.log()
    assert log.index("The server is fired up and ready to roll!") < log.index("Scheduler hit an exception")
    assert SIGQUIT in log


def test_hang_before_ready_keeps_health_at_503(emulator):
    e = emulator("--emulator-fault", "hang-before-ready", "--emulator-startup-s", "0.1")
    e.wait_for_line("Uvicorn running on")
    for _ in range(5):
        assert e.get("/health")[0] == 503
        assert e.get("/v1/models")[0] == 200
        time.sleep(0.2)
    assert "fired up" not in e.log()
    e.proc.send_signal(signal.SIGTERM)
    assert e.wait_exit(5) == 0


def test_hang_during_load_never_opens_the_port(emulator):
    e = emulator("--emulator-fault", "hang-before-ready=load", "--emulator-startup-s", "0.1")
    e.wait_for_line("Load weight begin")
    time.sleep(0.8)
    with pytest.raises(OSError):
        e.get("/v1/models", timeout=1)
    assert "Load weight end" not in e.log() and e.proc.poll() is None


def test_slow_startup_adds_time(emulator):
    t0 = time.time()
    emulator("--emulator-fault", "slow-startup=1.5", "--emulator-startup-s", "0.2").wait_ready()
    assert time.time() - t0 >= 1.6


def test_http_5xx_share(emulator):
    e = emulator("--emulator-fault", "http-5xx=1", "--emulator-startup-s", "0.1", "--enable-metrics").wait_ready()
    for path, body in (
        ("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 3}}),
        ("/v1/completions", {"prompt": "x", "max_tokens": 3}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 3}),
    ):
        status, out = e.post_json(path, body)
        assert status in (500, 503) and out["object"] == "error"
    assert e.get("/health")[0] == 200 and e.get("/v1/models")[0] == 200  # only generation requests fail


def test_http_5xx_partial_share(emulator):
    e = emulator("--emulator-fault", "http-5xx=0.5", "--emulator-startup-s", "0.1", "--random-seed", "3").wait_ready()
    codes = [e.post_json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})[0] for _ in range(60)]
    bad = sum(c >= 500 for c in codes)
    assert 12 <= bad <= 48 and set(codes) <= {200, 500, 503}


def test_cut_stream(emulator):
    e = emulator("--emulator-fault", "cut-stream=1", "--emulator-startup-s", "0.1").wait_ready()
    body = {"prompt": "cut me", "max_tokens": 200, "temperature": 0, "ignore_eos": True, "stream": True}
    with pytest.raises((http.client.IncompleteRead, ConnectionError)) as ei:
        e.request("POST", "/v1/completions", body)
    if isinstance(ei.value, http.client.IncompleteRead):
        assert b"[DONE]" not in ei.value.partial
    # non-streamed answers are whole
    status, out = e.post_json("/v1/completions", {**body, "stream": False})
    assert status == 200 and out["usage"]["completion_tokens"] == 200
    assert e.get("/health")[0] == 200


def test_faults_from_the_profile(emulator, tmp_path):
    raw = yaml.safe_load((PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text())
    raw["faults"] = ["http-5xx=1"]
    raw["startup_s"] = 0.1
    prof = tmp_path / "faulty.yaml"
    prof.write_text(yaml.safe_dump(raw))
    e = emulator("--emulator-profile", str(prof)).wait_ready()
    assert e.post_json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 1}})[0] >= 500
    assert e.get_json("/server_info")["emulator"]["faults"] == ["http-5xx=1"]


def test_profile_from_environment(emulator, tmp_path):
    raw = yaml.safe_load((PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text())
    raw.update(
        served_model_name="other",
        startup_s=0.1,
        kv_tokens_measured={},
        kv_tokens_nospec=90000,
        kv_tokens_per_step=1000,
        state_slots=9.5,
        state_slots_per_step=0.5,
    )
    prof = tmp_path / "other-machine.yaml"
    prof.write_text(yaml.safe_dump(raw))
    e = emulator(*spec_flags(3), env={"SGLANG_EMULATOR_PROFILE": str(prof)}).wait_ready()
    info = e.get_json("/server_info")
    assert info["max_total_num_tokens"] == 87000
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 8
    assert Path(info["emulator"]["profile_path"]) == prof
