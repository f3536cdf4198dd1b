"""report.md: the sweep as a person reads it (recommendation, tables, notes, definitions)."""

from __future__ import annotations

from typing import Any

from ..data.records import DeployRecord, Record, SkipRecord
from ..data.store import PLOT, SCHEDULE_PLOT
from ..decide.schedule_phase import level_batch
from ..decide.search.text import misfit_text
from ..measure import definitions
from ..measure.stats import fixed, readable
from ..spec import workload as workload_mod
from .summary import schedule_json, schedule_phase_text
from .views import Summary

METRIC_DEFINITIONS = (
    definitions.markdown()
    + """
How the results are judged:

- **Intervals** (`ci95`): 95% confidence intervals. From one level: batch means over the level's
  windows (cut at every C-th completion) for aggregate tok/s, order statistics for TTFT/TPOT
  p50: they cover the noise *within* that level. With `--repeats`: a Student t interval over the
  repeats (run-to-run noise on one deployment). When a configuration was deployed more than once
  (the confirmation round, `--confirm`; or `--repeat-deploys`), the deployment-to-deployment spread
  is pooled over those configurations and every cell's aggregate tok/s interval carries it
  (restart-to-restart noise; t on the extra starts). Never narrower than the requests alone say.
- **Precision**: with `--requests-per-level auto` a level sends requests until its interval's
  half-width is within `--precision` of its mean (or a cap on requests or seconds is hit); the
  precision reached is in every cell.
- **Choosing**: per level, a configuration is named the winner only when its interval lies wholly
  above every other's ("beyond noise"). Otherwise the level is *tied within noise*: among the
  configurations tied with the best whose mean is within 1% of the best mean, the one with more KV
  capacity (`max_total_num_tokens`), then the cheaper setting (fewer steps), is chosen (vLLM
  `tune_speculative_k` prefers the smaller K within 1% of the best); with none that close, the
  highest mean. Cells with a failed request, and with
  `--slo` cells that miss it, do not compete. The workload choice averages each configuration's
  throughput relative to the best of the configurations scored at each target level, with the same
  rule on that score's interval, and two differences: a tied configuration beaten beyond noise at
  some level by another tied one and winning none is left out, and a cheaper one more than 1% below
  the highest score is still taken where it wins a level beyond noise (a genuine trade-off: the
  reason names the level).
- **Goodput** (`--slo`): output tok/s of the requests that succeeded and met every limit (SGLang
  `bench_serving --goodput`, DistServe); a cell meets the SLO when each limited percentile over
  its requests is within its limit.
- **What is deployed**: with `--search model` (the default) the baseline, two anchor depths, then
  only configurations a model fitted to these measurements says could still win a level (the
  search's own section lists the others with their predictions). With `--search grid`, steps go up
  one configuration at a time (**early stop**: when every level's throughput at the newest depth
  is below, beyond noise, the best at a shallower depth, deeper steps are skipped).
"""
)


def _f(v: Any, nd: int = 1) -> str:
    """A number with `nd` decimals, thousands separated (a nonzero one that would read 0 keeps two
    significant figures: tuner/measure/stats.py `fixed`)."""
    if v is None or v == "":
        return "-"
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return fixed(x, nd, grouping=True)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x).replace("|", "/").replace("\n", " ") for x in r) + " |")
    return "\n".join(out)


def render(s: Summary) -> str:
    """The whole report: its sections in reading order (each a function of the summary)."""
    parts = [section(s) for section in SECTIONS]
    return "\n".join(line for part in parts for line in part)


