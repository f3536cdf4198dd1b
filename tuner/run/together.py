"""Run awaitables at once and end them together.

The sweep's hosts work side by side (one worker per host, each deploying and measuring). When one of
them raises, the others must not go on deploying after the sweep has given up: `asyncio.gather`
returns the first error at once and leaves the rest running, to be cancelled only by
`asyncio.run`'s clean-up at exit, while an ansible-runner play in flight (a thread, which
cancelling its task does not stop) runs to its end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def together(*aws: Awaitable[T], on_error: Callable[[], object] | None = None) -> list[T]:
    """The results of `aws`, run at once, in their order (as `asyncio.gather`).

    When one raises, or the caller is cancelled, `on_error` runs first (the sweep passes its
    deployer's cancel event's `set`, which ends a play in flight), then every other one is cancelled
    and waited for, and only then does the error go on. Not `asyncio.TaskGroup`: it wraps the error
    in an ExceptionGroup, and the callers handle the error itself (an interrupt's CancelledError).
    """
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        if on_error is not None:
            on_error()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
