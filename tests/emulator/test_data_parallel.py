"""Data parallelism as SGLang serves it. `--dp-size N` without DP attention runs N scheduler
replicas, each with its own batches, KV pool, `DPn` log lines and gauges, and the
DataParallelController hands each request to one of them round-robin (the default `auto`: 0.5.9-0.5.12
server_args.py `_handle_load_balance_method`, 0.5.23 arg_groups/serving_hook.py;
managers/data_parallel_controller.py `round_robin_scheduler`). /server_info has one internal state
per DP rank (the tokenizer's fan-out communicator: 0.5.9 tokenizer_communicator_mixin.py,
0.5.12/0.5.23 managers/communicator.py) and /metrics one scheduler series per DP rank with a dp_rank
label (scheduler_metrics_mixin.py / metrics_collector.py SchedulerMetricsCollector)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from emu_client import run_level
from emu_testlib import start_mtp_with_metrics
from sglang_utils.sglang_server_info import parse_server_info

from tuner.measure.metrics import parse_prometheus_gauges

STEP = Path(__file__).resolve().parent / "data" / "profiles" / "realism-step.yaml"


def _start(emulator, version: str, *parallel: str):
    return start_mtp_with_metrics(emulator, version, *parallel, "--decode-log-interval", "5")


def _generate(e, n: int = 40) -> None:
    status, body = e.post_json(
        "/generate", {"text": "data parallel", "sampling_params": {"max_new_tokens": n, "ignore_eos": True}}
    )
    assert status == 200, body


def _series(text: str, name: str) -> dict[str, tuple[str, float]]:
    """dp_rank -> (tp_rank, value) of a gauge's series ("" where there is no dp_rank label)."""
    out = {}
    for labels, value in re.findall(rf"^sglang:{name}\{{(.*)\}} ([\d.e+-]+)$", text, re.M):
        dp = re.search(r'dp_rank="(\d+)"', labels)
        tp = re.search(r'tp_rank="(\d+)"', labels)
        out[dp.group(1) if dp else ""] = (tp.group(1) if tp else "", float(value))
    return out


@pytest.mark.parametrize("version", ["0.5.9", "0.5.12", "0.5.23"])
def test_each_dp_rank_answers_server_info_and_exports_its_gauges(emulator, version):
    e = _start(emulator, version, "--tp-size", "2", "--dp-size", "2")
    before = e.get_json("/server_info")["internal_states"]
    assert len(before) == 2 and all("avg_spec_accept_length" not in s for s in before)
    _generate(e)
    info = e.get_json("/server_info")
    states = info["internal_states"]
    assert len(states) == 2 and all(s["dp_size"] == 2 for s in states)
    # only the rank that served the one request has run a verify pass
    accepts = [s["avg_spec_accept_length"] for s in states if "avg_spec_accept_length" in s]
    assert len(accepts) == 1 and 1.0 < accepts[0] <= 4.0
    parsed = parse_server_info(info)  # the role's and the tuner's reader: the mean of the ranks that have it
    assert parsed["avg_spec_accept_length"] == accepts[0] and parsed["dp_size"] == 2
    text = e.get("/metrics")[1].decode()
    gauge = _series(text, "max_total_num_tokens")
    assert set(gauge) == {"0", "1"} and {tp for tp, _ in gauge.values()} == {"0"}  # TP0 of each replica
    running = _series(text, "num_running_reqs")  # the last logged batch of each rank
    assert sorted(v for _, v in running.values()) == [0.0, 1.0]
    assert parse_prometheus_gauges(text)["num_running_reqs"] == 1.0  # the tuner reads the largest series


@pytest.mark.parametrize(
    ("version", "parallel"),
    [
        ("0.5.9", ("--tp-size", "4", "--dp-size", "2", "--enable-dp-attention")),
        ("0.5.23", ("--tp-size", "4", "--attn-dp-size", "2")),
    ],
)
def test_attention_dp_ranks_export_from_their_first_tp_rank(emulator, version, parallel):
    e = _start(emulator, version, *parallel)
    assert len(e.get_json("/server_info")["internal_states"]) == 2
    gauge = _series(e.get("/metrics")[1].decode(), "num_running_reqs")
    assert {dp: tp for dp, (tp, _) in gauge.items()} == {"0": "0", "1": "2"}


def _prefixes(log: str, message: str) -> list[str]:
    """The rank prefix of each line that starts with `message`, in log order."""
    return re.findall(rf"^\[[\d\- :.]+((?: [A-Z_]+\d+)*)\] {re.escape(message)}", log, re.M)


