"""Session-wide settings for every test directory (each has its own conftest.py for fixtures).

Every emulator host, container and emulator process a test run makes carries the run's id: the
podman label and link alias io.sglang-tune.run=<id> (playbooks/emulator_hosts.yml, molecule's
base.yml, the tests' own `podman run`), and SGLANG_TUNE_RUN=<id> in the environment of processes.
scripts/test.sh sets the id and its trap removes only that run's hosts
(`scripts/cleanup_hosts.sh --run <id>`), so the user's own hosts (`make demo`) survive `make test`.
Run directly, pytest makes an id of its own here, before any test starts a subprocess.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

os.environ.setdefault("SGLANG_TUNE_RUN", f"pytest-{uuid.uuid4().hex[:12]}")

# tests/helpers/emulator_proc.py: the one way tests start an emulator (and benches import it too)
sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

from xdist_order import FilesInCollectionOrder  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the systemd stage's longest test files first (scripts/test.sh: --dist loadfile).

    A file's tests share the host its fixture made, so xdist keeps a file on one worker, and the
    stage lasts as long as its busiest worker: a long file started last makes the whole run wait
    for it. Files marked `cost(seconds)` (their measured duration) go first, longest first; the
    rest keep collection order, and `FilesInCollectionOrder` (tests/helpers/xdist_order.py) hands
    them out in that order. (Not --dist loadgroup: pytest-xdist 3.6-3.8 marks a group on
    `item._nodeid`, which pytest 9 no longer reads, so every test would be its own group.)
    The unit stage (--dist load) keeps collection order: sorting its ten longest tests first made
    it slower, 661 s against 334-400 s (2026-12-03, one run one stage after the other); measured
    the same day, --dist loadfile took 423 s, --dist worksteal 339 s, and an order that started
    its twelve longest tests first as units of their own, one at a time, 345 s against 333-376 s.
    """

    def key(item: pytest.Item) -> float:
        cost = item.get_closest_marker("cost")
        return -float(cost.args[0]) if cost and item.get_closest_marker("systemd") else 0.0

    items.sort(key=key)  # stable: a file's tests stay together and in order


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> FilesInCollectionOrder | None:
    """The systemd stage's scheduler (`--dist loadfile`): `FilesInCollectionOrder`."""
    return FilesInCollectionOrder(config, log) if config.getvalue("dist") == "loadfile" else None
