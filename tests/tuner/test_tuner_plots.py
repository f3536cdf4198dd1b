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
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: figs.append(fig))
    yield figs
    for fig in figs:
        close(fig)  # pyplot keeps every open figure, and warns past twenty


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
    assert f"{s.recommendation.chosen.config_id} (recommended)" in pareto and "adaptive-default" in pareto
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


@pytest.mark.parametrize("machine", ["seed", "h200-llama3-8b"])
def test_the_pareto_labels_do_not_cover_each_other(tmp_path, figures, machine):
    """Every "C=<level>" label was drawn at the same offset from its cell, and at high load, where
    the configurations' cells crowd, they piled up into an unreadable blot. Now no two labels
    overlap, and every cell of the recommended configuration (adaptive in the seed sweep) and of the
    frontier keeps its label."""
    store = kept(tmp_path, machine)
    s = write_all(store, store.read_spec())
    ax_par = steps_figure(figures).axes[3]
    ax_par.figure.canvas.draw()
    labels = [t for t in ax_par.texts if t.get_text().startswith("C=")]
    boxes = [t.get_window_extent() for t in labels]
    overlaps = [
        (a.get_text(), b.get_text())
        for i, (a, ba) in enumerate(zip(labels, boxes, strict=True))
        for b, bb in zip(labels[i + 1 :], boxes[i + 1 :], strict=True)
        if ba.overlaps(bb)
    ]
    assert not overlaps
    cells = {(p.per_request_mean, p.mean) for p in s.views[s.temperatures[0]].every.values()}
    rec = next(ln for ln in ax_par.get_lines() if ln.get_label().endswith("(recommended)"))
    wanted = plots.frontier(list(cells)) | set(zip(rec.get_xdata(), rec.get_ydata(), strict=True))
    assert wanted <= {t.xy for t in labels}


def test_the_recommended_adaptive_configuration_is_drawn_thick_on_the_pareto_panel(tmp_path, figures):
    """The seed sweep recommends an adaptive config: it has no depth for the steps panels' orange
    line, and on the Pareto panel it was one thin line among eight."""
    store = kept(tmp_path, "seed")
    s = write_all(store, store.read_spec())
    assert s.recommendation.kind.startswith("adaptive")
    ax_par = steps_figure(figures).axes[3]
    rec = [ln for ln in ax_par.get_lines() if ln.get_label() == f"{s.recommendation.chosen.config_id} (recommended)"]
    assert len(rec) == 1
    others = [ln.get_linewidth() for ln in ax_par.get_lines() if ln is not rec[0]]
    assert rec[0].get_linewidth() > 2 * max(others)


def test_the_baselines_admission_limit_does_not_flatten_the_speculative_ones(tmp_path, figures):
    """SGLang resolves max_running_requests to 4096 for k0 and to 48 with speculation (its default
    for a speculative server): on one linear axis the 48s lay on the floor. k0's is drawn off scale
    with its value written, the 48s in the upper half of the axis."""
    store = kept(tmp_path, "h200-llama3-8b")
    s = write_all(store, store.read_spec())
    limits = {d.config.spec_steps: d.max_running_requests for d in s.state.deploys.values() if not d.config.is_schedule}
    assert limits[0] == 4096 and {v for k, v in limits.items() if k} == {48}
    ax_mrr = steps_figure(figures).axes[4]
    bottom, top = ax_mrr.get_ylim()
    assert bottom == 0 and 48 / top > 0.5
    assert "4096 (off scale)" in [t.get_text() for t in ax_mrr.texts]
    # values that share a scale keep one, with headroom: the seed sweep's 4 ... 30
    assert plots.scale_top([30, 26, 21, 17, 13, 8, 4]) == pytest.approx(30 * 1.15)


@pytest.mark.parametrize("machine", ["seed", "no-spec-high-load"])
def test_the_pareto_legend_covers_no_cell_and_no_label(tmp_path, figures, machine):
    """matplotlib's loc="best" only picks the emptiest of nine spots inside the panel: among a sweep's
    crowded cells each one covered some. The legend now sits beside the panel, wholly in the
    figure, and the cells' labels are still placed."""
    store = kept(tmp_path, machine)
    write_all(store, store.read_spec())
    fig = steps_figure(figures)
    ax_par = fig.axes[3]
    fig.canvas.draw()
    box = ax_par.get_legend().get_window_extent()
    points = [
        tuple(xy)
        for ln in ax_par.get_lines()
        for xy in ax_par.transData.transform(ln.get_xydata())
        if len(ln.get_xdata())
    ]
    assert points
    covered = [xy for xy in points if box.x0 <= xy[0] <= box.x1 and box.y0 <= xy[1] <= box.y1]
    assert not covered, f"the legend covers {len(covered)} of {len(points)} points"
    labels = [t for t in ax_par.texts if t.get_text().startswith("C=")]
    assert labels and not any(box.overlaps(t.get_window_extent()) for t in labels)
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
