"""report.md: the sweep as a person reads it (recommendation, tables, notes, definitions)."""

from __future__ import annotations

from typing import Any

from .outputs import PLOT, Summary

METRIC_DEFINITIONS = """\
- **Aggregate output tok/s** (`output_tok_s`): output tokens of the level's successful requests
  divided by the level's wall time, first send to last completion (vLLM `bench serve`'s output
  token throughput). A closed loop: C clients, each sends its next request when its previous one
  ends; a level sends `requests_per_level` requests (default max(4, 2 x C), as the seed did).
  Warm-up requests before the first level are not counted.
- **Per-request tok/s** (`per_request_tok_s`): mean over requests of (output tokens - 1) /
  (E2E - TTFT), the decode rate once a request runs. It excludes queueing and prefill, so it
  stays meaningful when C exceeds `max_running_requests`.
- **TTFT**: first chunk carrying output tokens minus send time (includes queue wait and prefill).
- **TPOT**: (E2E - TTFT) / (output tokens - 1) per request (vLLM, SGLang, AIPerf agree).
- **ITL**: chunk-robust inter-token latency: each gap between chunks is divided evenly over the
  tokens that chunk carried, so a speculative chunk of 4 tokens gives four samples of a quarter of
  the gap (vLLM PR #42661); percentiles are per token.
- **Output tokens** are the server's count (`meta_info.completion_tokens` or
  `usage.completion_tokens`), never the number of chunks.
- **Acceptance length** (`accept_length`): tokens per verify step for this level alone: sum of
  completion tokens / sum of `spec_verify_ct` over the level's requests (native `/generate`),
  else the level's delta of `generation_tokens_total` / `spec_verify_calls_total` from `/metrics`,
  else tokens per chunk; the source is in `accept_length_source`. SGLang's own
  `avg_spec_accept_length` is cumulative since start-up and is not used.
- **Failed requests**: HTTP errors, streams cut before their final chunk, and, with `ignore_eos`,
  streams with fewer tokens than requested.
- **Choosing**: per level, the highest mean aggregate throughput; among configurations within the
  measured noise (two standard errors of the difference over repeats) or 1% of it, the smallest
  spec_steps (vLLM `tune_speculative_k`'s rule). The workload choice averages each
  configuration's throughput relative to the best at each target level.
- **Early stop**: steps go up one configuration at a time; when every level's throughput at the
  newest depth is below (beyond noise) the best at a shallower depth, deeper steps are skipped.
"""


def _f(v: Any, nd: int = 1) -> str:
    if v is None or v == "":
        return "-"
    try:
        return f"{float(v):,.{nd}f}"
    except (TypeError, ValueError):
        return str(v)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(x).replace("|", "/").replace("\n", " ") for x in r) + " |")
    return "\n".join(out)


