"""Per-request and per-level metrics (tuner/measure/metrics.py) on hand-built traces."""

from __future__ import annotations

import pytest

from tuner.measure.metrics import (
    RequestTrace,
    accept_length,
    counter_delta,
    decode_rate,
    itl_samples_s,
    level_metrics,
    parse_prometheus_counters,
    tpot_s,
    ttft_s,
)
from tuner.measure.stats import percentile


def trace(index=0, sent=0.0, chunks=((0.1, 1), (0.2, 4), (0.3, 4), (0.4, 1)), verify=None, error=None, tokens=None):
    t = RequestTrace(index=index, sent=sent)
    for at, n in chunks:
        t.chunk_times.append(sent + at)
        t.chunk_tokens.append(n)
    t.output_tokens = tokens if tokens is not None else sum(n or 0 for _, n in chunks)
    t.spec_verify_ct = verify
    t.ended = sent + (chunks[-1][0] if chunks else 0.5)
    t.error = error
    return t


def test_percentile_matches_numpy_linear():
    np = pytest.importorskip("numpy")
    data = [5.0, 1.0, 9.0, 3.0, 7.5, 2.2]
    for q in (0, 10, 50, 90, 99, 100):
        assert percentile(data, q) == pytest.approx(float(np.percentile(data, q)))
    assert percentile([], 50) is None


def test_request_metrics():
    t = trace()
    assert ttft_s(t) == pytest.approx(0.1)
    # 10 tokens, 0.3 s after the first token: TPOT 0.3/9, decode rate 9/0.3 tokens/s
    assert tpot_s(t) == pytest.approx(0.3 / 9)
    assert decode_rate(t) == pytest.approx(30.0)


def test_itl_is_per_token_and_chunk_robust():
    t = trace()
    s = itl_samples_s(t)
    # gaps 0.1 s carrying 4, 4 and 1 tokens -> 4 x 0.025, 4 x 0.025, 1 x 0.1
    assert len(s) == 9
    assert sorted(s) == pytest.approx([0.025] * 8 + [0.1])
    assert sum(s) == pytest.approx(0.3)  # the decode time is fully accounted for


def test_a_chunk_without_tokens_keeps_the_gap_before_it():
    """One decode step split in two chunks (an empty delta): the gap before the empty chunk was
    dropped, so the samples summed to less than the decode time (79 of 80 ms here)."""
    t = trace(chunks=((0.1, 1), (0.12, 1), (0.14, 1), (0.141, 0), (0.16, 1), (0.18, 1)))
    s = itl_samples_s(t)
    assert s == pytest.approx([0.02] * 4)
    assert sum(s) == pytest.approx(0.18 - 0.1)


def test_itl_unknown_counts_spread_evenly():
    t = trace(chunks=((0.1, None), (0.2, None), (0.4, None)), tokens=9)
    s = itl_samples_s(t)
    # 9 tokens over 3 chunks: the first is the prefill's one, 4 each after it; gaps 0.1 and 0.2
    assert sorted(s) == pytest.approx([0.1 / 4] * 4 + [0.2 / 4] * 4)


def test_level_metrics_aggregate_and_failures():
    a = trace(0, sent=0.0, verify=3)
    b = trace(1, sent=0.5, verify=2)
    bad = trace(2, sent=0.2, chunks=((0.1, 1),), error="stream cut: no [DONE]")
    m = level_metrics(2, [a, b, bad])
    assert m.requests_ok == 2 and m.requests_failed == 1
    assert m.output_tokens == 20
    assert m.wall_s == pytest.approx(0.9)  # first send 0.0, last chunk 0.9
    assert m.output_tok_s == pytest.approx(20 / 0.9)
    assert m.per_request_tok_s == pytest.approx(30.0)
    assert m.accept_length == pytest.approx(20 / 5)
    assert m.accept_length_source == "meta_info"
    assert m.status == "partial"
    assert list(m.errors.values()) == [1]
    assert m.ttft_ms_p50 == pytest.approx(100.0)


def test_accept_length_fallbacks():
    ok = [trace(0), trace(1)]
    acc, src = accept_length(ok, {"generation_tokens": 100.0, "spec_verify_calls": 40.0})
    assert (acc, src) == (2.5, "metrics")
    acc, src = accept_length(ok, {})
    # 4 token-bearing chunks a request: the prefill's token, then 3 verify steps (10 tokens / 3)
    assert src == "chunks" and acc == pytest.approx(20 / 6)
    assert accept_length([], None) == (None, "none")


