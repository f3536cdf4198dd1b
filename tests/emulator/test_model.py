"""The timing model's math (docs/reference/performance-model.md) and the scheduler, in virtual time."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
import yaml
from sglang_utils import sglang_log

from tuner.emulator import model
from tuner.emulator.engine import DECODE, PREFILL, EngineSpec, Scheduler
from tuner.emulator.profile import ProfileError, load_profile, profile_from_mapping
from tuner.emulator.request import Request
from tuner.emulator.simulate import SpecSetting, closed_loop, engine_spec

P = load_profile()


@pytest.mark.parametrize("alpha", [0.0, 0.5, 0.8, 0.98, 0.999])
@pytest.mark.parametrize("k", [0, 1, 2, 3, 5])
def test_tau_is_the_mean_of_the_acceptance_distribution(alpha, k):
    pmf = model.accept_pmf(alpha, k)
    assert len(pmf) == k + 1 if k else len(pmf) == 1
    assert math.isclose(sum(pmf), 1.0, rel_tol=1e-12)
    mean = sum((j + 1) * p for j, p in enumerate(pmf))
    assert math.isclose(mean, model.tau(alpha, k), rel_tol=1e-12)
    if alpha:
        assert math.isclose(model.tau(alpha, k), (1 - alpha ** (k + 1)) / (1 - alpha), rel_tol=1e-12)


def test_tau_limits():
    assert model.tau(0.7, 0) == 1.0
    assert model.tau(1.0, 4) == 5.0
    assert model.tau(0.0, 4) == 1.0


@pytest.mark.parametrize("alpha,k", [(0.6, 3), (0.9, 4), (0.98, 2)])
def test_inverse_cdf_draws_follow_the_pmf(alpha, k):
    rng = random.Random(7)
    n = 200_000
    counts = [0] * (k + 1)
    for _ in range(n):
        counts[model.draw_accepted(rng.random(), alpha, k) - 1] += 1
    for got, want in zip(counts, model.accept_pmf(alpha, k), strict=False):
        assert abs(got / n - want) < 0.005
    assert abs(sum((i + 1) * c for i, c in enumerate(counts)) / n - model.tau(alpha, k)) < 0.01


def test_step_time_formulas():
    p = replace(P, t_base_ms=8.0, c_tok_ms=0.3, t_spec_ms=16.0, t_draft_ms=0.06, c_verify_ms=0.31)
    assert model.step_time_ms(p, 10, 0) == pytest.approx(8.0 + 0.3 * 10)
    assert model.step_time_ms(p, 10, 3) == pytest.approx(16.0 + 3 * 0.06 + 0.31 * 10 * 4)
    assert model.step_time_ms(p, 10, 3, verify_tokens=8) == pytest.approx(16.0 + 3 * 0.06 + 0.31 * 10 * 8)
    assert model.per_request_rate(p, 1, 2, 0.9) == pytest.approx(1000 * model.tau(0.9, 2) / model.step_time_ms(p, 1, 2))


def test_prefill_time_counts_chunks_and_tokens():
    p = replace(P, t_prefill_base_ms=20.0, t_prefill_tok_ms=0.05, chunked_prefill_size=8192)
    assert model.prefill_time_ms(p, 1000) == pytest.approx(20 + 50)
    assert model.prefill_time_ms(p, 10000) == pytest.approx(2 * 20 + 500)


def test_seed_capacity_matches_the_journal():
    # docs/reference/seed-campaign.md: 26/21/17/~13 running requests, 455,357/377,207/295,931 tokens
    expect = {1: (26, 455357), 2: (21, 377207), 3: (17, 295931)}
    for k, (mrr, kv) in expect.items():
        cap = model.capacity(P, k, 48, None)
        assert (cap.max_running_requests, cap.max_total_num_tokens) == (mrr, kv)
    assert model.capacity(P, 4, 48, None).max_running_requests == 13
    # the straight line beyond the measured depths
    assert model.max_total_num_tokens(P, 5) == P.kv_tokens_nospec - 5 * P.kv_tokens_per_step
    # deep enough and the pool is gone: the server must fail at start-up
    deepest_ok = max(k for k in range(0, 20) if model.max_total_num_tokens(P, k) > 0)
    assert model.max_total_num_tokens(P, deepest_ok + 1) <= 0


def test_max_running_requests_rule():
    p = replace(P, state_slots=30.6, state_slots_per_step=4.4)
    assert [model.state_slot_cap(p, k) for k in range(1, 5)] == [26, 21, 17, 13]  # 13.0 does not floor to 12
    assert model.max_running_requests(p, 1, None, 10**6) == 26
    assert model.max_running_requests(p, 1, 8, 10**6) == 8  # the flag binds
    assert model.max_running_requests(p, 1, None, 30) == 15  # max_total_num_tokens // 2 binds


def test_mem_fraction_moves_the_kv_pool():
    more = model.max_total_num_tokens(P, 2, P.mem_fraction_static + 0.01)
    base = model.max_total_num_tokens(P, 2, P.mem_fraction_static)
    assert more - base == pytest.approx(0.01 * P.gpu_mem_gb * 2**30 / P.kv_bytes_per_token, abs=1)
    assert model.max_total_num_tokens(P, 0, 0.3) <= 0  # too little static memory: no pool


def test_alpha_interpolates_between_temperatures():
    p = profile_from_mapping({**_raw(), "alpha": {0.0: 0.9, 1.0: 0.7}})
    assert p.alpha_at(0.0) == 0.9 and p.alpha_at(1.0) == 0.7 and p.alpha_at(2.0) == 0.7
    assert p.alpha_at(0.5) == pytest.approx(0.8)


def test_topk_widens_acceptance():
    assert model.effective_alpha(0.6, 1) == 0.6
    assert model.effective_alpha(0.6, 2) == pytest.approx(0.84)


def test_profile_validation_names_the_key():
    raw = _raw()
    del raw["c_verify_ms"]
    with pytest.raises(ProfileError, match="c_verify_ms"):
        profile_from_mapping(raw)
    with pytest.raises(ProfileError, match="alpha"):
        profile_from_mapping({**_raw(), "alpha": {0.0: 1.5}})


@pytest.mark.parametrize(
    "key,value",
    [
        # YAML reads a 400-digit literal as an int: float() overflowed, a traceback naming nothing
        ("spec_overhead_ms", 10**400),
        ("t_base_ms", 10**400),
        ("alpha", {10**400: 0.5}),
        # falsy values of the wrong type loaded as "no faults"
        ("faults", False),
        ("faults", ""),
        ("faults", {}),
        # served as text: a list or a mapping was served as its repr
        ("model_type", ["qwen3_5_moe"]),
        ("draft_model_architecture", {"a": 1}),
        ("sglang_version", 0.6),
    ],
)
def test_a_malformed_value_is_refused_naming_its_key(key, value):
    with pytest.raises(ProfileError, match=key):
        profile_from_mapping({**_raw(), key: value})


def test_whole_numbers_written_as_floats_are_counts_and_fractions_are_refused():
    """YAML 1.2 reads `1.2e6` as a float and JSON tools write `32768.0`: a count so written is the
    count, for every count key alike (the optional ones took it, the required ones refused it)."""
    p = profile_from_mapping(
        {
            **_raw(),
            "context_len": 4096.0,
            "kv_tokens_nospec": 1.2e5,
            "cuda_graph_bs": [1.0, 2.0, 8.0],
            "step_time_ms": {"batch": [1.0, 8.0], "tokens_per_request": [1, 2], "ms": [[5, 6], [7, 9]]},
        }
    )
    assert (p.context_len, p.kv_tokens_nospec) == (4096, 120000)
    assert isinstance(p.context_len, int) and isinstance(p.kv_tokens_nospec, int)
    assert p.cuda_graph_bs == (1, 2, 8) and p.step_table is not None and p.step_table.batch == (1, 8)
    for key, value in (("context_len", 4096.5), ("kv_tokens_per_step", 0.25), ("cuda_graph_bs", [1, 2.5])):
        with pytest.raises(ProfileError, match=key):
            profile_from_mapping({**_raw(), key: value})


def test_a_trees_draft_steps_cost_batch_times_topk_rows():
    """SGLang's draft forwards run every branch of a tree (spec_utils.py `select_top_k_tokens`): with a
    measured draft-step row per batch, a topk-4 tree at batch 8 drafts at the batch-32 cost."""
    table = {"batch": [8, 32], "tokens_per_request": [1, 8], "ms": [[5, 9], [7, 20]], "draft_ms": [0.4, 1.0]}
    p = profile_from_mapping({**_raw(), "step_time_ms": table})
    chain = model.step_time_ms(p, 8, 3, 8)
    tree = model.step_time_ms(p, 8, 3, 8, topk=4)
    assert tree - chain == pytest.approx(3 * (1.0 - 0.4))
    assert model.step_time_ms(p, 8, 3, 8, topk=1) == chain


def test_a_profile_that_is_not_utf8_is_refused_naming_the_file(tmp_path):
    """One Latin-1 byte (a `µs` in a comment) ended the start with a UnicodeDecodeError traceback."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"# step times in \xb5s\n" + yaml.safe_dump(_raw()).encode())
    with pytest.raises(ProfileError, match=r"latin1.yaml is not UTF-8 text \(byte 0xb5 at offset 16\)"):
        load_profile(path)


