"""The JSON encoding and error bodies the emulator's HTTP handlers share (server.py, api_native.py, api_openai.py)."""

from __future__ import annotations

import json

from aiohttp import web

# compact: no space after "," or ":"
dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class BadRequest(Exception):
    """A request the handlers answer with 400 and the message, in the API's own error shape."""


def error_openai(message: str, status: int = 400, etype: str = "BadRequestError") -> web.Response:
    """The OpenAI-compatible endpoints' error body (`{"object": "error", ...}`)."""
    body = {"object": "error", "message": message, "type": etype, "param": None, "code": status}
    return web.Response(status=status, body=dumps(body), content_type="application/json")


def error_native(message: str, status: int = 400) -> web.Response:
    """The native /generate endpoint's error body (`{"error": {"message": ...}}`)."""
    return web.Response(status=status, body=dumps({"error": {"message": message}}), content_type="application/json")
