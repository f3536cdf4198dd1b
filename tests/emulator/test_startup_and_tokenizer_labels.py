"""Two things the tokenizer side of SGLang owns, as each emulated release has them.

The tokenizer-side metrics (TokenizerMetricsCollector: token and request counters, latency
histograms) carry the tokenizer manager's labels, not a scheduler's: `model_name` (0.5.9/0.5.10
managers/tokenizer_manager.py), `model_name` + `engine_type` (0.5.11+; 0.5.23
observability/metrics_collector.py tokenizer_metric_labels), plus 0.5.23's `is_streaming`.

0.5.23's start-up record: /server_info `startup_time` is a dict of phases (observability/startup_time.py;
the top-level one from entrypoints/engine.py `_set_startup_time`, each internal state its scheduler's,
internal_state.py), logged once as `Engine startup timings (s): ...` before the HTTP server starts.
"""

from __future__ import annotations

import re

import pytest
from emu_testlib import start_mtp_with_metrics as _start
from sglang_utils.sglang_log import find_fatal, find_warnings, summarize

GRAPH_PHASES = {"prefill", "decode", "target_verify", "draft_prefill", "draft_decode", "draft_extend"}
TIMINGS_RE = re.compile(
    r"Engine startup timings \(s\): load_weight=(?P<load_weight>\d+\.\d\d), "
    r"kv_cache_allocation=(?P<kv_cache_allocation>\d+\.\d\d), scheduler_e2e=(?P<scheduler_e2e>\d+\.\d\d), "
    r"cuda_graph=\{(?P<graph>[^}]*)\}, tokenizer_e2e=(?P<tokenizer_e2e>\d+\.\d\d)$"
)


def _label_keys(text: str, metric: str) -> list[set[str]]:
    return [set(re.findall(r'(\w+)="', labels)) for labels in re.findall(rf"^{metric}\{{(.*)\}} \S+$", text, re.M)]


@pytest.mark.parametrize(
    ("version", "base"),
    [("0.5.9", {"model_name"}), ("0.5.12", {"model_name", "engine_type"}), ("0.5.23", {"model_name", "engine_type"})],
)
def test_tokenizer_metrics_carry_the_tokenizer_labels_not_a_schedulers(emulator, version, base):
    e = _start(emulator, version, "--tp-size", "2", "--dp-size", "2")
    status, body = e.post_json("/generate", {"text": "labels", "sampling_params": {"max_new_tokens": 8}})
    assert status == 200, body
    streamed = e.stream("/generate", {"text": "streamed", "stream": True, "sampling_params": {"max_new_tokens": 5}})
    assert streamed[-1] == "[DONE]"
    text = e.get("/metrics")[1].decode()
    streaming = base | {"is_streaming"} if version == "0.5.23" else base
    expected = {
        "sglang:prompt_tokens_total": streaming,
        "sglang:generation_tokens_total": streaming,
        "sglang:num_requests_total": streaming,
        "sglang:time_to_first_token_seconds_count": streaming,
        "sglang:e2e_request_latency_seconds_count": streaming,
        "sglang:inter_token_latency_seconds_count": base,
    }
    for metric, keys in expected.items():
        found = _label_keys(text, metric)
        assert found and all(k == keys for k in found), (metric, found)
    # the scheduler's gauges keep their ranks, one series per DP rank
    ranks = _label_keys(text, "sglang:num_running_reqs")
    assert len(ranks) == 2 and all(k >= {"tp_rank", "pp_rank", "dp_rank"} for k in ranks)
    if version == "0.5.23":
        done = dict(re.findall(r'^sglang:num_requests_total\{.*is_streaming="(\w+)"\} ([\d.]+)$', text, re.M))
        assert float(done["true"]) == 1.0 and float(done["false"]) >= 1.0


def test_0523_startup_time_is_a_dict_of_phases_and_logged_once(emulator):
    e = _start(emulator, "0.5.23", "--dp-size", "2")
    info = e.get_json("/server_info")
    top = info["startup_time"]
    assert set(top) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph", "tokenizer_e2e"}
    assert set(top["cuda_graph"]) == GRAPH_PHASES
    # speculation: the target's graphs are the verify graphs, the draft's its decode / extend graphs
    assert top["cuda_graph"]["target_verify"] > 0 and top["cuda_graph"]["decode"] == 0.0
    assert top["cuda_graph"]["draft_decode"] > 0 and top["cuda_graph"]["draft_extend"] > 0
    assert 0 < top["load_weight"] < top["scheduler_e2e"] <= top["tokenizer_e2e"]
    for state in info["internal_states"]:
        assert state["startup_time"] == {k: v for k, v in top.items() if k != "tokenizer_e2e"}
        assert set(state["memory_usage"]["graph"]) == GRAPH_PHASES
    log = e.log()
    lines = [ln for ln in log.splitlines() if "Engine startup timings" in ln]
    assert len(lines) == 1, lines
    m = TIMINGS_RE.search(lines[0])
    assert m, lines[0]
    assert lines[0].startswith("[") and "TP0" not in lines[0].split("]")[0]  # the launcher's logger, no rank
    for key in ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e"):
        assert float(m[key]) == pytest.approx(top[key], abs=0.006), key
    graph = dict(pair.split("=") for pair in m["graph"].split(", "))
    assert list(graph) == list(top["cuda_graph"]) and set(graph) == GRAPH_PHASES
    # logged once every scheduler is ready, before the HTTP server starts
    assert log.index("max_total_num_tokens=") < log.index("Engine startup timings") < log.index("Uvicorn running")
    # the gauges by graph phase, with the tokenizer's labels
    text = e.get("/metrics")[1].decode()
    graph_series = dict(
        re.findall(r'^sglang:startup_cuda_graph_time_seconds\{[^}]*phase="(\w+)"\} ([\d.]+)$', text, re.M)
    )
    assert set(graph_series) == GRAPH_PHASES
    assert all(k == {"model_name", "engine_type", "phase"} for k in _label_keys(text, "sglang:startup_time_seconds"))
    # the log reader neither misreads nor flags the line
    summary = summarize(log.splitlines())
    assert summary["capacity"] and summary["ready_line_seen"] and summary["fatal"] is None
    assert not any("timings" in w for w in find_warnings(log.splitlines()))
    assert find_fatal(log.splitlines()) is None


def test_before_0523_no_startup_record(emulator):
    e = _start(emulator, "0.5.12")
    assert "startup_time" not in e.get_json("/server_info")
    assert "Engine startup timings" not in e.log()
