"""The realism keys, measured through HTTP with the project's own client (docs/emulator.md).

Each test starts real emulator processes and reads only what a client of a real SGLang server
reads: streamed tokens, each request's `spec_accept_histogram` and `spec_verify_ct`, decode rates.
The expected values come from the profile files' numbers by the formulas docs/emulator.md states,
written out here, not from the emulator's code.

Tolerances: acceptance tests use a fixed --random-seed and thousands of verify steps (the standard
error of the mean accept length is under 0.7% of it, so 2% is three standard errors); rate tests
compare against the table in real time, where the emulator keeps step ends on absolute deadlines
(docs/emulator.md "The performance model"), so CPU load delays chunks but not the server's own
e2e latency; a level during which the emulator fell more than a second behind (its clock's
`lag_resets` in /server_info) is run again; the padding test compares levels run back to back on
one server.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from emu_client import hist_accept_length, per_request_accept_lengths, position_acceptance, run_level
from emu_testlib import spec_flags

DATA = Path(__file__).resolve().parent / "data" / "profiles"
ACCEPT = DATA / "realism-accept.yaml"
STEP = DATA / "realism-step.yaml"


def _yaml(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def _variant(tmp_path: Path, base: Path, **over: Any) -> Path:
    raw = {**_yaml(base), **over}
    out = tmp_path / f"{base.stem}-{abs(hash(repr(sorted(over.items())))) % 10**8}.yaml"
    out.write_text(yaml.safe_dump(raw))
    return out


def _expected_tau(alphas: list[float], k: int, topk: int = 1) -> float:
    """1 + sum_{j<=k} prod_{i<=j} a_i, positions past the list keeping its last value; with topk
    candidates per level a level is accepted when any of them is: 1 - (1 - a)^topk."""
    total = surv = 1.0
    for j in range(k):
        a = alphas[min(j, len(alphas) - 1)]
        surv *= 1.0 - (1.0 - a) ** topk
        total += surv
    return total


def _start(emulator, profile: Path, *flags: str):
    return emulator("--emulator-profile", str(profile), "--enable-metrics", "--random-seed", "11", *flags).wait_ready(
        60
    )  # seconds on a loaded machine


@pytest.mark.parametrize(("k", "tokens"), [(1, 128), (3, 320), (10, 640)])
def test_accept_length_per_depth_follows_acceptance_by_position(emulator, k, tokens):
    """k = 10 runs past both lists (8 positions at temperature 0, 4 at 1): the last value holds.
    `tokens` per request gives 2,000-4,500 verify steps per level, as deeper chains vary more."""
    table = _yaml(ACCEPT)["alpha_by_position"]
    # between the listed temperatures each position is interpolated (the lists padded with their last value)
    n = max(len(v) for v in table.values())
    table[0.5] = [(table[0.0][min(j, 7)] + table[1.0][min(j, 3)]) / 2 for j in range(n)]
    e = _start(emulator, ACCEPT, *spec_flags(k))
    for temp in (0.0, 0.5, 1.0) if k == 3 else (0.0, 1.0):
        traces, m = run_level(e.url, 32, 32, input_len=32, output_len=tokens, temperature=temp)
        assert m.requests_ok == 32, m.errors
        want = _expected_tau(table[temp], k)
        assert hist_accept_length(traces) == pytest.approx(want, rel=0.02), (temp, k)
        # the histograms SGLang returns give back each position's conditional acceptance
        got = position_acceptance(traces)
        assert len(got) == k
        for j, a in enumerate(got[:3]):
            assert a == pytest.approx(table[temp][min(j, len(table[temp]) - 1)], abs=0.03), (temp, j)
        # the tuner's own accept length (completion tokens / verify calls) agrees, within the bias
        # of the prefill's token and the last step's cut (about 1/steps per request)
        assert m.accept_length == pytest.approx(want, rel=0.05)


def test_acceptance_by_position_alone_in_a_json_profile_with_text_temperatures(emulator, tmp_path):
    """A profile that gives acceptance only by position (no `alpha`), written as JSON, whose keys are
    text ("0", "1.0"): the same acceptance length as the YAML profile's numeric keys; and a plain
    list, with no temperatures, holds at every temperature."""
    raw = {k: v for k, v in _yaml(ACCEPT).items() if k != "alpha"}
    table = raw["alpha_by_position"]
    path = tmp_path / "by-position.json"
    path.write_text(json.dumps({**raw, "alpha_by_position": {str(t): v for t, v in table.items()}}))
    e = _start(emulator, path, *spec_flags(3))
    for temp in (0.0, 1.0):
        traces, m = run_level(e.url, 32, 32, input_len=32, output_len=320, temperature=temp)
        assert m.requests_ok == 32, m.errors
        assert hist_accept_length(traces) == pytest.approx(_expected_tau(table[temp], 3), rel=0.02), temp
    e.terminate()

    flat = [0.85, 0.6]
    path = tmp_path / "by-position-flat.yaml"
    path.write_text(yaml.safe_dump({**_yaml(ACCEPT), "alpha_by_position": flat}))
    e = _start(emulator, path, *spec_flags(3))
    for temp in (0.0, 1.0):
        traces, m = run_level(e.url, 32, 32, input_len=32, output_len=320, temperature=temp)
        assert m.requests_ok == 32, m.errors
        assert hist_accept_length(traces) == pytest.approx(_expected_tau(flat, 3), rel=0.02), temp


def _tree_level(emulator, steps: int, draft_tokens: int) -> list[Any]:
    """A sampled level (32 requests at 32 in flight) on a tree of topk 2 of the acceptance profile."""
    flags = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", str(steps)]
    flags += ["--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", str(draft_tokens)]
    e = _start(emulator, ACCEPT, *flags)
    traces, m = run_level(e.url, 32, 32, input_len=32, output_len=320, temperature=1.0)
    assert m.requests_ok == 32, m.errors
    return traces


def test_topk_tree_accepts_a_level_when_any_candidate_matches(emulator):
    table = _yaml(ACCEPT)["alpha_by_position"]
    traces = _tree_level(emulator, 3, 6)
    assert hist_accept_length(traces) == pytest.approx(_expected_tau(table[1.0], 3, topk=2), rel=0.02)


def test_a_tree_never_accepts_more_tokens_a_pass_than_it_verifies(emulator):
    """Five levels of two candidates cut to 3 draft tokens: a pass accepts at most 3 tokens (two
    drafts and the bonus); it accepted up to six, an accept rate above 1."""
    table = _yaml(ACCEPT)["alpha_by_position"]
    traces = _tree_level(emulator, 5, 3)
    assert all(not any(t.accept_hist[3:]) for t in traces), [t.accept_hist for t in traces][:3]
    assert hist_accept_length(traces) == pytest.approx(_expected_tau(table[1.0], 2, topk=2), rel=0.02)


def test_per_request_spread_grows_with_alpha_spread_and_a_prompt_keeps_its_difficulty(emulator, tmp_path):
    sds, corrs = [], []
    for spread in (0.0, 0.6, 1.2):
        e = _start(emulator, _variant(tmp_path, ACCEPT, alpha_spread=spread), *spec_flags(4))
        # the client's prompts are fixed by their index: the second pass sends the same 48 prompts
        # (48, not 24: two unrelated passes of n prompts correlate by chance with sd 1/sqrt(n - 1),
        # and CI saw 0.504 with 24; with 48 the bound of 0.5 below is 3.4 sd away)
        first = per_request_accept_lengths(run_level(e.url, 48, 48, input_len=32, output_len=160)[0])
        again = per_request_accept_lengths(run_level(e.url, 48, 48, input_len=32, output_len=160)[0])
        assert sorted(first) == sorted(again) == list(range(48))
        xs, ys = [first[i] for i in range(48)], [again[i] for i in range(48)]
        sds.append(statistics.pstdev(xs))
        corrs.append(statistics.correlation(xs, ys))
        e.terminate()
    # without spread a request's accept length differs from another's by sampling alone
    # (about 1.3 / sqrt(42 verify steps) = 0.2), and a prompt's two passes do not agree
    assert sds[0] < sds[1] < sds[2] and sds[2] > 2.5 * sds[0], sds
    assert abs(corrs[0]) < 0.5 and corrs[2] > 0.8, corrs


def _fastest(
    first: float, measure: Callable[[], float], near: Callable[[float], bool], pick: Callable[..., float] = max
) -> float:
    """The fastest of up to three rounds of a rate (`pick` min: of a time), `first` the first round's,
    measured again only while it is not `near` what it must be: CPU load beside the test (the unit
    stage's other work) only ever slows a round, so the fastest is the one the load spared."""
    best = first
    for _ in range(2):
        if near(best):
            break
        best = pick(best, measure())
    return best


def _level_on_clock(e, concurrency: int, requests: int, **opts: Any):
    """run_level, again (up to 3 times) when the emulator fell behind its own clock by more than a
    second during it (its /server_info `emulator.clock.lag_resets` grew: the model's time was lost
    to CPU load, so that level's timing says nothing about the profile)."""
    for _ in range(3):
        before = e.get_json("/server_info")["emulator"]["clock"]["lag_resets"]
        traces, m = run_level(e.url, concurrency, requests, **opts)
        if e.get_json("/server_info")["emulator"]["clock"]["lag_resets"] == before:
            break
    return traces, m


def _server_rate(traces, average=statistics.fmean) -> float:
    """Average (mean, or the given one) of each request's tokens / the server's own e2e latency (`meta_info.e2e_latency`, which
    SGLang returns and the client keeps): the emulator's clock runs on absolute deadlines, so this
    holds under CPU load that delays the chunks on their way to the client. The prefill's few
    milliseconds are in it (under 0.2% of a request here)."""
    rates = [t.output_tokens / t.server_e2e_s for t in traces if t.ok and t.server_e2e_s]
    assert len(rates) == len(traces)
    return average(rates)


def test_no_speculation_decode_rate_at_concurrency_1_is_the_tables_first_cell(emulator):
    first_cell = _yaml(STEP)["step_time_ms"]["ms"][0][0]
    e = _start(emulator, STEP)
    # 600 tokens (3 s): a late wake-up of the loaded scheduler at a request's arrival (tens of ms)
    # stays well inside 2%
    traces, m = _level_on_clock(e, 1, 2, input_len=16, output_len=600)
    assert m.requests_ok == 2, m.errors
    # the fastest of up to three rounds here too: the server's own rate read 159 tok/s for 200 once
    # beside the unit stage's other work, a lag under the second that counts as a reset
    server = _fastest(
        _server_rate(traces),
        lambda: _server_rate(_level_on_clock(e, 1, 2, input_len=16, output_len=600)[0]),
        lambda r: abs(r / (1000.0 / first_cell) - 1.0) <= 0.02,
    )
    assert server == pytest.approx(1000.0 / first_cell, rel=0.02)
    # the client's own clock agrees (looser: CPU load on this machine delays chunks; it read 174 tok/s
    # for 200 once beside the unit stage's other work: the fastest of up to three rounds)
    client = _fastest(
        m.per_request_tok_s,
        lambda: _level_on_clock(e, 1, 2, input_len=16, output_len=600)[1].per_request_tok_s,
        lambda r: abs(r / (1000.0 / first_cell) - 1.0) <= 0.10,
    )
    assert client == pytest.approx(1000.0 / first_cell, rel=0.10)


def test_speculative_step_is_the_table_at_verify_width_plus_drafts_and_overhead(emulator):
    raw = _yaml(STEP)
    tab = raw["step_time_ms"]
    k = 3  # verify width 4: a column of the table, batch 1: its first row
    step_ms = tab["ms"][0][tab["tokens_per_request"].index(k + 1)] + k * tab["draft_ms"][0] + raw["spec_overhead_ms"]
    e = _start(emulator, STEP, *spec_flags(k))

    def round_ms() -> float:
        traces, m = _level_on_clock(e, 1, 2, input_len=16, output_len=1000)
        assert m.requests_ok == 2, m.errors
        assert hist_accept_length(traces) > 2.0
        # server time per verify step (the prefill's 2 ms aside), over ~300 steps (3 s) a request
        return statistics.fmean((t.server_e2e_s * 1000.0 - 2.2) / t.spec_verify_ct for t in traces if t.spec_verify_ct)

    # the quickest of up to three rounds: it read 9.3 ms for 7.6 once under the unit stage's load
    got = _fastest(round_ms(), round_ms, lambda ms: abs(ms / step_ms - 1.0) <= 0.03, pick=min)
    assert got == pytest.approx(step_ms, rel=0.03)


def test_a_batch_of_5_costs_what_a_batch_of_8_costs(emulator):
    tab = _yaml(STEP)["step_time_ms"]
    row = {b: tab["ms"][i][0] for i, b in enumerate(tab["batch"])}
    e = _start(emulator, STEP)
    # the server's first requests pay one-time costs on a loaded machine (the first wave measured
    # 3.3 times slow once, beside the unit stage's other work): a short request first, not measured
    run_level(e.url, 1, 1, input_len=16, output_len=8)
    rate: dict[int, float] = {}

    def padded_and_not() -> bool:
        return abs(rate[5] / rate[8] - 1.0) <= 0.05 and abs(rate[4] / rate[8] / (row[8] / row[4]) - 1.0) <= 0.05

    # A process starved of the CPU (the unit stage's other work beside it) runs its steps late: a
    # wave measured 1.7 and 3.3 times slow once each. Starving only ever slows a wave, so each rate
    # is the fastest of up to three rounds, measured again only while the ratios are off.
    for _ in range(3):
        for c in (4, 5, 8):
            # one wave of c requests sent together, long enough (3 s) that the spread of their starts
            # under CPU load (the first and the last run a few steps at a smaller batch) stays small; a
            # closed loop would refill the batch only as fast as the loaded client answers
            traces, m = _level_on_clock(e, c, c, input_len=16, output_len=300)
            assert m.requests_ok == c, m.errors
            rate[c] = max(rate.get(c, 0.0), _server_rate(traces))
        if padded_and_not():
            break
    # 5% holds a few steps at a smaller batch, while an unpadded 5 would run 29% faster than 8
    assert rate[5] / rate[8] == pytest.approx(1.0, rel=0.05)  # padded to the captured 8
    assert rate[4] / rate[8] == pytest.approx(row[8] / row[4], rel=0.05)  # 4 is captured: no padding
    # --cuda-graph-bs replaces the profile's list, as in SGLang: 5 is captured and costs T(5)
    e2 = _start(emulator, STEP, "--cuda-graph-bs", *[str(b) for b in range(1, 9)])
    t5 = row[4] + (row[8] - row[4]) * (5 - 4) / (8 - 4)  # linear between the table's rows

    def wave() -> float:
        return _server_rate(_level_on_clock(e2, 5, 5, input_len=16, output_len=300)[0])

    given = _fastest(wave(), wave, lambda r: abs(r / rate[8] / (row[8] / t5) - 1.0) <= 0.05)
    assert given / rate[8] == pytest.approx(row[8] / t5, rel=0.05)


def test_graphs_are_captured_up_to_the_request_pool_and_a_larger_batch_runs_without_one():
    """SGLang captures listed sizes only up to the request pool, adding the pool's own size when the
    list goes past it (cuda_graph_runner.py `get_batch_sizes_to_capture`): with the 48-request pool
    of speculation's default and a power-of-two list, a batch of 40 replays the graph of 48, not 64.
    A batch above the largest captured size runs without a graph, and says so (`can_run`)."""
    import random

    from tuner.emulator import model
    from tuner.emulator.engine import EngineSpec, Scheduler
    from tuner.emulator.profile import load_profile
    from tuner.emulator.request import Request

    listed = (1, 2, 4, 8, 16, 32, 64, 128)
    assert model.capture_sizes(listed, 48) == (1, 2, 4, 8, 16, 32, 48)
    assert model.padded_batch(40, model.capture_sizes(listed, 48), 48) == 48
    assert model.capture_sizes(listed, 200) == listed  # a pool above the list changes nothing
    assert model.capture_sizes(None, 48) is None

    def last_decode_line(running: int, graph_bs: tuple[int, ...] | None, exact: tuple[int, ...] | None) -> str:
        spec = EngineSpec(
            k=0,
            topk=1,
            verify_tokens=1,
            max_running_requests=200,
            max_total_num_tokens=800_000,
            chunked_prefill_size=65536,
            decode_log_interval=1,
            context_len=131072,
            cuda_graph_max_bs=200,
            cuda_graph_bs=graph_bs,
            cuda_graph_exact=exact,
        )
        lines: list[str] = []
        sched = Scheduler(load_profile(STEP), spec, random.Random(0), log=lines.append)
        for i in range(running):
            sched.submit(Request(f"r{i}", 100, 50, alpha=0.5), 0.0)
        t = 1.0
        for _ in range(4):
            batch = sched.next_batch(t)
            assert batch is not None
            t += batch.duration
            sched.finish_batch(batch, t)
        decode = [ln for ln in lines if ln.startswith("Decode batch")]
        assert decode and f"#running-req: {running}," in decode[-1], decode
        return decode[-1]

    assert "cuda graph: False" in last_decode_line(100, (1, 2, 4, 8, 16, 32, 64), None)
    assert "cuda graph: True" in last_decode_line(60, (1, 2, 4, 8, 16, 32, 64), None)
    # --disable-cuda-graph-padding: only a captured size replays a graph
    assert "cuda graph: False" in last_decode_line(60, None, (1, 2, 4, 8, 16, 32, 64))
    assert "cuda graph: True" in last_decode_line(64, None, (1, 2, 4, 8, 16, 32, 64))


def test_without_padding_a_profiles_graph_list_captures_every_size_up_to_its_largest(emulator, tmp_path):
    """The profile's `cuda_graph_bs` stands for SGLang's generated capture list; with
    `--disable-cuda-graph-padding` SGLang generates every size up to the largest instead (0.5.9
    server_args.py `_generate_cuda_graph_batch_sizes`), so a batch of 1 replays a graph although
    the profile lists only 2 and 6."""
    e = _start(emulator, _variant(tmp_path, STEP, cuda_graph_bs=[2, 6]), "--disable-cuda-graph-padding")
    assert e.post_json("/generate", {"text": "x", "sampling_params": {"max_new_tokens": 40}})[0] == 200
    decode = [ln for ln in e.log().splitlines() if "Decode batch" in ln and "#running-req: 1," in ln]
    assert decode and all("cuda graph: True" in ln for ln in decode), decode[-3:]


@pytest.mark.parametrize(
    ("flags", "listed"),
    [((), [2, 6, 16]), (("--disable-cuda-graph-padding",), list(range(1, 17)))],
    ids=["pad", "no-pad"],
)
def test_the_capture_list_the_server_pads_to_is_the_one_it_reports(emulator, tmp_path, flags, listed):
    """0.5.9-0.5.12's ServerArgs fills `cuda_graph_bs` with the list it generated (server_args.py
    `_generate_cuda_graph_batch_sizes`), which server_args= and /server_info show: the emulator
    padded to the profile's list, which stands for it, and reported None."""
    e = _start(emulator, _variant(tmp_path, STEP, cuda_graph_bs=[2, 6, 16]), *flags)
    assert e.get_json("/server_info")["cuda_graph_bs"] == listed
    assert f"cuda_graph_bs={listed}" in e.log()


def test_kv_read_grows_the_step_with_each_requests_context(emulator, tmp_path):
    """kv_read_ns_per_token adds its time for each KV token beyond the table's context_tokens (500 ns:
    the most the table allows, its batch of 32 reading 32 x 1024 tokens in its 18 ms)."""
    raw = _yaml(STEP)
    tab = {**raw["step_time_ms"], "kv_read_ns_per_token": 500.0, "context_tokens": 1024}
    e = _start(emulator, _variant(tmp_path, STEP, step_time_ms=tab))
    out = 150
    for prompt in (16, 3000):
        # decode step i (i = 1 .. out-1) runs with prompt + i tokens of KV
        kv = sum(prompt + i - tab["context_tokens"] for i in range(1, out))
        decode_ms = (out - 1) * tab["ms"][0][0] + 500.0 * kv * 1e-6
        prefill_ms = raw["t_prefill_base_ms"] + prompt * raw["t_prefill_tok_ms"]

        def round_ms(prompt: int = prompt) -> float:
            traces, m = _level_on_clock(e, 1, 2, input_len=prompt, output_len=out, input_ids=True)
            assert m.requests_ok == 2, m.errors
            return statistics.fmean(t.server_e2e_s * 1000.0 for t in traces)

        want = prefill_ms + decode_ms
        got_ms = _fastest(round_ms(), round_ms, lambda ms, want=want: abs(ms / want - 1.0) <= 0.02, pick=min)
        assert got_ms == pytest.approx(want, rel=0.02), prompt


# ---- bad input: a malformed key fails the start as a bad flag value does, naming the key ----------

_RAGGED = {"batch": [1, 4], "tokens_per_request": [1, 2], "ms": [[5.0, 5.1], [7.0]], "draft_ms": [0.5, 0.6]}
_BAD = [
    ({"step_time_ms": _RAGGED}, "step_time_ms.ms row for batch 4 must have 2 values"),
    ({"step_time_ms": {**_RAGGED, "ms": [[5.0, 5.1]]}}, "step_time_ms.ms must have one row per batch size"),
    ({"step_time_ms": {**_RAGGED, "batch": [4, 1], "ms": [[5, 5], [7, 7]]}}, "step_time_ms.batch must be strictly"),
    ({"step_time_ms": {**_RAGGED, "ms": [[5, -5], [7, 7]]}}, "step_time_ms.ms row for batch 1 has -5"),
    ({"step_time_ms": {**_RAGGED, "ms": [[5, 5], [7, 7]], "draft_ms": [0.5]}}, "step_time_ms.draft_ms"),
    ({"step_time_ms": {**_RAGGED, "ms": [[5, 5], [7, 7]], "kv_read_ns": 3}}, "step_time_ms has unknown key"),
    (
        {"step_time_ms": {**_RAGGED, "ms": [[5, 5], [7, 7]], "kv_read_ns_per_token": -30}},
        "step_time_ms.kv_read_ns_per_token",
    ),
    # named itself, not as the linear keys (t_draft_ms, ...) a table would have replaced
    ({"step_time_ms": "table"}, "step_time_ms must be a mapping"),
    ({"alpha_by_position": {0.0: [0.9, 1.0]}}, "alpha_by_position[0.0] position 2 is 1.0"),
    ({"alpha_by_position": {0.0: [0.0]}}, "an acceptance must be in (0, 1)"),
    ({"alpha_by_position": {0.0: []}}, "alpha_by_position[0.0] must be a non-empty list"),
    ({"alpha_spread": -0.2}, "alpha_spread must be a number >= 0"),
    ({"spec_overhead_ms": -1}, "spec_overhead_ms must be a number >= 0"),
    ({"cuda_graph_bs": [1, 8, 4]}, "cuda_graph_bs must be strictly increasing"),
    ({"t_draft_ms": -0.5}, "t_draft_ms must be a number >= 0"),
    ({"t_prefill_base_ms": -40}, "t_prefill_base_ms must be a number >= 0"),
    ({"gpu_mem_gb": "abc"}, "gpu_mem_gb must be a number, got 'abc'"),
    ({"alpha_by_position": {"hot": [0.9]}}, "alpha_by_position temperature 'hot' must be a number >= 0"),
    ({"alpha_by_position": {0: [0.9], "0.0": [0.8]}}, "alpha_by_position gives temperature 0.0 twice"),
    # the table's own keys may sit at the profile's top level, but not twice with two values
    (
        {"kv_read_ns_per_token": 20.0, "step_time_ms": {**_RAGGED, "ms": [[5, 5], [7, 7]], "kv_read_ns_per_token": 30}},
        "kv_read_ns_per_token is given twice with different values",
    ),
]


@pytest.mark.parametrize(("over", "message"), _BAD, ids=[m.split()[0] for _, m in _BAD])
def test_a_malformed_key_fails_the_start_naming_it(emulator, tmp_path, over, message):
    from sglang_utils.sglang_log import find_fatal  # type: ignore[import-not-found]

    e = emulator("--emulator-profile", str(_variant(tmp_path, STEP, **over)))
    assert e.wait_exit(60) == 2
    log = e.log()
    assert message in log, log
    assert "launch_server.py: error: argument --emulator-profile: emulator profile realism-step" in log
    fatal = find_fatal(log.splitlines())
    assert fatal is not None and fatal["kind"] == "bad_arguments" and message in fatal["reason"], fatal


@pytest.mark.parametrize(
    ("base", "real", "typo"),
    [
        # acceptance given only by position: the typo left `alpha` missing, and that was the message
        (ACCEPT, "alpha_by_position", "alpha_by_postion"),
        # a measured table in place of the linear terms: the typo left t_base_ms ... missing
        (STEP, "step_time_ms", "step_time_m"),
    ],
)
def test_a_misspelled_key_is_named_not_the_keys_it_leaves_missing(emulator, tmp_path, base, real, typo):
    raw = _yaml(base)
    if real == "alpha_by_position":
        del raw["alpha"]
    raw[typo] = raw.pop(real)
    path = tmp_path / f"{typo}.yaml"
    path.write_text(yaml.safe_dump(raw))
    e = emulator("--emulator-profile", str(path))
    assert e.wait_exit(60) == 2
    log = e.log()
    assert f"unknown key(s): {typo} (did you mean {real}?)" in log, log
    assert "missing key" not in log, log


def test_a_key_written_at_the_wrong_level_is_named_with_where_it_belongs():
    """A per-row `draft_ms` beside the table, not in it, was suggested as `t_draft_ms` (the look-alike)
    once suggestions came; a top-level key inside the table is named as one."""
    from tuner.emulator.profile import ProfileError, profile_from_mapping

    raw = _yaml(STEP)
    table = dict(raw["step_time_ms"])
    draft = table.pop("draft_ms")
    with pytest.raises(ProfileError, match=re.escape("unknown key(s): draft_ms (a key of step_time_ms)")):
        profile_from_mapping({**raw, "step_time_ms": table, "draft_ms": draft})
    inside = {**raw["step_time_ms"], "spec_overhead_ms": raw["spec_overhead_ms"]}
    with pytest.raises(
        ProfileError,
        match=re.escape("step_time_ms has unknown key(s): spec_overhead_ms (a key of the profile's top level)"),
    ):
        profile_from_mapping({k: v for k, v in raw.items() if k != "spec_overhead_ms"} | {"step_time_ms": inside})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("t_prefill_tok_ms", -0.1, "t_prefill_tok_ms must be a number >= 0"),
        ("t_request_overhead_ms", -5.0, "t_request_overhead_ms must be a number >= 0"),
        ("t_draft_quad_ms", -1.0, "t_draft_quad_ms must be a number >= 0"),
        ("t_step_extra_ms", {3: -60.0}, "t_step_extra_ms[3] must be a number >= 0, got -60.0"),
        ("t_step_extra_ms", {3: float("inf")}, "t_step_extra_ms[3] must be a number, got inf"),
        # each of these was a traceback (OverflowError) or loaded as another number
        ("t_step_extra_ms", {float("inf"): 1.0}, "t_step_extra_ms keys must be steps (whole numbers >= 0), got inf"),
        ("kv_tokens_measured", {1: float("inf")}, "kv_tokens_measured[1] must be a whole number, got inf"),
        ("kv_tokens_measured", {1: 1000.9}, "kv_tokens_measured[1] must be a whole number, got 1000.9"),
        ("kv_tokens_measured", {2: True}, "kv_tokens_measured[2] must be a whole number, got True"),
        ("kv_tokens_measured", {2: "5000"}, "kv_tokens_measured[2] must be a whole number, got '5000'"),
        ("kv_tokens_measured", {1.5: 5000}, "kv_tokens_measured keys must be steps (whole numbers >= 0), got 1.5"),
        ("kv_tokens_measured", {1: 5000, "1": 6000}, "kv_tokens_measured names steps 1 twice"),
        ("kv_tokens_measured", [5000], "kv_tokens_measured must map steps -> values"),
        ("alpha", {float("nan"): 0.9}, "alpha temperature nan must be a number >= 0"),
        ("alpha", {-1.0: 0.9, 0.0: 0.93}, "alpha temperature -1.0 must be a number >= 0"),
        ("alpha", {0.0: 0.93, "0": 0.5}, "alpha gives temperature 0.0 twice"),
        ("alpha", {0.0: "0.9"}, "alpha[0.0]='0.9'; an acceptance must be in (0, 1)"),
        ("faults", "kv-oom", "faults must be a list of fault names, got 'kv-oom'"),
        ("t_cross_node_ms", float("nan"), "t_cross_node_ms must be a number, got nan"),
        ("t_spec_ms", float("nan"), "t_spec_ms must be a number, got nan"),
        ("t_base_ms", float("inf"), "t_base_ms must be a number, got inf"),
        ("state_slots", -5, "state_slots must be a number >= 0"),
        ("kv_tokens_per_step", -5, "kv_tokens_per_step must be a whole number >= 0"),
        ("kv_tokens_measured", {1: -5}, "kv_tokens_measured[1] must be a whole number >= 0, got -5"),
        ("mem_fraction_static", 2.0, "mem_fraction_static must be in (0, 1]"),
        ("context_len", 0, "context_len must be a whole number >= 1"),
        ("chunked_prefill_size", 0, "chunked_prefill_size must be -1 (off) or >= 1"),
        ("tp_size", 2.5, "tp_size must be a whole number, got 2.5"),
        ("tp_size", "two", "tp_size must be a whole number, got 'two'"),
        ("alpha_max", "abc", "alpha_max must be a number, got 'abc'"),
        ("prompt_min_tokens", "abc", "prompt_min_tokens must be a whole number, got 'abc'"),
        ("alpha", {0.0: 0.0, 1.0: 0.5}, "alpha[0.0]=0.0; an acceptance must be in (0, 1)"),
        # a fault entry was refused by the launcher's fault parser, naming neither the profile nor the key
        ("faults", ["bogus"], "emulator profile inline: faults: 'bogus' is not one of"),
        ("faults", ["spec-diverge=-1"], "emulator profile inline: faults: spec-diverge=N needs a whole number"),
        # a repeat kept only its last value without a word (slow-startup adds up: allowed)
        ("faults", ["accept-drift=1", "accept-drift=5"], "faults: accept-drift given more than once"),
        # past 1e154 cv*cv is inf and every step time NaN
        ("noise_run_cv", 1e200, "noise_run_cv must be at most 10, got 1e+200"),
        ("noise_restart_cv", 11, "noise_restart_cv must be at most 10, got 11"),
    ],
)
def test_every_number_of_a_profile_is_finite_and_in_its_range(key, value, message):
    """A sign slip, a NaN or a word where a number belongs is refused naming the key: loaded, it
    would make a 0 ms step or a negative prefill (a machine faster than any GPU) or a traceback."""
    from tuner.emulator.profile import ProfileError, profile_from_mapping

    raw = {**_yaml(ACCEPT), key: value}
    with pytest.raises(ProfileError, match=re.escape(message)):
        profile_from_mapping(raw)
    assert profile_from_mapping({**_yaml(ACCEPT), "chunked_prefill_size": -1}).chunked_prefill_size == -1


