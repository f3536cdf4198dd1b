"""The gate's HTTP side, on the project's client session (tuner/run/client.py `BenchClient`).

What a server is (`identity`: version, model, speculation, deterministic inference, from
/server_info through the one parser of it), and its greedy outputs (`outputs`): the short prompts
as plain `/generate` requests (the body carries `output_ids` and `meta_info`), the long ones
streamed (their acceptance from the finished chunk: `completion_tokens` / `spec_verify_ct` and the
acceptance histogram, which SGLang sends on that chunk only). A request answered 5xx is sent again
(twice at most): a server that sheds one request under load is not a wrong one, and the sweep's
levels only mark such requests; three 5xx in a row are a failed gate.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from sglang_utils import sglang_verify as rules

from ..run.client import BenchClient, ServerError, _sse_chunks
from .prompts import PromptSet

CONCURRENCY = 8  # short requests in flight at once


class ProbeError(RuntimeError):
    """The server did not answer the gate's requests as SGLang does."""


class BusyError(ProbeError):
    """A 5xx answer: the request may be sent again."""


# What the gate's requests can raise when the server does not answer as SGLang does, or goes away
# instead of answering (aiohttp's ServerDisconnectedError, a dropped stream: a crashed server).
ANSWER_ERRORS = (ProbeError, ServerError, OSError, ValueError, aiohttp.ClientError)


def failure_text(exc: BaseException) -> str:
    """An answer error in words: its message, or its kind where it has none (a bare timeout)."""
    return str(exc) or type(exc).__name__


async def identity(client: BenchClient) -> dict[str, Any]:
    """The running server's identity as the gate reads it (sglang_verify.candidate_identity, the
    role's module's one reading), its model from /v1/models where /server_info names none."""
    ident = rules.candidate_identity(await client.parsed_server_info())
    ident["model"] = ident["model"] or await client.served_model_name()
    return ident


@asynccontextmanager
async def _generate(
    client: BenchClient, prompt: dict[str, str], max_new: int, stream: bool
) -> AsyncIterator[aiohttp.ClientResponse]:
    """The gate's `/generate` request for one prompt: the response, once it answered 200."""
    async with client.session.post(
        client.base + "/generate",
        data=json.dumps(rules.generate_body(prompt["text"], max_new, stream)).encode(),
        headers={"Content-Type": "application/json"},
        timeout=aiohttp.ClientTimeout(total=client.opts.request_timeout),
    ) as r:
        if r.status != 200:
            error = BusyError if 500 <= r.status < 600 else ProbeError
            raise error(f"/generate for {prompt['id']}: HTTP {r.status}: {(await r.text())[:160]}")
        yield r


Row = tuple[dict[str, Any], list[tuple[float, int, int]]]


async def _retrying(send: Callable[[], Awaitable[Row]]) -> Row:
    for _retry in range(rules.RETRIES_5XX):
        try:
            return await send()
        except BusyError:
            await asyncio.sleep(rules.RETRY_WAIT_S)
    return await send()  # the last send's 5xx is the gate's answer


async def _short(client: BenchClient, prompt: dict[str, str], max_new: int) -> Row:
    async def send() -> Row:
        async with _generate(client, prompt, max_new, False) as r:
            body = await r.json(content_type=None)
        return rules.response_row(prompt["id"], body, time.perf_counter())

    return await _retrying(send)


async def _long(client: BenchClient, prompt: dict[str, str], max_new: int, version: object = None) -> Row:
    """One streamed request: its output and (arrival time, new tokens, new verify passes) per chunk.
    `version`: the server's release, which says how an incremental stream's text comes."""

    async def send() -> Row:
        fold = rules.StreamRow(prompt["id"], version)
        ended = False
        async with _generate(client, prompt, max_new, True) as r:
            async for now, chunk in _sse_chunks(r):
                if chunk is None:
                    ended = True
                    break
                error = fold.add(chunk, now)
                if error is not None:
                    # an abort with a 5xx (the queue full, a timeout) is the server busy: sent again
                    raise (BusyError if fold.busy else ProbeError)(f"/generate for {prompt['id']}: {error}")
        if not ended:
            raise ProbeError(f"/generate for {prompt['id']}: the stream ended before [DONE]")
        return fold.row()

    return await _retrying(send)


async def outputs(client: BenchClient, ps: PromptSet, again: bool = True, version: object = None) -> dict[str, Any]:
    """All the gate's outputs from one server (`rules.request_order`: the long prompts, the short
    ones, the long prompts again, CONCURRENCY in flight until the last second send ends), with its
    acceptance (all requests), each long prompt's (tokens, verify passes) increments on its first
    and second send (the drift rule's input), and the cost. `again` False leaves the second sends
    out (a baseline: no speculation, no drift)."""
    started = time.perf_counter()
    plan = [p for p in rules.request_order(len(ps.short), len(ps.long)) if again or p[0] != "again"]
    queue: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    results: dict[tuple[str, int], tuple[dict[str, Any], list[tuple[float, int, int]]]] = {}
    short_tokens, long_tokens = int(ps.settings["short_tokens"]), int(ps.settings["long_tokens"])
    second_sends_left = sum(1 for kind, _ in plan if kind == "again")
    load_sent = 0
    failed = False

    async def worker() -> None:
        nonlocal second_sends_left, failed, load_sent
        try:
            while not failed:
                if not queue.empty():
                    kind, i = queue.get_nowait()
                    if kind == "short":
                        results[(kind, i)] = await _short(client, ps.short[i], short_tokens)
                        continue
                    try:  # "long" or "again": the same long prompt
                        results[(kind, i)] = await _long(client, ps.long[i], long_tokens, version)
                    finally:
                        if kind == "again":
                            second_sends_left -= 1
                elif second_sends_left > 0 and ps.short:
                    # load: the gate's batch size held until the last second send ends (request_order)
                    load_sent += 1
                    await _short(client, ps.short[rules.load_prompt(load_sent - 1, len(ps.short))], short_tokens)
                else:
                    return
        except BaseException:
            failed = True  # the others stop after their request in flight (no load sent forever)
            raise

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    seconds = time.perf_counter() - started
    return rules.gate_outputs(results, len(ps.short), len(ps.long), seconds, again=again, load=load_sent)
