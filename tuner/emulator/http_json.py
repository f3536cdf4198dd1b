"""The JSON encoding and error bodies the emulator's HTTP handlers share (server.py, api_native.py, api_openai.py)."""

from __future__ import annotations

import json

from aiohttp import web

# compact: no space after "," or ":"
dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class BadRequest(Exception):
    """A request the handlers answer with 400 and the message, in the API's own error shape."""


class SchedulerRefusal(BadRequest):
    """A request SGLang's scheduler refuses (not its tokenizer): answered as a BadRequest; a streamed
    one is not turned into the stream's error frame (`error_stream_native`), which only the
    tokenizer's ValueErrors become."""


def error_stream_native(message: str) -> web.Response:
    """A streamed /generate that SGLang's tokenizer refuses (a ValueError inside its generate_request:
    the input over the context length, a sampling parameter out of range, no prompt): HTTP 200 and
    the event stream's one error frame, then `[DONE]` (entrypoints/http_server.py generate_request's
    `stream_results`, 0.5.9-0.5.23: `out = {"error": {"message": str(e)}}`)."""
    body = b"data: " + dumps({"error": {"message": message}}).encode() + b"\n\ndata: [DONE]\n\n"
    return web.Response(status=200, body=body, content_type="text/event-stream")


def error_openai(message: str, status: int = 400, etype: str = "BadRequestError") -> web.Response:
    """The OpenAI-compatible endpoints' error body (`{"object": "error", ...}`)."""
    body = {"object": "error", "message": message, "type": etype, "param": None, "code": status}
    return web.Response(status=status, body=dumps(body), content_type="application/json")


def error_native(message: str, status: int = 400) -> web.Response:
    """The native /generate endpoint's error body (`{"error": {"message": ...}}`)."""
    return web.Response(status=status, body=dumps({"error": {"message": message}}), content_type="application/json")