def test_numbers_in_exponent_form_are_numbers(tmp_path):
    """PyYAML reads YAML 1.1, where 1e-3 and 5e-05 (json.dumps' form for small floats) are strings:
    a valid profile written that way failed as 'must be a number'. YAML 1.2 reads them as numbers."""
    from tuner.emulator.profile import load_profile

    text = ACCEPT.read_text() + "\nnoise_run_cv: 5e-05\nnoise_restart_cv: 1E-2\nt_request_overhead_ms: 1e0\n"
    path = tmp_path / "exp.yaml"
    path.write_text(text)
    p = load_profile(path)
    assert (p.noise_run_cv, p.noise_restart_cv, p.t_request_overhead_ms) == (5e-05, 0.01, 1.0)
    jpath = tmp_path / "exp.json"
    jpath.write_text(json.dumps({**_yaml(ACCEPT), "noise_run_cv": 0.00005}))
    assert load_profile(jpath).noise_run_cv == 5e-05


def test_a_kv_read_the_table_cannot_hold_is_refused_naming_the_key():
    """The table's step at batch B includes reading B x context_tokens of KV: a kv_read_ns_per_token
    that costs more than the cell would make a step at a short context cost nothing (0 ms: an
    unbounded decode rate)."""
    from tuner.emulator import model
    from tuner.emulator.profile import ProfileError, profile_from_mapping

    raw = _yaml(STEP)
    tab = {**raw["step_time_ms"], "kv_read_ns_per_token": 600.0, "context_tokens": 1024}
    with pytest.raises(ProfileError, match=r"step_time_ms.kv_read_ns_per_token: reading batch 32's KV"):
        profile_from_mapping({**raw, "step_time_ms": tab})
    p = profile_from_mapping({**raw, "step_time_ms": {**tab, "kv_read_ns_per_token": 500.0}})
    # past the table's last row (32) the cell is held at that row's time, which holds 32 reads: a
    # larger batch at a short context takes off no more than those (it ran at 0 ms)
    short = {b: model.step_time_ms(p, b, 0, kv_tokens=b * 100) for b in (32, 48, 64, 200)}
    assert short[32] > 0 and short[48] == short[64] == short[200] > 0