def _header(s: Summary) -> list[str]:
    w = s.spec.workload
    name = s.server.get("served_model_name") or "the server"
    hosts = sorted({d.host for d in s.state.records if isinstance(d, DeployRecord) and d.TYPE == "deploy" and d.host})
    meta = [
        ("server version", s.server.get("version") or "-"),
        ("hosts", ", ".join(hosts) or s.spec.url or "-"),
        (
            "workload",
            f"{w.input_len or 'dataset'} input / {w.output_len or 'dataset'} output tokens, temperature "
            f"{', '.join(f'{t:g}' for t in w.temperature)}"
            + (f" (top_p {w.top_p:g})" if w.top_p < 1 else "")
            + f", ignore_eos {w.ignore_eos}, endpoint {w.endpoint}",
        ),
        ("prompts", workload_mod.describe(w.dataset, w.dataset_sample)),
        (
            "levels",
            f"concurrency {', '.join(map(str, s.levels))}; requests per level "
            + (
                f"{w.requests_per_level}" + (" C" if isinstance(w.requests_per_level, str) else "")
                if not w.adaptive
                else f"until +-{w.precision:g}% (at least max(4, 2 x C), at most "
                f"{w.max_requests_per_level or 'max(32, 16 x C)'} or {w.max_level_s:g} s)"
            )
            + f"; repeats {w.repeats}"
            + (f"; deployments per configuration {s.spec.repeat_deploys}" if s.spec.repeat_deploys > 1 else ""),
        ),
    ]
    if w.slo is not None:
        meta.append(("SLO", w.slo.describe()))
    if s.spec.command == "sweep":
        meta.append(
            ("swept", f"spec_steps {list(s.spec.steps)}, topk {list(s.spec.topk)}, algorithm {s.spec.algorithm}")
        )
        meta.append(
            (
                "search",
                'model-guided (`--search model`; see "Model-guided search" below)'
                if s.spec.search == "model"
                else "grid (every configuration, in order)",
            )
        )
    return [f"# Speculative-decoding sweep: {name}", ""] + [f"- **{k}**: {v}" for k, v in meta]


def _recommendation(s: Summary) -> list[str]:
    lines = ["", "## Recommendation", ""]
    views = list(s.views.values())
    many = len(views) > 1
    if not views:
        lines.append(f"No recommendation: {s.recommendation.reason}.")
        lines.append("")
    for v in views:
        if many:
            lines += [f"### Temperature {v.temperature:g}", ""]
        rec = v.recommendation
        if rec.chosen is not None:
            c = rec.chosen
            extra = (
                ""
                if (c.spec_topk == 1 and c.spec_draft_tokens is None)
                else f", topk {c.spec_topk}, draft tokens {c.spec_draft_tokens or 'auto'}"
            )
            what = (
                f"**{c.config.label}** (`{c.config_id}`, {KIND_WORDS.get(rec.kind, rec.kind)})"
                if c.config.is_schedule or c.spec_steps == 0
                else f"**spec_steps {c.spec_steps}**{extra}"
            )
            lines.append(
                f"{what} for the stated workload "
                f"(concurrency {', '.join(map(str, rec.workload['concurrency']))}"
                + (f", temperature {v.temperature:g}" if many else "")
                + f"): {rec.reason}."
            )
        else:
            lines.append(f"No recommendation: {rec.reason}.")
        lines.append("")
        lines += _envelope(v)
        rows = []
        for level in s.levels:
            ch = v.choices.get(level)
            if ch is None:
                if level in v.unchosen:
                    rows.append([level, "**none**", "-", "-", "-", "-", v.unchosen[level]])
                continue
            iv = ch.chosen.interval
            ru = ch.runner_up
            rows.append(
                [
                    level,
                    ch.chosen.spec_steps,
                    f"{_f(ch.chosen.mean)} [{_f(iv.low)}, {_f(iv.high)}]",
                    _f(ch.chosen.per_request_mean),
                    f"{ru.config_id} ({_f(ru.mean)})" if ru else "-",
                    f"{ch.margin_pct:,.1f}%" if ch.margin_pct is not None else "-",
                    ("**tied within noise**: " if ch.tied else "") + ch.verdict,
                ]
            )
        if rows:
            header = [
                "concurrency",
                "best spec_steps",
                "aggregate tok/s [95% CI]",
                "per-request tok/s",
                "runner-up (tok/s)",
                "margin",
                "verdict",
            ]
            lines += [_table(header, rows), ""]
    best = s.state.deploy_best
    if best:
        outcomes = [
            f"on {host}: {r.status}" + (f", {r.reason}" if r.reason else "") for host, r in sorted(best.items())
        ]
        deployed = sorted({r.config.config_id for r in best.values()})
        chosen = s.recommendation.chosen.config_id if s.recommendation and s.recommendation.chosen else None
        # `report DIR --target-concurrency/--slo` may recommend another configuration than the
        # sweep's run did: name what was deployed
        what = "the recommendation" if deployed == [chosen] else "the sweep's recommendation at the time"
        if len(s.views) > 1 and s.temperatures:
            # below the last temperature's section: say whose recommendation it was
            what += f", {', '.join(deployed)}, at temperature {s.temperatures[0]:g} (the first of --temperature),"
        elif deployed != [chosen]:
            what += f" ({', '.join(deployed)})"
        lines.append(f"Deployed {what} at the end (`--deploy-best`) " + "; ".join(outcomes) + ".")
        lines.append("")
    return lines


