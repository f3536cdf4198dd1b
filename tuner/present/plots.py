"""throughput_vs_steps.png: the plot the seed campaign compared by eye, drawn from the results.

Four panels. Against the steps: aggregate output tok/s (one line per concurrency, error bars =
the cells' 95% intervals), per-request decode tok/s, and the KV capacity (`max_total_num_tokens`)
with `max_running_requests` on a twin axis: deeper speculation buys per-request speed with
capacity, and the panels show both sides of that trade. The fourth is the Pareto view (vLLM's
`bench sweep plot_pareto` and AIPerf's throughput-vs-interactivity plots draw the same trade):
aggregate tok/s against per-user tok/s, one line per configuration across concurrency; with an
SLO, the cells that miss it are hollow and a TPOT limit is drawn as the per-user rate it implies.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; no display on servers or in CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from ..data.prediction import Band  # noqa: E402
from ..decide.analysis import PointStats, competes  # noqa: E402
from ..spec.configs import SpecConfig  # noqa: E402
from ..spec.slo import Slo  # noqa: E402


@dataclass(frozen=True)
class CapacityPoint:
    """What one deployed static configuration's gate reported: the capacity panel's point."""

    config: SpecConfig
    max_total_num_tokens: int | None
    max_running_requests: int | None


@dataclass(frozen=True)
class PredictedPoint:
    """A configuration the model-guided search did not deploy, with its predicted aggregate tok/s
    per concurrency: drawn hollow, its interval as error bars."""

    config: SpecConfig
    levels: Mapping[int, Band]

    @property
    def series(self) -> tuple[int, int | None, str]:
        cfg = self.config
        return (1, None, cfg.spec_algorithm) if cfg.spec_steps == 0 else cfg.series


def line_styles(n: int) -> list[tuple[tuple[float, float, float, float], str]]:
    """A distinct (colour, line style) for each of n lines: tab10's colours up to 10, tab20's up to
    20 (tab10 by index alone gave the 11th configuration the 1st one's colour), then tab20's again
    dashed, dotted, ..."""
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    size = 10 if n <= 10 else 20
    dashes = ["-", "--", ":", "-."]
    return [(cmap(i % size), dashes[(i // size) % len(dashes)]) for i in range(n)]


@dataclass(frozen=True)
class CellLabel:
    """A Pareto cell's "C=<concurrency>" label, placed once the panel's layout is final: `rank` 0 for
    the recommended configuration's cells, 1 for the frontier's, 2 for the rest (dropped first)."""

    x: float
    y: float
    text: str
    rank: int
    radius_pt: float  # the marker drawn at (x, y): a label does not cover it


def frontier(cells: Sequence[tuple[float, float]]) -> set[tuple[float, float]]:
    """The cells no other cell beats on both per-user and aggregate tok/s: the ones a reader looks
    for, labelled before the crowded ones behind them."""
    return {a for a in cells if not any(b != a and b[0] >= a[0] and b[1] >= a[1] for b in cells)}


def _pareto(
    ax: Any,
    stats: dict[tuple[str, int], PointStats],
    levels: list[int],
    slo: Slo | None,
    chosen: dict[int, str],
    highlight: str | None = None,
) -> list[CellLabel]:
    """Aggregate tok/s against per-user tok/s, a line per configuration through its levels (static
    and adaptive alike: this view has no steps axis); a cell the report does not compare carries the
    same red x as on the steps panels. `highlight` (the recommended configuration, adaptive ones
    included: they have no depth to mark on the steps panels) is drawn thick. Returns the cells'
    labels, for `place_labels` once the layout is final."""
    by_cfg: dict[str, list[PointStats]] = {}
    for (cid, _c), p in stats.items():
        if p.per_request_mean is not None:
            by_cfg.setdefault(cid, []).append(p)
    ordered = sorted(by_cfg.items(), key=lambda kv: kv[1][0].order_key)
    front = frontier([(p.per_request_mean or 0.0, p.mean) for pts in by_cfg.values() for p in pts])
    labels: list[CellLabel] = []
    labelled_out = False
    for (cid, pts), (color, dash) in zip(ordered, line_styles(len(ordered)), strict=True):
        pts.sort(key=lambda p: p.concurrency)
        xs = [p.per_request_mean or 0.0 for p in pts]
        ys = [p.mean for p in pts]
        rec = cid == highlight
        ax.plot(
            xs,
            ys,
            dash,
            color=color,
            label=f"{cid} (recommended)" if rec else cid,
            linewidth=3.6 if rec else 1.4,
            zorder=4 if rec else 2,
        )
        for p, x, y in zip(pts, xs, ys, strict=True):
            miss = p.slo is not None and not p.slo.meets
            ax.errorbar(
                [x],
                [y],
                yerr=[[y - p.interval.low], [p.interval.high - y]],
                fmt="o",
                color=color,
                markerfacecolor="white" if miss else color,
                markersize=9 if rec else 6,
                markeredgecolor="black" if rec else color,
                capsize=2,
                zorder=4 if rec else 2,
            )
            starred = chosen.get(p.concurrency) == cid
            rank = 0 if rec else (1 if (x, y) in front else 2)
            labels.append(CellLabel(x, y, f"C={p.concurrency}", rank, 7.0 if starred else (4.5 if rec else 3.0)))
            if starred:
                ax.plot([x], [y], marker="*", markersize=14, color=color, markeredgecolor="black", zorder=5)
            if not competes(p):
                ax.plot(
                    [x],
                    [y],
                    marker="x",
                    markersize=11,
                    color="tab:red",
                    zorder=6,
                    label=None if labelled_out else "not compared (failed requests, --slo, the gate)",
                )
                labelled_out = True
    if chosen:
        ax.plot([], [], "*", color="0.3", markeredgecolor="black", markersize=11, label="level's pick (static depths)")
    if slo is not None:
        for lim in slo.limits:
            # the x axis is each configuration's mean decode rate: a limit on the median request's
            # TPOT sits about there, one on the slowest requests' (p90, p99) does not (points right
            # of such a line missed it): those are shown by the hollow markers alone
            if lim.metric == "tpot" and lim.percentile <= 50:
                ax.axvline(
                    1000.0 / lim.limit_ms,
                    color="tab:red",
                    linestyle="--",
                    linewidth=1.2,
                    label=f"SLO TPOT p{lim.percentile:g} <= {lim.limit_ms:g} ms (about {1000.0 / lim.limit_ms:.0f} tok/s per user)",
                )
        ax.plot([], [], "o", markerfacecolor="white", color="0.3", label=f"misses the SLO ({slo.describe()})")
    ax.set_title("Pareto: aggregate vs per-user throughput")
    ax.set_xlabel("per-user tok/s (decode rate)")
    ax.set_ylabel("aggregate output tok/s")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if by_cfg:
        # beside the panel, never on it: "best" only picks the emptiest of nine spots inside the
        # axes, and among a crowded sweep's cells every spot covered some (plot_throughput widens
        # the figure by the legend's width, so the panels keep theirs)
        entries = len(ax.get_legend_handles_labels()[0])
        ncol = -(-entries // PARETO_LEGEND_ROWS)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, ncol=ncol)
    return labels


PARETO_LEGEND_ROWS = 16  # entries a column beside the Pareto panel (about its height at 8 points)


# where a label may go around its cell, in points, nearest first: the first place that covers no
# other label, marker or the legend is taken
_PLACES = [
    (d * sx, d * sy, "left" if sx > 0 else ("right" if sx < 0 else "center"), "bottom" if sy > 0 else "top")
    for d in (3.0, 7.0, 12.0)
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1))
]


def place_labels(ax: Any, labels: Sequence[CellLabel]) -> None:
    """Annotate each cell where its label overlaps no other label and no cell's marker, inside the
    panel (the legend is outside it, `_pareto`); the recommended configuration's cells first, then
    the frontier's (those two may cover a marker when nothing else is free). A label with no free
    place is left out: at high load the levels' cells crowd, and every label drawn at the same
    offset (as before) piled up into an unreadable blot there. Call it after the figure's layout:
    the places are measured on the rendered figure."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    taken: list[Bbox] = []
    px = fig.dpi / 72.0
    markers = []
    for lab in labels:
        cx, cy = ax.transData.transform((lab.x, lab.y))
        r = lab.radius_pt * px
        markers.append(Bbox.from_extents(cx - r, cy - r, cx + r, cy + r))
    panel = ax.get_window_extent(renderer)
    for lab in sorted(labels, key=lambda lb: lb.rank):
        for avoid in (taken + markers, taken) if lab.rank < 2 else (taken + markers,):
            box = _free_place(ax, renderer, lab, panel, avoid)
            if box is not None:
                taken.append(box)
                break


def _free_place(ax: Any, renderer: Any, lab: CellLabel, panel: Bbox, avoid: list[Bbox]) -> Bbox | None:
    """Annotate `lab` at the first of _PLACES inside `panel` that overlaps nothing in `avoid`, and
    return its box; None (nothing drawn) if there is none."""
    for dx, dy, ha, va in _PLACES:
        text = ax.annotate(
            lab.text, (lab.x, lab.y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va, fontsize=7
        )
        box: Bbox = text.get_window_extent(renderer).padded(1.0)
        inside = panel.x0 <= box.x0 and box.x1 <= panel.x1 and panel.y0 <= box.y0 and box.y1 <= panel.y1
        if inside and not any(box.overlaps(t) for t in avoid):
            return box
        text.remove()
    return None


OFF_SCALE = 4.0  # a capacity this many times the next smaller one is drawn off scale


def scale_top(values: Sequence[int]) -> float | None:
    """The top of a capacity axis, with headroom over the largest value on scale (a point on the
    edge was half cut off, or hid under the twin axis' off-scale marker); None: no values.

    SGLang resolves `max_running_requests` to 48 for a speculative server started without
    `--max-running-requests` ("Max running requests is reset to 48 for speculative decoding":
    SGLang v0.5.9 python/sglang/srt/server_args.py, later speculative_hook.py) and to thousands
    without speculation (sglang PR #34290: 4096 against 48 on the same GPU): on one linear axis
    k0's value flattened every speculative configuration's against the floor. The cut is the
    highest gap wider than OFF_SCALE with fewer values above it than below: those are drawn off
    scale."""
    vals = sorted(values)
    for i in range(len(vals) - 1, 0, -1):
        if vals[i] > OFF_SCALE * vals[i - 1] and len(vals) - i < i:
            return vals[i - 1] * 1.25
    return vals[-1] * 1.15 if vals else None


def _capacity_line(
    ax: Any, pts: list[tuple[int, int]], top: float | None, *, marker: str, ls: str, color: str, label: str
) -> None:
    """One capacity series against the steps: a line through the values on scale; one above `top`
    is a hollow marker on the panel's top edge with its value written beside it."""
    shown = [(x, y) for x, y in pts if top is None or y <= top]
    if shown:
        ax.plot([x for x, _ in shown], [y for _, y in shown], marker=marker, linestyle=ls, color=color, label=label)
    for x, y in pts:
        if top is not None and y > top:
            ax.plot(
                [x],
                [top],
                marker=marker,
                markerfacecolor="white",
                color=color,
                markersize=9,
                clip_on=False,
                label=None if shown else label,
            )
            ax.annotate(
                f"{y} (off scale)",
                (x, top),
                textcoords="offset points",
                xytext=(7, -4),
                va="top",
                fontsize=8,
                color=color,
            )


def _series_label(p: PointStats) -> str:
    if p.spec_steps == 0 or (p.spec_topk == 1 and p.spec_draft_tokens is None):
        return ""
    s = f" t{p.spec_topk}"
    if p.spec_draft_tokens is not None:
        s += f" d{p.spec_draft_tokens}"
    return s


def _series_key(p: PointStats) -> tuple[int, int | None, str]:
    if p.spec_steps == 0:
        return (1, None, p.spec_algorithm)
    return (p.spec_topk, p.spec_draft_tokens, p.spec_algorithm)


def plot_throughput(
    path: Path,
    stats: dict[tuple[str, int], PointStats],
    levels: list[int],
    capacity: Sequence[CapacityPoint],
    *,
    title: str,
    chosen: Mapping[int, str] | None = None,
    recommended: tuple[int, str] | None = None,
    failed: Sequence[SpecConfig] = (),
    skipped: Sequence[SpecConfig] = (),
    slo: Slo | None = None,
    predicted: Mapping[str, PredictedPoint] | None = None,
    pareto: dict[tuple[str, int], PointStats] | None = None,
    highlight: str | None = None,
) -> Path:
    """Draw the figure: `capacity` has a point per deployed static configuration, `failed` and
    `skipped` the configurations that did not start or were not deployed (a skipped one that has a
    prediction is drawn from `predicted`, keyed by config_id; a depth is shaded "skipped" only where
    nothing was measured), `recommended` the depth marked and its legend (None: no static depth to
    mark), `pareto` the cells of the Pareto panel (default `stats`; adaptive configs may be there),
    `highlight` the recommended configuration's config_id, drawn thick there."""
    chosen = dict(chosen or {})
    predicted = dict(predicted or {})
    fig, axes = plt.subplots(2, 2, figsize=(15, 10.5))
    ax_agg, ax_req, ax_cap, ax_par = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    cmap = plt.get_cmap("viridis")
    styles = ["-", "--", ":", "-."]
    series_keys = sorted({_series_key(p) for p in stats.values()}, key=lambda k: (k[0], k[1] or 0, k[2]))
    labelled_prediction = False
    labelled_out = {ax_agg: False, ax_req: False}
    starred = False  # the star is labelled once, for the legend
    for li, c in enumerate(levels):
        color = cmap(li / max(1, len(levels) - 1) * 0.9)
        for si, skey in enumerate(series_keys):
            pts = sorted(
                (p for (cid, cc), p in stats.items() if cc == c and _series_key(p) == skey), key=lambda p: p.spec_steps
            )
            if not pts:
                continue
            xs = [p.spec_steps for p in pts]
            label = f"C={c}{_series_label(pts[-1])}"
            ls = styles[si % len(styles)]
            ys = [p.mean for p in pts]
            err = [[p.mean - p.interval.low for p in pts], [p.interval.high - p.mean for p in pts]]
            ax_agg.errorbar(
                xs, ys, yerr=err, marker="o", linestyle=ls, color=color, label=label, capsize=3, markersize=5
            )
            req = [(p.spec_steps, p.per_request_mean) for p in pts if p.per_request_mean is not None]
            if req:
                ax_req.plot(
                    [x for x, _ in req],
                    [y for _, y in req],
                    marker="o",
                    linestyle=ls,
                    color=color,
                    label=label,
                    markersize=5,
                )
            guesses = sorted(
                (pp.config.spec_steps, pp.levels[c].mean, pp.levels[c].lo, pp.levels[c].hi)
                for pp in predicted.values()
                if c in pp.levels and pp.series == skey
            )
            if guesses:
                labelled = labelled_prediction
                labelled_prediction = True
                ax_agg.errorbar(
                    [g[0] for g in guesses],
                    [g[1] for g in guesses],
                    yerr=[[g[1] - g[2] for g in guesses], [g[3] - g[1] for g in guesses]],
                    marker="o",
                    linestyle="none",
                    markerfacecolor="none",
                    color=color,
                    alpha=0.6,
                    capsize=2,
                    markersize=5,
                    label=None if labelled else "predicted, not deployed (interval)",
                )
            for p in pts:
                if not competes(p):  # drawn, but marked: the report does not compare it
                    for ax, y in ((ax_agg, p.mean), (ax_req, p.per_request_mean)):
                        if y is not None:
                            ax.plot(
                                [p.spec_steps],
                                [y],
                                marker="x",
                                markersize=11,
                                color="tab:red",
                                zorder=6,
                                label=None if labelled_out[ax] else "not compared (failed requests, --slo, the gate)",
                            )
                            labelled_out[ax] = True
            best = chosen.get(c)
            for p in pts:
                if p.config_id == best:
                    ax_agg.plot(
                        [p.spec_steps],
                        [p.mean],
                        marker="*",
                        markersize=15,
                        color=color,
                        markeredgecolor="black",
                        zorder=5,
                        label=None if starred else "level's pick",
                    )
                    starred = True
    # Capacity panel: one point per configuration that came up.
    ax_mrr = ax_cap.twinx()
    by_series: dict[tuple[int, int | None], list[CapacityPoint]] = {}
    for cp in capacity:
        cfg = cp.config
        key: tuple[int, int | None] = (1, None) if cfg.spec_steps == 0 else (cfg.spec_topk, cfg.spec_draft_tokens)
        by_series.setdefault(key, []).append(cp)
    kv_top = scale_top([cp.max_total_num_tokens for cp in capacity if cp.max_total_num_tokens])
    mr_top = scale_top([cp.max_running_requests for cp in capacity if cp.max_running_requests])
    for si, (key, vals) in enumerate(sorted(by_series.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0))):
        vals.sort(key=lambda cp: cp.config.spec_steps)
        ls = styles[si % len(styles)]
        suffix = "" if key == (1, None) else f" t{key[0]}" + (f" d{key[1]}" if key[1] else "")
        kv = [(cp.config.spec_steps, cp.max_total_num_tokens) for cp in vals if cp.max_total_num_tokens]
        mr = [(cp.config.spec_steps, cp.max_running_requests) for cp in vals if cp.max_running_requests]
        _capacity_line(ax_cap, kv, kv_top, marker="s", ls=ls, color="tab:blue", label="max_total_num_tokens" + suffix)
        _capacity_line(ax_mrr, mr, mr_top, marker="^", ls=ls, color="tab:red", label="max_running_requests" + suffix)
    for cfg in failed:
        ax_cap.plot([cfg.spec_steps], [0], marker="x", markersize=12, color="black")
        ax_cap.annotate(
            "deploy failed", (cfg.spec_steps, 0), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8
        )
    measured_steps = {p.spec_steps for p in stats.values()}
    shaded: set[int] = set()
    for cfg in skipped:
        if cfg.config_id in predicted or cfg.spec_steps in measured_steps or cfg.spec_steps in shaded:
            continue  # a depth some configuration measured keeps its points in sight
        shaded.add(cfg.spec_steps)
        for ax in (ax_agg, ax_req):
            ax.axvspan(cfg.spec_steps - 0.4, cfg.spec_steps + 0.4, color="0.9", zorder=0)
        ax_agg.annotate(
            "skipped",
            (cfg.spec_steps, 0),
            xycoords=("data", "axes fraction"),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
            color="0.4",
        )
    if recommended is not None:
        rec_k, rec_label = recommended
        for ax in (ax_agg, ax_req, ax_cap):
            ax.axvline(
                rec_k,
                color="tab:orange",
                linestyle="--",
                linewidth=1.2,
                label=rec_label if ax is ax_agg else None,
            )
    ax_agg.set_title("Aggregate output throughput")
    ax_agg.set_ylabel("output tok/s (all requests)")
    ax_req.set_title("Per-request decode rate")
    ax_req.set_ylabel("tok/s per request (after the first token)")
    ax_cap.set_title("KV capacity and admission")
    ax_cap.set_ylabel("max_total_num_tokens", color="tab:blue")
    ax_mrr.set_ylabel("max_running_requests", color="tab:red")
    ax_cap.set_ylim(0, kv_top)
    ax_mrr.set_ylim(0, mr_top)
    # one steps axis for the three panels, at least two steps wide: matplotlib's autoscale around
    # a single measured depth (or the baseline alone) spans +-0.2 and ticks it in fractions, and a
    # panel with failed depths marked would span other steps than the panels above it
    spans = [ax.get_xlim() for ax in (ax_agg, ax_req, ax_cap) if ax.has_data()]
    if spans:
        lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
        if hi - lo < 2:
            mid = round((lo + hi) / 2)
            lo, hi = min(lo, mid - 1), max(hi, mid + 1)
    for ax in (ax_agg, ax_req, ax_cap):
        ax.set_xlabel("speculative_num_steps")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if spans:
            ax.set_xlim(lo, hi)
        ax.grid(True, alpha=0.3)
    ax_agg.set_ylim(bottom=0)
    ax_req.set_ylim(bottom=0)
    for ax in (ax_agg, ax_req):
        handles = ax.get_legend_handles_labels()[0]
        if handles:
            # above the data, in columns, with the headroom it needs: "best" found no free place
            # among five levels' lines and laid the legend over measured points
            ncol = 1 if len(handles) <= 2 else (2 if len(handles) <= 6 else 3)
            rows = -(-len(handles) // ncol)
            _, top = ax.get_ylim()
            ax.set_ylim(0, top * (1.04 + 0.065 * rows))
            ax.legend(fontsize=8, loc="upper center", ncol=ncol)
        else:  # every benchmark stopped (at warm-up, say): say so where the lines would be
            ax.text(0.5, 0.5, "nothing measured", transform=ax.transAxes, ha="center", va="center", color="0.4")
    h1, l1 = ax_cap.get_legend_handles_labels()
    h2, l2 = ax_mrr.get_legend_handles_labels()
    if h1 or h2:
        ax_cap.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower left")
    labels = _pareto(ax_par, stats if pareto is None else pareto, levels, slo, chosen, highlight)
    leg = ax_par.get_legend()
    if leg is not None:  # room for the Pareto legend beside its panel, the panels as wide as before
        width = leg.get_window_extent().width / fig.dpi
        fig.set_figwidth(fig.get_figwidth() + width + 0.2)
    fig.suptitle(title)
    fig.tight_layout()
    place_labels(ax_par, labels)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def plot_schedule(
    path: Path,
    bars: dict[int, dict[str, tuple[float, float, float]]],
    names: list[str],
    *,
    title: str,
    verdict: str,
    chosen: str | None = None,
    not_compared: set[tuple[int, str]] | frozenset[tuple[int, str]] = frozenset(),
) -> Path:
    """schedule_vs_static.png: per concurrency level, the best static depth, the tuner's schedule and
    SGLang's default adaptive config side by side (aggregate tok/s, error bars = 95% intervals);
    the verdict underneath. `bars` maps level -> name -> (mean, low, high); the (level, name) cells
    in `not_compared` (the report leaves them out: requests failed, --slo missed) are drawn faint
    with a red x, as on the other figure."""
    levels = sorted(bars)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.8 * len(levels) + 3), 5.2))
    width = 0.8 / max(1, len(names))
    colors = ["tab:gray", "tab:blue", "tab:orange"]
    faint = False  # the red x is labelled once
    for i, name in enumerate(names):
        xs, ys, lo, hi, drawn = [], [], [], [], []
        for j, c in enumerate(levels):
            v = bars[c].get(name)
            if v is None:
                continue
            drawn.append(c)
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(v[0])
            lo.append(max(0.0, v[0] - v[1]))
            hi.append(max(0.0, v[2] - v[0]))
        if xs:
            ax.bar(
                xs,
                ys,
                width,
                yerr=[lo, hi],
                capsize=3,
                color=colors[i % len(colors)],
                label=name,
                hatch="//" if chosen is not None and chosen in name else None,
            )
            for x, y, c in zip(xs, ys, drawn, strict=True):
                if (c, name) in not_compared:
                    ax.bar([x], [y], width, color="white", alpha=0.6)
                    ax.plot(
                        [x],
                        [y],
                        "x",
                        color="tab:red",
                        markersize=10,
                        zorder=5,
                        label=None if faint else "not compared (failed requests, --slo, the gate)",
                    )
                    faint = True
    ax.set_xticks(range(len(levels)))
    ax.set_xticklabels([f"C={c}" for c in levels])
    ax.set_ylabel("aggregate output tok/s")
    ax.set_title(f"{title}\nschedule vs the best single static depth vs SGLang default adaptive", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    # the verdict whole, wrapped to the figure's width (it was cut at 220 characters, before the
    # schedule's own comparison), the axes raised above it
    chars = int(fig.get_figwidth() * 17)  # characters of 7-point text a line, about
    text = "\n".join(textwrap.wrap(verdict, chars)) if verdict else ""
    lines = text.count("\n") + 1 if text else 0
    bottom = min(0.5, (lines * 7 * 1.35 + 8) / (fig.get_figheight() * 72))
    fig.text(0.01, 0.005, text, fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
