"""The project's own benchmark client (tuner/run/client.py), as the tuner drives a level with it.

The realism tests measure the emulator the way the tuner measures a real server: streamed requests
through `BenchClient`, read back as `RequestTrace`s and `LevelMetrics`. The imports live here only,
so a move of the tuner's modules touches one file of the emulator's tests.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tuner.measure.metrics import LevelMetrics, RequestTrace, counter_delta, level_metrics, sum_histograms
from tuner.run.client import BenchClient, ClientOptions


def run_level(url: str, concurrency: int, requests: int, **opts: Any) -> tuple[list[RequestTrace], LevelMetrics]:
    """One closed-loop level: `concurrency` workers, `requests` requests in all."""

    async def go() -> tuple[list[RequestTrace], LevelMetrics]:
        async with BenchClient(ClientOptions(url=url, **opts)) as cl:
            before = await cl.counters()
            traces = await cl.run_level(concurrency, requests)
            after = await cl.counters()
        return traces, level_metrics(concurrency, traces, counter_delta(before, after))

    return asyncio.run(go())


def hist_accept_length(traces: list[RequestTrace]) -> float:
    """Tokens per verify step from SGLang's per-request histograms of accepted drafts
    (`spec_accept_histogram`): 1 + mean drafts accepted. Unlike completion tokens / verify calls it
    is not biased by the prefill's token or by the last step's cut at max tokens."""
    return _mean_from(_sum_hists(traces))


def per_request_accept_lengths(traces: list[RequestTrace]) -> dict[int, float]:
    """Each request's own tokens per verify step (from its histogram), by prompt index."""
    return {t.index: _mean_from(t.accept_hist or []) for t in traces if t.ok}


def position_acceptance(traces: list[RequestTrace]) -> list[float]:
    """a_j = P(draft j accepted | drafts 1..j-1 were), read from the summed histograms."""
    h = _sum_hists(traces)
    out = []
    for j in range(1, len(h)):
        reached = sum(h[j - 1 :])
        out.append(sum(h[j:]) / reached if reached else float("nan"))
    return out


def _sum_hists(traces: list[RequestTrace]) -> list[int]:
    """The level's histogram as the tuner sums it (tuner/measure/metrics.py `sum_histograms`), over
    the requests that carried one."""
    summed = sum_histograms([t.accept_hist for t in traces if t.ok and t.accept_hist])
    assert summed, "no request carried spec_accept_histogram"
    return summed


def _mean_from(h: list[int]) -> float:
    steps = sum(h)
    return 1.0 + sum(n * c for n, c in enumerate(h)) / steps if steps else float("nan")