def test_zero_padded_numbers_are_decimal_and_yaml_11_forms_are_text(tmp_path):
    """YAML 1.2 reads `010` as 10 where PyYAML's YAML 1.1 read 8 (and `0400000` as 131072): a
    zero-padded count silently changed the machine. Base-60 `1:30` and `32_768` are text in 1.2:
    refused where a number goes, naming the key."""
    from tuner.emulator.profile import ProfileError, load_profile

    text = STEP.read_text()
    padded = text.replace("cuda_graph_bs: [1, 2, 4, 8, 16, 24, 32]", "cuda_graph_bs: [1, 2, 4, 010, 020, 030]")
    padded = padded.replace("kv_tokens_nospec: 400000", "kv_tokens_nospec: 0400000")
    path = tmp_path / "padded.yaml"
    path.write_text(padded.replace("startup_s: 0.2", "startup_s: 0o2"))
    p = load_profile(path)
    assert p.cuda_graph_bs == (1, 2, 4, 10, 20, 30) and p.kv_tokens_nospec == 400000 and p.startup_s == 2
    for old, new, key in (
        ("startup_s: 0.2", "startup_s: 1:30", "startup_s"),
        ("context_len: 32768", "context_len: 32_768", "context_len"),
    ):
        path.write_text(text.replace(old, new))
        with pytest.raises(ProfileError, match=key):
            load_profile(path)