@pytest.mark.parametrize(
    ("version", "parallel", "each_rank"),
    [
        # attention DP: one TP group of 4 schedulers, each with its attention-DP rank as dp_rank
        ("0.5.9", ("--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"), None),
        ("0.5.23", ("--tp-size", "4", "--attn-dp-size", "2"), None),
        ("0.5.23", ("--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"), None),  # the deprecated spelling
        # replicas: a TP group of 2 per DP rank, each numbering its TP ranks from 0
        ("0.5.12", ("--tp-size", "2", "--dp-size", "2"), [" DP0 TP0", " DP0 TP1", " DP1 TP0", " DP1 TP1"]),
    ],
)
def test_each_scheduler_logs_with_its_dp_and_tp_rank(emulator, version, parallel, each_rank):
    """The scheduler's log prefix (0.5.9 managers/scheduler.py run_scheduler_process, 0.5.23
    configure_scheduler_process): " DP{dp_rank}" whenever a DP controller gave it a dp_rank, then
    " TP{tp_rank}". Under attention DP the controller launches the TP group's ranks with their
    attention-DP rank, tp_rank // (tp_size // attn_dp_size) (0.5.9 data_parallel_controller.py
    launch_tensor_parallel_group with compute_dp_attention_world_info; 0.5.23 the same, shown as
    display_dp_rank): " DP1 TP2", not an attention-DP form of its own. The emulator wrote four
    schedulers per DP rank on 0.5.9 (" DP1 TP0" ...) and no DP on 0.5.23."""
    e = _start(emulator, version, *parallel)
    log = e.log()
    expected = each_rank or [" DP0 TP0", " DP0 TP1", " DP1 TP2", " DP1 TP3"]
    assert sorted(_prefixes(log, "Load weight begin.")) == sorted(expected * 2)  # the target's and the draft's
    _generate(e)
    e.wait_for_line("Decode batch")
    # a replica's TP0 logs its own batches; attention DP runs as one scheduler here (dp.replica_count)
    heads = {" DP0 TP0"} if each_rank is None else {" DP0 TP0", " DP1 TP0"}
    seen = set(_prefixes(e.log(), "Prefill batch"))
    assert seen and seen <= heads, seen


def test_busy_rank_answers_after_the_idle_one(emulator):
    """0.5.23: the warm-up sends one text to each rank and health checks rotate on their own counter
    (data_parallel_controller.py dispatch_health_check), so a short request goes to rank 0, the
    next to rank 1 and the one after to rank 0. A stats window of 40 steps: the busy rank has no
    avg_spec_accept_length for a while, which tells the two ranks apart."""
    e = start_mtp_with_metrics(emulator, "0.5.23", "--dp-size", "2", "--decode-log-interval", "40")
    _generate(e, 4)  # rank 0, inside its first window
    _generate(e, 200)  # rank 1, past its first window
    states = e.get_json("/server_info")["internal_states"]
    assert ["avg_spec_accept_length" in s for s in states] == [False, True]  # all idle: rank order
    # rank 0: busy past its first 40-step window, the only stretch where the pattern can show
    worker = threading.Thread(target=_generate, args=(e, 600))
    worker.start()
    try:
        seen = []
        for _ in range(200):
            states = e.get_json("/server_info")["internal_states"]
            seen.append(["avg_spec_accept_length" in s for s in states])
            if seen[-1] == [True, False]:
                break
        assert seen[-1] == [True, False]  # idle rank 1 first, busy rank 0 last
    finally:
        worker.join()


def _replica_profile(tmp_path: Path) -> Path:
    """realism-step.yaml with steps three times as long: a saturated replica streams few enough
    chunks a second for a loaded 2-core machine to keep the emulator on its clock."""
    raw = yaml.safe_load(STEP.read_text())
    raw["step_time_ms"]["ms"] = [[3 * ms for ms in row] for row in raw["step_time_ms"]["ms"]]
    out = tmp_path / "dp-replica.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


def _saturated_rate(emulator, profile: Path, dp: int) -> float:
    """Output tokens/s of a closed-loop level at 16 clients, four times one replica's request pool
    (--max-running-requests 4): every replica stays full whatever round-robin's momentary imbalance.
    A level during which the emulator fell a second behind its clock (lag_resets grew: the CPU,
    not the model, set the pace) is run again, up to three times."""
    e = emulator(
        "--emulator-profile", str(profile), "--max-running-requests", "4", "--dp-size", str(dp), "--random-seed", "3"
    ).wait_ready(60)
    for _ in range(3):
        before = e.get_json("/server_info")["emulator"]["clock"]["lag_resets"]
        _, m = run_level(e.url, 16, 48, input_len=32, output_len=32)
        if e.get_json("/server_info")["emulator"]["clock"]["lag_resets"] == before:
            break
    assert m.requests_ok == 48 and m.output_tok_s
    e.kill()
    return m.output_tok_s


