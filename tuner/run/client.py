"""The asynchronous streaming benchmark client (aiohttp).

One shared `ClientSession` per benchmark (as vLLM's `bench serve` does, docs/reference/peer-tools.md §1.2), a
closed loop per level (C workers; each sends its next request when the previous one has ended),
and a trace per request (send time, arrival time and token count of every chunk, the server's
final counts) that tuner/measure/metrics.py turns into numbers.

Endpoints (docs/reference/sglang.md §3.3):
- `generate` (default): SGLang's native `/generate`. Every chunk's `meta_info.completion_tokens`
  is cumulative, so the tokens of each chunk are known exactly, and the final chunk carries
  `spec_verify_ct`, which gives the level's own acceptance length.
- `chat` / `completions`: the OpenAI endpoints with `stream_options.include_usage` (and
  `continuous_usage_stats`, which SGLang honours, for per-chunk counts).

A request is failed when the server answers an HTTP error, the stream breaks or ends without
its final chunk / `[DONE]`, the server never states its token count, or, under `ignore_eos`,
fewer tokens arrive than were asked for: a cut stream must never pass as a short answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from sglang_utils.sglang_server_info import SERVER_INFO_PATHS, parse_models, parse_server_info  # the one parser
from sglang_utils.sglang_verify import accept_histogram  # one reader of the finished chunk's histogram

from ..measure.metrics import RequestTrace, parse_prometheus_counters, parse_prometheus_gauges
from ..spec.workload import PromptSource

USER_AGENT = "sglang-tune-bench/0.1"
# How long a /health probe after a failed request may take before the server counts as gone: SGLang's
# /health runs a one-token generation by default and answers once any scheduler output arrives, after
# a 1 s sleep, within HEALTH_CHECK_TIMEOUT, 20 s (0.5.9 and 0.5.23 srt/entrypoints/http_server.py
# health_generate; srt/environ.py SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION on): a busy server between
# outputs for a few seconds is still there. A refused connection does not wait for it.
GONE_PROBE_S = 25.0


@dataclass
class ClientOptions:
    url: str
    endpoint: str = "generate"
    input_len: int = 256
    output_len: int = 256
    temperature: float = 0.0
    ignore_eos: bool = True
    api_key: str | None = None
    model: str | None = None  # OpenAI endpoints: the served model name
    request_timeout: float = 600.0
    seed: int = 0
    input_ids: bool = True  # /generate: send token ids (exact length on real SGLang)
    top_p: float = 1.0  # sent with temperature > 0
    source: PromptSource | None = None  # the prompts (default: synthetic, from the lengths and seed)

    def prompts(self) -> PromptSource:
        if self.source is None:
            self.source = PromptSource(
                input_len=self.input_len, output_len=self.output_len, seed=self.seed, input_ids=self.input_ids
            )
        return self.source

    def headers(self) -> dict[str, str]:
        h = {"User-Agent": USER_AGENT}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


class ServerError(RuntimeError):
    pass


def auth_hint(status: int, key_sent: bool) -> str:
    """What to do about an answer that refuses the request's key (SGLang answers 401 to a missing
    or wrong `Authorization: Bearer` key, sglang/srt/utils `add_api_key_middleware`), or "" for
    any other status. The role may take the server's key from the inventory (Ansible Vault) while
    the client reads it from the controller's environment only (docs/tuner.md "The API key"), so
    the two can differ."""
    if status not in (401, 403):
        return ""
    if key_sent:
        return (
            " (the server refused the API key sent: SGLANG_API_KEY, else OPENAI_API_KEY, must be the key the"
            " server runs with, the role's sglang_server_api_key)"
        )
    return (
        " (the server wants an API key: export SGLANG_API_KEY with the key it runs with, the role's"
        " sglang_server_api_key)"
    )


class BenchClient:
    """A session against one server; use as `async with BenchClient(opts) as c:`."""

    def __init__(self, opts: ClientOptions):
        self.opts = opts
        self.base = opts.url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None
        self._next_index = 0
        self.running: dict[int, RequestTrace] = {}  # requests streaming now (the precision loop reads them)
        self._health_check: asyncio.Task[bool] | None = None
        self.gone_probe_s = GONE_PROBE_S

    async def __aenter__(self) -> BenchClient:
        # No connection limit: the level's workers are the limit. Keep-alive connections are
        # reused across requests, as a load generator should (vLLM bench serve does the same).
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers=self.opts.headers(),
            read_bufsize=1 << 22,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            trace_configs=[_sent_clock()],
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("BenchClient used outside `async with`")
        return self._session

    # -- server metadata ----------------------------------------------------------------------
    async def _get_json(self, path: str, timeout: float = 30.0) -> Any:
        async with self.session.get(self.base + path, timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            if r.status != 200:
                raise ServerError(f"GET {path}: HTTP {r.status}{auth_hint(r.status, bool(self.opts.api_key))}")
            return await r.json(content_type=None)

    async def server_info(self) -> dict[str, Any]:
        """The raw `/server_info` body (falling back to `/get_server_info`, docs/reference/sglang.md §3)."""
        last: Exception | None = None
        for path in SERVER_INFO_PATHS:
            try:
                body: dict[str, Any] = await self._get_json(path)
                return body
            except (TimeoutError, ServerError, aiohttp.ClientError, ValueError) as exc:
                last = exc
        raise ServerError(f"no server info: {last}")

    async def parsed_server_info(self) -> dict[str, Any]:
        return parse_server_info(await self.server_info())

    async def served_model_name(self) -> str | None:
        try:
            return parse_models(await self._get_json("/v1/models")).get("served_model_name")
        except (TimeoutError, ServerError, aiohttp.ClientError, ValueError):
            return None

    async def health(self, timeout: float = 10.0) -> bool:
        try:
            async with self.session.get(self.base + "/health", timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                return r.status == 200
        except (TimeoutError, aiohttp.ClientError):
            return False

    async def counters(self) -> dict[str, float] | None:
        """Prometheus counters for the acceptance fallback; None when /metrics is off."""
        try:
            async with self.session.get(self.base + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
                if r.status != 200:
                    return None
                return parse_prometheus_counters(await r.text())
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
            return None

    async def running_samples(self, stop: asyncio.Event, every_s: float = 0.5) -> list[tuple[float, float]]:
        """(time, value) samples of the server's running-request gauge until `stop` is set (empty
        when /metrics is off or does not carry it). One scrape at a time, so the sampling never
        queues up. The time is when the scrape went out, not when its answer came: a scrape sent
        before a level's first token reads the gauge the previous level left, however late it
        returns (tuner/measure/metrics.py `running_batch` keeps only the level's own)."""
        out: list[tuple[float, float]] = []
        while not stop.is_set():
            sent = time.perf_counter()
            try:
                async with self.session.get(self.base + "/metrics", timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status != 200:
                        return out
                    value = parse_prometheus_gauges(await r.text()).get("num_running_reqs")
            except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError):
                value = None
            if value is not None:
                out.append((sent, value))
            try:
                await asyncio.wait_for(stop.wait(), every_s)
            except TimeoutError:
                pass
        return out

    # -- one request ----------------------------------------------------------------------------
    def _body(self, index: int, max_tokens: int) -> tuple[str, dict[str, Any]]:
        o = self.opts
        req = o.prompts().request(index, o.endpoint, max_tokens)
        sample: dict[str, Any] = {"temperature": o.temperature}
        if o.temperature > 0 and o.top_p < 1.0:
            sample["top_p"] = o.top_p
        if o.endpoint == "generate":
            sampling: dict[str, Any] = {"max_new_tokens": max_tokens, **sample, "ignore_eos": o.ignore_eos}
            body: dict[str, Any] = {"sampling_params": sampling, "stream": True}
            if req.input_ids is not None:
                body["input_ids"] = req.input_ids
            else:
                body["text"] = req.text
            return "/generate", body
        common: dict[str, Any] = {
            "max_tokens": max_tokens,
            **sample,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "ignore_eos": o.ignore_eos,
        }
        if o.model:
            common["model"] = o.model
        if o.endpoint == "chat":
            return "/v1/chat/completions", {"messages": req.messages, **common}
        return "/v1/completions", {"prompt": req.text, **common}

    async def request(self, index: int, max_tokens: int | None = None) -> RequestTrace:
        """Send one streaming request and record what arrives; never raises for server faults."""
        max_tokens = self.opts.prompts().max_tokens(index) if max_tokens is None else max_tokens
        path, body = self._body(index, max_tokens)
        payload = json.dumps(body).encode()
        trace = RequestTrace(index=index, sent=time.perf_counter())
        trace.issued = trace.sent
        self.running[id(trace)] = trace
        try:
            async with asyncio.timeout(self.opts.request_timeout):
                async with self.session.post(
                    self.base + path,
                    data=payload,
                    headers={"Content-Type": "application/json"},
                    trace_request_ctx=trace,
                ) as resp:
                    if resp.status != 200:
                        text = (await resp.text(errors="replace"))[:200].replace("\n", " ")
                        trace.error = f"HTTP {resp.status}: {text}{auth_hint(resp.status, bool(self.opts.api_key))}"
                    elif self.opts.endpoint == "generate":
                        await self._read_generate(resp, trace)
                    else:
                        await self._read_openai(resp, trace)
        except TimeoutError:
            trace.error = f"timeout after {self.opts.request_timeout:g} s"
        except (aiohttp.ClientError, ConnectionError) as exc:
            trace.error = f"{type(exc).__name__}: {exc}"[:200]
        except ValueError as exc:  # a chunk that is not JSON, or a line beyond the buffer
            trace.error = f"bad stream chunk: {exc}"[:200]
        finally:
            self.running.pop(id(trace), None)
        trace.ended = time.perf_counter()
        if trace.error is None:
            trace.error = self._check_complete(trace, max_tokens)
        return trace

    def _check_complete(self, t: RequestTrace, max_tokens: int) -> str | None:
        if t.output_tokens is None:
            return "no output token count from the server"
        if not t.chunk_times:
            return "no token arrived"
        if self.opts.ignore_eos and t.output_tokens < max_tokens:
            return f"short stream: {t.output_tokens} of {max_tokens} tokens under ignore_eos"
        return None

    async def _read_generate(self, resp: aiohttp.ClientResponse, t: RequestTrace) -> None:
        seen = 0
        finished = done = False
        meta: dict[str, Any] = {}
        async for now, chunk in _sse_chunks(resp):
            if chunk is None:
                done = True
                break
            if "error" in chunk:
                t.error = f"server error: {str(chunk['error'])[:160]}"
                return
            meta = chunk.get("meta_info") or {}
            ct = meta.get("completion_tokens")
            if isinstance(ct, int) and ct > seen:
                t.chunk_times.append(now)
                t.chunk_tokens.append(ct - seen)
                seen = ct
            if isinstance(meta.get("prompt_tokens"), int):
                t.prompt_tokens = meta["prompt_tokens"]
            if meta.get("finish_reason") is not None:
                finished = True
                fr = meta["finish_reason"]
                t.finish_reason = fr.get("type") if isinstance(fr, dict) else str(fr)
                if fr and isinstance(fr, dict) and fr.get("type") == "abort":
                    t.error = f"aborted by the server: {str(fr.get('message'))[:160]}"
                    return
                v = meta.get("spec_verify_ct")
                t.spec_verify_ct = v if isinstance(v, int) and v > 0 else None
                t.accept_hist = accept_histogram(meta)
                e2e = meta.get("e2e_latency")
                t.server_e2e_s = float(e2e) if isinstance(e2e, (int, float)) else None
        if not (finished and done):
            t.error = "stream cut: " + ("no final chunk" if not finished else "no [DONE]")
            return
        t.stream_tokens = sum(c or 0 for c in t.chunk_tokens)
        final = meta.get("completion_tokens")
        t.output_tokens = final if isinstance(final, int) and final >= seen else seen

    async def _read_openai(self, resp: aiohttp.ClientResponse, t: RequestTrace) -> None:
        seen = 0  # cumulative completion tokens from continuous usage, when given
        usage_total: int | None = None
        finished = done = False
        # SGLang sends a content chunk only for a step with text (serving_chat.py `if delta:`): the
        # stop token's step (its text cut by the detokenizer, its token counted) arrives as the
        # finish chunk, `delta: {}`, and the first step, when a reasoning parser keeps its text
        # back, as the role chunk alone; both arrival times are kept to time those steps
        role_at: float | None = None
        finish_at: float | None = None
        async for now, chunk in _sse_chunks(resp):
            if chunk is None:
                done = True
                break
            if "error" in chunk:
                t.error = f"server error: {str(chunk['error'])[:160]}"
                return
            usage = chunk.get("usage") or {}
            choices = chunk.get("choices") or []
            has_text = False
            for ch in choices:
                delta = ch.get("delta") if "delta" in ch else ch
                text = (
                    (delta or {}).get("content")
                    or (delta or {}).get("text")
                    or (delta or {}).get("reasoning_content")
                    or ""
                )
                has_text = has_text or bool(text)
                if role_at is None and not t.chunk_times and not text and (delta or {}).get("role"):
                    role_at = now
                if ch.get("finish_reason") is not None:
                    finished = True
                    finish_at = now
                    t.finish_reason = str(ch["finish_reason"])
                    if t.finish_reason == "abort":
                        # a graceful abort (no status code) goes out as a normal chunk in
                        # SGLang's serving_chat: the answer was cut, not finished
                        t.error = "aborted by the server (finish_reason abort)"
                        return
            ct = usage.get("completion_tokens")
            if isinstance(ct, int):
                usage_total = ct
            if isinstance(usage.get("prompt_tokens"), int):
                t.prompt_tokens = usage["prompt_tokens"]
            if has_text:
                if isinstance(ct, int) and ct >= seen and choices:
                    # the same count as the chunk before: the second chunk of one decode step (a
                    # reasoning parser sends the reasoning's end and the answer's start apart,
                    # serving_chat.py `_generate_stream_content`), 0 new tokens, not an unknown
                    t.chunk_times.append(now)
                    t.chunk_tokens.append(ct - seen)
                    seen = ct
                else:
                    t.chunk_times.append(now)
                    t.chunk_tokens.append(None)
            elif isinstance(ct, int) and ct > seen and choices:
                # tokens that decode to no text yet (partial UTF-8) still arrived now
                t.chunk_times.append(now)
                t.chunk_tokens.append(ct - seen)
                seen = ct
        if not (finished and done):
            t.error = "stream cut: " + ("no finish_reason" if not finished else "no [DONE]")
            return
        t.output_tokens = usage_total
        counted = all(c is not None for c in t.chunk_tokens)  # per-chunk counts (continuous usage)
        if t.chunk_tokens and counted:
            t.stream_tokens = sum(c or 0 for c in t.chunk_tokens)
        if usage_total is not None and counted:
            missing = usage_total - sum(c or 0 for c in t.chunk_tokens)
            if missing > 0 and finish_at is not None and (not t.chunk_times or finish_at > t.chunk_times[-1]):
                # the stop token's step: its finish chunk came after the last text (an answer of
                # the stop token alone has no text at all: one token, not "no token arrived")
                t.chunk_times.append(finish_at)
                t.chunk_tokens.append(missing)
                t.stream_tokens = (t.stream_tokens or 0) + missing  # a step the stream showed
            elif missing > 0 and t.chunk_tokens:  # the final usage-only chunk carries the last count
                t.chunk_tokens[-1] = (t.chunk_tokens[-1] or 0) + missing
        first = t.chunk_tokens[0] if t.chunk_tokens else None
        if role_at is not None and isinstance(first, int) and first > 1 and _a_step_apart(role_at, t.chunk_times):
            # the first token (prefill's, one) arrived with the role chunk, its text held back
            t.chunk_times.insert(0, role_at)
            t.chunk_tokens[0] = first - 1
            t.chunk_tokens.insert(0, 1)

    # -- levels ---------------------------------------------------------------------------------
    def take_indices(self, n: int) -> int:
        """Reserve n prompt indices; every request of a deployment gets a fresh prompt."""
        first = self._next_index
        self._next_index += n
        return first

    async def warmup(self, requests: int, concurrency: int, max_tokens: int = 16) -> list[RequestTrace]:
        """Short requests whose numbers are thrown away (JIT, CUDA graphs, connection set-up)."""
        if requests <= 0:
            return []
        return await self.run_level(concurrency, requests, max_tokens=max_tokens, first_index=-(10**6))

    async def run_level(
        self,
        concurrency: int,
        n_requests: int,
        *,
        max_tokens: int | None = None,
        first_index: int | None = None,
        on_done: Callable[[RequestTrace], Any] | None = None,
    ) -> list[RequestTrace]:
        """Closed loop: `concurrency` workers share exactly `n_requests` requests."""
        base = self.take_indices(n_requests) if first_index is None else first_index
        plan = LevelPlan(concurrency, n_requests, n_requests, first_index=base)
        run = await self.run_plan(plan, max_tokens=max_tokens, on_done=on_done)
        return run.traces

    async def server_gone(self) -> bool:
        """After a failed request: is the server still there? One /health probe at a time is
        shared by every worker that asks meanwhile. A refused connection says so at once; a busy
        server's answer may take SGLang's own health check, so the probe waits past it
        (GONE_PROBE_S) before it calls the server gone."""
        if self._health_check is None or self._health_check.done():
            self._health_check = asyncio.ensure_future(self.health(timeout=self.gone_probe_s))
        return not await asyncio.shield(self._health_check)

    async def run_plan(
        self,
        plan: LevelPlan,
        *,
        max_tokens: int | None = None,
        on_done: Callable[[RequestTrace], Any] | None = None,
    ) -> LevelRun:
        """Closed loop of `plan.concurrency` workers: at least `min_requests`, then, with a
        precision, more until the level's throughput interval is narrow enough or a cap is hit.

        A failed request whose server no longer answers /health ends the level at once
        (`lost`): requests to a server that is gone fail in microseconds and would otherwise
        use up the level's caps. The requests already in flight are finished, never cut.
        """
        from ..measure import stats
        from ..measure.metrics import level_windows

        run = LevelRun()
        issued = 0
        t0 = time.perf_counter()
        c = max(1, plan.concurrency)

        def precise_enough() -> bool:
            windows = level_windows(run.traces, c, list(self.running.values()))
            iv = stats.ratio_interval(windows)
            rel = None if iv is None else iv.rel_half_width
            return len(windows) >= MIN_WINDOWS and rel is not None and rel * 100.0 <= (plan.precision_pct or 0.0)

        def stop_sending() -> None:
            # The first worker to stop: from here on fewer than C requests run, and the level's
            # measured span (output_tok_s) ends.
            if run.until is None:
                run.until = time.perf_counter()

        async def worker() -> None:
            nonlocal issued
            while True:
                if run.stop_reason is not None:
                    return stop_sending()
                if issued >= plan.max_requests:
                    run.stop_reason = "fixed count" if plan.precision_pct is None else "request cap"
                    return stop_sending()
                if (
                    issued >= plan.min_requests
                    and plan.max_seconds is not None
                    and time.perf_counter() - t0 >= plan.max_seconds
                ):
                    run.stop_reason = "time cap"
                    return stop_sending()
                i = issued
                issued += 1
                t = await self.request(plan.first_index + i, max_tokens)
                run.traces.append(t)
                if on_done is not None:
                    on_done(t)
                if not t.ok and await self.server_gone():
                    run.lost = True
                    run.stop_reason = run.stop_reason or "server lost"
                    stop_sending()
                elif (
                    plan.precision_pct is not None
                    and run.stop_reason is None
                    and len(run.traces) >= plan.min_requests
                    and len(run.traces) % c == 0
                    and precise_enough()
                ):
                    run.stop_reason = "precision reached"
                    stop_sending()

        await asyncio.gather(*(worker() for _ in range(max(1, min(c, plan.max_requests)))))
        return run


MIN_WINDOWS = 3  # the precision loop's fewest windows (2 degrees of freedom) before it may stop


@dataclass
class LevelPlan:
    """How many requests a level sends (tuner/spec/sweepspec.py WorkloadSpec: the fixed count, or the
    precision loop's minimum, caps and target)."""

    concurrency: int
    min_requests: int
    max_requests: int
    max_seconds: float | None = None  # no new request after this many seconds (min_requests always go)
    precision_pct: float | None = None  # None: exactly min_requests == max_requests
    first_index: int = 0  # prompt index of the level's first request


@dataclass
class LevelRun:
    traces: list[RequestTrace] = field(default_factory=list)
    stop_reason: str | None = None  # precision reached | request cap | time cap | fixed count | server lost
    lost: bool = False  # the server stopped answering /health during the level
    until: float | None = None  # when the loop stopped sending (the end of the measured span)


def _sent_clock() -> aiohttp.TraceConfig:
    """Restart a request's clock when its headers go to the socket.

    TTFT and E2E are the server's (and the network's) latency: time the load generator's own event
    loop spends before the bytes leave (building the request, taking a pooled connection, or simply
    waiting for its turn while other streams are read) must not count. GuideLLM takes its
    `request_start` at the same point (httpx's `send_request_headers.started` trace); the
    difference is measured in bench/peer_clients.md against tcpdump timestamps."""

    async def on_headers_sent(
        _session: aiohttp.ClientSession, ctx: Any, _params: aiohttp.TraceRequestHeadersSentParams
    ) -> None:
        trace = getattr(ctx, "trace_request_ctx", None)
        if isinstance(trace, RequestTrace):
            trace.sent = time.perf_counter()

    cfg = aiohttp.TraceConfig()
    cfg.on_request_headers_sent.append(on_headers_sent)
    return cfg


async def with_ticker(coro: Awaitable[Any], tick: Callable[[], None], every_s: float) -> Any:
    """Run `coro`, calling `tick()` every `every_s` seconds while it runs (progress lines)."""
    task = asyncio.ensure_future(coro)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            tick()
    finally:
        if not task.done():
            task.cancel()


ROLE_GAP_FLOOR_S = 0.001  # below this, two chunks were written back to back, not a step apart


def _a_step_apart(role_at: float, chunk_times: list[float]) -> bool:
    """Whether the first content chunk came a decode step after the role chunk (the first step's
    text held back: a reasoning parser's lone `<think>`, a partial UTF-8 character), not with it.
    SGLang writes the role chunk and the first output's content back to back from one output
    (serving_chat.py `_generate_chat_stream`: the `is_firsts` role chunk, then that output's
    content), and one output may carry several tokens (tokenizer_manager drains the pending
    outputs at once): split there, those tokens would get inter-token samples of about 0 ms. A step
    apart is at least half the stream's median gap between content chunks (a millisecond when it
    has one content chunk only)."""
    gap = chunk_times[0] - role_at
    steps = sorted(b - a for a, b in zip(chunk_times, chunk_times[1:], strict=False))
    typical = steps[len(steps) // 2] / 2 if steps else 0.0
    return gap > max(typical, ROLE_GAP_FLOOR_S)


async def _sse_chunks(resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[float, dict[str, Any] | None]]:
    """(arrival time, JSON chunk) for each `data:` line of a server-sent-event stream; the chunk is
    None for `data: [DONE]`. The arrival time is taken before parsing, so JSON work never counts
    as server latency."""
    async for raw in resp.content:
        now = time.perf_counter()
        if not raw.startswith(b"data:"):
            continue
        data = raw[5:].strip()
        if data == b"[DONE]":
            yield now, None
            continue
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            # valid JSON but no chunk (null, a number): a server error of one request, not the level's
            raise ValueError(f"a stream chunk that is not a JSON object: {data[:80]!r}")
        yield now, chunk
