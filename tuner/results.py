"""results.csv: a row per configuration x concurrency x repeat, derived from the folded records.

Pure: `result_rows(state, workload)` is what `Store.write_results_csv` writes. A configuration
that failed to deploy, or was skipped, gets one row per planned concurrency level with that status
and its reason, so the table shows every planned point.
"""

from __future__ import annotations

from typing import Any

from .records import DeployRecord, Measured, Record, SkipRecord, SweepState
from .sweepspec import WorkloadSpec

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
]


def _config_fields(rec: Record) -> dict[str, Any]:
    c = rec.config.to_json()
    return {k: c[k] for k in ("config_id", "spec_steps", "spec_topk", "spec_draft_tokens", "spec_algorithm")}


def _deploy_fields(dep: DeployRecord | None) -> dict[str, Any]:
    if dep is None:
        return {}
    return {
        "max_total_num_tokens": dep.max_total_num_tokens,
        "max_running_requests": dep.max_running_requests,
        "resolved_draft_tokens": dep.resolved_draft_tokens,
        "ready_s": dep.ready_s,
    }


def level_row(m: Measured) -> dict[str, Any]:
    lv = m.level
    metrics = lv.metrics.to_dict()
    errors = metrics.pop("errors", None) or {}
    return {
        **_config_fields(lv),
        **_deploy_fields(m.deploy),
        "host": lv.host,
        "temperature": lv.temperature,
        "input_len": lv.input_len,
        "output_len": lv.output_len,
        "concurrency": lv.concurrency,
        "repeat": lv.repeat,
        **metrics,
        "error": "; ".join(f"{n}x {k}" for k, n in errors.items()) or None,
    }


def terminal_rows(rec: Record, workload: WorkloadSpec | None) -> list[dict[str, Any]]:
    status = "skipped" if isinstance(rec, SkipRecord) else "deploy_failed"
    levels: list[int | None] = list(workload.concurrency) if workload else [None]
    base = {
        **_config_fields(rec),
        "host": getattr(rec, "host", None),
        "temperature": workload.temperature if workload else None,
        "input_len": workload.input_len if workload else None,
        "output_len": workload.output_len if workload else None,
        "status": status,
        "error": getattr(rec, "reason", None),
        **(_deploy_fields(rec) if isinstance(rec, DeployRecord) else {}),
    }
    return [{**base, "concurrency": c} for c in levels]


def result_rows(state: SweepState, workload: WorkloadSpec | None = None) -> list[dict[str, Any]]:
    rows = [level_row(m) for m in state.measured]
    for rec in state.terminal().values():
        rows += terminal_rows(rec, workload)
    position = {cid: i for i, cid in enumerate(state.order)}
    rows.sort(key=lambda r: (position.get(r["config_id"], 1 << 30), r.get("concurrency") or 0, r.get("repeat") or 0))
    return rows