def _raw() -> dict:
    return {
        "served_model_name": "m",
        "model_architecture": "X",
        "hybrid_mamba": False,
        "context_len": 4096,
        "alpha": {0.0: 0.9},
        "t_base_ms": 5.0,
        "c_tok_ms": 0.1,
        "t_spec_ms": 8.0,
        "t_draft_ms": 0.1,
        "c_verify_ms": 0.1,
        "t_prefill_base_ms": 1.0,
        "t_prefill_tok_ms": 0.01,
        "kv_tokens_nospec": 100000,
        "kv_tokens_per_step": 1000,
        "state_slots": 64,
        "state_slots_per_step": 0,
        "startup_s": 1,
    }


# ---- the scheduler ---------------------------------------------------------------------------------


def _spec(**kw) -> EngineSpec:
    base = dict(
        k=2,
        topk=1,
        verify_tokens=3,
        max_running_requests=4,
        max_total_num_tokens=100_000,
        chunked_prefill_size=8192,
        decode_log_interval=40,
        context_len=4096,
        state_slot_cap=4,
    )
    base.update(kw)
    return EngineSpec(**base)


def _run_until_idle(s: Scheduler, t: float = 0.0, limit: int = 100_000) -> float:
    for _ in range(limit):
        b = s.next_batch(t)
        if b is None:
            nxt = s.next_event_time()
            if nxt is None:
                return t
            t = max(t, nxt)
            continue
        t += b.duration
        s.finish_batch(b, t)
    raise AssertionError("did not go idle")


