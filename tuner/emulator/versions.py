"""What changes with the SGLang version the emulator plays: one table, one row per release.

Every behaviour that differs between the releases the emulator models is a field of
`SGLangVersion`, filled in from that release's wheel (`pip download --no-deps sglang==X`; a wheel's
`sglang/...` is `python/sglang/...` in sgl-project/sglang). Code elsewhere asks the row
(`facts.prog`, `facts.adaptive`, ...) and never compares version numbers itself. The flag set per
release is the `since`/`until` column of the flag table in flags.py, checked against the real
parsers' flag lists in tests/emulator/data/sglang_flags/.

The row is chosen by `--emulator-sglang-version` (the role passes `sglang_server_sglang_version`),
else by the profile's `sglang_version`. A release that is not in the table is a start-up error
naming the ones that are (`UnsupportedVersion`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sglang_utils import sglang_releases as releases


class UnsupportedVersion(ValueError):
    """The emulator has no row for this SGLang release."""

    flag = "--emulator-sglang-version"  # what named it (a profile's sglang_version says so)


@dataclass(frozen=True)
class SGLangVersion:
    version: str
    # argparse's program name in `usage:` and `error:` lines: 0.5.9's prepare_server_args builds
    # ArgumentParser() (prog = basename of argv[0]); 0.5.10+ pass prog="sglang serve".
    prog: str
    # --speculative-algorithm: argparse choices, or None where it is a free string that
    # SpeculativeAlgorithm.from_string checks later (0.5.12+, sglang/srt/speculative/spec_info.py).
    spec_algorithm_choices: tuple[str, ...] | None
    builtin_spec_algorithms: tuple[str, ...]
    kv_cache_dtypes: tuple[str, ...]
    # How the hybrid model's radix cache meets speculation (server_args.py _handle_mamba_radix_cache):
    # "disable-warn" (0.5.9: turned off with a warning), "error" (0.5.10-0.5.12: ValueError under
    # no_buffer), "auto-extra-buffer" (0.5.23 arg_groups/overrides.py _mamba_radix_cache_resolution).
    mamba_radix_rule: str
    mamba_strategy_dest: str  # mamba_scheduler_strategy (<= 0.5.12) / mamba_radix_cache_strategy (0.5.23)
    # Spec v2 (overlap scheduler) for EAGLE: "env-off" (0.5.9/0.5.10: SGLANG_ENABLE_SPEC_V2 default
    # False), "env-on" (0.5.11/0.5.12: default True, topk > 1 falls back to v1), "always" (0.5.23).
    spec_v2: str
    # Where the arguments' warnings go before SGLang configures its logger: "located" prints
    # `[time] LEVEL file.py:LINE: message` (as public 0.5.9 logs show), "plain" `[time] message`
    # (0.5.11+ call logging.basicConfig(format="[%(asctime)s] %(message)s") in prepare_server_args).
    prelaunch_log: str
    where: dict[str, str] = field(default_factory=dict)  # message -> "server_args.py:LINE" ("located" only)
    # The first launch line: `server_args=ServerArgs(...)` (repr) or `server_args={...}` (0.5.23
    # engine.py: _server_args_for_logging returns server_args.resolved_dict()).
    server_args_log: str = "repr"
    # Pool lines: 0.5.23 memory_pool.py adds "dtype: ..., " to the KV line.
    kv_line_dtype: bool = False
    # RuntimeError text when the KV pool comes out empty.
    not_enough_memory: str = (
        "Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: self.server_args.mem_fraction_static={value}"
    )
    # The hint after "Capture cuda graph failed: ..." (CUDA_GRAPH_CAPTURE_FAILED_MSG:
    # model_executor/cuda_graph_runner.py <= 0.5.12, model_executor/runner_backend_utils/__init__.py 0.5.23).
    graph_capture_failed_hint: str = (
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "3. disable torch compile by not using --enable-torch-compile\n"
        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
    )
    # `accept rate` of the Decode batch line and sglang:spec_accept_rate: "with-bonus" divides
    # (accepted drafts + bonus) by passes * draft tokens (0.5.9/0.5.10 scheduler_metrics_mixin.py);
    # "drafts-only" divides correct drafts by passes * (draft tokens - 1) (0.5.11+).
    accept_rate: str = "with-bonus"
    # `input throughput` of the Prefill batch line: "previous-batch" divides the tokens of the
    # prefill logged before by the time since that log (0.5.9 managers/scheduler_metrics_mixin.py,
    # 0.5.10 observability/scheduler_metrics_mixin.py `log_prefill_stats`: last_prefill_tokens /
    # gap_latency); "this-batch" divides this batch's own tokens (0.5.11+; 0.5.23
    # scheduler_components/metrics_reporter.py `report_prefill_stats`). Every release here logs the
    # line after the batch's forward (`process_batch_result_prefill`), so the time is between two
    # prefill batches' ends: no per-release fact (engine.py `_log_prefill`).
    input_throughput: str = "previous-batch"
    # When the scheduler starts the clock of that gap (`last_prefill_stats_tic = time.perf_counter()`,
    # which the first Prefill batch line divides by): "scheduler-init" (up to 0.5.12: init_metrics
    # runs at the top of Scheduler.__init__, before init_model_worker loads the weights and
    # captures the graphs: 0.5.11/0.5.12 managers/scheduler.py `self.init_metrics(tp_rank, pp_rank,
    # dp_rank)`), "after-model-worker" (0.5.23 managers/scheduler.py: init_metrics_reporter ->
    # SchedulerMetricsReporter._init_metrics after init_model_worker and the cache). Up to 0.5.10 the
    # first line counts the prefill before it, none, so it is 0.00 either way.
    stats_clock: str = "scheduler-init"
    # /metrics beyond 0.5.9's set (observability/metrics_collector.py, 0.5.23): the per-call
    # counter and the active-depth gauges.
    metrics_spec_verify_calls: bool = False
    metrics_spec_num_steps: bool = False
    # 0.5.23 also adds sglang:context_len, kv_cache_memory_usage_gb, startup_time_seconds and the
    # request_time_per_output_token_seconds histogram (metrics_collector.py), and GET /ready
    # (http_server.py: 200/503 from tokenizer_manager.is_ready(), no generation)
    metrics_startup: bool = False
    # 0.5.23's is_streaming label (metrics_collector.py TokenizerMetricsCollector) on
    # prompt_tokens_total, generation_tokens_total, num_requests_total and the time_to_first_token,
    # request_time_per_output_token and e2e_request_latency histograms (not inter_token_latency)
    metrics_is_streaming: bool = False
    # The tokenizer-side metrics (TokenizerMetricsCollector: the token and request counters, the
    # latency histograms, 0.5.23's startup_time_seconds and spec_verify_calls_total) carry the
    # tokenizer manager's labels, not a scheduler's (no tp_rank/pp_rank/moe_ep_rank/dp_rank):
    # `model_name` alone up to 0.5.10 (managers/tokenizer_manager.py init_metric_collector_watchdog),
    # `model_name` and `engine_type` from 0.5.11 (the same method; 0.5.23
    # observability/metrics_collector.py tokenizer_metric_labels).
    metrics_tokenizer_engine_type: bool = False
    ready_endpoint: bool = False
    # /server_info: 0.5.23 adds launch_command, startup_time, kv_events, frontend at the top and
    # world_size, startup_time, memory_usage.startup_available / token_capacity_swa and a
    # per-phase graph memory dict in internal_states (internal_state.py, memory_usage.py).
    server_info_v2: bool = False
    # meta_info of /generate, the speculative counts' names (tokenizer_manager.py of each wheel):
    # "token_num" (0.5.9/0.5.10: spec_accept_token_num / spec_draft_token_num / spec_accept_histogram),
    # "drafts" (0.5.11: spec_accepted_drafts / spec_proposed_drafts / spec_accept_histogram),
    # "correct+aliases" (0.5.12: spec_num_correct_drafts / spec_num_proposed_drafts /
    # spec_correct_drafts_histogram and 0.5.11's names as "backward-compat aliases"), "correct" (0.5.23).
    spec_meta: str = "token_num"
    # --config merging (server_args_config_parser.py): 0.5.23's utils/server_args_config_parser.py
    # accepts every long spelling of a flag as a key and passes dict values as JSON.
    config_v2: bool = False
    # Adaptive speculation: None (absent), "flat" (0.5.11/0.5.12: one policy, JSON keys
    # candidate_steps/ema_alpha/...), "per-bs" (0.5.13+: keyed by batch-size lower bounds).
    adaptive: str | None = None
    # 0.5.11 only runs adaptive on the v1 worker (adaptive_unsupported_reason: overlap on -> off).
    adaptive_needs_v1: bool = False
    # Which steps a flat policy starts at when the static steps are not a candidate:
    # "nearest" (0.5.11), "add" (0.5.12 adds them to the candidates).
    adaptive_initial: str = "add"
    # When the adaptive config is read: "scheduler" (0.5.11/0.5.12: the EAGLE worker's
    # AdaptiveController, in the scheduler process) or "resolution" (0.5.23 speculative_hook.py
    # _init_adaptive_speculative_params, before the first log line).
    adaptive_config_read: str = "scheduler"
    # 0.5.23 sizes draft-token buffers for the widest candidate (runtime_context.py
    # max_speculative_num_draft_tokens): the hybrid state pool's intermediate caches
    # (kv_cache_configurator.py _build_hybrid_req_pool), the decode logits rows
    # (model_runner.py max_decode_logits_rows) and the per-step KV allocation.
    adaptive_widest_buffers: bool = False
    # The distributed init's two lines: "Init torch distributed begin." / "Init torch distributed
    # ends. elapsed=..., mem usage=..." up to 0.5.20, "Init parallel begin." / "Init parallel ends.
    # elapsed=... s" from 0.5.21 (srt/distributed/bootstrap.py of each wheel).
    parallel_init_log: bool = False
    # The tokenizer's total-token check (input + the draft reserve + max_new_tokens against the
    # context length): `>=` in 0.5.9/0.5.10 (tokenizer_manager.py _validate_one_request), `>` from
    # 0.5.12 (0.5.11 not read: taken as 0.5.10, the stricter).
    total_tokens_inclusive: bool = False
    # A worker node's SIGTERM: its process ends by the signal (no handler of SGLang's, up to 0.5.20),
    # or it logs and waits for rank 0's ShutdownReq broadcast (0.5.23 entrypoints/engine.py, the
    # node_rank >= 1 branch: "Non-zero ranks cannot drain on their own").
    worker_sigterm_waits: bool = False
    # The fields of the `Prefill batch` line after `#queue-req`: "throughput-graph" (0.5.9
    # managers/scheduler_metrics_mixin.py log_prefill_stats: `input throughput (token/s): X, cuda
    # graph: B`), "graph-throughput" (0.5.10 observability/scheduler_metrics_mixin.py: the two
    # swapped), "pending-graph-throughput" (0.5.11/0.5.12 the same file, 0.5.23
    # scheduler_components/metrics_reporter.py report_prefill_stats: `#pending-token: N, ` first).
    prefill_line: str = "pending-graph-throughput"
    # PrefillAdder.add_one_req's input cap (managers/schedule_policy.py): a request whose input is
    # >= rem_input_tokens (max_prefill_tokens less what the batch holds) does not join a batch that
    # has one already: always up to 0.5.12 (`real_input_tokens >= self.rem_input_tokens and
    # len(self.can_run_list) != 0`), only with chunked prefill off in 0.5.23 (`self.rem_chunk_tokens
    # is None and self.can_run_list and input_tokens >= self.rem_input_tokens`).
    prefill_input_cap_chunked: bool = True
    # How many DP ranks answer /server_info (one internal_states entry each) and export scheduler
    # metrics: --dp-size (0.5.9 tokenizer_communicator_mixin.py and 0.5.12 tokenizer_control_mixin.py
    # build the communicator with fan-out server_args.dp_size), or dp_size * attn_dp_size (0.5.23
    # tokenizer_control_mixin.py: get_parallel().num_dp_ranks, runtime_context.py num_dp_ranks_of).
    dp_ranks_with_attn_dp: bool = False
    # Round-robin DP dispatch of health checks (dp.py): in the requests' rotation up to 0.5.12 (a
    # generate request like any other, data_parallel_controller.py dispatching_with_trace), on their
    # own counter in 0.5.23 (data_parallel_controller.py dispatch_health_check).
    dp_health_own_counter: bool = False
    released: str = ""

    @property
    def has_adaptive(self) -> bool:
        return self.adaptive is not None

    def where_of(self, key: str) -> str:
        return self.where.get(key, "server_args.py:1")


_KV_DTYPES_05 = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
_ALGOS_059 = releases.spec_algorithms("0.5.9")

# From 0.5.10 the empty-pool RuntimeError names the fraction itself (0.5.10
# model_runner_kv_cache_mixin.py, 0.5.11/0.5.12 pool_configurator.py, 0.5.23:
# `msg += f" Current value: mem_fraction_static={self.mem_fraction_static}"`); 0.5.9 printed the
# expression `self.server_args.mem_fraction_static=` (the class default).
_NOT_ENOUGH_MEMORY_0510 = (
    "Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static={value}"
)

VERSIONS: dict[str, SGLangVersion] = {
    v.version: v
    for v in (
        SGLangVersion(
            version="0.5.9",
            released="2026-02-23",
            prog="launch_server.py",
            spec_algorithm_choices=_ALGOS_059,
            builtin_spec_algorithms=_ALGOS_059,
            kv_cache_dtypes=_KV_DTYPES_05,
            mamba_radix_rule="disable-warn",
            mamba_strategy_dest="mamba_scheduler_strategy",
            spec_v2="env-off",
            prelaunch_log="located",
            # the logger call's line in 0.5.9's sglang/srt/server_args.py (ServerArgs.__post_init__)
            where={
                "attention": "server_args.py:1835",
                "radix": "server_args.py:1761",
                "mrr": "server_args.py:2364",
                "overlap": "server_args.py:2385",
                "mixed": "server_args.py:2392",
                "topk": "server_args.py:2447",
                "maxtok": "model_runner_kv_cache_mixin.py:382",
            },
            total_tokens_inclusive=True,
            prefill_line="throughput-graph",
        ),
        SGLangVersion(
            version="0.5.10",
            released="2026-04-05",
            prog="sglang serve",
            spec_algorithm_choices=_ALGOS_059,
            builtin_spec_algorithms=_ALGOS_059,
            kv_cache_dtypes=_KV_DTYPES_05,
            mamba_radix_rule="error",
            mamba_strategy_dest="mamba_scheduler_strategy",
            spec_v2="env-off",
            prelaunch_log="located",
            not_enough_memory=_NOT_ENOUGH_MEMORY_0510,
            where={
                "attention": "server_args.py:2292",
                "mrr": "server_args.py:2995",
                "overlap": "server_args.py:3016",
                "mixed": "server_args.py:3023",
                "topk": "server_args.py:3078",
                "maxtok": "model_runner_kv_cache_mixin.py:382",
            },
            total_tokens_inclusive=True,
            prefill_line="graph-throughput",
        ),
        SGLangVersion(
            version="0.5.11",
            metrics_tokenizer_engine_type=True,
            released="2026-05-07",
            prog="sglang serve",
            spec_algorithm_choices=("DFLASH", *_ALGOS_059),  # argparse's order in 0.5.11
            builtin_spec_algorithms=releases.spec_algorithms("0.5.11"),
            kv_cache_dtypes=_KV_DTYPES_05,
            mamba_radix_rule="error",
            mamba_strategy_dest="mamba_scheduler_strategy",
            spec_v2="env-on",
            prelaunch_log="plain",
            accept_rate="drafts-only",
            input_throughput="this-batch",
            adaptive="flat",
            adaptive_needs_v1=releases.adaptive_needs_overlap_off("0.5.11"),
            spec_meta="drafts",
            adaptive_initial="add" if releases.adaptive_flat_adds_launch_steps("0.5.11") else "nearest",
            not_enough_memory=_NOT_ENOUGH_MEMORY_0510,
            total_tokens_inclusive=True,
        ),
        SGLangVersion(
            version="0.5.12",
            metrics_tokenizer_engine_type=True,
            released="2026-05-16",
            prog="sglang serve",
            spec_algorithm_choices=None,
            builtin_spec_algorithms=releases.spec_algorithms("0.5.12"),
            kv_cache_dtypes=_KV_DTYPES_05,
            mamba_radix_rule="error",
            mamba_strategy_dest="mamba_scheduler_strategy",
            spec_v2="env-on",
            prelaunch_log="plain",
            accept_rate="drafts-only",
            input_throughput="this-batch",
            spec_meta="correct+aliases",
            adaptive="flat",
            adaptive_initial="add" if releases.adaptive_flat_adds_launch_steps("0.5.12") else "nearest",
            not_enough_memory=_NOT_ENOUGH_MEMORY_0510,
        ),
        SGLangVersion(
            version="0.5.23",
            metrics_tokenizer_engine_type=True,
            released="2026-10-30",
            prog="sglang serve",
            spec_algorithm_choices=None,
            builtin_spec_algorithms=releases.spec_algorithms("0.5.23"),
            kv_cache_dtypes=("auto", "fp8_e5m2", "fp8_e4m3", "mxfp8", "bf16", "bfloat16", "nvfp4", "fp4_mx_block16"),
            mamba_radix_rule="auto-extra-buffer",
            mamba_strategy_dest="mamba_radix_cache_strategy",
            spec_v2="always",
            prelaunch_log="plain",
            server_args_log="dict",
            kv_line_dtype=True,
            not_enough_memory=_NOT_ENOUGH_MEMORY_0510,
            graph_capture_failed_hint=(
                "Possible solutions:\n"
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
                "(Not recommended. Huge performance loss)\n"
                "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
            ),
            accept_rate="drafts-only",
            input_throughput="this-batch",
            metrics_spec_verify_calls=True,
            metrics_spec_num_steps=True,
            metrics_startup=True,
            metrics_is_streaming=True,
            ready_endpoint=True,
            server_info_v2=True,
            spec_meta="correct",
            config_v2=True,
            adaptive="per-bs",
            adaptive_config_read="resolution",
            adaptive_widest_buffers=True,
            worker_sigterm_waits=True,
            parallel_init_log=True,
            prefill_input_cap_chunked=False,
            dp_ranks_with_attn_dp=True,
            stats_clock="after-model-worker",
            dp_health_own_counter=True,
        ),
    )
}
SUPPORTED = tuple(VERSIONS)
# Shared with the role's input checks (plugins/module_utils/sglang_releases.py): the releases
# modelled, and the first with --speculative-adaptive (flat config) / the per-batch-size schedule.
assert SUPPORTED == releases.EMULATED_RELEASES, "versions.VERSIONS and sglang_releases.EMULATED_RELEASES differ"
ADAPTIVE_SINCE = releases.ADAPTIVE_SINCE
ADAPTIVE_PER_BS_SINCE = releases.ADAPTIVE_PER_BS_SINCE
version_key = releases.release_key


def get(version: str) -> SGLangVersion:
    """The row for `version`; a `.postN` release shares its base release's row."""
    text = str(version).strip()
    if text in VERSIONS:
        return VERSIONS[text]
    base = ".".join(str(n) for n in version_key(text)[:3])
    if base in VERSIONS and text.startswith(base + ".post"):
        return VERSIONS[base]
    raise UnsupportedVersion(
        f"SGLang {text} is not emulated; the emulator models SGLang {', '.join(SUPPORTED)} "
        "(set --emulator-sglang-version or the profile's sglang_version to one of them)"
    )


