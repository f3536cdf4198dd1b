"""Fail a test stage that passed by not testing: a skipped test CI must run, or no test at all.

`scripts/test.sh` runs each pytest stage with `--junitxml`, then this script on the report:

    python scripts/check_skips.py --stage unit REPORT.xml

It exits 1, naming each one, when the stage ran zero tests or skipped a test that is not in
tests/allowed_skips.yml (each entry: `test` (a node id, fnmatch patterns allowed), `stages`,
`reason`). A test that CI skips is a test that does not exist for CI, so every allowed skip says
why it cannot run here and where it runs instead. Exit 2: the report or the list is unreadable.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ALLOWED = ROOT / "tests" / "allowed_skips.yml"


@dataclass(frozen=True)
class Report:
    """What one junit report says: how many tests ran, and which were skipped (id -> message)."""

    total: int
    skipped: dict[str, str]


@dataclass(frozen=True)
class AllowedSkip:
    test: str
    stages: tuple[str, ...]
    reason: str


def junit_id(classname: str, name: str) -> str:
    """pytest's junit id of a test (`tests.dir.test_mod[.Class].test_name[param]`)."""
    return f"{classname}.{name}" if classname else name


def nodeid_to_junit(nodeid: str) -> str:
    """`tests/<dir>/test_mod.py::Class::test[p]` -> `tests.<dir>.test_mod.Class.test[p]` (junit's spelling)."""
    path, _, rest = nodeid.partition("::")
    if path.endswith(".py"):
        path = path[: -len(".py")]
    dotted = path.replace("/", ".")
    return f"{dotted}.{rest.replace('::', '.')}" if rest else dotted


def parse_junit(text: str) -> Report:
    """Count the testcases of a pytest junit XML report (xunit1 or xunit2) and collect its skips."""
    root = ET.fromstring(text)
    cases = root.iter("testcase")
    total = 0
    skipped: dict[str, str] = {}
    for case in cases:
        total += 1
        skip = case.find("skipped")
        if skip is not None:
            tid = junit_id(case.get("classname", ""), case.get("name", ""))
            skipped[tid] = skip.get("message", "") or (skip.text or "").strip()
    return Report(total=total, skipped=skipped)


def parse_allowed(data: object) -> list[AllowedSkip]:
    """The allowed-skips list; every entry needs a test, its stages and a reason."""
    if not isinstance(data, list):
        raise ValueError("the allowed-skips list must be a YAML list of {test, stages, reason}")
    out = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or not all(entry.get(k) for k in ("test", "stages", "reason")):
            raise ValueError(f"entry {i} needs test, stages and reason (got {entry!r})")
        stages = entry["stages"]
        if isinstance(stages, str) or not all(isinstance(s, str) for s in stages):
            raise ValueError(f"entry {i}: stages must be a list of stage names (got {stages!r})")
        out.append(AllowedSkip(test=str(entry["test"]), stages=tuple(stages), reason=str(entry["reason"])))
    return out


def problems(report: Report, allowed: list[AllowedSkip], stage: str) -> list[str]:
    """Why this stage does not count as tested; empty when it does."""
    found = []
    if report.total == 0:
        found.append(f"stage {stage}: no test ran (zero collected or all deselected)")
    patterns = [nodeid_to_junit(a.test) for a in allowed if stage in a.stages]
    for tid, message in sorted(report.skipped.items()):
        if not any(fnmatch.fnmatchcase(tid, p) for p in patterns):
            found.append(f"stage {stage}: {tid} was skipped ({message}) and is not in tests/allowed_skips.yml")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("report", type=Path, help="pytest --junitxml report of the stage")
    ap.add_argument("--stage", required=True, help="stage name, as in tests/allowed_skips.yml (unit, systemd)")
    ap.add_argument("--allowed", type=Path, default=DEFAULT_ALLOWED, help="allowed-skips list (YAML)")
    args = ap.parse_args(argv)
    try:
        report = parse_junit(args.report.read_text(encoding="utf-8"))
        allowed = parse_allowed(yaml.safe_load(args.allowed.read_text(encoding="utf-8")))
    except (OSError, ET.ParseError, yaml.YAMLError, ValueError) as exc:
        print(f"check_skips: {exc}", file=sys.stderr)
        return 2
    found = problems(report, allowed, args.stage)
    for line in found:
        print(f"check_skips: {line}", file=sys.stderr)
    if found:
        return 1
    allowed_seen = [tid for tid in report.skipped]
    print(f"check_skips: stage {args.stage}: {report.total} tests, {len(allowed_seen)} allowed skips")
    return 0


if __name__ == "__main__":
    sys.exit(main())
