"""The streaming client against a real emulator process on loopback (tuner/run/client.py)."""

from __future__ import annotations

import asyncio

import pytest
from tuner_testlib import emulator, free_port

from tuner.measure.metrics import itl_samples_s, level_metrics
from tuner.run.client import BenchClient, ClientOptions, ServerError


def run(coro):
    return asyncio.run(coro)


async def _level(url, c=4, n=8, **kw):
    async with BenchClient(
        ClientOptions(url=url, input_len=kw.pop("input_len", 32), output_len=kw.pop("output_len", 48), **kw)
    ) as cl:
        before = await cl.counters()
        traces = await cl.run_level(c, n)
        after = await cl.counters()
        from tuner.measure.metrics import counter_delta

        return traces, level_metrics(c, traces, counter_delta(before, after))


def test_generate_stream_counts_tokens_from_the_server(emu_url):
    traces, m = run(_level(emu_url))
    assert m.requests_ok == 8 and m.requests_failed == 0 and m.status == "ok"
    for t in traces:
        assert t.output_tokens == 48 == sum(t.chunk_tokens)
        assert t.prompt_tokens == 32  # input_ids: exactly input_len tokens
        assert t.spec_verify_ct and t.spec_verify_ct < 48
        # the acceptance histogram: one entry per verify step, 0 .. steps drafts accepted
        assert t.accept_hist is not None and len(t.accept_hist) == 4
        assert sum(t.accept_hist) == t.spec_verify_ct
    assert m.accept_hist == [sum(col) for col in zip(*(t.accept_hist for t in traces), strict=True)]
    # speculation sends several tokens per chunk
    assert max(n for t in traces for n in t.chunk_tokens) > 1
    assert m.accept_length_source == "meta_info"
    assert 1.0 < m.accept_length <= 4.0  # steps 3: at most 4 tokens per verify
    assert m.output_tokens == 8 * 48
    assert m.output_tok_s > 0 and m.per_request_tok_s > m.output_tok_s / 4 * 0.5
    assert m.ttft_ms_p50 > 0 and m.itl_ms_p50 > 0 and m.tpot_ms_p50 > 0


def test_acceptance_histogram_is_read_under_either_name_and_a_bad_one_is_ignored():
    # the client and the correctness gate read it with the one function (plugins/module_utils/sglang_verify.py)
    from sglang_utils.sglang_verify import accept_histogram as _histogram

    assert _histogram({"spec_accept_histogram": [3, 2, 1]}) == [3, 2, 1]  # through 0.5.20
    assert _histogram({"spec_correct_drafts_histogram": [1, 4]}) == [1, 4]  # 0.5.12 on (alone from 0.5.21)
    assert _histogram({"spec_accept_histogram": [1, -1]}) is None
    assert _histogram({"spec_accept_histogram": []}) is None and _histogram({}) is None


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_openai_endpoints(emu_url, endpoint):
    traces, m = run(_level(emu_url, c=2, n=4, endpoint=endpoint, model="qwen3.5-122b"))
    assert m.requests_ok == 4, m.errors
    for t in traces:
        assert t.output_tokens == 48
        assert sum(c or 0 for c in t.chunk_tokens) == 48  # continuous usage stats per chunk
    # no spec_verify_ct on OpenAI endpoints, and SGLang 0.5.9's /metrics has no per-call verify
    # counter (0.5.23 adds sglang:spec_verify_calls_total): tokens per chunk are used
    assert m.accept_length_source == "chunks"
    assert 1.0 < m.accept_length <= 4.0


def test_openai_endpoint_uses_the_verify_counter_where_sglang_has_one():
    with emulator("--emulator-sglang-version", "0.5.23") as url:
        _, m = run(_level(url, c=2, n=4, endpoint="completions", model="qwen3.5-122b"))
    assert m.accept_length_source == "metrics"
    assert 1.0 < m.accept_length <= 4.0


def test_text_prompt_length_in_words(emu_url):
    traces, _ = run(_level(emu_url, c=1, n=1, input_ids=False, input_len=77))
    assert traces[0].prompt_tokens == 77


def test_api_key_is_sent_and_enforced():
    with emulator("--api-key", "sk-client-test-999") as url:
        _, bad = run(_level(url, c=2, n=2))
        assert bad.requests_failed == 2 and "HTTP 401" in next(iter(bad.errors))
        # the refusal says what to do: the role may hold the key in the inventory while the
        # client reads the controller's environment only
        assert "export SGLANG_API_KEY" in next(iter(bad.errors))
        _, wrong = run(_level(url, c=2, n=2, api_key="sk-not-the-servers"))
        assert "refused the API key sent" in next(iter(wrong.errors))

        async def info(key: str | None) -> str:
            async with BenchClient(ClientOptions(url=url, api_key=key)) as cl:
                with pytest.raises(ServerError) as exc:
                    await cl.server_info()
            return str(exc.value)

        assert "HTTP 401" in run(info(None)) and "export SGLANG_API_KEY" in run(info(None))
        _, good = run(_level(url, c=2, n=2, api_key="sk-client-test-999"))
        assert good.requests_ok == 2