def test_graph_sizes_stop_at_the_max_bs_and_a_given_list_sets_it():
    """SGLang generates its capture list only up to --cuda-graph-max-bs, and a given --cuda-graph-bs
    list sets the max to its largest size (server_args.py): a batch of 18 under a max of 20 runs
    without a graph, not padded to 24; a listed 320 is a graph size whatever the profile's max."""
    from tuner.emulator.__main__ import FaultSet, Runner, parse_flags, resolve
    from tuner.emulator.profile import load_profile

    profile = load_profile(STEP)
    listed = (1, 2, 4, 8, 12, 16, 24, 32)
    profile = dataclasses.replace(profile, cuda_graph_bs=listed, cuda_graph_max_bs=256)

    def runner(*flags: str) -> Runner:
        return Runner(resolve(parse_flags(["--model-path", "m", *flags]), profile), profile, FaultSet.from_list([]), 0)

    capped = runner("--cuda-graph-max-bs", "20")
    assert capped.graph_bs == (1, 2, 4, 8, 12, 16) and capped.graph_max_bs == 20
    from tuner.emulator import model

    assert model.padded_batch(18, capped.graph_bs, capped.graph_max_bs) == 18
    given = runner("--cuda-graph-bs", "1", "8", "256", "320", "--max-running-requests", "320")
    assert given.graph_max_bs == 320 and given.graph_bs == (1, 8, 256, 320)
    assert model.padded_batch(300, given.graph_bs, given.graph_max_bs) == 320
    assert runner().graph_bs == listed


