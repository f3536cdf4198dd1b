"""Deployment-to-deployment noise: measured from redeploys, pooled over configurations.

A level's own interval (tuner/measure/stats.py) covers the noise inside one run. Two configurations of a
sweep are measured in two deployments, and a restart moves every number of a deployment together
(GPU clocks, memory placement, what else runs on the machine: on a real server 1-2% between two
starts of one configuration is common). A verdict "A beats B beyond noise" that ignores that part
is reversed by the next sweep as often as that part exceeds the margin (issue #19: two kept seed
sweeps ranked k3 and k2 at concurrency 64 in opposite orders, each "beyond noise").

That part is a property of the machine, not of one configuration, so it is estimated once for the
sweep (once per temperature: each temperature's cells are aggregated apart), pooled over every configuration deployed more than once (the confirmation round's redeploys,
or `--repeat-deploys`), and carried by every cell's interval. Per cell (configuration c, level L)
and deployment j, on the relative scale (values divided by the cell's mean):

    x_cLj = mu_cL * (1 + d_cLj + e_cLj)

with e the level's own noise and d what a new deployment adds (restart, and the level-to-level
draw beyond the requests' noise). A cell measured in one deployment is off its long-run mean by
d + e, and the spread of repeated deployments of one configuration measures exactly that, own noise
included. So the band rests on the pooled spread of the deployment values themselves:

    s^2 = sum_cells SS_cell / sum_cells (n_cell - 1)

with SS_cell the sum of squared relative deviations of the cell's deployment values from their
mean. Its degrees of freedom are counted by starts, not cells: the levels of one deployment share
its restart, so a redeploy measured at five levels is one new draw of the restart, not five.
df = sum over configurations of (deployments - 1). A cell measured in n deployments gets the
relative half-width

    h = max(t975(df) * s / sqrt(n), sqrt(sum_j h_j^2) / n)

around the mean of its deployments (h_j: each deployment's own half-width, the t interval over its
repeats where it was measured in several, never narrower than its requests' own; the second term
keeps a level noisier than the pooled spread at its own width, so the band never narrows what a
cell's own repeats show). With one extra start t975(1) = 12.7: a
single redeploy measures the spread but cannot bound it; with two, 4.30; with three, 3.18.

Why not the restart component alone (s^2 minus what the levels' own intervals explain, the method
of moments)? On two extra starts that difference is at or below zero whenever the deployments
agree better than the requests' noise predicts: in an earlier bench/coverage.md run (code 180e5b6,
its data since replaced; `git show daead48:bench/coverage.md`), where each redeploy re-measured
every level, the noisy ones among them, it was 0 in four of eight sweeps, and intervals built on it
held the pooled mean in 85% of cells, against 94% on the spread itself. s^2 is a sum of squares, never truncated, and t975(df) on it is the interval's own
quantile. The component is still reported (`rel_sd`: how much of the spread is restart beyond the
requests' noise). What that costs, and the coverage it buys, is measured in bench/coverage.md.

Pure functions, standard library only; nothing here reads a profile or any machine's constants:
only the level records (what the server's answers measured).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .stats import Interval, combine, t975

# (value, the level's own interval or None, deployment) per level of a cell, as tuner/measure/stats.py
# `combine` takes them.
Row = tuple[float, Interval | None, int]
Z975 = 1.959964


@dataclass(frozen=True)
class RestartNoise:
    """The pooled deployment-to-deployment noise of one sweep (relative, one deployment)."""

    rel_sd: float  # the restart component: the spread beyond the levels' own noise (>= 0; reported)
    df: int  # extra starts it rests on (sum over configurations of deployments - 1)
    cells: int  # cells (configuration x level) with two deployments or more
    configs: int  # configurations deployed more than once
    raw_rel_sd: float  # sd of one deployment's value around its cell's mean, own noise included: the band's

    @property
    def t(self) -> float:
        return t975(max(1, self.df))

    @property
    def band_rel(self) -> float:
        """The half-width one deployment's value carries (t975(df) x the deployments' spread)."""
        return self.t * self.raw_rel_sd

    def to_dict(self) -> dict[str, object]:
        return {
            "rel_sd_pct": round(self.rel_sd * 100.0, 3),
            "raw_rel_sd_pct": round(self.raw_rel_sd * 100.0, 3),
            "df": self.df,
            "t975": round(self.t, 3),
            "band_pct": round(self.band_rel * 100.0, 3),
            "cells": self.cells,
            "configs": self.configs,
        }

    def text(self) -> str:
        return (
            f"deployment-to-deployment spread {self.raw_rel_sd * 100:.2f}% ({self.rel_sd * 100:.2f}% beyond the "
            f"levels' own noise; one deployment's 95% band +-{self.band_rel * 100:.1f}%: t={self.t:.2f} on "
            f"{self.df} extra start(s), pooled over {self.cells} cell(s) of {self.configs} configuration(s))"
        )


def _own_sd(value: float, iv: Interval | None) -> float:
    """The relative sd a level's own interval states: its half-width over the normal quantile (the
    rows given to `pool` carry intervals rescaled to 1.96 standard errors, tuner/decide/analysis.py
    `interval_rows(z=True)`, so that exactly the levels' own noise is taken out)."""
    if iv is None or value <= 0:
        return 0.0
    return (iv.half_width / value) / Z975


