"""tuner/verify/probe.py against a real HTTP server that answers as SGLang's /generate does: a plain
answer, a streamed one, and a refusal (the gate's error names the prompt and the status)."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from tuner.run.client import BenchClient, ClientOptions
from tuner.verify import probe


async def _serve(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/generate", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def _generate(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if body["text"] == "refuse":
        return web.Response(status=503, text="busy")
    meta = {"completion_tokens": 3, "spec_verify_ct": 2}
    if not body["stream"]:
        return web.json_response({"text": "a b c", "output_ids": [1, 2, 3], "meta_info": meta})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for i, m in enumerate(({"completion_tokens": 1, "spec_verify_ct": 1}, meta)):
        chunk = {"text": "a b c"[: 1 + 4 * i], "output_ids": [1, 2, 3][: 1 + 2 * i], "meta_info": m}
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    return resp


def test_the_probe_reads_plain_and_streamed_answers_and_names_a_refusal() -> None:
    async def main() -> None:
        runner, url = await _serve(_generate)
        try:
            async with BenchClient(ClientOptions(url=url)) as c:
                row, steps = await probe._short(c, {"id": "short:0", "text": "x"}, 3)
                assert row["text"] == "a b c" and row["output_ids"] == [1, 2, 3] and len(steps) == 1
                row, steps = await probe._long(c, {"id": "long:0", "text": "x"}, 3)
                assert row["completion_tokens"] == 3 and row["spec_verify_ct"] == 2
                assert [s[1:] for s in steps] == [(1, 1), (2, 1)]
                for read in (probe._short, probe._long):
                    with pytest.raises(probe.ProbeError, match=r"/generate for p:9: HTTP 503: busy"):
                        await read(c, {"id": "p:9", "text": "refuse"}, 3)
        finally:
            await runner.cleanup()

    asyncio.run(main())