def test_a_profile_list_past_256_without_a_max_keeps_its_sizes(tmp_path):
    """A profile's `cuda_graph_bs` describes the machine's captured sizes: listing sizes to 512
    (SGLang's max for H100/H200 at tp >= 4) without a `cuda_graph_max_bs` of its own pads a batch of
    300 to 384, not to nothing past the 256 default; a max the profile gives still cuts the list."""
    from tuner.emulator import model
    from tuner.emulator.__main__ import FaultSet, Runner, parse_flags, resolve
    from tuner.emulator.profile import load_profile

    base = _yaml(STEP)
    base.pop("cuda_graph_max_bs", None)
    long_list = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512]

    def runner_for(extra: dict, name: str) -> Runner:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**base, "cuda_graph_bs": long_list, **extra}), encoding="utf-8")
        p = load_profile(path)
        ns = parse_flags(["--model-path", "m", "--max-running-requests", "512"])
        return Runner(resolve(ns, p), p, FaultSet.from_list([]), 0)

    whole = runner_for({}, "whole")
    assert whole.graph_max_bs == 512 and whole.graph_bs == tuple(long_list)
    assert model.padded_batch(300, whole.graph_bs, whole.graph_max_bs) == 384
    cut = runner_for({"cuda_graph_max_bs": 256}, "cut")
    assert cut.graph_max_bs == 256 and max(cut.graph_bs) == 256
    assert model.padded_batch(300, cut.graph_bs, cut.graph_max_bs) == 300


