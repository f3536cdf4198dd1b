"""What the bench scripts share: the revision a run records, and the kept-data round trip.

Every bench page is written by its script from data kept beside it (`bench/<name>/`): a run
measures and keeps, `--render` rebuilds the page from what was kept and measures nothing. One copy
of each here, so that every page records its code the same way (bench scripts run as
`python bench/<name>.py`, which puts this directory on sys.path).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# what a bench runs: the code, not the kept data and pages that benches write while they run
CODE = ("tuner", "plugins", "roles", "playbooks", "inventory", "tests", "scripts", "bench/*.py")


def git_rev(*paths: str) -> str:
    """HEAD's short hash, marked `+uncommitted` when the code differs from it (`paths`, by default
    `CODE`), since the run then measured code that no revision holds; `unknown` outside a git
    checkout."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", *(paths or CODE)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+uncommitted" if dirty else "")


def kept(path: Path, render: bool, measure: Callable[[], Any]) -> Any:
    """With `render`, the data kept at `path` (None when nothing is kept); otherwise a fresh
    measurement, written to `path` before anything is rendered from it, so that a page always shows
    what is kept."""
    if render:
        return json.loads(path.read_text()) if path.exists() else None
    data = measure()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def machine_text() -> str:
    """This machine, as a page names the one its run measured on: its name and its cores."""
    return f"{platform.node() or 'host'}, {os.cpu_count()} CPUs"


def machine_kept(keep: Path, fresh: bool) -> str:
    """The machine a kept run ran on, for its page: written to `keep`/machine.txt when the run is
    `fresh`, read from there when a page is rendered (the machine that renders is not the one that
    measured)."""
    path = keep / "machine.txt"
    if fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(machine_text() + "\n")
    return path.read_text().strip() if path.exists() else "machine not kept"


def note_kept(keep: Path, note: str) -> str:
    """A page's note on how its run went: a given `note` is kept as `keep`/note.md, and a page
    rendered later shows the kept one, so that the page is its kept data and nothing else."""
    path = keep / "note.md"
    if note:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(note.strip() + "\n")
    return path.read_text().strip() if path.exists() else ""
