"""The batch scheduler (engine.py) on the asyncio loop's clock, for the HTTP server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .engine import Batch, Scheduler
from .request import Request

# Behind its own clock by more than this, the driver stops trying to catch up (the model's time is
# then lost, and the speed benchmark shows it as fewer tokens than predicted).
MAX_LAG_S = 1.0


class RealtimeDriver:
    """Runs the scheduler on the asyncio loop's clock, with step ends on absolute deadlines.

    Each batch ends at `start + duration` where `start` is the previous batch's deadline, not the
    moment the loop woke up, so sleep jitter and processing time do not accumulate: the emulator
    keeps its own clock as long as it is less than MAX_LAG_S behind.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        on_batch: Callable[[Batch], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.s = scheduler
        self.on_error = on_error
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.on_batch = on_batch
        self.lag_resets = 0
        self.max_lag = 0.0
        self.stopped = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    def submit(self, req: Request, arrival: float | None = None) -> None:
        """Queue `req`, arrived now or at `arrival` (the requests of one batch arrive together)."""
        self.s.submit(req, asyncio.get_running_loop().time() if arrival is None else arrival)
        self._wake.set()

    def abort(self, req: Request) -> None:
        self.s.abort(req)
        self._wake.set()

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a scheduler exception ends the server, as in SGLang
            if self.on_error is None:
                raise
            self.on_error(e)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        s = self.s
        deadline: float | None = None
        while not self.stopped:
            now = loop.time()
            # The next batch starts when the last one ended (the virtual clock), or now after an
            # idle spell or a lag past MAX_LAG_S; it is formed at that time: a request that arrived
            # after it waits for the batch after (formed at the wall time, a late loop put a request
            # into a batch that started before it arrived: a negative time to first token).
            lag = 0.0 if deadline is None else now - deadline
            start = now if deadline is None or lag > MAX_LAG_S else deadline
            batch = s.next_batch(start)
            if batch is None:
                deadline = None
                self._wake.clear()
                wake_at = s.next_event_time()
                handle = loop.call_at(wake_at, self._wake.set) if wake_at is not None else None
                await self._wake.wait()
                if handle is not None:
                    handle.cancel()
                continue
            self.max_lag = max(self.max_lag, lag)
            if lag > MAX_LAG_S:
                self.lag_resets += 1
            deadline = start + batch.duration
            delay = deadline - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)
            s.finish_batch(batch, deadline)
            if self.on_batch is not None:
                self.on_batch(batch)
