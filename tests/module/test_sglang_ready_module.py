"""Behaviour of the sglang_ready module against real loopback HTTP, real files and real processes.

The module runs in-process through Ansible's supported helper (``patch_module_args``) with
``exit_json``/``fail_json`` patched to raise; everything it talks to is real: a threaded HTTP
server on 127.0.0.1 scripted per test, a log file appended by a writer thread, child processes.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import time

import pytest
from ready_testlib import appending_writer, load_fixture

SEED_LOG = load_fixture("constructed_0.5.9_tp1_mtp_ms_timestamps.log")
INFO = {
    "version": "0.5.9",
    "served_model_name": "qwen3.5-122b",
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
    "max_running_requests": 48,
    "max_total_num_tokens": 1763904,
    "internal_states": [{"effective_max_running_requests_per_dp": 27}],
}


def base_args(fake, log_path=None, **kw):
    args = {"url": fake.url, "unit": "", "interval": 0.1, "timeout": 30, "request_timeout": 2}
    if log_path is not None:
        args["log_path"] = str(log_path)
    args.update(kw)
    return args


# ------------------------------------------------------------------------------------------
# Success
# ------------------------------------------------------------------------------------------


def test_waits_for_health_200_then_reports(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    fake_sglang.server_info = INFO
    fake_sglang.health = lambda t: 503 if t < 1.0 else 200
    fake_sglang.restart_clock()
    with appending_writer(log, SEED_LOG, delay_s=0.01):
        res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert res["changed"] is False
    assert res["health_status"] == 200 and res["log_source"] == "file"
    # it did wait through the 503s (the fake's clock starts before the module's: a little less than 1 s)
    assert res["waited_seconds"] >= 0.75
    # ... polling: at least one answer was a 503 and the last a 200 (a count of polls would depend on
    # how long the module took to start under load: 2 of them on a loaded 2-core run, 2026-12-06)
    ages = [r["t"] - fake_sglang.t0 for r in fake_sglang.requests if r["path"] == "/health"]
    assert ages and min(ages) < 1.0 <= max(ages), ages
    assert res["capacity"] == {
        "max_total_num_tokens": 1763904,
        "max_running_requests": 27,
        "max_prefill_tokens": 16384,
        "chunked_prefill_size": 8192,
        "context_len": 262144,
        "available_gpu_mem_gb": 8.70,
    }
    spec = res["speculative"]
    assert (spec["algorithm"], spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"]) == ("EAGLE", 3, 1, 4)
    assert spec["draft_tokens_adjusted"] is True and spec["max_running_requests_reset"] is True
    assert res["server"]["version"] == "0.5.9" and res["server"]["served_model_name"] == "qwen3.5-122b"
    assert res["server"]["server_info_path"] == "/server_info"
    assert [p["tokens"] for p in res["kv_pools"]] == [1763904, 1763904]
    assert res["mamba_cache"]["max_mamba_cache_size"] == 144
    assert any(w.startswith("Max running requests is reset to 48") for w in res["sglang_warnings"])
    assert res["ready_seconds"] >= 0
    # the server_args line carries the API key in clear: never in the tail
    assert not any("sk-very-secret-key" in ln for ln in res["log_tail"])
    assert any("api_key='<redacted>'" in ln for ln in res["log_tail"])


def test_the_probes_share_one_tls_context(fake_sglang, run_module, monkeypatch):
    """Ansible's fetch_url makes a TLS context per request, loading the system's CA store (about
    35 ms of CPU each, twice a second while a server starts); the gate makes one for the run."""
    made = []
    real = ssl.create_default_context

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    fake_sglang.server_info = INFO
    # not ready for its first five probes, however late the module starts (timed from the clock, a
    # module that started over a second late under load met a ready server at its first probe)
    probes: list[float] = []
    fake_sglang.health = lambda t: probes.append(t) or (503 if len(probes) <= 5 else 200)
    fake_sglang.restart_clock()
    res, failed = run_module(base_args(fake_sglang))
    assert not failed, res.get("msg")
    assert len([r for r in fake_sglang.requests if r["path"] == "/health"]) >= 6
    assert len(made) == 1


def test_report_carries_no_key_read_back_from_server_info(fake_sglang, run_module, tmp_path):
    """0.5.23 serves the key in api_key and in launch_command (the argv after --config was merged):
    nothing the module returns may carry it, even when the module was not told the key."""
    import json

    key = "sk-from-the-config-file-0523"
    log = tmp_path / "server.log"
    log.write_text("\n".join(SEED_LOG) + "\n")
    fake_sglang.server_info = dict(
        INFO,
        version="0.5.23",
        api_key=key,
        admin_api_key=key + "-admin",
        launch_command=f"--api-key {key} --model-path /m --speculative-num-draft-tokens 4 --config /run/c/x.yaml",
    )
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert key not in json.dumps(res)
    assert res["server"]["version"] == "0.5.23"


def test_old_server_get_server_info_fallback_and_models(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(load_fixture("sglang-0.5.1x_tp1_capacity_line.log")) + "\n")
    fake_sglang.server_info = None  # 404, like 0.5.5.post3
    fake_sglang.get_server_info = {
        "version": "0.5.5.post3",
        "max_total_num_tokens": 2086558,
        "speculative_algorithm": None,
    }
    fake_sglang.models = {"data": [{"id": "served-by-models", "max_model_len": 256000}]}
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert res["server"] == {
        "version": "0.5.5.post3",
        "served_model_name": "served-by-models",
        "server_info_path": "/get_server_info",
        "avg_spec_accept_length": None,
    }
    assert res["capacity"]["max_running_requests"] == 33
    assert res["speculative"]["enabled"] is False
    assert res["mamba_cache"] is None and res["kv_pools"] == []


def test_no_log_and_no_server_info_gives_nulls(fake_sglang, run_module):
    res, failed = run_module(base_args(fake_sglang))
    assert not failed
    assert res["log_source"] is None and res["log_tail"] == []
    assert set(res["capacity"].values()) == {None}
    assert res["server"]["version"] is None
    assert res["speculative"]["draft_tokens_adjusted"] is None


def test_previous_crash_in_the_same_file_does_not_fail_this_start(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(load_fixture("constructed_two_launches_in_one_file.log")) + "\n")
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert res["capacity"]["max_total_num_tokens"] == 2086558
    assert "KV cache is forced as chunk cache for decode server" in res["sglang_warnings"]


def test_check_mode_reports_without_changing(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(SEED_LOG) + "\n")
    fake_sglang.server_info = INFO
    res, failed = run_module(base_args(fake_sglang, log), check_mode=True)
    assert not failed and res["changed"] is False
    assert res["capacity"]["max_total_num_tokens"] == 1763904


def test_api_key_is_sent_and_masked(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-01-01 00:00:00] server_args=ServerArgs(api_key='k-123-secret', tp_size=1)\n"
        "[2026-01-01 00:00:05] launched with --api-key k-123-secret\n"
    )
    fake_sglang.server_info = INFO
    res, failed = run_module(base_args(fake_sglang, log, api_key="k-123-secret"))
    assert not failed
    auth = {r["auth"] for r in fake_sglang.requests}
    assert auth == {"Bearer k-123-secret"}
    assert "k-123-secret" not in repr(res)


def test_unit_that_does_not_exist_is_ignored_with_log_path(fake_sglang, run_module, tmp_path):
    # This host has no running systemd (or no such unit): with log_path, the default unit is skipped.
    log = tmp_path / "server.log"
    log.write_text("\n".join(SEED_LOG) + "\n")
    args = base_args(fake_sglang, log)
    args["unit"] = f"sglang-does-not-exist-{time.time_ns()}.service"
    res, failed = run_module(args)
    assert not failed, res.get("msg")
    assert res["invocation_id"] is None and "unit_state" not in res


# ------------------------------------------------------------------------------------------
# Fail fast
# ------------------------------------------------------------------------------------------


def test_fatal_line_fails_fast_with_reason_and_tail(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    fake_sglang.health = lambda t: 503
    lines = SEED_LOG[:6] + load_fixture("sglang-0.5.6.post1_npu_not_enough_memory.log")
    with appending_writer(log, lines, delay_s=0.05, start_after_s=0.3):
        res, failed = run_module(base_args(fake_sglang, log, timeout=60))
    assert failed
    assert res["waited_seconds"] < 10  # long before the 60 s timeout
    assert res["failure_kind"] == "kv_pool_oom"
    assert res["reason"].startswith("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    assert res["msg"].startswith(res["reason"])
    assert "Last " in res["msg"] and "Load weight begin" in res["msg"]
    assert res["log_tail"][-1].startswith("RuntimeError: Not enough memory")


def test_traceback_reason_is_the_exception_written_after_it(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    fake_sglang.health = lambda t: 503
    head = [
        "[2026-10-02 00:40:09] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/managers/scheduler.py", line 3130, in run_scheduler_process',
    ]
    tail = [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 970.00 MiB. GPU 0 has a total "
        "capacity of 94.50 GiB of which 676.81 MiB is free."
    ]
    with appending_writer(log, head, start_after_s=0.2):
        with appending_writer(log, tail, start_after_s=0.45):
            res, failed = run_module(base_args(fake_sglang, log, timeout=60))
    assert failed and res["failure_kind"] == "out_of_memory"
    assert res["reason"].startswith("torch.OutOfMemoryError: CUDA out of memory")


def test_process_exit_fails_fast(fake_sglang, run_module, tmp_path):
    fake_sglang.health = lambda t: 503
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.0)"])
    try:
        res, failed = run_module(base_args(fake_sglang, pid=proc.pid, timeout=60))
    finally:
        proc.wait(timeout=10)
    assert failed and res["failure_kind"] == "process_exited"
    assert res["waited_seconds"] < 10
    assert res["msg"].startswith(f"process {proc.pid} exited")


def test_process_exit_reason_comes_from_its_log(fake_sglang, run_module, tmp_path):
    """The process dies without a fatal pattern the gate knew in time: its log explains why."""
    log = tmp_path / "server.log"
    fake_sglang.health = lambda t: 503
    code = (
        "import sys, time; time.sleep(0.8); "
        f"f = open({str(log)!r}, 'a'); f.write('usage: launch_server.py [-h]\\n"
        "launch_server.py: error: argument --speculative-num-steps: invalid int value: \\'x\\'\\n'); "
        "f.close(); sys.exit(2)"
    )
    log.write_text("")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        res, failed = run_module(base_args(fake_sglang, log, pid=proc.pid, timeout=60))
    finally:
        proc.wait(timeout=10)
    assert failed and res["failure_kind"] == "bad_arguments"
    assert "invalid int value" in res["reason"]


def test_a_reason_the_log_gets_after_the_death_is_waited_for(fake_sglang, run_module, tmp_path):
    """The journal takes a process's last lines a moment after systemd saw it exit, longer on a
    loaded host: a make test read none 0.2 s after an argparse error and reported only that the unit
    died. Here the log gets its line 0.8 s after the process is gone."""
    log = tmp_path / "server.log"
    log.write_text("")
    fake_sglang.health = lambda t: 503
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    late = ["launch_server.py: error: unrecognized arguments: --speculative-num-stepz 3"]
    try:
        with appending_writer(log, late, start_after_s=1.3):
            res, failed = run_module(base_args(fake_sglang, log, pid=proc.pid, timeout=60))
    finally:
        proc.wait(timeout=10)
    assert failed and res["failure_kind"] == "bad_arguments", res["msg"]
    assert "unrecognized arguments: --speculative-num-stepz" in res["reason"]


def _stamp(offset_s=0.0):
    return time.strftime("[%Y-%m-%d %H:%M:%S]", time.localtime(time.time() + offset_s))


def test_new_launch_in_the_file_means_a_restart(fake_sglang, run_module, tmp_path):
    """With the process start known (pid), a second server_args= line is a restart."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.1)
        log = tmp_path / "server.log"
        old = [
            "[2026-01-01 00:00:00] server_args=ServerArgs(tp_size=1, served_model_name='old')",
            "[2026-01-01 00:00:02] RuntimeError: old crash that must not count",
        ]
        first = [_stamp() + " server_args=ServerArgs(tp_size=1)", _stamp() + " Load weight begin. avail mem=90.00 GB"]
        log.write_text("\n".join(old + first) + "\n")
        fake_sglang.health = lambda t: 503
        with appending_writer(
            log, [_stamp(1) + " server_args=ServerArgs(tp_size=1)"], start_after_s=0.2, after=fake_sglang.probed
        ):
            res, failed = run_module(base_args(fake_sglang, log, pid=proc.pid, timeout=30))
    finally:
        proc.kill()
        proc.wait()
    assert failed and res["failure_kind"] == "restarted", res["msg"]
    assert "new launch" in res["reason"]
    assert not any("old crash" in ln for ln in res["log_tail"])