def _by_deployment(rows: Sequence[Row]) -> dict[int, tuple[float, float]]:
    """deployment -> (its mean value, its relative own sd), over that deployment's repeats."""
    groups: dict[int, list[tuple[float, float]]] = {}
    for value, iv, dep in rows:
        if value is None or value <= 0:
            continue
        groups.setdefault(int(dep), []).append((float(value), _own_sd(float(value), iv)))
    out: dict[int, tuple[float, float]] = {}
    for dep, vals in groups.items():
        k = len(vals)
        mean = sum(v for v, _ in vals) / k
        own = math.sqrt(sum(s * s for _, s in vals)) / k
        out[dep] = (mean, own)
    return out


def pool(cells: Mapping[tuple[str, int], Sequence[Row]]) -> RestartNoise | None:
    """The pooled deployment component from every cell ((config_id, level) -> rows) measured in two
    deployments or more; None when no configuration was measured twice."""
    ss = own_term = 0.0
    n_minus_1 = 0
    deps_per_config: dict[str, set[int]] = {}
    n_cells = 0
    for (cid, _level), rows in cells.items():
        deps = _by_deployment(rows)
        n = len(deps)
        if n < 2:
            continue
        n_cells += 1
        mean = sum(m for m, _ in deps.values()) / n
        ss += sum(((m - mean) / mean) ** 2 for m, _ in deps.values())
        own_term += sum(s * s for _, s in deps.values()) * (1.0 - 1.0 / n)
        n_minus_1 += n - 1
        deps_per_config.setdefault(cid, set()).update(deps)
    if n_cells == 0 or n_minus_1 == 0:
        return None
    df = sum(len(d) - 1 for d in deps_per_config.values())
    var_d = max(0.0, (ss - own_term) / n_minus_1)
    return RestartNoise(
        rel_sd=math.sqrt(var_d),
        df=max(1, df),
        cells=n_cells,
        configs=len(deps_per_config),
        raw_rel_sd=math.sqrt(ss / n_minus_1),
    )


def pool_stats(stats: Mapping[tuple[str, int], Any]) -> RestartNoise | None:
    """`pool` over a sweep's cells (tuner/decide/analysis.py PointStats: complete ones, their
    throughput rows); None when no configuration was measured in two deployments."""
    return pool({k: p.interval_rows("output_tok_s", z=True) for k, p in stats.items() if not p.partial})


def widen(rows: Sequence[Row], noise: RestartNoise) -> Interval | None:
    """A cell's interval over deployments: around the mean of its deployments' values, relative
    half-width max(t s / sqrt(n), sqrt(sum h_j^2) / n) (module docstring)."""
    deps = _by_deployment(rows)
    if not deps:
        return None
    n = len(deps)
    est = sum(m for m, _ in deps.values()) / n
    own_hw = []
    for dep, (_mean, sd) in deps.items():
        # a deployment measured in repeats: the t interval over them (tuner/measure/stats.py `combine`)
        iv = combine([r for r in rows if int(r[2]) == dep and r[0] is not None and r[0] > 0], floor=False)
        rep = iv.rel_half_width if iv is not None and iv.noise == "repeats" else None
        own_hw.append(max(sd * Z975, rep or 0.0))
    band = noise.band_rel / math.sqrt(n)
    rel = max(band, math.sqrt(sum(h * h for h in own_hw)) / n)
    samples = sum(iv.n for _v, iv, _d in rows if iv is not None) or len(rows)
    return Interval(est, est * (1.0 - rel), est * (1.0 + rel), samples, "deployments", shared_rel=band)