def test_cut_streams_and_http_errors_are_failures():
    with emulator("--emulator-fault", "cut-stream=0.5", "--emulator-fault", "http-5xx=0.3") as url:
        traces, m = run(_level(url, c=4, n=24))
    errors = " ".join(m.errors)
    assert m.requests_failed > 0 and m.requests_ok > 0 and m.status == "partial"
    assert "stream cut" in errors or "ClientPayloadError" in errors or "Server disconnected" in errors
    assert "HTTP 50" in errors
    # the aggregate counts the successful requests' tokens only
    assert m.output_tokens == 48 * m.requests_ok


def test_short_stream_without_ignore_eos_is_not_a_failure(emu_url):
    _, m = run(_level(emu_url, c=2, n=4, ignore_eos=False, temperature=0.7, output_len=400))
    assert m.requests_failed == 0


def test_server_info_through_the_shared_parser(emu_url):
    async def go():
        async with BenchClient(ClientOptions(url=emu_url)) as cl:
            return await cl.parsed_server_info(), await cl.served_model_name(), await cl.health()

    info, name, healthy = run(go())
    assert info["speculative"]["num_steps"] == 3 and info["speculative"]["num_draft_tokens"] == 4
    assert info["max_total_num_tokens"] > 0 and info["max_running_requests"] > 0
    assert name == "qwen3.5-122b" and healthy


def test_unreachable_server_fails_fast():
    _, m = run(_level(f"http://127.0.0.1:{free_port()}", c=2, n=2))
    assert m.requests_failed == 2 and m.status == "failed"


class _ChatFake:
    """A streaming /v1/chat/completions in-process, counting requests in flight; `abort` cuts each
    answer halfway with finish_reason "abort" (SGLang's serving_chat sends a graceful abort that way)."""

    def __init__(self, abort: bool = False, reasoning: bool = False) -> None:
        self.abort = abort
        # with a reasoning parser, the step where `</think>` falls sends the reasoning's end and
        # the answer's start as two chunks with one usage count (serving_chat.py
        # `_generate_stream_content`)
        self.reasoning = reasoning
        self.inflight = self.max_inflight = 0

    async def chat(self, request):
        import json

        from aiohttp import web

        body = await request.json()
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            n = int(body["max_tokens"])
            stop = n // 2 if self.abort else n

            async def frame(choice, ct):
                data = {"choices": [choice] if choice else [], "usage": {"prompt_tokens": 4, "completion_tokens": ct}}
                await resp.write(b"data: " + json.dumps(data).encode() + b"\n\n")

            ct = 0
            while ct < stop:
                await asyncio.sleep(0.003)
                ct = min(stop, ct + 2)
                if self.reasoning and ct <= n // 2:
                    await frame({"index": 0, "delta": {"reasoning_content": "ab"}, "finish_reason": None}, ct)
                    if ct + 2 > n // 2:
                        await frame({"index": 0, "delta": {"content": "c"}, "finish_reason": None}, ct)
                    continue
                await frame({"index": 0, "delta": {"content": "ab"}, "finish_reason": None}, ct)
            await frame({"index": 0, "delta": {}, "finish_reason": "abort" if self.abort else "length"}, ct)
            await frame(None, ct)
            await resp.write(b"data: [DONE]\n\n")
            return resp
        finally:
            self.inflight -= 1