def test_admission_respects_max_running_and_fifo():
    p = replace(P, t_request_overhead_ms=0.0)
    s = Scheduler(p, _spec(max_running_requests=3), random.Random(1))
    reqs = [Request(f"r{i}", 10, 50, alpha=0.9) for i in range(7)]
    for r in reqs:
        s.submit(r, 0.0)
    b = s.next_batch(0.0)
    assert b.kind == PREFILL and [r.rid for r in b.reqs] == ["r0", "r1", "r2"]
    s.finish_batch(b, b.duration)
    assert s.num_running == 3 and s.num_waiting == 4
    t = b.duration
    seen_max = 0
    order = []
    while not s.idle():
        b = s.next_batch(t)
        t += b.duration
        if b.kind == PREFILL:
            order += [r.rid for r in b.reqs]
        s.finish_batch(b, t)
        seen_max = max(seen_max, s.num_running)
    assert seen_max <= 3
    assert order == ["r3", "r4", "r5", "r6"]  # first come, first served
    assert all(r.generated == 50 and r.finish_reason == "length" for r in reqs)


def test_admission_waits_for_kv_room():
    p = replace(P, t_request_overhead_ms=0.0, clip_max_new_tokens=4096)
    s = Scheduler(p, _spec(max_running_requests=10, max_total_num_tokens=250), random.Random(1))
    a, b_ = Request("a", 50, 100, alpha=0.9), Request("b", 50, 100, alpha=0.9)
    s.submit(a, 0.0)
    s.submit(b_, 0.0)
    batch = s.next_batch(0.0)
    assert [r.rid for r in batch.reqs] == ["a"]  # 150 + 150 > 250: b waits for a's tokens
    _run_until_idle(s)
    assert a.finished_at <= b_.first_token_at


