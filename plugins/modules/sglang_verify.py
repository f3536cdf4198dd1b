#!/usr/bin/python
# Copyright: (c) 2026, sglang-tune contributors
# Apache License 2.0 (the collection's licence, galaxy.yml): https://www.apache.org/licenses/LICENSE-2.0
"""Ansible module ``sglang_verify``: the correctness and acceptance-drift gate on a running server."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_verify
short_description: Check a running SGLang server's greedy outputs and acceptance against a stored baseline
version_added: "0.2.0"
description:
  - Sends the prompts stored in O(baseline) (greedy, temperature 0) to the server and compares what comes
    back with the outputs of a no-speculation deployment of the same model and SGLang version stored there
    (written by C(python -m tuner verify --capture) or by the tuner's sweep).
  - Fails when the outputs differ beyond the rule (100% exact when both sides run with
    C(--enable-deterministic-inference) on a release that has it, else at least 60% exact on the short
    continuations), when a long output ends in a repeated cycle, when the acceptance length is not above
    1.05 or below 95% of O(measured_accept) beyond its prompts' spread, or when the long prompts, sent
    again at the end of the run, accept less than on their first send beyond noise. The rules are
    C(plugins/module_utils/sglang_verify.py), shared with the tuner; docs/tuner.md "Verify" states them.
  - The check keeps O(concurrency) requests in flight until its last one ends (the short prompts are sent
    again as load, their answers not judged), so every judged request runs at the same batch size.
  - An adaptive server whose O(adaptive_config) pins 0 steps at that batch (its O(concurrency) requests in
    flight) runs no speculative step there, so its acceptance length is 1.0 by design; it is held to
    parity, loops and drift, not to the 1.05 floor nor the collapse rule, as the tuner's gate holds it (the
    verdict's C(accept.floor_judged) is false and C(acceptance_vs_sweep) says why).
  - A baseline of another model, server version or prompt set is refused, naming what differs.
  - The module never changes anything; C(changed) is always C(false).
author:
  - sglang-tune contributors (@sglang-tune)
options:
  url:
    description: Base URL of the SGLang server, without a path.
    type: str
    default: http://127.0.0.1:30000
  baseline:
    description: The parsed baseline file (a dict; the role reads it on the controller).
    type: dict
    required: true
  measured_accept:
    description: The acceptance length the tuner measured for this configuration; without it only the 1.05 floor applies.
    type: float
  api_key:
    description: Bearer token for the server (SGLang's C(--api-key)), sent to O(url) only, never on a redirect.
    type: str
  request_timeout:
    description: Seconds per request.
    type: float
    default: 300
  concurrency:
    description:
      - Requests in flight at once (long, short and load), held there until the last long prompt's second send
        ends.
    type: int
    default: 8
  adaptive_config:
    description:
      - The server's adaptive speculative config, SGLang's per-batch-size JSON as a dict (the file given to
        C(--speculative-adaptive-config), SGLang 0.5.13+), e.g. 3 steps at batch 1 and 0 from batch 2 (see the
        examples). The role passes the config of its C(spec_schedule). Leave it out for a static depth or SGLang's default
        adaptive config (whose first 0-step bucket, 64, is beyond the default O(concurrency)).
      - Where it routes the check's running batch of O(concurrency) (padded to O(cuda_graph_bs) when given) to a
        bucket whose only candidate is 0, the acceptance floor and the collapse rule are not applied (see the
        description); a config with 0 steps only below that batch is held to them.
      - One SGLang would refuse fails the module, with SGLang's words, before any request is sent.
    type: dict
  cuda_graph_bs:
    description:
      - The CUDA-graph batch sizes SGLang pads a running batch to before it picks the bucket of
        O(adaptive_config) (C(--cuda-graph-bs-decode) as given; SGLang does not pad without it).
        Unset, batches are routed unpadded, as the tuner's gate routes them.
    type: list
    elements: int
"""

EXAMPLES = r"""
- name: Check the outputs against the stored baseline
  sglang_tune.serving.sglang_verify:
    url: http://127.0.0.1:30000
    baseline: "{{ lookup('ansible.builtin.file', 'baseline.json') | from_json }}"
    measured_accept: 3.1

- name: Check a server that speculates at batch 1 only (not held to the acceptance floor)
  sglang_tune.serving.sglang_verify:
    baseline: "{{ lookup('ansible.builtin.file', 'baseline.json') | from_json }}"
    adaptive_config:
      "1":
        candidate_steps: [3]
      "2":
        candidate_steps: [0]
"""

