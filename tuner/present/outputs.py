"""Writing everything derived from records.jsonl: results.csv, recommendation.json, the plot and
report.md. `sweep` and `bench` call `write_checkpoint` after every level (results.csv, from the
live state: no analysis, no refit of the search) and `write_all` at the end or on an interrupt (all
of it); `plot DIR` and `report DIR` call it on a finished or interrupted directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..data.results import result_rows
from ..data.store import PLOT, RECOMMENDATION, REPORT, SCHEDULE_PLOT, Store
from ..decide.analysis import competes
from ..spec.sweepspec import SweepSpec
from . import report as report_mod
from .summary import recommendation_json, summarize, title
from .views import Summary

if TYPE_CHECKING:
    from .plots import PredictedPoint


def write_checkpoint(store: Store, spec: SweepSpec) -> None:
    """After a level or a failed deploy: results.csv from the state as it stands (the same rows the
    summary writes), nothing that needs the analysis or the search's model."""
    store.write_results_csv(result_rows(store.state(), spec.workload))


def write_all(
    store: Store, spec: SweepSpec, *, target: list[int] | None = None, plot: bool = True, report: bool = True
) -> Summary:
    s = summarize(store.state(), spec, target)
    # a resume that changed how levels are measured: the report's settings are the last run's
    s.notes += [f"{r}: the levels measured before it keep what they measured" for r in store.resumes()]
    store.write_results_csv(s.rows)
    store.write_json(RECOMMENDATION, recommendation_json(s))
    if plot:
        write_plot(store.out, s)
        write_schedule_plot(store.out, s)
    if report:
        store.write_text(REPORT, report_mod.render(s))
    return s


def write_plot(out: Path, s: Summary) -> Path | None:
    from .plots import CapacityPoint, plot_throughput  # matplotlib: imported only when a plot is drawn

    if not report_mod.draws_plot(s):
        return None
    view = s.primary_view
    return plot_throughput(
        Path(out) / PLOT,
        s.stats,
        s.levels,
        [
            CapacityPoint(d.config, d.max_total_num_tokens, d.max_running_requests)
            for d in s.state.deploys.values()
            if not d.config.is_schedule  # the steps axis holds static depths only
        ],
        title=title(s),
        chosen={c: ch.chosen.config_id for c, ch in s.choices.items()},
        recommended=_static_recommendation(s),
        failed=[r.config for r in s.state.failed.values() if not r.config.is_schedule],
        # what the sweep chose not to deploy; a combination SGLang would refuse (`infeasible`) was
        # never a candidate: the report names those, the steps axis has no place for them
        skipped=[r.config for r in s.state.skipped.values() if not r.config.is_schedule and r.kind != "infeasible"],
        slo=s.slo,
        predicted=predicted_points(s),
        pareto=view.every if view is not None and view.every else None,
        highlight=s.recommendation.chosen.config_id if s.recommendation.chosen is not None else None,
    )


def _static_recommendation(s: Summary) -> tuple[int, str] | None:
    """The depth the steps plot marks and its legend: the recommended static configuration, or, when
    an adaptive config is recommended, the best static one beside it (the adaptive one has no place
    on the steps axis: schedule_vs_static.png draws it; the legend stays short enough to leave the
    panel's points in sight)."""
    rec = s.recommendation
    if rec.kind.startswith("adaptive"):
        view = s.primary_view
        best = view.static if view is not None and view.static is not None else None
        if best is None or best.chosen is None or best.kind.startswith("adaptive"):
            return None
        cfg = best.chosen.config
        return cfg.spec_steps, f"best static: {cfg.config_id}\n(adaptive recommended:\nschedule_vs_static.png)"
    if rec.chosen is None:
        return None
    return rec.chosen.spec_steps, f"recommended: {rec.chosen.config_id}"


def write_schedule_plot(out: Path, s: Summary) -> Path | None:
    """schedule_vs_static.png, when the schedule phase measured something."""
    from .plots import plot_schedule

    view = s.primary_view
    verdict = view.verdict if view is not None else None
    if verdict is None or not verdict.per_level:
        return None
    names = {
        "best_static": f"best single static depth ({verdict.best_static.config_id})"
        if verdict.best_static
        else "best single static depth",
        "schedule": f"tuned ({verdict.schedule.label})" if verdict.schedule else "tuned",
        "default_adaptive": "SGLang default adaptive",
    }
    bars = {
        c: {names[k]: (p.mean, p.interval.low, p.interval.high) for k, p in row.items()}
        for c, row in verdict.per_level.items()
    }
    rec = s.recommendation
    chosen = rec.chosen.config.label if rec.chosen is not None and rec.kind.startswith("adaptive") else None
    # the cells the report does not compare (requests failed, --slo missed, the gate): drawn as such
    out_cells = {(c, names[k]) for c, row in verdict.per_level.items() for k, p in row.items() if not competes(p)}
    return plot_schedule(
        Path(out) / SCHEDULE_PLOT,
        bars,
        list(names.values()),
        title=title(s),
        verdict=verdict.reason,
        chosen=chosen,
        not_compared=out_cells,
    )


def predicted_points(s: Summary) -> dict[str, PredictedPoint]:
    """The model's predictions for the configurations it did not deploy, as the plot draws them."""
    from .plots import PredictedPoint

    return {
        cid: PredictedPoint(r.config, {lp.concurrency: lp.output_tok_s for lp in r.prediction.levels})
        for cid, r in s.state.skipped.items()
        if r.kind == "predicted" and r.prediction is not None and r.prediction.levels
    }