def test_a_machine_that_cannot_hold_one_request_at_its_depth_fails_the_start(emulator, tmp_path):
    """A hybrid model whose state pool holds no request at depth 3 (12 - 3 x 4.4 < 1): SGLang's
    scheduler asserts a request pool of at least one; the start ends with that line and the gate
    reads a failed start, instead of a server that never gets ready (and once spun a core)."""
    from sglang_utils.sglang_log import find_fatal  # type: ignore[import-not-found]

    prof = _variant(tmp_path, ACCEPT, state_slots=12.0, state_slots_per_step=4.4)
    e = emulator("--emulator-profile", str(prof), *spec_flags(3))
    assert e.wait_exit(60) != 0
    log = e.log()
    assert "AssertionError: max_running_request is zero" in log, log[-2000:]
    fatal = find_fatal(log.splitlines())
    assert fatal is not None and "max_running_request is zero" in fatal["reason"], fatal


def test_profiles_without_the_keys_keep_the_linear_model():
    """A profile without the keys has none of them (their absence is today's emulator)."""
    from tuner.emulator.profile import load_profile

    p = load_profile()
    assert p.alpha_by_position is None and p.step_table is None and p.cuda_graph_bs is None
    assert p.alpha_spread == 0.0 and p.spec_overhead_ms == 0.0
    assert math.isclose(p.alphas_at(0.0, 3)[2], p.alpha_at(0.0))