def test_prefill_yields_the_first_token_and_decode_emits_chunks():
    p = replace(P, t_request_overhead_ms=0.0)
    s = Scheduler(p, _spec(k=3, verify_tokens=4), random.Random(3))
    r = Request("x", 100, 200, alpha=0.7)
    chunks: list[int] = []
    last = [0]

    def note(req: Request) -> None:
        chunks.append(req.generated - last[0])
        last[0] = req.generated

    r.notify = note
    s.submit(r, 0.0)
    b = s.next_batch(0.0)
    assert b.kind == PREFILL
    assert b.duration == pytest.approx(model.prefill_time_ms(p, 100) / 1000)
    s.finish_batch(b, b.duration)
    assert r.generated == 1 and chunks == [1]
    b = s.next_batch(b.duration)
    assert b.kind == DECODE and b.duration == pytest.approx(model.step_time_ms(p, 1, 3) / 1000)
    _run_until_idle(s)
    assert sum(chunks) == 200 and max(chunks) <= 4 and min(chunks) >= 1
    assert r.verify_ct == len(chunks) - 1
    assert sum(r.hist) == r.verify_ct
    # every chunk but the (possibly truncated) last one is a full draw from the distribution
    assert r.accepted_drafts == sum(i * c for i, c in enumerate(r.hist))


def test_natural_stop_before_max_tokens():
    p = replace(P, t_request_overhead_ms=0.0)
    s = Scheduler(p, _spec(), random.Random(3))
    r = Request("x", 10, 500, alpha=0.9, stop_at=37)
    s.submit(r, 0.0)
    _run_until_idle(s)
    assert r.generated == 37 and r.finish_reason == "stop"


def test_decode_log_window_reports_accept_length():
    p = replace(P, t_request_overhead_ms=0.0)
    lines: list[str] = []
    s = Scheduler(p, _spec(k=3, verify_tokens=4, decode_log_interval=10), random.Random(5), log=lines.append)
    for i in range(3):
        s.submit(Request(f"r{i}", 20, 400, alpha=0.8), 0.0)
    _run_until_idle(s)
    decode = [ln for ln in lines if ln.startswith("Decode batch")]
    assert decode and all("accept len: " in ln and "accept rate: " in ln for ln in decode)
    assert s.avg_spec_accept_length() == pytest.approx(model.tau(0.8, 3), rel=0.05)


def test_virtual_closed_loop_matches_the_formula_at_concurrency_one():
    """C=1: each request takes overhead + prefill + decode steps of t(1,k), tau tokens each."""
    p = replace(P, t_request_overhead_ms=10.0)
    k = 3
    alpha = p.alpha_at(0.0)
    res = closed_loop(p, SpecSetting(k), concurrency=1, n_requests=4, input_len=256, output_len=1000, seed=1)
    expected_rate = model.per_request_rate(p, 1, k, alpha)
    assert res.per_request_tok_s == pytest.approx(expected_rate, rel=0.02)
    ttft = 0.010 + model.prefill_time_ms(p, 256) / 1000
    assert res.ttft_s_p50 == pytest.approx(ttft, rel=1e-6)
    assert res.output_tokens == 4000
    assert res.accept_length == pytest.approx(model.tau(alpha, k), rel=0.02)


