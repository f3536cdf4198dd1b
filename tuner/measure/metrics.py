"""Per-request and per-level benchmark metrics (pure functions over recorded request traces).

What each metric means is written once, in tuner/measure/definitions.py (report.md and
docs/tuner.md render it); this module computes exactly those, from the client's traces:

- per request (from a `RequestTrace`): TTFT, E2E, TPOT, decode rate and the
  chunk-robust ITL samples, with the server's own output-token count;
- per level (`LevelMetrics`): aggregate output tok/s over the span while all C clients were busy,
  the latency percentiles, the level's own acceptance length and its source, and the windows
  (cut at every C-th completion) that tuner/measure/stats.py turns into intervals.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sglang_utils.sglang_verify import tokens_per_verify

from . import stats
from .stats import percentile


@dataclass
class RequestTrace:
    """What the client saw of one request; times are `time.perf_counter()` seconds."""

    index: int
    sent: float  # when the request's headers went to the socket (tuner/run/client.py `_sent_clock`)
    chunk_times: list[float] = field(default_factory=list)
    # Tokens each of those chunks carried (None: the server did not say, e.g. chat without
    # continuous usage; then the request's total is spread evenly over its chunks).
    chunk_tokens: list[int | None] = field(default_factory=list)
    ended: float | None = None  # when the stream closed (or the error surfaced)
    output_tokens: int | None = None  # the server's count
    prompt_tokens: int | None = None
    spec_verify_ct: int | None = None
    # Verify steps that accepted exactly n drafts, n = 0, 1, ... (SGLang's per-request
    # `spec_accept_histogram`; `spec_correct_drafts_histogram` beside it from 0.5.12, alone from
    # 0.5.21): per-position acceptance.
    accept_hist: list[int] | None = None
    server_e2e_s: float | None = None  # the server's own arrival-to-finish time, if it says
    # Tokens counted chunk by chunk as they arrived (None when a chunk did not say), before the
    # final count is known: the client's side of the token cross-check.
    stream_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    issued: float | None = None  # when the client started the request (before aiohttp's own work)

    @property
    def ok(self) -> bool:
        return self.error is None


def mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def ttft_s(t: RequestTrace) -> float | None:
    return t.chunk_times[0] - t.sent if t.chunk_times else None


def e2e_s(t: RequestTrace) -> float | None:
    if t.chunk_times:
        return t.chunk_times[-1] - t.sent
    return None


def tpot_s(t: RequestTrace) -> float | None:
    ttft, e2e = ttft_s(t), e2e_s(t)
    n = t.output_tokens
    if ttft is None or e2e is None or not n or n < 2:
        return None
    return (e2e - ttft) / (n - 1)


def decode_rate(t: RequestTrace) -> float | None:
    """(output_tokens - 1) / (E2E - TTFT): tokens per second after the first token."""
    ttft, e2e = ttft_s(t), e2e_s(t)
    n = t.output_tokens
    if ttft is None or e2e is None or not n or n < 2 or e2e <= ttft:
        return None
    return (n - 1) / (e2e - ttft)


def chunk_token_counts(t: RequestTrace) -> list[float]:
    """Tokens per chunk; unknown counts are filled by spreading what is left evenly, the first
    chunk's being the prefill's one token (it carries no more on any server: the decode's verify
    passes come after it)."""
    counts = list(t.chunk_tokens) + [None] * (len(t.chunk_times) - len(t.chunk_tokens))
    counts = counts[: len(t.chunk_times)]
    if all(c is not None for c in counts):
        return [float(c) for c in counts]  # type: ignore[arg-type]
    if t.output_tokens is None:
        # still streaming (the precision loop's look at a level in progress), its total not known
        # yet: a chunk of unknown count carries text, so at least one token (the client records
        # no empty chunk as one), not the nothing an unknown total left to spread
        return [float(c) if c is not None else 1.0 for c in counts]
    if counts and counts[0] is None and (t.output_tokens or 0) >= 1 and len(counts) > 1:
        counts[0] = 1
    known = sum(c for c in counts if c is not None)
    unknown = sum(1 for c in counts if c is None)
    rest = max(0.0, float((t.output_tokens or 0) - known))
    share = rest / unknown if unknown else 0.0
    return [float(c) if c is not None else share for c in counts]


def itl_samples_s(t: RequestTrace) -> list[float]:
    """Chunk-robust inter-token latencies of one request, one sample per token after chunk 1."""
    counts = chunk_token_counts(t)
    out: list[float] = []
    # a share of tokens spread over chunks of unknown count may be fractional: the samples go whole
    # token by whole token along the stream (a gap with less than one token yet joins the next), so
    # they sum to the gaps they cover, one per token
    carried, emitted, pending = 0.0, 0, 0.0
    for i in range(1, len(t.chunk_times)):
        tokens = counts[i]
        # a chunk with no token (one decode step split in two, an empty delta) still ends a gap:
        # the time before it is the next token's wait too (sglang bench_serving keeps its clock
        # running over such chunks), so the samples still sum to the decode time
        pending += t.chunk_times[i] - t.chunk_times[i - 1]
        if tokens <= 0:
            continue
        carried += tokens
        whole = int(carried + 1e-9) - emitted
        if whole < 1:
            continue
        out.extend([pending / whole] * whole)
        emitted += whole
        pending = 0.0
    return out


@dataclass
class LevelMetrics:
    """One benchmark level (one concurrency, one repeat): what results.csv shows of it.

    Every field has an empty default, so a record written by another version of the tuner still
    reads (`from_dict` ignores what it does not know).
    """

    concurrency: int = 0
    requests: int = 0
    requests_ok: int = 0
    requests_failed: int = 0
    output_tokens: int = 0
    wall_s: float = 0.0  # first send to last completion
    output_tok_s: float | None = None
    # The span output_tok_s measures: first send to the moment the closed loop stopped sending
    # (fewer than C requests in flight after it), and the tokens that arrived in it.
    measured_s: float | None = None
    output_tokens_measured: int | None = None
    per_request_tok_s: float | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p99: float | None = None
    tpot_ms_p50: float | None = None
    tpot_ms_p99: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p99: float | None = None
    e2e_ms_p50: float | None = None
    e2e_ms_p99: float | None = None
    prompt_tokens_mean: float | None = None
    accept_length: float | None = None
    accept_length_source: str = "none"
    status: str = "failed"
    errors: dict[str, int] = field(default_factory=dict)
    # 95% intervals from this level's own requests (tuner/measure/stats.py; noise "requests")
    output_tok_s_ci_low: float | None = None
    output_tok_s_ci_high: float | None = None
    samples: int = 0  # successful requests: the per-request samples the intervals rest on
    windows: int = 0  # batch-means windows of the throughput interval
    precision_pct: float | None = None  # the throughput interval's half-width, % of the value
    ttft_ms_p50_ci_low: float | None = None
    ttft_ms_p50_ci_high: float | None = None
    tpot_ms_p50_ci_low: float | None = None
    tpot_ms_p50_ci_high: float | None = None
    # cross-checks (docs/tuner.md "Cross-checks"): the same quantities from other sources than
    # output_tokens (the server's final count per request) and accept_length
    stream_tokens: int | None = None  # the client's chunk-by-chunk count (successful requests)
    metrics_tokens: float | None = None  # /metrics generation_tokens_total over the level
    spec_verify_ct: int | None = None  # sum of the requests' spec_verify_ct (native /generate)
    metrics_verify_calls: float | None = None  # /metrics spec_verify_calls_total over the level
    # The requests' acceptance histograms summed (index n: verify steps that accepted exactly n
    # drafts); None unless every successful request carried one. tuner/decide/search/ reads the
    # acceptance at each draft position from it.
    accept_hist: list[int] | None = None
    # The batch the server ran: /metrics `num_running_reqs` sampled during the level (what a
    # per-batch-size schedule routes on; admission caps it below the client's concurrency; the
    # 90th percentile of the samples, metrics.running_batch says why)
    running_reqs_p90: float | None = None
    running_reqs_mean: float | None = None
    running_reqs_samples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelMetrics:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def accept_length(
    traces: Sequence[RequestTrace], counter_delta: dict[str, float] | None = None
) -> tuple[float | None, str]:
    """The level's own acceptance length and where it came from (module docstring)."""
    ok = [t for t in traces if t.ok and t.output_tokens]
    drafted = verified(ok)
    if drafted and all(t.spec_verify_ct for t in drafted):
        # SGLang's formula over the level: every request's tokens, one-token answers included
        # (their token came from the prefill, with no verify step)
        return tokens_per_verify(
            sum(t.output_tokens or 0 for t in ok), sum(t.spec_verify_ct or 0 for t in drafted)
        ), "meta_info"
    if counter_delta:
        gen = counter_delta.get("generation_tokens")
        from_counters = tokens_per_verify(gen, counter_delta.get("spec_verify_calls") or 0) if gen else None
        if from_counters is not None:
            return from_counters, "metrics"
    # the first token-bearing chunk is the prefill's token, not a verify step: N tokens over V
    # verify steps stream as V + 1 chunks. A stream of one token per chunk shows no speculation:
    # 1.0, as a server without it is defined to accept (not N / (N - 1)).
    counts = [[c for c in chunk_token_counts(t) if c > 0] for t in ok]
    tokens = sum(t.output_tokens or 0 for t in ok)
    if all(c <= 1 for cs in counts for c in cs):
        chunks = sum(len(cs) for cs in counts)
        return (tokens / chunks, "chunks") if chunks else (None, "none")
    steps = sum(max(0, len(cs) - 1) for cs in counts)
    if steps:
        return tokens / steps, "chunks"
    return None, "none"


