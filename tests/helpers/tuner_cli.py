"""The tuner's command line as tests and benches run it in a subprocess (one place for the argv).

Importable by every test directory (tests/conftest.py puts this directory on sys.path) and by
bench/ scripts (through tests/tuner/tuner_testlib.py). Standard library only.
"""

from __future__ import annotations

import sys
from pathlib import Path


def sweep_cmd(out: Path, inventory: Path, *args: str) -> list[str]:
    """`python -m tuner sweep --out OUT --inventory INVENTORY ARGS...` with this Python."""
    return [sys.executable, "-m", "tuner", "sweep", "--out", str(out), "--inventory", str(inventory), *args]