class _EosChatFake:
    """SGLang's /v1/chat/completions for an answer that ends at the stop token, one token a step:
    a content chunk (with continuous usage) for each step with text, none for the stop token's
    step (the detokenizer cuts its text, serving_chat.py sends a content chunk only `if delta:`),
    then the finish chunk with `delta: {}` and no usage, then the usage chunk that counts the stop
    token. `think`: a reasoning parser held the first step's text back: the role chunk alone.
    `first`: the tokens of the first output (one output may carry several: tokenizer_manager
    drains the pending outputs at once), its content chunk right after the role chunk."""

    def __init__(self, tokens: int, think: bool = False, first: int = 1) -> None:
        self.tokens, self.think, self.first = tokens, think, first

    async def chat(self, request):
        import json

        from aiohttp import web

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(data):
            await resp.write(b"data: " + json.dumps(data).encode() + b"\n\n")

        usage = lambda ct: {"prompt_tokens": 4, "completion_tokens": ct + self.first - 1}  # noqa: E731
        for step in range(1, self.tokens + 1):
            await asyncio.sleep(0.01)
            if step == 1:
                await send({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": None})
            if step == self.tokens or (step == 1 and self.think):
                continue  # the stop token's step, or a held-back first step: no content chunk
            await send(
                {"choices": [{"index": 0, "delta": {"content": "w"}, "finish_reason": None}], "usage": usage(step)}
            )
        await send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": None})
        await send({"choices": [], "usage": usage(self.tokens)})
        await resp.write(b"data: [DONE]\n\n")
        return resp


async def _with_fake(fake: _ChatFake | _EosChatFake, body, **options):
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.chat)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        opts = ClientOptions(url=f"http://127.0.0.1:{port}", endpoint="chat", output_len=16, model="m", **options)
        async with BenchClient(opts) as client:
            return await body(client)
    finally:
        await runner.cleanup()


def test_a_step_split_into_reasoning_and_answer_keeps_the_stream_token_count():
    """The second of two chunks one decode step sends (the reasoning's end, then the answer's
    start, one usage count) carries no new token: counted as 0, the stream's tokens still add up
    to the server's count and the level keeps the client-vs-server cross-check (an unknown count
    there dropped it for the whole level)."""
    fake = _ChatFake(reasoning=True)
    t = run(_with_fake(fake, lambda client: client.request(0)))
    assert t.ok and t.output_tokens == 16
    assert 0 in t.chunk_tokens and None not in t.chunk_tokens
    assert t.stream_tokens == 16
    m = level_metrics(1, [t])
    assert m.stream_tokens == 16


def test_a_chat_answer_that_ends_at_the_stop_token_times_its_last_step():
    """The stop token's step sends no content chunk, only the finish chunk: it was never timed
    (the last text's time took its token: end to end one step short, TPOT low, and a server
    without speculation read as accepting 1.07 tokens a step); an answer of the stop token alone
    had no chunk at all and failed as "no token arrived"."""
    t = run(_with_fake(_EosChatFake(16), lambda client: client.request(0), ignore_eos=False))
    assert t.ok and t.output_tokens == 16 and t.stream_tokens == 16
    assert t.chunk_tokens == [1] * 16
    steps = [b - a for a, b in zip(t.chunk_times, t.chunk_times[1:], strict=False)]
    assert min(steps) > 0.005, steps  # the last step is a step, not the last text's time again
    assert level_metrics(1, [t]).accept_length == pytest.approx(1.0)
    alone = run(_with_fake(_EosChatFake(1), lambda client: client.request(0), ignore_eos=False))
    assert alone.ok and alone.output_tokens == 1 and alone.chunk_tokens == [1], alone.error


def test_a_first_step_without_text_is_timed_at_the_role_chunk():
    """A reasoning parser holds the first step's text back (a lone `<think>`): SGLang sends the
    role chunk then, and the next content chunk counts two tokens. The first token is timed at the
    role chunk (TTFT), not a step late."""
    t = run(_with_fake(_EosChatFake(8, think=True), lambda client: client.request(0), ignore_eos=False))
    assert t.ok and t.output_tokens == 8
    assert t.chunk_tokens == [1] * 8, t.chunk_tokens
    assert level_metrics(1, [t]).accept_length == pytest.approx(1.0)


def test_a_first_output_of_several_tokens_with_its_role_chunk_gets_no_inter_token_samples():
    """The role chunk and the first output's content go out back to back (serving_chat.py); an
    output of three tokens there is the first chunk's three tokens, which come with TTFT and get
    no inter-token sample (split at the role chunk, two of them got samples of about 0 ms)."""
    t = run(_with_fake(_EosChatFake(8, first=3), lambda client: client.request(0), ignore_eos=False))
    assert t.ok and t.output_tokens == 10
    assert t.chunk_tokens == [3] + [1] * 7, t.chunk_tokens
    samples = itl_samples_s(t)
    assert len(samples) == 7 and min(samples) > 0.005, samples


def test_an_answer_the_server_aborted_is_a_failed_request_not_a_short_one():
    fake = _ChatFake(abort=True)
    t = run(_with_fake(fake, lambda client: client.request(0)))
    assert t.finish_reason == "abort" and not t.ok and "aborted" in (t.error or "")


def test_a_fixed_count_below_the_concurrency_still_holds_the_concurrency_in_flight():
    """--requests-per-level 8 at concurrency 16: the level is recorded at 16, so it must run 16."""
    from tuner.run.levels import level_plan
    from tuner.spec.sweepspec import WorkloadSpec

    fake = _ChatFake()
    w = WorkloadSpec(concurrency=(16,), requests_per_level=8, output_len=16)
    run(_with_fake(fake, lambda client: client.run_plan(level_plan(w, 16, 0))))
    assert fake.max_inflight == 16


def test_a_confirmation_start_sends_its_level_the_prompts_of_every_other_deployment(monkeypatch):
    """A redeploy measuring one level in doubt (`only`) gives that level the prompts it had on the
    first deployment: the i-th request of a level gets the same prompt everywhere."""
    from tuner.data.store import MemoryStore
    from tuner.run.levels import Progress, run_levels
    from tuner.spec.configs import SpecConfig
    from tuner.spec.sweepspec import WorkloadSpec

    sent: dict[int, list[int]] = {}
    original = BenchClient.request

    async def spy(self, index, max_tokens=None):
        if index >= 0:  # warm-up requests have negative indices
            sent.setdefault(deployment, []).append(index)
        return await original(self, index, max_tokens)

    monkeypatch.setattr(BenchClient, "request", spy)
    w = WorkloadSpec(concurrency=(1, 4, 16), requests_per_level="2x", output_len=16, input_len=8, warmup_requests=0)
    cfg = SpecConfig(3, 1, None, "NEXTN")

    async def measure(client, only, dep):
        log, progress = MemoryStore(), Progress(quiet=True)
        return await run_levels(
            client, w, config=cfg, host="h", done=set(), log=log, progress=progress, deployment=dep, only=only
        )

    deployment = 1
    run(_with_fake(_ChatFake(), lambda client: measure(client, None, 1)))  # every level
    deployment = 2
    run(_with_fake(_ChatFake(), lambda client: measure(client, (16,), 2)))  # the one in doubt
    at16 = sorted(i for i in sent[1] if 2_000_000 <= i < 3_000_000)  # C=16 is the third level
    assert at16 and sorted(sent[2]) == at16, sent


def test_a_slow_health_answer_after_a_failed_request_is_not_a_lost_server():
    """SGLang's /health runs a generation and may take up to its 20 s HEALTH_CHECK_TIMEOUT on a busy
    server (http_server.py health_generate): a failed request (a prompt over the context, a full
    queue) followed by a slow /health is not "server lost", which re-measured the level and, twice,
    failed the configuration. The probe's wait is scaled down here (`gone_probe_s`): a 200 inside it
    keeps the level, one past it, and a refused connection, end it."""
    from aiohttp import web

    from tuner.run import client as client_module
    from tuner.run.client import LevelPlan

    assert client_module.GONE_PROBE_S > 21.0  # past SGLang's 1 s sleep and 20 s wait

    async def scenario(health_delay: float | None) -> tuple[bool, str | None, int]:
        async def generate(request):
            return web.json_response({"error": {"message": "too long"}}, status=400)

        async def health(request):
            assert health_delay is not None
            await asyncio.sleep(health_delay)
            return web.Response(text="")

        app = web.Application()
        app.router.add_post("/generate", generate)
        app.router.add_get("/health", health)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        if health_delay is None:
            await runner.cleanup()  # nothing listens: refused
        try:
            async with BenchClient(ClientOptions(url=f"http://127.0.0.1:{port}", input_len=4, output_len=4)) as cl:
                cl.gone_probe_s = 1.0
                r = await cl.run_plan(LevelPlan(2, 4, 4))
                return r.lost, r.stop_reason, len(r.traces)
        finally:
            if health_delay is not None:
                await runner.cleanup()

    lost, _, n = run(scenario(0.3))
    assert not lost and n == 4
    lost, why, _ = run(scenario(2.0))
    assert lost and why == "server lost"
    lost, why, _ = run(scenario(None))
    assert lost and why == "server lost"


def test_a_level_line_says_when_its_level_had_no_interval():
    """A level cut short before two batch windows (the demo's 10 s at C=32) has no throughput
    interval: its log line says so in words; it printed '+--%'."""
    from tuner.measure.metrics import LevelMetrics
    from tuner.run.levels import level_line
    from tuner.spec.configs import SpecConfig

    cfg = SpecConfig(3, 1, None, "NEXTN")
    short = level_line(cfg, 32, 1, 1, LevelMetrics(concurrency=32, requests=94, output_tok_s=1623.0))
    assert "1623 tok/s agg (no interval, 94 requests)" in short and "+-" not in short, short
    ok = level_line(cfg, 4, 1, 1, LevelMetrics(concurrency=4, requests=19, output_tok_s=552.0, precision_pct=1.3))
    assert "552 tok/s agg (+-1.3%, 19 requests)" in ok, ok