def test_spec_overhead_without_a_table_adds_to_the_linear_speculative_step():
    """A profile may use any subset of the realism keys: `spec_overhead_ms` on the linear form is
    paid by every speculative step (an adaptive bucket at 0 steps included), not by a step without
    speculation (it was refused, and a profile of another machine written so could not start)."""
    from tuner.emulator import model
    from tuner.emulator.profile import load_profile, profile_from_mapping

    raw = {k: v for k, v in _yaml(Path(load_profile().path)).items() if k != "spec_overhead_ms"}
    plain, with_ovh = profile_from_mapping(raw), profile_from_mapping({**raw, "spec_overhead_ms": 1.5})
    for k in (1, 3):
        assert math.isclose(model.step_time_ms(with_ovh, 8, k), model.step_time_ms(plain, 8, k) + 1.5)
    assert math.isclose(model.step_time_ms(with_ovh, 8, 0, spec=True), model.step_time_ms(plain, 8, 0, spec=True) + 1.5)
    assert model.step_time_ms(with_ovh, 8, 0) == model.step_time_ms(plain, 8, 0)


def test_the_tables_context_keys_may_sit_at_the_top_level():
    """`context_tokens` and `kv_read_ns_per_token` describe the step table; a profile that writes them
    beside it (at its top level) gets the same table, and one without a table is refused."""
    from tuner.emulator.profile import ProfileError, profile_from_mapping

    raw = _yaml(STEP)
    inside = {**raw, "step_time_ms": {**raw["step_time_ms"], "kv_read_ns_per_token": 30.0, "context_tokens": 2048}}
    top = {**raw, "kv_read_ns_per_token": 30.0, "context_tokens": 2048}
    assert profile_from_mapping(top).step_table == profile_from_mapping(inside).step_table
    assert profile_from_mapping(top).step_table.kv_read_ns_per_token == 30.0
    linear = {k: v for k, v in _yaml(ACCEPT).items()}
    with pytest.raises(ProfileError, match="kv_read_ns_per_token describe the step_time_ms table"):
        profile_from_mapping({**linear, "kv_read_ns_per_token": 30.0})