def test_virtual_closed_loop_queues_beyond_max_running_requests():
    res = closed_loop(
        P, SpecSetting(3), concurrency=64, n_requests=64, input_len=64, output_len=200, seed=2, keep_records=True
    )
    assert res.max_running_requests == 17
    first = sorted(r.first_token for r in res.records)
    # only 17 start at once; the rest wait for a slot
    assert first[16] < first[17] and first[17] > min(r.finished for r in res.records) - 1e-9


def test_engine_spec_applies_the_48_default_and_fails_when_the_pool_is_gone():
    wide = replace(P, state_slots=200.0, state_slots_per_step=0.0)
    assert engine_spec(wide, SpecSetting(1)).max_running_requests == 48
    assert engine_spec(wide, SpecSetting(1, mrr_flag=100)).max_running_requests == 100
    with pytest.raises(ValueError):
        engine_spec(P, SpecSetting(12))


def test_engine_spec_captures_graphs_as_the_server_does():
    """The virtual-time simulator cuts the profile's CUDA-graph list at its max batch size as the
    server does (runner.py): with a max of 32, a batch of 13 pads to 40 nowhere; and a depth whose
    state pool holds no request fails as the server's start does, where the simulation stalled."""
    p = replace(P, cuda_graph_bs=(4, 12, 40), cuda_graph_max_bs=32, state_slots=200.0, state_slots_per_step=0.0)
    spec = engine_spec(p, SpecSetting(0, mrr_flag=100))
    assert spec.cuda_graph_bs == (4, 12) and spec.cuda_graph_max_bs == 32
    assert model.step_time_ms(p, 13, 0, graph_bs=spec.cuda_graph_bs, graph_max_bs=32) == model.step_time_ms(p, 13, 0)
    given = engine_spec(p, SpecSetting(0, mrr_flag=100, graph_bs=(8, 64)))
    assert given.cuda_graph_bs == (8, 64) and given.cuda_graph_max_bs == 64
    tight = replace(
        P,
        hybrid_mamba=True,
        state_slots=40.5,
        state_slots_per_step=5.0,
        kv_tokens_measured={},
        kv_tokens_nospec=120000,
        kv_tokens_per_step=14000,
    )
    assert model.capacity(tight, 8, 48, None).max_running_requests == 0
    with pytest.raises(ValueError, match="max_running_request is zero"):
        engine_spec(tight, SpecSetting(8))


def test_a_late_event_loop_never_starts_a_request_before_it_arrived():
    """The real-time driver dates a batch from the last one's end (the virtual clock) while the loop
    is less than a second late; the batch is formed at that time too. Formed at the wall time, a
    request that arrived while the loop was held went into a batch that started before it existed
    (a negative time to first token, its request overhead skipped)."""
    import asyncio
    import time

    from tuner.emulator import simulate
    from tuner.emulator.realtime import RealtimeDriver

    p = load_profile()
    s = Scheduler(p, simulate.engine_spec(p, simulate.SpecSetting(k=0)), random.Random(0))

    async def run() -> Request:
        loop = asyncio.get_running_loop()
        d = RealtimeDriver(s)
        d.start()
        d.submit(Request("r0", 100, 2000, alpha=0.0))
        await asyncio.sleep(0.3)  # r0 decoding, a step every few ms
        late: list[Request] = []

        def hold_then_submit() -> None:
            time.sleep(0.15)  # other work holds the loop past the step's end
            late.append(Request("r1", 10, 4, alpha=0.0))
            d.submit(late[0])
            time.sleep(0.15)

        loop.call_soon(hold_then_submit)
        await asyncio.sleep(0.8)
        await d.stop()
        return late[0]

    r1 = asyncio.run(run())
    assert r1.first_token_at is not None
    overhead = p.t_request_overhead_ms / 1000
    assert r1.first_token_at - r1.arrival >= overhead, (r1.arrival, r1.first_token_at)


