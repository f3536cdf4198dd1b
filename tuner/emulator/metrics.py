"""Prometheus text for /metrics with SGLang's metric names (docs/reference/sglang.md §3.2).

Written by hand (standard library only) in the text exposition format that prometheus_client
produces: `# HELP`, `# TYPE`, counters as `name_total`, histograms as `_bucket`/`_sum`/`_count`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

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


def labels_text(model_name: str) -> str:
    """SGLang 0.5.9's scheduler labels (docs/reference/sglang.md §3.2); only TP0 exports by default."""
    esc = model_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'model_name="{esc}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'


def render(
    labels: str,
    gauges: list[tuple[str, str, float]],
    counters: list[tuple[str, str, list[tuple[str, float]]]],
    histograms: list[tuple[str, str, Histogram]],
) -> str:
    """Exposition text; names are given without the `sglang:` prefix and counters without `_total`.
    Each counter has one or more series: (extra labels, e.g. `mode="decode"` or "", value)."""
    out: list[str] = []
    for name, help_, value in gauges:
        full = f"sglang:{name}"
        out += [f"# HELP {full} {help_}", f"# TYPE {full} gauge", f"{full}{{{labels}}} {float(value)}"]
    for name, help_, series in counters:
        full = f"sglang:{name}"
        out += [f"# HELP {full}_total {help_}", f"# TYPE {full}_total counter"]
        for extra, value in series:
            lab = f"{labels},{extra}" if extra else labels
            out.append(f"{full}_total{{{lab}}} {float(value)}")
    for name, help_, hist in histograms:
        full = f"sglang:{name}"
        out += [f"# HELP {full} {help_}", f"# TYPE {full} histogram"]
        out += hist.lines(full, labels)
    return "\n".join(out) + "\n"