KIND_WORDS = {
    "static": "a static depth",
    "no_speculation": "no speculation",
    "adaptive_default": "SGLang's default adaptive config",
    "adaptive_tuned": "a tuned adaptive config",
}
ENVELOPE_COLUMNS = (
    ("recommended", "recommendation"),
    ("level_best_static", "level's best static depth"),
    ("best_static", "best single static depth"),
    ("default_adaptive", "SGLang default adaptive"),
    ("no_speculation", "no speculation (k0)"),
)


def _envelope(v: Any) -> list[str]:
    """The first table: the recommendation against what a user could run instead, per level, with
    who wins and why in words read from the measurements (tuner/decide/envelope.py)."""
    env = v.envelope
    if env is None or not env.rows:
        return []
    rows = []
    for c, row in sorted(env.rows.items()):
        cells: list[Any] = [c]
        for key, _ in ENVELOPE_COLUMNS:
            p = row.get(key)
            if p is None:
                cells.append("-")
                continue
            iv = p.interval
            label = "" if key in ("recommended", "default_adaptive", "no_speculation") else f"{p.config_id}: "
            cells.append(f"{label}{_f(p.mean)} [{_f(iv.low)}, {_f(iv.high)}], batch {level_batch(p, None)[0]:g}")
        cells.append(env.words.get(c, "-"))
        rows.append(cells)
    out = [
        _table(["C"] + [n for _, n in ENVELOPE_COLUMNS] + ["who wins, and what the server did"], rows),
        "",
        "Aggregate tok/s [95% CI] and the running batch the server reported (its /metrics gauge); depths of "
        "adaptive configurations are read from their accept length against the static depths'. A column is - "
        "where that reference was not measured.",
        "",
    ]
    out += [f"- {line}." for line in env.summary]
    if env.summary:
        out.append("")
    return out


def draws_plot(s: Summary) -> bool:
    """Whether the sweep has anything for throughput_vs_steps.png (outputs.write_plot draws it
    only then, and the report links it only then: every deploy failed, no picture)."""
    return bool(s.stats or s.state.deploys)


def _results(s: Summary) -> list[str]:
    picture = f"![throughput vs steps]({PLOT})" if draws_plot(s) else "No plot: no configuration started."
    lines = ["## Throughput against steps", "", picture, ""]
    lines += ["## Results (every cell, with its 95% interval)", ""]
    rows = []
    many = len(s.views) > 1
    for v in s.views.values():
        # the static depths first, then the schedule phase's adaptive configurations (named in the
        # steps column: their depth moves with the batch), every cell of both
        cells = sorted(
            (v.every or v.stats).items(), key=lambda kv: (kv[1].config.is_schedule, kv[1].order_key, kv[0][1])
        )
        for (_cid, c), pt in cells:
            iv = pt.interval
            ok = sum(lv.metrics.requests_ok for lv in pt.levels)
            bad = sum(lv.metrics.requests_failed for lv in pt.levels)
            ttft = pt.ttft_p50_ci95
            tpot = pt.tpot_p50_ci95
            mark = " (partial)" if pt.partial else ""
            temp_col: list[Any] = [f"{v.temperature:g}"] if many else []
            rows.append(
                temp_col
                + [
                    pt.config.label if pt.config.is_schedule else pt.spec_steps,
                    pt.spec_topk,
                    pt.spec_draft_tokens or "auto",
                    c,
                    f"{_f(pt.mean)}{mark}",
                    f"[{_f(iv.low)}, {_f(iv.high)}]",
                    "-" if pt.precision_pct is None else f"+-{pt.precision_pct:.1f}%",
                    f"{iv.noise} ({pt.n})" if iv.noise in ("repeats", "deployments") else iv.noise,
                    _f(pt.per_request_mean),
                    _ci_txt(pt.metric_mean("ttft_ms_p50"), ttft, 0),
                    _f(pt.metric_mean("ttft_ms_p99"), 0),
                    _ci_txt(pt.metric_mean("tpot_ms_p50"), tpot, 2),
                    _f(pt.accept_mean, 2),
                    _f(pt.metric_mean("prompt_tokens_mean"), 0),
                    f"{ok}/{bad}",
                ]
            )
    if not rows:
        return lines + ["Nothing was measured."]
    header = (["T"] if many else []) + [
        "steps",
        "topk",
        "draft",
        "C",
        "aggregate tok/s",
        "95% CI",
        "precision",
        "noise covered",
        "per-request tok/s",
        "TTFT p50 ms [CI]",
        "TTFT p99 ms",
        "TPOT p50 ms [CI]",
        "accept len",
        "prompt tokens",
        "ok/failed",
    ]
    return lines + [_table(header, rows)]


