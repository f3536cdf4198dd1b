"""The API key goes to the URL the role gave, never to where a redirect points.

Both modules send the key as ``Authorization: Bearer <key>``. urllib's redirect handler
(CPython Lib/urllib/request.py ``HTTPRedirectHandler.redirect_request``) and ansible-core's
(module_utils/urls.py, ``follow_redirects='urllib2'``, the ``Request`` default) copy every
header added with ``add_header`` to the redirected request, whatever host, port or scheme the
``Location`` names: a gate URL at a proxy that answers 302 to another host (a login page) or to
``http://`` handed that host the key, in clear text for the latter. SGLang itself never
redirects its API. Ansible keeps its own basic-auth header off redirects the same way
(``add_unredirected_header`` in module_utils/urls.py); aiohttp, the tuner's client, drops it on a
redirect to another origin (aiohttp/client.py). Real HTTP on loopback: a front server that
answers 302 to a second server, which records the Authorization header it got.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.sglang_tune.serving.plugins.modules import sglang_verify
from ready_testlib import COLLECTIONS  # noqa: F401  (puts the collection on sys.path)

KEY = "k-redirect-Secret-42"


def redirector(target: str, code: int = 302) -> ThreadingHTTPServer:
    """A server that answers every GET with ``code`` to the same path on ``target``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(code)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def front_url(srv: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.mark.parametrize("code", [302, 307])
def test_the_gate_does_not_hand_its_key_to_a_redirects_target(code, fake_sglang, run_module):
    front = redirector(fake_sglang.url, code)
    try:
        args = {"url": front_url(front), "unit": "", "interval": 0.1, "timeout": 10, "request_timeout": 2}
        res, _failed = run_module(dict(args, api_key=KEY))
    finally:
        front.shutdown()
        front.server_close()
    assert fake_sglang.requests, "the redirect was not followed at all"
    assert {r["auth"] for r in fake_sglang.requests} == {None}
    assert KEY not in repr(res)


def test_the_output_check_does_not_hand_its_key_to_a_redirects_target(fake_sglang):
    fake_sglang.server_info = {"version": "0.5.9", "model_path": "/m"}
    front = redirector(fake_sglang.url)
    try:
        sglang_verify.Server(front_url(front), KEY, 5).info()
    finally:
        front.shutdown()
        front.server_close()
    assert [r["path"] for r in fake_sglang.requests] == ["/server_info"]
    assert fake_sglang.requests[0]["auth"] is None


def test_the_key_still_goes_to_the_url_given(fake_sglang):
    fake_sglang.server_info = {"version": "0.5.9", "model_path": "/m"}
    sglang_verify.Server(fake_sglang.url, KEY, 5).info()
    assert fake_sglang.requests[0]["auth"] == f"Bearer {KEY}"
