"""Writing everything derived from records.jsonl: results.csv, recommendation.json, the plot and
report.md. `sweep` and `bench` call `write_checkpoint` after every level (results.csv, from the
live state: no analysis, no refit of the search) and `write_all` at the end or on an interrupt (all
of it); `plot DIR` and `report DIR` call it on a finished or interrupted directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..data.results import result_rows
from ..data.store import PLOT, RECOMMENDATION, REPORT, SCHEDULE_PLOT, Store
from ..spec.sweepspec import SweepSpec
from . import report as report_mod
from .summary import Summary, capacity_by_config, recommendation_json, summarize, title


def write_checkpoint(store: Store, spec: SweepSpec) -> None:
    """After a level or a failed deploy: results.csv from the state as it stands (the same rows the
    summary writes), nothing that needs the analysis or the search's model."""
    store.write_results_csv(result_rows(store.state(), spec.workload))


def write_all(
    store: Store, spec: SweepSpec, *, target: list[int] | None = None, plot: bool = True, report: bool = True
) -> Summary:
    s = summarize(store.state(), spec, target)
    store.write_results_csv(s.rows)
    store.write_json(RECOMMENDATION, recommendation_json(s))
    if plot:
        write_plot(store.out, s)
        write_schedule_plot(store.out, s)
    if report:
        store.write_text(REPORT, report_mod.render(s))
    return s


def write_plot(out: Path, s: Summary) -> Path | None:
    from .plots import plot_throughput  # matplotlib: imported only when a plot is drawn

    if not s.stats and not s.state.deploys:
        return None
    return plot_throughput(
        Path(out) / PLOT,
        s.stats,
        s.levels,
        capacity_by_config(s),
        title=title(s),
        chosen={c: ch.chosen.config_id for c, ch in s.choices.items()},
        recommended=_static_recommendation(s),
        failed={cid: r.config.to_json() for cid, r in s.state.failed.items() if not r.config.is_schedule},
        skipped={cid: r.config.to_json() for cid, r in s.state.skipped.items() if not r.config.is_schedule},
        slo=s.slo,
        predicted=predicted_points(s),
    )


def _static_recommendation(s: Summary) -> dict[str, Any] | None:
    """What the steps plot marks: the recommended static depth (an adaptive recommendation has
    its own plot, and no place on the steps axis)."""
    rec = s.recommendation
    if rec.kind.startswith("adaptive"):
        view = s.views.get(s.temperatures[0]) if s.temperatures else None
        rec = view.static if view is not None and view.static is not None else rec
        if rec.kind.startswith("adaptive"):
            return None
    return rec.to_dict() if rec.chosen else None


def write_schedule_plot(out: Path, s: Summary) -> Path | None:
    """schedule_vs_static.png, when the schedule phase measured something."""
    from .plots import plot_schedule

    view = s.views.get(s.temperatures[0]) if s.temperatures else None
    verdict = view.verdict if view is not None else None
    if verdict is None or not verdict.per_level:
        return None
    names = {
        "best_static": f"best static ({verdict.best_static.config_id})" if verdict.best_static else "best static",
        "schedule": f"tuned ({verdict.schedule.label})" if verdict.schedule else "tuned",
        "default_adaptive": "SGLang default adaptive",
    }
    bars = {
        c: {names[k]: (p.mean, p.interval.low, p.interval.high) for k, p in row.items()}
        for c, row in verdict.per_level.items()
    }
    rec = s.recommendation
    chosen = rec.chosen.config.label if rec.chosen is not None and rec.kind.startswith("adaptive") else None
    return plot_schedule(
        Path(out) / SCHEDULE_PLOT,
        bars,
        list(names.values()),
        title=title(s),
        verdict=s.recommendation.reason,
        chosen=chosen,
    )


def predicted_points(s: Summary) -> dict[str, dict[str, Any]]:
    """The model's predictions for the configurations it did not deploy, as the plot draws them."""
    out: dict[str, dict[str, Any]] = {}
    for cid, r in s.state.skipped.items():
        pred = r.prediction
        if r.kind != "predicted" or pred is None or not pred.levels:
            continue
        cfg = r.config
        series = (1, None, cfg.spec_algorithm) if cfg.spec_steps == 0 else cfg.series
        levels = {lp.concurrency: (lp.output_tok_s.mean, lp.output_tok_s.lo, lp.output_tok_s.hi) for lp in pred.levels}
        out[cid] = {"spec_steps": cfg.spec_steps, "series": series, "levels": levels}
    return out