def _ci_txt(value: float | None, iv: Any, nd: int) -> str:
    if value is None:
        return "-"
    if iv is None:
        return _f(value, nd)
    return f"{_f(value, nd)} [{_f(iv.low, nd)}, {_f(iv.high, nd)}]"


def _configurations(s: Summary) -> list[str]:
    lines = ["", "## Configurations", ""]
    crow = []
    seen = set()
    # SGLang's warnings that every configuration printed (the 48-request reset, say) are listed once,
    # below the table; a configuration's row shows only what set it apart.
    events: list[Record] = [
        r for r in s.state.records if (isinstance(r, DeployRecord) and r.TYPE == "deploy") or isinstance(r, SkipRecord)
    ]
    common = _common_warnings([r for r in events if isinstance(r, DeployRecord) and r.ok])
    for r in events:
        dep = r if isinstance(r, DeployRecord) else None
        key = (r.config_id, getattr(r, "host", None), r.TYPE, dep.status if dep else None)
        if key in seen:
            continue
        seen.add(key)
        reason = getattr(r, "reason", None)
        what = reason or "; ".join(str(w) for w in ((dep.warnings if dep else None) or []) if str(w) not in common)
        tm = s.state.timings.get(r.config_id) if dep is not None and dep.ok else None
        crow.append(
            [
                r.config_id,
                getattr(r, "host", None) or "-",
                dep.status if dep else "skipped",
                _f(dep.ready_s if dep else None),
                _f(dep.elapsed_s if dep else None),
                _f(tm.total_s if tm else None),
                (dep.max_total_num_tokens if dep else None) or "-",
                (dep.max_running_requests if dep else None) or "-",
                (dep.resolved_draft_tokens if dep else None) or "-",
                _clip(what or "", 300),
            ]
        )
    if crow:
        header = [
            "config",
            "host",
            "status",
            "ready s",
            "deploy s",
            "total s",
            "max_total_num_tokens",
            "max_running_requests",
            "draft tokens",
            "notes",
        ]
        lines.append(_table(header, crow))
    if common:
        lines += ["", "Every configuration's server logged these warnings:", ""]
        lines += [f"- {w}" for w in sorted(common)]
    return lines


def _schedule(s: Summary) -> list[str]:
    """The schedule phase: schedule, best static and SGLang's default adaptive config per level."""
    primary = s.primary_view
    verdict = primary.verdict if primary is not None else None
    lines = ["", "## Adaptive speculation (the schedule phase)", "", f"Schedule phase: {schedule_phase_text(s)}."]
    if verdict is None:
        return lines
    if len(s.views) > 1 and primary is not None:
        lines += [
            "",
            f"At temperature {primary.temperature:g}, the first of --temperature: the comparison below is that temperature's.",
        ]
    lines += ["", f"![schedule vs static]({SCHEDULE_PLOT})", ""]
    names = (
        ("best_static", f"best static ({verdict.best_static.config_id})" if verdict.best_static else "best static"),
        ("schedule", f"tuned ({verdict.schedule.label})" if verdict.schedule else "tuned"),
        ("default_adaptive", "SGLang default adaptive"),
    )
    rows = []
    for c, row in sorted(verdict.per_level.items()):
        cells: list[Any] = [c]
        for key, _ in names:
            p = row.get(key)
            if p is None:
                cells.append("-")
                continue
            iv = p.interval
            batch = level_batch(p, None)[0]
            cells.append(f"{_f(p.mean)} [{_f(iv.low)}, {_f(iv.high)}], batch {batch:g}")
        rows.append(cells)
    lines.append(_table(["C"] + [n for _, n in names], rows))
    lines += ["", "Aggregate tok/s [95% CI] and the running batch the server reported (its 90th percentile).", ""]
    caps = [f"{cid} {n}" for cid, n in verdict.capacity.items() if n and cid in _compared(verdict)]
    if caps:
        lines.append("KV pool (max_total_num_tokens): " + ", ".join(caps) + ".")
    for cid, text in verdict.each.items():
        lines.append(f"- {cid}: {text}.")
    rec = primary.recommendation if primary is not None else s.recommendation
    lines.append(
        "- Recommended: "
        + (f"**{rec.chosen.config.label}** ({KIND_WORDS.get(rec.kind, rec.kind)}): " if rec.chosen else "")
        + rec.reason
        + "."
    )
    warning = schedule_json(s, primary).get("kv_warning")
    if warning:
        lines.append(f"- **KV warning**: {warning}.")
    return lines