def test_two_replicas_serve_twice_the_output_of_one_at_saturation(emulator, tmp_path):
    """Each replica holds the whole model on its own GPUs (data_parallel_controller.py
    launch_dp_schedulers), with one replica's pool and step costs, so at a concurrency that fills
    both, --dp-size 2 serves twice the tokens. Tolerance 15%: each rate includes its level's first
    prefill and the closed loop's ramp (the same share in both runs), and the client's clock on a
    shared 2-core machine (chunks delayed on their way); a replica left with fewer than 4 requests
    by round-robin would show as a shortfall well beyond it (one of 16 clients is 6%)."""
    profile = _replica_profile(tmp_path)
    one = _saturated_rate(emulator, profile, 1)
    two = _saturated_rate(emulator, profile, 2)
    assert 1.7 <= two / one <= 2.3, (one, two)


def _until_both_ranks_run(e) -> None:
    """Wait until each replica's last logged batch has a running request (its gauge)."""
    deadline = time.time() + 30
    running: dict[str, tuple[str, float]] = {}
    while time.time() < deadline:
        running = _series(e.get("/metrics")[1].decode(), "num_running_reqs")
        if running.get("0", ("", 0.0))[1] > 0 and running.get("1", ("", 0.0))[1] > 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"both replicas never ran a request: {running}")


@pytest.mark.parametrize("version", ["0.5.9", "0.5.23"])
def test_each_replica_batches_logs_and_reports_its_own_load(emulator, version):
    e = _start(emulator, version, "--tp-size", "2", "--dp-size", "2")
    workers = [threading.Thread(target=_generate, args=(e, 300)) for _ in range(4)]  # two to each rank
    for w in workers:
        w.start()
    try:
        _until_both_ranks_run(e)
    finally:
        for w in workers:
            w.join()
    log = e.log()
    for rank in (0, 1):  # each replica's TP0 logs its own batches
        assert re.search(rf"^\[[^]]* DP{rank} TP0\] Decode batch", log, re.M), rank
        assert re.search(rf"^\[[^]]* DP{rank} TP0\] Prefill batch", log, re.M), rank
    states = e.get_json("/server_info")["internal_states"]
    assert len(states) == 2
    for s in states:  # each rank's own, after its own verify passes
        assert 1.0 < s["avg_spec_accept_length"] <= 4.0 and s["last_gen_throughput"] > 0
        assert s["speculative_num_steps"] == 3
    text = e.get("/metrics")[1].decode()
    passes = re.findall(r'^sglang:cuda_graph_passes_total\{[^}]*dp_rank="(\d)"[^}]*\} ([\d.]+)$', text, re.M)
    assert {dp for dp, n in passes if float(n) > 0} == {"0", "1"}


def test_without_dp_one_state_and_no_dp_rank_label(emulator):
    e = _start(emulator, "0.5.23", "--tp-size", "2")
    assert len(e.get_json("/server_info")["internal_states"]) == 1
    text = e.get("/metrics")[1].decode()
    assert "dp_rank" not in text and set(_series(text, "num_running_reqs")) == {""}


def test_0523_startup_phases_and_streaming_split(emulator):
    """0.5.23's tokenizer collector (observability/metrics_collector.py): startup_time_seconds by
    phase, and is_streaming on TTFT / per-request TPOT / e2e, a series per kind once one finished;
    inter-token latency stays one series. 0.5.9 has neither label."""
    e = _start(emulator, "0.5.23", "--dp-size", "2")
    text = e.get("/metrics")[1].decode()
    phases = dict(re.findall(r'^sglang:startup_time_seconds\{[^}]*phase="(\w+)"\} ([\d.]+)$', text, re.M))
    assert set(phases) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"}
    assert 0 < float(phases["load_weight"]) < float(phases["scheduler_e2e"])
    assert len(re.findall(r"^sglang:startup_time_seconds\{", text, re.M)) == 4  # not one per DP rank

    def counts(text: str, name: str) -> dict[str, float]:
        found = re.findall(rf'^sglang:{name}_count\{{[^}}]*is_streaming="(\w+)"\}} ([\d.]+)$', text, re.M)
        return {kind: float(n) for kind, n in found}

    names = ("time_to_first_token_seconds", "request_time_per_output_token_seconds", "e2e_request_latency_seconds")
    before = {name: counts(text, name) for name in names}  # the warm-up request, unstreamed, or nothing
    assert all("true" not in c for c in before.values())
    _generate(e, 10)
    assert (
        e.stream("/generate", {"text": "streamed", "stream": True, "sampling_params": {"max_new_tokens": 5}})[-1]
        == "[DONE]"
    )
    text = e.get("/metrics")[1].decode()
    for name in names:
        assert counts(text, name) == {"false": before[name].get("false", 0.0) + 1, "true": 1.0}, name
    assert "is_streaming" not in "".join(re.findall(r"^sglang:inter_token_latency_seconds_count\{.*$", text, re.M))
    old = _start(emulator, "0.5.9")
    text = old.get("/metrics")[1].decode()
    assert re.search(r"^sglang:startup_time_seconds", text, re.M) is None and "is_streaming" not in text


