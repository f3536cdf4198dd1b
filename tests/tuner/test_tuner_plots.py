"""The figures draw what the report says: drawn from kept sweeps (bench/schedule_vs_static/) and
from records, each figure read back from matplotlib's own objects (plt.close is caught)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from test_tuner_analysis import row

from tuner.data.records import SkipRecord
from tuner.data.store import Store
from tuner.decide import analysis
from tuner.present import plots
from tuner.present.outputs import write_all
from tuner.spec.configs import SpecConfig
from tuner.spec.slo import parse_slo
from tuner.spec.sweepspec import SweepSpec

ROOT = Path(__file__).resolve().parents[2]
KEPT = ROOT / "bench" / "schedule_vs_static"


@pytest.fixture
def figures(monkeypatch):
    """Every figure a test draws, kept open to be read."""
    figs: list = []
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    yield figs
    for fig in figs:
        fig.clf()


def kept(tmp_path: Path, machine: str) -> Store:
    """A copy of a kept sweep's records and spec: its outputs are drawn again in tmp_path."""
    out = tmp_path / machine
    out.mkdir()
    for name in ("records.jsonl", "sweep.json"):
        shutil.copy(KEPT / machine / name, out / name)
    return Store(out)


def with_slo(store: Store, limit: str) -> SweepSpec:
    """The kept sweep's spec with `--slo limit`, as `python -m tuner report --slo` reads it."""
    spec = store.read_spec()
    return dataclasses.replace(spec, workload=dataclasses.replace(spec.workload, slo=parse_slo(limit)))


def steps_figure(figs: list):
    """The four-panel figure (throughput_vs_steps.png): the one with a twin axis."""
    return next(f for f in figs if len(f.axes) == 5)


def legend_texts(ax) -> list[str]:
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg is not None else []


def test_combinations_sglang_refuses_are_not_drawn_as_skipped_depths(tmp_path, figures):
    """`--topk 1,4` plans k1-t4 ... which SGLang refuses (infeasible skips): they were never
    candidates, and shading their depths greyed out and labelled "skipped" every measured depth, the
    recommended one included. A depth nothing measured is still shaded."""
    store = kept(tmp_path, "h200-llama3-8b")
    spec = store.read_spec()
    measured = sorted({lv.config.spec_steps for lv in store.state().levels()})
    for k in measured:
        if k:
            store.append(SkipRecord(config=SpecConfig(k, 4), kind="infeasible", reason="needs more draft tokens"))
    deepest = max(measured) + 1
    store.append(SkipRecord(config=SpecConfig(deepest), kind="capacity", reason="KV pool predicted empty"))
    write_all(store, spec)
    ax_agg = steps_figure(figures).axes[0]
    skipped = [t for t in ax_agg.texts if t.get_text() == "skipped"]
    assert [t.xy[0] for t in skipped] == [deepest]
    spans = [p for p in ax_agg.patches if p.get_facecolor()[:3] == pytest.approx((0.9, 0.9, 0.9))]
    assert len(spans) == 1


def test_the_legend_names_the_recommended_configuration_and_sits_above_the_data(tmp_path, figures):
    store = kept(tmp_path, "h200-llama3-8b")
    s = write_all(store, store.read_spec())
    assert s.recommendation.kind == "static" and s.recommendation.chosen is not None
    ax_agg = steps_figure(figures).axes[0]
    assert f"recommended: {s.recommendation.chosen.config_id}" in legend_texts(ax_agg)
    # the legend's box lies above every measured point of the panel
    fig = ax_agg.figure
    fig.canvas.draw()
    box = ax_agg.get_legend().get_window_extent()
    top = max(p.mean for p in s.stats.values())
    assert ax_agg.transData.transform((0, top))[1] < box.y0
    axes_box = ax_agg.get_window_extent()
    assert axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1  # no wider than its panel


def test_an_adaptive_recommendation_is_on_the_pareto_panel_and_the_schedule_verdict_is_printed_whole(tmp_path, figures):
    store = kept(tmp_path, "seed")
    s = write_all(store, store.read_spec())
    view = s.views[s.temperatures[0]]
    assert s.recommendation.kind.startswith("adaptive") and view.verdict is not None
    steps = steps_figure(figures)
    ax_agg, ax_par = steps.axes[0], steps.axes[3]
    assert any(t.startswith(f"best static: {view.static.chosen.config_id}\n") for t in legend_texts(ax_agg))
    pareto = set(legend_texts(ax_par))
    assert s.recommendation.chosen.config_id in pareto and "adaptive-default" in pareto
    schedule = next(f for f in figures if len(f.axes) == 1)
    printed = " ".join(" ".join(t.get_text().split()) for t in schedule.texts)
    assert " ".join(view.verdict.reason.split()) in printed


def test_the_pareto_panel_marks_a_cell_the_report_does_not_compare(tmp_path, figures):
    rows = [row(2, 1, 180.0), row(3, 1, 200.0), row(4, 1, 260.0, status="partial")]
    rows[-1].metrics.requests_ok, rows[-1].metrics.requests_failed = 3, 1
    stats = analysis.aggregate(rows)
    plots.plot_throughput(tmp_path / "p.png", stats, [1], [], title="t", chosen={1: "k3-t1"})
    ax_par = figures[0].axes[3]
    marked = [ln for ln in ax_par.get_lines() if ln.get_marker() == "x"]
    assert [list(ln.get_ydata()) for ln in marked] == [[260.0]]
    assert "not compared (failed requests, --slo, the gate)" in legend_texts(ax_par)


def test_eleven_configurations_get_eleven_looks():
    """tab10 by index gave the 11th configuration the 1st one's colour, the recommended one's star
    included."""
    for n in (1, 10, 11, 20, 23):
        looks = plots.line_styles(n)
        assert len(looks) == n and len(set(looks)) == n


@pytest.mark.parametrize(("limit", "drawn"), [("tpot_p50_ms=6", True), ("tpot_p99_ms=6", False)])
def test_a_tpot_limit_is_drawn_on_the_pareto_panel_only_where_the_axis_can_show_it(tmp_path, figures, limit, drawn):
    """The Pareto panel's x axis is each configuration's mean decode rate: a median TPOT limit sits
    about at its per-user rate, a p99 one does not (points right of its line missed it, read as a
    meets/misses boundary); the star that marks each level's pick is named in the legend."""
    store = kept(tmp_path, "h200-llama3-8b")
    spec = with_slo(store, limit)
    write_all(store, spec)
    fig = steps_figure(figures)
    pareto = " ".join(legend_texts(fig.axes[3]))
    assert ("SLO TPOT p50 <= 6 ms (about 167 tok/s per user)" in pareto) is drawn, pareto
    assert "SLO TPOT p99" not in pareto and "misses the SLO" in pareto
    assert "level's pick" in legend_texts(fig.axes[0])


def test_the_schedule_plot_marks_the_cells_the_report_does_not_compare(tmp_path, figures):
    """With --slo a level where nothing meets it has no winner in the report, and its cells were
    drawn in schedule_vs_static.png as plain bars: they carry the red x of the other figure now."""
    store = kept(tmp_path, "h200-llama3-8b")
    spec = with_slo(store, "tpot_p99_ms=6")
    s = write_all(store, spec)
    schedule = next(f for f in figures if len(f.axes) == 1)
    ax = schedule.axes[0]
    assert "not compared (failed requests, --slo, the gate)" in legend_texts(ax)
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x"]
    view = s.views[s.temperatures[0]]
    missing = sum(1 for row in view.verdict.per_level.values() for p in row.values() if not analysis.competes(p))
    assert missing and len(crosses) == missing