def test_a_one_token_answer_adds_its_token_and_no_verify_step():
    """SGLang omits spec_verify_ct for an answer the prefill finished (older releases send 0): it
    must not turn its level's acceptance into the chunk estimate nor drop its histogram."""
    long = [trace(i, verify=3) for i in range(3)]
    for t in long:
        t.accept_hist = [0, 1, 1, 1]
    one = trace(3, chunks=((0.1, 1),), verify=None)
    assert accept_length(long + [one], None) == (pytest.approx(31 / 9), "meta_info")
    m = level_metrics(4, long + [one])
    assert m.accept_length_source == "meta_info" and m.accept_length == pytest.approx(31 / 9)
    assert m.spec_verify_ct == 9 and m.accept_hist == [0, 3, 3, 3]
    # a level of one-token answers only: one token per chunk, no speculation seen
    assert accept_length([one], None) == (1.0, "chunks")
    # a server without speculation streams a token per chunk: 1.0, not N / (N - 1)
    plain = [trace(i, chunks=tuple((0.1 * j, 1) for j in range(1, 9))) for i in range(2)]
    assert accept_length(plain, None) == (1.0, "chunks")


def test_all_failed_level():
    m = level_metrics(4, [trace(0, error="HTTP 503: busy"), trace(1, error="HTTP 503: busy")])
    assert m.status == "failed" and m.output_tok_s is None and m.requests_failed == 2
    assert m.errors == {"HTTP 503: busy": 2}


def test_prometheus_counters_and_delta():
    text = """# HELP sglang:generation_tokens_total x
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1500.0
sglang:generation_tokens_total{model_name="m",tp_rank="1"} 500
sglang:spec_verify_calls_total{model_name="m"} 400
sglang:num_running_reqs{model_name="m"} 3
"""
    c = parse_prometheus_counters(text)
    assert c == {"generation_tokens": 2000.0, "spec_verify_calls": 400.0}
    d = counter_delta(c, {"generation_tokens": 2600.0, "spec_verify_calls": 550.0})
    assert d == {"generation_tokens": 600.0, "spec_verify_calls": 150.0}
    assert counter_delta(c, {"generation_tokens": 10.0}) == {}  # restarted in between
    assert counter_delta(None, c) == {}


def test_a_levels_acceptance_histogram_sums_its_requests_or_is_absent():
    from tuner.measure.metrics import sum_histograms

    # requests of one server can end at different depths of their histogram's length
    assert sum_histograms([[1, 2, 3], [4, 5], [0, 0, 0, 1]]) == [5, 7, 3, 1]
    # a request without one leaves the level without one: a partial sum would bias the positions
    assert sum_histograms([[1, 2], None]) is None
    assert sum_histograms([]) is None


def test_itl_without_per_chunk_counts_is_one_sample_per_token_summing_to_the_gaps():
    """A stream whose chunks carry no token count (an OpenAI endpoint without per-chunk usage): the
    first chunk is the prefill's one token, the rest is spread over the other chunks, and the ITL
    samples are one per token, summing to E2E - TTFT (docs/tuner.md "How the numbers are measured")."""
    from tuner.measure.metrics import chunk_token_counts, itl_samples_s

    t = RequestTrace(
        index=0, sent=0.9, chunk_times=[1.0, 1.1, 1.2, 1.3], chunk_tokens=[None] * 4, ended=1.3, output_tokens=10
    )
    assert chunk_token_counts(t) == [1.0, 3.0, 3.0, 3.0]
    s = itl_samples_s(t)
    assert len(s) == 9 and sum(s) == pytest.approx(0.3) and all(x == pytest.approx(0.1 / 3) for x in s)
    # a share that is not whole: whole tokens along the stream, every gap covered
    t = RequestTrace(
        index=0, sent=0.9, chunk_times=[1.0, 1.1, 1.2, 1.3, 1.4], chunk_tokens=[None] * 5, ended=1.4, output_tokens=8
    )
    s = itl_samples_s(t)
    assert len(s) == 7 and sum(s) == pytest.approx(0.4)
    # counts the server sent are used as they are
    t = RequestTrace(index=0, sent=0.9, chunk_times=[1.0, 1.1, 1.3], chunk_tokens=[1, 2, 4], ended=1.3, output_tokens=7)
    assert itl_samples_s(t) == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.05, 0.05])


def test_a_stream_in_flight_counts_its_chunks_of_unknown_count_as_a_token_each():
    """The precision loop reads the requests still streaming (tuner/measure/metrics.py
    `level_windows`); without per-chunk counts and before the total arrives, their chunks counted 0
    tokens: each carries text, so at least one."""
    from tuner.measure.metrics import chunk_token_counts, level_windows

    running = RequestTrace(index=1, sent=0.0, chunk_times=[0.5, 0.6, 0.7], chunk_tokens=[None] * 3)
    assert chunk_token_counts(running) == [1.0, 1.0, 1.0]
    done = RequestTrace(
        index=0, sent=0.0, chunk_times=[0.4, 1.0], chunk_tokens=[None, None], ended=1.0, output_tokens=5
    )
    assert sum(y for y, _ in level_windows([done], 1, [running])) == pytest.approx(5 + 3)
