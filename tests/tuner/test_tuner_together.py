"""tuner/run/together.py: the sweep's host workers run at once and end together."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tuner.run.together import together


def test_results_come_in_order() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert asyncio.run(together(value(1, 0.05), value(2, 0.0), value(3, 0.02))) == [1, 2, 3]


def test_one_error_stops_the_others_before_it_goes_on() -> None:
    """gather would return the error at once and leave the long worker running; together cancels it,
    waits for its clean-up and calls on_error (the deployer's cancel event) first."""
    stopped = threading.Event()
    ended: list[str] = []

    async def failing() -> None:
        await asyncio.sleep(0.05)
        raise RuntimeError("host 1 broke")

    async def long_worker() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append("long worker cleaned up")

    async def main() -> None:
        with pytest.raises(RuntimeError, match="host 1 broke"):
            await together(failing(), long_worker(), on_error=stopped.set)
        # by the time the error reached the caller, the other worker had ended
        assert ended == ["long worker cleaned up"]
        assert stopped.is_set()

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 10


def test_a_cancelled_caller_cancels_every_worker() -> None:
    """An interrupt (the sweep's signal handler cancels its main task) reaches every worker, and the
    CancelledError itself goes on (the sweep catches it to keep what was measured)."""
    ended: list[int] = []
    stopped = threading.Event()

    async def worker(i: int) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append(i)

    async def main() -> None:
        task = asyncio.ensure_future(together(worker(1), worker(2), on_error=stopped.set))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(ended) == [1, 2]
        assert stopped.is_set()

    asyncio.run(main())


def test_no_error_no_on_error() -> None:
    calls: list[str] = []

    async def ok() -> str:
        return "ok"

    assert asyncio.run(together(ok(), ok(), on_error=lambda: calls.append("x"))) == ["ok", "ok"]
    assert calls == []
