"""The gate's report, typed once (module_utils/sglang_gate_report.py) for the module and the tuner:
merged from real start-up logs and /server_info bodies, read back by the tuner, and built from
/server_info alone for `bench --url` with the same rule."""

from __future__ import annotations

from pathlib import Path

from sglang_utils import sglang_log as L
from sglang_utils import sglang_server_info as S
from sglang_utils.sglang_gate_report import Capacity, GateReport, Speculative
from test_sglang_server_info import INFO_059

FIXTURES = Path(__file__).parent / "fixtures"


def _summary(name: str) -> dict:
    return L.summarize(L.split_lines((FIXTURES / name).read_text(encoding="utf-8")))


def test_the_log_line_wins_and_server_info_fills_the_rest() -> None:
    summary = _summary("constructed_0.5.9_tp1_mtp_ms_timestamps.log")
    info = S.parse_server_info({**INFO_059, "max_total_num_tokens": 1, "context_length": 4096})
    rep = GateReport.build(summary, info, {}, "/server_info")
    # the capacity line printed for this start beats /server_info's value
    assert rep.capacity.max_total_num_tokens == 1763904 and rep.capacity.max_running_requests == 27
    assert rep.capacity.context_len == 262144 and rep.capacity.available_gpu_mem_gb == 8.7
    assert rep.speculative.enabled and rep.speculative.num_steps == 3 and rep.speculative.num_draft_tokens == 4
    assert rep.server.version == "0.5.9" and rep.server.served_model_name == "qwen3.5-122b"
    assert rep.server.server_info_path == "/server_info"
    # a log with no capacity line (a build that does not print one): /server_info fills it
    no_line = {**summary, "capacity": None}
    filled = GateReport.build(no_line, info, {"max_model_len": 9})
    assert filled.capacity.max_total_num_tokens == 1 and filled.capacity.context_len == 4096


def test_cpu_memory_stays_out_unless_the_log_printed_it() -> None:
    cpu = GateReport.build(_summary("constructed_0.5.23_cpu_dtype_and_va.log"), {}, {})
    assert cpu.capacity.available_cpu_mem_gb == 120.55 and "available_cpu_mem_gb" in cpu.capacity.to_json()
    gpu = GateReport.build(_summary("constructed_0.5.9_tp1_mtp_ms_timestamps.log"), {}, {})
    assert "available_cpu_mem_gb" not in gpu.capacity.to_json()


def test_round_trip_and_a_report_from_another_version() -> None:
    rep = GateReport.build(_summary("constructed_0.5.9_tp1_mtp_ms_timestamps.log"), S.parse_server_info(INFO_059), {})
    assert GateReport.from_json(rep.to_json()) == rep
    future = rep.to_json()
    future["capacity"]["a_field_from_a_later_module"] = 5
    future["speculative"]["another"] = True
    assert GateReport.from_json(future) == rep
    assert GateReport.from_json(None) == GateReport()
    assert Capacity.from_json({"max_total_num_tokens": 7}).max_total_num_tokens == 7


def test_bench_url_report_uses_the_same_rule() -> None:
    info = S.parse_server_info(INFO_059)
    rep = GateReport.from_server_info(info, "served-as")
    assert (
        rep.capacity.max_total_num_tokens == 1763904
        and rep.capacity.max_running_requests == info["max_running_requests"]
    )
    assert rep.speculative == Speculative.merge({}, info)
    assert rep.server.served_model_name == "served-as" and rep.server.version == "0.5.9"


def test_schedule_kept_only_when_the_server_runs_adaptive() -> None:
    info = S.parse_server_info(INFO_059)
    sched = {"1": [1, 3]}
    assert Speculative.merge({}, info, sched).schedule is None
    adaptive = {**info, "speculative": {**info["speculative"], "adaptive": True}}
    assert Speculative.merge({}, adaptive, sched).schedule == sched


def test_a_log_cut_before_the_speculative_fields_says_nothing_of_them() -> None:
    """The stored copy of sgl-project/sglang issue #12726's NGRAM launch ends its server_args= line
    before speculative_algorithm: the report says nothing of speculation, not "off", and
    /server_info's word fills it."""
    summary = _summary("sglang-0.5.4.post3_tp1_server_args_broken_in_two.log")
    assert summary["server_args"]["chunked_prefill_size"] == 8192
    assert GateReport.build(summary, {}, {}).speculative.enabled is None
    filled = GateReport.build(summary, S.parse_server_info(INFO_059), {})
    assert filled.speculative.enabled is True and filled.speculative.algorithm == "EAGLE"
