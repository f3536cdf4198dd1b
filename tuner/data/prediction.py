"""What the model-guided search (tuner/decide/search/) predicted for a configuration, as data.

A prediction is kept in records.jsonl twice over: in a `prediction` record written just before a
predicted configuration is deployed (so the report can set it against what was then measured), and
in the `skip` record of a configuration the search decided not to deploy (so the report, `--resume`
and `report DIR` keep the numbers the decision rested on). Both carry this one shape, with one
`to_json` / `from_json`; reading is tolerant like every record's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class Band:
    """A predicted value and the interval the measurement is expected to land in."""

    mean: float
    lo: float
    hi: float

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi

    def interval_text(self, fmt: Callable[[float], str]) -> str:
        """The interval in words, its ends written by `fmt`; an end the capacity fit leaves open
        (one depth measured on that side only) is said as such, not printed as `-inf`/`inf`."""
        lo, hi = math.isfinite(self.lo), math.isfinite(self.hi)
        if lo and hi:
            return f"{fmt(self.lo)}-{fmt(self.hi)}"
        if hi:
            return f"at most {fmt(self.hi)}"
        return f"at least {fmt(self.lo)}" if lo else "unbounded"

    def to_json(self) -> dict[str, float | None]:
        """An end left open (a capacity band with one depth measured on that side is unbounded there)
        is written as null: records.jsonl stays strict JSON (json.dumps would write `Infinity`,
        which jq and most JSON parsers other than Python's refuse)."""

        def end(x: float) -> float | None:
            return round(x, 4) if math.isfinite(x) else None

        return {"mean": round(self.mean, 4), "lo": end(self.lo), "hi": end(self.hi)}

    @classmethod
    def from_json(cls, d: Any) -> Band | None:
        if not isinstance(d, Mapping):
            return None
        mean, lo, hi = _num(d.get("mean")), _num(d.get("lo")), _num(d.get("hi"))
        if mean is None:
            return None
        # a null end is an open one (to_json); an absent one the value itself
        lo = lo if lo is not None else (-math.inf if "lo" in d else mean)
        hi = hi if hi is not None else (math.inf if "hi" in d else mean)
        return cls(mean, lo, hi)


def _band(d: Mapping[str, Any], key: str) -> Band | None:
    return Band.from_json(d.get(key))


@dataclass(frozen=True)
class LevelPrediction:
    """One concurrency level: aggregate and per-request tok/s, the running batch the server would
    hold there, and the chance that this configuration changes the level's pick."""

    concurrency: int
    output_tok_s: Band
    per_request_tok_s: Band | None = None
    running: Band | None = None
    chance: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "output_tok_s": self.output_tok_s.to_json(),
            "per_request_tok_s": None if self.per_request_tok_s is None else self.per_request_tok_s.to_json(),
            "running": None if self.running is None else self.running.to_json(),
            "chance": round(self.chance, 4),
        }

    @classmethod
    def from_json(cls, d: Any) -> LevelPrediction | None:
        if not isinstance(d, Mapping):
            return None
        agg = _band(d, "output_tok_s")
        conc = d.get("concurrency")
        if agg is None or not isinstance(conc, int):
            return None
        return cls(
            concurrency=conc,
            output_tok_s=agg,
            per_request_tok_s=_band(d, "per_request_tok_s"),
            running=_band(d, "running"),
            chance=_num(d.get("chance")) or 0.0,
        )


@dataclass(frozen=True)
class Prediction:
    """Everything the search predicted for one configuration at one moment of the sweep.

    `can_run` is False when the server is predicted not to start or not to admit a request (an
    empty KV pool, no running slot): then `reason` says which, and no level is predicted.
    `basis` names the measured configurations the fit used; `step_model` the step-time form
    (docs/tuner.md "Model-guided search"); `widened` the factor every interval's width was scaled
    by after earlier measurements contradicted the model (1: never).
    """

    levels: tuple[LevelPrediction, ...] = ()
    accept_length: Band | None = None
    max_total_num_tokens: Band | None = None
    max_running_requests: Band | None = None
    can_run: bool = True
    reason: str | None = None
    basis: tuple[str, ...] = ()
    step_model: str = "linear"
    widened: float = 1.0
    chance: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def level(self, concurrency: int) -> LevelPrediction | None:
        for lp in self.levels:
            if lp.concurrency == concurrency:
                return lp
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "levels": [lp.to_json() for lp in self.levels],
            "accept_length": None if self.accept_length is None else self.accept_length.to_json(),
            "max_total_num_tokens": None if self.max_total_num_tokens is None else self.max_total_num_tokens.to_json(),
            "max_running_requests": None if self.max_running_requests is None else self.max_running_requests.to_json(),
            "can_run": self.can_run,
            "reason": self.reason,
            "basis": list(self.basis),
            "step_model": self.step_model,
            "widened": round(self.widened, 3),
            "chance": round(self.chance, 4),
        }
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_json(cls, d: Any) -> Prediction | None:
        if not isinstance(d, Mapping):
            return None
        levels = tuple(lp for lp in (LevelPrediction.from_json(x) for x in d.get("levels") or []) if lp is not None)
        extra = d.get("extra")
        return cls(
            levels=levels,
            accept_length=_band(d, "accept_length"),
            max_total_num_tokens=_band(d, "max_total_num_tokens"),
            max_running_requests=_band(d, "max_running_requests"),
            can_run=bool(d.get("can_run", True)),
            reason=d.get("reason") if isinstance(d.get("reason"), str) else None,
            basis=tuple(str(x) for x in d.get("basis") or []),
            step_model=str(d.get("step_model") or "linear"),
            widened=_num(d.get("widened")) or 1.0,
            chance=_num(d.get("chance")) or 0.0,
            extra=dict(extra) if isinstance(extra, Mapping) else {},
        )