def test_sigterm_drains_the_requests_of_every_replica(emulator):
    e = _start(emulator, "0.5.9", "--dp-size", "2")
    done: list[int] = []

    def long_request() -> None:
        status, body = e.post_json(
            "/generate", {"text": "drain me", "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}}
        )
        done.append(body["meta_info"]["completion_tokens"] if status == 200 else status)

    workers = [threading.Thread(target=long_request) for _ in range(2)]  # one on each replica
    for w in workers:
        w.start()
    _until_both_ranks_run(e)  # a fixed sleep could signal before a loaded machine sent both
    e.proc.send_signal(15)
    for w in workers:
        w.join(30)
    assert e.wait_exit() == 0 and done == [300, 300]
    log = e.log()
    assert "Gracefully exiting... Remaining number of requests 2." in log
    assert all(re.search(rf" DP{rank}\] Decode batch", log) for rank in (0, 1))


def test_warmup_sends_one_text_to_each_rank(emulator):
    """SGLang's warm-up /generate carries `["The capital city of France is"] * dp_size` (0.5.9/0.5.12
    http_server.py `_execute_server_warmup`; 0.5.23 `* num_dp_ranks`), so round-robin gives each
    replica one and the rotation is back at rank 0 for the first client request. The emulator sent
    one text: rank 1 never warmed up and the first client request went to rank 1. 0.5.23, whose
    health checks (the fixture's readiness polls) rotate on their own counter."""
    e = _start(emulator, "0.5.23", "--dp-size", "2")
    assert sorted(set(_prefixes(e.log(), "Prefill batch"))) == [" DP0", " DP1"]  # the warm-up, before any client
    before = [e.log().count(f" DP{rank}] Prefill batch") for rank in (0, 1)]
    _generate(e, 4)
    deadline = time.time() + 10
    while time.time() < deadline and e.log().count(" DP0] Prefill batch") == before[0]:
        time.sleep(0.05)
    assert [e.log().count(f" DP{rank}] Prefill batch") for rank in (0, 1)] == [before[0] + 1, before[1]]


def test_flush_cache_answers_with_the_first_rank_reply(emulator):
    """/flush_cache reaches every DP rank (data_parallel_controller.py sends control messages to
    each worker) and the tokenizer answers with the first reply of its fan-out (0.5.9
    tokenizer_communicator_mixin.py / 0.5.12-0.5.23 tokenizer_control_mixin.py `flush_cache`:
    `(await self.flush_cache_communicator(...))[0]`); an idle rank replies at once, a busy one
    between forward passes. So one busy replica beside an idle one: the idle one flushes, the busy
    one refuses, the answer is 200; 400 only while every rank is busy."""
    e = _start(emulator, "0.5.9", "--dp-size", "2")
    # long enough to be running still when /flush_cache comes, on a loaded machine too
    workers = [threading.Thread(target=_generate, args=(e, 3000)) for _ in range(2)]  # one on each rank
    workers[0].start()
    try:
        deadline = time.time() + 30
        busy: list[str] = []
        while time.time() < deadline and not busy:
            busy = [d for d, (_, n) in _series(e.get("/metrics")[1].decode(), "num_running_reqs").items() if n > 0]
            time.sleep(0.05)
        assert len(busy) == 1, busy  # the rank the request went to (0.5.9's readiness checks take turns too)
        assert e.request("POST", "/flush_cache")[0] == 200  # the idle rank's reply comes first
        log = e.log()
        idle = "1" if busy == ["0"] else "0"
        assert re.search(rf" DP{busy[0]}\] Cache not flushed because there are pending requests", log)
        assert re.search(rf" DP{idle}\] Cache flushed successfully!", log)
        workers[1].start()
        _until_both_ranks_run(e)
        assert e.request("POST", "/flush_cache")[0] == 400  # every rank busy
    finally:
        for w in workers:
            if w.ident is not None:  # started
                w.join()
