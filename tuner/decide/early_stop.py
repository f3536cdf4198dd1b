"""The grid's early stop: whether a series' newest depth is past its peak at every level.

Judged on the same intervals and the same rule of who competes as every choice
(tuner/decide/analysis.py `competes`), so a depth that can never be recommended cannot get the
deeper ones skipped either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .analysis import PointStats, competes


@dataclass
class EarlyStop:
    stop: bool
    detail: str
    below: dict[int, tuple[str, float, float]] = field(default_factory=dict)


def early_stop(series: Sequence[dict[int, PointStats]], levels: Sequence[int]) -> EarlyStop:
    """Whether every level is past its peak at the newest (deepest) configuration of a series.

    `series` holds, ascending in steps, each measured configuration's points by concurrency.
    The newest is "past the peak" at a level when its throughput is below the best of the
    shallower configurations beyond noise; a level it did not measure counts as
    unknown, which never stops the sweep; so does a cell that does not compete (`competes`): a fast
    but wrong shallow depth is no peak to fall from."""
    if len(series) < 2:
        return EarlyStop(False, "fewer than two configurations measured")
    newest = series[-1]
    below: dict[int, tuple[str, float, float]] = {}
    for c in levels:
        new = newest.get(c)
        prev = [pts[c] for pts in series[:-1] if c in pts and competes(pts[c])]
        if new is None or not competes(new) or not prev:
            return EarlyStop(False, f"concurrency {c} not comparable")
        best = max(prev, key=lambda p: p.mean)
        if not best.beats(new):
            return EarlyStop(False, f"concurrency {c} still at or near its best")
        below[c] = (best.config_id, best.mean, new.mean)
    parts = [f"C={c}: {new:.0f} < {b:.0f} ({cid})" for c, (cid, b, new) in below.items()]
    return EarlyStop(True, "throughput fell past its peak at every level: " + "; ".join(parts), below)
