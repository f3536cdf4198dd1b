"""Prometheus text for /metrics with SGLang's metric names (docs/reference/sglang.md §3.2).

Written by hand (standard library only) in the text exposition format that prometheus_client
produces: `# HELP`, `# TYPE`, counters as `name_total`, histograms as `_bucket`/`_sum`/`_count`.
`render` writes the format; `metrics_text` says which metrics the emulated release exports, read
from the server's scheduler and histograms.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING

from . import dp
from .versions import dp_rank_count

if TYPE_CHECKING:
    from .engine import Scheduler
    from .server import EmulatorApp

_IDLE_GAUGES = dict.fromkeys(
    (
        "num_running_reqs",
        "num_queue_reqs",
        "num_used_tokens",
        "token_usage",
        "gen_throughput",
        "spec_accept_length",
        "spec_accept_rate",
        "mamba_usage",
    ),
    0.0,
)

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
    0.060,
    0.080,
    0.100,
    0.200,
    0.400,
    0.600,
    0.800,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
E2E_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
    150.0,
    200.0,
    250.0,
    300.0,
    350.0,
    500.0,
    1000.0,
)


class Histogram:
    """Cumulative-bucket histogram; observe(v, n) adds n observations of v in O(log buckets)."""

    def __init__(self, buckets: Iterable[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        if n <= 0:
            return
        self.counts[bisect.bisect_left(self.buckets, value)] += n
        self.sum += value * n
        self.count += n

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        cum = 0
        for le, c in zip(self.buckets, self.counts, strict=False):
            cum += c
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {float(cum)}')
        out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.count)}')
        out.append(f"{name}_count{{{labels}}} {float(self.count)}")
        out.append(f"{name}_sum{{{labels}}} {self.sum}")
        return out


def _model_label(model_name: str) -> str:
    esc = model_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'model_name="{esc}"'


def tokenizer_labels(app: EmulatorApp) -> str:
    """The tokenizer manager's labels, which every TokenizerMetricsCollector series carries (the
    token and request counters, the latency histograms, startup_time_seconds): model_name, and
    engine_type from 0.5.11 (versions.py metrics_tokenizer_engine_type), never a scheduler's ranks."""
    out = _model_label(app.served_name)
    return out + (',engine_type="unified"' if app.cfg.facts.metrics_tokenizer_engine_type else "")


def labels_text(model_name: str, tp_rank: int = 0, dp_rank: int | None = None, moe_ep_rank: int = 0) -> str:
    """A scheduler's labels: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank, and dp_rank
    when a DP controller launched it (the dict order of 0.5.9 managers/scheduler_metrics_mixin.py,
    0.5.12 observability/scheduler_metrics_mixin.py, 0.5.23 observability/metrics_collector.py
    SchedulerMetricsCollector: `if dp_rank is not None: labels["dp_rank"] = dp_rank`)."""
    out = (
        f'{_model_label(model_name)},engine_type="unified",tp_rank="{tp_rank}",pp_rank="0",moe_ep_rank="{moe_ep_rank}"'
    )
    return out + (f',dp_rank="{dp_rank}"' if dp_rank is not None else "")


