"""Cross-checks: the same quantity of one level from sources that do not share a code path.

- Output tokens: the client's chunk-by-chunk count (`stream_tokens`), the server's final count per
  request (`output_tokens`: `meta_info.completion_tokens` / `usage.completion_tokens`, what the
  throughput counts), and the server's own counter over the level (`/metrics`
  `sglang:generation_tokens_total` before and after).
- Acceptance length: the client's (completion tokens / `spec_verify_ct` of the level's requests)
  against the server's counters over the same window (`generation_tokens_total` /
  `spec_verify_calls_total`).

A disagreement above `TOLERANCE` is a warning in the report, never a silent number: it means
tokens the client did not see (cut streams, failed requests the server still counted), traffic
from someone else on the server during the level, or a server that counts differently from what
it streams. Pure: from the level records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sglang_utils.sglang_verify import tokens_per_verify

from ..data.records import LevelRecord

TOLERANCE = 0.01


@dataclass
class CrossCheck:
    levels: int = 0  # levels with at least one comparison
    comparisons: int = 0
    warnings: list[str] = field(default_factory=list)
    max_diff_pct: dict[str, float] = field(default_factory=dict)  # comparison -> largest |diff| %


def _diff(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-9)


def check_levels(levels: Iterable[LevelRecord]) -> CrossCheck:
    out = CrossCheck()
    for lv in levels:
        m = lv.metrics
        if not m.requests_ok:
            continue
        where = f"{lv.config_id} C={lv.concurrency} T={lv.temperature:g} rep {lv.repeat}"
        if lv.deployment > 1:
            where += f" dep {lv.deployment}"
        pairs: list[tuple[str, str, float, float]] = []
        if m.stream_tokens is not None:
            pairs.append(("tokens: client stream vs server usage", "client", m.stream_tokens, m.output_tokens))
        if m.metrics_tokens is not None:
            pairs.append(("tokens: server usage vs /metrics", "usage", m.output_tokens, m.metrics_tokens))
        client_acc = tokens_per_verify(m.output_tokens, m.spec_verify_ct or 0)
        server_acc = tokens_per_verify(m.metrics_tokens or 0, m.metrics_verify_calls or 0)
        if client_acc is not None and server_acc is not None and m.metrics_tokens:
            pairs.append(("acceptance: client spec_verify_ct vs /metrics", "client", client_acc, server_acc))
        if not pairs:
            continue
        out.levels += 1
        for name, _who, a, b in pairs:
            out.comparisons += 1
            d = _diff(a, b)
            out.max_diff_pct[name] = round(max(out.max_diff_pct.get(name, 0.0), d * 100.0), 3)
            if d > TOLERANCE:
                fa = f"{a:.3f}" if isinstance(a, float) and not float(a).is_integer() else f"{a:.0f}"
                fb = f"{b:.3f}" if isinstance(b, float) and not float(b).is_integer() else f"{b:.0f}"
                extra = f", {m.requests_failed} failed request(s)" if m.requests_failed else ""
                out.warnings.append(f"{where}: {name} disagree by {d * 100:.1f}% ({fa} vs {fb}{extra})")
    return out
