"""The role's output check sends a request answered 5xx again, as the tuner's gate does.

docs/tuner.md "Pass rules" (shared by tuner/verify/probe.py and plugins/modules/sglang_verify.py):
an answer with a 5xx, or a stream SGLang aborts with one (queue full, a waiting timeout), is the
server busy and is sent again, twice at most. The module failed the check at once, so a healthy
configuration that shed one request passed the sweep's gate and was rolled back by the role's.
Real HTTP on loopback: a server that answers 503 (or aborts the stream with 503) the first time.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible_collections.sglang_tune.serving.plugins.modules import sglang_verify as module
from ready_testlib import COLLECTIONS  # noqa: F401  (puts the collection on sys.path)

ANSWER = {"text": "ok", "output_ids": [1, 2], "meta_info": {"completion_tokens": 2, "spec_verify_ct": 1}}


def serve(busy_first: int, streamed_abort: bool):
    calls = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls["n"] += 1
            busy = calls["n"] <= busy_first
            if busy and not streamed_abort:
                self.send_response(503)
                self.end_headers()
                self.wfile.write(b'{"error": "queue full"}')
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if streamed_abort else "application/json")
            self.end_headers()
            if not streamed_abort:
                self.wfile.write(json.dumps(ANSWER).encode())
                return
            finish = {"type": "abort", "status_code": 503, "message": "queue full"} if busy else {"type": "stop"}
            chunk = dict(ANSWER, meta_info=dict(ANSWER["meta_info"], finish_reason=finish))
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, calls


@pytest.mark.parametrize("streamed", [False, True])
def test_a_busy_answer_is_sent_again_and_the_third_is_final(streamed, monkeypatch):
    monkeypatch.setattr(module, "RETRY_WAIT_S", 0.01)
    row = {"id": "p1", "prompt": "hello"}
    send = "long" if streamed else "short"
    srv, calls = serve(busy_first=2, streamed_abort=streamed)
    try:
        client = module.Server(f"http://127.0.0.1:{srv.server_port}", None, 10)
        out = getattr(client, send)(row, 2)
        result = out[0]  # (row, its stream increments)
        assert calls["n"] == 3 and result["output_ids"] == [1, 2], (calls, result)
    finally:
        srv.shutdown()
    # busy three times: the last answer is the check's, a failure
    srv, calls = serve(busy_first=3, streamed_abort=streamed)
    try:
        client = module.Server(f"http://127.0.0.1:{srv.server_port}", None, 10)
        with pytest.raises(RuntimeError):
            getattr(client, send)(row, 2)
        assert calls["n"] == 3
    finally:
        srv.shutdown()