def rank_labels(app: EmulatorApp) -> list[str]:
    """The labels of each scheduler that exports metrics, DP rank order: attention-TP rank 0 of each
    DP rank (`attn_tp_rank == 0`: 0.5.9/0.5.12 scheduler_metrics_mixin.py, 0.5.23
    metrics_collector.py is_stats_logging_rank). Replicas (plain --dp-size) each number their TP
    ranks from 0; under attention DP the ranks share one TP group, so DP rank d's first rank is
    tp_rank d * tp_size / ranks (0.5.9 layers/dp_attention.py compute_dp_attention_world_info) and
    its moe_ep_rank that rank's expert group (0.5.9 data_parallel_controller.py)."""
    v = app.cfg.values
    n = dp_rank_count(app.cfg.facts, v)
    if n == 1:
        return [app.labels]
    tp = int(v.get("tp_size") or 1)
    attn_dp = bool(v.get("enable_dp_attention")) or int(v.get("attn_dp_size") or 1) > 1
    out = []
    for d in range(n):
        tp_rank = d * max(1, tp // n) if attn_dp else 0
        ep = max(1, int(v.get("ep_size") or 1))
        out.append(labels_text(app.served_name, tp_rank, d, tp_rank // max(1, tp // ep)))
    return out


def _join(labels: str, extra: str) -> str:
    return f"{labels},{extra}" if extra else labels


def render(
    labels: str,
    gauges: list[tuple[str, str, list[tuple[str, float]]]],
    counters: list[tuple[str, str, list[tuple[str, float]]]],
    histograms: list[tuple[str, str, list[tuple[str, Histogram]]]],
) -> str:
    """Exposition text; names are given without the `sglang:` prefix and counters without `_total`.
    Each gauge, counter and histogram has one or more series: (labels beyond `labels`, e.g. `mode="decode"`
    or "", value); a series whose labels start with `model_name=` carries its own full set."""

    def full_labels(extra: str) -> str:
        return extra if extra.startswith("model_name=") else _join(labels, extra)

    out: list[str] = []
    for name, help_, series in gauges:
        full = f"sglang:{name}"
        out += [f"# HELP {full} {help_}", f"# TYPE {full} gauge"]
        out += [f"{full}{{{full_labels(extra)}}} {float(value)}" for extra, value in series]
    for name, help_, series in counters:
        full = f"sglang:{name}"
        out += [f"# HELP {full}_total {help_}", f"# TYPE {full}_total counter"]
        for extra, value in series:
            out.append(f"{full}_total{{{full_labels(extra)}}} {float(value)}")
    for name, help_, hists in histograms:
        full = f"sglang:{name}"
        out += [f"# HELP {full} {help_}", f"# TYPE {full} histogram"]
        for extra, hist in hists:
            out += hist.lines(full, full_labels(extra))
    return "\n".join(out) + "\n"


def startup_series(app: EmulatorApp) -> list[tuple[str, str, list[tuple[str, float]]]]:
    """0.5.23's sglang:startup_time_seconds, one series per phase, and
    sglang:startup_cuda_graph_time_seconds, one per graph phase (observability/metrics_collector.py
    TokenizerMetricsCollector.emit_startup_time: load_weight (target + draft), kv_cache_allocation,
    scheduler_e2e, tokenizer_e2e, then startup_time["cuda_graph"]; startup.py). The tokenizer's
    collector, so one set whatever the DP ranks (the phases are their maxima:
    aggregate_scheduler_startup_times), with the tokenizer's labels."""
    tok = tokenizer_labels(app)
    st = app.startup_time
    phases = ("load_weight", "kv_cache_allocation", "scheduler_e2e", "tokenizer_e2e")
    graph: dict[str, float] = st.get("cuda_graph", {})
    return [
        (
            "startup_time_seconds",
            "Engine startup duration by phase in seconds.",
            [(f'{tok},phase="{ph}"', float(st.get(ph, 0.0))) for ph in phases],
        ),
        (
            "startup_cuda_graph_time_seconds",
            "CUDA graph capture duration by phase in seconds.",
            [(f'{tok},phase="{ph}"', float(v)) for ph, v in graph.items()],
        ),
    ]


def _per_rank(
    ranks: list[str], per_sched: list[list[tuple[str, str, float]]], idle: dict[str, float]
) -> list[tuple[str, str, list[tuple[str, float]]]]:
    """Each scheduler gauge once per exporting DP rank: each DP replica's own scheduler (dp.py)
    exports its own values; under attention DP the emulator's one scheduler is rank 0 and the
    others are idle schedulers that still export (an idle scheduler's check_memory calls
    log_stats: 0.5.9 scheduler_runtime_checker_mixin.py), with `idle`'s values (the load gauges
    at zero)."""
    first = per_sched[0]
    return [
        (
            name,
            help_,
            [(lab, per_sched[i][j][2] if i < len(per_sched) else idle.get(name, value)) for i, lab in enumerate(ranks)],
        )
        for j, (name, help_, value) in enumerate(first)
    ]


def _gauges(app: EmulatorApp, s: Scheduler) -> list[tuple[str, str, float]]:
    """One scheduler's gauges (name, help, value), as it last logged them."""
    facts = app.cfg.facts
    g = s.gauges
    gauges: list[tuple[str, str, float]] = [
        ("num_running_reqs", "The number of running requests.", g["num_running_reqs"]),
        ("num_queue_reqs", "The number of requests in the waiting queue.", g["num_queue_reqs"]),
        ("num_used_tokens", "The number of used tokens.", g["num_used_tokens"]),
        ("token_usage", "The token usage.", g["token_usage"]),
        ("gen_throughput", "The generation throughput (token/s).", g["gen_throughput"]),
        (
            "max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            app.capacity.max_total_num_tokens,
        ),
        ("cache_hit_rate", "The prefix cache hit rate.", 0.0),
        (
            "spec_accept_length",
            "The average acceptance length of speculative decoding.",
            g["spec_accept_length"] if s.speculative else 0.0,
        ),
        (
            "spec_accept_rate",
            "The average acceptance rate of speculative decoding.",
            g["spec_accept_rate"] if s.speculative else 0.0,
        ),
    ]
    if facts.metrics_spec_num_steps:
        gauges += [
            ("spec_num_steps", "Currently active speculative_num_steps.", g["spec_num_steps"]),
            (
                "spec_num_draft_tokens",
                "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
                g["spec_num_draft_tokens"],
            ),
        ]
    if facts.metrics_startup:
        gauges += [
            (
                "context_len",
                "The context length of the model.",
                float(app.context_len),
            ),
            ("kv_cache_memory_usage_gb", "The KV cache memory usage in GB.", round(app.memory.get("kv_total", 0.0), 4)),
        ]
    if app.p.hybrid_mamba:
        gauges.append(("mamba_usage", "The mamba state usage.", g["mamba_usage"]))
    return gauges


def metrics_text(app: EmulatorApp) -> str:
    """Prometheus text with the release's names. Gauges hold what SGLang last logged (each prefill
    batch, every --decode-log-interval decode steps: scheduler_metrics_mixin.py log_decode_stats),
    counters count every step: sglang:cuda_graph_passes_total (one per decode batch) and
    sglang:realtime_tokens_total{mode} exist from 0.5.9; 0.5.23 adds sglang:spec_verify_calls_total
    (one per request per verify step, so its delta over the decode passes' delta is the mean
    running batch size), the active-depth gauges sglang:spec_num_steps / spec_num_draft_tokens,
    and an is_streaming label on the token counters (observability/metrics_collector.py)."""
    facts = app.cfg.facts
    scheds = app.scheds
    s = app.sched
    ranks = rank_labels(app)
    series = _per_rank(ranks, [_gauges(app, x) for x in scheds], _IDLE_GAUGES)
    if facts.metrics_startup:
        series += startup_series(app)
    tok = tokenizer_labels(app)
    counters: list[tuple[str, str, list[tuple[str, float]]]] = []

    def by_stream(total: float, split: list[int]) -> list[tuple[str, float]]:
        """A tokenizer counter's series: 0.5.23's two is_streaming ones, or the older releases' one."""
        if not facts.metrics_is_streaming:
            return [(tok, total)]
        return [(f'{tok},is_streaming="{kind}"', split[i]) for i, kind in enumerate(("false", "true"))]

    counters += [
        (
            "prompt_tokens",
            "Number of prefill tokens processed.",
            by_stream(dp.total(scheds, "prompt_tokens_total"), _split_sum(scheds, "prompt_tokens_by_stream")),
        ),
        (
            "generation_tokens",
            "Number of generation tokens processed.",
            by_stream(dp.total(scheds, "generation_tokens_total"), _split_sum(scheds, "generation_tokens_by_stream")),
        ),
        (
            "num_requests",
            "Number of requests processed.",
            by_stream(dp.total(scheds, "num_requests_total"), _split_sum(scheds, "num_requests_by_stream")),
        ),
        (
            "cuda_graph_passes",
            "Total number of forward passes categorized by CUDA graph.",
            [
                (_join(ranks[d], f'mode="{mode}"'), n)
                for d, x in enumerate(scheds)
                for mode, n in x.cuda_graph_passes.items()
                if n
            ],
        ),
        (
            "realtime_tokens",
            "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
            [
                (_join(ranks[d], f'mode="{mode}"'), n)
                for d, x in enumerate(scheds)
                for mode, n in x.realtime_tokens.items()
                if n
            ],
        ),
    ]
    if facts.metrics_spec_verify_calls and s.speculative:
        counters.append(
            (
                "spec_verify_calls",
                "Number of speculative decoding verification calls.",
                [(tok, dp.total(scheds, "spec_verify_calls_total"))],
            )
        )

    def split(h: Histogram) -> list[tuple[str, Histogram]]:
        """0.5.23's is_streaming series, each once a request of its kind finished (a labelled
        series exists from its first observation), or the older releases' one series."""
        if not facts.metrics_is_streaming:
            return [(tok, h)]
        by = app.h_by_stream
        return [(f'{tok},is_streaming="{str(st).lower()}"', by[(h, st)]) for st in (False, True) if by[(h, st)].count]

    hists = [
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", split(app.h_ttft)),
        ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", [(tok, app.h_itl)]),
        ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", split(app.h_e2e)),
    ]
    if facts.metrics_startup:
        hists.append(
            (
                "request_time_per_output_token_seconds",
                "Histogram of each request's time per output token in seconds.",
                split(app.h_tpot),
            )
        )
    return render(app.labels, series, counters, hists)


def _split_sum(scheds: list[Scheduler], attr: str) -> list[int]:
    """A by-stream count ([not streamed, streamed]) over the DP replicas."""
    return [sum(getattr(x, attr)[i] for x in scheds) for i in (0, 1)]