def test_the_step_that_finishes_a_request_counts_only_its_tokens():
    """SGLang cuts a finishing request's accepted path at its last token and recounts the accept
    length: on short outputs the reported acceptance is the tokens each verify step produced, not
    the draws (16-token outputs at depth 4 read 9% high)."""
    from tuner.emulator import simulate

    p = load_profile()
    st = simulate.SpecSetting(k=4)
    s = Scheduler(p, simulate.engine_spec(p, st, decode_log_interval=1), random.Random(1))
    r = simulate.closed_loop(
        p, st, concurrency=8, n_requests=200, input_len=200, output_len=16, alpha=0.9, scheduler=s, keep_records=True
    )
    decoded = sum(x.output_tokens - 1 for x in r.records)  # the prefill's first token is no verify's
    verifies = sum(x.verify_ct for x in r.records)
    assert s.avg_spec_accept_length() == pytest.approx(decoded / verifies, rel=1e-9)


@pytest.mark.parametrize(
    "version,counted", [("0.5.9", "previous"), ("0.5.10", "previous"), ("0.5.11", "this"), ("0.5.23", "this")]
)
def test_prefill_line_input_throughput_counts_the_batch_its_release_counts(version, counted):
    """`input throughput` of the Prefill batch line: 0.5.9/0.5.10 divide the tokens of the prefill
    logged before by the gap since that log (`log_prefill_stats`: last_prefill_tokens / gap_latency),
    0.5.11+ this batch's own tokens. Each is logged when its batch ends (process_batch_result_prefill),
    so a 60-token prefill at 0 s, then a 6000-token one at 1 s, are logged 1 s + the second's forward
    - the first's apart: 60 tokens over that on 0.5.9 (the earlier batch), 6000 on 0.5.11+."""
    from tuner.emulator import versions

    lines: list[str] = []
    p = replace(P, t_request_overhead_ms=0.0)
    facts = versions.get(version)
    spec = _spec(input_throughput=facts.input_throughput, prefill_line=facts.prefill_line)
    s = Scheduler(p, spec, random.Random(1), log=lines.append)
    s.submit(Request("a", 60, 2, alpha=0.9), 0.0)
    s.finish_batch(a := s.next_batch(0.0), a.duration)
    s.submit(Request("b", 6000, 2, alpha=0.9), 1.0)
    b = s.next_batch(1.0)
    assert sglang_log.parse_prefill_batches(lines)[-1]["new_token"] == 60  # not logged before its forward
    s.finish_batch(b, 1.0 + b.duration)
    prefill = sglang_log.parse_prefill_batches(lines)
    gap = 1.0 + b.duration - a.duration
    assert [row["input_throughput"] for row in prefill] == [
        0.0,
        pytest.approx((60.0 if counted == "previous" else 6000.0) / gap, rel=1e-3),
    ]


def _decode_queue(lines: list[str]) -> int:
    """`#queue-req` of the last `Decode batch` line (the field ends the line in every release)."""
    last = [ln for ln in lines if ln.startswith("Decode batch")][-1]
    return int(last.rsplit("#queue-req: ", 1)[1])


