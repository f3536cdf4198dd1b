"""The test stages' schedulers (tests/helpers/xdist_order.py), driven as pytest-xdist's controller
drives them: workers register their collection, get tests, report each test done."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from xdist.scheduler import LoadFileScheduling, LoadScheduling
from xdist_order import FilesInCollectionOrder, LongestFirstLoad


@dataclass(eq=False)
class Worker:
    """What the scheduler sees of an xdist worker: the tests it was sent, in order."""

    name: str
    collection: list[str]
    sent: list[str] = field(default_factory=list)
    shutting_down: bool = False

    @property
    def gateway(self) -> SimpleNamespace:
        return SimpleNamespace(id=self.name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += [self.collection[i] for i in indices]

    def shutdown(self) -> None:
        self.shutting_down = True


def start(
    cls: type[LoadFileScheduling] | type[LoadScheduling], collection: list[str], workers: int
) -> tuple[LoadFileScheduling | LoadScheduling, list[Worker]]:
    config = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
        getoption=lambda name: None,  # --maxschedchunk not given (load)
    )
    sched = cls(config)  # type: ignore[arg-type]
    nodes = [Worker(f"gw{i}", list(collection)) for i in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
        sched.add_node_collection(node, collection)  # type: ignore[arg-type]
    sched.schedule()
    return sched, nodes


def files(node: Worker) -> list[str]:
    return list(dict.fromkeys(t.split("::")[0] for t in node.sent))


# tests/conftest.py sorts the collection longest file first: here short.py (one test) is marked
# the longest, pair.py (two tests) next.
COLLECTION = ["short.py::t", "pair.py::a", "pair.py::b", "one.py::t", "two.py::t"]


def test_files_go_out_in_collection_order_not_by_their_number_of_tests():
    _, (node,) = start(FilesInCollectionOrder, COLLECTION, 1)
    assert files(node)[0] == "short.py"
    # xdist's own loadfile starts the file with the most tests, whatever the collection's order
    _, (stock,) = start(LoadFileScheduling, COLLECTION, 1)
    assert files(stock)[0] == "pair.py"


def test_a_worker_running_a_file_of_two_tests_is_not_given_a_third_to_hold():
    collection = ["pair.py::a", "pair.py::b", "one.py::t", "two.py::t", "three.py::t"]
    sched, (first, second) = start(FilesInCollectionOrder, collection, 2)
    assert files(first) == ["pair.py"]  # two tests not yet run: nothing queued behind them
    assert files(second) == ["one.py", "two.py"]  # one running, one queued (xdist needs the next)
    # the first test of pair.py done: one left, so the next file is queued behind it
    sched.mark_test_complete(first, collection.index("pair.py::a"))  # type: ignore[arg-type]
    assert files(first) == ["pair.py", "three.py"]
    # xdist's own top-up queues a file behind pair.py at once
    _, (stock_first, _) = start(LoadFileScheduling, collection, 2)
    assert files(stock_first) == ["pair.py", "two.py"]


def test_every_test_is_sent_once_and_every_worker_is_shut_down_at_the_end():
    collection = [f"f{i}.py::t{j}" for i in range(7) for j in range(i % 3 + 1)]
    sched, nodes = start(FilesInCollectionOrder, collection, 3)
    run_all(sched, nodes, collection)
    assert sorted(t for n in nodes for t in n.sent) == sorted(collection)
    assert all(n.shutting_down for n in nodes)


def run_all(sched: LoadFileScheduling | LoadScheduling, nodes: list[Worker], collection: list[str]) -> None:
    """Each worker finishes its tests in turn, one at a time, until none is left."""
    done: set[str] = set()
    while any(t not in done for n in nodes for t in n.sent):
        for node in nodes:
            todo = [t for t in node.sent if t not in done]
            if todo:
                done.add(todo[0])
                sched.mark_test_complete(node, collection.index(todo[0]))  # type: ignore[arg-type]


# The unit stage (--dist load): tests/conftest.py puts the cost-marked tests first, longest first.
UNIT = [f"tuner.py::long{i}" for i in range(6)] + [f"short{i}.py::t{j}" for i in range(40) for j in range(4)]


def test_the_longest_tests_start_one_per_worker():
    _, nodes = start(LongestFirstLoad, UNIT, 4)
    # two tests each (a worker runs one once it knows the next), dealt one at a time: the first
    # four long tests on four workers, the other two behind the first two
    assert [n.sent for n in nodes] == [
        ["tuner.py::long0", "tuner.py::long4"],
        ["tuner.py::long1", "tuner.py::long5"],
        ["tuner.py::long2", "short0.py::t0"],
        ["tuner.py::long3", "short0.py::t1"],
    ]
    # xdist's own load hands the first worker a chunk of consecutive tests: every long test
    _, stock = start(LoadScheduling, UNIT, 4)
    assert all(t.startswith("tuner.py") for t in stock[0].sent[:6])
    assert not any(t.startswith("tuner.py") for n in stock[1:] for t in n.sent)


def test_the_rest_is_sent_once_each_and_every_worker_is_shut_down():
    sched, nodes = start(LongestFirstLoad, UNIT, 4)
    run_all(sched, nodes, UNIT)
    assert sorted(t for n in nodes for t in n.sent) == sorted(UNIT)
    assert all(n.shutting_down for n in nodes)
    # later tests still go out in chunks as xdist sends them, not one at a time
    assert max(len(n.sent) for n in nodes) > 2 * len(UNIT) // 4 // 4


def test_a_collection_smaller_than_two_per_worker_is_dealt_as_xdist_deals_it():
    small = ["a.py::t", "b.py::t", "c.py::t"]
    sched, nodes = start(LongestFirstLoad, small, 4)
    assert [n.sent for n in nodes] == [["a.py::t"], ["b.py::t"], ["c.py::t"], []]
    run_all(sched, nodes, small)
    assert all(n.shutting_down for n in nodes)