def render(s: Summary) -> str:
    p = s.params
    name = s.server.get("served_model_name") or "the server"
    lines: list[str] = [f"# Speculative-decoding sweep: {name}", ""]
    hosts = sorted({r.get("host") for r in s.records if r.get("type") == "deploy" and r.get("host")})
    meta = [
        ("server version", s.server.get("version") or "-"),
        ("hosts", ", ".join(hosts) or p.get("url") or "-"),
        (
            "workload",
            f"{p.get('input_len')} input / {p.get('output_len')} output tokens, temperature "
            f"{p.get('temperature')}, ignore_eos {p.get('ignore_eos', True)}, endpoint "
            f"{p.get('endpoint', 'generate')}",
        ),
        (
            "levels",
            f"concurrency {', '.join(map(str, s.levels))}; requests per level "
            f"{p.get('requests_per_level') or 'max(4, 2 x C)'}; repeats {p.get('repeats', 1)}",
        ),
    ]
    if p.get("steps") is not None:
        meta.append(
            ("swept", f"spec_steps {p.get('steps')}, topk {p.get('topk')}, algorithm {p.get('algorithm', 'NEXTN')}")
        )
    for k, v in meta:
        lines.append(f"- **{k}**: {v}")
    lines += ["", "## Recommendation", ""]
    rec = s.recommendation
    if rec.chosen is not None:
        c = rec.chosen
        extra = (
            ""
            if (c.spec_topk == 1 and c.spec_draft_tokens is None)
            else f", topk {c.spec_topk}, draft tokens {c.spec_draft_tokens or 'auto'}"
        )
        lines.append(
            f"**spec_steps {c.spec_steps}**{extra} for the stated workload "
            f"(concurrency {', '.join(map(str, rec.workload['concurrency']))}): {rec.reason}."
        )
    else:
        lines.append(f"No recommendation: {rec.reason}.")
    lines.append("")
    if s.choices:
        rows = []
        for c, ch in sorted(s.choices.items()):
            ru = ch.runner_up
            rows.append(
                [
                    c,
                    ch.chosen.spec_steps,
                    _f(ch.chosen.mean),
                    _f(ch.chosen.per_request_mean),
                    f"{ru.config_id} ({_f(ru.mean)})" if ru else "-",
                    _f(ch.margin_pct) + "%" if ch.margin_pct is not None else "-",
                    _f(ch.tolerance_pct) + "%",
                ]
            )
        lines.append(
            _table(
                [
                    "concurrency",
                    "best spec_steps",
                    "aggregate tok/s",
                    "per-request tok/s",
                    "runner-up (tok/s)",
                    "margin",
                    "tie tolerance",
                ],
                rows,
            )
        )
        lines.append("")
    if s.deploy_best:
        d = s.deploy_best
        lines.append(
            f"Deployed the recommendation at the end (`--deploy-best`) on {d.get('host')}: "
            f"{d.get('status')}" + (f", {d.get('reason')}" if d.get("reason") else "") + "."
        )
        lines.append("")
    lines += ["## Throughput against steps", "", f"![throughput vs steps]({PLOT})", ""]
    lines += ["## Results (mean over repeats)", ""]
    rows = []
    for (cid, c), pt in sorted(s.stats.items(), key=lambda kv: (kv[1].order_key, kv[0][1])):
        sub = [
            r
            for r in s.rows
            if r.get("config_id") == cid and r.get("concurrency") == c and r.get("status") in ("ok", "partial")
        ]

        def m(key: str) -> float | None:
            vals = [float(r[key]) for r in sub if r.get(key) not in (None, "")]
            return sum(vals) / len(vals) if vals else None

        spread = f" ± {_f(pt.std)}" if pt.n > 1 else ""
        ok = sum(int(r.get("requests_ok") or 0) for r in sub)
        bad = sum(int(r.get("requests_failed") or 0) for r in sub)
        rows.append(
            [
                pt.spec_steps,
                pt.spec_topk,
                pt.spec_draft_tokens or "auto",
                c,
                _f(pt.mean) + spread,
                _f(pt.per_request_mean),
                _f(m("ttft_ms_p50")),
                _f(m("ttft_ms_p99")),
                _f(m("tpot_ms_p50"), 2),
                _f(m("itl_ms_p99"), 2),
                _f(pt.accept_mean, 2),
                f"{ok}/{bad}",
            ]
        )
    if rows:
        lines.append(
            _table(
                [
                    "steps",
                    "topk",
                    "draft",
                    "C",
                    "aggregate tok/s",
                    "per-request tok/s",
                    "TTFT p50 ms",
                    "TTFT p99 ms",
                    "TPOT p50 ms",
                    "ITL p99 ms",
                    "accept len",
                    "ok/failed",
                ],
                rows,
            )
        )
    else:
        lines.append("Nothing was measured.")
    lines += ["", "## Configurations", ""]
    crow = []
    seen = set()
    timing = {(r.get("config") or {}).get("config_id"): r for r in s.records if r.get("type") == "timing"}
    # SGLang's warnings that every configuration printed (the 48-request reset, say) are listed once,
    # below the table; a configuration's row shows only what set it apart.
    deploys = [r for r in s.records if r.get("type") in ("deploy", "skip")]
    common = _common_warnings([r for r in deploys if r.get("type") == "deploy" and r.get("status") == "ok"])
    for r in deploys:
        cfg = r.get("config") or {}
        cap = r.get("capacity") or {}
        spec = r.get("speculative") or {}
        key = (cfg.get("config_id"), r.get("host"), r.get("type"), r.get("status"))
        if key in seen:
            continue
        seen.add(key)
        status = r.get("status") if r.get("type") == "deploy" else "skipped"
        what = r.get("reason") or "; ".join(str(w) for w in (r.get("warnings") or []) if str(w) not in common)
        tm = timing.get(cfg.get("config_id")) if r.get("type") == "deploy" and r.get("status") == "ok" else None
        crow.append(
            [
                cfg.get("config_id"),
                r.get("host") or "-",
                status,
                _f(r.get("ready_s")),
                _f(r.get("elapsed_s")),
                _f((tm or {}).get("total_s")),
                cap.get("max_total_num_tokens") or "-",
                cap.get("max_running_requests") or "-",
                spec.get("num_draft_tokens") or "-",
                _clip(what or "", 300),
            ]
        )
    if crow:
        lines.append(
            _table(
                [
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
                ],
                crow,
            )
        )
    if common:
        lines += ["", "Every configuration's server logged these warnings:", ""]
        lines += [f"- {w}" for w in sorted(common)]
    if s.notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in s.notes]
    lines += ["", "## How the numbers are measured", "", METRIC_DEFINITIONS]
    lines += [
        "## Files",
        "",
        "- `results.csv`: a row per configuration x concurrency x repeat",
        "- `records.jsonl`: the raw append-only record (`--resume` continues from it)",
        "- `recommendation.json`, `throughput_vs_steps.png`, this report",
        "- `deploy/<config>/`: ansible-runner stdout and job events of each deploy (API key scrubbed)",
        "",
    ]
    return "\n".join(lines)


def _common_warnings(deploys: list[dict[str, Any]]) -> set[str]:
    """The warnings every one of these deploys logged (empty for fewer than two deploys)."""
    sets = [{str(w) for w in (r.get("warnings") or [])} for r in deploys]
    return set.intersection(*sets) if len(sets) > 1 else set()


def _clip(text: str, limit: int) -> str:
    """Cut at a word boundary with an ellipsis, so a table cell never ends mid-word."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."