RETURN = r"""
passed:
  description: Whether the configuration passed the gate.
  type: bool
  returned: always
reasons:
  description: Why it failed, one sentence each (the first is the headline and the failure message).
  type: list
  elements: str
  returned: always
verdict:
  description: The whole verdict (exact-match share, first divergence, example, loops, acceptance, drift, cost).
  type: dict
  returned: when the outputs were checked (success, or a check that failed); not when the baseline, the
    schedule or the server stopped the check before it
"""

import http.client
import json
import threading
import time
import urllib.error
import urllib.request

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_server_info import (
    SERVER_INFO_PATHS,
    parse_server_info,
)
from ansible_collections.sglang_tune.serving.plugins.module_utils.sglang_verify import (
    RETRIES_5XX,
    RETRY_WAIT_S,
    StreamRow,
    baseline_mismatch,
    baseline_problems,
    candidate_identity,
    floor_exemption,
    gate_outputs,
    generate_body,
    judge,
    load_prompt,
    prompt_set_hash,
    request_order,
    response_row,
    verdict_line,
)


class Busy(RuntimeError):
    """A 5xx answer, or a stream the server aborted with a 5xx (queue full, a timeout): the request
    may be sent again, as the tuner's gate does (tuner/verify/probe.py; docs/tuner.md "Pass rules")."""


def retrying(send):
    for _retry in range(RETRIES_5XX):
        try:
            return send()
        except Busy:
            time.sleep(RETRY_WAIT_S)
    return send()  # the last send's 5xx is the gate's answer


class Server:
    def __init__(self, url, api_key, timeout):
        self.base = url.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        # sent to this server only (add_unredirected_header): urllib copies every other header to
        # wherever a redirect points, another host or plain http:// included
        self.auth = f"Bearer {api_key}" if api_key else None
        self.timeout = timeout
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.version = None  # the release /server_info reports (how a stream's text comes)

    def _open(self, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, headers=self.headers, method="GET" if body is None else "POST"
        )
        if self.auth:
            req.add_unredirected_header("Authorization", self.auth)
        try:
            return self.opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            if body is not None and 500 <= exc.code < 600:
                raise Busy(f"{path}: HTTP {exc.code}") from None
            raise

    def info(self):
        last = None
        for path in SERVER_INFO_PATHS:
            try:
                with self._open(path) as r:
                    info = parse_server_info(json.loads(r.read().decode("utf-8")))
                self.version = info.get("version")
                return info
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = exc
        raise RuntimeError(f"no /server_info: {last}")

    def short(self, row, max_new):
        def send():
            with self._open("/generate", generate_body(row["prompt"], max_new, False)) as r:
                out = json.loads(r.read().decode("utf-8"))
            return response_row(row["id"], out, time.monotonic())

        return retrying(send)

    def long(self, row, max_new):
        return retrying(lambda: self._long(row, max_new))

    def _long(self, row, max_new):
        """Streamed: (row, [(arrival, new tokens, new verify passes), ...])."""
        fold = StreamRow(row["id"], self.version)
        ended = False
        with self._open("/generate", generate_body(row["prompt"], max_new, True)) as r:
            for raw in r:
                if not raw.startswith(b"data:"):
                    continue
                now = time.monotonic()
                data = raw[5:].strip()
                if data == b"[DONE]":
                    ended = True
                    break
                error = fold.add(json.loads(data), now)
                if error is not None:
                    raise (Busy if fold.busy else RuntimeError)(f"/generate for {row['id']}: {error}")
        if not ended:
            # a stream cut before SGLang's closing [DONE] is no whole output (the tuner's gate fails it too)
            raise RuntimeError(f"/generate for {row['id']}: the stream ended before [DONE]")
        return fold.row()


