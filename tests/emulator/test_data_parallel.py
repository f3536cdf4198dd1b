"""/server_info and /metrics under data parallelism, as SGLang answers them: one internal state per
DP rank (the tokenizer's fan-out communicator: 0.5.9 tokenizer_communicator_mixin.py, 0.5.12/0.5.23
managers/communicator.py) and one scheduler series per DP rank with a dp_rank label
(scheduler_metrics_mixin.py / metrics_collector.py SchedulerMetricsCollector)."""

from __future__ import annotations

import re
import threading

import pytest
from emu_testlib import start_mtp_with_metrics
from sglang_utils.sglang_server_info import parse_server_info

from tuner.measure.metrics import parse_prometheus_gauges


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
    # only the rank that served (the emulator's one scheduler) has run a verify pass
    accepts = [s["avg_spec_accept_length"] for s in states if "avg_spec_accept_length" in s]
    assert len(accepts) == 1 and 1.0 < accepts[0] <= 4.0
    parsed = parse_server_info(info)  # the role's and the tuner's reader: the mean of the ranks that have it
    assert parsed["avg_spec_accept_length"] == accepts[0] and parsed["dp_size"] == 2
    text = e.get("/metrics")[1].decode()
    gauge = _series(text, "max_total_num_tokens")
    assert set(gauge) == {"0", "1"} and {tp for tp, _ in gauge.values()} == {"0"}  # TP0 of each replica
    running = _series(text, "num_running_reqs")  # the last logged batch of each rank
    assert running["0"][1] == 1.0 and running["1"][1] == 0.0
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
    assert set(_prefixes(e.log(), "Prefill batch")) == {" DP0 TP0"}  # the emulator's one scheduler


def test_busy_rank_answers_after_the_idle_one(emulator):
    e = _start(emulator, "0.5.9", "--dp-size", "2")
    _generate(e, 20)
    assert "avg_spec_accept_length" in e.get_json("/server_info")["internal_states"][0]  # all idle: rank order
    worker = threading.Thread(target=_generate, args=(e, 4000))
    worker.start()
    try:
        seen = []
        for _ in range(200):
            states = e.get_json("/server_info")["internal_states"]
            seen.append(["avg_spec_accept_length" in s for s in states])
            if seen[-1] == [False, True]:
                break
        assert seen[-1] == [False, True]
        text = e.get("/metrics")[1].decode()
        running = _series(text, "num_running_reqs")
        assert running["1"][1] == 0.0
    finally:
        worker.join()


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
