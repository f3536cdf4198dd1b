"""results.csv: a row per configuration x temperature x concurrency x deployment x repeat
(x host and attempt where those differ), derived from the folded records.

Pure: `result_rows(state, workload)` is what `Store.write_results_csv` writes. A configuration
that failed to deploy, was skipped, or whose benchmark stopped before its first level gets one row
per planned concurrency level with that status and its reason, so the table shows every planned
point.
"""

from __future__ import annotations

from typing import Any

from ..spec.slo import Slo, evaluate
from ..spec.sweepspec import WorkloadSpec
from .records import BenchFailedRecord, DeployRecord, Measured, Record, SkipRecord, SweepState

# The first columns after the ids are the contract's (docs/tuner.md "Output"), in its order.
RESULT_COLUMNS = [
    "config_id",
    "host",
    "spec_algorithm",
    "spec_steps",
    "spec_topk",
    "spec_draft_tokens",
    "temperature",
    "input_len",
    "output_len",
    "concurrency",
    "repeat",
    "requests_ok",
    "requests_failed",
    "output_tokens",
    "wall_s",
    "output_tok_s",
    "per_request_tok_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms_p50",
    "tpot_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "e2e_ms_p50",
    "e2e_ms_p99",
    "accept_length",
    "accept_length_source",
    "max_total_num_tokens",
    "max_running_requests",
    "resolved_draft_tokens",
    "ready_s",
    "status",
    "error",
    # issue #11: intervals, deployments, sampling, SLO, cross-checks (docs/tuner.md "Output")
    "output_tok_s_ci_low",
    "output_tok_s_ci_high",
    "samples",
    "precision_pct",
    "windows",
    "stop_reason",
    "ttft_ms_p50_ci_low",
    "ttft_ms_p50_ci_high",
    "tpot_ms_p50_ci_low",
    "tpot_ms_p50_ci_high",
    "deployment",
    "attempt",
    "server_lost",
    "top_p",
    "prompt_tokens_mean",
    "goodput_tok_s",
    "slo_attainment",
    "meets_slo",
    "stream_tokens",
    "metrics_tokens",
    "spec_verify_ct",
    "metrics_verify_calls",
    # issue #12: the batch the server ran (/metrics num_running_reqs) and the adaptive configuration
    "running_reqs_p90",
    "running_reqs_mean",
    "spec_schedule",
    # issue #13: the level's acceptance histogram (verify steps that accepted 0, 1, ... drafts)
    "accept_hist",
]


def _config_fields(rec: Record) -> dict[str, Any]:
    c = rec.config.to_json()
    keys = ("config_id", "spec_steps", "spec_topk", "spec_draft_tokens", "spec_algorithm", "spec_schedule")
    return {k: c.get(k) for k in keys}


def _deploy_fields(dep: DeployRecord | None) -> dict[str, Any]:
    if dep is None:
        return {}
    return {
        "max_total_num_tokens": dep.max_total_num_tokens,
        "max_running_requests": dep.max_running_requests,
        "resolved_draft_tokens": dep.resolved_draft_tokens,
        "ready_s": dep.ready_s,
    }


def level_row(m: Measured, slo: Slo | None = None) -> dict[str, Any]:
    lv = m.level
    metrics = lv.metrics.to_dict()
    errors = metrics.pop("errors", None) or {}
    row = {
        **_config_fields(lv),
        **_deploy_fields(m.deploy),
        "host": lv.host,
        "temperature": lv.temperature,
        "top_p": lv.top_p,
        "input_len": lv.input_len,
        "output_len": lv.output_len,
        "concurrency": lv.concurrency,
        "repeat": lv.repeat,
        "deployment": lv.deployment,
        "attempt": lv.attempt,
        "server_lost": lv.server_lost or None,
        "stop_reason": lv.stop_reason,
        **metrics,
        "accept_hist": " ".join(str(n) for n in lv.metrics.accept_hist) if lv.metrics.accept_hist else None,
        "error": "; ".join(f"{n}x {k}" for k, n in errors.items()) or None,
    }
    if slo is not None and lv.samples is not None:
        res = evaluate(slo, [(lv.samples, lv.metrics.output_tok_s, lv.metrics.requests_failed)])
        if res is not None:
            row.update(goodput_tok_s=res.goodput_tok_s, slo_attainment=res.attainment, meets_slo=res.meets)
    return row


def terminal_rows(rec: Record, workload: WorkloadSpec | None) -> list[dict[str, Any]]:
    status = (
        "skipped"
        if isinstance(rec, SkipRecord)
        else "bench_failed"
        if isinstance(rec, BenchFailedRecord)
        else "deploy_failed"
    )
    levels: list[int | None] = list(workload.concurrency) if workload else [None]
    temps: list[float | None] = list(workload.temperature) if workload else [None]
    base = {
        **_config_fields(rec),
        "host": getattr(rec, "host", None),
        "input_len": workload.input_len if workload else None,
        "output_len": workload.output_len if workload else None,
        "status": status,
        "error": getattr(rec, "reason", None),
        **(_deploy_fields(rec) if isinstance(rec, DeployRecord) else {}),
    }
    return [{**base, "temperature": t, "concurrency": c} for t in temps for c in levels]


def result_rows(state: SweepState, workload: WorkloadSpec | None = None) -> list[dict[str, Any]]:
    slo = workload.slo if workload else None
    rows = [level_row(m, slo) for m in state.measured]
    for rec in state.terminal().values():
        rows += terminal_rows(rec, workload)
    position = {cid: i for i, cid in enumerate(state.order)}
    rows.sort(
        key=lambda r: (
            position.get(r["config_id"], 1 << 30),
            r.get("temperature") or 0.0,
            r.get("concurrency") or 0,
            r.get("deployment") or 1,
            r.get("repeat") or 0,
            r.get("attempt") or 1,
        )
    )
    return rows