def test_without_start_time_a_later_launch_replaces_the_files_last_one(fake_sglang, run_module, tmp_path):
    """No unit, no pid: the launch that begins after the module started is the one reported."""
    log = tmp_path / "server.log"
    log.write_text(
        "\n".join(load_fixture("sglang-0.5.1x_tp1_capacity_line.log")) + "\n"
        "[2026-06-28 15:16:40] server_args=ServerArgs(served_model_name='previous')\n"
    )
    fake_sglang.health = lambda t: 503 if t < 1.0 else 200
    fake_sglang.restart_clock()
    with appending_writer(log, SEED_LOG, start_after_s=0.3):
        res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert res["server"]["served_model_name"] == "qwen3.5-122b"
    assert res["capacity"]["max_total_num_tokens"] == 1763904


# ------------------------------------------------------------------------------------------
# Timeout
# ------------------------------------------------------------------------------------------


def test_timeout_says_how_long_and_last_answer(fake_sglang, run_module, tmp_path):
    fake_sglang.health = lambda t: 503
    res, failed = run_module(base_args(fake_sglang, timeout=1.0))
    assert failed and res["failure_kind"] == "timeout"
    assert "timed out after 1 s" in res["msg"] and "last answer: HTTP 503: starting" in res["msg"]
    assert res["health_status"] == 503
    assert 1.0 <= res["waited_seconds"] < 5


