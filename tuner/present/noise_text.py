"""What a sweep's intervals rest on (recommendation.json's `noise`) and the report's note on it, in
words: which noise they cover, the precision reached, the tie-break, the restarts measured."""

from __future__ import annotations

from typing import Any

from ..decide.analysis import PointStats


def noise_summary(stats: dict[tuple[str, int], PointStats]) -> dict[str, Any]:
    """What the intervals rest on: repeats, which noise they cover, the precision reached
    (half-width / mean, %), and the spread across repeats where repeats exist."""
    rel = {f"{cid}@C{c}": p.std / p.mean for (cid, c), p in stats.items() if p.n > 1 and p.mean > 0}
    # the precision a cell reached: not the +-1% floor that stands in where nothing was measured
    prec = sorted(p.precision_pct for p in stats.values() if p.precision_pct is not None and p.interval.noise != "none")
    kinds = sorted({p.interval.noise for p in stats.values() if p.n})
    unmeasured = sum(1 for p in stats.values() if p.n and p.interval.noise == "none")

    def median(vals: list[float]) -> float | None:
        if not vals:
            return None
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2

    vals = sorted(rel.values())
    # each temperature's cells are aggregated apart (tuner/decide/analysis.py `aggregate`), so
    # each has its own pooled spread: the first temperature's is `restart`, every one's is below
    by_temp: dict[float, Any] = {}
    for p in stats.values():
        if p.restart is not None:
            by_temp.setdefault(p.temperature, p.restart)
    first = next((p.temperature for p in stats.values()), None)
    restart = by_temp.get(first) if first is not None else None
    return {
        "restart": None if restart is None else restart.to_dict(),
        # one deployment's repeats (a cell's levels over several deployments are not repeats)
        "repeats": max((p.repeats for p in stats.values()), default=0),
        "deployments": max((p.deployments for p in stats.values()), default=0),
        "intervals_cover": kinds,
        "cells": sum(1 for p in stats.values() if p.n),
        "cells_without_interval": unmeasured,
        "median_precision_pct": None if not prec else round(median(prec) or 0.0, 2),
        "max_precision_pct": None if not prec else round(prec[-1], 2),
        "rel_std": {k: round(v * 100, 2) for k, v in rel.items()},
        "max_rel_std_pct": round(vals[-1] * 100, 2) if vals else None,
        "median_rel_std_pct": round((median(vals) or 0.0) * 100, 2) if vals else None,
    } | (
        # any temperature's but the first's alone: each named (the first may have none)
        {"restart_by_temperature": {f"{t:g}": r.to_dict() for t, r in by_temp.items()}}
        if set(by_temp) - {first}
        else {}
    )


def noise_note(n: dict[str, Any]) -> str:
    """What the intervals cover, in words (docs/tuner.md "Statistics"): report.md's note on noise."""
    kinds: list[str] = [str(k) for k in n["intervals_cover"]]
    cover = {
        "requests": "the requests within each level (batch means over the level's windows)",
        "repeats": "run-to-run noise on one deployment (--repeats)",
        "deployments": "restart-to-restart noise, measured by redeploys and pooled over configurations",
        "none": "nothing: no interval was measured, a +-1% floor stands in",
    }
    if not n["cells"]:
        return "Nothing was measured: no cell has an interval, and no verdict is made."
    if len(kinds) == 1:
        text = "Every cell carries a 95% interval of its aggregate tok/s covering " + cover.get(kinds[0], kinds[0])
    else:  # cells of different kinds: no one description is every cell's
        text = "Each cell carries a 95% interval of its aggregate tok/s covering, cell by cell, one of: " + "; ".join(
            cover.get(k, k) for k in kinds
        )
    unmeasured = n.get("cells_without_interval") or 0
    if unmeasured:
        text += (
            f" ({unmeasured} of {n['cells']} cells measured no interval, one window or one request: "
            "their +-1% is assumed, and a verdict 'beyond noise' there rests on it)"
        )
    if n["median_precision_pct"] is not None:
        measured = n["cells"] - unmeasured
        over = f" over the {measured} cell{'' if measured == 1 else 's'} that measured one" if unmeasured else ""
        text += f"; precision reached{over}: median +-{n['median_precision_pct']}%, worst +-{n['max_precision_pct']}%"
    text += (
        ". A configuration wins a level only when its interval lies above every other's; otherwise the level "
        "is tied within noise and the tie-break chooses: among the tied within 1% of the best mean, more KV "
        "capacity, then the cheaper setting; else the highest mean."
    )
    restart = n.get("restart")
    spend = n.get("confirm") or {}
    if restart or n.get("restart_by_temperature"):
        where = 'docs/tuner.md "Verdicts across restarts"'

        def spread(r: dict[str, Any], tail: str) -> str:
            return (
                f"{r['raw_rel_sd_pct']:.2f}% ({r['rel_sd_pct']:.2f}% beyond the levels' own noise; one deployment's "
                f"band +-{r['band_pct']:.1f}%, t = {r['t975']:.2f} on {r['df']} extra start(s), pooled over "
                f"{r['cells']} cell(s) of {r['configs']} configuration(s){tail})"
            )

        each = n.get("restart_by_temperature")
        if each:
            text += f" Deployment-to-deployment spread, pooled per temperature ({where}): " + "; ".join(
                f"at temperature {t}: {spread(r, '')}" for t, r in each.items()
            )
        elif restart:
            text += f" Deployment-to-deployment spread: {spread(restart, '; ' + where)}"
        if spend.get("starts"):
            text += (
                f"; the confirmation round made {spend['starts']} extra start(s), {spend['seconds']:.0f} s "
                f"(+{spend['share_pct']:.0f}% on the sweep's deployments)"
            )
        text += "."
    elif "deployments" not in kinds:
        text += (
            " Restart-to-restart noise is not covered: no configuration was measured in two deployments "
            "(`--confirm 2` or `--repeat-deploys 2` measures it)."
        )
    return text