def _compared(verdict: Any) -> set[str]:
    ids = {c.config_id for c in (verdict.schedule, verdict.default_adaptive) if c is not None}
    if verdict.best_static is not None:
        ids.add(verdict.best_static.config_id)
    return ids


def _search(s: Summary) -> list[str]:
    """`--search model`: what was deployed and why not the rest, and how the predictions held up."""
    ss = s.search
    if ss is None:
        return []
    lines = ["", "## Model-guided search", ""]
    share = ss.inside_share
    lines.append(
        f"`--search {ss.mode}` deployed {len(ss.deployed)} of {ss.planned} planned configurations "
        f"({', '.join(ss.deployed) or 'none'}); {len(ss.skipped)} were not deployed on the model's prediction"
        + (
            f"; {sum(c.inside for c in ss.checked)} of {len(ss.checked)} levels measured after being predicted "
            f"({share:.0%}) landed inside their predicted interval"
            if share is not None
            else ""
        )
        + '. How the model works: docs/tuner.md "Model-guided search".'
    )
    if ss.model:
        lines += ["", f"Final fit: {ss.model}."]
    if ss.checked:
        lines += ["", "### Predicted vs measured", ""]
        lines.append(
            "Aggregate tok/s predicted just before each configuration was deployed (interval: where a "
            "measurement was expected to land), and what it measured."
        )
        lines.append("")
        rows = [
            [
                c.config_id,
                c.concurrency,
                f"{_f(c.predicted.mean, 0)} ({_f(c.predicted.lo, 0)}-{_f(c.predicted.hi, 0)})",
                _f(c.measured, 0),
                f"{c.error_pct:+.1f}%",
                "yes" if c.inside else "**NO: misfit**",
            ]
            for c in ss.checked
        ]
        lines.append(_table(["config", "C", "predicted tok/s (interval)", "measured", "error", "inside"], rows))
    if ss.skipped:
        lines += ["", "### Not deployed, on the model's prediction", ""]
        rows = []
        for sk in ss.skipped:
            pred = sk.prediction
            levels = "; ".join(
                f"C={lp.concurrency}: {_f(lp.output_tok_s.mean, 0)} ({_f(lp.output_tok_s.lo, 0)}-"
                f"{_f(lp.output_tok_s.hi, 0)})"
                for lp in (pred.levels if pred else ())
            )
            if pred is not None and not pred.can_run:
                kv, mrr = pred.max_total_num_tokens, pred.max_running_requests
                levels = "; ".join(
                    f"{name} {_f(b.mean, 0)} ({b.interval_text(lambda x: _f(x, 0))})"
                    for name, b in (("max_total_num_tokens", kv), ("max_running_requests", mrr))
                    if b is not None
                )
            rows.append([sk.config_id, levels or "-", _clip(sk.reason, 300)])
        lines.append(_table(["config", "predicted tok/s (interval) per level", "why not deployed"], rows))
    if ss.misfits:
        lines += ["", "### Misfits", ""]
        lines.append(
            "Measurements outside the interval predicted for them: the model was refitted with them, its "
            "later intervals widened accordingly, and "
            + (
                f"from the first of them on {', '.join(ss.skipped_unproven)} were still skipped on the model's "
                "predictions (the sweep was recorded before a misfit stopped the skips), "
                if ss.skipped_unproven
                else "from the first of them on nothing was skipped on a prediction "
            )
            + (
                f"until the refit predicted a fresh deployment, {ss.vouched}, inside its band at every "
                "level (a refit earns the right to skip out of sample)."
                if ss.vouched
                else "(every configuration left was measured)."
                if not ss.skipped_unproven
                else "and no refit was proven after it."
            )
        )
        lines.append("")
        lines += [f"- {m.config.config_id}: {misfit_text(m)}" for m in ss.misfits]
    return lines