def test_timeout_without_any_listener(run_module, tmp_path):
    from emulator_proc import free_port

    port = free_port()  # nothing listens there now
    res, failed = run_module({"url": f"http://127.0.0.1:{port}", "unit": "", "timeout": 0.6, "interval": 0.1})
    assert failed and res["failure_kind"] == "timeout"
    assert "no answer" in res["msg"] and res["health_status"] is None


def test_slow_health_answers_do_not_overrun_the_timeout(fake_sglang, run_module):
    fake_sglang.health = lambda t: 503
    fake_sglang.health_delay_s = 3.0
    res, failed = run_module(base_args(fake_sglang, timeout=1.0, request_timeout=5))
    assert failed and res["failure_kind"] == "timeout"
    assert res["waited_seconds"] < 3.0


# ------------------------------------------------------------------------------------------
# Arguments
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, text",
    [
        ({"url": "127.0.0.1:30000"}, "url must start with http"),
        # urllib refused these at the first probe and the module failed without its failure result
        ({"url": "http://[::1:30000"}, "url is not one urllib can use"),
        ({"url": "http://127.0.0.1:99999"}, "url is not one urllib can use"),
        ({"url": "http://:30000"}, "url is not one urllib can use"),
        ({"interval": 0}, "interval must be > 0"),
        ({"timeout": -1}, "timeout must be > 0"),
        ({"log_lines": -2}, "log_lines must be >= 0"),
        ({"pid": 0}, "pid must be > 0"),
        ({"timeout": "soon"}, "timeout"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_argument_validation(run_module, bad, text):
    args = {"unit": "", "url": "http://127.0.0.1:9"}
    args.update(bad)
    res, failed = run_module(args)
    assert failed and text in res["msg"]


def test_unit_without_systemd_fails_clearly(run_module):
    # no log_path and no pid: a unit that cannot be watched is an error, not a silent pass
    res, failed = run_module(
        {"unit": f"sglang-not-here-{time.time_ns()}.service", "url": "http://127.0.0.1:9", "timeout": 5}
    )
    assert failed and res["failure_kind"] == "unit_missing"


def test_documentation_matches_argument_spec():
    import yaml
    from ready_testlib import import_sglang_ready

    sglang_ready = import_sglang_ready()

    doc = yaml.safe_load(sglang_ready.DOCUMENTATION)
    spec = sglang_ready.argument_spec()
    assert set(doc["options"]) == set(spec)
    for name, opt in doc["options"].items():
        assert opt["type"] == spec[name]["type"], name
        assert opt.get("default") == spec[name].get("default"), name
    assert spec["api_key"]["no_log"] is True
    ret = yaml.safe_load(sglang_ready.RETURN)
    for key in (
        "ready_seconds",
        "capacity",
        "speculative",
        "server",
        "kv_pools",
        "mamba_cache",
        "log_tail",
        "url",
        "health_status",
        "log_source",
        "invocation_id",
        "sglang_warnings",
    ):
        assert key in ret, key


def test_log_says_speculative_when_server_info_is_silent(fake_sglang, run_module, tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(SEED_LOG) + "\n")
    fake_sglang.server_info = {"version": "0.5.9", "served_model_name": "m"}
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed
    assert res["speculative"]["enabled"] is True and res["speculative"]["algorithm"] == "EAGLE"


def test_runtime_traceback_after_ready_does_not_fail_a_running_server(fake_sglang, run_module, tmp_path):
    """The gate re-run on a server that came up long ago: a later request's traceback is not a start failure."""
    log = tmp_path / "server.log"
    runtime_error = [
        "[2026-06-14 10:00:00] Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/entrypoints/http_server.py", line 1, in generate_request',
        "ValueError: The input (262145 tokens) is longer than the model's context length (262144 tokens).",
    ]
    log.write_text("\n".join(SEED_LOG + runtime_error) + "\n")
    fake_sglang.server_info = INFO
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, res.get("msg")
    assert res["capacity"]["max_total_num_tokens"] == 1763904
    assert isinstance(res["reported_at"], float) and abs(res["reported_at"] - time.time()) < 60


def test_a_traceback_sglang_handles_does_not_fail_a_healthy_server(fake_sglang, run_module, tmp_path):
    """Up to 0.5.1x the Responses API's optional import logs a whole traceback at every boot of an
    environment without openai_harmony, and the server starts: the gate reports it ready."""
    log = tmp_path / "server.log"
    log.write_text("\n".join(load_fixture("constructed_0.5.9_responses_api_benign_traceback.log")) + "\n")
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, (res.get("failure_kind"), res.get("msg"))


def test_a_traceback_frame_passing_server_args_on_is_not_a_new_launch(fake_sglang, run_module, tmp_path):
    """A start appended to the file after the gate's first read fails in a frame whose line passes
    `server_args=server_args` on (0.5.9's HiRadixCache): the gate reports the ValueError, not a
    restart nor the generic "Scheduler hit an exception" line."""
    log = tmp_path / "server.log"
    log.write_text("")
    fake_sglang.health = lambda t: 503
    lines = load_fixture("constructed_0.5.9_hicache_traceback_server_args_frame.log")
    with appending_writer(log, lines, start_after_s=0.2, after=fake_sglang.probed):
        res, failed = run_module(base_args(fake_sglang, log, timeout=30))
    assert failed and res["failure_kind"] == "exception", (res.get("failure_kind"), res.get("msg"))
    assert res["reason"].startswith("ValueError: Not enough host memory available"), res["reason"]


def test_a_previous_launchs_crash_before_a_0_5_2x_dict_server_args_line_is_not_this_starts(
    fake_sglang, run_module, tmp_path
):
    old = [
        "[2026-10-30 10:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'served_model_name': 'old', 'tp_size': 1}",
        "[2026-10-30 10:00:10] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. old crash",
    ]
    new = [
        "[2026-10-30 11:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'served_model_name': 'qwen', 'tp_size': 1}",
        "[2026-10-30 11:00:05] max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=48, context_len=4096, available_gpu_mem=3.00 GB",
        "[2026-10-30 11:00:09] The server is fired up and ready to roll!",
    ]
    log = tmp_path / "server.log"
    log.write_text("\n".join(old + new) + "\n")
    res, failed = run_module(base_args(fake_sglang, log))
    assert not failed, (res.get("failure_kind"), res.get("msg"))
    assert res["server"]["served_model_name"] == "qwen"