def verified(ok: Sequence[RequestTrace]) -> list[RequestTrace]:
    """The requests that had verify steps to report: all but one-token answers, whose only token
    comes from the prefill (SGLang omits `spec_verify_ct` when nothing was drafted,
    tokenizer_manager `_calculate_spec_decoding_metrics`; older releases send 0). Without this a
    single one-token answer (an EOS first, a one-word reply) would leave its level's acceptance
    and histogram unknown."""
    return [t for t in ok if (t.output_tokens or 0) > 1]


def _error_key(message: str) -> str:
    """Group error messages by kind: numbers vary per request, HTTP status codes do not."""
    return re.sub(r"(?<!HTTP )\b\d+(\.\d+)?\b", "N", message)[:120]


def completion_time(t: RequestTrace) -> float:
    """When a request left the level: its stream closed (or its last chunk, or its send)."""
    if t.ended is not None:
        return t.ended
    return t.chunk_times[-1] if t.chunk_times else t.sent


def level_windows(
    traces: Sequence[RequestTrace],
    per_window: int,
    running: Sequence[RequestTrace] = (),
    until: float | None = None,
) -> list[tuple[float, float]]:
    """(tokens that arrived, seconds) per batch-means window of a level (tuner/measure/stats.py).

    The level's measured span runs from its first send to `until` (when the closed loop stopped
    sending: the completion after which fewer than C requests remained; default the last
    completion), cut at every `per_window`-th completion (C for a closed loop of C: about one
    generation of requests); the remainder joins the last window. Tokens of successful requests
    count when their chunk arrived inside the span, so the windows' sums are the level's
    `output_tokens_measured` and `measured_s`, and their ratio is `output_tok_s`. `running` are
    requests still streaming (the precision loop's look at a level in progress): their tokens so
    far count, their ends do not cut windows.
    """
    if not traces:
        return []
    m = max(1, int(per_window))
    ends = sorted(completion_time(t) for t in traces)
    if until is not None:
        ends = [e for e in ends if e <= until] or ends[:1]
    t0 = min(t.sent for t in traces)
    b = max(1, len(ends) // m)
    bounds = [t0] + [ends[j * m - 1] for j in range(1, b)] + [ends[-1]]
    tokens = [0.0] * b
    for t in list(traces) + list(running):
        if t.error is not None:
            continue
        for when, n in zip(t.chunk_times, chunk_token_counts(t), strict=False):
            if when > bounds[-1]:
                break
            j = bisect.bisect_left(bounds, when, 1, b) - 1
            tokens[min(max(j, 0), b - 1)] += n
    return [(tokens[j], bounds[j + 1] - bounds[j]) for j in range(b)]


@dataclass
class LevelSamples:
    """What a level's statistics are recomputed from (records.jsonl keeps it with the level):
    per successful request its latencies and tokens, and the throughput windows."""

    ttft_ms: list[float] = field(default_factory=list)
    tpot_ms: list[float | None] = field(default_factory=list)
    e2e_ms: list[float] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def r(v: float | None, nd: int) -> float | None:
            return None if v is None else round(v, nd)

        return {
            "ttft_ms": [r(v, 2) for v in self.ttft_ms],
            "tpot_ms": [r(v, 3) for v in self.tpot_ms],
            "e2e_ms": [r(v, 2) for v in self.e2e_ms],
            "output_tokens": list(self.output_tokens),
            "windows": [[round(y, 3), round(x, 6)] for y, x in self.windows],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> LevelSamples | None:
        if not d:
            return None
        return cls(
            ttft_ms=[float(v) for v in d.get("ttft_ms") or []],
            tpot_ms=[None if v is None else float(v) for v in d.get("tpot_ms") or []],
            e2e_ms=[float(v) for v in d.get("e2e_ms") or []],
            output_tokens=[int(v) for v in d.get("output_tokens") or []],
            windows=[(float(w[0]), float(w[1])) for w in d.get("windows") or [] if len(w) == 2],
        )

    @property
    def tpots(self) -> list[float]:
        return [v for v in self.tpot_ms if v is not None]

    def decode_totals(self) -> tuple[float, float]:
        """(tokens after the first, seconds they took), summed over the requests: their ratio is
        the decode rate the server's steps delivered, each request weighted by its tokens (the
        harmonic mean of the requests' rates, where `per_request_tok_s` is their plain mean)."""
        tokens = seconds = 0.0
        for tpot, n in zip(self.tpot_ms, self.output_tokens, strict=False):
            if tpot is not None and tpot > 0 and n >= 2:
                tokens += n - 1
                seconds += tpot * (n - 1) / 1000.0
        return tokens, seconds


def level_samples(concurrency: int, traces: Sequence[RequestTrace], until: float | None = None) -> LevelSamples:
    ok = [t for t in traces if t.ok and t.chunk_times]
    return LevelSamples(
        ttft_ms=[(ttft_s(t) or 0.0) * 1000.0 for t in ok],
        tpot_ms=[_ms(tpot_s(t)) for t in ok],
        e2e_ms=[(e2e_s(t) or 0.0) * 1000.0 for t in ok],
        output_tokens=[t.output_tokens or 0 for t in ok],
        windows=level_windows(traces, concurrency, until=until),
    )


def level_metrics(
    concurrency: int,
    traces: Sequence[RequestTrace],
    counter_delta: dict[str, float] | None = None,
    until: float | None = None,
) -> LevelMetrics:
    ok = [t for t in traces if t.ok]
    failed = [t for t in traces if not t.ok]
    starts = [t.sent for t in traces]
    ends = [x for t in traces for x in ([t.ended] if t.ended is not None else t.chunk_times[-1:])]
    wall = (max(ends) - min(starts)) if starts and ends else 0.0
    tokens = sum(t.output_tokens or 0 for t in ok)
    ttfts = [v for v in (ttft_s(t) for t in ok) if v is not None]
    tpots = [v for v in (tpot_s(t) for t in ok) if v is not None]
    e2es = [v for v in (e2e_s(t) for t in ok) if v is not None]
    rates = [v for v in (decode_rate(t) for t in ok) if v is not None]
    itls = [v for t in ok for v in itl_samples_s(t)]
    acc, source = accept_length(traces, counter_delta)
    errors: dict[str, int] = {}
    for t in failed:
        key = _error_key(t.error or "unknown")
        errors[key] = errors.get(key, 0) + 1
    status = "ok" if not failed else ("partial" if ok else "failed")
    windows = level_windows(traces, concurrency, until=until)
    tput = stats.ratio_interval(windows, len(ok)) if ok else None
    span_tokens = sum(y for y, _ in windows)
    span_s = sum(x for _, x in windows)
    ttft_iv = stats.quantile_interval([v * 1000.0 for v in ttfts])
    tpot_iv = stats.quantile_interval([v * 1000.0 for v in tpots])
    stream = [t.stream_tokens for t in ok]
    drafted = verified(ok)
    verify = [t.spec_verify_ct for t in drafted]
    delta = counter_delta or {}
    hist = sum_histograms([t.accept_hist for t in drafted]) if drafted else None
    return LevelMetrics(
        concurrency=concurrency,
        requests=len(traces),
        requests_ok=len(ok),
        requests_failed=len(failed),
        output_tokens=tokens,
        wall_s=wall,
        output_tok_s=(span_tokens / span_s) if ok and span_s > 0 else None,
        measured_s=span_s,
        output_tokens_measured=int(round(span_tokens)),
        per_request_tok_s=mean(rates),
        ttft_ms_p50=_ms(percentile(ttfts, 50)),
        ttft_ms_p99=_ms(percentile(ttfts, 99)),
        tpot_ms_p50=_ms(percentile(tpots, 50)),
        tpot_ms_p99=_ms(percentile(tpots, 99)),
        itl_ms_p50=_ms(percentile(itls, 50)),
        itl_ms_p99=_ms(percentile(itls, 99)),
        e2e_ms_p50=_ms(percentile(e2es, 50)),
        e2e_ms_p99=_ms(percentile(e2es, 99)),
        prompt_tokens_mean=mean(t.prompt_tokens for t in ok if t.prompt_tokens is not None),
        accept_length=acc,
        accept_length_source=source,
        status=status,
        errors=errors,
        output_tok_s_ci_low=None if tput is None else tput.low,
        output_tok_s_ci_high=None if tput is None else tput.high,
        samples=len(ok),
        windows=len(windows),
        precision_pct=None if tput is None or tput.rel_half_width is None else tput.rel_half_width * 100.0,
        ttft_ms_p50_ci_low=None if ttft_iv is None else ttft_iv.low,
        ttft_ms_p50_ci_high=None if ttft_iv is None else ttft_iv.high,
        tpot_ms_p50_ci_low=None if tpot_iv is None else tpot_iv.low,
        tpot_ms_p50_ci_high=None if tpot_iv is None else tpot_iv.high,
        stream_tokens=sum(v for v in stream if v is not None) if ok and all(v is not None for v in stream) else None,
        metrics_tokens=delta.get("generation_tokens"),
        spec_verify_ct=sum(v for v in verify if v) if drafted and all(verify) else None,
        metrics_verify_calls=delta.get("spec_verify_calls"),
        accept_hist=hist,
    )


def sum_histograms(hists: Sequence[Sequence[int] | None]) -> list[int] | None:
    """Element-wise sum of acceptance histograms of different lengths (a request's histogram is as
    long as its server's deepest chain); None when one is missing, so a level's histogram always
    covers all its requests."""
    if not hists or any(h is None for h in hists):
        return None
    out: list[int] = []
    for h in hists:
        assert h is not None
        if len(h) > len(out):
            out.extend([0] * (len(h) - len(out)))
        for i, n in enumerate(h):
            out[i] += int(n)
    return out


_PROM_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")

# Prometheus counters that give a level's acceptance length (docs/reference/sglang.md §3.2); SGLang
# prefixes `sglang:`, some exporters `sglang_`.
COUNTERS = {
    "generation_tokens": ("sglang:generation_tokens_total", "sglang_generation_tokens_total"),
    "spec_verify_calls": ("sglang:spec_verify_calls_total", "sglang_spec_verify_calls_total"),
}


def _prometheus_values(
    text: str, series: Mapping[str, tuple[str, ...]], combine: Callable[[float, float], float]
) -> dict[str, float]:
    """Each metric of `series` (key -> its exported names), its label sets combined with `combine`."""
    wanted = {name: key for key, names in series.items() for name in names}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if not m or m.group(1) not in wanted:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        key = wanted[m.group(1)]
        out[key] = combine(out[key], value) if key in out else value
    return out


def parse_prometheus_counters(text: str) -> dict[str, float]:
    """Sum each counter of `COUNTERS` over its label sets (TP ranks, models)."""
    return _prometheus_values(text, COUNTERS, lambda a, b: a + b)


# Gauges sampled during a level. SGLang exports one series per scheduler (label sets differ by
# tp_rank / dp_rank); a schedule routes each scheduler on its own running batch, so the largest
# label set is the batch that matters (with TP, every rank reports the same batch).
GAUGES = {
    "num_running_reqs": ("sglang:num_running_reqs", "sglang_num_running_reqs"),
}


def parse_prometheus_gauges(text: str) -> dict[str, float]:
    """The largest value of each gauge of `GAUGES` over its label sets."""
    return _prometheus_values(text, GAUGES, max)


def running_batch(
    samples: Sequence[tuple[float, float]], traces: Sequence[RequestTrace], until: float | None
) -> tuple[float | None, float | None, int]:
    """(90th percentile, mean, count) of a level's running-request samples, each timed at the
    moment its scrape was sent (tuner/run/client.py `running_samples`); (None, None, 0) when none
    was taken while the level's requests were in flight.

    SGLang does not keep the gauge live: the scheduler sets it only when it logs its stats
    (0.5.9 python/sglang/srt/managers/scheduler_metrics_mixin.py): at every prefill batch, right
    after that batch's first tokens are streamed, to the running batch *before* the new requests
    join it (`log_prefill_stats`, PrefillStats.running_bs); every `--decode-log-interval` decode
    steps, 40 by default (scheduler_output_processor_mixin.py `process_batch_result_decode`,
    server_args.py), to the decode batch (`log_decode_stats`); and while idle at most every 30 s
    (scheduler_runtime_checker_mixin.py `check_memory`). Between those the gauge holds whatever the
    previous level left. So a sample is this level's only when its scrape went out after the level's
    first token arrived (the level's first prefill has set the gauge by then) and before its last
    request ended; one sent earlier reads the previous level (a short level may have no other).
    Of those, the steady span is preferred: from the first completion (the closed loop's first
    wave is admitted at once) to the moment the loop stopped sending (the tail drains). Prefill
    updates read low; the upper part of the samples is the decode batch a schedule routes on."""
    firsts = [t.chunk_times[0] for t in traces if t.chunk_times]
    if not firsts:
        return None, None, 0
    begin, end = min(firsts), max(completion_time(t) for t in traces)
    in_flight = [(t, v) for t, v in samples if begin <= t <= end]
    start = min(completion_time(t) for t in traces)
    steady = [v for t, v in in_flight if t >= start and (until is None or t <= until)]
    values = steady or [v for _, v in in_flight]
    if not values:
        return None, None, 0
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]  # nearest rank: of 10 samples, the 9th
    return round(p90, 2), round(sum(ordered) / len(ordered), 2), len(ordered)


def counter_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float]:
    """after - before for counters present in both (a restart in between gives no delta)."""
    if not before or not after:
        return {}
    out = {}
    for key, value in after.items():
        if key in before and value >= before[key]:
            out[key] = value - before[key]
    return out
