"""Everything derived from records.jsonl: results.csv, recommendation.json, the plot, report.md.

`sweep` and `bench` call `write_all` after every level (results.csv) and at the end (all of
it); `plot DIR` and `report DIR` call it on a finished or interrupted directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import analysis
from .analysis import LevelChoice, PointStats, Recommendation
from .store import Store, result_rows

RECOMMENDATION = "recommendation.json"
PLOT = "throughput_vs_steps.png"
REPORT = "report.md"


@dataclass
class Summary:
    params: dict[str, Any]
    records: list[dict[str, Any]]
    rows: list[dict[str, Any]]
    stats: dict[tuple[str, int], PointStats]
    levels: list[int]
    choices: dict[int, LevelChoice]
    recommendation: Recommendation
    deploys: dict[str, dict[str, Any]]  # config_id -> last successful deploy record
    failed: dict[str, dict[str, Any]]  # config_id -> failed deploy record (never came up)
    skipped: dict[str, dict[str, Any]]  # config_id -> skip record
    bench_failures: list[dict[str, Any]]
    deploy_best: dict[str, Any] | None
    server: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def noise(self) -> dict[str, Any]:
        return analysis.noise_summary(self.stats)


def _target(params: dict[str, Any], override: list[int] | None) -> list[int] | None:
    if override is not None:
        return override
    t = params.get("target_concurrency")
    return list(t) if t else None


def summarize(records: list[dict[str, Any]], params: dict[str, Any], target: list[int] | None = None) -> Summary:
    levels = list(
        params.get("concurrency") or sorted({int(r["concurrency"]) for r in records if r.get("type") == "level"})
    )
    rows = result_rows(records, params)
    stats = analysis.aggregate(rows)
    choices = analysis.by_concurrency(stats, levels)
    rec = analysis.recommend(stats, levels, _target(params, target))
    deploys: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    skipped: dict[str, dict[str, Any]] = {}
    bench_failures: list[dict[str, Any]] = []
    deploy_best = None
    server: dict[str, Any] = {}
    for r in records:
        cid = (r.get("config") or {}).get("config_id")
        typ = r.get("type")
        if typ == "deploy":
            if r.get("status") == "ok":
                deploys[cid] = r
                failed.pop(cid, None)
                srv = r.get("server") or {}
                server = {k: v for k, v in srv.items() if v} or server
            elif cid not in deploys:
                failed[cid] = r
        elif typ == "skip":
            skipped[cid] = r
        elif typ == "bench_failed":
            bench_failures.append(r)
        elif typ == "deploy_best":
            deploy_best = r
    s = Summary(
        params=params,
        records=records,
        rows=rows,
        stats=stats,
        levels=levels,
        choices=choices,
        recommendation=rec,
        deploys=deploys,
        failed=failed,
        skipped=skipped,
        bench_failures=bench_failures,
        deploy_best=deploy_best,
        server=server,
    )
    s.notes = notes_for(s)
    return s


def _cfg_txt(rec: dict[str, Any]) -> str:
    cfg = rec.get("config") or {}
    return f"{cfg.get('config_id')} (spec_steps {cfg.get('spec_steps')})"


def notes_for(s: Summary) -> list[str]:
    """Plain statements of what the numbers rest on; never silent about a gap."""
    notes: list[str] = []
    for r in s.records:
        if r.get("type") == "skip" and r.get("kind") == "early_stop":
            notes.append(
                f"Early stop: {_cfg_txt(r)} was not measured: {r.get('reason')}. "
                "`--no-early-stop` sweeps every configuration."
            )
        elif r.get("type") == "skip" and r.get("kind") == "capacity":
            notes.append(f"{_cfg_txt(r)} was not deployed: {r.get('reason')}. `--no-early-stop` tries it anyway.")
        elif r.get("type") == "skip":
            notes.append(f"{_cfg_txt(r)} was not deployed: {r.get('reason')}.")
    for cid, r in s.failed.items():
        after = r.get("rollback") or ("The role rolls a host whose new configuration fails back to its last good one.")
        notes.append(f"{_cfg_txt(r)} failed to deploy on {r.get('host')}: {r.get('reason')}. {after}")
    for r in s.bench_failures:
        notes.append(f"{_cfg_txt(r)}: benchmark stopped on {r.get('host')}: {r.get('reason')}.")
    for row in s.rows:
        if row.get("status") in ("partial", "failed"):
            notes.append(
                f"{row.get('config_id')} C={row.get('concurrency')} repeat {row.get('repeat')}: "
                f"{row.get('requests_failed')} of {int(row.get('requests_ok') or 0) + int(row.get('requests_failed') or 0)}"
                f" requests failed ({row.get('error')}); the throughput counts successful tokens only."
            )
    noise = s.noise
    if noise["repeats"] <= 1:
        notes.append(
            "Each point was measured once, so the noise is unknown: throughputs within 1% "
            "count as equal and the smaller spec_steps wins (`--repeats 3` measures the spread)."
        )
    elif noise["max_rel_std_pct"] is not None:
        notes.append(
            f"Spread over {noise['repeats']} repeats (std/mean): median "
            f"{noise['median_rel_std_pct']}%, max {noise['max_rel_std_pct']}%. Differences "
            "within two standard errors (or 1%) count as equal; the smaller spec_steps wins."
        )
    swept = sorted({p.spec_steps for p in s.stats.values()})
    if len(swept) > 1:
        deepest = swept[-1]
        planned = [int(k) for k in (s.params.get("steps") or []) if str(k).isdigit()]
        at_edge = [c for c, ch in s.choices.items() if ch.chosen.spec_steps == deepest]
        early = any(r.get("kind") == "early_stop" for r in s.skipped.values())
        if at_edge and not early:
            levels_txt = ", ".join(map(str, at_edge))
            if planned and deepest < max(planned):
                notes.append(
                    f"At concurrency {levels_txt} the best setting is the deepest one measured "
                    f"(spec_steps {deepest}); the deeper ones planned did not come up or were "
                    "skipped (see above)."
                )
            else:
                notes.append(
                    f"At concurrency {levels_txt} the best setting is the deepest swept "
                    f"(spec_steps {deepest}); deeper settings were not measured and may be "
                    "faster still (widen --steps to find out)."
                )
    if float(s.params.get("temperature") or 0) == 0 and s.params.get("ignore_eos", True):
        notes.append(
            "Greedy decoding (temperature 0) with ignore_eos gives the draft an easy job: "
            "acceptance, and with it the best depth, can be lower on real sampled traffic "
            "(`--temperature 0.7` measures that workload)."
        )
    queued = []
    for cid, d in s.deploys.items():
        mrr = (d.get("capacity") or {}).get("max_running_requests")
        over = [c for c in s.levels if mrr and c > mrr]
        if over:
            queued.append(f"{cid} runs {mrr} at once (C={', '.join(map(str, over))})")
    if queued:
        notes.append(
            "Where concurrency exceeds max_running_requests the other requests queue: TTFT "
            "includes the wait, per-request tok/s does not. " + "; ".join(queued) + "."
        )
    return notes


def recommendation_json(s: Summary) -> dict[str, Any]:
    early = [
        {"config_id": (r.get("config") or {}).get("config_id"), "reason": r.get("reason"), "kind": r.get("kind")}
        for r in s.skipped.values()
    ]
    return {
        "by_concurrency": {str(c): ch.to_dict() for c, ch in sorted(s.choices.items())},
        "recommended": s.recommendation.to_dict(),
        "notes": s.notes,
        "skipped": early,
        "failed": [{"config_id": cid, "host": r.get("host"), "reason": r.get("reason")} for cid, r in s.failed.items()],
        "noise": s.noise,
        "deploy_best": None
        if s.deploy_best is None
        else {k: s.deploy_best.get(k) for k in ("config", "host", "status", "reason", "verified")},
        "server": s.server,
        "workload": {
            k: s.params.get(k)
            for k in (
                "temperature",
                "input_len",
                "output_len",
                "ignore_eos",
                "endpoint",
                "concurrency",
                "requests_per_level",
                "repeats",
            )
        },
    }


def _title(s: Summary) -> str:
    name = s.server.get("served_model_name") or s.params.get("served_model_name") or "SGLang"
    return (
        f"{name}: throughput vs speculative steps (temperature {s.params.get('temperature')}, "
        f"{s.params.get('input_len')} in / {s.params.get('output_len')} out tokens)"
    )


def capacity_by_config(s: Summary) -> dict[str, dict[str, Any]]:
    out = {}
    for cid, d in s.deploys.items():
        cfg = d.get("config") or {}
        cap = d.get("capacity") or {}
        out[cid] = {
            **cfg,
            "max_total_num_tokens": cap.get("max_total_num_tokens"),
            "max_running_requests": cap.get("max_running_requests"),
        }
    return out


def write_all(
    store: Store, params: dict[str, Any], *, target: list[int] | None = None, plot: bool = True, report: bool = True
) -> Summary:
    from . import report as report_mod

    records = store.records()
    s = summarize(records, params, target)
    store.write_results_csv(s.rows)
    store.write_json(RECOMMENDATION, recommendation_json(s))
    if plot:
        write_plot(store.out, s)
    if report:
        store.write_text(REPORT, report_mod.render(s))
    return s


def write_plot(out: Path, s: Summary) -> Path | None:
    from .plots import plot_throughput

    if not s.stats and not s.deploys:
        return None
    failed = {cid: (r.get("config") or {}) for cid, r in s.failed.items()}
    skipped = {cid: (r.get("config") or {}) for cid, r in s.skipped.items()}
    return plot_throughput(
        Path(out) / PLOT,
        s.stats,
        s.levels,
        capacity_by_config(s),
        title=_title(s),
        chosen={c: ch.chosen.config_id for c, ch in s.choices.items()},
        recommended=s.recommendation.to_dict() if s.recommendation.chosen else None,
        failed=failed,
        skipped=skipped,
    )
