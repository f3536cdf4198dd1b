"""The test stages' xdist schedulers (tests/conftest.py installs them: `--dist loadfile` and `load`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadFileScheduling, LoadScheduling


class FilesInCollectionOrder(LoadFileScheduling):
    """pytest-xdist's `--dist loadfile`, but longest first and never queued behind a long file.

    xdist 3.6 hands out files by their number of tests (most first), not in collection order, so
    tests/conftest.py's `cost` sort did not reach the workers; and it tops a worker up while it
    holds two tests or fewer not yet run, so a worker running a one-test file of four minutes held
    up to two more files that idle workers could have run. Here files go in collection order, and
    a worker gets its next file only when it holds at most one test not yet run (an xdist worker
    runs a test only once it knows the next one, so one must wait queued). Replayed on the systemd
    stage's measured file durations (2026-12-03), the busiest of four workers: 588 s with xdist's
    order and top-up, 503 s with these. Run, the stage took 565, 574 and 678 s (a slower stretch)
    against 633-641 s: 1.06-1.08 times the sum of its tests' durations over four workers, against
    1.29-1.33.
    """

    _ordered = False

    def _assign_work_unit(self, node: Any) -> None:
        if not self._ordered and self.collection:
            first: dict[str, int] = {}
            for i, nodeid in enumerate(self.collection):
                first.setdefault(self._split_scope(nodeid), i)
            self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda kv: first[kv[0]]))
            self._ordered = True
        super()._assign_work_unit(node)

    def _reschedule(self, node: Any) -> None:
        if self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) > 1:
            return
        super()._reschedule(node)


class LongestFirstLoad(LoadScheduling):
    """pytest-xdist's `--dist load` (the unit stage), but its longest tests start first, one per worker.

    The unit stage waits on emulator processes and HTTP more than it computes, and its longest
    tests (end-to-end sweeps of a minute or two, marked `cost(seconds)`) sit late in collection
    order (tests/tuner/), so they started last and the stage ended on them with most workers idle:
    on this project's 2-core VM, 2026-12-04, four workers kept 1.1 cores busy over 320 s, eight
    1.5 over 275 s with the last 100 s on the long tail. tests/conftest.py puts the `cost`-marked
    tests first, longest first; xdist would hand them out as one consecutive chunk, all to the
    first worker (a sort alone made the stage slower, 661 s, 2026-12-03). Here the first round
    deals single tests round-robin, two to each worker (a worker runs a test only once it knows
    the next one), so each worker starts on a different long test; the rest go out as xdist
    does, in chunks as workers run low.
    """

    def schedule(self) -> None:
        if self.collection is not None or not self._check_nodes_have_same_collection():
            super().schedule()
            return
        collection = next(iter(self.node2collection.values()))
        if len(collection) < 2 * len(self.nodes):
            super().schedule()  # xdist deals so few tests round-robin already
            return
        self.collection = collection
        self.pending[:] = range(len(collection))
        if self.maxschedchunk is None:
            self.maxschedchunk = len(collection)
        for _ in range(2):
            for node in self.nodes:
                self._send_tests(node, 1)