def _notes(s: Summary) -> list[str]:
    if not s.notes:
        return []
    return ["", "## Notes", ""] + [f"- {n}" for n in s.notes]


def _definitions(s: Summary) -> list[str]:
    return [
        "",
        "## How the numbers are measured",
        "",
        METRIC_DEFINITIONS,
        "## Files",
        "",
        "- `results.csv`: a row per configuration x temperature x concurrency x deployment x repeat "
        "(x host and attempt where a level ran on several, or was measured again after its server was lost)",
        "- `records.jsonl`: the raw append-only record (`--resume` continues from it)",
        "- `recommendation.json`, `throughput_vs_steps.png`, this report",
        "- `deploy/<config>/`: ansible-runner stdout and job events of each deploy (API key scrubbed)",
        "",
    ]


def _slo_section(s: Summary) -> list[str]:
    """Per cell: goodput and whether it meets the SLO (only with --slo)."""
    if s.slo is None:
        return []
    lines = ["", "## Service-level objectives", "", f"SLO: {s.slo.describe()}.", ""]
    rows = []
    many = len(s.views) > 1
    for v in s.views.values():
        for (_cid, c), pt in sorted(v.stats.items(), key=lambda kv: (kv[0][1], kv[1].order_key)):
            r = pt.slo
            if r is None:
                continue
            obs = ", ".join(f"{k} {'-' if val is None else readable(val)}" for k, val in r.observed.items())
            first: list[Any] = [f"{v.temperature:g}"] if many else []
            rows.append(
                first
                + [
                    c,
                    pt.config_id,
                    _f(pt.mean),
                    _f(r.goodput_tok_s),
                    f"{r.attainment * 100:.1f}%",
                    obs,
                    r.requests,
                    "**yes**" if r.meets else "no",
                ]
            )
    if not rows:
        return lines + ["No per-request samples were kept (a directory from an older version)."]
    header = (["T"] if many else []) + [
        "C",
        "config",
        "aggregate tok/s",
        "goodput tok/s",
        "requests within every limit",
        "observed",
        "requests",
        "meets SLO",
    ]
    lines += [_table(header, rows), ""]
    for v in s.views.values():
        for c, why in sorted(v.unchosen.items()):
            lines.append(f"- Concurrency {c}" + (f", temperature {v.temperature:g}" if many else "") + f": {why}.")
    return lines


def _cross_checks(s: Summary) -> list[str]:
    """The client's counts against the server's and /metrics', per level (tuner/decide/crosscheck.py)."""
    ck = s.checks
    lines = ["", "## Cross-checks", ""]
    if not ck.levels:
        return lines + ["No level could be cross-checked (no /metrics, or nothing measured)."]
    diffs = "; ".join(f"{k}: largest difference {v:.2f}%" for k, v in ck.max_diff_pct.items())
    lines.append(f"{ck.comparisons} comparisons over {ck.levels} levels ({diffs}).")
    if ck.warnings:
        lines += ["", f"**Warning: {len(ck.warnings)} disagreement(s) above 1%:**", ""]
        lines += [f"- {w}" for w in ck.warnings[:40]]
        if len(ck.warnings) > 40:
            lines.append(f"- ... and {len(ck.warnings) - 40} more (recommendation.json `cross_checks`)")
    else:
        lines.append("Every comparison agrees within 1%.")
    return lines


def _verify(s: Summary) -> list[str]:
    from .verify_text import report_section

    return report_section(s.state, s.spec.verify, s.spec.command == "sweep")


SECTIONS = (
    _header,
    _recommendation,
    _verify,
    _results,
    _slo_section,
    _cross_checks,
    _schedule,
    _configurations,
    _search,
    _notes,
    _definitions,
)


def _common_warnings(deploys: list[DeployRecord]) -> set[str]:
    """The warnings every one of these deploys logged (empty for fewer than two deploys)."""
    sets = [{str(w) for w in (r.warnings or [])} for r in deploys]
    return set.intersection(*sets) if len(sets) > 1 else set()


def _clip(text: str, limit: int) -> str:
    """Cut at a word boundary with an ellipsis, so a table cell never ends mid-word."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."
