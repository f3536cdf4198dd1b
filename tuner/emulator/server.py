"""The emulator's HTTP API: SGLang's endpoints on aiohttp, backed by the real-time scheduler.

Endpoints and their shapes follow docs/reference/sglang.md §3: /health (503 until warm),
/v1/models (answers as soon as the port is open), /server_info and /get_server_info, /model_info,
/generate (SGLang's native API, streaming with cumulative text and `data: [DONE]`),
/v1/chat/completions and /v1/completions (OpenAI, streaming SSE and not, usage, stream_options),
/metrics (only with --enable-metrics) and /flush_cache. With --api-key every endpoint except
/health* and /metrics wants `Authorization: Bearer <key>` (401 otherwise).

Work per token is avoided: the scheduler wakes a handler once per verify step, and the handler
writes the step's tokens as one chunk.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from . import metrics as prom
from . import model, tokens, workload
from .engine import RealtimeDriver, Request, Scheduler
from .faults import FaultSet
from .logs import Logger
from .profile import Profile
from .resolve import ResolvedArgs, launch_command, public_values

HEALTH_CHECK_TIMEOUT_S = 20.0  # SGLANG_HEALTH_CHECK_TIMEOUT default (docs/reference/sglang.md §7.4)

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

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
OPEN_PATHS = ("/health", "/health_generate", "/metrics")  # allowed without the key (docs/reference/sglang.md §3)


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


def _error_openai(message: str, status: int = 400, etype: str = "BadRequestError") -> web.Response:
    body = {"object": "error", "message": message, "type": etype, "param": None, "code": status}
    return web.Response(status=status, body=_dumps(body), content_type="application/json")


def _error_native(message: str, status: int = 400) -> web.Response:
    return web.Response(status=status, body=_dumps({"error": {"message": message}}), content_type="application/json")


class BadRequest(Exception):
    pass


class EmulatorApp:
    """State shared by the handlers: the resolved arguments, the scheduler and the counters."""

    def __init__(
        self,
        cfg: ResolvedArgs,
        profile: Profile,
        faults: FaultSet,
        logger: Logger,
        scheduler: Scheduler,
        capacity: model.Capacity,
        memory: dict[str, float],
        version: str,
        rank_prefix: str,
    ) -> None:
        self.cfg = cfg
        self.p = profile
        self.faults = faults
        self.log = logger
        self.sched = scheduler
        self.capacity = capacity
        self.memory = memory
        self.version = version
        self.prefix0 = rank_prefix
        self.driver = RealtimeDriver(scheduler, on_batch=self._on_batch)
        scheduler.collapse_after = faults.accept_collapse_after
        self.status = "starting"  # starting | up | draining | unhealthy
        self.served_name = cfg.values["served_model_name"]
        self.api_key = cfg.values.get("api_key")
        self.rng = random.Random(cfg.values["random_seed"] ^ 0x5F3759DF)
        self.created = int(time.time())
        self.topk = cfg.topk
        self.startup_time = 0.0  # seconds from launch to ready (0.5.23 reports it)
        self.launch_command = launch_command(cfg.launch_argv)
        self.in_flight: dict[str, Request] = {}
        self._progress: list[asyncio.Future[None]] = []
        self.labels = prom.labels_text(self.served_name)
        self.h_ttft = prom.Histogram(prom.TTFT_BUCKETS)
        self.h_itl = prom.Histogram(prom.ITL_BUCKETS)
        self.h_e2e = prom.Histogram(prom.E2E_BUCKETS)
        self.health_generation = _env_true("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", default=True)
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
        r.add_get("/v1/models", self.models)
        r.add_get("/server_info", self.server_info)
        r.add_get("/get_server_info", self.get_server_info)
        r.add_get("/model_info", self.model_info)
        r.add_get("/get_model_info", self.model_info)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_post("/v1/completions", self.completions)
        r.add_route("*", "/flush_cache", self.flush_cache)
        if self.cfg.values.get("enable_metrics"):
            r.add_get("/metrics", self.metrics)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        path = request.path
        if self.api_key and not path.startswith(OPEN_PATHS):
            if request.headers.get("Authorization", "") != f"Bearer {self.api_key}":
                return web.Response(status=401, body=b'{"error":"Unauthorized"}', content_type="application/json")
        if path in GENERATION_PATHS and request.method == "POST":
            if self.status == "draining":
                return _error_openai("The server is shutting down.", 503, "ServiceUnavailableError")
            share = self.faults.http_5xx_share
            # the fault is for clients of a ready server; SGLang's own warm-up request is spared
            if share and self.status == "up" and self.rng.random() < share:
                status = 500 if self.rng.random() < 0.5 else 503
                etype = "InternalServerError" if status == 500 else "ServiceUnavailableError"
                return _error_openai(f"Emulated fault http-5xx: request answered {status}.", status, etype)
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return web.Response(status=404, body=b'{"detail":"Not Found"}', content_type="application/json")
        except web.HTTPMethodNotAllowed:
            return web.Response(status=405, body=b'{"detail":"Method Not Allowed"}', content_type="application/json")

    def _on_batch(self) -> None:
        if self._progress:
            waiters, self._progress = self._progress, []
            for f in waiters:
                if not f.done():
                    f.set_result(None)

    # ---- health and information -----------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        if self.status != "up":
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
            await asyncio.wait_for(fut, HEALTH_CHECK_TIMEOUT_S)
        except TimeoutError:
            self.driver.abort(req)
            self.log.error(
                f"Health check failed. Server couldn't get a response from detokenizer for last "
                f"{HEALTH_CHECK_TIMEOUT_S:g} seconds. tic start time: {tic:.2f}. "
                f"last_heartbeat time: {self.sched.last_output_time:.2f}"
            )
            self.status = "unhealthy"
            return web.Response(status=503)
        self.driver.abort(req)
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.served_name,
            "object": "model",
            "created": self.created,
            "owned_by": "sglang",
            "root": self.served_name,
            "max_model_len": self.cfg.values.get("context_length") or self.p.context_len,
        }
        return web.json_response({"object": "list", "data": [card]}, dumps=_dumps)

    def _server_info(self) -> dict[str, Any]:
        """The /server_info body of the emulated release.

        0.5.9 (http_server.py get_server_info): dataclasses.asdict(server_args) + scheduler_info
        (status, max_total_num_tokens, max_req_input_len) + internal_states (one per DP rank: the
        scheduler's server args + last_gen_throughput, memory_usage,
        effective_max_running_requests_per_dp, avg_spec_accept_length once counted) + version.
        The scheduler's copy of the arguments follows adaptive switches (0.5.12
        eagle_worker.py syncs server_args.speculative_num_steps; 0.5.23 overrides the context), so
        internal_states[0].speculative_num_steps is the depth in use while the top level keeps the
        launch value. 0.5.23 (utils/common.py build_server_info, internal_state.py) adds
        launch_command, kv_events, startup_time, frontend, and per rank world_size, startup_time,
        memory_usage.startup_available / token_capacity_swa and graph memory by phase.
        """
        facts = self.cfg.facts
        s = self.sched
        args = public_values(self.cfg.values)
        internal = dict(args)
        if s.speculative:
            internal["speculative_num_steps"] = s.k
            internal["speculative_num_draft_tokens"] = s.draft_tokens_now
        memory: dict[str, Any] = {
            "weight": round(self.memory["weights"], 2),
            "kvcache": round(self.memory["kv_total"], 2),
            "token_capacity": self.capacity.max_total_num_tokens,
            "graph": round(self.memory["graph"], 2),
        }
        if facts.server_info_v2:
            graph = self.memory["graph"]
            memory = {
                "weight": round(self.memory["weights"], 3),
                "kvcache": round(self.memory["kv_total"], 3),
                "startup_available": round(self.memory["final"], 3),
                "token_capacity": self.capacity.max_total_num_tokens,
                "token_capacity_swa": None,
                "graph": {
                    "decode": round(0.0 if s.speculative else graph, 3),
                    "target_verify": round(graph if s.speculative else 0.0, 3),
                    "draft_decode": round(self.memory["draft_graph"] * 0.6, 3),
                    "draft_extend": round(self.memory["draft_graph"] * 0.4, 3),
                },
            }
            internal["world_size"] = self.cfg.values["tp_size"] * self.cfg.values["pp_size"]
            internal["startup_time"] = self.startup_time
        internal.update(
            {
                "last_gen_throughput": s.last_gen_throughput,
                "memory_usage": memory,
                "effective_max_running_requests_per_dp": self.capacity.max_running_requests,
            }
        )
        avg = s.avg_spec_accept_length()
        if avg is not None:
            internal["avg_spec_accept_length"] = avg
        info = dict(args)
        if facts.server_info_v2:
            info["launch_command"] = self.launch_command
        info.update(
            {
                "status": "ready" if self.status == "up" else self.status,
                "max_total_num_tokens": self.capacity.max_total_num_tokens,
                "max_req_input_len": min(self.p.context_len, self.capacity.max_total_num_tokens) - 1,
            }
        )
        if facts.server_info_v2:
            info["kv_events"] = None
            info["startup_time"] = self.startup_time
        info["internal_states"] = [internal]
        info["version"] = self.version
        if facts.server_info_v2:
            info["frontend"] = "python"
        info["emulator"] = {
            "profile": self.p.name,
            "profile_path": self.p.path,
            "sglang_version": facts.version,
            "faults": self.faults.describe(),
            "adaptive": s.policy.describe() if s.policy is not None else None,
            "steps_histogram": {str(k): n for k, n in sorted(s.steps_histogram.items())},
            "step_switches": s.step_switches,
            "noise": s.noise.describe() if s.noise is not None else None,
            # how well the real-time driver kept the model's clock (bench/emulator_speed.py reads these)
            "clock": self.clock(),
        }
        return info

    def clock(self) -> dict[str, float | int]:
        """How well the real-time driver kept the model's clock: the largest lag behind it, how
        often the lag passed MAX_LAG_S and the model's time was lost (engine.RealtimeDriver), and
        how long the model was busy. A bench that drives this emulator harder than its machine's
        CPU allows measures the CPU, not the profile: these say so."""
        return {
            "max_lag_ms": round(self.driver.max_lag * 1000, 3),
            "lag_resets": self.driver.lag_resets,
            "model_busy_s": round(self.sched.busy_time, 3),
        }

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self._server_info(), dumps=_dumps)

    async def get_server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self._server_info(), dumps=_dumps)

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
            dumps=_dumps,
        )

    async def flush_cache(self, request: web.Request) -> web.Response:
        text = (
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n"
        )
        s = self.sched
        if s.num_running or s.num_waiting:
            self.log.warning(
                f"Cache not flushed because there are pending requests. #queue-req: "
                f"{s.num_waiting}, #running-req: {s.num_running}",
                self.prefix0,
            )
            return web.Response(status=400, text=text)
        s.reset_spec_counters()
        self.log.info("Cache flushed successfully!", self.prefix0)
        return web.Response(status=200, text=text)

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text with the release's names. Gauges hold what SGLang last logged (each prefill
        batch, every --decode-log-interval decode steps: scheduler_metrics_mixin.py log_decode_stats),
        counters count every step: sglang:cuda_graph_passes_total (one per decode batch) and
        sglang:realtime_tokens_total{mode} exist from 0.5.9; 0.5.23 adds sglang:spec_verify_calls_total
        (one per request per verify step, so its delta over the decode passes' delta is the mean
        running batch size), the active-depth gauges sglang:spec_num_steps / spec_num_draft_tokens,
        and an is_streaming label on the token counters (observability/metrics_collector.py)."""
        facts = self.cfg.facts
        s = self.sched
        g = s.gauges
        gauges: list[tuple[str, str, float]] = [
            ("num_running_reqs", "The number of running requests.", g["num_running_reqs"]),
            ("num_queue_reqs", "The number of requests in the waiting queue.", g["num_queue_reqs"]),
            ("num_used_tokens", "The number of used tokens.", g["num_used_tokens"]),
            ("token_usage", "The token usage.", g["token_usage"]),
            ("gen_throughput", "The generation throughput (token/s).", g["gen_throughput"]),
            (
                "max_total_num_tokens",
                "Maximum total number of tokens in the KV cache pool.",
                self.capacity.max_total_num_tokens,
            ),
            ("cache_hit_rate", "The prefix cache hit rate.", 0.0),
            (
                "spec_accept_length",
                "The average acceptance length of speculative decoding.",
                g["spec_accept_length"] if s.speculative else 0.0,
            ),
            (
                "spec_accept_rate",
                "The average acceptance rate of speculative decoding.",
                g["spec_accept_rate"] if s.speculative else 0.0,
            ),
        ]
        if facts.metrics_spec_num_steps:
            gauges += [
                ("spec_num_steps", "Currently active speculative_num_steps.", g["spec_num_steps"]),
                (
                    "spec_num_draft_tokens",
                    "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
                    g["spec_num_draft_tokens"],
                ),
            ]
        if self.p.hybrid_mamba:
            gauges.append(("mamba_usage", "The mamba state usage.", g["mamba_usage"]))
        counters: list[tuple[str, str, list[tuple[str, float]]]] = []
        if facts.server_info_v2:
            counters += [
                (
                    "prompt_tokens",
                    "Number of prefill tokens processed.",
                    [
                        ('is_streaming="false"', s.prompt_tokens_by_stream[0]),
                        ('is_streaming="true"', s.prompt_tokens_by_stream[1]),
                    ],
                ),
                (
                    "generation_tokens",
                    "Number of generation tokens processed.",
                    [
                        ('is_streaming="false"', s.generation_tokens_by_stream[0]),
                        ('is_streaming="true"', s.generation_tokens_by_stream[1]),
                    ],
                ),
            ]
        else:
            counters += [
                ("prompt_tokens", "Number of prefill tokens processed.", [("", s.prompt_tokens_total)]),
                ("generation_tokens", "Number of generation tokens processed.", [("", s.generation_tokens_total)]),
            ]
        counters += [
            ("num_requests", "Number of requests processed.", [("", s.num_requests_total)]),
            (
                "cuda_graph_passes",
                "Total number of forward passes categorized by CUDA graph.",
                [(f'mode="{mode}"', n) for mode, n in s.cuda_graph_passes.items() if n],
            ),
            (
                "realtime_tokens",
                "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
                [(f'mode="{mode}"', n) for mode, n in s.realtime_tokens.items() if n],
            ),
        ]
        if facts.metrics_spec_verify_calls and s.speculative:
            counters.append(
                (
                    "spec_verify_calls",
                    "Number of speculative decoding verification calls.",
                    [("", s.spec_verify_calls_total)],
                )
            )
        hists = [
            ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", self.h_ttft),
            ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", self.h_itl),
            ("e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", self.h_e2e),
        ]
        body = prom.render(self.labels, gauges, counters, hists)
        return web.Response(text=body, content_type="text/plain", charset="utf-8")

    # ---- generation -------------------------------------------------------------------------------
    def _make_request(
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
        ctx = int(self.cfg.values.get("context_length") or self.p.context_len)
        if input_tokens >= ctx:
            raise BadRequest(
                f"The input ({input_tokens} tokens) is longer than the model's context length ({ctx} tokens)."
            )
        if max_new is None:
            max_new = ctx - input_tokens
        if max_new < 0:
            raise BadRequest("max_new_tokens must be at least 0")
        if input_tokens + max_new > ctx:
            raise BadRequest(
                f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You requested a "
                f"total of {input_tokens + max_new} tokens: {input_tokens} tokens from the input messages and "
                f"{max_new} tokens for the completion. Please reduce the number of tokens in the input messages or "
                f"the completion to fit within the limit."
            )
        h = tokens.output_seed(prompt_h, temperature, seed, self.rng.getrandbits(62))
        stop_at = None if ignore_eos else tokens.eos_position(h, self.p.eos_min_tokens, self.p.eos_max_tokens)
        if not 0.0 < top_p <= 1.0:
            raise BadRequest(f"top_p must be in (0, 1], got {top_p}.")
        # accept-drift: the logits fall with the requests served since this process started
        drift = -self.faults.accept_drift_per_100 * self.sched.num_requests_total / 100.0
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
        self.h_ttft.observe(req.first_token_at - req.arrival)
        self.h_e2e.observe(req.finished_at - req.arrival)
        if req.generated > 1:
            self.h_itl.observe((req.finished_at - req.first_token_at) / (req.generated - 1), req.generated - 1)

    def _cut_point(self, req: Request) -> int | None:
        share = self.faults.cut_stream_share
        if share and self.rng.random() < share:
            return self.rng.randint(1, max(1, req.limit - 1))
        return None

    async def _run_to_end(self, req: Request) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def notify(r: Request) -> None:
            if r.finished and not fut.done():
                fut.set_result(None)

        req.notify = notify
        self.in_flight[req.rid] = req
        self.driver.submit(req)
        try:
            await fut
        finally:
            self.in_flight.pop(req.rid, None)
            if not req.finished:
                self.driver.abort(req)
        self._observe(req)

    async def _stream(
        self,
        request: web.Request,
        req: Request,
        on_tokens: Callable[[int, int, bool], list[bytes]],
        head: list[bytes] | None = None,
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
            if head:
                await resp.write(b"".join(head))
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

    # /generate ----------------------------------------------------------------------------------
    def _meta(self, req: Request, prompt_tokens: int, completion: int, final: bool) -> dict[str, Any]:
        finish: Any = None
        if final:
            if req.finish_reason == "stop":
                finish = {"type": "stop", "matched": self.p.eos_token_id}
            elif req.finish_reason == "abort":
                finish = {"type": "abort", "message": "Abort request"}
            else:
                finish = {"type": "length", "length": completion}
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": finish,
            "prompt_tokens": prompt_tokens,
            "weight_version": self.cfg.values["weight_version"],
            "completion_tokens": completion,
            "cached_tokens": 0,
        }
        spec = self.sched.speculative
        if spec:
            meta["spec_verify_ct"] = req.verify_ct
        if final:
            if spec and req.verify_ct > 0:
                # tokenizer_manager.py: proposed drafts = verify calls * (the launch's
                # speculative_num_draft_tokens - 1), also under adaptive speculation.
                drafts = req.verify_ct * (self.cfg.num_draft_tokens - 1)
                if drafts > 0:
                    meta["spec_accept_rate"] = req.accepted_drafts / drafts
                    meta["spec_accept_length"] = completion / req.verify_ct
                    if self.cfg.facts.meta_info_v2:
                        meta["spec_num_correct_drafts"] = req.accepted_drafts
                        meta["spec_num_proposed_drafts"] = drafts
                    else:
                        meta["spec_accept_token_num"] = req.accepted_drafts
                        meta["spec_draft_token_num"] = drafts
                hist_key = "spec_correct_drafts_histogram" if self.cfg.facts.meta_info_v2 else "spec_accept_histogram"
                meta[hist_key] = list(req.hist)
            end = req.finished_at if req.finished_at >= 0 else asyncio.get_running_loop().time()
            meta["e2e_latency"] = max(0.0, end - req.arrival)
        return meta

    async def generate(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error_native("Invalid JSON body", 400)
        if not isinstance(body, dict):
            return _error_native("Request body must be a JSON object", 400)
        text, ids = body.get("text"), body.get("input_ids")
        if text is None and ids is None:
            return _error_native("Either text or input_ids should be provided.", 400)
        sp = body.get("sampling_params") or {}
        if isinstance(sp, list):
            sp = sp[0] if sp else {}
        stream = bool(body.get("stream", False))
        prompts: list[tuple[int, int, list[Any]]] = []  # (token count, hash, tokens)
        try:
            if text is not None:
                items = text if isinstance(text, list) else [text]
                for t in items:
                    if not isinstance(t, str):
                        raise BadRequest("text must be a string or a list of strings")
                    words = t.split()
                    prompts.append((len(words), tokens.prompt_hash(t), words))
            else:
                items = ids if (isinstance(ids, list) and ids and isinstance(ids[0], list)) else [ids]
                for one in items:
                    if not isinstance(one, list) or not all(isinstance(i, int) for i in one):
                        raise BadRequest("input_ids must be a list of integers or a list of lists")
                    prompts.append((len(one), tokens.ids_hash(one), one))
            if stream and len(prompts) > 1:
                raise BadRequest("The emulator streams single prompts only; send a batch without stream.")
            max_new = int(sp.get("max_new_tokens", 128))
            temperature = float(sp.get("temperature", 1.0))
            top_p = float(sp.get("top_p", 1.0))
            ignore_eos = bool(sp.get("ignore_eos", False))
            seed = sp.get("sampling_seed", sp.get("seed"))
            rid0 = body.get("rid")
            reqs = []
            for i, (n_in, h_prompt, prompt_toks) in enumerate(prompts):
                rid = (
                    rid0
                    if isinstance(rid0, str) and len(prompts) == 1
                    else (rid0[i] if isinstance(rid0, list) and i < len(rid0) else uuid.uuid4().hex)
                )
                reqs.append(
                    (
                        self._make_request(
                            rid,
                            max(1, n_in),
                            max_new,
                            temperature,
                            ignore_eos,
                            h_prompt,
                            seed,
                            top_p=top_p,
                            prompt_tokens=prompt_toks,
                            stream=stream,
                        ),
                        n_in,
                    )
                )
        except BadRequest as e:
            return _error_native(str(e), 400)
        except (TypeError, ValueError) as e:
            return _error_native(f"Invalid sampling_params: {e}", 400)

        if not stream:
            await asyncio.gather(*(self._run_to_end(r) for (r, _h), _n in reqs))
            out = []
            for (r, h), n_in in reqs:
                comp = 0 if r.user == 0 else r.generated
                out.append(
                    {
                        "text": tokens.text_range(h, 0, comp, self.text_fault),
                        "output_ids": tokens.ids_range(h, 0, comp, self.text_fault),
                        "meta_info": self._meta(r, n_in, comp, True),
                    }
                )
            batched = isinstance(text, list) or (text is None and isinstance(ids[0] if ids else None, list))
            return web.json_response(out if batched else out[0], dumps=_dumps)

        (req, h), n_in = reqs[0]
        pieces: list[str] = []

        def on_tokens(sent: int, g: int, done: bool) -> list[bytes]:
            comp = 0 if req.user == 0 else g
            if comp > sent:
                pieces.append(tokens.text_range(h, sent, comp, self.text_fault))
            frame = {"text": "".join(pieces), "meta_info": self._meta(req, n_in, comp, done), "index": 0}
            frames = [b"data: " + _dumps(frame).encode() + b"\n\n"]
            if done:
                frames.append(b"data: [DONE]\n\n")
            return frames

        return await self._stream(request, req, on_tokens)

    # OpenAI ---------------------------------------------------------------------------------------
    def _openai_common(self, body: dict[str, Any]) -> tuple[int | None, float, float, bool, int | None, dict[str, Any]]:
        max_new = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_new is not None:
            max_new = int(max_new)
        temperature = body.get("temperature")
        temperature = 1.0 if temperature is None else float(temperature)
        top_p = body.get("top_p")
        top_p = 1.0 if top_p is None else float(top_p)
        ignore_eos = bool(body.get("ignore_eos", False))
        seed = body.get("seed")
        opts = body.get("stream_options") or {}
        if not isinstance(opts, dict):
            raise BadRequest("stream_options must be an object")
        if body.get("n", 1) not in (1, None):
            raise BadRequest("The emulator supports n=1 only.")
        return max_new, temperature, top_p, ignore_eos, seed, opts

    def _usage(self, prompt_tokens: int, completion: int) -> dict[str, Any]:
        return {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion,
            "completion_tokens": completion,
            "prompt_tokens_details": None,
            "reasoning_tokens": 0,
        }

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._openai(request, chat=False)

    async def _openai(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error_openai("Invalid JSON body")
        if not isinstance(body, dict):
            return _error_openai("Request body must be a JSON object")
        try:
            if chat:
                rendered, n_in = tokens.render_chat(body.get("messages"))
                h_prompt = tokens.prompt_hash(rendered)
                prompt_toks: list[Any] = rendered.split()
            else:
                prompt = body.get("prompt")
                if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                    prompt = prompt[0]
                if isinstance(prompt, str):
                    prompt_toks = prompt.split()
                    n_in, h_prompt = len(prompt_toks), tokens.prompt_hash(prompt)
                elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
                    prompt_toks = prompt
                    n_in, h_prompt = len(prompt), tokens.ids_hash(prompt)
                else:
                    raise BadRequest("prompt must be a string or a list of token ids (batches are not emulated)")
            max_new, temperature, top_p, ignore_eos, seed, opts = self._openai_common(body)
            rid = uuid.uuid4().hex
            req, h = self._make_request(
                rid,
                max(1, n_in),
                max_new,
                temperature,
                ignore_eos,
                h_prompt,
                seed,
                top_p=top_p,
                prompt_tokens=prompt_toks,
                stream=bool(body.get("stream")),
            )
        except BadRequest as e:
            return _error_openai(str(e))
        except (TypeError, ValueError) as e:
            return _error_openai(f"Invalid request: {e}")
        created = int(time.time())
        model_name = body.get("model") or self.served_name
        zero = req.user == 0

        if not body.get("stream"):
            await self._run_to_end(req)
            comp = 0 if zero else req.generated
            text = tokens.text_range(h, 0, comp, self.text_fault)
            finish = "stop" if req.finish_reason == "stop" else "length"
            matched = self.p.eos_token_id if finish == "stop" else None
            if chat:
                choice = {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None},
                    "logprobs": None,
                    "finish_reason": finish,
                    "matched_stop": matched,
                }
                obj = "chat.completion"
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "matched_stop": matched}
                obj = "text_completion"
            out = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model_name,
                "choices": [choice],
                "usage": self._usage(n_in, comp),
                "metadata": {"weight_version": self.cfg.values["weight_version"]},
            }
            return web.json_response(out, dumps=_dumps)

        include_usage = bool(opts.get("include_usage"))
        continuous = bool(opts.get("continuous_usage_stats"))
        obj = "chat.completion.chunk" if chat else "text_completion"

        def frame(choice: dict[str, Any] | None, usage: dict[str, Any] | None) -> bytes:
            d = {
                "id": rid,
                "object": obj,
                "created": created,
                "model": model_name,
                "choices": [choice] if choice is not None else [],
                "usage": usage,
            }
            return b"data: " + _dumps(d).encode() + b"\n\n"

        head = []
        if chat:
            head.append(
                frame(
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                        "matched_stop": None,
                    },
                    self._usage(n_in, 0) if continuous else None,
                )
            )

        def on_tokens(sent: int, g: int, done: bool) -> list[bytes]:
            comp = 0 if zero else g
            frames = []
            if comp > sent:
                piece = tokens.text_range(h, sent, comp, self.text_fault)
                if chat:
                    choice = {
                        "index": 0,
                        "delta": {"content": piece},
                        "logprobs": None,
                        "finish_reason": None,
                        "matched_stop": None,
                    }
                else:
                    choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": None, "matched_stop": None}
                frames.append(frame(choice, self._usage(n_in, comp) if continuous else None))
            if done:
                finish = "stop" if req.finish_reason == "stop" else "length"
                matched = self.p.eos_token_id if finish == "stop" else None
                if chat:
                    choice = {
                        "index": 0,
                        "delta": {},
                        "logprobs": None,
                        "finish_reason": finish,
                        "matched_stop": matched,
                    }
                else:
                    choice = {
                        "index": 0,
                        "text": "",
                        "logprobs": None,
                        "finish_reason": finish,
                        "matched_stop": matched,
                    }
                frames.append(frame(choice, self._usage(n_in, comp) if continuous else None))
                if include_usage:
                    frames.append(frame(None, self._usage(n_in, comp)))
                frames.append(b"data: [DONE]\n\n")
            return frames

        return await self._stream(request, req, on_tokens, head=head)


def _env_true(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")
