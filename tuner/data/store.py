"""The output directory on disk: the append-only record, sweep.json, and the derived files.

`records.jsonl` is the source of truth (docs/architecture.md "Tuner output directory"): one JSON
object per event, appended and flushed to disk as it happens, so an interrupted sweep loses at
most the level in flight. Everything else (results.csv, recommendation.json, the plot, the
report) is rebuilt from it, which is also what `--resume`, `plot DIR` and `report DIR` do. This
module only reads and writes; what the records mean is tuner/data/records.py.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from ..spec.flags import BadInput
from ..spec.sweepspec import SWEEP_JSON_VERSION, SweepSpec
from .records import Record, SweepState
from .redact import Redactor
from .results import RESULT_COLUMNS

RECORDS = "records.jsonl"
SWEEP = "sweep.json"
RESULTS = "results.csv"
RECOMMENDATION = "recommendation.json"
PLOT = "throughput_vs_steps.png"
SCHEDULE_PLOT = "schedule_vs_static.png"  # the schedule phase (tuner/decide/schedule_phase.py)
REPORT = "report.md"
LOCK = ".tuner.lock"  # Store.lock(): the run that holds the directory


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (/proc/self/status, 4.7+)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file. The file gets the
    mode a plain write would (an existing file's own, else 0666 less the umask): mkstemp's 0600 made
    report.md, results.csv and recommendation.json readable by their owner only, beside plots and
    records the rest of a team could read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class _NotJSONNumber(ValueError):
    """NaN or Infinity in a record: Python's json reads them, but the outputs written from the record
    would then not be JSON (strict readers such as jq refuse them)."""


def _not_json(name: str) -> Any:
    raise _NotJSONNumber(name)


def read_records(path: Path, problems: list[str] | None = None, lines: list[int] | None = None) -> list[dict[str, Any]]:
    """All complete records (with `lines`, each one's line number is appended there).

    A torn line (the process died mid-write; the next append closed it off) is skipped: it is
    the one point that was in flight, and `--resume` measures it again. Each line skipped is named
    in `problems` (its line number), so a line broken some other way is not lost unseen.
    """
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        why = "is not a whole JSON record"
        try:
            rec = json.loads(line, parse_constant=_not_json)
        except _NotJSONNumber as exc:
            rec, why = None, f"holds {exc.args[0]}, which JSON has no number for"
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict):
            out.append(rec)
            if lines is not None:
                lines.append(n)
        elif problems is not None:
            problems.append(f"line {n} {why}")
    return out


class Store:
    """One output directory."""

    def __init__(self, out: Path, redactor: Redactor | None = None):
        self.out = Path(out)
        self.redactor = redactor or Redactor()
        # The live state: records.jsonl is folded once (the first state(), i.e. at start or on
        # --resume), then each appended record is folded in as it is written.
        self._state: SweepState | None = None
        self._folded_bytes = 0  # how much of records.jsonl the live state has seen
        self._warned: set[str] = set()  # unreadable records already named on stderr
        self._lock: IO[str] | None = None  # lock(): this run's hold on the directory

    def lock(self) -> None:
        """Take the output directory for this run: an exclusive lock on LOCK, held while this Store
        lives (the process's run), so a second tuner started on the same directory, with or
        without --resume, is refused instead of writing its records among this one's. The lock
        is the kernel's (flock): a run that dies, however, leaves no stale lock behind."""
        self.ensure()
        f = open(self.out / LOCK, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the run
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip()
            f.close()
            raise BadInput(
                "--out",
                f"{self.out} is in use by another tuner"
                + (f" (pid {holder})" if holder.isdigit() else "")
                + ": wait for it to end, or choose another directory",
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        self._lock = f

    def unlock(self) -> None:
        """Give the directory back before the process ends (a command run in-process, as tests do)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def records_path(self) -> Path:
        return self.out / RECORDS

    def ensure(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)

    # -- the sweep's identity --------------------------------------------------------------
    def read_sweep(self, flag: str = "DIR") -> dict[str, Any] | None:
        """sweep.json as stored (None when there is none); a bad one is named against `flag`, the
        argument that gave the directory (`--out` for sweep and bench, DIR for plot and report)."""
        p = self.out / SWEEP
        if not p.is_file():
            return None
        try:
            data = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BadInput(flag, f"{p} is not a sweep.json this tool wrote ({exc})") from None
        if not isinstance(data, dict):
            raise BadInput(flag, f"{p} is not a sweep.json this tool wrote (not a JSON object)")
        return data

    def read_spec(self, flag: str = "DIR") -> SweepSpec | None:
        """The stored sweep's spec (None when the directory holds none)."""
        data = self.read_sweep(flag)
        if data is None:
            return None
        try:
            return SweepSpec.from_json(data.get("params") or {})
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise BadInput(flag, f"{self.out / SWEEP}: its params are not a sweep's ({exc})") from None

    def write_spec(
        self, spec: SweepSpec, tool: str, hosts: dict[str, str] | None = None, changed: list[str] | None = None
    ) -> None:
        """sweep.json: the parameters, and (`hosts`) a digest of each host's inventory variables,
        which `--resume` holds the machines to (tuner/cli.py); `resumes` keeps, across resumes, each
        one's change to how levels are measured (`changed`: tuner/spec/resume.py `measurement_changes`)."""
        before = self.read_sweep() if (self.out / SWEEP).is_file() else None
        resumes = list((before or {}).get("resumes") or [])
        if changed:
            resumes.append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "changed": list(changed)})
        doc: dict[str, Any] = {"version": SWEEP_JSON_VERSION, "tool": tool, "params": spec.to_json()}
        if hosts:
            doc["hosts"] = dict(sorted(hosts.items()))
        if resumes:
            doc["resumes"] = resumes
        self.write_sweep(doc)

    def resumes(self) -> list[str]:
        """Each resume's change to how levels are measured, in words (for the report's notes)."""
        try:
            data = self.read_sweep() or {}
        except BadInput:
            return []
        out = []
        for r in data.get("resumes") or []:
            if isinstance(r, dict) and r.get("changed"):
                out.append(f"resumed {r.get('at', '')} with " + "; ".join(map(str, r["changed"])))
        return out

    def write_sweep(self, sweep: dict[str, Any]) -> None:
        self.ensure()
        atomic_write(self.out / SWEEP, json.dumps(self.redactor.scrub_obj(sweep), indent=2) + "\n")

    # -- records ---------------------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        return read_records(self.records_path)

    def state(self) -> SweepState:
        """The sweep's state, kept live: read from records.jsonl only the first time (and again only
        if something other than this Store wrote to the file)."""
        path = self.records_path
        size = path.stat().st_size if path.is_file() else 0
        if self._state is None or size != self._folded_bytes:
            problems: list[str] = []
            numbers: list[int] = []
            self._state = SweepState.fold(read_records(path, problems, numbers), numbers)
            self._folded_bytes = size
            self._warn(problems + self._state.unreadable)
        return self._state

    def _warn(self, problems: list[str]) -> None:
        """Name the records a read skipped, once per Store (a torn line from a killed run is one;
        anything else in the file was not written by this tool)."""
        new = [p for p in problems if p not in self._warned]
        if new:
            self._warned.update(new)
            sys.stderr.write(
                f"warning: {self.records_path}: skipped {len(new)} unreadable record(s) ("
                + "; ".join(new[:5])
                + ("; ..." if len(new) > 5 else "")
                + "): a line cut short when a run was killed is measured again by --resume; a record this "
                "version cannot read is left out\n"
            )

    def append(self, record: Record | dict[str, Any]) -> dict[str, Any]:
        """Append one record durably (flush + fsync): a finished point is never lost."""
        self.ensure()
        data = record.to_json() if isinstance(record, Record) else dict(record)
        rec = {"time": now_iso(), **{k: v for k, v in data.items() if k != "time"}}
        line = json.dumps(self.redactor.scrub_obj(rec), default=str, sort_keys=False) + "\n"
        path = self.records_path
        with open(path, "ab+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":  # a torn line from a crash: close it off
                    f.write(b"\n")
            torn = f.tell()
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())
            end = f.tell()
        if self._state is not None:
            if torn == self._folded_bytes:
                self._state.add(json.loads(line))  # the record as a re-read would see it
                self._folded_bytes = end
            else:
                self._state = None  # the file changed behind this Store: fold it again when asked
        return rec

    # -- derived files ---------------------------------------------------------------------
    def write_results_csv(self, rows: Sequence[dict[str, Any]]) -> Path:
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


class MemoryStore:
    """`bench` without `--out`: the same records, kept in memory only; nothing is written."""

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []
        self._state = SweepState()  # folded as records arrive

    def records(self) -> list[dict[str, Any]]:
        return list(self._records)

    def state(self) -> SweepState:
        return self._state

    def append(self, record: Record | dict[str, Any]) -> dict[str, Any]:
        data = record.to_json() if isinstance(record, Record) else dict(record)
        rec = {"time": now_iso(), **{k: v for k, v in data.items() if k != "time"}}
        self._records.append(rec)
        self._state.add(json.loads(json.dumps(rec, default=str)))
        return rec


def _csv_value(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.1f}"
    return v


def read_results_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))