def dp_rank_count(version: SGLangVersion, values: dict[str, Any]) -> int:
    """The DP ranks of a launch under `version` (see `dp_ranks_with_attn_dp`): 0.5.23's deprecated
    `--dp-size N --enable-dp-attention` becomes attn_dp_size N with dp_size 1, the same product."""
    count = int(values.get("dp_size") or 1)
    if version.dp_ranks_with_attn_dp:
        count *= int(values.get("attn_dp_size") or 1)
    return max(1, count)


def attention_dp_size(values: dict[str, Any]) -> int:
    """The attention-DP groups of a launch (1: none): 0.5.23's --attn-dp-size, else --dp-size with
    --enable-dp-attention (0.5.9-0.5.12, and 0.5.23's deprecated spelling of --attn-dp-size N:
    parallel_hook.py `_handle_deprecated_dp_attention`). With --dp-size 1 there is no DP controller
    and no DP rank (0.5.9 entrypoints/engine.py: `if server_args.dp_size == 1:` launches the
    schedulers with dp_rank None)."""
    attn = int(values.get("attn_dp_size") or 1)
    if attn > 1:
        return attn
    return max(1, int(values.get("dp_size") or 1)) if values.get("enable_dp_attention") else 1


def in_range(version: SGLangVersion, since: str | None, until: str | None) -> bool:
    """Whether a flag or rule that exists from `since` up to and including `until` is in `version`."""
    v = version_key(version.version)
    if since is not None and v < version_key(since):
        return False
    return not (until is not None and v > version_key(until))
