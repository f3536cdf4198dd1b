"""The output directory: the append-only record, the sweep's identity, and results.csv.

`records.jsonl` is the source of truth (docs/architecture.md "Tuner output directory"): one JSON
object per event, appended and flushed to disk as it happens, so an interrupted sweep loses at
most the level in flight. Everything else (results.csv, recommendation.json, the plot, the
report) is rebuilt from it, which is also what `--resume`, `plot DIR` and `report DIR` do.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .redact import Redactor

RECORDS = "records.jsonl"
SWEEP = "sweep.json"
RESULTS = "results.csv"

# A row per configuration x concurrency x repeat (design.md "The tuner"; the first columns after
# the ids are the contract's, in its order).
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


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_records(path: Path) -> list[dict[str, Any]]:
    """All complete records.

    A torn line (the process died mid-write; the next append closed it off) is skipped: it is
    the one point that was in flight, and `--resume` measures it again.
    """
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


class Store:
    """One output directory."""

    def __init__(self, out: Path, redactor: Redactor | None = None):
        self.out = Path(out)
        self.redactor = redactor or Redactor()

    @property
    def records_path(self) -> Path:
        return self.out / RECORDS

    def ensure(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)

    # -- the sweep's identity --------------------------------------------------------------
    def read_sweep(self) -> dict[str, Any] | None:
        p = self.out / SWEEP
        if not p.is_file():
            return None
        return json.loads(p.read_text())

    def write_sweep(self, sweep: dict[str, Any]) -> None:
        self.ensure()
        atomic_write(self.out / SWEEP, json.dumps(self.redactor.scrub_obj(sweep), indent=2) + "\n")

    # -- records ---------------------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        return read_records(self.records_path)

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one record durably (flush + fsync): a finished point is never lost."""
        self.ensure()
        rec = {"time": now_iso(), **record}
        line = json.dumps(self.redactor.scrub_obj(rec), default=str, sort_keys=False) + "\n"
        path = self.records_path
        with open(path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn line from a crash: close it off
                    f.write(b"\n")
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
        return rec

    # -- derived files ---------------------------------------------------------------------
    def write_results_csv(self, rows: list[dict[str, Any]]) -> Path:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=RESULT_COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({k: _csv_value(row.get(k)) for k in RESULT_COLUMNS})
        path = self.out / RESULTS
        atomic_write(path, self.redactor.scrub(buf.getvalue()))
        return path

    def write_json(self, name: str, data: Any) -> Path:
        path = self.out / name
        atomic_write(path, json.dumps(self.redactor.scrub_obj(data), indent=2, default=str) + "\n")
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = self.out / name
        atomic_write(path, self.redactor.scrub(text))
        return path


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.1f}"
    return v


def read_results_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# -- from records to rows and resume state -------------------------------------------------


def _config_fields(rec: dict[str, Any]) -> dict[str, Any]:
    cfg = rec.get("config") or {}
    return {k: cfg.get(k) for k in ("config_id", "spec_steps", "spec_topk", "spec_draft_tokens", "spec_algorithm")}


def _deploy_fields(dep: dict[str, Any] | None) -> dict[str, Any]:
    if not dep:
        return {}
    cap = dep.get("capacity") or {}
    spec = dep.get("speculative") or {}
    return {
        "max_total_num_tokens": cap.get("max_total_num_tokens"),
        "max_running_requests": cap.get("max_running_requests"),
        "resolved_draft_tokens": spec.get("num_draft_tokens"),
        "ready_s": dep.get("ready_s"),
    }


def result_rows(records: Iterable[dict[str, Any]], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """results.csv rows: measured levels joined with their configuration's deploy result.

    A configuration that failed to deploy, or was skipped, gets one row per concurrency level
    with that status and its reason, so the table shows every planned point.
    """
    params = params or {}
    levels = list(params.get("concurrency") or [])
    rows: list[dict[str, Any]] = []
    last_deploy: dict[tuple[str, str | None], dict[str, Any]] = {}
    measured: set[str] = set()
    terminal: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for rec in records:
        typ = rec.get("type")
        cid = (rec.get("config") or {}).get("config_id")
        if cid and cid not in order and typ in ("deploy", "level", "skip"):
            order.append(cid)
        if typ == "deploy":
            last_deploy[(cid, rec.get("host"))] = rec
            last_deploy[(cid, None)] = rec
            if rec.get("status") == "ok":
                terminal.pop(cid, None)
            elif cid not in measured:
                terminal[cid] = rec
        elif typ == "skip":
            if cid not in measured:
                terminal[cid] = rec
        elif typ == "level":
            measured.add(cid)
            terminal.pop(cid, None)
            dep = last_deploy.get((cid, rec.get("host"))) or last_deploy.get((cid, None))
            m = rec.get("metrics") or {}
            row = {
                **_config_fields(rec),
                **_deploy_fields(dep),
                "host": rec.get("host"),
                "temperature": rec.get("temperature"),
                "input_len": rec.get("input_len"),
                "output_len": rec.get("output_len"),
                "concurrency": rec.get("concurrency"),
                "repeat": rec.get("repeat"),
                **m,
                "status": m.get("status"),
                "error": "; ".join(f"{n}x {k}" for k, n in (m.get("errors") or {}).items()) or None,
            }
            rows.append(row)
    for cid in order:
        rec = terminal.get(cid)
        if rec is None:
            continue
        status = "deploy_failed" if rec.get("type") == "deploy" else "skipped"
        for c in levels or [None]:
            rows.append(
                {
                    **_config_fields(rec),
                    "host": rec.get("host"),
                    "temperature": params.get("temperature"),
                    "input_len": params.get("input_len"),
                    "output_len": params.get("output_len"),
                    "concurrency": c,
                    "status": status,
                    "error": rec.get("reason"),
                    **(_deploy_fields(rec) if status == "deploy_failed" else {}),
                }
            )
    rows.sort(
        key=lambda r: (
            order.index(r["config_id"]) if r.get("config_id") in order else 1 << 30,
            r.get("concurrency") or 0,
            r.get("repeat") or 0,
        )
    )
    return rows


@dataclass
class ResumeState:
    """What an interrupted sweep already finished."""

    done_levels: set[tuple[str, int, int]] = field(default_factory=set)  # (config, C, repeat)
    failed: dict[str, str] = field(default_factory=dict)  # config -> reason
    skipped: dict[str, str] = field(default_factory=dict)
    deployed_hosts: set[str] = field(default_factory=set)  # had a full run

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> ResumeState:
        st = cls()
        for rec in records:
            cid = (rec.get("config") or {}).get("config_id")
            typ = rec.get("type")
            if typ == "level":
                st.done_levels.add((cid, int(rec["concurrency"]), int(rec.get("repeat") or 1)))
            elif typ == "deploy":
                if rec.get("status") == "ok":
                    st.failed.pop(cid, None)
                    if rec.get("host"):
                        st.deployed_hosts.add(rec["host"])
                else:
                    st.failed[cid] = rec.get("reason") or "deploy failed"
            elif typ == "skip":
                st.skipped[cid] = rec.get("reason") or "skipped"
        return st