def test_an_input_the_kv_pool_cannot_hold_is_refused_as_sglangs_scheduler_refuses_it(emulator, tmp_path):
    """A 3,000-token pool: /server_info says max_req_input_len 2994, and a 5,000-token input was
    served anyway (prefilled into the pool). SGLang's scheduler answers 400 (managers/utils.py
    validate_input_length) unless --allow-auto-truncate cuts the input to that length."""
    path = _variant(tmp_path, ACCEPT, kv_tokens_nospec=3000, kv_tokens_per_step=100)
    e = _start(emulator, path)
    # SGLang's tp_worker.py: min(context_len - 1, max_total_num_tokens - 1) - 5
    assert e.get_json("/server_info")["max_req_input_len"] == 2994
    status, out = e.post_json("/generate", {"input_ids": [7] * 5000, "sampling_params": {"max_new_tokens": 4}})
    assert status == 400, out
    assert "Input length (5000 tokens) exceeds the maximum allowed length (2994 tokens)" in json.dumps(out)
    # the scheduler's refusal, not the tokenizer's, is no error frame of the stream; streamed, the
    # emulator still answers 400 where SGLang streams the request's abort (left as it was)
    status, out = e.post_json(
        "/generate", {"input_ids": [7] * 5000, "sampling_params": {"max_new_tokens": 4}, "stream": True}
    )
    assert status == 400 and "exceeds the maximum allowed length" in json.dumps(out), out
    status, out = e.post_json("/generate", {"input_ids": [7] * 100, "sampling_params": {"max_new_tokens": 4}})
    assert status == 200 and out["meta_info"]["prompt_tokens"] == 100, out
    e.terminate()
    e = _start(emulator, path, "--allow-auto-truncate")
    status, out = e.post_json("/generate", {"input_ids": [7] * 5000, "sampling_params": {"max_new_tokens": 4}})
    assert status == 200 and out["meta_info"]["prompt_tokens"] == 2994, out


def test_a_profile_that_cannot_be_read_as_one_is_refused_naming_why(tmp_path):
    """A profile nested hundreds of levels deep ended the start with a RecursionError traceback, a
    `name:` that is no text named the profile `{'a': 'b'}` in /server_info, and an empty token list
    was called a list of batch sizes: each is refused as any bad key is, the key named."""
    from tuner.emulator.profile import (
        DEFAULT_PROFILE_NAME,
        PROFILE_DIR,
        ProfileError,
        load_profile,
        profile_from_mapping,
    )

    base = (PROFILE_DIR / DEFAULT_PROFILE_NAME).read_text()
    deep = tmp_path / "deep.yaml"
    deep.write_text(base + "alpha_by_position:\n  0.0: " + "[" * 600 + "0.9" + "]" * 600 + "\n")
    with pytest.raises(ProfileError, match="nests too deeply to read"):
        load_profile(deep)
    for name in ("{a: b}", "[1, 2]", "''"):
        named = tmp_path / "named.yaml"
        named.write_text(re.sub(r"(?m)^name:.*$", "", base) + f"name: {name}\n")
        with pytest.raises(ProfileError, match="name must be text"):
            load_profile(named)
    raw = _yaml(STEP)
    raw["step_time_ms"] = {**raw["step_time_ms"], "tokens_per_request": []}
    with pytest.raises(ProfileError, match="tokens_per_request must be a non-empty list of token counts"):
        profile_from_mapping(raw)
