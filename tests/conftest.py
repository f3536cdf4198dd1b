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

from xdist_order import FilesInCollectionOrder, LongestFirstLoad  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the longest tests first, in both pytest stages (scripts/test.sh).

    Tests marked `cost(seconds)` (their measured duration) go first, longest first; the rest keep
    collection order. The systemd stage (--dist loadfile): a file's tests share the host its
    fixture made, so xdist keeps a file on one worker and the stage lasts as long as its busiest
    worker; files are marked as a whole (a file that also holds unit tests, on its systemd test)
    and `FilesInCollectionOrder` hands them out in this order.
    The unit stage (--dist load): single end-to-end tests are marked and `LongestFirstLoad` deals
    them one per worker (both in tests/helpers/xdist_order.py). (Not --dist loadgroup:
    pytest-xdist 3.6-3.8 marks a group on `item._nodeid`, which pytest 9 no longer reads, so every
    test would be its own group.)
    """

    def key(item: pytest.Item) -> float:
        cost = item.get_closest_marker("cost")
        return -float(cost.args[0]) if cost else 0.0

    items.sort(key=key)  # stable: a file's tests stay together and in order


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> FilesInCollectionOrder | LongestFirstLoad | None:
    """The stages' schedulers: `FilesInCollectionOrder` for `--dist loadfile`, `LongestFirstLoad` for `load`."""
    dist = config.getvalue("dist")
    if dist == "loadfile":
        return FilesInCollectionOrder(config, log)
    return LongestFirstLoad(config, log) if dist == "load" else None