def test_queue_req_is_the_queue_the_batch_was_formed_with_not_the_arrivals_during_its_forward():
    """`#queue-req` and num_queue_reqs are `len(self.waiting_queue)` read after the forward, in
    process_batch_result (0.5.9 scheduler_metrics_mixin.py log_prefill_stats/log_decode_stats,
    0.5.23 metrics_reporter.py), before the loop's next recv_requests (event_loop_normal): a request
    that arrives during a batch's forward is not in it. The emulator read its queue at the batch's
    end, arrivals included. Here: r0 decodes alone (a pool of one request), r1 arrives during a
    prefill and during a decode step; each of those lines says 0, the next step's says 1."""
    lines: list[str] = []
    p = replace(P, t_request_overhead_ms=0.0)
    spec = _spec(k=0, verify_tokens=1, max_running_requests=1, decode_log_interval=1)
    s = Scheduler(p, spec, random.Random(1), log=lines.append)
    s.submit(Request("r0", 500, 50, alpha=0.0), 0.0)
    b = s.next_batch(0.0)
    s.submit(Request("r1", 20, 2, alpha=0.0), b.duration / 2)  # during r0's prefill
    s.finish_batch(b, b.duration)
    assert sglang_log.parse_prefill_batches(lines)[-1]["queue_req"] == 0
    assert s.gauges["num_queue_reqs"] == 0
    t = b.duration
    d1 = s.next_batch(t)  # r1 waits: the pool holds one request
    assert d1.kind == DECODE
    s.finish_batch(d1, t + d1.duration)
    assert _decode_queue(lines) == 1
    assert s.gauges["num_queue_reqs"] == 1

    lines.clear()
    s2 = Scheduler(p, spec, random.Random(1), log=lines.append)
    s2.submit(Request("r0", 20, 50, alpha=0.0), 0.0)
    b = s2.next_batch(0.0)
    s2.finish_batch(b, b.duration)
    d1 = s2.next_batch(b.duration)
    s2.submit(Request("r1", 20, 2, alpha=0.0), b.duration + d1.duration / 2)  # during a decode step
    s2.finish_batch(d1, b.duration + d1.duration)
    assert _decode_queue(lines) == 0
    assert s2.gauges["num_queue_reqs"] == 0


def test_a_request_still_in_the_tokenizer_is_not_in_the_queue():
    """A request submitted but not past its request overhead (tokenizing, on its way to the
    scheduler: `ready_at`) is not in SGLang's waiting_queue yet, so not in `#queue-req`."""
    lines: list[str] = []
    p = replace(P, t_request_overhead_ms=50.0)
    s = Scheduler(p, _spec(k=0, verify_tokens=1, decode_log_interval=1), random.Random(1), log=lines.append)
    s.submit(Request("r0", 20, 50, alpha=0.0), 0.0)
    b = s.next_batch(0.05)
    s.submit(Request("r1", 20, 2, alpha=0.0), 0.05)  # ready at 0.1 s, after the batch is formed
    s.finish_batch(b, 0.05 + b.duration)
    assert sglang_log.parse_prefill_batches(lines)[-1]["queue_req"] == 0


@pytest.mark.parametrize("server_chunk,chunks", [(1000, 10), (8192, 2), (-1, 1)])
def test_prefill_is_cut_by_the_servers_chunked_prefill_size(server_chunk, chunks):
    """A long input is prefilled in chunks of the server's `--chunked-prefill-size` (SGLang's
    `PrefillAdder.add_one_req` truncates it to the remaining chunk budget; -1 turns chunking off),
    each chunk one forward with its fixed cost: not in chunks of the profile's default for the flag."""
    p = replace(P, t_prefill_base_ms=20.0, t_prefill_tok_ms=0.05, chunked_prefill_size=8192, t_request_overhead_ms=0.0)
    s = Scheduler(p, _spec(chunked_prefill_size=server_chunk), random.Random(1))
    long = Request("long", 10_000, 2, alpha=0.9)
    s.submit(long, 0.0)
    t, durations = 0.0, []
    while long.first_token_at < 0:
        b = s.next_batch(t)
        assert b.kind == PREFILL
        durations.append(b.duration)
        t += b.duration
        s.finish_batch(b, t)
    assert len(durations) == chunks
    assert sum(durations) == pytest.approx((chunks * 20.0 + 10_000 * 0.05) / 1000)
