"""The log parsers on real SGLang log excerpts (tests/module/fixtures, sources cited in each file)."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from ready_testlib import load_fixture
from sglang_utils import sglang_log as L

# ------------------------------------------------------------------------------------------
# Line prefix
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, ts, ranks, msg",
    [
        ("[2026-06-28 15:16:45] max_total_num_tokens=1", "2026-06-28 15:16:45", {}, "max_total_num_tokens=1"),
        (
            "[2025-03-08 12:29:21 TP0] Memory pool end. avail mem=2.09 GB",
            "2025-03-08 12:29:21",
            {"TP": 0},
            "Memory pool end. avail mem=2.09 GB",
        ),
        (
            "[2025-10-15 11:03:35 DP6 TP6 EP6] Some requests",
            "2025-10-15 11:03:35",
            {"DP": 6, "TP": 6, "EP": 6},
            "Some requests",
        ),
        ("[2026-06-14 09:00:01.245] server_args=X()", "2026-06-14 09:00:01.245", {}, "server_args=X()"),
        (
            "[2026-01-01 00:00:00 PP1 ATTN_CP2 MOE_DP3 TP12] x",
            "2026-01-01 00:00:00",
            {"PP": 1, "ATTN_CP": 2, "MOE_DP": 3, "TP": 12},
            "x",
        ),
        # `docker logs -t` prefix in front (real, fixtures/sglang-0.5.2x_dp_attention_rocm_docker_ready.log)
        (
            "2026-09-23T08:24:51.977090836Z [2026-09-23 08:24:51] The server is fired up and ready to roll!",
            "2026-09-23 08:24:51",
            {},
            "The server is fired up and ready to roll!",
        ),
    ],
)
def test_prefix_forms(raw, ts, ranks, msg):
    ln = L.parse_line(raw)
    assert (ln.timestamp, ln.ranks, ln.message) == (ts, ranks, msg)


def test_uvicorn_and_level_tagged_lines():
    uv = L.parse_line('[2025-03-08 12:29:32] INFO:     10.0.2.141:37662 - "GET /health HTTP/1.1" 200 OK')
    assert uv.uvicorn and uv.level == "INFO" and uv.message.startswith("10.0.2.141")
    tagged = L.parse_line("[2026-02-27 14:33:03] WARNING server_args.py:2326: KV cache is forced as chunk cache")
    assert (tagged.level, tagged.where, tagged.message) == (
        "WARNING",
        "server_args.py:2326",
        "KV cache is forced as chunk cache",
    )


def test_foreign_and_blank_lines():
    assert L.parse_line("   ") is None
    ln = L.parse_line("INFO 03-07 12:29:02 __init__.py:190] Automatically detected platform cuda.")
    assert not ln.sglang and ln.message.startswith("INFO 03-07")
    # tqdm bar glued in front of a log line (real: fixtures/sglang-0.4.3.post4_tp4_qwq32b.log)
    glued = "  0%|    | 0/13 [00:00<?, ?it/s][2025-03-08 12:29:21 TP1] Capture cuda graph begin."
    assert L.parse_line(glued).ranks == {"TP": 1}


def test_carriage_returns_split_into_lines():
    parsed = L.parse_lines(["bar 10%\rbar 20%\r[2026-01-01 00:00:00 TP0] Memory pool end. avail mem=1.00 GB"])
    assert [p.message for p in parsed][-1] == "Memory pool end. avail mem=1.00 GB"
    assert len(parsed) == 3


def test_timestamps_with_and_without_ms():
    a = L.parse_timestamp("2026-06-14 09:00:01")
    b = L.parse_timestamp("2026-06-14 09:00:01.250")
    assert b - a == pytest.approx(0.25)
    assert a == time.mktime((2026, 6, 14, 9, 0, 1, 0, 0, -1))
    assert L.parse_timestamp("garbage") is None


# ------------------------------------------------------------------------------------------
# Prefill batch lines
# ------------------------------------------------------------------------------------------


def test_prefill_batches_from_real_logs_and_each_release_form():
    """One row per `Prefill batch` line of the primary rank: 0.4.x's `Prefill batch.` (real:
    fixtures/sglang-0.4.1_tp1_kv_sizes_only.log with `cache hit rate`), 0.5.9's order, and 0.5.11+'s
    `#pending-token` before `cuda graph` and `input throughput` (metrics_reporter.py report_prefill_stats)."""
    old = L.parse_prefill_batches(load_fixture("sglang-0.4.1_tp1_kv_sizes_only.log"))
    assert [(r["new_seq"], r["new_token"], r["cached_token"], r["running_req"]) for r in old] == [(1, 7, 0, 0)]
    assert old[0]["cache_hit_rate"] == "0.00%" and old[0]["pending_token"] is None
    rows = L.parse_prefill_batches(
        [
            "[2026-10-30 11:00:41 TP1] Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 1.00",
            "[2026-10-30 11:00:41 TP0] Prefill batch, #new-seq: 2, #new-token: 8192, #cached-token: 0, full token usage: "
            "0.01, mamba usage: 0.10, #running-req: 1, #queue-req: 3, #pending-token: 1808, cuda graph: False, "
            "input throughput (token/s): 41234.50, fwd occupancy: 97.00%",
        ]
    )
    assert len(rows) == 1 and rows[0]["rank"] == "TP0"
    row = rows[0]
    assert (row["new_seq"], row["new_token"], row["pending_token"], row["queue_req"]) == (2, 8192, 1808, 3)
    assert (row["token_usage"], row["mamba_usage"], row["input_throughput"], row["cuda_graph"]) == (
        0.01,
        0.1,
        41234.5,
        False,
    )


def test_the_graph_flag_of_a_prefill_batch_is_read_whatever_device_names_it():
    """SGLang names the flag by device (`npu graph` on Ascend, `cpu graph`, `musa graph`): a real
    0.5.1x NPU log (https://github.com/sgl-project/sglang/pull/30047) reads as `cuda_graph` too."""
    rows = L.parse_prefill_batches(load_fixture("sglang-0.5.1x_npu_mamba_prefill_npu_graph.log"))
    assert [r["cuda_graph"] for r in rows] == [False] * 5
    assert [(r["pending_token"], r["token_usage"], r["mamba_usage"]) for r in rows][0] == (109585, 0.14, 0.2)
    assert "npu_graph" not in rows[0]


# ------------------------------------------------------------------------------------------
# Capacity line across versions
# ------------------------------------------------------------------------------------------


def test_capacity_tp1_no_prefix():  # sglang issue #29575
    cap = L.parse_capacity(load_fixture("sglang-0.5.1x_tp1_capacity_line.log"))
    assert cap["max_total_num_tokens"] == 2086558
    assert cap["chunked_prefill_size"] == 8192
    assert cap["max_prefill_tokens"] == 16384
    assert cap["max_running_requests"] == 33
    assert cap["context_len"] == 256000
    assert cap["available_gpu_mem_gb"] == 17.22
    assert cap["rank"] == ""


def test_capacity_old_build_without_available_mem_picks_tp0():  # 0.4.3.post4, every rank prints it
    cap = L.parse_capacity(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log"))
    assert cap["rank"] == "TP0"
    assert cap["max_total_num_tokens"] == 46611
    assert cap["max_running_requests"] == 2049
    assert cap["context_len"] == 131072
    assert cap["available_gpu_mem_gb"] is None


def test_capacity_tp2_qwen35():
    cap = L.parse_capacity(load_fixture("sglang-dev-0.5.10_tp2_qwen35_9b_mamba.log"))
    assert (cap["max_total_num_tokens"], cap["max_running_requests"], cap["context_len"]) == (327310, 62, 262144)
    assert cap["available_gpu_mem_gb"] == 3.79 and cap["rank"] == "TP0"


def test_capacity_dp0_tp0_behind_docker_prefix():
    cap = L.parse_capacity(load_fixture("sglang-0.5.2x_dp_attention_rocm_docker_ready.log"))
    assert cap["rank"] == "DP0 TP0"
    assert (cap["max_total_num_tokens"], cap["max_running_requests"], cap["context_len"]) == (2226368, 16, 1048576)
    assert cap["available_gpu_mem_gb"] == 39.67


def test_capacity_on_cpu_build():
    cap = L.parse_capacity(load_fixture("constructed_0.5.23_cpu_dtype_and_va.log"))
    assert cap["available_gpu_mem_gb"] is None
    assert cap["available_cpu_mem_gb"] == 120.55
    assert cap["max_total_num_tokens"] == 524288


def test_capacity_ms_timestamps():
    cap = L.parse_capacity(load_fixture("constructed_0.5.9_tp1_mtp_ms_timestamps.log"))
    assert cap["max_total_num_tokens"] == 1763904 and cap["max_running_requests"] == 27
    assert cap["timestamp"] == "2026-06-14 09:02:31.020"


@pytest.mark.parametrize(
    "line, expect",
    [
        # cut inside the last value: available_gpu_mem is dropped, not misread
        (
            "[2026-06-28 15:16:45] max_total_num_tokens=2086558, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=33, context_len=256000, available_gpu_mem=17.2",
            {"max_total_num_tokens": 2086558, "context_len": 256000, "available_gpu_mem_gb": None},
        ),
        # cut in the middle of a key
        (
            "[2026-06-28 15:16:45] max_total_num_tokens=2086558, chunked_prefill_size=8192, max_prefi",
            {
                "max_total_num_tokens": 2086558,
                "chunked_prefill_size": 8192,
                "max_prefill_tokens": None,
                "max_running_requests": None,
            },
        ),
        # bench_one_batch prints the bare token count (real: code index id 33639436415)
        ("max_total_num_tokens=4096", {"max_total_num_tokens": 4096, "context_len": None}),
    ],
)
def test_capacity_truncated_lines_are_partial_not_fatal(line, expect):
    cap = L.parse_capacity([line])
    for key, value in expect.items():
        assert cap[key] == value, key


def test_capacity_absent_and_lookalikes():
    assert L.parse_capacity(load_fixture("sglang-0.5.9_npu_oom_traceback.log")) is None
    # the user-cap warning is not the capacity line (docs/reference/sglang.md §5.3)
    assert (
        L.parse_capacity(
            [
                "[2026-01-01 00:00:00 TP0] max_total_tokens=900000 is larger than the profiled "
                "value 800000. Use the profiled value instead."
            ]
        )
        is None
    )
    assert L.parse_capacity([]) is None


def test_capacity_is_not_read_from_another_message_that_names_the_field():
    """A start that crashed before the capacity line has no capacity, though an assertion or a pool's
    own line names max_total_num_tokens (SGLang 0.5.23; both rendered from its source)."""
    lines = [
        "[2026-12-07 20:20:01 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=60.10 GB",
        # mem_cache/unified_memory_pool.py:1820-1828 (logger.info, before the scheduler's capacity line)
        "[2026-12-07 20:20:02 TP0] [unified-memory-pool]   total_bytes=42949672960, max_total_num_tokens=1048576, "
        "max_mamba_cache_size=256, max_num_reqs=256, speculative_num_draft_tokens=4",
        "[2026-12-07 20:20:02 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 702, in init_pools',
        "    assert draft_virtual_id_space >= sizes.max_total_num_tokens, (",
        # mem_cache/kv_cache_configurator.py:702-706
        "AssertionError: unified allocator virtual space smaller than the token budget: virtual_id_space=262144 < "
        "max_total_num_tokens=524288",
    ]
    assert L.parse_capacity(lines) is None
    assert L.parse_capacity([*lines[:2], *lines[3:]]) is None
    # the real line after them is still read
    real = (
        "[2026-12-07 20:20:09 TP0] max_total_num_tokens=1048576, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=256, context_len=40960, available_gpu_mem=9.10 GB"
    )
    cap = L.parse_capacity([*lines[:2], real])
    assert cap is not None and cap["max_total_num_tokens"] == 1048576 and cap["max_running_requests"] == 256
    # ... and so is the line behind a prefix the parser does not know (a custom logging config's,
    # Python's default format, a collector's): the field comes first after it
    fields = real.split("] ", 1)[1]
    for prefix in (
        "INFO 12-07 20:20:09 [scheduler.py:2310] ",
        "INFO:sglang.srt.managers.scheduler:",
        "pod-7 | ",
        "ts=2026-12-07T20:20:09Z level=info pid=4242 ",
    ):
        cap = L.parse_capacity([*lines[:2], prefix + fields])
        assert cap is not None and cap["max_total_num_tokens"] == 1048576, prefix


# ------------------------------------------------------------------------------------------
# KV and Mamba pools
# ------------------------------------------------------------------------------------------


def test_kv_pool_mha_per_rank_dedup():
    pools = L.parse_kv_pools(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log"))
    assert len(pools) == 1  # one per rank in the log, only TP0's kept
    p = pools[0]
    assert (p["rank"], p["layout"], p["tokens"], p["k_size_gb"], p["v_size_gb"], p["total_gb"]) == (
        "TP0",
        "mha",
        46611,
        1.42,
        1.42,
        2.84,
    )
    assert p["dtype"] is None and p["kv_size_gb"] is None and p["upper_bound"] is False


def test_kv_pool_mla_form():
    (p,) = L.parse_kv_pools(load_fixture("sglang-2026-03_tp2_npu_mla_kv_size.log"))
    assert (p["layout"], p["tokens"], p["kv_size_gb"], p["k_size_gb"], p["total_gb"]) == (
        "mla",
        383872,
        19.36,
        None,
        19.36,
    )


def test_kv_pool_dtype_form_without_rank0_falls_back_to_first_rank():
    pools = L.parse_kv_pools(load_fixture("sglang-0.5.2x_tp16_npu_dtype_pools.log"))
    assert [p["rank"] for p in pools] == ["TP10"]
    assert pools[0]["dtype"] == "torch.bfloat16" and pools[0]["tokens"] == 387968


def test_kv_pools_target_then_draft():
    pools = L.parse_kv_pools(load_fixture("sglang-0.5.2x_tp1_mtp_mamba_spec_oom.log"))
    assert [(p["tokens"], p["k_size_gb"]) for p in pools] == [(295950, 4.52), (295950, 3.39)]
    assert all(p["dtype"] == "torch.bfloat16" and p["rank"] == "" for p in pools)


@pytest.mark.parametrize(
    "target",
    [
        # 0.5.9-0.5.1x (srt/mem_cache/swa_memory_pool.py SWAKVPool.__init__): two unlabelled target
        # pools, SWA first, then the summary line (memory_pool.py's "KV Cache is allocated" format)
        [
            "[2026-03-01 10:00:10 TP0] KV Cache is allocated. #tokens: 131200, K size: 0.88 GB, V size: 0.88 GB",
            "[2026-03-01 10:00:10 TP0] KV Cache is allocated. #tokens: 1049600, K size: 7.03 GB, V size: 7.03 GB",
            "[2026-03-01 10:00:10 TP0] SWAKVPool mem usage: 15.82 GB, swa size: 131200, full size: 1049600",
        ],
        # 0.5.2x: SGLang's own labels, Full first (memory_pool.py `allocation_label`)
        [
            "[2026-10-30 10:00:10 TP0] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1049600, "
            "K size: 7.03 GB, V size: 7.03 GB",
            "[2026-10-30 10:00:10 TP0] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 131200, "
            "K size: 0.88 GB, V size: 0.88 GB",
            "[2026-10-30 10:00:10 TP0] SWAKVPool mem usage: 15.82 GB, swa size: 131200, full size: 1049600",
        ],
    ],
)
def test_a_sliding_window_targets_two_pools_are_labelled_and_the_draft_stays_last(target):
    draft = "[2026-03-01 10:00:20 TP0] KV Cache is allocated. #tokens: 1049600, K size: 0.12 GB, V size: 0.12 GB"
    pools = L.parse_kv_pools([*target, draft])
    got = sorted((p["label"], p["tokens"]) for p in pools[:2])
    assert got == [("Full", 1049600), ("SWA", 131200)]
    assert pools[2]["label"] is None and pools[2]["total_gb"] == 0.24


def test_kv_pool_labels_and_va_upper_bound():
    pools = L.parse_kv_pools(load_fixture("constructed_0.5.23_cpu_dtype_and_va.log"))
    assert [(p["label"], p["upper_bound"], p["layout"]) for p in pools] == [("SWA", False, "mla"), (None, True, "mla")]
    assert pools[0]["dtype"] == "torch.float8_e4m3fn"


def test_post_capture_kv_sizing_pools_replace_the_upper_bounds():
    """With SGLANG_ENABLE_POST_CAPTURE_KV_SIZING (0.5.19+) the pools are reserved as virtual memory
    up to an upper bound, then sized after the graph capture: the sized pools are the pools
    (format strings of 0.5.23's model_executor/model_runner_components/kv_pool_runtime.py)."""
    lines = [
        "[2026-10-30 11:00:02 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 2000000, KV size: 120.00 GB",
        "[2026-10-30 11:00:02 TP0] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 2000000, KV size: 20.00 GB",
        "[2026-10-30 11:00:30 TP0] Post-capture KV sizing: full_layer_tokens=1500000, swa_layer_tokens=0",
        "[2026-10-30 11:00:30 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 1500000, KV size: 90.00 GB, avail mem=10.00 GB",
        "[2026-10-30 11:00:30 TP0] Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 1500000, KV size: 15.00 GB",
        "[2026-10-30 11:00:40 TP0] max_total_num_tokens=1500000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=32768, available_gpu_mem=9.80 GB",
    ]
    pools = L.parse_kv_pools(lines)
    assert [(p["label"], p["tokens"], p["kv_size_gb"], p["upper_bound"]) for p in pools] == [
        (None, 1500000, 90.0, False),
        ("draft", 1500000, 15.0, False),
    ], pools


def test_third_party_kv_lines_are_not_sglang_pools():
    lines = [
        "[kvcached][INFO] VirtualKV Cache is allocated. #tokens: 248479, K size: 7.99 GB, V size: 7.99 GB",
        "[kvcached][INFO] Physical KV Cache limits by --mem-fraction-static: #tokens: 248479, K size: 4.27 GB",
    ]
    assert L.parse_kv_pools(lines) == []


def test_mamba_cache_qwen35():
    m = L.parse_mamba_cache(load_fixture("sglang-dev-0.5.10_tp2_qwen35_9b_mamba.log"))
    assert m == {
        "rank": "TP0",
        "max_mamba_cache_size": 186,
        "conv_state_gb": 0.10,
        "ssm_state_gb": 4.38,
        "intermediate_ssm_state_cache_gb": None,
        "intermediate_conv_window_cache_gb": None,
    }


def test_mamba_cache_with_speculative_intermediate_state():
    m = L.parse_mamba_cache(load_fixture("sglang-0.5.2x_tp1_mtp_mamba_spec_oom.log"))
    assert m["max_mamba_cache_size"] == 64
    assert m["intermediate_ssm_state_cache_gb"] == 48.75 and m["intermediate_conv_window_cache_gb"] == 0.43


def test_no_mamba_on_dense_models():
    assert L.parse_mamba_cache(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log")) is None


# ------------------------------------------------------------------------------------------
# server_args and speculative settings
# ------------------------------------------------------------------------------------------


def test_server_args_full_043_repr():
    sa = L.parse_server_args(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log"))
    assert sa["served_model_name"] == "/home/model/Qwen/QwQ-32B"
    assert sa["tp_size"] == 4 and sa["mem_fraction_static"] == 0.85
    assert sa["json_model_override_args"] == "{}" and sa["debug_tensor_dump_inject"] is False
    assert sa["speculative_algorithm"] is None


def test_server_args_full_059_repr_lists_and_dicts():
    sa = L.parse_server_args(load_fixture("sglang-0.5.9era_tp16_prelaunch_deepseek_r1.log"))
    assert sa["cuda_graph_bs"][:4] == [1, 2, 4, 8] and sa["cuda_graph_bs"][-1] == 512
    assert sa["mm_process_config"] == {} and sa["forward_hooks"] is None
    assert sa["disaggregation_mode"] == "decode" and sa["max_running_requests"] == 128


def test_speculative_off_ignores_default_steps_of_old_builds():
    spec = L.parse_speculative(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log"))
    assert spec["enabled"] is False
    assert (spec["algorithm"], spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"]) == (None,) * 4
    assert spec["draft_tokens_adjusted"] is False and spec["max_running_requests_reset"] is False


def test_speculative_resolved_and_adjustments():
    spec = L.parse_speculative(load_fixture("constructed_0.5.9_tp1_mtp_ms_timestamps.log"))
    assert spec == {
        "enabled": True,
        "algorithm": "EAGLE",
        "num_steps": 3,
        "eagle_topk": 1,
        "num_draft_tokens": 4,
        "draft_tokens_adjusted": True,
        "max_running_requests_reset": True,
        "max_running_requests_reset_to": 48,
    }


def test_speculative_without_server_args_is_unknown():
    spec = L.parse_speculative(load_fixture("sglang-0.5.1x_tp1_capacity_line.log"))
    assert spec["enabled"] is None and spec["num_steps"] is None
    assert spec["draft_tokens_adjusted"] is False  # a log was read and had no such warning
    assert L.parse_speculative([])["draft_tokens_adjusted"] is None


def test_a_server_args_line_broken_in_two_is_read_whole():
    """The 10,000-character line comes broken in two in real logs, the second piece without a prefix
    (sgl-project/sglang issue #12726, pasted from a 0.5.4.post3 launch: broken inside a key)."""
    lines = load_fixture("sglang-0.5.4.post3_tp1_server_args_broken_in_two.log")
    sa = L.parse_server_args(lines)
    assert sa["max_running_requests"] == 48 and sa["max_total_tokens"] is None
    assert sa["chunked_prefill_size"] == 8192 and sa["page_size"] == 1 and sa["hybrid_kvcache_ratio"] is None
    # the stored text ends before speculative_algorithm, which the launch set (NGRAM): nothing said of it
    spec = L.parse_speculative(lines)
    assert spec["enabled"] is None and spec["algorithm"] is None
    # broken before the speculative fields, in a real 0.4.3.post4 line: the pieces put together read them
    (line,) = [x for x in load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log") if "server_args=" in x]
    cut = line.index("speculative_draft_model_path") - 7
    broken = [line[:cut], line[cut:], "[2025-03-08 12:29:05 TP0] Init torch distributed begin."]
    assert L.parse_server_args(broken) == L.parse_server_args([line])
    assert L.parse_speculative(broken)["enabled"] is False
    # the next line with SGLang's prefix is not part of it, nor a traceback
    for between in ("[2025-03-08 12:29:05 TP0] Init torch distributed begin.", "Traceback (most recent call last):"):
        cut_only = [line[:cut], between, line[cut:]]
        assert "speculative_algorithm" not in L.parse_server_args(cut_only)
        assert L.parse_speculative(cut_only)["enabled"] is None


def test_repr_parser_handles_quotes_escapes_and_truncation():
    text = "a='x, y', b=\"it's\", c='q\\'uote', d=[1, (2, 3)], e={'k': [1]}, f=<Enum.X: 1>, g=None, h=0.5)"
    out = L.parse_repr_kwargs(text)
    assert out["a"] == "x, y" and out["b"] == "it's" and out["c"] == "q'uote"
    assert out["d"] == [1, (2, 3)] and out["e"] == {"k": [1]} and out["f"] == "<Enum.X: 1>"
    assert out["g"] is None and out["h"] == 0.5
    cut = L.parse_repr_kwargs("model_path='/m', tp_size=4, served_model_name='/hom")
    assert cut == {"model_path": "/m", "tp_size": 4}


def test_server_args_values_are_never_evaluated(tmp_path):
    marker = tmp_path / "pwned"
    line = f"[2026-01-01 00:00:00] server_args=ServerArgs(model_path=__import__('os').system('touch {marker}'))"
    sa = L.parse_server_args([line])
    assert isinstance(sa["model_path"], str) and not marker.exists()
    with pytest.raises(ValueError):
        ast.literal_eval(sa["model_path"])


# ------------------------------------------------------------------------------------------
# Warnings
# ------------------------------------------------------------------------------------------


def test_warnings_dedup_across_ranks_and_known_texts():
    w = L.find_warnings(load_fixture("sglang-0.4.3.post4_tp4_qwq32b.log"))
    assert w == [
        "Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
        "To silence this warning, specify disable_custom_all_reduce=True explicitly."
    ]


def test_warnings_level_tagged_and_speculative():
    w = L.find_warnings(load_fixture("constructed_0.5.9_tp1_mtp_ms_timestamps.log"))
    assert w[0].startswith("Max running requests is reset to 48")
    assert w[1].startswith("speculative_num_draft_tokens is adjusted")
    assert not any("GET /health" in x for x in w)  # a 503 access line is not a warning


def test_warnings_prelaunch_form_and_python_warnings():
    w = L.find_warnings(load_fixture("sglang-0.5.9era_tp16_prelaunch_deepseek_r1.log"))
    assert "KV cache is forced as chunk cache for decode server" in w
    w2 = L.find_warnings(load_fixture("sglang-dev-0.5.10_tp2_qwen35_9b_mamba.log"))
    assert any(x.startswith("Setup Custom allreduce failed") for x in w2)
    assert any("`torch_dtype` is deprecated" in x for x in w2)


def test_warnings_in_pythons_default_format():
    """Where logging was set up before SGLang's format, an SGLang logger's warning reads
    "WARNING:sglang.srt.server_args:..." (real lines: a LiquidAI/LFM2-700M run of 2025-12-29 and a
    GPT-OSS one of 2025-09-28 pasted in public threads; sgl-project/sglang PR #13023 shows the form
    before `server_args=`): it was dropped from the gate's warnings. Another logger's is not SGLang's."""
    lines = [
        "WARNING:sglang.srt.server_args:Disabling overlap schedule since mamba no_buffer is not compatible with "
        "overlap schedule, try to use --disable-radix-cache if overlap schedule is necessary",
        "[2025-12-29 18:33:02 TP0] Init torch distributed begin.",
        "All deep_gemm operations loaded successfully!",
        "WARNING:sglang.srt.server_args:Detected GPT-OSS model, enabling triton_kernels MOE kernel.",
        "WARNING:urllib3.connectionpool:Retrying (Retry(total=4)) after connection broken",
    ]
    assert L.find_warnings(lines) == [
        "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, try to use "
        "--disable-radix-cache if overlap schedule is necessary",
        "Detected GPT-OSS model, enabling triton_kernels MOE kernel.",
    ]
    assert L.find_fatal(lines) is None


# ------------------------------------------------------------------------------------------
# Fatal errors: the most specific reason
# ------------------------------------------------------------------------------------------


def test_fatal_kv_pool_oom_real_line():
    f = L.find_fatal(load_fixture("sglang-0.5.6.post1_npu_not_enough_memory.log"))
    assert f["kind"] == "kv_pool_oom"
    assert f["reason"].startswith("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")


def test_the_weights_first_kv_pool_error_is_kv_pool_oom():
    """0.5.14+ refuses a start whose loaded weights leave no room for the KV cache with its own
    words (mem_cache/kv_cache_configurator.py; sgl-project/sglang PRs #28683, #28855: draft weights
    counted): a larger --mem-fraction-static, as "Not enough memory", not a generic exception."""
    lines = [
        "[2026-08-28 01:41:18] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 3051, in profile',
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. "
        "Raise --mem-fraction-static above 0.612 (minimum viable = 1 - available/pre = 0.6113). If using "
        "speculative decoding, draft weights are now counted.",
    ]
    f = L.find_fatal(lines)
    assert f["kind"] == "kv_pool_oom" and f["reason"].startswith("ValueError: Loaded weights leave no GPU memory")


def test_the_hybrid_state_cache_error_is_kv_pool_oom():
    """0.5.20+ refuses a hybrid model (Mamba / linear attention: Qwen3.5, Qwen3-Next) whose state
    cache does not fit with its own words (`[v0.5.23] mem_cache/kv_cache_configurator.py:3393-3403`,
    the format string filled in): a memory failure at start-up, not a generic exception."""
    lines = [
        "[2026-10-02 09:12:44] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 3393, in configure',
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        "max_mamba_cache_size=0 (total_rest_memory=1.25 GB, mamba_cache_per_req=310.50 MB). Try: (1) reduce "
        "--max-running-requests, (2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, "
        "or (4) use GPUs with more memory.",
        "[2026-10-02 09:12:44] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(lines)
    assert f["kind"] == "kv_pool_oom", f
    assert f["reason"].startswith("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache")


def test_a_compile_failure_in_graph_capture_keeps_its_cause():
    """torch's BackendCompilerFailed puts the cause on the line after "... raised:" (MI308 with
    --enable-torch-compile, sgl-project/sglang#6001): the reason named no cause."""
    lines = [
        "[2025-05-05 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 300, in __init__',
        "Exception: Capture cuda graph failed: backend='inductor' raised:",
        "OutOfResources: out of resource: shared memory, Required: 196608, Hardware limit: 65536. "
        "Reducing block sizes or `num_stages` may help.",
        "",
        'Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information',
    ]
    f = L.find_fatal(lines)
    assert f["kind"] == "cuda_graph"
    assert f["reason"].endswith(
        "raised: OutOfResources: out of resource: shared memory, Required: 196608, "
        "Hardware limit: 65536. Reducing block sizes or `num_stages` may help."
    ), f


def test_fatal_npu_oom_beats_sigquit_and_resource_warnings():
    f = L.find_fatal(load_fixture("sglang-0.5.9_npu_oom_traceback.log"))
    assert f["kind"] == "out_of_memory"
    assert f["reason"].startswith("RuntimeError: NPU out of memory. Tried to allocate 98.71 GiB")


def test_tritons_out_of_memory_is_out_of_memory():
    """Triton's driver raises RuntimeError("Triton Error [CUDA]: " + the driver's error string)
    when loading a kernel (triton-lang/triton's nvidia driver.c gpuAssert)."""
    lines = [
        "[2026-10-30 11:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/venv/lib/python3.12/site-packages/triton/compiler/compiler.py", line 482, in _init_handles',
        "    self.module, self.function, self.n_regs, self.n_spills, self.n_max_threads = driver.active.utils.load_binary(",
        "RuntimeError: Triton Error [CUDA]: out of memory",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "out_of_memory", f
    assert f["reason"] == "RuntimeError: Triton Error [CUDA]: out of memory"


def test_fatal_cuda_oom_in_graph_capture_after_scheduler_exception():
    f = L.find_fatal(load_fixture("sglang-0.5.2x_tp1_mtp_mamba_spec_oom.log"))
    assert f["kind"] == "out_of_memory"
    assert f["reason"].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 970.00 MiB")
    assert "Scheduler hit an exception" in f["trigger"]
    assert f["generic"] is False


def test_fatal_root_cause_beats_scheduler_died_wrapper():
    f = L.find_fatal(load_fixture("sglang-0.5.2x_dp_attention_rocm_docker_crash.log"))
    assert f["kind"] == "exception"
    assert f["reason"] == "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"


def test_fatal_truncated_traceback_reports_the_scheduler_exception():
    f = L.find_fatal(load_fixture("sglang-0.5.9_npu_sigquit_truncated_traceback.log"))
    assert f["kind"] == "scheduler_exception"
    assert f["reason"].startswith("Scheduler hit an exception")
    assert f["generic"] is True  # only says the scheduler died: a growing log may still name why
    assert f["trigger"].endswith("Received sigquit from a child process. It usually means the child failed.")


def test_fatal_argparse():
    f = L.find_fatal(load_fixture("constructed_argparse_error.log"))
    assert f["kind"] == "bad_arguments"
    assert f["reason"] == "launch_server.py: error: unrecognized arguments: --speculative-num-stepz 3"


@pytest.mark.parametrize(
    "lines, kind, reason_start",
    [
        (
            ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "AssertionError"],
            "exception",
            "AssertionError",
        ),
        (
            [
                "Traceback (most recent call last):",
                "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding.",
            ],
            "exception",
            "ValueError: trtllm_mha backend",
        ),
        (
            [
                "[2026-01-01 00:00:00 TP0] Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB",
                "Possible solutions:",
            ],
            "cuda_graph",
            "Capture cuda graph failed",
        ),
        (
            ["RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device"],
            "kernel_image",
            "RuntimeError: RMSNorm failed",
        ),
        (
            ["[2026-01-01 00:00:00] Rank 0 scheduler is dead. Please check if there are relevant logs."],
            "scheduler_dead",
            "Rank 0 scheduler is dead",
        ),
        (
            ["[2026-01-01 00:00:00] Initialization failed. warmup error: timed out"],
            "init_failed",
            "Initialization failed. warmup error",
        ),
        (["Traceback (most recent call last):", '  File "x.py", line 1'], "traceback", "Traceback"),
        # chained exceptions: the one Python reports last is the reason
        (
            [
                "Traceback (most recent call last):",
                "KeyError: 'glm_moe_dsa'",
                "",
                "During handling of the above exception, another exception occurred:",
                "",
                "Traceback (most recent call last):",
                "ValueError: The checkpoint you are trying to load has model type "
                "`glm_moe_dsa` but Transformers does not recognize this architecture.",
            ],
            "exception",
            "ValueError: The",
        ),
        # a chained exception whose message runs four lines before the chain's marker: huggingface_hub's
        # RepositoryNotFoundError (its body as in andri-jpg/PyWaifu#5), then the OSError a wrong
        # --model-path gets, the one Python reports
        (
            [
                "Traceback (most recent call last):",
                "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. (Request ID: Root=1-64aa705b-1)",
                "",
                "Repository Not Found for url: https://huggingface.co/Qwen/Qwen3.5-9Bx/resolve/main/config.json.",
                "Please make sure you specified the correct `repo_id` and `repo_type`.",
                "If you are trying to access a private or gated repo, make sure you are authenticated.",
                "Invalid username or password.",
                "",
                "The above exception was the direct cause of the following exception:",
                "",
                "Traceback (most recent call last):",
                "OSError: Qwen/Qwen3.5-9Bx is not a local folder and is not a valid model identifier listed on "
                "'https://huggingface.co/models'",
            ],
            "exception",
            "OSError: Qwen/Qwen3.5-9Bx is not a local folder",
        ),
    ],
)
def test_fatal_kinds(lines, kind, reason_start):
    f = L.find_fatal(lines)
    assert f["kind"] == kind and f["reason"].startswith(reason_start)


@pytest.mark.parametrize(
    "name",
    [
        "sglang-0.4.3.post4_tp4_qwq32b.log",
        "sglang-dev-0.5.10_tp2_qwen35_9b_mamba.log",  # "Ignore import error", "Unexpected error during package walk"
        "sglang-0.5.9era_tp16_prelaunch_deepseek_r1.log",
        "sglang-0.5.2x_dp_attention_rocm_docker_ready.log",
        "sglang-0.5.2x_tp16_npu_dtype_pools.log",
        "constructed_0.5.9_tp1_mtp_ms_timestamps.log",
        "constructed_0.5.23_cpu_dtype_and_va.log",
        "sglang-2026-03_tp2_npu_mla_kv_size.log",
        # the Responses API's optional import, logged as a full traceback at every boot without
        # openai_harmony (SGLang handles it and starts)
        "constructed_0.5.9_responses_api_benign_traceback.log",
        # its older form: the bare traceback first, the one-line warning after it
        "constructed_0.5.2_responses_api_print_exc.log",
        # its newer form (0.5.20+): a one-line warning, the traceback at DEBUG after it
        "constructed_0.5.23_responses_api_debug_traceback.log",
        "sglang-0.5.2x_tp3_multinode_dspark_dict_server_args.log",
        "sglang-0.4.1_tp1_kv_sizes_only.log",
    ],
)
def test_healthy_starts_have_no_fatal_line(name):
    assert L.find_fatal(load_fixture(name)) is None


@pytest.mark.parametrize(
    "name",
    [
        "constructed_0.5.9_responses_api_benign_traceback.log",
        "constructed_0.5.2_responses_api_print_exc.log",
        "constructed_0.5.23_responses_api_debug_traceback.log",
    ],
)
def test_a_handled_traceback_does_not_hide_a_fatal_one_after_it(name):
    lines = load_fixture(name) + [
        "[2026-06-14 21:49:26 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/lib/python3/sglang/srt/managers/scheduler.py", line 10, in event_loop',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["reason"] == "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_a_handled_traceback_ends_at_uvicorns_lines():
    """The handled traceback's body runs to the next line of SGLang's; uvicorn's start-up lines end
    it too, so a crash printed without SGLang's prefix after them is not taken for its body."""
    lines = load_fixture("constructed_0.5.23_responses_api_debug_traceback.log")
    end = next(i for i, ln in enumerate(lines) if "Uvicorn running on" in ln)
    crash = ["Fatal Python error: Segmentation fault", "", "Thread 0x00007f (most recent call first):"]
    f = L.find_fatal(lines[: end + 1] + crash)
    assert f is not None and f["reason"] == "Fatal Python error: Segmentation fault", f
    # as before, a line of SGLang's after the handled body ends it too
    body_end = next(i for i, ln in enumerate(lines) if ln.startswith("openai_harmony.HarmonyError"))
    assert L.find_fatal(lines[: body_end + 2] + ["[2026-10-30 11:00:50] x"] + crash) is not None


def test_a_native_crash_is_fatal_with_faulthandlers_line():
    """A segfault in a scheduler prints faulthandler's dump and no Python traceback (issue #3451);
    the launcher may hang without a word, so that line is the only reason there is."""
    f = L.find_fatal(load_fixture("sglang-0.4.2_tp2_segfault_faulthandler.log"))
    assert f is not None and f["kind"] == "native_crash" and f["reason"] == "Fatal Python error: Segmentation fault"


def test_a_native_crash_glued_to_the_capture_bar_is_fatal():
    """Rank 0's CUDA-graph capture bar (tqdm, no newline) and faulthandler's line on one physical
    line, as in sgl-project/sglang issue #7847: nothing else in a native crash says so, and the
    launcher may wait on a rank that is gone, so the gate must fail here, naming the crash."""
    lines = [
        "[2025-07-08 03:21:12 TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=87.41 GB",
        "Capturing batches (bs=448 avail_mem=87.41 GB):   8%|\u2588\u258a         | 4/51 [00:20<03:35,  4.59s/it]"
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x00007f2b4effd640 (most recent call first):",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "native_crash", f
    assert f["reason"] == "Fatal Python error: Segmentation fault"


def test_an_uncaught_cpp_exception_is_a_native_crash_named_by_its_what_line():
    """torch's NCCL watchdog throws a C++ exception that nothing catches: libstdc++ prints "terminate
    called after throwing ..." and the what() line, then the process aborts and faulthandler says only
    "Fatal Python error: Aborted" (lines as sgl-project/sglang PR #14193 and issues #1693, #10216 show
    them). The what() line is the cause; without faulthandler it is the only fatal line at all."""
    what = (
        "  what():  [PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: "
        "CUDA error: an illegal memory access was encountered"
    )
    lines = [
        "[2025-12-09 02:28:10 TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=60.12 GB",
        "[rank1]:[E1209 02:28:15.281862353 ProcessGroupNCCL.cpp:2057] [PG ID 2 PG GUID 3 Rank 1] Process group "
        "watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        what,
        "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44 "
        "(most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x80 (0x7fd07bf7cb80 in "
        "/usr/local/lib/python3.12/dist-packages/torch/lib/libc10.so)",
        "Fatal Python error: Aborted",
        "",
        "Thread 0x00007f7353fff640 (most recent call first):",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "native_crash" and f["generic"] is False, f
    assert f["reason"] == (
        "terminate called after throwing an instance of 'c10::DistBackendError': [PG ID 2 PG GUID 3 Rank 1] "
        "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered"
    ), f
    f = L.find_fatal(lines[2:4])
    assert f is not None and f["kind"] == "native_crash" and "illegal memory access" in f["reason"], f


def test_a_scheduler_killed_by_a_signal_is_reported_as_that_not_as_the_launchers_eoferror():
    lines = [
        "[2026-01-26 23:15:21] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "[2026-01-26 23:16:07] Exit code: -9",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/sglang/srt/entrypoints/engine.py", line 892, in _wait_for_scheduler_ready',
        "    data = scheduler_pipe_readers[i].recv()",
        "EOFError",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "scheduler_dead", f
    assert (
        f["reason"].startswith("Rank 0 scheduler is dead.")
        and "Exit code: -9 (killed by signal 9, SIGKILL" in f["reason"]
    ), f
    # a real exception in the scheduler still outranks the launcher's wrapper
    f = L.find_fatal([*lines[:2], "Traceback (most recent call last):", "ValueError: bad config", *lines[2:]])
    assert f is not None and f["reason"] == "ValueError: bad config"


def test_a_port_in_use_is_fatal_though_uvicorn_says_it():
    line = (
        "[2026-01-01 00:00:03] ERROR:    [Errno 98] error while attempting to bind on address "
        "('0.0.0.0', 30000): address already in use"
    )
    f = L.find_fatal(["[2026-01-01 00:00:00] server_args=ServerArgs(port=30000)", line])
    assert f is not None and f["kind"] == "port_in_use" and "address already in use" in f["reason"]


# uvicorn's bind failures as SGLang 0.5.23 logs them, rendered by running uvicorn 0.55.0 (the release pip
# takes for SGLang 0.5.23's `uvicorn>=0.51`) with loop="uvloop" (uvloop 0.23.0) and SGLang's uvicorn format
# (srt/utils/common.py set_uvicorn_logging_configs) on CPython 3.11: uvicorn/server.py Server.startup
# `logger.error(exc)` of the OSError uvloop's create_server raises. The EACCES one ran as an unprivileged user.
_UVICORN_ADDRESS_NOT_HERE = (
    "[2026-12-07 20:12:26] ERROR:    [Errno 99] error while attempting to bind on address ('10.1.2.3', 30000): "
    "cannot assign requested address"
)
_UVICORN_PORT_NOT_ALLOWED = (
    "[2026-12-07 20:13:10] ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): "
    "permission denied"
)


@pytest.mark.parametrize(
    "line, words",
    [
        (_UVICORN_ADDRESS_NOT_HERE, "--host 10.1.2.3 is not an address of this machine"),
        (_UVICORN_PORT_NOT_ALLOWED, "give --port 1024 or above"),
    ],
)
def test_a_bind_that_fails_for_another_reason_than_a_taken_port_is_bind_failed(line, words):
    """Freeing the port does not help there: the reason says what to change (the host or the port)."""
    f = L.find_fatal(["[2026-12-07 20:12:20] server_args=ServerArgs(port=30000)", line])
    assert f is not None and f["kind"] == "bind_failed", f
    assert f["reason"].startswith(line.split("ERROR:    ", 1)[1] + " ("), f
    assert words in f["reason"], f


def test_a_taken_port_stays_port_in_use_in_every_spelling_of_the_bind_error():
    for line in (
        # uvloop 0.23.0 / CPython 3.11 asyncio (rendered as above, a port another socket listened on)
        "[2026-12-07 20:12:26] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30999): "
        "address already in use",
        # CPython 3.13 asyncio (base_events.py create_server: `str(err).lower()`), rendered the same way
        "[2026-12-07 20:13:15] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30999): "
        "[errno 98] address already in use",
    ):
        f = L.find_fatal([line])
        assert f is not None and f["kind"] == "port_in_use" and "(--host" not in f["reason"], (line, f)


def test_a_bind_error_without_an_address_is_read_too():
    """A bind error that names no address: uvicorn logs a --host that does not resolve as it is
    (create_server's getaddrinfo: socket.gaierror); in 0.5.23 with --enable-http-worker-reuseport
    SGLang binds the socket itself and its own logger, with SGLang's format and no uvicorn level,
    logs the OSError (http_server.py `_reserve_reuseport_socket`: `logger.error(error)`, the same
    getaddrinfo first). All were read as no fatal line at all."""
    args = "[2026-12-07 20:40:01] server_args=ServerArgs(host='gpu-node-9', port=30000)"
    for unresolved in (
        "[2026-12-07 20:40:02] ERROR:    [Errno -2] Name or service not known",
        "[2026-12-07 20:40:02] [Errno -2] Name or service not known",
    ):
        f = L.find_fatal([args, unresolved])
        assert f is not None and f["kind"] == "bind_failed" and "--host does not resolve" in f["reason"], f
    f = L.find_fatal(["[2026-12-07 20:40:05] [Errno 98] Address already in use"])
    assert f is not None and f["kind"] == "port_in_use", f
    # the same words inside another message are not uvicorn's bind error
    assert L.find_fatal(["[2026-12-07 20:40:06 TP0] retrying: [Errno -2] Name or service not known"]) is None


# 0.5.23's --enable-http-worker-reuseport path (entrypoints/http_server.py `_reserve_reuseport_socket`:
# `logger.error(error)` then `raise SystemExit(1) from error`, no traceback), rendered by running its two
# functions from the 0.5.23 wheel under SGLang's launcher format (srt/utils/common.py configure_logger:
# "[%(asctime)s] %(message)s") on CPython 3.11: --host 10.1.2.3, and --port 80 as an unprivileged user.
_REUSEPORT_ADDRESS_NOT_HERE = "[2026-12-07 21:24:57] [Errno 99] Cannot assign requested address"
_REUSEPORT_PORT_NOT_ALLOWED = "[2026-12-07 21:24:59] [Errno 13] Permission denied"


@pytest.mark.parametrize(
    "line, words",
    [
        (_REUSEPORT_ADDRESS_NOT_HERE, "(--host is not an address of this machine: give --host one of its addresses"),
        (_REUSEPORT_PORT_NOT_ALLOWED, "(port needs a privilege to bind, as every port below 1024 does"),
    ],
)
def test_the_reuseport_sockets_other_bind_errors_are_bind_failed(line, words):
    """The reuse-port path logs every bind error bare, as "[Errno 98] Address already in use" is
    (port_in_use): EADDRNOTAVAIL and EACCES were read as no fatal line, so the gate waited for a
    server that had exited. They name no address: the advice names the flag to change."""
    args = "[2026-12-07 21:24:50] server_args=ServerArgs(host='10.1.2.3', port=80, tokenizer_worker_num=4)"
    f = L.find_fatal([args, line])
    assert f is not None and f["kind"] == "bind_failed", f
    assert f["reason"].startswith(line.split("] ", 1)[1] + " ("), f
    assert words in f["reason"] and f["line"] == line, f


def test_a_bare_permission_denied_is_a_bind_error_only_on_the_launchers_own_line():
    """`[Errno 13] Permission denied` names no file only where a socket raised it; the reuse-port path
    logs it whole on the launcher's line (SGLang's prefix, no rank, no level). The same words in a
    file write's traceback or a warning, on a scheduler's line, in the level-tagged form, or without
    SGLang's prefix are not a bind error."""
    # a file write refused, warned then raised (rendered under SGLang's format as an unprivileged user)
    file_write = [
        "[2026-12-07 21:26:02] Failed to write the cache file: [Errno 13] Permission denied: '/var/cache/sglang/out.json'",
        "Traceback (most recent call last):",
        '  File "/opt/app/cache_writer.py", line 8, in <module>',
        '    open("/var/cache/sglang/out.json", "w")',
        "PermissionError: [Errno 13] Permission denied: '/var/cache/sglang/out.json'",
    ]
    f = L.find_fatal(file_write)
    assert f is not None and f["kind"] == "exception" and f["reason"] == file_write[-1], f
    assert L.find_fatal(file_write[:1]) is None
    for line in (
        "[2026-12-07 21:26:03 TP0] [Errno 13] Permission denied",  # a scheduler's (the path is the launcher's)
        "[2026-12-07 21:26:03] WARNING server_args.py:812: [Errno 13] Permission denied",  # level-tagged
        "[Errno 13] Permission denied",  # not SGLang's logger
        "[2026-12-07 21:26:03] [Errno 13] Permission denied: '/dev/shm/sglang'",  # names a file
    ):
        assert L.find_fatal([line]) is None, line


def test_the_0_5_2x_dict_form_of_server_args_is_read_and_cuts_the_launch():
    lines = load_fixture("sglang-0.5.2x_tp3_multinode_dspark_dict_server_args.log")
    args = L.parse_server_args(lines)
    assert args is not None and args["served_model_name"] == "deepseek-v4.1-flash"
    spec = L.parse_speculative(lines)
    assert (spec["algorithm"], spec["num_steps"], spec["eagle_topk"], spec["num_draft_tokens"]) == ("DSPARK", 1, 1, 6)
    old = [
        "[2026-09-11 23:00:00] server_args={'model_path': '/m', 'served_model_name': 'old'}",
        "[2026-09-11 23:00:10] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. old crash",
    ]
    cur = L.current_launch(old + lines)
    assert L.find_fatal(cur) is None and L.parse_server_args(cur)["served_model_name"] == "deepseek-v4.1-flash"
    # truncated mid-dict (a journal line cut at its limit): the complete pairs before the cut
    assert L.parse_repr_dict("'tp_size': 3, 'speculative_num_steps': 1, 'served_model_name': 'deeps") == {
        "tp_size": 3,
        "speculative_num_steps": 1,
    }


def test_plain_warnings_before_server_args_belong_to_the_launch_that_started_after_them():
    """0.5.11+ print the argument warnings as plain "[ts] msg" lines before server_args= (its
    logging.basicConfig in prepare_server_args): with the process's start time they are this
    launch's; the previous launch's last words are not, however close."""
    lines = [
        "[2026-12-03 02:57:21] server_args={'model_path': '/m', 'speculative_num_steps': 3}",
        "[2026-12-03 02:57:24] Received sigquit from a child process. It usually means the child failed.",
        "[2026-12-03 02:57:25] Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.",
        "[2026-12-03 02:57:25] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "WARNING:sglang.srt.server_args:Disabling overlap schedule since mamba no_buffer is not compatible.",
        "[2026-12-03 02:57:26] server_args={'model_path': '/m', 'speculative_algorithm': 'EAGLE', 'speculative_num_steps': 3, 'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 4}",
    ]
    start = L.parse_timestamp("2026-12-03 02:57:25") + 0.4
    cur = L.current_launch(lines, not_before=start)
    assert cur == lines[2:], cur
    spec = L.parse_speculative(cur)
    assert spec["draft_tokens_adjusted"] is True and spec["max_running_requests_reset"] is True, spec


def test_bare_warnings_before_server_args_belong_to_the_launch_after_them():
    """0.5.9/0.5.10 set up no logging before ServerArgs.__post_init__: its warnings come bare,
    through Python's last-resort handler (sgl-project/sglang PR #22926 stamps them from 0.5.11).
    Read from a log file two launches appended to, they are the second launch's."""
    lines = [
        "[2026-06-14 08:00:00] server_args=ServerArgs(model_path='/m', speculative_algorithm=None)",
        "[2026-06-14 08:00:30] The server is fired up and ready to roll!",
        "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.",
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "[2026-06-14 09:00:01] server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE', speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, max_running_requests=48)",
        "[2026-06-14 09:00:40] The server is fired up and ready to roll!",
    ]
    for not_before in (None, L.parse_timestamp("2026-06-14 09:00:00")):
        cur = L.current_launch(lines, not_before=not_before)
        assert cur == lines[2:], cur
        spec = L.parse_speculative(cur)
        assert spec["draft_tokens_adjusted"] is True and spec["max_running_requests_reset"] is True, spec
        assert len(L.find_warnings(cur)) == 2


def test_error_words_in_healthy_messages_are_not_fatal():
    lines = [
        "[2025-03-08 12:29:13 TP3] The following error message 'operation scheduled before its operands' can be ignored.",
        "[2026-01-01 00:00:00] Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.",
        '[2026-01-01 00:00:00] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 Service Unavailable',
        "The checkpoint has no Error: nothing",
    ]
    assert L.find_fatal(lines) is None


# ------------------------------------------------------------------------------------------
# This start's lines only
# ------------------------------------------------------------------------------------------


def test_current_launch_skips_previous_crash_and_keeps_prelaunch_warnings():
    lines = load_fixture("constructed_two_launches_in_one_file.log")
    cur = L.current_launch(lines)
    assert cur[0].startswith("The module name")
    assert L.find_fatal(cur) is None
    assert "KV cache is forced as chunk cache for decode server" in L.find_warnings(cur)
    assert L.parse_server_args(cur)["served_model_name"] == "/app/models/Deepseek-R1/"


def test_current_launch_real_prelaunch_block():
    lines = load_fixture("sglang-0.5.9era_tp16_prelaunch_deepseek_r1.log")
    cur = L.current_launch(lines)
    assert cur[0].startswith("The module name") and len(cur) == len([x for x in lines]) - 2  # 2 blank lines


def test_current_launch_waits_for_this_process_when_start_time_is_known():
    lines = load_fixture("constructed_two_launches_in_one_file.log")
    second_start = L.parse_timestamp("2026-02-27 14:33:03")
    cur = L.current_launch(lines, not_before=second_start)
    assert cur[0].startswith("The module name") and not any("old-model" in x for x in cur)
    # a process that started after every line of the file has not written its own yet
    assert L.current_launch(lines, not_before=second_start + 3600) == []


def test_current_launch_leaves_the_previous_launchs_last_line_even_stamped_within_the_slack():
    # Seen in `make test` under load (tests/module/test_integration_systemd.py): a launch that
    # failed wrote its last line ("Received sigquit ...", no level tag) a second before the unit
    # restarted; the next launch's "[ts] INFO server_args.py" line precedes its server_args=.
    # Within the 2 s slack by its stamp, the old line is still the old launch's.
    lines = [
        "[2026-12-03 02:57:21] server_args=ServerArgs(model_path='/models/a', speculative_num_steps=3)",
        "[2026-12-03 02:57:22 TP0] KV Cache is allocated. #tokens: 1000, K size: 3.06 GB, V size: 3.06 GB",
        "[2026-12-03 02:57:23] Received sigquit from a child process. It usually means the child failed.",
        "[2026-12-03 02:57:26] INFO server_args.py:1835: Attention backend not specified. Use flashinfer backend by default.",
        "[2026-12-03 02:57:26] server_args=ServerArgs(model_path='/models/a', speculative_num_steps=None)",
        "[2026-12-03 02:57:29] The server is fired up and ready to roll!",
    ]
    start = L.parse_timestamp("2026-12-03 02:57:25")
    for cur in (L.current_launch(lines, not_before=start), L.current_launch(lines)):
        assert cur == lines[3:], cur
        assert L.find_fatal(cur) is None


def test_current_launch_without_server_args_is_the_whole_text():
    lines = load_fixture("sglang-dev-0.5.10_tp2_qwen35_9b_mamba.log")
    assert L.current_launch(lines) == lines


# ------------------------------------------------------------------------------------------
# Redaction and summary
# ------------------------------------------------------------------------------------------


def test_redact_forms():
    text = (
        "server_args=ServerArgs(api_key='sk-1', admin_api_key=\"adm-secret\", x=1) --api-key sk-2 "
        "Authorization: Bearer sk-3 other sk-4"
    )
    out = L.redact(text, ["sk-4"])
    for secret in ("sk-1", "adm-secret", "sk-2", "sk-3", "sk-4"):
        assert secret not in out
    assert f"api_key='{L.MASK}'" in out and "x=1" in out
    assert L.redact("api_key=None", []) == "api_key=None"


def test_summarize_every_fixture_without_crashing():
    for path in sorted(Path(__file__).parent.glob("fixtures/*.log")):
        s = L.summarize(load_fixture(path.name))
        assert set(s) >= {"capacity", "kv_pools", "mamba_cache", "speculative", "warnings", "fatal"}


def test_truncated_everything_is_skipped_not_fatal():
    lines = load_fixture("constructed_0.5.9_tp1_mtp_ms_timestamps.log")
    # cut every line at every 37th character: no exception, partial results
    for cut in range(5, 200, 37):
        s = L.summarize([ln[:cut] for ln in lines])
        assert isinstance(s["kv_pools"], list)


def test_the_older_handled_traceback_undoes_only_itself():
    """The bare traceback is forgiven only when the Responses API's warning follows it at once: a
    crash's bare traceback before it, or another SGLang line between, stays fatal."""
    handled = load_fixture("constructed_0.5.2_responses_api_print_exc.log")
    start = next(i for i, ln in enumerate(handled) if ln.startswith("Traceback"))
    crash = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/sglang/srt/entrypoints/http_server.py", line 9, in lifespan',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[2025-10-08 10:00:41] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(handled[:start] + crash + handled[start:])
    assert f is not None and f["reason"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    end = next(i for i, ln in enumerate(handled) if "Can not initialize OpenAIServingResponses" in ln)
    between = handled[:end] + ["[2025-10-08 10:00:41] Received sigquit from a child process."] + handled[end:]
    f = L.find_fatal(between)
    assert f is not None and f["reason"] == "ModuleNotFoundError: No module named 'openai_harmony'"


def test_an_exception_named_by_its_module_is_the_reason_inside_a_traceback():
    """Triton's shared-memory error (sgl-project/sglang #2384 on MI300, #8513) is no ...Error: its
    line was not read as the exception, and the gate reported only that the scheduler died."""
    lines = [
        "[2024-12-07 02:54:42 TP5] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 631, in init_cuda_graphs',
        '  File "/opt/conda/envs/py_3.9/lib/python3.9/site-packages/triton/compiler/compiler.py", line 385, in _init_handles',
        '    raise OutOfResources(self.metadata.shared, max_shared, "shared memory")',
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 65536. "
        "Reducing block sizes or `num_stages` may help.",
        "",
        "[2024-12-07 02:54:42] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "exception" and not f["generic"]
    assert f["reason"].startswith("triton.runtime.errors.OutOfResources: out of resource: shared memory")
    # outside a traceback such a line is prose, not an exception
    assert L.find_fatal(["torch.distributed.Backend: nccl selected for the process group"]) is None


def test_a_kv_pool_line_with_sizes_only_is_read():
    """0.4.0-0.4.2 print "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB." without #tokens."""
    lines = load_fixture("sglang-0.4.1_tp1_kv_sizes_only.log")
    assert L.parse_kv_pools(lines) == [
        {
            "rank": "TP0",
            "label": None,
            "layout": "mha",
            "dtype": None,
            "tokens": None,
            "k_size_gb": 27.13,
            "v_size_gb": 27.13,
            "kv_size_gb": None,
            "total_gb": 54.26,
            "upper_bound": False,
        }
    ]
    cap = L.parse_capacity(lines)
    assert cap is not None and cap["max_total_num_tokens"] == 444500 and cap["max_running_requests"] == 2049
    assert L.parse_kv_pools(["[2025-01-23 19:35:20 TP0] KV Cache is allocated."]) == []


def test_deaths_that_0_5_10_and_later_announce_without_a_traceback_are_fatal():
    """0.5.10+'s subprocess monitor (PR #18582) and the tokenizer manager's SIGQUIT handler say a
    scheduler died (a kill -9 by the OOM killer prints no traceback), and the watchdog says why it
    was killed; none of them was read as fatal (lines as a real run printed them, sglang issue
    threads and SGLang's own watchdog test)."""
    killed = [
        "[2026-11-02 08:14:26] Subprocess scheduler_0 (pid=1225) crashed with exit code -9. Triggering cleanup...",
        "[2026-11-02 08:14:26] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
    ]
    f = L.find_fatal(killed)
    assert f is not None and f["kind"] == "subprocess_crashed" and f["generic"] is True, f
    assert "exit code -9" in f["reason"] and "(killed by signal 9, SIGKILL" in f["reason"], f
    watchdog = [
        "[2026-11-02 08:14:20 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        killed[1],
    ]
    f = L.find_fatal(watchdog)
    assert f is not None and f["kind"] == "watchdog_timeout", f
    assert f["reason"].startswith("Scheduler watchdog timeout (self.watchdog_timeout=300")
    old = ["[2025-06-01 10:00:00 TP0] Watchdog timeout (self.watchdog_timeout=300)"]
    assert L.find_fatal(old)["kind"] == "watchdog_timeout"
    # a soft watchdog (--soft-watchdog-timeout; every tokenizer/detokenizer watchdog) only logs: the
    # server goes on, and a slow weight load under it is a healthy start
    soft = [
        "[2026-11-02 08:14:20 TP0] Scheduler watchdog timeout (self.watchdog_timeout=60, self.soft=True)",
        "[2026-11-02 08:14:20] TokenizerManager watchdog timeout (self.watchdog_timeout=60, self.soft=True)",
    ]
    assert L.find_fatal(soft) is None
    assert L.find_fatal([killed[1]])["kind"] == "child_failed"


def test_a_worker_nodes_scheduler_that_terminated_is_fatal():
    """A worker node (--node-rank >= 1) serves nothing: its launcher joins its schedulers and says
    when one ended, "Scheduler or DataParallelController {proc.pid} terminated with {proc.exitcode}"
    (sgl-project/sglang python/sglang/srt/entrypoints/engine.py, the same f-string in the 0.4.6.post5,
    0.4.10, 0.5.2, 0.5.4, 0.5.6 and 0.5.9 wheels, split over two literals in 0.5.10-0.5.23). A
    scheduler killed by the OOM killer prints nothing else, and the launcher goes on joining the
    next one, so this line is the only word of the death."""
    joined = "[2026-03-02 10:00:00 TP8] Init torch distributed ends. elapsed=3.21 s, mem usage=0.51 GB"
    killed = "[2026-03-02 10:05:00] Scheduler or DataParallelController 4242 terminated with -9"
    f = L.find_fatal([joined, killed])
    assert f is not None and f["kind"] == "subprocess_crashed" and f["generic"] is True, f
    assert f["reason"].startswith(killed[22:]) and "(killed by signal 9, SIGKILL" in f["reason"], f
    # a traceback before it names the cause, as for the other announcements of a death
    nccl = [
        "[2026-03-02 10:04:59 TP9] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 3186, in run_scheduler_process',
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
        "remote process exited or there was a network error, NCCL version 2.27.3",
        "[2026-03-02 10:05:00] Scheduler or DataParallelController 4243 terminated with 1",
    ]
    f = L.find_fatal([joined, *nccl])
    assert f is not None and f["kind"] == "exception", f
    assert f["reason"].startswith("torch.distributed.DistBackendError: NCCL error"), f
    # an orderly exit is no failure
    orderly = "[2026-03-02 10:05:00] Scheduler or DataParallelController 4242 terminated with 0"
    assert L.find_fatal([joined, orderly]) is None


def test_a_bare_exception_is_the_reason_and_a_graph_failure_outranks_the_oom_it_chains():
    """SGLang raises bare `Exception(...)` ("Capture cuda graph failed: ..."), wrapping the CUDA
    out-of-memory error that came first in the chained traceback (sglang issues #4205, #6342): the
    graph capture is the reason, since it needs a lower --mem-fraction-static where a start-up OOM
    needs a higher one."""
    chained = [
        "[2025-03-10 09:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 250, in __init__',
        "    self.capture()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/sglang/srt/managers/scheduler.py", line 2000, in run_scheduler_process',
        "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    f = L.find_fatal(chained)
    assert f is not None and f["kind"] == "cuda_graph" and f["reason"].startswith("Exception: Capture cuda graph"), f
    prefill = [
        chained[0],
        "Exception: Capture prefill CUDA graph failed: Triton Error [CUDA]: an illegal memory access",
    ]
    assert L.find_fatal(prefill)["kind"] == "cuda_graph"
    bare = [
        "Traceback (most recent call last):",
        "Exception: Setting SGLANG_LOGGING_CONFIG_PATH from env does not exist!",
    ]
    f = L.find_fatal(bare)
    assert f["kind"] == "exception" and f["reason"].startswith("Exception: Setting SGLANG_LOGGING_CONFIG_PATH"), f
    oom = ["Traceback (most recent call last):", "RuntimeError: CUDA error: out of memory"]
    assert L.find_fatal(oom)["kind"] == "out_of_memory"


@pytest.mark.parametrize(
    "prefix",
    [
        "deepseek-r1-1  | ",  # docker compose (sglang issue #4968)
        "Sun 2026-06-28 15:16:45 CEST gpu1 python3[1234]: ",  # journalctl -o short-full
        "[  123.456789] gpu1 python3[1234]: ",  # journalctl -o short-monotonic
        "1719580605.123456 gpu1 python3[1234]: ",  # journalctl -o short-unix
        "[pod/sglang-0/server] ",  # kubectl logs --prefix
        # journalctl --no-hostname (a unit's log pasted in sgl-project/sglang#4534)
        "Mar 18 11:23:46 sgl-router-janus-pro-7b[931930]: ",
        # Google Cloud Logging's severity and stamp (GKE, https://github.com/sgl-project/sglang/issues/28702)
        "ERROR 2026-06-15T14:10:59.392125190Z ",
        # a bracketed UTC stamp (https://github.com/sgl-project/sglang/issues/12827)
        "[2025-11-06T02:08:28.503Z] ",
        # a launcher relaying the server's lines through Python's logging (allenai/olmocr's pipeline,
        # https://github.com/allenai/olmocr/issues/105)
        "2025-03-08 02:04:48,694 - __main__ - INFO - ",
        # Ray's driver printing an actor's output, with and without another node's address
        # (https://github.com/THUDM/slime/issues/1314, volcengine/verl's "(WorkerDict pid=616, ip=192.168.149.159) ")
        "(SGLangEngine pid=23902) ",
        "(WorkerDict pid=616, ip=192.168.149.159) ",
        # mpirun --tag-output, with --timestamp-output (https://github.com/sgl-project/sglang/issues/3065)
        "[1,1]<stderr>:",
        "Thu Jan 23 11:55:50 2025[1,1]<stderr>:",
        # a CRI container log file (kubernetes/kubernetes pkg/kubelet/kuberuntime/logs/logs.go parseCRILog;
        # the same shape in a vLLM pod's log, ROCm/aiter issue #5192)
        "2026-08-31T17:43:36.67Z stderr F ",
        # Grafana's text export of a Loki query (grafana/grafana inspector/utils/download.ts
        # downloadLogsModelAsTxt; https://github.com/sgl-project/sglang/issues/25887)
        "1779264164797\t2026-05-20T08:02:44.797Z\t",
    ],
)
def test_collector_prefixes_do_not_hide_a_fatal_line(prefix):
    segv = L.find_fatal([prefix + "Fatal Python error: Segmentation fault"])
    assert segv is not None and segv["kind"] == "native_crash", segv
    f = L.find_fatal(
        [prefix + "Traceback (most recent call last):", prefix + "ValueError: The memory capacity is unbalanced."]
    )
    assert (
        f is not None and f["kind"] == "exception" and f["reason"] == "ValueError: The memory capacity is unbalanced."
    )


def test_a_traceback_copied_from_cloud_logging_names_its_exception():
    """Every line of a GKE server's log as copied from Google Cloud Logging starts with the entry's
    severity and stamp, the traceback's unindented (real: https://github.com/sgl-project/sglang/issues/28702).
    One rank's AssertionError ends the excerpt's first line: the reason, not TP7's "Scheduler hit an
    exception" that follows it."""
    lines = load_fixture("sglang-0.5.1x_tp8_cloud_logging_severity_prefix.log")
    f = L.find_fatal(lines)
    assert f is not None and (f["kind"], f["index"], f["generic"]) == ("exception", 0, False), f
    assert f["reason"] == "AssertionError: Committed KV cache already freed (self.kv_committed_len=1)"
    frames = [ln.message for ln in L.parse_lines(lines) if not ln.sglang]
    assert (
        frames[1]
        == 'File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2704, in run_scheduler_process'
    )


def test_a_traceback_exported_from_grafana_names_its_exception():
    """Grafana's "Download logs" (txt) puts the row's epoch milliseconds and ISO stamp, tab-separated,
    before each Loki entry, and a container's entry keeps its newline, so a blank line follows each
    (real: a GLM-5.1 server on H100s, --pp-size 2 --attn-cp-size 8, sglang 0.5.10, pasted in
    https://github.com/sgl-project/sglang/issues/25887, read from a copy of that issue committed to a
    public repository of issue snapshots). The RuntimeError that ends TP7's traceback is the reason, not the generic
    "Scheduler hit an exception"; the ranked lines behind the prefix still parse."""
    lines = load_fixture("sglang-0.5.10_pp2_attn_cp8_grafana_txt_export.log")
    f = L.find_fatal(lines)
    assert f is not None and (f["kind"], f["generic"]) == ("exception", False), f
    assert f["reason"] == (
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (8) at non-singleton dimension 0"
    )
    parsed = L.parse_lines(lines)
    frames = [ln.message for ln in parsed if not ln.sglang]
    assert frames[0] == (
        'File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 3616, in run_scheduler_process'
    )
    rows = L.parse_prefill_batches(lines)
    assert [(r["rank"], r["new_token"], r["cached_token"]) for r in rows] == [("PP0 ATTN_CP0 TP0", 128, 57856)]


def test_a_bracketed_utc_stamp_is_a_collectors_not_sglangs():
    """A collector's "[2025-11-06T02:08:28.503Z] " before SGLang's "[2025-11-06 02:08:28] " and before each
    traceback line (real: https://github.com/sgl-project/sglang/issues/12827): SGLang's lines keep their own
    prefix, the traceback's frames are read as frames."""
    parsed = L.parse_lines(load_fixture("sglang-0.5.4era_tp1_bracketed_utc_stamp.log"))
    assert [ln.timestamp for ln in parsed if ln.sglang] == [
        "2025-11-06 02:08:27",
        "2025-11-06 02:08:28",
        "2025-11-06 02:10:00",
    ]
    frames = [ln.message for ln in parsed if not ln.sglang and "sglang/srt" in ln.message]
    assert len(frames) == 3 and all(m.startswith('File "/sgl-workspace/') for m in frames), frames
    f = L.find_fatal(parsed)
    assert f is not None and f["kind"] == "scheduler_exception" and f["generic"], f


def test_a_launchers_python_logging_prefix_is_a_collectors_not_sglangs():
    """allenai/olmocr relays each line of its SGLang server through Python's logging, so every line,
    SGLang's and the traceback's, starts with "2025-03-08 02:04:48,693 - __main__ - INFO - " (real:
    https://github.com/allenai/olmocr/issues/105). SGLang's line keeps its own prefix; the frames are
    read as frames, so the exception line that ends such a traceback is the reason, not the
    "Scheduler hit an exception" before it."""
    lines = load_fixture("sglang-0.4.x_tp1_olmocr_python_logging_prefix.log")
    parsed = L.parse_lines(lines)
    assert [(ln.timestamp, ln.ranks) for ln in parsed if ln.sglang] == [("2025-03-08 02:04:48", {"TP": 0})]
    frames = [ln.message for ln in parsed if "sglang/srt" in ln.message and not ln.sglang]
    assert len(frames) == 3 and all(m.startswith('File "/home/xx/anaconda3/') for m in frames), frames
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "scheduler_exception" and f["generic"], f
    # the exception line such a traceback ends with, in the same relayed form (constructed: the stored
    # copy of the issue ends before it)
    ended = [*lines, "2025-03-08 02:04:48,694 - __main__ - INFO - ValueError: Unsupported architectures"]
    f = L.find_fatal(ended)
    assert f is not None and (f["kind"], f["reason"]) == ("exception", "ValueError: Unsupported architectures"), f


def test_ray_actor_output_names_its_exception():
    """SGLang engines run as Ray actors (THUDM/slime, volcengine/verl): Ray's driver puts "(SGLangEngine
    pid=23902) " before each line and " [repeated 2x across cluster]" after the lines several actors
    printed alike (real: https://github.com/THUDM/slime/issues/1314, a flashinfer JIT build that failed in
    the first graph capture). Neither is the line's: the ninja CalledProcessError is the reason, not the
    generic "Scheduler hit an exception", and no reason or message ends in Ray's suffix."""
    lines = load_fixture("sglang-0.5.xera_tp2_ray_actor_prefix_flashinfer_ninja.log")
    parsed = L.parse_lines(lines)
    assert [(ln.timestamp, ln.ranks) for ln in parsed if ln.sglang] == [
        ("2026-01-04 01:42:54", {"TP": 0}),
        ("2026-01-04 01:42:55", {"TP": 1}),
    ]
    assert parsed[2].message == "Scheduler hit an exception: Traceback (most recent call last):"
    assert parsed[3].message.startswith('File "/usr/local/app/micromamba/envs/slime/') and parsed[3].message.endswith(
        "in run_ninja"
    )
    f = L.find_fatal(lines)
    assert f is not None and (f["kind"], f["generic"]) == ("exception", False), f
    assert f["reason"].startswith("subprocess.CalledProcessError: Command '['ninja', '-v', '-C', ")
    assert f["reason"].endswith("returned non-zero exit status 1."), f
    # the first deduplicated line carries the one-time note after the count (its words: ray_logging/__init__.py _warn_once)
    noted = L.parse_line(
        "(WorkerDict pid=295845) after load model cls [repeated 3x across cluster] (Ray deduplicates logs by "
        "default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see https://docs.ray.io/en/master/"
        "ray-observability/user-guides/configure-logging.html#log-deduplication for more options.)"
    )
    assert noted.message == "after load model cls"


def test_an_exception_whose_message_starts_below_it_is_named_by_that_message():
    """sgl_kernel's ImportError puts its whole message below "ImportError: ", then lists each import
    attempt's own error (real: https://github.com/sgl-project/sglang/pull/13948, an sm100 build that does not
    match torch on an SM86 runner). The bare "ImportError:" names no cause; the reason is the message's first
    line and the listed error, an undefined symbol: a torch/sgl-kernel mismatch to fix."""
    f = L.find_fatal(load_fixture("sglang-0.5.5era_sm86_sgl_kernel_common_ops_import_error.log"))
    assert f is not None and (f["kind"], f["index"], f["generic"]) == ("exception", 0, False), f
    assert f["reason"] == (
        "ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library! (ImportError: "
        "/usr/local/lib/python3.10/dist-packages/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: "
        "_ZNK3c106SymInt6sym_neERKS0_)"
    ), f
    # a message that lists no error keeps its first line; one that runs on no line stays as it is
    bare = [
        "Traceback (most recent call last):",
        "ImportError: ",
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!",
    ]
    assert L.find_fatal(bare)["reason"] == "ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!"
    assert L.find_fatal(["Traceback (most recent call last):", "AssertionError"])["reason"] == "AssertionError"


def test_mpiruns_tagged_output_is_a_collectors_not_sglangs():
    """A server started with mpirun --tag-output --timestamp-output: every line starts with the time and
    "[job,rank]<stderr>:" (real: https://github.com/sgl-project/sglang/issues/3065, 0.4.1.post7): the
    traceback's lines behind it are read as frames and code, as without it."""
    parsed = L.parse_lines(load_fixture("sglang-0.4.1.post7_mpirun_tag_output.log"))
    assert [ln.message for ln in parsed] == [
        "scheduler.event_loop_overlap()",
        'File "/usr/local/lib/python3.10/dist-packages/torch/utils/_contextlib.py", line 116, in decorate_context',
        "return func(*args, **kwargs)",
        'File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 489, in event_loop_overlap',
    ]


# ROCm's GPU page-fault line, as real logs print it: alone (iree-org/wave issue #466, `sglang.launch_server
# --attention-backend wave` at start-up), elided by its reporter (sgl-project/sglang issue #39517), or glued to a
# progress bar with the old runtime's order (ROCm/legacy-rocm-build issue #4021, an MI300X)
_HSA_FAULTS = [
    (
        "Memory access fault by GPU node-2 (Agent handle: 0x5a0d7202eab0) on address 0x7d35a0c00000. Reason: Unknown.",
        "Memory access fault by GPU node-2 (Agent handle: 0x5a0d7202eab0) on address 0x7d35a0c00000. Reason: Unknown.",
    ),
    (
        "Memory access fault by GPU node-1 (Agent handle: ...) on address 0x7a41d2c11000. Reason: Unknown.",
        "Memory access fault by GPU node-1 (Agent handle: ...) on address 0x7a41d2c11000. Reason: Unknown.",
    ),
    (
        " 33%|\u2588\u2588\u2588Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0) on address 0x709843600000."
        " Reason: Write access to a read-only page.:54:01, 26.24s/it]",
        "Memory access fault by GPU node-3 (Agent handle: 0x5a5c587a51c0) on address 0x709843600000."
        " Reason: Write access to a read-only page.",
    ),
]


@pytest.mark.parametrize("line, fault", _HSA_FAULTS)
def test_rocms_gpu_memory_access_fault_is_a_native_crash_named_by_its_line(line, fault):
    """ROCm's runtime prints "Memory access fault by GPU node-N ... Reason: ..." and aborts the process
    (ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp VMFaultHandler: fprintf, then
    std::abort()): no Python traceback, no SGLang line says why. It is the reason, before faulthandler's
    "Fatal Python error: Aborted" and the launcher's exit code -6 that follow it (sgl-project/sglang
    issues #23784, #37648); the bar in front of it is not."""
    f = L.find_fatal([line])
    assert f is not None and (f["kind"], f["reason"], f["generic"]) == ("native_crash", fault, False), f
    # with what follows it in an SGLang server (constructed from those issues' lines)
    after = [
        "[2026-09-15 10:02:11 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=31.20 GB",
        line,
        "Fatal Python error: Aborted",
        "",
        "Thread 0x00007f0d304e4000 (most recent call first):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/speculative/eagle_worker.py", line 701 in _draft_preprocess_decode',
        "[2026-09-15 10:02:12] Subprocess scheduler_4 (pid=1225) crashed with exit code -6. Triggering cleanup...",
    ]
    f = L.find_fatal(after)
    assert f is not None and (f["kind"], f["reason"], f["index"]) == ("native_crash", fault, 1), f


def test_rocms_fault_in_a_real_report_is_fatal():
    f = L.find_fatal(load_fixture("sglang-0.5.19_rocm_mi300x_hsa_memory_access_fault.log"))
    assert f is not None and f["kind"] == "native_crash", f
    assert (
        f["reason"]
        == "Memory access fault by GPU node-1 (Agent handle: ...) on address 0x7a41d2c11000. Reason: Unknown."
    )


def test_terminal_colours_are_not_part_of_a_line():
    ln = L.parse_line("[2026-06-28 15:16:45] \x1b[33mWARNING\x1b[0m:  Invalid HTTP request received.")
    assert ln is not None and ln.uvicorn and ln.level == "WARNING" and ln.message == "Invalid HTTP request received."


def test_a_hugging_face_retry_is_not_fatal_and_a_crash_after_it_is():
    """SGLang's `retry()` prints each failed try's traceback and then "retry() failed once"; its
    caller at start-up catches the last ("Failed to load hf_quant_config.json for model ..."): a
    Hugging Face 503 on a model given by repo id (real docs-CI output) failed a server that started.
    A crash after it is still fatal, and a traceback whose next line is anything else still counts."""
    lines = load_fixture("sglang-0.5.1x_docs-ci_hf_retry_503.log")
    assert L.find_fatal(lines) is None
    crash = [
        "[2026-04-14 15:03:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2755, in run_scheduler_process',
        "RuntimeError: CUDA error: out of memory",
        "[2026-04-14 15:03:20] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(lines + crash)
    assert f is not None and f["kind"] == "out_of_memory", f
    # the same retry's line without SGLang's prefix (a process whose logger has no format), as in
    # the docs CI's vision page: a read timeout, then the next try
    timeout = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/httpx/_transports/default.py", line 77, in map_httpcore_exceptions',
        "    raise mapped_exc(message) from exc",
        "httpx.ReadTimeout: The read operation timed out",
        "retry() failed once (0th try, maximum 2 retries). Will delay 0.77s and retry. Error: The read operation timed out",
    ]
    assert L.find_fatal(timeout) is None
    # a bare traceback followed by another line is not forgiven
    f = L.find_fatal(timeout[:4] + ["[2026-04-14 15:03:20] Load weight begin. avail mem=78.50 GB", timeout[4]])
    assert f is not None and f["reason"] == "httpx.ReadTimeout: The read operation timed out", f


def test_nvlink_detection_failure_is_handled():
    """`is_full_nvlink` logs "NVLink detection failed. This is normal if your machine has no NVLink
    equipped." with logger.exception (its traceback after it) and goes on without the custom
    all-reduce; ROCm's "AMD 1 hop XGMI detection failed." likewise (custom_all_reduce_utils.py,
    0.5.9-0.5.23). Constructed from those format strings: no real log of it was found."""
    for first in (
        "[2026-04-14 15:03:30 TP0] NVLink detection failed. This is normal if your machine has no NVLink equipped.",
        "[2026-04-14 15:03:30 TP1] AMD 1 hop XGMI detection failed.",
    ):
        lines = [
            first,
            "Traceback (most recent call last):",
            '  File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py", '
            "line 381, in is_full_nvlink",
            "pynvml.NVMLError_NotSupported: Not Supported",
            "[2026-04-14 15:03:31 TP0] Load weight begin. avail mem=78.50 GB",
        ]
        assert L.find_fatal(lines) is None, first
        f = L.find_fatal([*lines, "[2026-04-14 15:03:40 TP0] Scheduler hit an exception: RuntimeError: boom"])
        assert f is not None


@pytest.mark.parametrize(
    "line",
    [
        "[2026-10-30 10:00:00 TP8] Init torch distributed ends. elapsed=0.54 s, mem usage=0.50 GB",  # <= 0.5.20
        "[2026-10-30 10:00:01 TP8] Init parallel ends. elapsed=3.21 s",  # 0.5.21+: bootstrap.py
    ],
)
def test_a_worker_joined_line_of_each_release(line):
    assert L.is_joined_line(L.parse_line(line))
    assert not L.is_joined_line(L.parse_line("[2026-10-30 10:00:00 TP8] Init parallel begin."))


@pytest.mark.parametrize(
    "head",
    [
        "Capture cuda graph failed",  # 0.5.9-0.5.23 target
        "Capture frozen-KV MTP cuda graph failed",  # 0.5.12+ frozen_kv_mtp_cuda_graph_runner.py
        "Capture single-CG draft extend failed",  # 0.5.17+ multi_layer_eagle_draft_extend_cuda_graph_runner.py
    ],
)
def test_a_draft_runners_graph_capture_failure_is_a_graph_failure(head):
    """Constructed from the wheels' format strings (`raise Exception(f"{head}: {e}\\n{hint}")` over a
    torch OOM): the draft runners' wording was read as a plain out-of-memory error, which asks for
    the opposite --mem-fraction-static change."""
    lines = [
        "[2026-10-30 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 2180, in init_device_graphs',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.80 GiB",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        f"Exception: {head}: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.80 GiB",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
        "[2026-10-30 10:00:05] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "cuda_graph", f


def test_the_custom_allreduce_warning_of_each_release():
    """0.5.9 "Custom allreduce is disabled ..."; 0.5.10+ f"{cls_name} is disabled ..." with
    CustomAllreduce or CustomAllReduceV2 (custom_all_reduce_utils.py): the new wording was dropped."""
    text = (
        "is disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, "
        "specify disable_custom_all_reduce=True explicitly."
    )
    for name in ("Custom allreduce", "CustomAllreduce", "CustomAllReduceV2"):
        assert L.find_warnings([f"[2026-10-30 10:00:02 TP0] {name} {text}"]) == [f"{name} {text}"]


@pytest.mark.parametrize(
    "last",
    [
        # [v0.5.23] mem_cache/kv_cache_configurator.py:3152-3160 (0.5.20 :2298, 0.5.21 :2327), filled in
        "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=3, mamba_ratio=5, resulting max_num_reqs=0. Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, or (3) use GPUs with more memory.",
        # [v0.5.23] model_executor/pool_configurator.py:1025-1031 (0.5.20 :892, 0.5.21 :913)
        "RuntimeError: SWA pool cap (131072 tokens, 7.50 GiB) leaves no room for the full KV pool within the "
        "available 6.90 GiB. Reduce --max-running-requests, lower SGLANG_SWA_EVICTION_INTERVAL, or increase "
        "--mem-fraction-static.",
        # its DSV4 form, :1679
        "RuntimeError: The DSV4 SWA pool cap (65536 tokens, 4.00 GB) leaves no room for the full KV pool within "
        "the available 3.20 GB. Reduce --max-running-requests, lower --swa-prefix-tails or "
        "SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static.",
        # 0.5.9 managers/tp_worker.py: `assert self.max_running_requests > 0, "max_running_request is zero"`
        "AssertionError: max_running_request is zero",
    ],
)
def test_the_other_pool_sizing_failures_are_kv_pool_oom(last):
    """A start-up pool that holds no request, whatever pool it is, is fixed with more memory for
    it: kv_pool_oom, as its siblings, not a generic exception."""
    lines = [
        "[2026-10-02 09:12:44] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/mem_cache/kv_cache_configurator.py", line 3152, in configure',
        last,
        "[2026-10-02 09:12:44] Received sigquit from a child process. It usually means the child failed.",
    ]
    f = L.find_fatal(lines)
    assert f["kind"] == "kv_pool_oom", f
    assert f["reason"].startswith(last.split(" ", 1)[0]), f


def test_rocms_invalid_device_function_is_kernel_image():
    """ROCm's "no code for this GPU" (hipErrorInvalidDeviceFunction) is what CUDA's "no kernel image
    is available" is: an image built for other GPUs (real: sgl-project/sglang#5775, an MI100)."""
    f = L.find_fatal(load_fixture("sglang-0.4.5era_rocm_mi100_invalid_device_function.log"))
    assert f is not None and f["kind"] == "kernel_image", f
    assert f["reason"] == "RuntimeError: HIP error: invalid device function", f


def test_rocms_hip_error_out_of_memory_is_out_of_memory():
    """ROCm builds of torch spell its runtime errors `HIP error: ...` (sgl-project/sglang#5775:
    "RuntimeError: HIP error: invalid device function" on an MI100): the out-of-memory one is read
    as NVIDIA's `CUDA error: out of memory` is."""
    lines = ["Traceback (most recent call last):", "RuntimeError: HIP error: out of memory"]
    assert L.find_fatal(lines)["kind"] == "out_of_memory"


@pytest.mark.parametrize(
    "line,launch",
    [
        ("[2026-06-28 15:16:45] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1)", True),
        ("[2026-10-30 11:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'tp_size': 1}", True),  # 0.5.2x
        # traceback frames that pass server_args on (Python prints a call's first line): 0.5.9
        # srt/managers/scheduler.py:702, 0.5.16 srt/model_executor/model_runner.py:959, 0.5.23
        # srt/distributed/bootstrap.py:343
        ("    self.tree_cache = HiRadixCache(params=params, server_args=server_args)", False),
        ("    load_kv_cache_scales(model=self.model, server_args=self.server_args)", False),
        ("    initialize_dp_attention(server_args=server_args)", False),
    ],
)
def test_a_launch_line_is_the_argument_list_not_a_frame_passing_it_on(line, launch):
    assert L.is_launch_line(L.parse_line(line)) is launch
    lines = load_fixture("constructed_0.5.9_hicache_traceback_server_args_frame.log")
    # the file's one launch starts at its server_args line, whatever its frames pass on
    assert L.current_launch(lines) == lines


def test_the_warmups_own_freeze_gc_timeout_is_handled():
    """0.5.20-0.5.23 log `post-warmup freeze_gc failed` with its traceback (requests' ReadTimeout on
    the warm-up's own POST /freeze_gc) just before the ready line, and the server goes on
    (http_server.py _freeze_gc_after_server_warmup). Constructed from that call: no real log found."""
    lines = [
        "[2026-10-30 10:00:59] post-warmup freeze_gc failed",
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/entrypoints/http_server.py", line 2561, in _freeze_gc_after_server_warmup',
        "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=30000): Read timed out. "
        "(read timeout=10)",
    ]
    assert L.find_fatal(lines) is None
    assert L.find_fatal([*lines, "[2026-10-30 10:00:59] The server is fired up and ready to roll!"]) is None
    crash = L.find_fatal([*lines, "[2026-10-30 10:01:10 TP0] Scheduler hit an exception: ValueError: boom"])
    assert crash is not None and crash["reason"].endswith("ValueError: boom"), crash


@pytest.mark.parametrize(
    ("last", "kind"),
    [
        # cuBLAS's workspace not allocated: SGLang's own warm-up probe reads it as out of memory
        # (0.5.23 multimodal_gen/runtime/server_warmup.py _OUT_OF_MEMORY_MARKERS)
        ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "out_of_memory"),
        # the scheduler's assert beside "max_running_request is zero" (managers/tp_worker.py 0.4.10-0.5.23)
        ("AssertionError: Memory pool size is too small", "kv_pool_oom"),
    ],
)
def test_memory_failures_sglang_words_its_own_way_are_memory_failures(last, kind):
    """Both are memory failures, which the tuner's capacity rule reads as such (a deeper draft,
    which needs more memory, is not deployed after one): a generic `exception` hid that."""
    from tuner.decide.capacity import is_capacity_failure

    lines = [
        "[2026-10-30 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/managers/tp_worker.py", line 425, in __init__',
        last,
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == kind and f["reason"] == last, f
    assert is_capacity_failure(f["reason"])


@pytest.mark.parametrize(
    "lines",
    [
        # torch's TCPStore on the dist-init port (real: Ascend/sglang issue #625, an A3 NPU server)
        load_fixture("sglang-0.5.11era_npu_a3_dist_init_eaddrinuse.log"),
        # its pre-libuv spelling, after the per-address warnings it prints first (which alone are not fatal)
        [
            "[W socket.cpp:401] [c10d] The server socket has failed to listen on [::]:47531 (errno: 98 - Address already in use).",
            "RuntimeError: The server socket has failed to listen on any local network address. The server socket has "
            "failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind "
            "to 0.0.0.0:29500 (errno: 98 - Address already in use).",
        ],
        # a ZMQ port SGLang binds (the title of sgl-project/sglang issue #9396)
        ["Traceback (most recent call last):", "zmq.error.ZMQError: Address already in use"],
    ],
)
def test_a_taken_dist_init_or_zmq_port_is_port_in_use(lines):
    """Every port a start binds, not only uvicorn's and the ones SGLang checks first: the fix is the
    same (free the port or pick another), so the kind is the same."""
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "port_in_use" and f["reason"] == lines[-1], f
    # the per-address warning alone (torch goes on to the next address) is not a fatal line
    warning = "[W socket.cpp:401] [c10d] The server socket has failed to listen on [::]:47531 (errno: 98 - Address already in use)."
    assert L.find_fatal([warning]) is None


def test_sglangs_own_port_check_is_port_in_use():
    """With DP attention or --dist-init-addr SGLang checks the ports it reserves before its
    server_args line (PortArgs.init_new: logger.exception("Port is already in use. ..."), then
    wait_port_available's ValueError; 0.5.9 srt/utils/common.py, 0.5.23 srt/utils/network.py)."""
    lines = [
        "[2026-01-01 10:00:20] Port is already in use. dist_init_port=5000 port_base=5001 detokenizer_port=5002",
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/utils/network.py", line 103, in wait_port_available',
        "ValueError: port_base at 5001 is not available in 30 seconds. port_base is used by a process already.",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "port_in_use", f
    assert f["reason"].startswith("ValueError: port_base at 5001 is not available in 30 seconds."), f


def test_a_wrappers_stamp_and_level_before_sglangs_prefix_are_not_sglangs():
    """A relay through Python logging's "[%(asctime)s] %(levelname)s: %(message)s" puts its own stamp
    and level before SGLang's "[%(asctime)s{ TPn}] %(message)s" (docs/reference/sglang.md §1.1). CONSTRUCTED
    from those two formats (no public log relayed so was found): the inner prefix is SGLang's, so each
    rank's pool is keyed by its rank, the line is not uvicorn's, and the prefill line is read."""
    relay = "[2025-04-03 12:05:45,155] INFO: "
    lines = [
        relay + "[2025-04-03 12:05:45 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB",
        relay + "[2025-04-03 12:05:45 TP1] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB",
        relay + "[2025-04-03 12:06:01 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, "
        "token usage: 0.00, #running-req: 0, #queue-req: 0",
    ]
    ln = L.parse_line(lines[1])
    assert ln is not None and (ln.timestamp, ln.ranks, ln.uvicorn) == ("2025-04-03 12:05:45", {"TP": 1}, False)
    assert ln.message.startswith("KV Cache is allocated.")
    pools = L.parse_kv_pools(lines)
    assert [(p["rank"], p["tokens"]) for p in pools] == [("TP0", 1000)], pools
    (row,) = L.parse_prefill_batches(lines)
    assert (row["new_token"], row["rank"]) == (7, "TP0")
    # SGLang's own prefix, and uvicorn's line behind it, are read as before
    own = L.parse_line("[2025-04-03 12:05:45 TP1] KV Cache is allocated. #tokens: 1000")
    assert own is not None and own.ranks == {"TP": 1}
    # a ranked prefix is SGLang's even when its message starts with a stamp: a wrapper's names no rank
    quoted = L.parse_line("[2026-01-01 10:00:10 TP0] [2026-01-01 10:00:09] text")
    assert quoted is not None and (quoted.timestamp, quoted.ranks) == ("2026-01-01 10:00:10", {"TP": 0}), quoted
    uv = L.parse_line('[2025-03-08 12:29:32] INFO:     10.0.2.141:37662 - "GET /health HTTP/1.1" 200 OK')
    assert uv is not None and uv.uvicorn and uv.message.startswith("10.0.2.141")


def test_rocms_queue_error_beside_a_memory_fault_is_not_a_warning():
    """ROCm's "Warning: Queue error - HSA_STATUS_ERROR_MEMORY_FAULT" is the queue's side of the fault the
    "Memory access fault by GPU node-N" line reports and aborts on (ROCm/ROCR-Runtime amd_aql_queue.cpp
    AqlQueue::ExceptionHandler leaves the report to the VM-fault handler): part of the crash, not a warning
    (real: sgl-project/sglang issue #39517). The crash's reason stays the fault's own line."""
    lines = load_fixture("sglang-0.5.19_rocm_mi300x_hsa_memory_access_fault.log")
    assert not any("HSA_STATUS_ERROR_MEMORY_FAULT" in w for w in L.find_warnings(lines))
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "native_crash" and f["reason"].startswith("Memory access fault by GPU node-1")
    # a Python warning beside it is still one
    assert L.find_warnings(["/x/y.py:3: UserWarning: something"]) == ["/x/y.py:3: UserWarning: something"]


def test_a_negative_profiled_value_on_the_draft_worker_is_not_fatal():
    """0.5.9's draft worker logs "max_total_tokens=N is larger than the profiled value -M" and then takes the
    target's draft_runner_cache_size instead (srt/model_executor/model_runner_kv_cache_mixin.py
    init_memory_pool: the draft's size is set after the warning), so the server starts: real, SGLang's docs
    CI (EAGLE with --enable-torch-compile --mem-fraction 0.6, 2026-02-11) as rendered in
    github.com/wxsms/sgl-project.github.io markdown/advanced_features/speculative_decoding.md, whose next
    cell's request succeeds. A warning, never a fatal line on its own."""
    lines = [
        "[2026-02-11 06:44:58] SPECULATIVE_MOE_RUNNER_BACKEND is not initialized, using auto backend",
        "[2026-02-11 06:45:01] max_total_tokens=20480 is larger than the profiled value -89624. "
        "Use the profiled value instead.",
        "  0%|          | 0/4 [00:00<?, ?it/s]Capturing batches (bs=4 avail_mem=1.85 GB):   0%|          | 0/4",
    ]
    assert L.find_fatal(lines) is None
    assert L.find_warnings(lines) == [
        "max_total_tokens=20480 is larger than the profiled value -89624. Use the profiled value instead."
    ]


def test_an_nccl_watchdog_timeout_at_start_up_is_fatal_at_its_first_line():
    """torch's NCCL watchdog logs "[Rank N] Watchdog caught collective operation timeout: WorkNCCL(...) ran
    for N milliseconds before timing out." (ProcessGroupNCCL.cpp WorkNCCL::checkTimeout) and takes the
    process down; at start-up it means a rank, usually another node's, never reached the collective. Real:
    a head node whose peer node never joined (sgl-project/sglang issue #3368), and the watchdog thread's
    own "terminated with exception" line (issue #3424) before any "terminate called" line."""
    f = L.find_fatal(load_fixture("sglang-0.4.2era_tp16_2node_nccl_watchdog_timeout.log"))
    assert f is not None and (f["kind"], f["generic"]) == ("native_crash", False), f
    assert f["reason"].startswith("[Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2"), f
    thread = (
        "[rank1]:[E210 02:06:33.347835395 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank 1] Process group "
        "watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1522789, OpType=_ALLGATHER_BASE, NumelIn=298960, NumelOut=4783360, Timeout(ms)=600000) "
        "ran for 600003 milliseconds before timing out."
    )
    f = L.find_fatal(
        [thread, "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618"]
    )
    assert f is not None and f["kind"] == "native_crash" and f["reason"].startswith("[Rank 1] Watchdog caught"), f
    # the uncaught exception's own line, when it comes, still names the cause first
    what = (
        "  what():  [PG ID 2 PG GUID 3 Rank 1] " + thread.split("] ", 2)[2].split("exception: ", 1)[0] + "exception: x"
    )
    f = L.find_fatal([thread, "terminate called after throwing an instance of 'c10::DistBackendError'", what])
    assert f is not None and f["reason"].startswith(
        "terminate called after throwing an instance of 'c10::DistBackendError'"
    ), f
    # the log up to the weights' end says nothing fatal
    assert L.find_fatal(load_fixture("sglang-0.4.2era_tp16_2node_nccl_watchdog_timeout.log")[:-3]) is None


def test_sglangs_own_warning_word_on_a_draft_model_shorter_than_its_target_is_a_warning():
    """SGLang's format has no level, so its model_config.py writes the word into the message: "Warning: Target
    model's context_length (8192) is greater than the derived context_length (2048). ..." then "Overriding the
    draft model's max_position_embeddings to 8192." (configs/model_config.py `_derive_context_length`, 0.5.9 and
    0.5.23: an EAGLE head trained at 2048 tokens under an 8192-token target, "may lead to incorrect model outputs
    or CUDA errors"). Real: SGLang's docs CI (the fixture), and an MTP server's compose log (jpezzulli/
    sglang-rtxpro6000 issue #19). Both were missing from the warnings."""
    warnings = L.find_warnings(load_fixture("sglang-0.5.9dev_docs-ci_eagle_draft_context_override.log"))
    assert (
        "Warning: Target model's context_length (8192) is greater than the derived context_length (2048). This may"
        " lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from"
        " max_position_embeddings in the model's config." in warnings
    )
    assert "Overriding the draft model's max_position_embeddings to 8192." in warnings
    # the level-tagged launcher warning of the same launch is still read as one, and the start is not fatal
    assert any(w.startswith("Overlap scheduler is disabled when spec v2 is off") for w in warnings)
    composed = (
        "pennyroyal-1  | [2026-09-21 03:09:14] Warning: Target model's context_length (524288) is greater than the "
        "derived context_length (262144). This may lead to incorrect model outputs or CUDA errors. Note that the "
        "derived context_length may differ from max_position_embeddings in the model's config."
    )
    assert L.find_warnings([composed]) == [composed.split("| ", 1)[1].split("] ", 1)[1]]


def test_the_fatal_valueerror_that_holds_the_word_warning_is_not_a_warning():
    """Without SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (and outside CI) the same check raises: "ValueError:
    Warning: Target model's context_length ... To allow overriding this maximum, set the env var
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" (configs/model_config.py `_derive_context_length`) from the
    draft worker's start (the traceback's head is real: SGLang's docs CI, sgl-project/sglang issue #18220; its
    last line is the raise's text). That line is the start's fatal error; it was also listed as a warning
    because it holds "Warning: "."""
    lines = [
        "[2026-02-04 03:54:42] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/actions-runner/_work/sglang/sglang/python/sglang/srt/managers/scheduler.py", line 540, in'
        " init_model_worker",
        "    self.maybe_init_draft_worker()",
        "ValueError: Warning: Target model's context_length (4096) is greater than the derived context_length"
        " (2048). This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length"
        " may differ from max_position_embeddings in the model's config. To allow overriding this maximum, set"
        " the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1",
    ]
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "exception" and f["reason"].startswith("ValueError: Warning: Target model")
    assert L.find_warnings(lines) == []
    # a Python warning of a traceless line is still one
    assert L.find_warnings(["/x/y.py:3: FutureWarning: old"]) == ["/x/y.py:3: FutureWarning: old"]


def test_a_dynamo_workers_tracing_prefix_is_the_lines_prefix():
    """SGLang run as an NVIDIA Dynamo worker logs through Dynamo's Rust tracing: "<UTC stamp>Z  INFO
    <module>.<funcName>: <message>" (ai-dynamo/dynamo components/src/dynamo/runtime/logging.py; the KV line's
    shape as pasted in https://github.com/ai-dynamo/dynamo/issues/4855). The stamp, the level and the target
    are the line's prefix: the KV pool has no label, Rust's WARN is a warning, the capacity line is stamped
    (UTC), and the traceback the ERROR line starts still names its exception."""
    lines = load_fixture("constructed_dynamo_0.7.0_sglang_0.5.4_worker_rust_tracing.log")
    pools = L.parse_kv_pools(lines)
    assert [(p["label"], p["tokens"], p["total_gb"]) for p in pools] == [(None, 413540, 50.48)]
    cap = L.parse_capacity(lines)
    assert cap is not None and (cap["max_total_num_tokens"], cap["timestamp"]) == (
        413540,
        "2025-12-10T13:50:44.117020Z",
    )
    assert L.parse_timestamp(cap["timestamp"]) == 1765374644.11702
    assert L.find_warnings(lines)[0] == "Warning: a made-up warning in the worker's shape"
    f = L.find_fatal(lines)
    assert f is not None and f["kind"] == "kv_pool_oom", f
    assert f["trigger"].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    # behind a collector's prefix too (kubectl logs --prefix), and Dynamo's own Rust targets
    ln = L.parse_line("[pod/worker-0/main] 2025-05-15T08:05:11.136Z  INFO dynamo_runtime::pipeline: Shutting down")
    assert ln is not None and (ln.message, ln.level, ln.where) == ("Shutting down", "INFO", "dynamo_runtime::pipeline")
    # a docker -t stamp before a bare frame or uvicorn's own line is still only a collector's
    assert L.parse_line('2025-12-10T13:50:46.2Z   File "x.py", line 1, in f').timestamp is None
    assert L.parse_line("2025-12-10T13:50:46.2Z INFO:     Started server process [1]").timestamp is None


@pytest.mark.parametrize(
    ("exc", "where"),
    [
        # torch's libuv TCPStore (real words: https://github.com/vllm-project/vllm/issues/19670)
        (
            "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to "
            "connect to (172.17.0.9, 46229).",
            "172.17.0.9:46229",
        ),
        # the errno form (torch socket.cpp; https://github.com/gensyn-ai/rl-swarm/issues/197 logs it as a warning)
        (
            "torch.distributed.DistNetworkError: The client socket has failed to connect to [10.0.0.1]:5000 "
            "(errno: 111 - Connection refused).",
            "10.0.0.1:5000",
        ),
    ],
)
def test_a_worker_nodes_rendezvous_timeout_says_what_to_check(exc, where):
    """A worker node (--node-rank 1) whose rendezvous with node 0 never happens: torch names the address
    but not why; the reason says to check node 0, --dist-init-addr and the firewall."""
    f = L.find_fatal(
        [
            "[2025-03-01 10:00:00 TP8] Init torch distributed begin.",
            "Traceback (most recent call last):",
            '  File "/x/scheduler.py", line 1, in run_scheduler_process',
            exc,
        ]
    )
    assert f is not None and f["kind"] == "exception", f
    assert f["reason"].startswith(exc)
    assert f"rendezvous at {where} did not answer" in f["reason"]
    assert "--dist-init-addr" in f["reason"] and "firewall" in f["reason"]


def test_a_dynamo_workers_restart_keeps_only_the_last_launch():
    """Two launches of a Dynamo SGLang worker in one file (the worker restarted): its lines name no rank, so
    only the target tells the argument warnings (ServerArgs') before server_args= from the previous launch's
    last lines (the shapes of constructed_dynamo_0.7.0_sglang_0.5.4_worker_rust_tracing.log; 0.5.4
    entrypoints/engine.py _launch_subprocesses logs server_args=)."""
    kv = "  INFO memory_pool._finalize_allocation_log: KV Cache is allocated. #tokens: {}, K size: 1.00 GB, V size: 1.00 GB"
    lines = [
        "2025-12-10T13:40:00.1Z  INFO engine._launch_subprocesses: server_args=ServerArgs(model_path='a', tp_size=1)",
        "2025-12-10T13:40:29.9Z" + kv.format(1),
        "2025-12-10T13:41:00.0Z  INFO dynamo_runtime::pipeline::network::ingress::push_endpoint: Shutting down service",
        "2025-12-10T13:50:00.1Z  WARN server_args.__post_init__: Attention backend not set.",
        "2025-12-10T13:50:00.2Z  INFO engine._launch_subprocesses: server_args=ServerArgs(model_path='a', tp_size=1)",
        "2025-12-10T13:50:29.9Z" + kv.format(2),
    ]
    assert L.current_launch(lines) == lines[3:]
    assert [p["tokens"] for p in L.parse_kv_pools(L.current_launch(lines))] == [2]


# A bare assert's traceback as each CPython prints it (printed by CPython 3.10.13, 3.11.7, 3.12.1 and 3.13.0
# running the shape of SGLang 0.5.9 server_args.py:2422-2426): the source line(s) between the frame's
# "File ..." line and "AssertionError" differ, and 3.11+ add caret lines under them.
_MULTILINE_ASSERT_FRAME = '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line {n}, in _handle_speculative_decoding'


@pytest.mark.parametrize(
    "n, source, reason",
    [
        (  # 3.10 and 3.11: the line whose test was false
            2425,
            ["    and self.speculative_num_draft_tokens is None"],
            "AssertionError: and self.speculative_num_draft_tokens is None",
        ),
        (2423, ["    assert ("], "AssertionError: assert (...)"),  # 3.12: the statement's first line only
        (  # 3.13: the statement's lines
            2424,
            ["    self.speculative_eagle_topk is None", "    and self.speculative_num_draft_tokens is None"],
            "AssertionError: self.speculative_eagle_topk is None and self.speculative_num_draft_tokens is None",
        ),
        (  # a one-line assert, 3.11+ with its carets
            2423,
            ["    assert self.speculative_num_steps is not None", "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^"],
            "AssertionError: assert self.speculative_num_steps is not None",
        ),
    ],
)
def test_a_bare_assert_is_named_by_its_failing_source(n, source, reason):
    """SGLang's bare asserts (no message) end the traceback with "AssertionError" alone: what failed is only in
    the failing frame's source line(s), which the reason now carries with the place (file:line in function),
    behind a collector's prefix too."""
    lines = ["Traceback (most recent call last):", _MULTILINE_ASSERT_FRAME.format(n=n), *source, "AssertionError"]
    where = f" (server_args.py:{n} in _handle_speculative_decoding)"
    assert L.find_fatal(lines)["reason"] == reason + where
    assert L.find_fatal([f"sglang-1  | {line}" for line in lines])["reason"] == reason + where


def test_a_bare_assert_at_start_names_the_assert_and_its_place():
    """--speculative-eagle-topk without --speculative-num-steps on 0.5.9 under Python 3.12 (the fixture's
    header cites the source): "assert (" is all 3.12 prints of the statement, the place says which one."""
    f = L.find_fatal(load_fixture("constructed_0.5.9_py312_bare_assert_topk_without_steps.log"))
    assert f["kind"] == "exception"
    assert f["reason"] == "AssertionError: assert (...) (server_args.py:2423 in _handle_speculative_decoding)"
    # no source line under the frame, or no frame: the exception line as it is; a message keeps its own words
    assert (
        L.find_fatal(
            ["Traceback (most recent call last):", '  File "<string>", line 336, in __init__', "AssertionError"]
        )["reason"]
        == "AssertionError"
    )
    assert (
        L.find_fatal(
            [
                "Traceback (most recent call last):",
                '  File "x.py", line 1, in f',
                "    assert x, 'y'",
                "AssertionError: y",
            ]
        )["reason"]
        == "AssertionError: y"
    )


def test_a_draft_capture_failed_by_a_device_assert_names_the_assert():
    """An EAGLE3 draft whose vocabulary does not fit the target's trips a kernel's index assert during its
    CUDA-graph capture; the capture's exception only says "device-side assert triggered", and SGLang's
    "Possible solutions" after it speak of memory (sgl-project/sglang issues #8230 and #8870: the assert lines
    are real, from #8230). The reason names the first assert, and the tuner's capacity rule does not read it
    as a lack of memory."""
    from tuner.decide.capacity import is_capacity_failure

    f = L.find_fatal(load_fixture("constructed_0.4.9.post2_eagle3_draft_capture_device_assert.log"))
    assert f["kind"] == "cuda_graph"
    assert f["reason"] == (
        "Exception: Capture cuda graph failed: CUDA error: device-side assert triggered (first device-side assert: "
        'IndexKernel.cu:93: `-sizes[i] <= index && index < sizes[i] && "index out of bounds"`)'
    )
    assert not is_capacity_failure(f["reason"])
    # the assert split from its kernel's name (lightseekorg/tokenspeed issue #298 pastes it on two lines)
    split = [
        "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1515: indexSelectSmallIndex:",
        "  Assertion `srcIndex < srcSelectDimSize` failed.",
        "[2026-01-01 00:00:00 TP0] Capture cuda graph failed: CUDA error: device-side assert triggered",
    ]
    assert L.find_fatal(split)["reason"].endswith("(first device-side assert: `srcIndex < srcSelectDimSize`)")
    # no assert line before the capture's: the reason as it was
    assert L.find_fatal(split[2:])["reason"].endswith("device-side assert triggered")
