"""Service-level objectives: `--slo ttft_p99_ms=500,tpot_p99_ms=50,e2e_p99_ms=20000`.

Two questions per cell, both from the per-request samples a level keeps (tuner/measure/metrics.py
`LevelSamples`), so `report DIR --slo ...` can ask them again of a finished sweep:

- **goodput**: output tokens per second of the requests that succeeded and met *every* limit:
  the level's `output_tok_s` times the share of its output tokens that came from such requests
  (so that goodput <= throughput, measured over the same span). A request meets a limit when its own value is at or under it (the
  percentile in the key is for the cell, not the request). This is SGLang's rule for
  `bench_serving --goodput` (`sgl-project/sglang python/sglang/benchmark/goodput.py`,
  `calculate_goodput`: a request counts only if it succeeds and meets every given SLO; a
  one-token response has TPOT 0) and DistServe's notion of goodput (Zhong et al., "DistServe",
  OSDI 2024, arXiv:2401.09670: throughput that meets the latency objectives), counted in tokens
  rather than requests so that it compares with `output_tok_s`.
- **meets the SLO**: every limited metric's percentile over the cell's requests is at or under its
  limit (`ttft_p99_ms=500`: the cell's p99 TTFT <= 500 ms). With fewer than 100 requests a p99 is
  close to the maximum; the report says how many requests each cell had.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..measure.metrics import LevelSamples
from ..measure.stats import percentile
from .flags import BadInput, parse_float

METRICS = ("ttft", "tpot", "e2e")
_KEY = re.compile(r"^(?P<metric>[a-z0-9]+)_p(?P<pct>\d+(?:\.\d+)?)_ms$")


@dataclass(frozen=True)
class Limit:
    metric: str  # ttft | tpot | e2e
    percentile: float
    limit_ms: float

    @property
    def key(self) -> str:
        return f"{self.metric}_p{pct_text(self.percentile)}_ms"


def pct_text(pct: float) -> str:
    """A percentile as written back (sweep.json, the report): exact, never rounded (`:g` wrote
    99.99999 as 100, which the next read refused) nor in exponent form (1e-05 is no key)."""
    return f"{pct:.10f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class Slo:
    limits: tuple[Limit, ...]

    def to_json(self) -> dict[str, float]:
        return {lim.key: lim.limit_ms for lim in self.limits}

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> Slo | None:
        if not d:
            return None
        return parse_slo(",".join(f"{k}={v}" for k, v in d.items()))

    def describe(self) -> str:
        return ", ".join(
            f"{lim.metric.upper()} p{pct_text(lim.percentile)} <= {lim.limit_ms:g} ms" for lim in self.limits
        )


def parse_slo(text: Any, flag: str = "--slo") -> Slo | None:
    """`ttft_p99_ms=500,tpot_p99_ms=50` -> Slo; empty -> None; BadInput naming the flag otherwise."""
    if text is None or not str(text).strip():
        return None
    limits: dict[str, Limit] = {}
    for part in str(text).split(","):
        part = part.strip()
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(flag, f"{part!r} is not KEY=MILLISECONDS (e.g. ttft_p99_ms=500)")
        m = _KEY.match(key)
        if m is None or m.group("metric") not in METRICS:
            raise BadInput(
                flag,
                f"unknown key {key!r}: use METRIC_pNN_ms with METRIC one of {', '.join(METRICS)} (e.g. tpot_p99_ms)",
            )
        pct = float(m.group("pct"))
        if not 0 < pct < 100:
            raise BadInput(flag, f"{key}: the percentile must be between 0 and 100")
        if float(pct_text(pct)) != pct:
            raise BadInput(flag, f"{key}: a percentile takes at most 10 decimals")
        limit = parse_float(flag, value.strip(), lo=None)
        if limit < 0:
            raise BadInput(flag, f"{key}={value.strip()}: a limit cannot be negative")
        if limit == 0:
            raise BadInput(flag, f"{key}={value.strip()}: a limit of 0 ms can never be met")
        lim = Limit(m.group("metric"), pct, limit)
        if lim.key in limits:  # ttft_p99_ms and ttft_p99.0_ms are one limit
            raise BadInput(flag, f"{key} is given twice ({lim.key})")
        limits[lim.key] = lim
    return Slo(tuple(limits.values()))


def _values(s: LevelSamples, metric: str) -> list[float | None]:
    if metric == "ttft":
        return list(s.ttft_ms)
    if metric == "tpot":
        return list(s.tpot_ms)
    return list(s.e2e_ms)


@dataclass(frozen=True)
class SloResult:
    meets: bool
    goodput_tok_s: float
    attainment: float  # share of the requests sent that met every limit (a failed one met none)
    observed: dict[str, float | None]  # key -> the cell's percentile
    requests: int


def evaluate(slo: Slo, levels: Sequence[tuple[LevelSamples | None, float | None, int]]) -> SloResult | None:
    """One cell: its levels' samples with their aggregate output tok/s and how many of their
    requests failed (the samples hold the successful ones only). A failed request meets no limit:
    it counts against the attainment (DistServe's, over every request; SGLang's bench_serving
    `calculate_goodput` counts a request only if it succeeded), and a percentile the failed share
    reaches is not met. None when no samples were kept."""
    kept = [(s, w, f) for s, w, f in levels if s is not None and s.ttft_ms]
    if not kept:
        return None
    goodputs: list[float] = []
    good = total = 0
    lost = sum(max(0, f) for _, _, f in kept)
    for s, tput, _failed in kept:
        tokens = 0
        # no inter-token interval (a one-token answer): TPOT 0, as SGLang counts it
        series = [(lim.limit_ms, [0.0 if v is None else v for v in _values(s, lim.metric)]) for lim in slo.limits]
        for i, n in enumerate(s.output_tokens):
            met = all((vals[i] if i < len(vals) else 0.0) <= limit for limit, vals in series)
            total += 1
            if met:
                good += 1
                tokens += n
        all_tokens = sum(s.output_tokens)
        goodputs.append((tput or 0.0) * tokens / all_tokens if all_tokens else 0.0)
    observed: dict[str, float | None] = {}
    meets = True
    for lim in slo.limits:
        # the percentile the cell publishes (tpot_ms_pNN: one-token answers have no TPOT and are
        # left out, as SGLang's bench_serving leaves them out of its TPOT percentiles); their TPOT
        # counts as 0 only in the per-request goodput test above, as SGLang's `all_tpots` does
        pooled = [v for s, _, _ in kept for v in _values(s, lim.metric) if v is not None]
        if not pooled and any(_values(s, lim.metric) for s, _, _ in kept):
            pooled = [0.0]  # every answer one token long: no inter-token time at all
        val = percentile(pooled, lim.percentile)
        observed[lim.key] = val
        if val is None or val > lim.limit_ms:
            meets = False
        if lost and lost / (total + lost) > (100.0 - lim.percentile) / 100.0:
            meets = False  # the percentile falls on a failed request: past every limit
    total += lost
    return SloResult(
        meets=meets,
        goodput_tok_s=sum(goodputs) / len(goodputs),
        attainment=good / total if total else 0.0,
        observed=observed,
        requests=total,
    )