def send_all(srv, base, settings, plan, concurrency):
    """Every request of `plan` with `concurrency` in flight, held there by load (the short prompts
    again, answers not judged: request_order) until the last second send ends: ({(kind, i): row}, the
    number of load requests sent).
    The first failure is raised once the requests in flight end (no load is sent after it)."""
    lock = threading.Lock()
    todo = list(reversed(plan))
    left = {"again": sum(1 for item in plan if item[0] == "again"), "load": 0}
    failures: list[Exception] = []
    done = {}

    def next_item():
        with lock:
            if failures:
                return None
            if todo:
                return todo.pop()
            if left["again"] > 0 and base["short"]:
                left["load"] += 1
                return ("load", load_prompt(left["load"] - 1, len(base["short"])))
            return None

    def worker():
        item = next_item()
        while item is not None:
            kind, i = item
            try:
                if kind in ("short", "load"):
                    row = srv.short(base["short"][i], int(settings["short_tokens"]))
                else:
                    row = srv.long(base["long"][i], int(settings["long_tokens"]))
                if kind != "load":
                    with lock:
                        done[item] = row
            except Exception as exc:  # noqa: BLE001 - raised in run(), after the others end
                with lock:
                    failures.append(exc)
            finally:
                if kind == "again":
                    with lock:
                        left["again"] -= 1
            item = next_item()

    threads = [threading.Thread(target=worker, daemon=True) for _slot in range(max(1, concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return done, left["load"]


def run(module):
    p = module.params
    base = p["baseline"]
    problems = baseline_problems(base)
    if not problems and not all(isinstance(r.get("prompt"), str) for r in base["short"] + base["long"]):
        problems = ["it does not carry its prompts (write it with python -m tuner verify --capture)"]
    if problems:
        module.fail_json(
            msg="the baseline is not a usable baseline file: " + "; ".join(problems[:4]), passed=False, reasons=problems
        )
    try:
        exempt = floor_exemption(p["adaptive_config"], p["concurrency"], p["cuda_graph_bs"])
    except (ValueError, AttributeError, TypeError) as exc:
        module.fail_json(
            msg=f"adaptive_config is not a per-batch-size config SGLang accepts: {exc}",
            passed=False,
            reasons=[str(exc)],
        )
    srv = Server(p["url"], p["api_key"], p["request_timeout"])
    info = srv.info()
    spec = info.get("speculative") or {}
    model = candidate_identity(info)["model"]
    prompts = [{"id": r["id"], "text": r["prompt"]} for r in base["short"] + base["long"]]
    diffs = baseline_mismatch(
        base, model, info.get("version"), prompt_set_hash(prompts), base.get("settings") or {}, info.get("numerics")
    )
    if diffs:
        module.fail_json(msg="the baseline does not fit this server: " + "; ".join(diffs), passed=False, reasons=diffs)
    settings = base["settings"]
    started = time.monotonic()
    # the long prompts, the short ones, the long prompts again (request_order: the drift rule's pairs)
    plan = request_order(len(base["short"]), len(base["long"]))
    done, loads = send_all(srv, base, settings, plan, p["concurrency"])
    seconds = time.monotonic() - started
    ident = candidate_identity(info)  # the tuner's gate reads the server the same way (tuner/verify/probe.py)
    candidate = {
        **ident,
        # adaptive: the sweep's measured acceptance is not its gate's (sglang_verify.judge); the
        # config this module was handed counts as the server's own word does
        "adaptive": ident["adaptive"] or p["adaptive_config"] is not None,
        **gate_outputs(done, len(base["short"]), len(base["long"]), seconds, load=loads),
    }
    # a config that pins 0 steps where the requests run: no floor (sglang_verify.floor_exemption, as the tuner's gate)
    # a server without speculation (spec_steps 0) has no verify pass to judge: its outputs only,
    # as the tuner gates no such configuration (it is the reference the baseline is taken from)
    verdict = judge(base, candidate, p["measured_accept"], acceptance=ident["speculates"], floor=exempt is None)
    if exempt is not None:
        verdict["acceptance_vs_sweep"] = exempt
    verdict["server"] = {
        "server_version": info.get("version"),
        "model": model,
        "speculative": spec if spec.get("enabled") else None,
    }
    return verdict


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", default="http://127.0.0.1:30000"),
            baseline=dict(type="dict", required=True),
            measured_accept=dict(type="float"),
            api_key=dict(type="str", no_log=True),
            request_timeout=dict(type="float", default=300),
            concurrency=dict(type="int", default=8),
            adaptive_config=dict(type="dict"),
            cuda_graph_bs=dict(type="list", elements="int"),
        ),
        supports_check_mode=True,
    )
    if not module.params["url"].startswith(("http://", "https://")):
        module.fail_json(msg="url must start with http:// or https://, got {!r}".format(module.params["url"]))
    try:
        verdict = run(module)
    except (RuntimeError, urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        module.fail_json(msg=f"the server did not answer the output check: {exc}", passed=False, reasons=[str(exc)])
    if not verdict["passed"]:
        module.fail_json(
            msg="output check failed: " + verdict["reasons"][0],
            passed=False,
            reasons=verdict["reasons"],
            verdict=verdict,
        )
    module.exit_json(changed=False, passed=True, reasons=[], verdict=verdict, msg=verdict_line(verdict))


if __name__ == "__main__":
    main()
