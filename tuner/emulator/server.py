"""The emulator's HTTP API: SGLang's endpoints on aiohttp, backed by the real-time scheduler.

Endpoints and their shapes follow docs/reference/sglang.md §3: /health (503 until warm),
/v1/models (answers as soon as the port is open), /server_info and /get_server_info, /model_info,
/generate (SGLang's native API, streaming with cumulative text and `data: [DONE]`),
/v1/chat/completions and /v1/completions (OpenAI, streaming SSE and not, usage, stream_options),
/metrics (only with --enable-metrics) and /flush_cache. With --api-key every endpoint except
/health* and /metrics wants `Authorization: Bearer <key>` (401 otherwise).

This module holds the app's state, its routes and middleware, the small endpoints, and the path of
a generation request through the scheduler (admission, running to the end, streaming). The request
bodies and responses of the generation APIs are api_native.py and api_openai.py; the /server_info
body is server_info.py; the /metrics text is metrics.py.

Work per token is avoided: the scheduler wakes a handler once per verify step, and the handler
writes the step's tokens as one chunk.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from . import api_native, api_openai, dp, model, tokens, workload
from . import metrics as prom
from .engine import Batch, Scheduler
from .faults import FaultSet
from .http_json import BadRequest, SchedulerRefusal, dumps, error_openai
from .logs import Logger
from .profile import Profile
from .realtime import RealtimeDriver
from .request import Request
from .resolve import ResolvedArgs, launch_command
from .server_info import server_info_body

HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT default (docs/reference/sglang.md §7.4)

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}

GENERATION_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions")
# allowed without the key (docs/reference/sglang.md §3; 0.5.23 utils/auth.py lets /ready through too)
OPEN_PATHS = ("/health", "/health_generate", "/metrics", "/ready")


class UvicornAccessLogger(AbstractAccessLogger):
    """Access lines in the format SGLang configures for uvicorn (docs/reference/sglang.md §1.1)."""

    sink: Logger | None = None
    exclude: tuple[str, ...] = ()

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:  # noqa: A002
        sink = self.sink
        if sink is None:
            return
        path = request.path_qs
        if self.exclude and path.startswith(self.exclude):
            return
        peer = request.transport.get_extra_info("peername") if request.transport else None
        client = f"{peer[0]}:{peer[1]}" if peer and len(peer) >= 2 else "127.0.0.1:0"
        status = response.status
        sink.access(client, request.method, path, status, _REASONS.get(status, response.reason or ""))


class EmulatorApp:
    """State shared by the handlers: the resolved arguments, the scheduler and the counters."""

    def __init__(
        self,
        cfg: ResolvedArgs,
        profile: Profile,
        faults: FaultSet,
        logger: Logger,
        schedulers: list[Scheduler],
        capacity: model.Capacity,
        memory: dict[str, float],
        version: str,
        rank_prefixes: list[str],
    ) -> None:
        self.cfg = cfg
        self.p = profile
        self.faults = faults
        self.log = logger
        # one scheduler per DP replica (dp.py), each logging with its rank's prefix; rank 0's holds
        # what they share (speculation, the launch depth)
        self.scheds = schedulers
        self.sched = schedulers[0]
        self.capacity = capacity
        self.memory = memory
        self.version = version
        self.rank_prefixes = rank_prefixes
        self.prefix0 = rank_prefixes[0]
        drivers = [RealtimeDriver(s, on_batch=self._on_batch) for s in schedulers]
        self.driver: RealtimeDriver | dp.DataParallelDriver = (
            drivers[0] if len(drivers) == 1 else dp.DataParallelDriver(drivers, cfg.facts.dp_health_own_counter)
        )
        for s in schedulers:
            s.collapse_after = faults.accept_collapse_after
        self.status = "starting"  # starting | up | draining | unhealthy
        self.served_name = cfg.values["served_model_name"]
        self.api_key = cfg.values.get("api_key")
        self.admin_api_key = cfg.values.get("admin_api_key")
        self.rng = random.Random(cfg.values["random_seed"] ^ 0x5F3759DF)
        self.created = int(time.time())
        self.topk = cfg.topk
        # 0.5.23's start-up phases, the engine's and the scheduler's (startup.py record, at ready)
        self.startup_time: dict[str, Any] = {}
        self.scheduler_startup_time: dict[str, Any] = {}
        self.launch_command = launch_command(cfg.launch_argv)
        self.in_flight: dict[str, Request] = {}
        self._progress: list[asyncio.Future[None]] = []
        self.labels = prom.labels_text(self.served_name)
        self.h_ttft = prom.Histogram(prom.TTFT_BUCKETS)
        self.h_itl = prom.Histogram(prom.ITL_BUCKETS)
        self.h_e2e = prom.Histogram(prom.E2E_BUCKETS)
        self.h_tpot = prom.Histogram(prom.ITL_BUCKETS)  # per request: (e2e - ttft) / (tokens - 1)
        # 0.5.23 splits TTFT, per-request TPOT and e2e by is_streaming (metrics.py): each request's
        # observations again, by its `stream`
        self.h_by_stream = {
            (h, st): prom.Histogram(h.buckets) for h in (self.h_ttft, self.h_e2e, self.h_tpot) for st in (False, True)
        }
        self.health_generation = _env_true("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", default=True)
        # as SGLang reads it once at import (srt/entrypoints/http_server.py `HEALTH_CHECK_TIMEOUT`)
        self.health_timeout = _env_seconds("SGLANG_HEALTH_CHECK_TIMEOUT", HEALTH_CHECK_TIMEOUT_S)
        # spec-diverge / spec-repeat: only a speculating server's verify path goes wrong
        self.text_fault: tokens.TextFault | None = None
        if cfg.spec_on and (faults.spec_diverge_at is not None or faults.spec_repeat_at is not None):
            self.text_fault = (faults.spec_diverge_at, faults.spec_repeat_at)

    # ---- app ------------------------------------------------------------------------------------
    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health)
        if self.cfg.facts.ready_endpoint:
            r.add_get("/ready", self.ready)
        r.add_get("/v1/models", self.models)
        r.add_get("/v1/models/{model:.+}", self.model_card)
        r.add_get("/server_info", self.server_info)
        r.add_get("/get_server_info", self.server_info)
        r.add_get("/model_info", self.model_info)
        r.add_get("/get_model_info", self.model_info)
        r.add_post("/generate", partial(api_native.generate, self))
        r.add_post("/v1/chat/completions", partial(api_openai.chat_completions, self))
        r.add_post("/v1/completions", partial(api_openai.completions, self))
        r.add_route("*", "/flush_cache", self.flush_cache)
        if self.cfg.values.get("enable_metrics"):
            r.add_get("/metrics", self.metrics)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        path = request.path
        # SGLang's auth (utils/auth.py): the scheme in any case; an admin endpoint (/flush_cache)
        # takes the admin key alone once one is set, else the API key
        key = self.admin_api_key if path == "/flush_cache" and self.admin_api_key else self.api_key
        if key and not path.startswith(OPEN_PATHS):
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or token.strip() != key:
                return web.Response(status=401, body=b'{"error":"Unauthorized"}', content_type="application/json")
        if path in GENERATION_PATHS and request.method == "POST":
            if self.status == "draining":
                return error_openai("The server is shutting down.", 503, "ServiceUnavailableError")
            share = self.faults.http_5xx_share
            # the fault is for clients of a ready server; SGLang's own warm-up request is spared
            if share and self.status == "up" and self.rng.random() < share:
                status = 500 if self.rng.random() < 0.5 else 503
                etype = "InternalServerError" if status == 500 else "ServiceUnavailableError"
                return error_openai(f"Emulated fault http-5xx: request answered {status}.", status, etype)
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return web.Response(status=404, body=b'{"detail":"Not Found"}', content_type="application/json")
        except web.HTTPMethodNotAllowed:
            return web.Response(status=405, body=b'{"detail":"Method Not Allowed"}', content_type="application/json")

    def _on_batch(self, batch: Batch) -> None:
        """A scheduler output reached the detokenizer: the health checks waiting for one pass."""
        if self._progress and batch.streamed_output():
            waiters, self._progress = self._progress, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)

    # ---- health and information -----------------------------------------------------------------
    async def ready(self, request: web.Request) -> web.Response:
        """0.5.23's readiness probe: up or not, without a generation."""
        return web.Response(status=200 if self.status == "up" else 503)

    async def health(self, request: web.Request) -> web.Response:
        # SGLang answers 503 at once only while starting or shutting down; an unhealthy server (a
        # check that timed out) is checked again, and the next check that passes sets it up again
        # (sgl-project/sglang srt/entrypoints/http_server.py `health_generate`, 0.5.9-0.5.23)
        if self.status in ("starting", "draining"):
            return web.Response(status=503)
        if not self.health_generation:
            return web.Response(status=200)
        # SGLang sends a 1-token generation and answers 200 as soon as any scheduler output arrives
        # (docs/reference/sglang.md §3); a busy server answers at its next step.
        loop = asyncio.get_running_loop()
        tic = loop.time()
        req = Request(f"HEALTH_CHECK_{uuid.uuid4().hex}", 1, 1, alpha=0.0, internal=True)
        fut = loop.create_future()
        self._progress.append(fut)
        self.driver.submit(req)
        try:
            await asyncio.wait_for(fut, self.health_timeout)
        except TimeoutError:
            self.driver.abort(req)
            self.log.error(
                f"Health check failed. Server couldn't get a response from detokenizer for last "
                f"{self.health_timeout:g} seconds. tic start time: {tic:.2f}. "
                f"last_heartbeat time: {max(s.last_output_time for s in self.scheds):.2f}"
            )
            if self.status == "up":
                self.status = "unhealthy"
            return web.Response(status=503)
        self.driver.abort(req)
        if self.status == "unhealthy":
            self.status = "up"
        return web.Response(status=200)

    def _card(self) -> dict[str, Any]:
        return {
            "id": self.served_name,
            "object": "model",
            "created": self.created,
            "owned_by": "sglang",
            "root": self.served_name,
            "max_model_len": self.context_len,
        }

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [self._card()]}, dumps=dumps)

    async def model_card(self, request: web.Request) -> web.Response:
        """`GET /v1/models/{model}` (the OpenAI SDK's models.retrieve): the card, or a 404 naming it."""
        model = request.match_info["model"]
        if model != self.served_name:
            body = {
                "error": {
                    "message": f"The model '{model}' does not exist",
                    "type": "invalid_request_error",
                    "param": "model",
                    "code": "model_not_found",
                }
            }
            return web.json_response(body, status=404, dumps=dumps)
        return web.json_response(self._card(), dumps=dumps)

    def clock(self) -> dict[str, float | int]:
        """How well the real-time driver kept the model's clock: the largest lag behind it, how
        often the lag passed MAX_LAG_S and the model's time was lost (realtime.RealtimeDriver), and
        how long the model was busy. A bench that drives this emulator harder than its machine's
        CPU allows measures the CPU, not the profile: these say so."""
        return {
            "max_lag_ms": round(self.driver.max_lag * 1000, 3),
            "lag_resets": self.driver.lag_resets,
            "model_busy_s": round(sum(s.busy_time for s in self.scheds), 3),
        }

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(server_info_body(self), dumps=dumps)

    async def model_info(self, request: web.Request) -> web.Response:
        v = self.cfg.values
        return web.json_response(
            {
                "model_path": v["model_path"],
                "tokenizer_path": v["tokenizer_path"],
                "is_generation": True,
                "preferred_sampling_params": v.get("preferred_sampling_params"),
                "weight_version": v["weight_version"],
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": self.p.model_type,
                "architectures": [self.p.model_architecture],
            },
            dumps=dumps,
        )

    async def flush_cache(self, request: web.Request) -> web.Response:
        text = (
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n"
        )
        # each DP rank's scheduler gets the request and answers for itself (data_parallel_controller.py
        # sends control messages to every worker); the tokenizer answers with the first reply of its
        # fan-out (0.5.9-0.5.23 `flush_cache`: `(await self.flush_cache_communicator(...))[0]`), and
        # an idle rank replies at once, a busy one between forward passes: 400 only if all are busy
        busy = [(s, pre) for s, pre in zip(self.scheds, self.rank_prefixes, strict=True) if dp.busy(s)]
        for s, pre in busy:
            self.log.warning(
                f"Cache not flushed because there are pending requests. #queue-req: "
                f"{s.num_waiting}, #running-req: {s.num_running}",
                pre,
            )
        for s, pre in zip(self.scheds, self.rank_prefixes, strict=True):
            if not dp.busy(s):
                s.reset_spec_counters()
                self.log.info("Cache flushed successfully!", pre)
        return web.Response(status=400 if len(busy) == len(self.scheds) else 200, text=text)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=prom.metrics_text(self), content_type="text/plain", charset="utf-8")

    # ---- generation -------------------------------------------------------------------------------
    @property
    def context_len(self) -> int:
        """The context length the server runs with: --context-length, else the profile's."""
        return int(self.cfg.values.get("context_length") or self.p.context_len)

    @property
    def max_req_len(self) -> int:
        """SGLang's limit on one request's tokens, input and output (tp_worker.py: max_req_len =
        min(context_len - 1, max_total_num_tokens - 1)): the scheduler cuts max_new_tokens to it."""
        return min(self.context_len - 1, self.capacity.max_total_num_tokens - 1)

    @property
    def max_req_input_len(self) -> int:
        """SGLang's limit on one input (tp_worker.py: max_req_input_len = max_req_len - 5): what
        /server_info reports and what the scheduler refuses at."""
        return self.max_req_len - 5

    @property
    def num_reserved_tokens(self) -> int:
        """Output slots SGLang reserves per request for the draft tokens, counted with the input in
        the context check (0.5.9 tokenizer_manager.py num_reserved_tokens, 0.5.23 managers/utils.py
        compute_num_reserved_tokens): max(topk x steps, draft tokens) under the EAGLE family (NEXTN
        is EAGLE), 0 otherwise; under adaptive speculation the widest candidate's."""
        cfg = self.cfg
        algo = str(cfg.values.get("speculative_algorithm") or "").upper()
        if not cfg.spec_on or algo not in ("EAGLE", "EAGLE3", "NEXTN"):
            return 0
        if cfg.adaptive is not None:
            return max(cfg.topk * cfg.num_steps, cfg.adaptive.max_steps + 1)
        return max(cfg.topk * cfg.num_steps, cfg.num_draft_tokens)

    def make_request(
        self,
        rid: str,
        input_tokens: int,
        max_new: int | None,
        temperature: float,
        ignore_eos: bool,
        prompt_h: int,
        seed: int | None,
        top_p: float = 1.0,
        prompt_tokens: list[Any] | None = None,
        stream: bool = False,
    ) -> tuple[Request, int]:
        """A scheduler request for one prompt, checked against the context length as SGLang checks
        it (BadRequest otherwise), its max_new_tokens cut to what fits as SGLang's scheduler cuts it,
        and the seed of its output text (tokens.py)."""
        ctx = self.context_len
        reserved = self.num_reserved_tokens
        if input_tokens + reserved >= ctx:
            raise BadRequest(
                f"The input ({input_tokens + reserved} tokens) is longer than the model's context length ({ctx} tokens)."
            )
        # the scheduler's own limit: what the KV pool can hold (managers/utils.py validate_input_length)
        max_in = self.max_req_input_len
        if input_tokens >= max_in:
            if not self.cfg.values.get("allow_auto_truncate"):
                raise SchedulerRefusal(
                    f"Input length ({input_tokens} tokens) exceeds the maximum allowed length ({max_in} tokens). "
                    "Use a shorter input or enable --allow-auto-truncate."
                )
            input_tokens = max_in
        if max_new is not None and max_new < 0:
            raise BadRequest("max_new_tokens must be at least 0")
        total = input_tokens + reserved + (max_new or 0)
        if max_new is None:
            max_new = 1 << 30  # unset: no total check, the scheduler's cut below
        elif total >= ctx if self.cfg.facts.total_tokens_inclusive else total > ctx:
            raise BadRequest(
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested a "
                f"total of {total} tokens: {input_tokens + reserved} tokens from the input messages and "
                f"{max_new} tokens for the completion. Please reduce the number of tokens in the input messages or "
                f"the completion to fit within the limit."
            )
        # the scheduler's cut (scheduler.py init_req_max_new_tokens, 0.5.9-0.5.23): a request whose
        # output would not fit the context or the KV pool ends early, finish reason `length`
        max_new = min(max_new, max(0, self.max_req_len - input_tokens - 1))
        h = tokens.output_seed(prompt_h, temperature, seed, self.rng.getrandbits(62))
        stop_at = None if ignore_eos else tokens.eos_position(h, self.p.eos_min_tokens, self.p.eos_max_tokens)
        if not 0.0 < top_p <= 1.0:
            raise BadRequest(f"top_p must be in (0, 1], got {top_p}.")
        # accept-drift: the logits fall with the requests served since this process started
        drift = -self.faults.accept_drift_per_100 * dp.total(self.scheds, "num_requests_total") / 100.0
        acc = workload.request_acceptance(
            self.p,
            temperature,
            top_p,
            prompt_tokens,
            topk=self.topk,
            positions=max(1, self.sched.k_max),
            prompt_h=prompt_h,
            offset=drift,
        )
        if isinstance(acc, tuple):
            req = Request(rid, input_tokens, max(1, max_new), alpha=acc[0], stop_at=stop_at, acceptance=acc)
        else:
            req = Request(rid, input_tokens, max(1, max_new), alpha=acc, stop_at=stop_at)
        req.stream = stream
        req.user = max_new  # 0 means "prefill only": reported as zero completion tokens
        return req, h

    def _observe(self, req: Request) -> None:
        if req.first_token_at < 0 or req.finished_at < 0:
            return
        stream = bool(req.stream)
        for h, value in ((self.h_ttft, req.first_token_at - req.arrival), (self.h_e2e, req.finished_at - req.arrival)):
            h.observe(value)
            self.h_by_stream[(h, stream)].observe(value)
        if req.generated > 1:
            tpot = (req.finished_at - req.first_token_at) / (req.generated - 1)
            self.h_itl.observe(tpot, req.generated - 1)
            self.h_tpot.observe(tpot)
            self.h_by_stream[(self.h_tpot, stream)].observe(tpot)

    def _cut_point(self, req: Request) -> int | None:
        share = self.faults.cut_stream_share
        if share and self.rng.random() < share:
            return self.rng.randint(1, max(1, req.limit - 1))
        return None

    async def run_to_end(self, req: Request, arrival: float | None = None) -> None:
        """Drive one request that is not streamed until it finishes (aborted if the client leaves);
        `arrival` is the loop time a batch's requests share (RealtimeDriver.submit)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def notify(r: Request) -> None:
            if r.finished and not fut.done():
                fut.set_result(None)

        req.notify = notify
        self.in_flight[req.rid] = req
        self.driver.submit(req, arrival)
        try:
            await fut
        finally:
            self.in_flight.pop(req.rid, None)
            if not req.finished:
                self.driver.abort(req)
        self._observe(req)

    async def stream(
        self,
        request: web.Request,
        req: Request,
        on_tokens: Callable[[int, int, bool], list[bytes]],
    ) -> web.StreamResponse:
        """Drive one streamed request: on_tokens(sent, now_generated, finished) -> SSE frames to write."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        ev = asyncio.Event()
        req.notify = lambda r: ev.set()
        cut_at = self._cut_point(req)
        self.in_flight[req.rid] = req
        self.driver.submit(req)
        sent = 0
        try:
            while True:
                await ev.wait()
                ev.clear()
                g = req.generated
                done = req.finished
                if req.finish_reason == "abort":
                    break
                if g > sent or done:
                    frames = on_tokens(sent, g, done)
                    sent = g
                    if frames:
                        await resp.write(b"".join(frames))
                if done:
                    break
                if cut_at is not None and sent >= cut_at:
                    # emulated fault: the connection drops mid-stream, without the final chunk or [DONE]
                    self.driver.abort(req)
                    if request.transport is not None:
                        request.transport.close()
                    return resp
            await resp.write_eof()
        except ConnectionResetError:
            # the client went away: SGLang aborts the request; nothing to log
            self.driver.abort(req)
            return resp
        except asyncio.CancelledError:
            self.driver.abort(req)
            raise
        finally:
            self.in_flight.pop(req.rid, None)
        self._observe(req)
        return resp


def _env_true(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment (SGLang reads it with int()); the default
    when unset or not a positive number."""
    try:
        v = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return v if v > 0 else default