# -- the confirmation round ----------------------------------------------------------------------
def precise_level(
    cells: Mapping[tuple[str, int], Sequence[Row]],
    levels: Sequence[int],
    requests: Mapping[tuple[str, int], int] | None = None,
) -> int | None:
    """The target level the sweep measured most precisely: the smallest median relative half-width
    of the levels' own intervals over its cells (the lower level on a tie); None when no target level
    has one.

    Where a target level has cells measured in one window (no interval of their own: a fixed
    `--requests-per-level` at high concurrency), their precision is unknown, not poor, and the
    levels with an interval may be the noisiest (a 4-request concurrency 1): then the level with the
    most requests per cell (`requests`, (config, level) -> requests measured) is taken instead, the
    higher on a tie. (Taking the 4-request level made two extra starts of a machine with 1.5%
    restart noise read +-29.5% and tie every depth.)

    A restart is one draw shared by every level of a deployment, so one level measures it; the most
    precise one mixes the least of the requests' own noise into the deployments' spread, which every
    interval's band is then built on. A confirmation start measures that level only: the extra start
    costs its deployment and one level, not every level again."""
    per_level: dict[int, list[float]] = {}
    blind: set[int] = set()  # levels with a cell measured without an interval
    for (_cid, level), rows in cells.items():
        if level not in levels:
            continue
        for value, iv, _dep in rows:
            if iv is not None and value and value > 0:
                per_level.setdefault(int(level), []).append(iv.half_width / float(value))
            elif value and value > 0:
                blind.add(int(level))
    if blind and requests:
        counts: dict[int, list[int]] = {}
        for (cid, level), n in requests.items():
            if level in levels and (cid, level) in cells and n > 0:
                counts.setdefault(int(level), []).append(int(n))
        if counts:
            return max(counts, key=lambda lv: (statistics.median(counts[lv]), lv))
    if not per_level:
        return None
    return min(per_level, key=lambda lv: (statistics.median(per_level[lv]), lv))


@dataclass(frozen=True)
class Contender:
    """A configuration the confirmation round redeploys, and the levels where its verdict is in doubt
    (the redeploy itself measures `precise_level`)."""

    config_id: str
    levels: tuple[int, ...]
    margin_pct: float  # the closest margin it is part of (best vs it, or it vs the runner-up)
    why: str


@dataclass(frozen=True)
class CellView:
    """What the planner needs of a cell (tuner/decide/analysis.py PointStats gives it)."""

    config_id: str
    level: int
    mean: float
    interval: Interval
    deployments: int
    competes: bool = True


def contenders(cells: Iterable[CellView], levels: Sequence[int], noise: RestartNoise | None) -> list[Contender]:
    """Who the next confirmation start goes to, most urgent first.

    Per level, the best (highest mean) and every configuration whose verdict against it is in
    doubt: tied with it under the current intervals, or (before any redeploy has measured the
    deployment component) the runner-up, whose margin no measurement yet says survives a restart.
    A configuration's levels are those where it is in such a pair; its urgency is the smallest
    margin it is part of, after fewer deployments first (so two close contenders are redeployed in
    turn: interleaved), then the one in doubt at more levels."""
    by_level: dict[int, list[CellView]] = {}
    # a configuration's deployments over all its cells: a redeploy measures one level, and the
    # configuration has been redeployed whichever of its levels is in doubt
    deps: dict[str, int] = {}
    for c in cells:
        deps[c.config_id] = max(deps.get(c.config_id, 1), c.deployments)
        if c.competes and c.level in levels and c.mean > 0:
            by_level.setdefault(c.level, []).append(c)
    doubt: dict[str, dict[int, float]] = {}
    for level, pts in by_level.items():
        if len(pts) < 2:
            continue
        pts = sorted(pts, key=lambda c: -c.mean)
        best = pts[0]
        for other in pts[1:]:
            margin = (best.mean - other.mean) / other.mean * 100.0
            tied = other.interval.overlaps(best.interval)
            runner_up = other is pts[1]
            if tied or (noise is None and runner_up):
                for c in (best, other):
                    doubt.setdefault(c.config_id, {})
                    prev = doubt[c.config_id].get(level)
                    doubt[c.config_id][level] = margin if prev is None else min(prev, margin)
    out = [
        Contender(
            config_id=cid,
            levels=tuple(sorted(lv)),
            margin_pct=min(lv.values()),
            why=f"closest margin {min(lv.values()):.1f}% at C={min(lv, key=lambda k: lv[k])}",
        )
        for cid, lv in doubt.items()
    ]
    out.sort(key=lambda c: (deps.get(c.config_id, 1), round(c.margin_pct, 6), -len(c.levels), c.config_id))
    return out
